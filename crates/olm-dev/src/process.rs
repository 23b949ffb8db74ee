//! Starting, inspecting and stopping the control-plane processes.
//!
//! Processes run in their own process group (so Ctrl-C on `olm` or a test harness does not reach
//! them) with stdout/stderr in `logs/<component>.log`, and are recorded in `pids/<component>.pid`.
//! Stopping only ever signals a recorded pid whose `/proc/<pid>/exe` is the expected binary.

use std::fs::File;
use std::net::{Ipv4Addr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::component::Component;
use crate::error::{DevError, Result};
use crate::layout::{Layout, create_dir_all};
use crate::probe;
use crate::run::{Progress, describe, tail_file};

/// What we know about one component's process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessState {
    /// No pid file: not started by us (or stopped).
    NotStarted,
    /// The recorded pid runs the expected binary.
    Running,
    /// A pid file exists but that process is gone (or is now something else).
    Gone,
}

/// An exclusive lock on the state directory, held while starting or stopping, so that parallel
/// `olm` invocations and test binaries do not race.
pub(crate) struct StateLock {
    _file: File,
}

/// Takes the state lock, waiting (and saying so) while another operation holds it.
pub(crate) fn lock_state(layout: &Layout, progress: &Progress) -> Result<StateLock> {
    create_dir_all(&layout.state_dir)?;
    let path = layout.state_lock();
    let file = File::create(&path).map_err(|e| DevError::io("create", &path, e))?;
    if file.try_lock().is_err() {
        progress.say(format!(
            "another `olm dev cluster` operation holds {}; waiting",
            path.display()
        ));
        file.lock().map_err(|e| DevError::io("lock", &path, e))?;
    }
    Ok(StateLock { _file: file })
}

/// The pid recorded in `path`, if there is one.
pub(crate) fn read_pid(path: &Path) -> Result<Option<u32>> {
    match std::fs::read_to_string(path) {
        Ok(text) => text
            .trim()
            .parse::<u32>()
            .map(Some)
            .map_err(|_| DevError::BadPidFile {
                path: path.to_path_buf(),
                content: text.chars().take(40).collect(),
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(DevError::io("read", path, e)),
    }
}

/// Whether `pid` is alive (not a zombie) and runs `binary`.
pub fn process_runs(pid: u32, binary: &Path) -> bool {
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    let Ok(stat) = std::fs::read_to_string(proc_dir.join("stat")) else {
        return false;
    };
    // Field 3, after the parenthesised command name (which may itself contain spaces).
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next());
    if matches!(state, Some('Z') | Some('X') | None) {
        return false;
    }
    let expected = std::fs::canonicalize(binary).unwrap_or_else(|_| binary.to_path_buf());
    match std::fs::read_link(proc_dir.join("exe")) {
        Ok(exe) => {
            let exe = exe.to_string_lossy();
            let exe = exe.strip_suffix(" (deleted)").unwrap_or(&exe);
            Path::new(exe) == expected || Path::new(exe) == binary
        }
        // Not readable (different user): fall back to argv[0].
        Err(_) => std::fs::read(proc_dir.join("cmdline"))
            .ok()
            .and_then(|c| {
                c.split(|b| *b == 0)
                    .next()
                    .map(|a| String::from_utf8_lossy(a).into_owned())
            })
            .is_some_and(|argv0| Path::new(&argv0) == binary || Path::new(&argv0) == expected),
    }
}

/// Whether `pid` has finished exiting: no such process, or a zombie whose threads are all
/// gone. A multi-threaded (e.g. Go) process's main thread turns zombie while other threads
/// still exit, and they share its open files: its sockets close only with the last thread.
fn has_exited(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return true;
    };
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next());
    let threads = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|entries| entries.count())
        .unwrap_or(0);
    matches!(state, Some('Z') | Some('X')) && threads <= 1
}

/// One health check of a component: whether it is healthy, and what was seen.
pub(crate) fn probe_component(
    layout: &Layout,
    component: Component,
    tls: Option<&Arc<rustls::ClientConfig>>,
) -> (bool, String) {
    let (path, needs_tls) = component.health();
    let tls = if needs_tls {
        match tls {
            Some(t) => Some(t),
            None => return (false, "no CA certificate to verify its TLS".into()),
        }
    } else {
        None
    };
    match probe::get(component.port(layout), path, tls) {
        Ok((200, body)) => {
            if component == Component::Etcd && !body.contains("\"health\":\"true\"") {
                (false, format!("GET {path}: {body}"))
            } else {
                (true, format!("GET {path} 200"))
            }
        }
        Ok((code, body)) => (
            false,
            format!(
                "GET {path} {code}: {}",
                body.lines().take(3).collect::<Vec<_>>().join(" | ")
            ),
        ),
        Err(e) => (false, e),
    }
}

/// Fails, naming the port and its user, when any port we need is taken.
pub(crate) fn check_ports(layout: &Layout) -> Result<()> {
    for component in Component::ALL {
        for port in component.all_ports(layout) {
            if TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_err() {
                return Err(DevError::PortInUse {
                    component: component.name(),
                    port,
                });
            }
        }
    }
    Ok(())
}

/// A process started by this `up`, kept so a failed `up` can stop and reap it.
pub(crate) struct Started {
    pub(crate) component: Component,
    pub(crate) child: Child,
    pub(crate) command: String,
}

/// Starts a component with its log file and records its pid.
pub(crate) fn start(layout: &Layout, component: Component) -> Result<Started> {
    let mut cmd = Command::new(component.binary(layout));
    cmd.args(component.args(layout))
        .current_dir(&layout.state_dir)
        .env_remove("KUBECONFIG");
    let (child, command) = spawn_logged(
        cmd,
        &layout.log_file(component.name()),
        Some(&layout.pid_file(component.name())),
        true,
    )?;
    Ok(Started {
        component,
        child,
        command,
    })
}

/// Spawns `cmd` with stdout and stderr in `log_path` (the previous run's log is kept as
/// `*.log.prev` for post-mortems) and, when given, its pid written to `pid_file`. With
/// `own_group` it runs in its own process group: it survives the caller exiting and is not hit
/// by the terminal's Ctrl-C. Returns the child and the command as a user could paste it.
pub(crate) fn spawn_logged(
    mut cmd: Command,
    log_path: &Path,
    pid_file: Option<&Path>,
    own_group: bool,
) -> Result<(Child, String)> {
    if log_path.exists() {
        let _ = std::fs::rename(log_path, log_path.with_extension("log.prev"));
    }
    let log = File::create(log_path).map_err(|e| DevError::io("create", log_path, e))?;
    let log_err = log
        .try_clone()
        .map_err(|e| DevError::io("open", log_path, e))?;
    cmd.stdin(Stdio::null()).stdout(log).stderr(log_err);
    if own_group {
        cmd.process_group(0);
    }
    let command = describe(&cmd);
    let child = cmd.spawn().map_err(|source| DevError::Spawn {
        command: command.clone(),
        source,
    })?;
    if let Some(pid_path) = pid_file {
        std::fs::write(pid_path, format!("{}\n", child.id()))
            .map_err(|e| DevError::io("write", pid_path, e))?;
    }
    Ok((child, command))
}

/// Waits until a started component passes its health check; fails with its log's last lines
/// when it exits or does not become healthy within its start timeout.
pub(crate) fn wait_healthy(
    layout: &Layout,
    started: &mut Started,
    tls: &Arc<rustls::ClientConfig>,
) -> Result<()> {
    let component = started.component;
    wait_until_healthy(
        component.name(),
        &mut started.child,
        &started.command,
        &layout.log_file(component.name()),
        component.start_timeout(),
        || probe_component(layout, component, Some(tls)),
    )
}

/// Polls `probe` (healthy?, what was seen) until it says healthy; fails naming `name`, the
/// command and the log file, with the log's last lines, when the process exits first or
/// `timeout` passes.
pub(crate) fn wait_until_healthy(
    name: &'static str,
    child: &mut Child,
    command: &str,
    log: &Path,
    timeout: Duration,
    mut probe: impl FnMut() -> (bool, String),
) -> Result<()> {
    let begin = Instant::now();
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(DevError::ComponentExited {
                component: name,
                status: status.to_string(),
                command: command.to_string(),
                tail: tail_file(log, 30),
                log: log.to_path_buf(),
            });
        }
        let (healthy, detail) = probe();
        if healthy {
            return Ok(());
        }
        if begin.elapsed() > timeout {
            return Err(DevError::ComponentUnhealthy {
                component: name,
                timeout_secs: timeout.as_secs(),
                last_check: detail,
                command: command.to_string(),
                tail: tail_file(log, 30),
                log: log.to_path_buf(),
            });
        }
        std::thread::sleep(Duration::from_millis(150));
    }
}

/// TERM, wait up to 10 s, then KILL; only when `pid` still runs `binary`. `name` is the
/// process's name in errors.
pub(crate) fn stop_pid(name: &'static str, pid: u32, binary: &Path) -> Result<bool> {
    if !process_runs(pid, binary) {
        return Ok(false);
    }
    send_signal(name, pid, rustix::process::Signal::TERM)?;
    if gone_within(pid, Duration::from_secs(10)) {
        return Ok(true);
    }
    kill_and_wait(name, pid)
}

/// KILL at once (a crash, for the fault tests), only when `pid` still runs `binary`; returns
/// when it has exited and its ports are closed.
pub(crate) fn kill_pid(name: &'static str, pid: u32, binary: &Path) -> Result<bool> {
    if !process_runs(pid, binary) {
        return Ok(false);
    }
    kill_and_wait(name, pid)
}

fn kill_and_wait(name: &'static str, pid: u32) -> Result<bool> {
    send_signal(name, pid, rustix::process::Signal::KILL)?;
    if gone_within(pid, Duration::from_secs(5)) {
        Ok(true)
    } else {
        Err(DevError::StopFailed {
            component: name,
            pid,
            reason: "still running 5 s after SIGKILL".into(),
        })
    }
}

fn send_signal(name: &'static str, pid: u32, signal: rustix::process::Signal) -> Result<()> {
    let target = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .ok_or_else(|| DevError::StopFailed {
            component: name,
            pid,
            reason: "not a valid process id".into(),
        })?;
    rustix::process::kill_process(target, signal).map_err(|e| DevError::StopFailed {
        component: name,
        pid,
        reason: e.to_string(),
    })
}

/// Waits for the exit itself, not for `process_runs` to turn false: while a process exits,
/// its /proc/<pid>/exe link is gone before its sockets are closed, and a port that still
/// accepts connections after a stop makes the next start fail.
fn gone_within(pid: u32, limit: Duration) -> bool {
    let begin = Instant::now();
    while begin.elapsed() < limit {
        if has_exited(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    has_exited(pid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::test_layout as layout;

    #[test]
    fn own_process_is_recognised_by_its_binary() {
        let me = std::env::current_exe().unwrap();
        assert!(process_runs(std::process::id(), &me));
        assert!(!process_runs(
            std::process::id(),
            Path::new("/usr/bin/definitely-not-this")
        ));
        assert!(!process_runs(u32::MAX - 1, &me));
    }


    #[test]
    fn stop_pid_refuses_foreign_processes() {
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id();
        // Recorded as etcd but it is `sleep`: must not be signalled.
        let dir = tempfile::tempdir().unwrap();
        let l = layout(dir.path());
        assert!(!stop_pid("etcd", pid, &l.etcd()).unwrap());
        assert!(child.try_wait().unwrap().is_none(), "sleep must still run");
        // Recorded with its real binary: stopped.
        let sleep = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
        let stopper = std::thread::spawn(move || stop_pid("etcd", pid, &sleep));
        let status = child.wait().unwrap();
        assert!(stopper.join().unwrap().unwrap());
        assert!(!status.success());
    }


    #[test]
    fn port_in_use_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let mut l = layout(dir.path());
        // The first port checked is taken, so the check fails on it whatever other programs
        // (and ephemeral ports of their connections) hold meanwhile.
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        l.ports.etcd_client = taken.local_addr().unwrap().port();
        let err = check_ports(&l).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains(&format!("127.0.0.1:{}", l.ports.etcd_client)),
            "{text}"
        );
        assert!(text.contains("etcd"), "{text}");
        assert_eq!(err.category(), "PortInUse");
    }

}
