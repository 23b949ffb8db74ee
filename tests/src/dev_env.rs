//! A throwaway `olm dev` environment for tests that run the README flow (`olm dev up` with its
//! host processes): its own temporary state directory and its own free port base, so it touches
//! neither the developer's cluster (base 28000) nor the tests' shared one (base 29000), and is
//! always stopped and purged (`olm dev down --purge`) by its guard.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Port offsets `olm dev` uses from its base (see `olm dev --help`), the real node's included.
const OFFSETS: [u16; 16] = [379, 380, 443, 257, 259, 247, 550, 580, 581, 543, 500, 248, 249, 250, 251, 256];

/// The first port of the kernel's ephemeral range (32768 unless configured otherwise). Outgoing
/// connections take their local port from that range at random, so a base whose ports fall in
/// it was free when picked and may not be when a component binds it minutes later (CI lost a
/// run that way: kube-proxy's healthz port, base+256, was taken).
fn ephemeral_low() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse().ok())
        .unwrap_or(32768)
}

/// The first base from `first` (in steps of 1000) whose ports are all free right now and all
/// below the ephemeral range.
fn free_base(first: u16) -> u16 {
    let highest = OFFSETS.iter().max().copied().unwrap_or_default();
    let limit = ephemeral_low();
    let mut base = first;
    while base.saturating_add(highest) < limit {
        let listeners: Vec<_> = OFFSETS.iter().map(|o| std::net::TcpListener::bind(("127.0.0.1", base + o))).collect();
        if listeners.iter().all(Result::is_ok) {
            return base;
        }
        base += 1000;
    }
    panic!("no free port base from {first} whose ports stay below the ephemeral range (from {limit}); stop what holds them or set OLM_TEST_PORT_BASE lower");
}

pub struct DevEnvironment {
    state: tempfile::TempDir,
    pub base: u16,
    stopped: bool,
}

impl DevEnvironment {
    /// A new environment; nothing runs until `olm dev up`.
    pub fn new(first_base: u16) -> DevEnvironment {
        let state = tempfile::Builder::new().prefix("olm-dev-throwaway-").tempdir().expect("temporary state directory");
        DevEnvironment { state, base: free_base(first_base), stopped: false }
    }

    pub fn state_dir(&self) -> &Path {
        self.state.path()
    }

    /// `olm <args>` as a user of this environment runs it.
    pub fn olm(&self, args: &[&str]) -> Output {
        self.olm_binary(&crate::olm_bin(), args)
    }

    /// Like [`DevEnvironment::olm`], with another `olm` binary (another build).
    pub fn olm_binary(&self, binary: &std::path::Path, args: &[&str]) -> Output {
        Command::new(binary)
            .args(args)
            .env("OLM_DEV_STATE_DIR", self.state.path())
            .env("OLM_DEV_PORT_BASE", self.base.to_string())
            .env_remove("KUBECONFIG")
            .output()
            .expect("olm runs")
    }

    /// Pids recorded under pids/ (control plane, registry and OLM host processes).
    pub fn recorded_pids(&self) -> Vec<(String, u32)> {
        let dir: PathBuf = self.state.path().join("pids");
        let mut pids = Vec::new();
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(pid) = std::fs::read_to_string(entry.path()).ok().and_then(|t| t.trim().parse().ok()) {
                pids.push((name, pid));
            }
        }
        pids.sort();
        pids
    }

    /// `olm dev down --purge`; returns its output. The guard does not run it again.
    pub fn down(&mut self) -> Output {
        self.stopped = true;
        self.olm(&["dev", "down", "--purge"])
    }
}

/// Whether a process runs (and is not a zombie) now.
pub fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit_once(')').map(|(_, rest)| !rest.trim_start().starts_with('Z')).unwrap_or(true),
        Err(_) => false,
    }
}

impl Drop for DevEnvironment {
    fn drop(&mut self) {
        if !self.stopped {
            let out = self.olm(&["dev", "down", "--purge"]);
            if !out.status.success() {
                eprintln!("cleanup: olm dev down --purge failed: {}", String::from_utf8_lossy(&out.stderr));
            }
        }
    }
}

/// kubectl of the environment's cache against its kubeconfig.
pub fn kubectl(env: &DevEnvironment, args: &[&str], stdin: Option<&str>) -> Output {
    use std::io::Write as _;
    let (kubectl, kubeconfig) = kubectl_paths(env);
    let mut child = Command::new(kubectl)
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    if let Some(input) = stdin {
        child.stdin.take().expect("stdin").write_all(input.as_bytes()).expect("write");
    }
    drop(child.stdin.take());
    child.wait_with_output().expect("kubectl finishes")
}

/// The environment's kubectl and kubeconfig, as `olm dev cluster env` names them.
pub fn kubectl_paths(env: &DevEnvironment) -> (PathBuf, PathBuf) {
    let cluster_env = env.olm(&["dev", "cluster", "env"]);
    let lines = String::from_utf8_lossy(&cluster_env.stdout).into_owned();
    let value = |name: &str| {
        lines
            .lines()
            .find_map(|l| l.strip_prefix(&format!("export {name}=")))
            .unwrap_or_else(|| panic!("olm dev cluster env sets {name}:\n{lines}"))
            .trim_matches('\'')
            .to_owned()
    };
    let kubeconfig = value("KUBECONFIG");
    let bin = value("PATH").split(':').next().unwrap_or_default().trim_matches('\'').to_owned();
    (Path::new(&bin).join("kubectl"), PathBuf::from(kubeconfig))
}

/// What the cluster says when a wait times out: every pod with its node, phase, readiness and
/// restarts, and the Warning Events, newest last (so a failure on CI explains itself).
pub fn cluster_diagnosis(env: &DevEnvironment) -> String {
    let run = |args: &[&str]| {
        let out = kubectl(env, args, None);
        format!("$ kubectl {}\n{}{}", args.join(" "), String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    };
    [
        run(&["get", "pods", "-A", "-o", "wide"]),
        run(&["get", "events", "-A", "--field-selector", "type=Warning", "--sort-by", ".lastTimestamp"]),
    ]
    .join("\n")
}

/// [`wait_for`], adding [`cluster_diagnosis`] to the panic when it times out.
pub fn wait_for_on<T>(env: &DevEnvironment, what: &str, timeout: std::time::Duration, check: impl FnMut() -> Result<T, String>) -> T {
    wait_explained(what, timeout, check, || format!("\n{}", cluster_diagnosis(env)))
}

/// Whether this process runs as root (the real node and the image builder need it).
pub fn running_as_root() -> bool {
    // Without a libc binding in this crate: /proc/self/status's effective uid.
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(2) == Some("0")))
        .unwrap_or(false)
}

/// A Namespace `ns` and an OperatorGroup of the same name targeting it (OwnNamespace), as YAML
/// to put before a Subscription.
pub fn own_namespace_yaml(ns: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n---\napiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata:\n  name: {ns}\n  namespace: {ns}\nspec:\n  targetNamespaces:\n  - {ns}\n"
    )
}

/// Polls `check` every second until it returns Ok, saying how long it took, or panics with
/// its last error after `timeout`.
pub fn wait_for<T>(what: &str, timeout: std::time::Duration, check: impl FnMut() -> Result<T, String>) -> T {
    wait_explained(what, timeout, check, String::new)
}

fn wait_explained<T>(what: &str, timeout: std::time::Duration, mut check: impl FnMut() -> Result<T, String>, explain: impl FnOnce() -> String) -> T {
    let begin = std::time::Instant::now();
    loop {
        match check() {
            Ok(value) => {
                eprintln!("{what}: {:?}", begin.elapsed());
                return value;
            }
            Err(last) if begin.elapsed() > timeout => panic!("timed out after {timeout:?} waiting for {what}: {last}{}", explain()),
            Err(_) => std::thread::sleep(std::time::Duration::from_secs(1)),
        }
    }
}

/// For a suite that needs the real node: None, with a SKIPPED line naming `suite`, when not
/// root; else a throwaway environment (a free port base from OLM_TEST_PORT_BASE, else 31800)
/// on which `olm dev up --real-node` succeeded.
pub fn real_node_environment(suite: &str) -> Option<DevEnvironment> {
    if !running_as_root() {
        eprintln!("SKIPPED {suite}: `olm dev up --real-node` needs root (containerd, kubelet, a bridge, iptables); run the suite as root");
        return None;
    }
    let first_base = std::env::var("OLM_TEST_PORT_BASE").ok().and_then(|b| b.parse().ok()).unwrap_or(31800);
    let env = DevEnvironment::new(first_base);
    let began = std::time::Instant::now();
    let up = env.olm(&["dev", "up", "--real-node"]);
    assert!(up.status.success(), "olm dev up --real-node failed:\n{}{}", String::from_utf8_lossy(&up.stdout), String::from_utf8_lossy(&up.stderr));
    eprintln!("olm dev up --real-node: {:?}", began.elapsed());
    Some(env)
}
