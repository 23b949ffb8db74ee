//! OLM as `olm dev up` runs it (`olm run`, `olm catalog serve` serving a directory it reloads,
//! `olm packageserver` behind its APIService), on a private control plane with a state
//! directory and ports of its own: what the chaos run and the large-scale run drive.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};

/// The processes `olm dev up` starts on the host, by the name of their pid files.
pub const CONTROLLERS: &str = "olm-controllers";
pub const CATALOG_SERVER: &str = "olm-catalog";
pub const PACKAGE_SERVER: &str = "olm-packageserver";

pub struct DevEnv {
    pub layout: olm_dev::Layout,
    pub olm: PathBuf,
    /// The catalog directory `olm catalog serve` serves (and reloads when it changes).
    pub catalog_dir: PathBuf,
    /// Where `olm dev`'s output is logged.
    pub work: PathBuf,
    state_dir: PathBuf,
    port_base: u16,
}

impl DevEnv {
    /// An environment in `work/state` on ports from `port_base`; a previous run's environment
    /// there is stopped and its files removed first.
    pub fn fresh(work: &Path, olm: &Path, catalog_dir: &Path, port_base: u16) -> anyhow::Result<DevEnv> {
        let state_dir = work.join("state");
        let layout = private_layout(&state_dir, port_base)?;
        if state_dir.exists() {
            let _ = olm_dev::down(&layout, &olm_dev::Progress::quiet(), true);
        }
        if work.exists() {
            std::fs::remove_dir_all(work).with_context(|| format!("removing {}", work.display()))?;
        }
        std::fs::create_dir_all(work)?;
        Ok(DevEnv { layout, olm: olm.to_path_buf(), catalog_dir: catalog_dir.to_path_buf(), work: work.to_path_buf(), state_dir, port_base })
    }

    /// `olm dev ARGS` on this environment, its output appended to `olm-dev.log`.
    pub fn dev(&self, args: &[&str]) -> anyhow::Result<String> {
        let log = self.work.join("olm-dev.log");
        let output = Command::new(&self.olm)
            .args(["dev"])
            .args(args)
            .env("OLM_DEV_STATE_DIR", &self.state_dir)
            .env("OLM_DEV_PORT_BASE", self.port_base.to_string())
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("running olm dev {}", args.join(" ")))?;
        let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        let mut previous = std::fs::read_to_string(&log).unwrap_or_default();
        previous.push_str(&format!("\n$ olm dev {}\n{text}", args.join(" ")));
        std::fs::write(&log, previous)?;
        if !output.status.success() {
            bail!("olm dev {} failed:\n{text}", args.join(" "));
        }
        Ok(text)
    }

    /// Starts what is not running (the control plane, OLM's processes) and leaves the rest.
    pub fn up(&self) -> anyhow::Result<()> {
        let catalog = self.catalog_dir.display().to_string();
        self.dev(&["up", "--catalog", &catalog]).map(drop)
    }

    /// Stops everything and removes the state directory, keeping every process's log in
    /// `work/logs`.
    pub fn down(&self) -> anyhow::Result<()> {
        let stopped = self.dev(&["down"]).map(drop);
        let logs = self.layout.logs_dir();
        if logs.is_dir() {
            let status = Command::new("cp").arg("-r").arg(&logs).arg(self.work.join("logs")).status();
            if !status.is_ok_and(|s| s.success()) {
                eprintln!("could not keep the logs of {}", logs.display());
            }
        }
        stopped?;
        self.dev(&["down", "--purge"]).map(drop)
    }

    pub fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> anyhow::Result<String> {
        crate::kubectl::kubectl(&self.layout, args, stdin)
    }

    /// The pid of a process `olm dev up` started ([`CONTROLLERS`], …) or of a control-plane
    /// component (`kube-apiserver`, `etcd`), from its pid file.
    pub fn pid(&self, name: &str) -> anyhow::Result<u32> {
        let pid_file = self.layout.pid_file(name);
        std::fs::read_to_string(&pid_file)
            .with_context(|| format!("reading {}", pid_file.display()))?
            .trim()
            .parse()
            .with_context(|| format!("{} holds no pid", pid_file.display()))
    }

    /// `olm run`'s admin address (/metrics, /readyz).
    pub fn controllers_admin(&self) -> String {
        format!("127.0.0.1:{}", self.layout.host_ports.controllers_admin)
    }
}

fn private_layout(state_dir: &Path, port_base: u16) -> anyhow::Result<olm_dev::Layout> {
    let mut layout = olm_dev::Layout::from_env().context("olm-dev layout")?;
    layout.state_dir = state_dir.to_path_buf();
    layout.set_port_base(port_base).context("port base")?;
    Ok(layout)
}
