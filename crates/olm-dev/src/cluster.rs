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

use base64::Engine as _;

use crate::builder;
use crate::error::{DevError, Result};
use crate::layout::{Layout, NODE_NAME, POD_CIDR, SERVICE_CIDR, create_dir_all};
use crate::pki::{self, FRONT_PROXY_CLIENT_NAME};
use crate::probe;
use crate::run::{Progress, describe, format_duration, shell_quote, tail_file};

/// One process of the control plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Component {
    Etcd,
    ApiServer,
    ControllerManager,
    Scheduler,
    Kwok,
}

impl Component {
    /// In start order; stopped in reverse.
    pub const ALL: [Component; 5] = [
        Component::Etcd,
        Component::ApiServer,
        Component::ControllerManager,
        Component::Scheduler,
        Component::Kwok,
    ];

    /// Name used for log and pid files and in messages.
    pub fn name(self) -> &'static str {
        match self {
            Component::Etcd => "etcd",
            Component::ApiServer => "kube-apiserver",
            Component::ControllerManager => "kube-controller-manager",
            Component::Scheduler => "kube-scheduler",
            Component::Kwok => "kwok",
        }
    }

    pub fn binary(self, layout: &Layout) -> PathBuf {
        match self {
            Component::Etcd => layout.etcd(),
            Component::ApiServer => layout.kube_apiserver(),
            Component::ControllerManager => layout.kube_controller_manager(),
            Component::Scheduler => layout.kube_scheduler(),
            Component::Kwok => layout.kwok(),
        }
    }

    /// The port its health endpoint listens on.
    pub fn port(self, layout: &Layout) -> u16 {
        let p = layout.ports;
        match self {
            Component::Etcd => p.etcd_client,
            Component::ApiServer => p.apiserver,
            Component::ControllerManager => p.controller_manager,
            Component::Scheduler => p.scheduler,
            Component::Kwok => p.kwok,
        }
    }

    /// Every port it listens on (checked for conflicts before starting).
    fn all_ports(self, layout: &Layout) -> Vec<u16> {
        match self {
            Component::Etcd => vec![layout.ports.etcd_client, layout.ports.etcd_peer],
            other => vec![other.port(layout)],
        }
    }

    /// Health endpoint path and whether it is served over TLS (by our CA).
    fn health(self) -> (&'static str, bool) {
        match self {
            Component::Etcd => ("/health", false),
            Component::ApiServer => ("/readyz", true),
            Component::ControllerManager | Component::Scheduler => ("/healthz", true),
            Component::Kwok => ("/healthz", false),
        }
    }

    /// How long it may take to become healthy after start.
    fn start_timeout(self) -> Duration {
        match self {
            Component::ApiServer => Duration::from_secs(90),
            _ => Duration::from_secs(45),
        }
    }

    fn args(self, layout: &Layout) -> Vec<String> {
        let pki = |f: &str| layout.pki_file(f).display().to_string();
        let kubeconfig = layout.kubeconfig().display().to_string();
        let p = layout.ports;
        match self {
            Component::Etcd => vec![
                "--name=olm-dev".into(),
                format!("--data-dir={}", layout.etcd_data_dir().display()),
                format!("--listen-client-urls=http://127.0.0.1:{}", p.etcd_client),
                format!("--advertise-client-urls=http://127.0.0.1:{}", p.etcd_client),
                format!("--listen-peer-urls=http://127.0.0.1:{}", p.etcd_peer),
                format!(
                    "--initial-advertise-peer-urls=http://127.0.0.1:{}",
                    p.etcd_peer
                ),
                format!("--initial-cluster=olm-dev=http://127.0.0.1:{}", p.etcd_peer),
                // A throwaway development store: durability is not worth the fsync latency.
                "--unsafe-no-fsync=true".into(),
                "--auto-compaction-retention=1".into(),
                "--quota-backend-bytes=4294967296".into(),
            ],
            Component::ApiServer => vec![
                format!("--etcd-servers=http://127.0.0.1:{}", p.etcd_client),
                "--bind-address=127.0.0.1".into(),
                format!("--secure-port={}", p.apiserver),
                // Loopback advertise address is only accepted without an endpoint reconciler.
                "--advertise-address=127.0.0.1".into(),
                "--endpoint-reconciler-type=none".into(),
                format!("--service-cluster-ip-range={SERVICE_CIDR}"),
                format!("--tls-cert-file={}", pki("apiserver.crt")),
                format!("--tls-private-key-file={}", pki("apiserver.key")),
                format!("--client-ca-file={}", pki("ca.crt")),
                "--authorization-mode=Node,RBAC".into(),
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
                format!("--service-account-key-file={}", pki("sa.pub")),
                format!("--service-account-signing-key-file={}", pki("sa.key")),
                "--allow-privileged=true".into(),
                // API aggregation: the API server authenticates to extension servers with the
                // front-proxy client certificate and passes the user in these headers.
                format!(
                    "--requestheader-client-ca-file={}",
                    pki("front-proxy-ca.crt")
                ),
                format!("--requestheader-allowed-names={FRONT_PROXY_CLIENT_NAME}"),
                "--requestheader-username-headers=X-Remote-User".into(),
                "--requestheader-group-headers=X-Remote-Group".into(),
                "--requestheader-extra-headers-prefix=X-Remote-Extra-".into(),
                format!("--proxy-client-cert-file={}", pki("front-proxy-client.crt")),
                format!("--proxy-client-key-file={}", pki("front-proxy-client.key")),
                "--profiling=false".into(),
            ],
            Component::ControllerManager => vec![
                format!("--kubeconfig={kubeconfig}"),
                format!("--authentication-kubeconfig={kubeconfig}"),
                format!("--authorization-kubeconfig={kubeconfig}"),
                "--bind-address=127.0.0.1".into(),
                format!("--secure-port={}", p.controller_manager),
                format!("--tls-cert-file={}", pki("components.crt")),
                format!("--tls-private-key-file={}", pki("components.key")),
                "--leader-elect=false".into(),
                format!("--root-ca-file={}", pki("ca.crt")),
                format!("--service-account-private-key-file={}", pki("sa.key")),
                "--use-service-account-credentials=true".into(),
                format!("--cluster-signing-cert-file={}", pki("ca.crt")),
                format!("--cluster-signing-key-file={}", pki("ca.key")),
                // Remove the not-ready taint from the fake node within seconds, not minutes.
                "--node-monitor-period=5s".into(),
                "--node-monitor-grace-period=40s".into(),
                "--profiling=false".into(),
            ],
            Component::Scheduler => vec![
                format!("--kubeconfig={kubeconfig}"),
                format!("--authentication-kubeconfig={kubeconfig}"),
                format!("--authorization-kubeconfig={kubeconfig}"),
                "--bind-address=127.0.0.1".into(),
                format!("--secure-port={}", p.scheduler),
                format!("--tls-cert-file={}", pki("components.crt")),
                format!("--tls-private-key-file={}", pki("components.key")),
                "--leader-elect=false".into(),
                "--profiling=false".into(),
            ],
            Component::Kwok => vec![
                format!("--kubeconfig={kubeconfig}"),
                format!("--config={}", layout.kwok_stages().display()),
                "--manage-all-nodes=true".into(),
                // TEST-NET-1 address: clearly fake, never routed.
                "--node-ip=192.0.2.1".into(),
                format!("--cidr={POD_CIDR}"),
                "--node-lease-duration-seconds=40".into(),
                format!("--server-address=127.0.0.1:{}", p.kwok),
                format!("--node-port={}", p.kwok),
                format!("--tls-cert-file={}", pki("components.crt")),
                format!("--tls-private-key-file={}", pki("components.key")),
            ],
        }
    }
}

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
}

impl ClusterStatus {
    pub fn all_healthy(&self) -> bool {
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
            let state = match c.state {
                ProcessState::NotStarted => "stopped",
                ProcessState::Running => "running",
                ProcessState::Gone => "gone",
            };
            let health = if c.healthy {
                format!("healthy ({})", c.detail)
            } else {
                format!("not healthy: {}", c.detail)
            };
            out.push_str(&format!(
                "{:<24} {:>8} {:>6}  {:<8} {}\n",
                c.component.name(),
                c.pid.map(|p| p.to_string()).unwrap_or_else(|| "-".into()),
                c.port,
                state,
                health
            ));
        }
        out.push_str(&format!("node {NODE_NAME}: {}\n", self.node_detail));
        out.push_str(&format!(
            "API server: {}\nkubeconfig: {}\n",
            self.apiserver_url,
            self.kubeconfig.display()
        ));
        out
    }
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
    pub purged: bool,
}

/// An exclusive lock on the state directory, held while starting or stopping, so that parallel
/// `olm` invocations and test binaries do not race.
struct StateLock {
    _file: File,
}

fn lock_state(layout: &Layout, progress: &Progress) -> Result<StateLock> {
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

fn read_pid(path: &Path) -> Result<Option<u32>> {
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

fn probe_component(
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
    })
}

/// Runs the built kubectl against the local cluster; returns stdout, or stderr as the error.
pub fn kubectl(
    layout: &Layout,
    args: &[&str],
    stdin: Option<&str>,
) -> std::result::Result<String, String> {
    use std::io::Write;
    let mut cmd = Command::new(layout.kubectl());
    cmd.arg(format!("--kubeconfig={}", layout.kubeconfig().display()))
        .arg("--request-timeout=15s")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
    let command = describe(&cmd);
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run `{command}`: {e}"))?;
    if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(input.as_bytes())
            .map_err(|e| format!("cannot write to `{command}`: {e}"))?;
    }
    let output = child
        .wait_with_output()
        .map_err(|e| format!("`{command}` failed: {e}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(format!(
            "`{command}` exited with {}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
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

/// The fake node: kwok manages it (annotation), the scheduler places pods on it.
fn node_manifest() -> String {
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
  allocatable:
    cpu: "32"
    memory: 256Gi
    pods: "110"
  capacity:
    cpu: "32"
    memory: 256Gi
    pods: "110"
"#
    )
}

/// The admin kubeconfig, with the certificates embedded so the file works when copied.
fn kubeconfig_yaml(layout: &Layout) -> Result<String> {
    let b64 = |name: &str| -> Result<String> {
        let path = layout.pki_file(name);
        let bytes = std::fs::read(&path).map_err(|e| DevError::io("read", &path, e))?;
        Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
    };
    Ok(format!(
        r#"apiVersion: v1
kind: Config
clusters:
- name: olm-dev
  cluster:
    server: {server}
    certificate-authority-data: {ca}
users:
- name: {user}
  user:
    client-certificate-data: {cert}
    client-key-data: {key}
contexts:
- name: olm-dev
  context:
    cluster: olm-dev
    user: {user}
current-context: olm-dev
preferences: {{}}
"#,
        server = layout.apiserver_url(),
        ca = b64("ca.crt")?,
        user = pki::ADMIN_USER,
        cert = b64("admin.crt")?,
        key = b64("admin.key")?,
    ))
}

fn write_kubeconfig(layout: &Layout) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let path = layout.kubeconfig();
    let text = kubeconfig_yaml(layout)?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| DevError::io("create", &path, e))?;
    file.write_all(text.as_bytes())
        .map_err(|e| DevError::io("write", &path, e))
}

/// Fails, naming the port and its user, when any port we need is taken.
fn check_ports(layout: &Layout) -> Result<()> {
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
struct Started {
    component: Component,
    child: Child,
    command: String,
}

fn start(layout: &Layout, component: Component) -> Result<Started> {
    let log_path = layout.log_file(component.name());
    if log_path.exists() {
        // Keep the previous run's log for post-mortems.
        let _ = std::fs::rename(&log_path, log_path.with_extension("log.prev"));
    }
    let log = File::create(&log_path).map_err(|e| DevError::io("create", &log_path, e))?;
    let log_err = log
        .try_clone()
        .map_err(|e| DevError::io("open", &log_path, e))?;
    let mut cmd = Command::new(component.binary(layout));
    cmd.args(component.args(layout))
        .current_dir(&layout.state_dir)
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err)
        // Own process group: survives `olm` exiting and is not hit by the terminal's Ctrl-C.
        .process_group(0);
    let command = describe(&cmd);
    let child = cmd.spawn().map_err(|source| DevError::Spawn {
        command: command.clone(),
        source,
    })?;
    let pid_path = layout.pid_file(component.name());
    std::fs::write(&pid_path, format!("{}\n", child.id()))
        .map_err(|e| DevError::io("write", &pid_path, e))?;
    Ok(Started {
        component,
        child,
        command,
    })
}

fn wait_healthy(
    layout: &Layout,
    started: &mut Started,
    tls: &Arc<rustls::ClientConfig>,
) -> Result<()> {
    let component = started.component;
    let timeout = component.start_timeout();
    let begin = Instant::now();
    let log = layout.log_file(component.name());
    loop {
        if let Ok(Some(status)) = started.child.try_wait() {
            return Err(DevError::ComponentExited {
                component: component.name(),
                status: status.to_string(),
                command: started.command.clone(),
                tail: tail_file(&log, 30),
                log,
            });
        }
        let (healthy, detail) = probe_component(layout, component, Some(tls));
        if healthy {
            return Ok(());
        }
        if begin.elapsed() > timeout {
            return Err(DevError::ComponentUnhealthy {
                component: component.name(),
                timeout_secs: timeout.as_secs(),
                last_check: detail,
                command: started.command.clone(),
                tail: tail_file(&log, 30),
                log,
            });
        }
        std::thread::sleep(Duration::from_millis(150));
    }
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

/// Builds if needed, then starts everything and waits until a pod could be scheduled and become
/// Ready: API server ready, the fake node Ready without taints, the `default` ServiceAccount.
/// Idempotent: a healthy cluster is left alone; a partial one is stopped and started cleanly.
pub fn up(layout: &Layout, progress: &Progress) -> Result<UpReport> {
    let begin = Instant::now();
    let _lock = lock_state(layout, progress)?;
    builder::ensure_built(layout, progress)?;

    let current = status(layout)?;
    if current.all_healthy() && layout.kubeconfig().is_file() {
        progress.say("control plane is already running and healthy");
        return Ok(UpReport {
            already_running: true,
            elapsed: begin.elapsed(),
            start_elapsed: Duration::ZERO,
            kubeconfig: layout.kubeconfig(),
        });
    }
    if current.any_running() {
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

    let mut started = Vec::new();
    match start_all(layout, progress, &mut started) {
        Ok(()) => {
            // The processes keep running after we return; their handles are dropped unwaited.
            drop(started);
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
                let _ = stop_pid(s.component, pid, &s.component.binary(layout));
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
        kubectl(layout, &["apply", "-f", "-"], Some(&node_manifest())).map(|_| ())
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

/// TERM, wait up to 10 s, then KILL; only when `pid` still runs `binary`.
fn stop_pid(component: Component, pid: u32, binary: &Path) -> Result<bool> {
    if !process_runs(pid, binary) {
        return Ok(false);
    }
    let raw = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw);
    let Some(target) = raw else {
        return Err(DevError::StopFailed {
            component: component.name(),
            pid,
            reason: "not a valid process id".into(),
        });
    };
    let send = |signal| {
        rustix::process::kill_process(target, signal).map_err(|e| DevError::StopFailed {
            component: component.name(),
            pid,
            reason: e.to_string(),
        })
    };
    send(rustix::process::Signal::TERM)?;
    let gone_within = |limit: Duration| {
        let begin = Instant::now();
        while begin.elapsed() < limit {
            if !process_runs(pid, binary) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        !process_runs(pid, binary)
    };
    if gone_within(Duration::from_secs(10)) {
        return Ok(true);
    }
    send(rustix::process::Signal::KILL)?;
    if gone_within(Duration::from_secs(5)) {
        Ok(true)
    } else {
        Err(DevError::StopFailed {
            component: component.name(),
            pid,
            reason: "still running 5 s after SIGKILL".into(),
        })
    }
}

fn stop_all(layout: &Layout, progress: &Progress) -> Result<DownReport> {
    let mut report = DownReport::default();
    for component in Component::ALL.into_iter().rev() {
        let pid_path = layout.pid_file(component.name());
        let Some(pid) = read_pid(&pid_path)? else {
            continue;
        };
        if stop_pid(component, pid, &component.binary(layout))? {
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
    let mut report = stop_all(layout, progress)?;
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

/// Shell lines that point `kubectl` at the local cluster: `eval "$(olm dev cluster env)"`.
pub fn env_lines(layout: &Layout) -> String {
    format!(
        "export KUBECONFIG={}\nexport PATH={}:\"$PATH\"\n",
        shell_quote(&layout.kubeconfig().display().to_string()),
        shell_quote(&layout.k8s_bin_dir().display().to_string()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(dir: &Path) -> Layout {
        Layout {
            cache_dir: dir.join("cache"),
            state_dir: dir.join("state"),
            ports: Default::default(),
            host_ports: Default::default(),
        }
    }

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
        assert!(!stop_pid(Component::Etcd, pid, &l.etcd()).unwrap());
        assert!(child.try_wait().unwrap().is_none(), "sleep must still run");
        // Recorded with its real binary: stopped.
        let sleep = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
        let stopper = std::thread::spawn(move || stop_pid(Component::Etcd, pid, &sleep));
        let status = child.wait().unwrap();
        assert!(stopper.join().unwrap().unwrap());
        assert!(!status.success());
    }

    #[test]
    fn port_in_use_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let mut l = layout(dir.path());
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        l.ports.scheduler = taken.local_addr().unwrap().port();
        // Other default ports may be in use by a running dev cluster; give them free ports.
        let free = || {
            TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port()
        };
        l.ports.etcd_client = free();
        l.ports.etcd_peer = free();
        l.ports.apiserver = free();
        l.ports.controller_manager = free();
        l.ports.kwok = free();
        let err = check_ports(&l).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains(&format!("127.0.0.1:{}", l.ports.scheduler)),
            "{text}"
        );
        assert!(text.contains("kube-scheduler"), "{text}");
        assert_eq!(err.category(), "PortInUse");
    }

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

    #[test]
    fn env_lines_quote_paths() {
        let l = layout(Path::new("/tmp/with space"));
        let text = env_lines(&l);
        assert_eq!(
            text,
            "export KUBECONFIG='/tmp/with space/state/kubeconfig'\nexport PATH='/tmp/with space/cache/bin/k8s-v1.36.3':\"$PATH\"\n"
        );
    }

    #[test]
    fn kubeconfig_embeds_certificates() {
        let dir = tempfile::tempdir().unwrap();
        let l = layout(dir.path());
        pki::ensure_pki(&l).unwrap();
        let yaml = kubeconfig_yaml(&l).unwrap();
        assert!(yaml.contains("server: https://127.0.0.1:28443"), "{yaml}");
        assert!(yaml.contains("client-key-data: "), "{yaml}");
        assert!(
            !yaml.contains("BEGIN"),
            "PEM must be base64-encoded: {yaml}"
        );
    }
}
