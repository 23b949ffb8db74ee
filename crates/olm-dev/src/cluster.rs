//! The control plane as a whole: its status, bringing it up (build, certificates, kubeconfig,
//! components in order, the fake node) and taking it down.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::builder;
use crate::component::Component;
use crate::error::{DevError, Result};
pub use crate::kubeconfig::kubectl;
use crate::kubeconfig::write_kubeconfig;
use crate::layout::{Layout, NODE_NAME, create_dir_all};
use crate::node::{self, RealNodeStatus};
use crate::pki;
use crate::probe;
use crate::process::{
    ProcessState, Started, check_ports, lock_state, probe_component, process_runs, read_pid, start,
    stop_pid, wait_healthy,
};
use crate::run::{Progress, format_duration, tail_file};

#[derive(Debug, Clone)]
pub struct ComponentStatus {
    pub component: Component,
    pub pid: Option<u32>,
    pub port: u16,
    pub state: ProcessState,
    pub healthy: bool,
    /// Health-check result or the reason it is not healthy.
    pub detail: String,
}

#[derive(Debug, Clone)]
pub struct ClusterStatus {
    pub components: Vec<ComponentStatus>,
    /// `Some(true)` when the fake node is Ready and untainted; `None` when the API is unreachable.
    pub node_ready: Option<bool>,
    pub node_detail: String,
    pub kubeconfig: PathBuf,
    pub apiserver_url: String,
    /// The real node (`--real-node`), when the environment has one.
    pub real_node: Option<RealNodeStatus>,
}

impl ClusterStatus {
    /// The control plane, the fake node and (when there is one) the real node are healthy.
    pub fn all_healthy(&self) -> bool {
        self.control_plane_healthy() && self.real_node.as_ref().is_none_or(|n| n.healthy())
    }
    /// The control plane and the fake node are healthy.
    pub fn control_plane_healthy(&self) -> bool {
        self.components.iter().all(|c| c.healthy) && self.node_ready == Some(true)
    }
    pub fn any_running(&self) -> bool {
        self.components
            .iter()
            .any(|c| c.state == ProcessState::Running)
    }
    /// A table for humans.
    pub fn render(&self) -> String {
        let mut out = format!(
            "{:<24} {:>8} {:>6}  {:<8} {}\n",
            "COMPONENT", "PID", "PORT", "STATE", "HEALTH"
        );
        for c in &self.components {
            let pid = c.pid.map(|p| p.to_string());
            let port = c.port.to_string();
            out.push_str(&status_row(c.component.name(), pid, &port, &c.state, c.healthy, &c.detail));
        }
        if let Some(real) = &self.real_node {
            for p in &real.processes {
                let pid = p.pid.map(|p| p.to_string());
                out.push_str(&status_row(p.process.name(), pid, "-", &p.state, p.healthy, &p.detail));
            }
        }
        out.push_str(&format!("node {NODE_NAME}: {}\n", self.node_detail));
        if let Some(real) = &self.real_node {
            out.push_str(&format!(
                "node {} (real): {}\n",
                node::REAL_NODE_NAME,
                real.detail
            ));
        }
        out.push_str(&format!(
            "API server: {}\nkubeconfig: {}\n",
            self.apiserver_url,
            self.kubeconfig.display()
        ));
        out
    }
}

/// One process's line in [`ClusterStatus::render`]'s table.
fn status_row(
    name: &str,
    pid: Option<String>,
    port: &str,
    state: &ProcessState,
    healthy: bool,
    detail: &str,
) -> String {
    let state = match state {
        ProcessState::NotStarted => "stopped",
        ProcessState::Running => "running",
        ProcessState::Gone => "gone",
    };
    let health = if healthy {
        format!("healthy ({detail})")
    } else {
        format!("not healthy: {detail}")
    };
    let pid = pid.unwrap_or_else(|| "-".into());
    format!("{name:<24} {pid:>8} {port:>6}  {state:<8} {health}\n")
}

/// Result of [`up`].
#[derive(Debug, Clone)]
pub struct UpReport {
    /// Everything was already running and healthy; nothing was started.
    pub already_running: bool,
    /// Time from the start of `up` until the cluster was ready (includes any build).
    pub elapsed: Duration,
    /// Time spent starting processes and waiting for readiness (excludes building).
    pub start_elapsed: Duration,
    pub kubeconfig: PathBuf,
}

/// Result of [`down`].
#[derive(Debug, Clone, Default)]
pub struct DownReport {
    /// Components that were running and were stopped, with their pids.
    pub stopped: Vec<(Component, u32)>,
    /// Pid files removed without signalling because the process was gone or was not ours.
    pub stale: Vec<(Component, u32)>,
    /// Real-node processes that were stopped, by name, with their pids.
    pub node_stopped: Vec<(&'static str, u32)>,
    /// What the real node left on the host and was removed (sandboxes, bridge, chains, mounts).
    pub node_removed: Vec<String>,
    pub purged: bool,
}

/// How [`up_with`] brings the cluster up.
#[derive(Debug, Clone, Copy, Default)]
pub struct UpOptions {
    /// Add one real kubelet node (containerd, kubelet, kube-proxy; needs root). An environment
    /// that has one keeps it on later `up`s until `down`.
    pub real_node: bool,
}

/// What runs now, without changing anything.
pub fn status(layout: &Layout) -> Result<ClusterStatus> {
    let tls = probe::tls_config(&layout.pki_file("ca.crt")).ok();
    let mut components = Vec::new();
    for component in Component::ALL {
        let pid = read_pid(&layout.pid_file(component.name()))?;
        let state = match pid {
            None => ProcessState::NotStarted,
            Some(pid) if process_runs(pid, &component.binary(layout)) => ProcessState::Running,
            Some(_) => ProcessState::Gone,
        };
        let (healthy, detail) = if state == ProcessState::Running {
            probe_component(layout, component, tls.as_ref())
        } else {
            (false, "not running".into())
        };
        components.push(ComponentStatus {
            component,
            pid,
            port: component.port(layout),
            state,
            healthy,
            detail,
        });
    }
    let api_healthy = components
        .iter()
        .any(|c| c.component == Component::ApiServer && c.healthy);
    let (node_ready, node_detail) = if api_healthy {
        match node_state(layout) {
            Ok(NodeState {
                ready: true,
                taints,
            }) if taints.is_empty() => (Some(true), "Ready".to_string()),
            Ok(NodeState { ready, taints }) => (
                Some(false),
                format!("Ready={ready}, taints: [{}]", taints.join(", ")),
            ),
            Err(e) => (Some(false), e),
        }
    } else {
        (None, "unknown (API server not healthy)".to_string())
    };
    Ok(ClusterStatus {
        components,
        node_ready,
        node_detail,
        kubeconfig: layout.kubeconfig(),
        apiserver_url: layout.apiserver_url(),
        real_node: node::node_status(layout, api_healthy),
    })
}

struct NodeState {
    ready: bool,
    taints: Vec<String>,
}

fn node_state(layout: &Layout) -> std::result::Result<NodeState, String> {
    let out = kubectl(layout, &["get", "node", NODE_NAME, "-o", "json"], None)?;
    let node: serde_json::Value =
        serde_json::from_str(&out).map_err(|e| format!("node JSON: {e}"))?;
    let ready = node["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True");
    let taints = node["spec"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            format!(
                "{}:{}",
                t["key"].as_str().unwrap_or("?"),
                t["effect"].as_str().unwrap_or("?")
            )
        })
        .collect();
    Ok(NodeState { ready, taints })
}

/// What the fake node offers the scheduler. Ephemeral storage too: a pod that requests some
/// (ibm-spectrum-scale-csi-operator asks 5Gi) is never scheduled on a node that declares none.
const NODE_RESOURCES: [(&str, &str); 4] = [("cpu", "32"), ("memory", "256Gi"), ("pods", "110"), ("ephemeral-storage", "1Ti")];

/// [`NODE_RESOURCES`] as a JSON object (YAML too).
fn node_resources() -> String {
    let fields: Vec<String> = NODE_RESOURCES.iter().map(|(name, value)| format!("\"{name}\": \"{value}\"")).collect();
    format!("{{{}}}", fields.join(", "))
}

/// Set the fake node's resources. `kubectl apply` leaves an existing node's status as it was,
/// and `up` on a healthy cluster applies nothing: a cluster made before a resource was added
/// gets it here.
fn declare_node_resources(layout: &Layout) -> std::result::Result<(), String> {
    let resources = node_resources();
    let patch = format!(r#"{{"status": {{"capacity": {resources}, "allocatable": {resources}}}}}"#);
    kubectl(layout, &["patch", "node", NODE_NAME, "--subresource=status", "--type=merge", "-p", &patch], None).map(|_| ())
}

/// The fake node: kwok manages it (annotation), the scheduler places pods on it.
fn node_manifest() -> String {
    let resources = node_resources();
    format!(
        r#"apiVersion: v1
kind: Node
metadata:
  name: {NODE_NAME}
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    kubernetes.io/arch: amd64
    kubernetes.io/hostname: {NODE_NAME}
    kubernetes.io/os: linux
    kubernetes.io/role: agent
    node-role.kubernetes.io/agent: ""
    type: kwok
spec: {{}}
status:
  allocatable: {resources}
  capacity: {resources}
"#
    )
}

/// Polls `check` until it yields `Ok(())` or `timeout` passes.
fn wait_until(
    what: &str,
    timeout: Duration,
    mut check: impl FnMut() -> std::result::Result<(), String>,
) -> Result<()> {
    let begin = Instant::now();
    let mut delay = Duration::from_millis(200);
    loop {
        match check() {
            Ok(()) => return Ok(()),
            Err(last) if begin.elapsed() > timeout => {
                return Err(DevError::Timeout {
                    what: what.to_string(),
                    timeout_secs: timeout.as_secs(),
                    last,
                });
            }
            Err(_) => {}
        }
        std::thread::sleep(delay);
        delay = (delay * 2).min(Duration::from_secs(1));
    }
}

/// The API server's audit policy: the metadata of every request of OLM's own ServiceAccounts
/// (namespace `olm`, as manifests/ install them), for deriving the least privilege OLM needs,
/// and of the ServiceAccounts of [`AUDITED_NAMESPACE`]; nothing of anybody else, so the log
/// stays small.
pub const AUDIT_POLICY: &str = "\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  userGroups: [\"system:serviceaccounts:olm\", \"system:serviceaccounts:olm-dev-audited\"]
- level: None
";

/// Every request of a ServiceAccount of this namespace is in the audit log: act as one (its
/// token in a kubeconfig) to see what a command asks of the API server. (Impersonation would
/// not do: the policy is matched against the user who authenticated.)
pub const AUDITED_NAMESPACE: &str = "olm-dev-audited";

/// Builds if needed, then starts everything and waits until a pod could be scheduled and become
/// Ready: API server ready, the fake node Ready without taints, the `default` ServiceAccount.
/// Idempotent: a healthy cluster is left alone; a partial one is stopped and started cleanly.
pub fn up(layout: &Layout, progress: &Progress) -> Result<UpReport> {
    up_with(layout, progress, UpOptions::default())
}

/// [`up`], with a real node when `options` ask for one (or the environment already has one).
pub fn up_with(layout: &Layout, progress: &Progress, options: UpOptions) -> Result<UpReport> {
    let begin = Instant::now();
    let _lock = lock_state(layout, progress)?;
    // Before any build: a missing package or missing root must fail fast.
    let node_ip_changed = options.real_node && node::prepare(layout, progress)?;
    builder::ensure_built(layout, progress)?;

    let current = status(layout)?;
    // The API server reads its audit policy when it starts: a changed one needs a restart.
    let policy_changed = std::fs::read_to_string(layout.audit_policy()).ok().as_deref() != Some(AUDIT_POLICY);
    if current.control_plane_healthy() && layout.kubeconfig().is_file() && !node_ip_changed && !policy_changed {
        progress.say("control plane is already running and healthy");
        if node::real_node_ip(layout).is_some() {
            node::start_node(layout, progress)?;
        }
        if let Err(err) = declare_node_resources(layout) {
            progress.say(format!("cannot declare the fake node's resources: {err}"));
        }
        return Ok(UpReport {
            already_running: true,
            elapsed: begin.elapsed(),
            start_elapsed: Duration::ZERO,
            kubeconfig: layout.kubeconfig(),
        });
    }
    if current.any_running() && node_ip_changed {
        progress.say("restarting the control plane so the API server serves the real node");
        stop_all(layout, progress)?;
    } else if current.any_running() && current.control_plane_healthy() && policy_changed {
        progress.say("restarting the control plane so the API server reads the new audit policy");
        stop_all(layout, progress)?;
    } else if current.any_running() {
        let unhealthy: Vec<String> = current
            .components
            .iter()
            .filter(|c| !c.healthy)
            .map(|c| format!("{} ({})", c.component.name(), c.detail))
            .collect();
        progress.say(format!(
            "control plane is partially running (not healthy: {}; node: {}); restarting it cleanly",
            unhealthy.join(", "),
            current.node_detail
        ));
        stop_all(layout, progress)?;
    }

    let start_begin = Instant::now();
    check_ports(layout)?;
    for dir in [layout.logs_dir(), layout.pids_dir(), layout.etcd_data_dir()] {
        create_dir_all(&dir)?;
    }
    if pki::ensure_pki(layout)? {
        progress.say(format!(
            "generated certificates in {}",
            layout.pki_dir().display()
        ));
    }
    write_kubeconfig(layout)?;
    let policy = layout.audit_policy();
    std::fs::write(&policy, AUDIT_POLICY).map_err(|e| DevError::io("write the audit policy", &policy, e))?;

    let mut started = Vec::new();
    match start_all(layout, progress, &mut started) {
        Ok(()) => {
            // The processes keep running after we return; their handles are dropped unwaited.
            drop(started);
            if node::real_node_ip(layout).is_some() {
                node::start_node(layout, progress)?;
            }
            let start_elapsed = start_begin.elapsed();
            progress.say(format!(
                "control plane ready in {} (kubeconfig: {})",
                format_duration(start_elapsed),
                layout.kubeconfig().display()
            ));
            Ok(UpReport {
                already_running: false,
                elapsed: begin.elapsed(),
                start_elapsed,
                kubeconfig: layout.kubeconfig(),
            })
        }
        Err(err) => {
            progress.say("start failed; stopping what this run started");
            for mut s in started.into_iter().rev() {
                let pid = s.child.id();
                let _ = stop_pid(s.component.name(), pid, &s.component.binary(layout));
                // Reap our child so it does not linger as a zombie.
                let _ = s.child.kill();
                let _ = s.child.wait();
                let _ = std::fs::remove_file(layout.pid_file(s.component.name()));
            }
            Err(err)
        }
    }
}

fn start_all(layout: &Layout, progress: &Progress, started: &mut Vec<Started>) -> Result<()> {
    let tls = probe::tls_config(&layout.pki_file("ca.crt")).map_err(|reason| DevError::Pki {
        what: "TLS configuration for health checks".into(),
        reason,
    })?;

    for component in [Component::Etcd, Component::ApiServer] {
        let t = Instant::now();
        started.push(start(layout, component)?);
        if let Some(s) = started.last_mut() {
            wait_healthy(layout, s, &tls)?;
        }
        progress.say(format!(
            "{} healthy on 127.0.0.1:{} ({})",
            component.name(),
            component.port(layout),
            format_duration(t.elapsed())
        ));
    }

    // These three only need the API server; start them together.
    let t = Instant::now();
    let first_new = started.len();
    for component in [
        Component::ControllerManager,
        Component::Scheduler,
        Component::Kwok,
    ] {
        started.push(start(layout, component)?);
    }
    for s in &mut started[first_new..] {
        wait_healthy(layout, s, &tls)?;
        progress.say(format!(
            "{} healthy on 127.0.0.1:{} ({})",
            s.component.name(),
            s.component.port(layout),
            format_duration(t.elapsed())
        ));
    }

    let t = Instant::now();
    wait_until("creating the fake node", Duration::from_secs(30), || {
        kubectl(layout, &["apply", "-f", "-"], Some(&node_manifest()))?;
        declare_node_resources(layout)
    })?;
    wait_until(
        &format!("node {NODE_NAME} to be Ready without taints"),
        Duration::from_secs(90),
        || match node_state(layout)? {
            NodeState {
                ready: true,
                taints,
            } if taints.is_empty() => Ok(()),
            NodeState { ready, taints } => {
                Err(format!("Ready={ready}, taints: [{}]", taints.join(", ")))
            }
        },
    )
    .map_err(|err| {
        with_log_tails(
            err,
            layout,
            &[Component::Kwok, Component::ControllerManager],
        )
    })?;
    progress.say(format!(
        "node {NODE_NAME} Ready and untainted ({})",
        format_duration(t.elapsed())
    ));
    wait_until(
        "the default ServiceAccount in namespace default",
        Duration::from_secs(60),
        || {
            kubectl(
                layout,
                &[
                    "-n",
                    "default",
                    "get",
                    "serviceaccount",
                    "default",
                    "-o",
                    "name",
                ],
                None,
            )
            .map(|_| ())
        },
    )
    .map_err(|err| with_log_tails(err, layout, &[Component::ControllerManager]))?;
    Ok(())
}

/// Adds the last log lines of the components responsible to a timeout, so the cause is visible.
fn with_log_tails(err: DevError, layout: &Layout, components: &[Component]) -> DevError {
    match err {
        DevError::Timeout {
            what,
            timeout_secs,
            mut last,
        } => {
            for component in components {
                let log = layout.log_file(component.name());
                last.push_str(&format!(
                    "\n--- last lines of {} ---\n{}",
                    log.display(),
                    tail_file(&log, 15)
                ));
            }
            DevError::Timeout {
                what,
                timeout_secs,
                last,
            }
        }
        other => other,
    }
}

fn stop_all(layout: &Layout, progress: &Progress) -> Result<DownReport> {
    let mut report = DownReport::default();
    for component in Component::ALL.into_iter().rev() {
        let pid_path = layout.pid_file(component.name());
        let Some(pid) = read_pid(&pid_path)? else {
            continue;
        };
        if stop_pid(component.name(), pid, &component.binary(layout))? {
            progress.say(format!("stopped {} (pid {pid})", component.name()));
            report.stopped.push((component, pid));
        } else {
            report.stale.push((component, pid));
        }
        std::fs::remove_file(&pid_path).map_err(|e| DevError::io("remove", &pid_path, e))?;
    }
    Ok(report)
}

/// Stops exactly the processes `up` recorded. With `purge`, also deletes etcd data,
/// certificates, logs and the kubeconfig, so the next `up` starts from scratch.
pub fn down(layout: &Layout, progress: &Progress, purge: bool) -> Result<DownReport> {
    if !layout.state_dir.exists() {
        return Ok(DownReport::default());
    }
    let _lock = lock_state(layout, progress)?;
    // The node first: its kubelet would otherwise keep reporting to a dying API server, and
    // its pods' sandboxes are removed through containerd, which must still run.
    let node_report = node::stop_node(layout, progress, purge)?;
    let mut report = stop_all(layout, progress)?;
    report.node_stopped = node_report.stopped;
    report.node_removed = node_report.removed;
    if purge {
        for dir in [layout.etcd_data_dir(), layout.pki_dir(), layout.logs_dir()] {
            if dir.exists() {
                std::fs::remove_dir_all(&dir).map_err(|e| DevError::io("remove", &dir, e))?;
            }
        }
        let kubeconfig = layout.kubeconfig();
        if kubeconfig.exists() {
            std::fs::remove_file(&kubeconfig)
                .map_err(|e| DevError::io("remove", &kubeconfig, e))?;
        }
        report.purged = true;
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::test_layout as layout;

    #[test]
    fn status_without_state_reports_everything_stopped() {
        let dir = tempfile::tempdir().unwrap();
        let l = layout(dir.path());
        let s = status(&l).unwrap();
        assert!(!s.any_running());
        assert!(!s.all_healthy());
        assert!(s.render().contains("kube-apiserver"));
        assert_eq!(s.node_ready, None);
    }

}
