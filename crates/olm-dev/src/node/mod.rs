//! The real node (`olm dev cluster up --real-node`): one kubelet node running real containers
//! next to kwok's fake one. containerd (Debian's, with runc and the CNI plugins), kubelet and
//! kube-proxy (built like the control plane) run as host processes with everything under
//! `<state>/node/`: containerd's socket, root and state, kubelet's root, the bridge CNI network,
//! certificates from the cluster CA. The pause image is compiled here; pods pull from the dev
//! registry (plain HTTP) through containerd's `hosts.toml`.
//!
//! Which pods run where: the node is tainted `olm.dev/real-node=true:NoSchedule` and labelled
//! `olm.dev/node=real`; kwok's node keeps `type=kwok`. A pod opts in with a toleration for the
//! taint and the node selector; everything else (operators whose images cannot exist here) stays
//! on kwok. See docs/real-node.md.

pub(crate) mod apiserver;
mod config;
mod host;
mod pause;
mod paths;
mod teardown;

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::kubeconfig::kubectl;
use crate::error::{DevError, Result};
use crate::layout::{Layout, create_dir_all, write_private};
use crate::pki::CertificateAuthority;
use crate::process::{
    ProcessState, process_runs, read_pid, spawn_logged, stop_pid, wait_until_healthy,
};
use crate::run::{Progress, format_duration};
use paths::{NodeNetwork, NodePaths};

pub(crate) use apiserver::real_node_ip;

/// The real node's name.
pub const REAL_NODE_NAME: &str = "olm-dev-real-node";
/// Key of the NoSchedule taint on the real node; a pod tolerates it to run there.
pub const REAL_NODE_TAINT_KEY: &str = "olm.dev/real-node";
/// Label of the real node; a pod selects it to run nowhere else.
pub const REAL_NODE_LABEL: (&str, &str) = ("olm.dev/node", "real");

/// `key=value` namespace annotations that send every pod of a namespace to the real node
/// (honoured by the API server's PodNodeSelector and PodTolerationRestriction plugins), for
/// `kubectl annotate namespace NS …`.
pub fn real_node_namespace_annotations() -> [String; 2] {
    let (label, value) = REAL_NODE_LABEL;
    [
        format!("scheduler.alpha.kubernetes.io/node-selector={label}={value}"),
        format!(
            "scheduler.alpha.kubernetes.io/defaultTolerations=[{{\"key\":\"{REAL_NODE_TAINT_KEY}\",\"operator\":\"Exists\",\"effect\":\"NoSchedule\"}}]"
        ),
    ]
}

/// One process of the real node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeProcess {
    Containerd,
    Kubelet,
    KubeProxy,
    CoreDns,
}

impl NodeProcess {
    /// In start order; stopped in reverse (kubelet first, see [`stop_node`]).
    pub const ALL: [NodeProcess; 4] = [
        NodeProcess::Containerd,
        NodeProcess::Kubelet,
        NodeProcess::KubeProxy,
        NodeProcess::CoreDns,
    ];

    /// Name of its pid and log files.
    pub fn name(self) -> &'static str {
        match self {
            NodeProcess::Containerd => "containerd",
            NodeProcess::Kubelet => "kubelet",
            NodeProcess::KubeProxy => "kube-proxy",
            NodeProcess::CoreDns => "coredns",
        }
    }

    fn binary(self, layout: &Layout) -> PathBuf {
        match self {
            NodeProcess::Containerd => PathBuf::from(host::CONTAINERD),
            NodeProcess::Kubelet => layout.kubelet(),
            NodeProcess::KubeProxy => layout.kube_proxy(),
            NodeProcess::CoreDns => layout.coredns(),
        }
    }

    fn args(self, paths: &NodePaths, net: &NodeNetwork) -> Vec<String> {
        match self {
            NodeProcess::Containerd => {
                vec![format!("--config={}", paths.containerd_config().display())]
            }
            NodeProcess::Kubelet => config::kubelet_args(paths, net),
            NodeProcess::KubeProxy => {
                vec![format!("--config={}", paths.kube_proxy_config().display())]
            }
            NodeProcess::CoreDns => vec![format!("-conf={}", paths.corefile().display())],
        }
    }

    /// One health check: containerd accepts on its socket, the others answer /healthz
    /// (CoreDNS: /health).
    fn probe(self, paths: &NodePaths, net: &NodeNetwork) -> (bool, String) {
        let http = |port: u16, path: &str| match crate::probe::get(port, path, None) {
            Ok((200, _)) => (true, format!("GET {path} 200 on 127.0.0.1:{port}")),
            Ok((code, body)) => (false, format!("GET {path} {code}: {body}")),
            Err(e) => (false, e),
        };
        match self {
            NodeProcess::Containerd => {
                let socket = paths.containerd_socket();
                match std::os::unix::net::UnixStream::connect(&socket) {
                    Ok(_) => (true, format!("accepts on {}", socket.display())),
                    Err(e) => (false, format!("connect {}: {e}", socket.display())),
                }
            }
            NodeProcess::Kubelet => http(net.kubelet_healthz_port, "/healthz"),
            NodeProcess::KubeProxy => http(net.kube_proxy_healthz_port, "/healthz"),
            NodeProcess::CoreDns => http(net.dns_health_port, "/health"),
        }
    }
}

/// Everything a real node needs before the control plane starts: root, the Debian packages,
/// kubelet/kube-proxy/crictl built, and the node IP recorded (the API server's arguments depend
/// on it). Returns whether the recorded IP changed, i.e. a running API server must restart.
pub(crate) fn prepare(layout: &Layout, progress: &Progress) -> Result<bool> {
    host::require_root()?;
    host::ensure_packages(layout, progress)?;
    crate::builder::ensure_node_built(layout, progress)?;
    let ip = host::node_ip()?;
    let paths = NodePaths::new(layout);
    let changed = real_node_ip(layout) != Some(ip);
    if changed {
        create_dir_all(&paths.root)?;
        let file = paths.node_ip_file();
        std::fs::write(&file, format!("{ip}\n")).map_err(|e| DevError::io("write", &file, e))?;
    }
    Ok(changed)
}

/// Writes the node's certificates and configuration files (every start: they are cheap and a
/// changed registry port or node IP must reach them).
fn write_files(layout: &Layout, paths: &NodePaths, net: &NodeNetwork) -> Result<()> {
    for dir in [
        paths.root.join("pki"),
        paths.cni_conf_dir(),
        paths.cni_ipam_dir(),
        paths.kubelet_dir(),
        paths.pod_logs_dir(),
        paths.containerd_root(),
        paths.containerd_state(),
    ] {
        create_dir_all(&dir)?;
    }
    if !paths.pki_file("kubelet.key").is_file() || !paths.pki_file("kube-proxy.key").is_file() {
        let ca = CertificateAuthority::cluster_ca(layout)?;
        // The Node authorizer knows a kubelet by this user and group.
        let kubelet = ca.issue_client(&format!("system:node:{REAL_NODE_NAME}"), &["system:nodes"])?;
        // Bound to ClusterRole system:node-proxier by a default binding.
        let proxy = ca.issue_client("system:kube-proxy", &[])?;
        for (name, cert) in [("kubelet", kubelet), ("kube-proxy", proxy)] {
            write_private(&paths.pki_file(&format!("{name}.crt")), &cert.cert_pem)?;
            write_private(&paths.pki_file(&format!("{name}.key")), &cert.key_pem)?;
        }
    }
    let server = layout.apiserver_url();
    for (user, kubeconfig) in [
        ("kubelet", paths.kubelet_kubeconfig()),
        ("kube-proxy", paths.kube_proxy_kubeconfig()),
    ] {
        let text = config::kubeconfig(
            &server,
            &paths.ca_cert,
            &paths.pki_file(&format!("{user}.crt")),
            &paths.pki_file(&format!("{user}.key")),
            user,
        );
        write_if_changed(&kubeconfig, &text)?;
    }
    let registry_port = layout.host_ports.registry;
    for host in [
        format!("127.0.0.1:{registry_port}"),
        format!("localhost:{registry_port}"),
    ] {
        let dir = paths.certs_d().join(&host);
        create_dir_all(&dir)?;
        write_if_changed(&dir.join("hosts.toml"), &config::registry_hosts_toml(&host))?;
    }
    let mirror = paths.certs_d().join("_default");
    create_dir_all(&mirror)?;
    write_if_changed(&mirror.join("hosts.toml"), &config::default_mirror_hosts_toml(&format!("127.0.0.1:{registry_port}")))?;
    let files = [
        (
            paths.containerd_config(),
            config::containerd_config(paths, &pause::pause_image()),
        ),
        (
            paths.cni_conf_dir().join("10-olm-dev.conflist"),
            config::cni_conflist(paths, net),
        ),
        (paths.kubelet_config(), config::kubelet_config(paths, net)),
        (paths.kube_proxy_config(), config::kube_proxy_config(paths, net)),
        (paths.corefile(), config::corefile(net, &layout.kubeconfig())),
    ];
    for (path, text) in files {
        write_if_changed(&path, &text)?;
    }
    Ok(())
}

/// Writes `text` unless the file already holds it: kube-proxy exits when its configuration
/// file changes, even to the same bytes, so an idempotent `up` must leave it untouched.
fn write_if_changed(path: &std::path::Path, text: &str) -> Result<()> {
    if std::fs::read_to_string(path).is_ok_and(|current| current == text) {
        return Ok(());
    }
    write_private(path, text)
}

/// Starts containerd, kubelet and kube-proxy (those not already running) once the control
/// plane is up, and waits until the node is Ready. On failure, stops what this call started.
pub(crate) fn start_node(layout: &Layout, progress: &Progress) -> Result<()> {
    let begin = Instant::now();
    let ip = real_node_ip(layout).ok_or_else(|| DevError::UnexpectedOutput {
        command: "olm dev cluster up --real-node".into(),
        reason: "the node IP was not recorded (internal error: prepare was not called)".into(),
    })?;
    let paths = NodePaths::new(layout);
    let net = NodeNetwork::new(layout, ip);
    write_files(layout, &paths, &net)?;
    pause::ensure_pause_archive(layout, &paths, progress)?;

    let mut started: Vec<StartedProcess> = Vec::new();
    let result = start_processes(layout, progress, &paths, &net, &mut started);
    if let Err(err) = result {
        progress.say("real node start failed; stopping what this run started");
        for mut s in started.into_iter().rev() {
            let process = s.process;
            let _ = stop_pid(process.name(), s.child.id(), &process.binary(layout));
            let _ = s.child.kill();
            let _ = s.child.wait();
            let _ = std::fs::remove_file(layout.pid_file(process.name()));
        }
        return Err(err);
    }
    progress.say(format!(
        "real node {REAL_NODE_NAME} Ready ({} since its processes started; IP {ip}, pods {}, bridge {})",
        format_duration(begin.elapsed()),
        net.pod_subnet,
        net.bridge
    ));
    Ok(())
}

/// A node process started by this `up`, kept so a failed `up` can stop and reap it.
struct StartedProcess {
    process: NodeProcess,
    child: std::process::Child,
}

/// The recorded pid of `process` if it runs now.
fn running_pid(layout: &Layout, process: NodeProcess) -> Option<u32> {
    let pid = read_pid(&layout.pid_file(process.name())).ok()??;
    process_runs(pid, &process.binary(layout)).then_some(pid)
}

fn start_processes(
    layout: &Layout,
    progress: &Progress,
    paths: &NodePaths,
    net: &NodeNetwork,
    started: &mut Vec<StartedProcess>,
) -> Result<()> {
    for process in NodeProcess::ALL {
        let t = Instant::now();
        if let Some(pid) = running_pid(layout, process) {
            let (healthy, detail) = process.probe(paths, net);
            if healthy {
                progress.say(format!("{} already running (pid {pid})", process.name()));
                continue;
            }
            // Never leave a second copy running beside one whose pid file we overwrite.
            progress.say(format!(
                "{} (pid {pid}) runs but is not healthy ({detail}); restarting it",
                process.name()
            ));
            stop_pid(process.name(), pid, &process.binary(layout))?;
        }
        let mut cmd = std::process::Command::new(process.binary(layout));
        cmd.args(process.args(paths, net))
            .current_dir(&paths.root)
            .env_remove("KUBECONFIG");
        let log = layout.log_file(process.name());
        let (child, command) = spawn_logged(
            cmd,
            &log,
            Some(&layout.pid_file(process.name())),
            true,
        )?;
        started.push(StartedProcess { process, child });
        let Some(current) = started.last_mut() else {
            continue;
        };
        wait_until_healthy(
            process.name(),
            &mut current.child,
            &command,
            &log,
            Duration::from_secs(90),
            || process.probe(paths, net),
        )?;
        progress.say(format!(
            "{} healthy ({})",
            process.name(),
            format_duration(t.elapsed())
        ));
        if process == NodeProcess::Containerd {
            pause::import_pause(paths, &log.with_file_name("pause-import.log"), progress)?;
        }
    }
    let t = Instant::now();
    wait_node_ready(layout, Duration::from_secs(120))?;
    progress.say(format!(
        "node {REAL_NODE_NAME} Ready ({})",
        format_duration(t.elapsed())
    ));
    Ok(())
}

/// Polls the node until its Ready condition is True.
fn wait_node_ready(layout: &Layout, timeout: Duration) -> Result<()> {
    let begin = Instant::now();
    loop {
        let last = match node_ready(layout) {
            Ok(true) => return Ok(()),
            Ok(false) => "Ready is not True".to_string(),
            Err(e) => e,
        };
        if begin.elapsed() > timeout {
            let log = layout.log_file(NodeProcess::Kubelet.name());
            return Err(DevError::Timeout {
                what: format!("node {REAL_NODE_NAME} to be Ready"),
                timeout_secs: timeout.as_secs(),
                last: format!(
                    "{last}\n--- last lines of {} ---\n{}",
                    log.display(),
                    crate::run::tail_file(&log, 20)
                ),
            });
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// Whether the node is Ready, from the API.
fn node_ready(layout: &Layout) -> std::result::Result<bool, String> {
    let out = kubectl(
        layout,
        &[
            "get",
            "node",
            REAL_NODE_NAME,
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
        ],
        None,
    )?;
    Ok(out.trim() == "True")
}

/// One node process in `olm dev status`.
#[derive(Debug, Clone)]
pub struct NodeProcessStatus {
    pub process: NodeProcess,
    pub pid: Option<u32>,
    pub state: ProcessState,
    pub healthy: bool,
    pub detail: String,
}

/// The real node in `olm dev status`.
#[derive(Debug, Clone)]
pub struct RealNodeStatus {
    pub node_ip: Ipv4Addr,
    pub processes: Vec<NodeProcessStatus>,
    /// `None` when the API server cannot be asked.
    pub ready: Option<bool>,
    pub detail: String,
}

impl RealNodeStatus {
    pub fn healthy(&self) -> bool {
        self.processes.iter().all(|p| p.healthy) && self.ready == Some(true)
    }
}

/// The real node's processes and Ready condition; `None` when the environment has none.
pub(crate) fn node_status(layout: &Layout, api_healthy: bool) -> Option<RealNodeStatus> {
    let node_ip = real_node_ip(layout)?;
    let paths = NodePaths::new(layout);
    let net = NodeNetwork::new(layout, node_ip);
    let processes = NodeProcess::ALL
        .iter()
        .map(|&process| {
            let pid = read_pid(&layout.pid_file(process.name())).ok().flatten();
            let state = match pid {
                None => ProcessState::NotStarted,
                Some(pid) if process_runs(pid, &process.binary(layout)) => ProcessState::Running,
                Some(_) => ProcessState::Gone,
            };
            let (healthy, detail) = if state == ProcessState::Running {
                process.probe(&paths, &net)
            } else {
                (false, "not running".into())
            };
            NodeProcessStatus { process, pid, state, healthy, detail }
        })
        .collect();
    let (ready, detail) = if !api_healthy {
        (None, "unknown (API server not healthy)".to_string())
    } else {
        match node_ready(layout) {
            Ok(true) => (Some(true), format!("Ready (IP {node_ip}, pods {})", net.pod_subnet)),
            Ok(false) => (Some(false), "not Ready".to_string()),
            Err(e) => (Some(false), e),
        }
    };
    Some(RealNodeStatus { node_ip, processes, ready, detail })
}

/// Stops the real node and removes what it created on the host: kubelet first (so it restarts
/// nothing), then every pod sandbox through the CRI (the CNI plugin deletes veths and rules),
/// kube-proxy and its iptables chains, containerd, then mounts, the bridge and leftover rules.
/// With `purge` the whole node directory goes (images included); without it containerd's
/// images stay for the next start. Returns the stopped processes and what was removed.
pub(crate) fn stop_node(layout: &Layout, progress: &Progress, purge: bool) -> Result<NodeDownReport> {
    let paths = NodePaths::new(layout);
    let mut stopped = Vec::new();
    let mut removed = Vec::new();
    let ip = real_node_ip(layout);
    let stop = |process: NodeProcess, stopped: &mut Vec<(&'static str, u32)>| -> Result<()> {
        let pid_path = layout.pid_file(process.name());
        if let Some(pid) = read_pid(&pid_path)? {
            if stop_pid(process.name(), pid, &process.binary(layout))? {
                progress.say(format!("stopped {} (pid {pid})", process.name()));
                stopped.push((process.name(), pid));
            }
            std::fs::remove_file(&pid_path).map_err(|e| DevError::io("remove", &pid_path, e))?;
        }
        Ok(())
    };
    stop(NodeProcess::Kubelet, &mut stopped)?;
    stop(NodeProcess::CoreDns, &mut stopped)?;
    if running_pid(layout, NodeProcess::Containerd).is_some() {
        teardown::remove_pod_sandboxes(layout, &paths, &mut removed);
    }
    stop(NodeProcess::KubeProxy, &mut stopped)?;
    if ip.is_some() {
        teardown::cleanup_kube_proxy(layout, &mut removed);
    }
    stop(NodeProcess::Containerd, &mut stopped)?;
    teardown::kill_leftover_shims(&paths, &mut removed);
    teardown::unmount_all(&paths, &mut removed);
    if ip.is_some() {
        teardown::remove_kubepods_cgroups(&mut removed);
    }
    if let Some(ip) = ip {
        teardown::remove_network(&NodeNetwork::new(layout, ip), &mut removed);
        teardown::remove_kubelet_chains(&mut removed);
        teardown::remove_container_log_links(&paths, &mut removed);
    }
    let doomed = if purge {
        vec![paths.root.clone()]
    } else {
        vec![
            paths.node_ip_file(),
            paths.kubelet_dir(),
            paths.containerd_state(),
            paths.cni_ipam_dir(),
            paths.pod_logs_dir(),
        ]
    };
    for path in doomed {
        let result = if path.is_dir() {
            std::fs::remove_dir_all(&path)
        } else if path.exists() {
            std::fs::remove_file(&path)
        } else {
            Ok(())
        };
        result.map_err(|e| DevError::io("remove", &path, e))?;
    }
    for line in &removed {
        progress.say(format!("removed {line}"));
    }
    Ok(NodeDownReport { stopped, removed })
}

/// What [`stop_node`] did.
#[derive(Debug, Default)]
pub(crate) struct NodeDownReport {
    /// Processes stopped, by name, with their pids.
    pub(crate) stopped: Vec<(&'static str, u32)>,
    /// What was removed from the host, in words.
    pub(crate) removed: Vec<String>,
}
