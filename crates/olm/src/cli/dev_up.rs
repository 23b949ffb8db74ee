//! `olm dev up|down|status|env`: the local control plane plus OLM itself, with the OLM
//! components (catalog server, controllers, package server) running as host processes wired
//! to it: the CatalogSource points at the host catalog server, the APIService reaches the host
//! package server through an ExternalName Service to 127.0.0.1. Next to them runs a local OCI
//! registry (olm-dev's, plain HTTP), named by `OLM_DEV_REGISTRY` in `olm dev env`.

use std::fs::OpenOptions;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use base64::Engine as _;
use olm_dev::{Layout, Progress, format_duration};
use super::manifests::USER_ROLES;

// Host ports (catalog gRPC/HTTP, controllers admin, package server) come from the layout's
// port base (`OLM_DEV_PORT_BASE`), next to the control plane's.
pub const APISERVICE: &str = "v1.packages.operators.coreos.com";
/// The CatalogSource `olm dev up` creates.
pub const CATALOG_NAME: &str = "community";

/// One OLM host process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostProcess {
    /// `olm catalog serve`.
    Catalog,
    /// `olm run`.
    Controllers,
    /// `olm packageserver`.
    PackageServer,
}

impl HostProcess {
    /// In start order.
    pub const ALL: [HostProcess; 3] = [HostProcess::Catalog, HostProcess::Controllers, HostProcess::PackageServer];

    /// Name of its pid and log files.
    pub fn name(self) -> &'static str {
        match self {
            HostProcess::Catalog => "olm-catalog",
            HostProcess::Controllers => "olm-controllers",
            HostProcess::PackageServer => "olm-packageserver",
        }
    }

    /// The `olm` subcommand it runs (its first argument).
    fn subcommand(self) -> &'static str {
        match self {
            HostProcess::Catalog => "catalog",
            HostProcess::Controllers => "run",
            HostProcess::PackageServer => "packageserver",
        }
    }
}

/// Files of the OLM side under the olm-dev state directory.
fn olm_dir(layout: &Layout) -> PathBuf {
    layout.state_dir.join("olm")
}

fn read_pid(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn current_exe() -> anyhow::Result<PathBuf> {
    std::env::current_exe().context("cannot find the path of this olm binary")
}

/// The pid of `process` when it runs (from this binary).
pub fn running_pid(layout: &Layout, process: HostProcess) -> Option<u32> {
    let pid = read_pid(&layout.pid_file(process.name()))?;
    let exe = current_exe().ok()?;
    // A rebuilt binary has the same path; /proc/<pid>/exe then ends in " (deleted)". Another
    // build (target/debug vs target/release, an installed copy) started it when the pid this
    // environment recorded runs an `olm` binary with the process's arguments: it is ours too.
    let runs = olm_dev::process_runs(pid, &exe) || proc_exe_is_deleted_olm(pid, &exe) || other_olm_build(pid, process).is_some();
    runs.then_some(pid)
}

/// The binary of `pid` when it is an `olm` other than this one running `process` (its first
/// argument, e.g. `run` or `packageserver`).
fn other_olm_build(pid: u32, process: HostProcess) -> Option<PathBuf> {
    let link = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
    let text = link.to_string_lossy();
    let path = PathBuf::from(text.strip_suffix(" (deleted)").unwrap_or(&text));
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let first_arg = cmdline.split(|b| *b == 0).nth(1).map(|a| String::from_utf8_lossy(a).into_owned())?;
    let is_olm = path.file_name().is_some_and(|n| n == "olm");
    (is_olm && first_arg == process.subcommand() && current_exe().is_ok_and(|exe| exe != path)).then_some(path)
}


fn proc_exe_is_deleted_olm(pid: u32, exe: &Path) -> bool {
    std::fs::read_link(format!("/proc/{pid}/exe"))
        .map(|link| link.to_string_lossy() == format!("{} (deleted)", exe.display()))
        .unwrap_or(false)
}

/// Where the bundled catalog is: `--catalog`, else `./catalogs/community`, else the one of the
/// source tree this binary was built from.
fn catalog_dir(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(dir) = explicit {
        if dir.is_dir() {
            return std::fs::canonicalize(dir).with_context(|| format!("cannot resolve {}", dir.display()));
        }
        bail!("--catalog {}: no such directory", dir.display());
    }
    let candidates = [
        PathBuf::from("catalogs/community"),
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../catalogs/community"),
    ];
    for dir in &candidates {
        if dir.is_dir() && std::fs::read_dir(dir).map(|mut d| d.next().is_some()).unwrap_or(false) {
            return std::fs::canonicalize(dir).with_context(|| format!("cannot resolve {}", dir.display()));
        }
    }
    bail!(
        "no catalog found at ./catalogs/community or {}: run from the repository root or pass --catalog DIR (a File-Based Catalog directory)",
        candidates[1].display()
    )
}

/// The serving certificate of the host package server, created once: (ca, cert path, key path).
fn packageserver_cert(layout: &Layout) -> anyhow::Result<(String, PathBuf, PathBuf)> {
    let dir = olm_dir(layout);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let (ca_path, cert_path, key_path) = (dir.join("packageserver-ca.crt"), dir.join("packageserver.crt"), dir.join("packageserver.key"));
    if !(ca_path.is_file() && cert_path.is_file() && key_path.is_file()) {
        let names = vec!["packageserver.olm.svc".to_owned(), "localhost".to_owned()];
        let (ca, cert) = olm_packageserver::serve::self_signed(&names).context("generating the package server certificate")?;
        std::fs::write(&cert_path, cert.cert_pem).with_context(|| format!("cannot write {}", cert_path.display()))?;
        std::fs::write(&key_path, cert.key_pem).with_context(|| format!("cannot write {}", key_path.display()))?;
        std::fs::write(&ca_path, ca).with_context(|| format!("cannot write {}", ca_path.display()))?;
    }
    let ca = std::fs::read_to_string(&ca_path).with_context(|| format!("cannot read {}", ca_path.display()))?;
    Ok((ca, cert_path, key_path))
}


/// What `olm dev up` applies besides the CRDs: the local counterpart of manifests/. Applied
/// with kubectl's default field manager, so that `kubectl apply --server-side -f manifests/`
/// on the same cluster takes the fields over instead of conflicting.
fn local_manifests(layout: &Layout, ca_pem: &str, catalog_image: &str) -> String {
    let packageserver_port = layout.host_ports.packageserver;
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        r#"{USER_ROLES}
---
apiVersion: v1
kind: Namespace
metadata:
  name: olm
---
apiVersion: v1
kind: Namespace
metadata:
  name: operators
---
apiVersion: operators.coreos.com/v1
kind: OperatorGroup
metadata:
  name: global-operators
  namespace: operators
---
apiVersion: operators.coreos.com/v1
kind: OperatorGroup
metadata:
  name: olm-operators
  namespace: olm
spec:
  targetNamespaces:
  - olm
---
apiVersion: operators.coreos.com/v1
kind: OLMConfig
metadata:
  name: cluster
---
apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata:
  name: {CATALOG_NAME}
  namespace: olm
spec:
  sourceType: grpc
  image: {catalog_image}
  displayName: Community Operators
  publisher: OLM (local)
  updateStrategy:
    registryPoll:
      interval: 1m
---
apiVersion: v1
kind: Service
metadata:
  name: packageserver
  namespace: olm
spec:
  type: ExternalName
  externalName: 127.0.0.1
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: {APISERVICE}
spec:
  group: packages.operators.coreos.com
  version: v1
  groupPriorityMinimum: 2000
  versionPriority: 15
  caBundle: {ca_bundle}
  service:
    namespace: olm
    name: packageserver
    port: {packageserver_port}
"#
    )
}

/// Push the bundled catalog as published catalogs are: each bundle an image, the catalog an
/// image naming them by digest. The same files give the same digests, so a second `up`
/// changes nothing.
fn push_bundled_catalog(layout: &Layout, catalog: &Path, catalog_image: &str, bundle_repo: &str) -> anyhow::Result<olm_image::mirror::Mirrored> {
    let cache = olm_dir(layout).join("image-cache");
    let client = olm_image::ImageClient::new(&cache, olm_image::RegistryConfig::default(), olm_image::Limits::default())?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the async runtime")?;
    let creds = olm_image::Credentials::anonymous();
    runtime
        .block_on(olm_image::mirror::push_catalog_with_bundles(&client, catalog, catalog_image, bundle_repo, &creds))
        .with_context(|| format!("pushing the catalog {} to the local registry", catalog.display()))
}

pub(super) fn kubectl(layout: &Layout, args: &[&str], stdin: Option<&str>) -> anyhow::Result<String> {
    olm_dev::kubectl(layout, args, stdin).map_err(|e| anyhow::anyhow!("kubectl {}: {e}", args.join(" ")))
}

fn start_process(layout: &Layout, process: HostProcess, args: &[String]) -> anyhow::Result<u32> {
    let exe = current_exe()?;
    std::fs::create_dir_all(layout.logs_dir()).with_context(|| format!("cannot create {}", layout.logs_dir().display()))?;
    std::fs::create_dir_all(layout.pids_dir()).with_context(|| format!("cannot create {}", layout.pids_dir().display()))?;
    let log_path = layout.log_file(process.name());
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .with_context(|| format!("cannot open {}", log_path.display()))?;
    let log_err = log.try_clone().with_context(|| format!("cannot open {}", log_path.display()))?;
    let child = Command::new(&exe)
        .args(args)
        .env("KUBECONFIG", layout.kubeconfig())
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err)
        // Its own process group: Ctrl-C in the terminal that ran `olm dev up` does not stop it.
        .process_group(0)
        .spawn()
        .with_context(|| format!("cannot start {} {}", exe.display(), args.join(" ")))?;
    let pid = child.id();
    let pid_path = layout.pid_file(process.name());
    std::fs::write(&pid_path, format!("{pid}\n")).with_context(|| format!("cannot write {}", pid_path.display()))?;
    // Reaped by nobody on purpose: the process outlives this command.
    std::mem::forget(child);
    Ok(pid)
}

fn process_args(layout: &Layout, process: HostProcess, catalog: &Path, cert: &Path, key: &Path) -> Vec<String> {
    let kubeconfig = layout.kubeconfig().display().to_string();
    match process {
        HostProcess::Catalog => vec![
            process.subcommand().into(),
            "serve".into(),
            format!("--catalog={CATALOG_NAME}={}", catalog.display()),
            format!("--http-addr=127.0.0.1:{}", layout.host_ports.catalog_http),
            format!("--grpc-addr=127.0.0.1:{}", layout.host_ports.catalog_grpc),
        ],
        HostProcess::Controllers => vec![
            process.subcommand().into(),
            format!("--kubeconfig={kubeconfig}"),
            format!("--metrics-addr=127.0.0.1:{}", layout.host_ports.controllers_admin),
            format!("--cluster-catalog-addr=127.0.0.1:{}", layout.host_ports.cluster_catalogs),
            // One replica here, but the same Lease path as in a cluster.
            "--leader-elect".into(),
        ],
        HostProcess::PackageServer => vec![
            process.subcommand().into(),
            format!("--kubeconfig={kubeconfig}"),
            format!("--bind=127.0.0.1:{}", layout.host_ports.packageserver),
            format!("--tls-cert-file={}", cert.display()),
            format!("--tls-private-key-file={}", key.display()),
            "--refresh=1m".into(),
        ],
    }
}

pub(super) fn wait_until(what: &str, timeout: Duration, progress: &Progress, mut check: impl FnMut() -> Result<bool, String>) -> anyhow::Result<()> {
    let start = Instant::now();
    let mut last_error = String::new();
    let mut delay = Duration::from_millis(200);
    loop {
        match check() {
            Ok(true) => {
                progress.say(format!("{what} ({})", format_duration(start.elapsed())));
                return Ok(());
            }
            Ok(false) => {}
            Err(e) => last_error = e,
        }
        if start.elapsed() > timeout {
            bail!("timed out after {} waiting for {what}{}", format_duration(timeout), if last_error.is_empty() { String::new() } else { format!(": {last_error}") });
        }
        std::thread::sleep(delay);
        delay = (delay * 2).min(Duration::from_secs(2));
    }
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| format!("(cannot read {}: {e})", path.display()));
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn tcp_open(port: u16) -> bool {
    std::net::TcpStream::connect_timeout(&std::net::SocketAddr::from(([127, 0, 0, 1], port)), Duration::from_millis(300)).is_ok()
}

fn ensure_running(layout: &Layout, process: HostProcess, args: &[String], progress: &Progress, port: u16) -> anyhow::Result<()> {
    let args_path = layout.pids_dir().join(format!("{}.args", process.name()));
    let wanted_args = args.join("\n");
    if let Some(pid) = running_pid(layout, process) {
        let same_args = std::fs::read_to_string(&args_path).is_ok_and(|a| a == wanted_args);
        let rebuilt = current_exe().is_ok_and(|exe| proc_exe_is_deleted_olm(pid, &exe));
        let other = other_olm_build(pid, process);
        if same_args && !rebuilt && other.is_none() {
            progress.say(format!("{} already running (pid {pid})", process.name()));
            return Ok(());
        }
        let why = match (&other, rebuilt) {
            (Some(path), _) => format!("another build of olm ({}) started it; this one takes over", path.display()),
            (None, true) => "the olm binary was rebuilt".to_owned(),
            (None, false) => "its command line changed".to_owned(),
        };
        progress.say(format!("restarting {} (pid {pid}): {why}", process.name()));
        stop_process(layout, process)?;
    }
    if tcp_open(port) {
        bail!(
            "port 127.0.0.1:{port} is taken by another program, so {} cannot start; stop that program (see `ss -ltnp`) and run `olm dev up` again",
            process.name()
        );
    }
    let pid = start_process(layout, process, args)?;
    std::fs::write(&args_path, &wanted_args).with_context(|| format!("cannot write {}", args_path.display()))?;
    progress.say(format!("started {} (pid {pid}, log {})", process.name(), layout.log_file(process.name()).display()));
    let log = layout.log_file(process.name());
    wait_until(&format!("{} listening on 127.0.0.1:{port}", process.name()), Duration::from_secs(60), progress, || {
        if running_pid(layout, process).is_none() {
            return Err(format!("it exited; last lines of {}:\n{}", log.display(), tail(&log, 20)));
        }
        Ok(tcp_open(port))
    })
    .map_err(|e| {
        anyhow::anyhow!("{e}\nlast lines of {}:\n{}", log.display(), tail(&log, 20))
    })
}

/// `olm dev up`.
pub fn up(catalog: Option<&Path>, real_node: bool) -> anyhow::Result<ExitCode> {
    let layout = Layout::from_env().context("locating the olm-dev directories")?;
    if let Some(image) = super::dev_pods::in_cluster_image(&layout) {
        bail!("OLM runs as pods here (`olm dev up --in-cluster`, image {image}); run `olm dev down` first to run it as host processes");
    }
    let progress = Progress::new();
    let catalog = catalog_dir(catalog)?;
    progress.say("starting the local control plane (the first run builds Kubernetes from source: several minutes)");
    let report = olm_dev::up_with(&layout, &progress, olm_dev::UpOptions { real_node }).context("starting the local control plane")?;
    if !report.already_running {
        progress.say(format!("control plane ready in {}", format_duration(report.start_elapsed)));
    }
    let registry = olm_dev::registry::ensure_dev_registry(&layout, &progress).context("starting the local OCI registry")?;
    if registry.already_running {
        progress.say(format!("registry already running (pid {}) on {}", registry.pid, registry.addr));
    } else {
        progress.say(format!("started registry (pid {}) on {} (log {})", registry.pid, registry.addr, layout.log_file(olm_dev::registry::DEV_REGISTRY_NAME).display()));
    }

    progress.say("installing the OLM CustomResourceDefinitions (server-side apply)");
    let crds = olm_api::crds::render_yaml().context("rendering the CRDs")?;
    kubectl(&layout, &["apply", "--server-side", "--force-conflicts", "-f", "-"], Some(&crds))?;
    let mut wait = vec!["wait", "--for=condition=Established", "--timeout=60s"];
    let names: Vec<String> = ["catalogsources", "clusterserviceversions", "installplans", "operatorgroups", "subscriptions"]
        .iter()
        .map(|plural| format!("crd/{plural}.operators.coreos.com"))
        .collect();
    wait.extend(names.iter().map(String::as_str));
    kubectl(&layout, &wait, None)?;

    let catalog_image = format!("{}/olm/{CATALOG_NAME}-catalog:latest", registry.addr);
    progress.say(format!("pushing the bundled catalog and each of its bundles as images to {}", registry.addr));
    let pushed = push_bundled_catalog(&layout, &catalog, &catalog_image, &format!("{}/olm/bundles", registry.addr))?;
    progress.say(format!("catalog image {} ({} bundle images)", pushed.catalog, pushed.bundles.len()));

    let (ca, cert, key) = packageserver_cert(&layout)?;
    progress.say("applying namespaces olm and operators, OperatorGroups, the CatalogSource and the APIService");
    kubectl(&layout, &["apply", "--server-side", "--force-conflicts", "-f", "-"], Some(&local_manifests(&layout, &ca, &catalog_image)))?;

    let ports = [layout.host_ports.catalog_grpc, layout.host_ports.controllers_admin, layout.host_ports.packageserver];
    for (process, port) in HostProcess::ALL.into_iter().zip(ports) {
        let args = process_args(&layout, process, &catalog, &cert, &key);
        ensure_running(&layout, process, &args, &progress, port)?;
    }

    wait_until("APIService v1.packages.operators.coreos.com Available", Duration::from_secs(90), &progress, || {
        let out = olm_dev::kubectl(&layout, &["get", "apiservice", APISERVICE, "-o", "jsonpath={.status.conditions[?(@.type==\"Available\")].status}"], None)?;
        Ok(out.trim() == "True")
    })?;
    wait_until("packagemanifests served from the catalog", Duration::from_secs(90), &progress, || {
        let out = olm_dev::kubectl(&layout, &["get", "packagemanifests", "-n", "olm", "-l", &format!("catalog={CATALOG_NAME}"), "-o", "name"], None)?;
        Ok(!out.trim().is_empty())
    })?;
    println!("OLM is running on the local control plane ({}).", format_duration(progress.elapsed()));
    println!("  catalog:   CatalogSource olm/{CATALOG_NAME} -> image {catalog_image} (from {}; its bundles are images too, by digest)", catalog.display());
    println!("             the same catalog served by olm catalog serve on http://127.0.0.1:{}/catalogs/{CATALOG_NAME}", layout.host_ports.catalog_http);
    println!("  v1:        ClusterCatalogs served by olm run on http://127.0.0.1:{}/catalogs/NAME (docs/olmv1.md)", layout.host_ports.cluster_catalogs);
    println!("  registry:  {} (plain HTTP, storage {})", registry.addr, layout.registry_dir().display());
    println!("  logs:      {}", layout.logs_dir().display());
    println!("use it with: eval \"$(olm dev env)\"   then e.g.: kubectl get packagemanifests -n olm");
    Ok(ExitCode::SUCCESS)
}

pub(super) fn stop_process(layout: &Layout, process: HostProcess) -> anyhow::Result<Option<u32>> {
    let pid_path = layout.pid_file(process.name());
    let Some(pid) = running_pid(layout, process) else {
        let _ = std::fs::remove_file(&pid_path);
        return Ok(None);
    };
    let Some(target) = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw) else {
        bail!("pid file {} holds an invalid pid {pid}", pid_path.display());
    };
    rustix::process::kill_process(target, rustix::process::Signal::TERM)
        .with_context(|| format!("cannot stop {} (pid {pid})", process.name()))?;
    let start = Instant::now();
    while running_pid(layout, process).is_some() && start.elapsed() < Duration::from_secs(25) {
        std::thread::sleep(Duration::from_millis(100));
    }
    if running_pid(layout, process).is_some() {
        let _ = rustix::process::kill_process(target, rustix::process::Signal::KILL);
    }
    let _ = std::fs::remove_file(&pid_path);
    Ok(Some(pid))
}

/// `olm dev down`.
pub fn down(purge: bool) -> anyhow::Result<ExitCode> {
    let layout = Layout::from_env().context("locating the olm-dev directories")?;
    let progress = Progress::new();
    let cluster = olm_dev::status(&layout).map(|s| s.all_healthy()).unwrap_or(false);
    if cluster {
        // An APIService without its server makes namespace deletion hang; remove it first.
        match olm_dev::kubectl(&layout, &["delete", "apiservice", APISERVICE, "--ignore-not-found", "--wait=false"], None) {
            Ok(_) => progress.say(format!("deleted APIService {APISERVICE}")),
            Err(e) => progress.say(format!("could not delete APIService {APISERVICE}: {e}")),
        }
    }
    for process in HostProcess::ALL.into_iter().rev() {
        if let Some(pid) = stop_process(&layout, process)? {
            progress.say(format!("stopped {} (pid {pid})", process.name()));
        }
    }
    if let Some(pid) = olm_dev::registry::stop_dev_registry(&layout, &progress, purge).context("stopping the local OCI registry")? {
        progress.say(format!("stopped {} (pid {pid})", olm_dev::registry::DEV_REGISTRY_NAME));
    }
    let report = olm_dev::down(&layout, &progress, purge).context("stopping the local control plane")?;
    if !report.stopped.is_empty() {
        let names: Vec<String> = report.stopped.iter().map(|(c, pid)| format!("{} (pid {pid})", c.name())).collect();
        println!("stopped {}", names.join(", "));
    }
    if !report.node_stopped.is_empty() {
        let names: Vec<String> = report.node_stopped.iter().map(|(name, pid)| format!("{name} (pid {pid})")).collect();
        println!("stopped the real node: {}", names.join(", "));
    }
    for what in &report.node_removed {
        println!("removed {what}");
    }
    super::dev_pods::forget_in_cluster(&layout);
    if purge {
        let dir = olm_dir(&layout);
        if dir.exists() {
            std::fs::remove_dir_all(&dir).with_context(|| format!("cannot delete {}", dir.display()))?;
        }
        println!("deleted cluster data, registry storage, certificates, logs and kubeconfig under {}", layout.state_dir.display());
    }
    println!("olm dev: everything is stopped");
    Ok(ExitCode::SUCCESS)
}

/// `olm dev status`.
pub fn status() -> anyhow::Result<ExitCode> {
    let layout = Layout::from_env().context("locating the olm-dev directories")?;
    let cluster = olm_dev::status(&layout).context("olm dev status")?;
    print!("{}", cluster.render());
    let registry = olm_dev::registry::dev_registry_status(&layout).context("olm dev status")?;
    print!("{}", registry.render());
    let mut healthy = cluster.all_healthy() && registry.healthy;
    let in_cluster = super::dev_pods::in_cluster_image(&layout);
    if let Some(image) = &in_cluster {
        println!("OLM runs as pods from {image}");
        let (lines, ready) = super::dev_pods::deployments_status(&layout);
        for line in lines {
            println!("{line}");
        }
        healthy &= ready;
    }
    for process in HostProcess::ALL.into_iter().filter(|_| in_cluster.is_none()) {
        match running_pid(&layout, process) {
            Some(pid) => println!("{:<24} running  pid {pid:<8} log {}", process.name(), layout.log_file(process.name()).display()),
            None => {
                healthy = false;
                println!("{:<24} stopped", process.name());
            }
        }
    }
    if cluster.all_healthy() {
        let available = olm_dev::kubectl(&layout, &["get", "apiservice", APISERVICE, "-o", "jsonpath={.status.conditions[?(@.type==\"Available\")].status}"], None)
            .map(|s| s.trim().to_owned())
            .unwrap_or_else(|e| format!("unknown ({e})"));
        println!("{:<24} Available={available}", format!("apiservice/{APISERVICE}"));
        healthy &= available == "True";
    }
    Ok(if healthy { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// `olm dev env`: the control plane's lines plus `OLM_DEV_REGISTRY`.
pub fn env() -> anyhow::Result<ExitCode> {
    let layout = Layout::from_env().context("locating the olm-dev directories")?;
    print!("{}{}", olm_dev::env_lines(&layout), olm_dev::registry::dev_registry_env_lines(&layout));
    Ok(ExitCode::SUCCESS)
}
