//! The registry of the `olm dev up` environment: plain HTTP on `127.0.0.1:<base+500>`,
//! storage under the state directory (`registry/`), log in `logs/registry.log` and pid in
//! `pids/registry.pid`. Like the control plane it outlives the `olm` that started it, until
//! [`stop_dev_registry`] (`olm dev down`).

use std::path::PathBuf;

use super::{Placement, RegistryOptions, RegistryServer, probe_v2};
use crate::error::{DevError, Result};
use crate::layout::{Layout, create_dir_all};
use crate::process::{ProcessState, lock_state, process_runs, read_pid, stop_pid};
use crate::run::{Progress, shell_quote};

/// Its name in pid and log files and in messages.
pub const DEV_REGISTRY_NAME: &str = "registry";

/// Result of [`ensure_dev_registry`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DevRegistry {
    /// `127.0.0.1:<port>`.
    pub addr: String,
    pub pid: u32,
    /// It was running and healthy; nothing was started.
    pub already_running: bool,
}

/// What runs now, without changing anything.
#[derive(Debug, Clone)]
pub struct RegistryStatus {
    /// `127.0.0.1:<port>`.
    pub addr: String,
    pub pid: Option<u32>,
    pub state: ProcessState,
    pub healthy: bool,
    /// Health-check result or the reason it is not healthy.
    pub detail: String,
    pub log: PathBuf,
}

impl RegistryStatus {
    /// One line, in the columns of the control plane's status table.
    pub fn render(&self) -> String {
        let state = match self.state {
            ProcessState::NotStarted => "stopped",
            ProcessState::Running => "running",
            ProcessState::Gone => "gone",
        };
        let health = if self.healthy {
            format!("healthy ({}) on {}", self.detail, self.addr)
        } else {
            format!("not healthy: {}", self.detail)
        };
        let pid = self
            .pid
            .map(|p| p.to_string())
            .unwrap_or_else(|| "-".into());
        let port = self.addr.rsplit(':').next().unwrap_or("-");
        format!("{DEV_REGISTRY_NAME:<24} {pid:>8} {port:>6}  {state:<8} {health}\n")
    }
}

fn addr(layout: &Layout) -> String {
    format!("127.0.0.1:{}", layout.host_ports.registry)
}

/// Whether the recorded registry runs and answers `GET /v2/`.
pub fn dev_registry_status(layout: &Layout) -> Result<RegistryStatus> {
    let pid = read_pid(&layout.pid_file(DEV_REGISTRY_NAME))?;
    let state = match pid {
        None => ProcessState::NotStarted,
        Some(pid) if process_runs(pid, &layout.registry()) => ProcessState::Running,
        Some(_) => ProcessState::Gone,
    };
    let (healthy, detail) = if state == ProcessState::Running {
        probe_v2(layout.host_ports.registry, None, false)
    } else {
        (false, "not running".into())
    };
    Ok(RegistryStatus {
        addr: addr(layout),
        pid,
        state,
        healthy,
        detail,
        log: layout.log_file(DEV_REGISTRY_NAME),
    })
}

/// Starts the environment's registry unless it already runs and is healthy (one that runs
/// but does not answer is restarted). The registry binary must be built ([`crate::ensure_built`]).
pub fn ensure_dev_registry(layout: &Layout, progress: &Progress) -> Result<DevRegistry> {
    let _lock = lock_state(layout, progress)?;
    let current = dev_registry_status(layout)?;
    if let (true, Some(pid)) = (current.healthy, current.pid) {
        return Ok(DevRegistry {
            addr: current.addr,
            pid,
            already_running: true,
        });
    }
    if let (ProcessState::Running, Some(pid)) = (&current.state, current.pid) {
        progress.say(format!(
            "{DEV_REGISTRY_NAME} (pid {pid}) runs but is not healthy ({}); restarting it",
            current.detail
        ));
        stop_pid(DEV_REGISTRY_NAME, pid, &layout.registry())?;
    }
    for dir in [layout.logs_dir(), layout.pids_dir()] {
        create_dir_all(&dir)?;
    }
    let placement = Placement {
        log: layout.log_file(DEV_REGISTRY_NAME),
        pid_file: Some(layout.pid_file(DEV_REGISTRY_NAME)),
        own_group: true,
    };
    let options = RegistryOptions::new().port(layout.host_ports.registry);
    let server = RegistryServer::start_placed(layout, &layout.registry_dir(), options, placement)?;
    let addr = server.addr().to_string();
    Ok(DevRegistry {
        addr,
        pid: server.detach(),
        already_running: false,
    })
}

/// Stops the recorded registry (only if that pid still runs the registry binary) and removes
/// its pid file; with `purge` also deletes its storage. Returns the pid it stopped.
pub fn stop_dev_registry(layout: &Layout, progress: &Progress, purge: bool) -> Result<Option<u32>> {
    if !layout.state_dir.exists() {
        return Ok(None);
    }
    let _lock = lock_state(layout, progress)?;
    let pid_path = layout.pid_file(DEV_REGISTRY_NAME);
    let stopped = match read_pid(&pid_path)? {
        Some(pid) => {
            let stopped = stop_pid(DEV_REGISTRY_NAME, pid, &layout.registry())?;
            std::fs::remove_file(&pid_path).map_err(|e| DevError::io("remove", &pid_path, e))?;
            stopped.then_some(pid)
        }
        None => None,
    };
    let dir = layout.registry_dir();
    if purge && dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|e| DevError::io("remove", &dir, e))?;
    }
    Ok(stopped)
}

/// The shell line naming the environment's registry: `export OLM_DEV_REGISTRY=127.0.0.1:<port>`.
pub fn dev_registry_env_lines(layout: &Layout) -> String {
    format!("export OLM_DEV_REGISTRY={}\n", shell_quote(&addr(layout)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::test_layout;

    #[test]
    fn nothing_recorded_is_stopped_and_env_names_the_port() {
        let dir = tempfile::tempdir().unwrap();
        let layout = test_layout(dir.path());
        let status = dev_registry_status(&layout).unwrap();
        assert_eq!(status.state, ProcessState::NotStarted);
        assert!(!status.healthy);
        assert!(
            status.render().starts_with("registry "),
            "{}",
            status.render()
        );
        assert_eq!(
            dev_registry_env_lines(&layout),
            "export OLM_DEV_REGISTRY=127.0.0.1:28500\n"
        );
        // Nothing to stop: no error, no pid.
        assert_eq!(
            stop_dev_registry(&layout, &Progress::quiet(), true).unwrap(),
            None
        );
    }
}
