//! End to end on a private local control plane (olm-dev's, on other ports and its own state
//! directory, so the shared `olm dev up` cluster and its controllers are not touched):
//! upstream's `catalog` + `olm` operators with `opm serve`, then ours (`olm run` + `olm catalog
//! serve`), each with its own CRDs, one after the other. Measures Subscription → CSV Succeeded
//! for etcd (channel head of singlenamespace-alpha) and the controllers' RSS.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::serve::{free_port, memory_mib};
use crate::tools::Tools;

const GLOBAL_NAMESPACE: &str = "olm";
const TARGET_CSV: &str = "etcdoperator.v0.9.4";

pub struct Side {
    pub label: &'static str,
    /// Subscription created → CSV Succeeded.
    pub install: Duration,
    /// (process label, RSS MiB) after the CSV succeeded.
    pub rss: Vec<(String, f64)>,
}

pub struct E2e {
    pub upstream: Result<Side, String>,
    pub ours: Result<Side, String>,
    pub cluster_up: Duration,
}

struct Proc {
    label: String,
    child: Child,
}

impl Proc {
    fn spawn(label: &str, cmd: &mut Command, log: &Path) -> anyhow::Result<Proc> {
        let child = cmd
            .stdin(Stdio::null())
            .stdout(File::create(log)?)
            .stderr(File::create(log.with_extension("err"))?)
            .spawn()
            .with_context(|| format!("starting {label}"))?;
        Ok(Proc { label: label.to_string(), child })
    }
    fn rss(&self) -> f64 {
        memory_mib(self.child.id()).map(|(rss, _)| rss).unwrap_or(f64::NAN)
    }
    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        for _ in 0..100 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn layout(work: &Path) -> anyhow::Result<olm_dev::Layout> {
    let mut layout = olm_dev::Layout::from_env().context("olm-dev layout")?;
    layout.state_dir = work.join("cluster");
    // A port base of its own: `olm dev up` uses 28000 and olm-dev's tests other bases (29000 among
    // them), and a second cluster on the same ports would talk to the wrong apiserver.
    const PORT_BASE: u16 = 47000;
    layout.ports = olm_dev::Ports::from_base(PORT_BASE).context("port base out of range")?;
    for port in [layout.ports.etcd_client, layout.ports.etcd_peer, layout.ports.apiserver, layout.ports.kwok] {
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_err() {
            bail!("port {port} (base {PORT_BASE}) is in use; the private control plane needs the range free");
        }
    }
    Ok(layout)
}

fn kubectl(layout: &olm_dev::Layout, args: &[&str], stdin: Option<&str>) -> anyhow::Result<String> {
    olm_dev::kubectl(layout, args, stdin).map_err(|e| anyhow::anyhow!("kubectl {}: {e}", args.join(" ")))
}

fn wait_for(what: &str, timeout: Duration, mut check: impl FnMut() -> anyhow::Result<bool>) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        if check()? {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("timed out after {} s waiting for {what}", timeout.as_secs());
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn manifests(namespace: &str, grpc_addr: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Namespace
metadata: {{name: {namespace}}}
---
apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata: {{name: community-{namespace}, namespace: {GLOBAL_NAMESPACE}}}
spec: {{sourceType: grpc, address: "{grpc_addr}", displayName: bench}}
---
apiVersion: operators.coreos.com/v1
kind: OperatorGroup
metadata: {{name: og, namespace: {namespace}}}
spec: {{targetNamespaces: [{namespace}]}}
"#
    )
}

fn subscription(namespace: &str) -> String {
    format!(
        r#"apiVersion: operators.coreos.com/v1alpha1
kind: Subscription
metadata: {{name: etcd, namespace: {namespace}}}
spec: {{name: etcd, channel: singlenamespace-alpha, source: community-{namespace}, sourceNamespace: {GLOBAL_NAMESPACE}, installPlanApproval: Automatic}}
"#
    )
}

/// Create the Subscription and time it until the CSV reports Succeeded, read from a
/// `kubectl get csv -w` stream started before the Subscription exists.
fn time_install(layout: &olm_dev::Layout, namespace: &str, procs: &mut [Proc], timeout: Duration) -> anyhow::Result<Duration> {
    let kubectl_bin = kubectl_path(layout)?;
    let mut child = Command::new(&kubectl_bin)
        .arg(format!("--kubeconfig={}", layout.kubeconfig().display()))
        .args(["get", "csv", "-n", namespace, "-w", "-o", "jsonpath={.metadata.name} {.status.phase}{\"\\n\"}"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("starting kubectl get csv -w")?;
    let stdout = child.stdout.take().context("kubectl stdout")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    // Give the watch a moment to be established before the clock starts.
    std::thread::sleep(Duration::from_millis(500));
    let start = Instant::now();
    kubectl(layout, &["apply", "-f", "-"], Some(&subscription(namespace)))?;
    let deadline = start + timeout;
    let result = loop {
        match rx.recv_timeout(Duration::from_millis(500)) {
            Ok(line) if line.trim() == format!("{TARGET_CSV} Succeeded") => break Ok(start.elapsed()),
            Ok(_) => {}
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break Err(anyhow::anyhow!("kubectl watch ended")),
        }
        if let Some(dead) = procs.iter_mut().find_map(|p| (!p.alive()).then(|| p.label.clone())) {
            break Err(anyhow::anyhow!("{dead} exited during the install"));
        }
        if Instant::now() > deadline {
            let state = kubectl(layout, &["get", "sub,ip,csv", "-n", namespace, "-o", "wide"], None).unwrap_or_default();
            break Err(anyhow::anyhow!("{TARGET_CSV} not Succeeded after {} s; state:\n{state}", timeout.as_secs()));
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    result
}

fn kubectl_path(layout: &olm_dev::Layout) -> anyhow::Result<PathBuf> {
    let dir = layout.cache_dir.join(format!("bin/k8s-{}", olm_dev::KUBERNETES_VERSION));
    let p = dir.join("kubectl");
    if p.exists() { Ok(p) } else { bail!("kubectl not found at {}", p.display()) }
}

fn wait_catalog_ready(layout: &olm_dev::Layout, namespace: &str) -> anyhow::Result<()> {
    wait_for("the CatalogSource to be READY", Duration::from_secs(120), || {
        let state = kubectl(
            layout,
            &["get", "catalogsource", &format!("community-{namespace}"), "-n", GLOBAL_NAMESPACE, "-o", "jsonpath={.status.connectionState.lastObservedState}"],
            None,
        )
        .unwrap_or_default();
        Ok(state.trim() == "READY")
    })
}

fn apply_dir(layout: &olm_dev::Layout, dir: &Path) -> anyhow::Result<()> {
    kubectl(layout, &["apply", "--server-side", "--force-conflicts", "-f", &dir.to_string_lossy()], None)?;
    kubectl(layout, &["wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"], None)?;
    Ok(())
}

fn delete_etcd_crds(layout: &olm_dev::Layout) {
    if let Ok(names) = kubectl(layout, &["get", "crd", "-o", "name"], None) {
        for n in names.lines().filter(|n| n.contains("etcd.database.coreos.com") || n.contains("operators.coreos.com")) {
            let _ = kubectl(layout, &["delete", n, "--wait=true", "--timeout=60s"], None);
        }
    }
}

/// Delete the namespace while the controllers still run (they remove their own finalizers, e.g.
/// upstream's csv-cleanup), then stop them, then drop whatever finalizers are left so the CRDs
/// can go.
fn cleanup(layout: &olm_dev::Layout, ns: &str, procs: Vec<Proc>) {
    let _ = kubectl(layout, &["delete", "namespace", ns, "--wait=true", "--timeout=60s"], None);
    let _ = kubectl(layout, &["delete", "catalogsource", "--all", "-n", GLOBAL_NAMESPACE, "--timeout=30s"], None);
    drop(procs);
    for kind in ["csv", "subscription", "installplan", "operatorgroup", "operatorcondition"] {
        if let Ok(names) = kubectl(layout, &["get", kind, "-A", "-o", "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}{\"\\n\"}{end}"], None) {
            for item in names.lines().filter(|l| !l.is_empty()) {
                if let Some((n, name)) = item.split_once('/') {
                    let _ = kubectl(layout, &["patch", kind, name, "-n", n, "--type=merge", "-p", r#"{"metadata":{"finalizers":null}}"#], None);
                }
            }
        }
    }
    delete_etcd_crds(layout);
}

fn upstream(tools: &Tools, layout: &olm_dev::Layout, work: &Path, catalog_dir: &Path) -> anyhow::Result<Side> {
    let olm_dir = upstream_module_dir(tools)?;
    apply_dir(layout, &olm_dir.join("deploy/chart/crds"))?;
    let ns = "e2e-upstream";
    kubectl(layout, &["create", "namespace", GLOBAL_NAMESPACE], None).ok();
    let grpc_port = free_port()?;
    let kubeconfig = layout.kubeconfig();
    let bin = &tools.upstream_operators;
    let mut procs = vec![
        Proc::spawn(
            "opm serve",
            Command::new(&tools.opm)
                .arg("serve")
                .arg(catalog_dir)
                .args(["-p", &grpc_port.to_string(), "--pprof-addr", &format!("127.0.0.1:{}", free_port()?), "-t"])
                .arg(work.join("e2e-opm.termination.log")),
            &work.join("e2e-opm.log"),
        )?,
        // Both upstream operators listen on a fixed port for health/metrics (:8080, or :8443 with
        // TLS); the olm operator gets TLS (the private cluster's serving certificate) so they do
        // not collide.
        Proc::spawn(
            "upstream olm operator",
            Command::new(bin.join("olm"))
                .env("KUBECONFIG", &kubeconfig)
                .args(["--namespace", GLOBAL_NAMESPACE, "--writeStatusName", "", "--writePackageServerStatusName", ""])
                .arg("--tls-cert")
                .arg(layout.pki_file("apiserver.crt"))
                .arg("--tls-key")
                .arg(layout.pki_file("apiserver.key")),
            &work.join("e2e-upstream-olm.log"),
        )?,
        Proc::spawn(
            "upstream catalog operator",
            Command::new(bin.join("catalog"))
                .env("KUBECONFIG", &kubeconfig)
                .arg(format!("--kubeconfig={}", kubeconfig.display()))
                .args(["--namespace", GLOBAL_NAMESPACE, "--writeStatusName", ""]),
            &work.join("e2e-upstream-catalog.log"),
        )?,
    ];
    kubectl(layout, &["apply", "-f", "-"], Some(&manifests(ns, &format!("127.0.0.1:{grpc_port}"))))?;
    wait_catalog_ready(layout, ns)?;
    let install = time_install(layout, ns, &mut procs, Duration::from_secs(300))?;
    std::thread::sleep(Duration::from_secs(2));
    let rss = procs.iter().map(|p| (p.label.clone(), p.rss())).collect();
    cleanup(layout, ns, procs);
    Ok(Side { label: "upstream (olm + catalog operators, opm serve)", install, rss })
}

fn ours(tools: &Tools, layout: &olm_dev::Layout, work: &Path, catalog_dir: &Path) -> anyhow::Result<Side> {
    let crd_dir = work.join("our-crds");
    let out = Command::new(&tools.olm).args(["crds", "--output-dir"]).arg(&crd_dir).output()?;
    if !out.status.success() {
        bail!("olm crds failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    apply_dir(layout, &crd_dir)?;
    let ns = "e2e-ours";
    kubectl(layout, &["create", "namespace", GLOBAL_NAMESPACE], None).ok();
    let grpc_port = free_port()?;
    let kubeconfig = layout.kubeconfig();
    let mut procs = vec![
        Proc::spawn(
            "olm catalog serve",
            Command::new(&tools.olm)
                .args(["catalog", "serve", "--http-addr", "none", "--reload-interval", "0", "--grpc-addr", &format!("127.0.0.1:{grpc_port}")])
                .arg(format!("--catalog=community={}", catalog_dir.display())),
            &work.join("e2e-ours-catalog.log"),
        )?,
        Proc::spawn(
            "olm run",
            Command::new(&tools.olm)
                .args(["run", "--namespace", GLOBAL_NAMESPACE, "--metrics-addr", &format!("127.0.0.1:{}", free_port()?)])
                .arg("--kubeconfig")
                .arg(&kubeconfig),
            &work.join("e2e-ours-run.log"),
        )?,
    ];
    kubectl(layout, &["apply", "-f", "-"], Some(&manifests(ns, &format!("127.0.0.1:{grpc_port}"))))?;
    wait_catalog_ready(layout, ns)?;
    let install = time_install(layout, ns, &mut procs, Duration::from_secs(300))?;
    std::thread::sleep(Duration::from_secs(2));
    let rss = procs.iter().map(|p| (p.label.clone(), p.rss())).collect();
    cleanup(layout, ns, procs);
    Ok(Side { label: "ours (olm run, olm catalog serve)", install, rss })
}

fn upstream_module_dir(tools: &Tools) -> anyhow::Result<PathBuf> {
    let home = std::env::var_os("HOME").context("HOME")?;
    let dir = PathBuf::from(home)
        .join(".cache/olm-dev/go/mod/github.com/operator-framework")
        .join(format!("operator-lifecycle-manager@{}", tools.olm_upstream_version));
    if dir.is_dir() { Ok(dir) } else { bail!("{} missing (the resolver driver build downloads it)", dir.display()) }
}

pub fn run(tools: &Tools, work: &Path) -> anyhow::Result<E2e> {
    let layout = layout(work)?;
    let progress = olm_dev::Progress::quiet();
    let t = Instant::now();
    olm_dev::up(&layout, &progress).context("starting the private control plane")?;
    let cluster_up = t.elapsed();
    let catalog_dir = tools.workspace.join("catalogs/community");
    let upstream = upstream(tools, &layout, work, &catalog_dir).map_err(|e| format!("{e:#}"));
    let ours = ours(tools, &layout, work, &catalog_dir).map_err(|e| format!("{e:#}"));
    let _ = olm_dev::down(&layout, &progress, true);
    Ok(E2e { upstream, ours, cluster_up })
}
