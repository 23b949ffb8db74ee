//! End to end on a private local control plane (olm-dev's, on other ports and its own state
//! directory, so the shared `olm dev up` cluster and its controllers are not touched):
//! upstream's `catalog` + `olm` operators with `opm serve`, then ours (`olm run` + `olm catalog
//! serve`), each with its own CRDs, one after the other. Per side: the single install
//! (Subscription → CSV Succeeded for etcd, with a timeline of what the watches saw), then the
//! scale run (N namespaces with an OperatorGroup and a Subscription each, plus one AllNamespaces
//! operator; time to settle and the controllers' memory per namespace).
//!
//! Longer than ~600 lines: one benchmark scenario (both OLMs installed, timed and torn down side by side) with its reporting.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::catalogs::{E2E_CHANNEL, E2E_PACKAGE, GlobalPackage};
use crate::csv_watch::{CsvState, drain};
use crate::kubectl::kubectl;
use crate::serve::{free_port, memory_mib};
use crate::tools::Tools;

pub(crate) const GLOBAL_NAMESPACE: &str = "olm";
/// Label on every namespace the scale run creates, so that cleanup finds them all.
const SCALE_LABEL: &str = "olm-bench-scale";

/// How the end-to-end part runs (from the command line).
#[derive(Debug, Clone)]
pub struct E2eOptions {
    /// Namespaces of the scale run (0: skip it).
    pub scale_namespaces: usize,
    /// Longest wait for the scale run to settle.
    pub scale_timeout: Duration,
    /// Wait between "settled" and the second ("steady") memory reading.
    pub steady_after: Duration,
    /// Wait after the catalog is READY before the idle memory reading.
    pub idle_after: Duration,
    /// Concurrent `kubectl create` processes creating the scale run's objects.
    pub create_concurrency: usize,
    /// Ours only: while the scale run settles (and until the steady reading), the catalog gets a
    /// new bundle this often (opm serve cannot reload a directory, so upstream's side has none).
    pub catalog_updates: Option<Duration>,
    /// Single installs per side, each with fresh processes, CRDs and namespace; the median counts.
    pub single_runs: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Impl {
    Upstream,
    Ours,
}

impl Impl {
    pub fn label(self) -> &'static str {
        match self {
            Impl::Upstream => "upstream (olm + catalog operators, opm serve)",
            Impl::Ours => "ours (olm run, olm catalog serve)",
        }
    }
    fn tag(self) -> &'static str {
        match self {
            Impl::Upstream => "upstream",
            Impl::Ours => "ours",
        }
    }
}

pub struct Side {
    pub label: &'static str,
    /// Subscription created → CSV Succeeded (watch event to watch event): the median run's.
    pub install: Duration,
    /// The install time of every run, in the order they ran.
    pub runs: Vec<Duration>,
    /// `kubectl apply` started → the Subscription's ADDED event (not counted in `install`).
    pub apply_to_added: Duration,
    /// (process label, RSS MiB) after the CSV succeeded.
    pub rss: Vec<(String, f64)>,
    /// First time (since the Subscription's ADDED event) each observed state was seen; a
    /// state seen before that event has a zero offset.
    pub timeline: Vec<(String, Duration)>,
}

/// One process's memory in the scale run.
pub struct ProcMemory {
    pub label: String,
    /// A controller (not the catalog server): counted in the memory per namespace.
    pub controller: bool,
    pub idle_mib: f64,
    pub settled_mib: f64,
    pub steady_mib: f64,
    pub peak_mib: f64,
    /// RssAnon at the idle and settled readings.
    pub idle_anon_mib: f64,
    pub settled_anon_mib: f64,
}

pub enum Settle {
    Settled(Duration),
    NotSettled { after: Duration, succeeded: usize, global_succeeded: bool },
}

pub struct Scale {
    pub label: &'static str,
    pub namespaces: usize,
    /// Creating every object (namespaces, OperatorGroups, Subscriptions) took this long.
    pub create: Duration,
    pub settle: Settle,
    pub memory: Vec<ProcMemory>,
    /// Bundles added to the catalog from the first create until settled, and until the end.
    pub catalog_updates: (usize, usize),
    /// CSVs labelled `olm.copiedFrom` when settled and at the steady reading.
    pub copied_at_settle: usize,
    pub copied_at_end: usize,
    /// All CSVs the watch knew of at the steady reading.
    pub csvs_at_end: usize,
    /// API objects of the kinds `olm run` caches, before the creates and after the steady reading.
    pub inventory_idle: Vec<KindCount>,
    pub inventory_end: Vec<KindCount>,
    /// Ours only: RSS of follower `olm run` replicas (watch caches, no reconciling) per
    /// controller set, started at idle and after the steady reading: (set, idle MiB, end MiB).
    pub followers: Vec<(String, f64, f64)>,
    /// Ours only: (controller, reconciles, seconds spent reconciling) from `olm run`'s /metrics
    /// when settled (counted since the process started: the idle phase adds next to nothing).
    pub reconciles: Vec<(String, u64, f64)>,
    /// Ours only: API requests `olm run` sent from the first create until settled, by verb
    /// (`olm_api_requests_total`, settled minus idle).
    pub requests: Vec<(String, u64)>,
    /// What a fixed batch of writes cost the idle API server before the creates (see
    /// `host_speed`); `None` when the probe failed (it says why on stderr).
    pub host: Option<crate::host_speed::HostSpeed>,
    /// The API server's CPU from the first create until settled (s).
    pub api_server_cpu_until_settle: Option<f64>,
    /// Ours only: `olm run` restarted after the steady reading: the writes the new process sent
    /// in [`RESTART_WATCH`] after its caches synced (verb resource → count), over nothing
    /// that changed.
    pub writes_after_restart: Option<Vec<(String, u64)>>,
    /// Ours only: the writes the first `olm run` sent in the [`RESTART_WATCH`] just before it
    /// was stopped: what was still going on, which the restarted process may finish (a storm
    /// is what the restart adds beyond it).
    pub writes_before_restart: Option<Vec<(String, u64)>>,
    /// The same run with a tenth of the namespaces, before this one, with fresh processes: what
    /// the controllers grow by whatever the number of namespaces (code run for the first
    /// time, connection buffers) is in both, so the difference is what the added namespaces
    /// cost. `None` for the baseline run itself and when N < 20.
    pub baseline: Option<Result<Baseline, String>>,
}

/// What the controllers grew by in the baseline run (see [`Scale::baseline`]).
pub struct Baseline {
    pub namespaces: usize,
    pub settled: bool,
    pub growth_mib: f64,
    pub growth_anon_mib: f64,
}

/// The scale run at full size, or its baseline (a tenth of the namespaces, only the memory
/// readings: no followers, inventory, host probe or restart).
#[derive(Clone, Copy, PartialEq, Eq)]
enum ScaleRun {
    Full,
    Baseline,
}

/// How long the restarted `olm run` is watched for writes.
pub const RESTART_WATCH: Duration = Duration::from_secs(60);

/// How many objects of one kind the cluster holds and their size as compact JSON: what a
/// full watch cache of that kind has to keep (before decoding into typed objects).
pub struct KindCount {
    pub kind: String,
    pub objects: usize,
    pub json_bytes: usize,
    /// Of `json_bytes`, what `metadata.managedFields` takes (kept by a cache unless stripped).
    pub managed_fields_bytes: usize,
}

/// The resources `olm run` keeps watch caches of (its startup log lists them: crates/olm-controllers
/// manager.rs and catalogsource/operator.rs), with the label selectors it watches them with.
const CACHED_KINDS: &[(&str, Option<&str>)] = &[
    ("clusterserviceversions.operators.coreos.com", None),
    ("subscriptions.operators.coreos.com", None),
    ("installplans.operators.coreos.com", None),
    ("operatorgroups.operators.coreos.com", None),
    ("operatorconditions.operators.coreos.com", None),
    ("catalogsources.operators.coreos.com", None),
    ("olmconfigs.operators.coreos.com", None),
    ("namespaces", None),
    ("serviceaccounts", None),
    ("customresourcedefinitions.apiextensions.k8s.io", None),
    ("apiservices.apiregistration.k8s.io", None),
    ("deployments.apps", Some("olm.owner.kind=ClusterServiceVersion")),
    ("clusterroles.rbac.authorization.k8s.io", Some("olm.managed=true")),
    ("roles.rbac.authorization.k8s.io", Some("olm.managed=true")),
    ("rolebindings.rbac.authorization.k8s.io", Some("olm.managed=true")),
];

/// Controller sets the follower probes run (`olm run --controllers`; "" = all).
const PROBE_SETS: &[&str] = &["", "operatorgroup", "csv", "catalogsource", "subscription", "installplan", "operator"];
const PROBE_LEASE: &str = "olm-bench-probe-lock";

/// A Lease held by nobody running, valid for an hour: `olm run --leader-elect` replicas on it
/// stay followers, which fill their watch caches but never reconcile. Their resident set is
/// what the caches of their controllers cost, apart from the work of installing.
fn hold_probe_lease(layout: &olm_dev::Layout) -> anyhow::Result<()> {
    let now = jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S.000000Z").to_string();
    let lease = format!(
        "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {{name: {PROBE_LEASE}, namespace: {GLOBAL_NAMESPACE}}}\nspec: {{holderIdentity: olm-bench, leaseDurationSeconds: 3600, acquireTime: \"{now}\", renewTime: \"{now}\"}}\n"
    );
    kubectl(layout, &["apply", "-f", "-"], Some(&lease))?;
    Ok(())
}

/// RSS of one follower replica per controller set, each read 2 s after its /readyz (every
/// cache listed) answers; the replicas run one at a time and are stopped after reading.
fn probe_followers(tools: &Tools, layout: &olm_dev::Layout, work: &Path, when: &str) -> anyhow::Result<Vec<(String, f64)>> {
    hold_probe_lease(layout)?;
    let mut out = Vec::new();
    for set in PROBE_SETS {
        let admin = format!("127.0.0.1:{}", free_port()?);
        let name = if set.is_empty() { "all" } else { set };
        let mut cmd = Command::new(&tools.olm);
        cmd.args(["run", "--leader-elect", "--lease-name", PROBE_LEASE, "--namespace", GLOBAL_NAMESPACE, "--metrics-addr", &admin])
            .args(["--cluster-catalog-addr", &loopback_port()?])
            .arg("--kubeconfig")
            .arg(layout.kubeconfig());
        if !set.is_empty() {
            cmd.args(["--controllers", set]);
        }
        let mut proc = Proc::spawn(&format!("follower {name}"), true, &mut cmd, &work.join(format!("e2e-ours-scale-follower-{name}-{when}.log")))?;
        wait_for(&format!("follower {name} to be ready"), Duration::from_secs(60), || {
            if !proc.alive() {
                bail!("follower {name} exited");
            }
            Ok(ready(&admin))
        })?;
        std::thread::sleep(Duration::from_secs(2));
        out.push((name.to_string(), proc.memory().0));
    }
    Ok(out)
}

/// Count and size the cached kinds; with `keep`, also write each kind's list there (for
/// looking at what the caches hold).
fn inventory(layout: &olm_dev::Layout, keep: Option<&Path>) -> Vec<KindCount> {
    let mut out = Vec::new();
    if let Some(dir) = keep {
        let _ = std::fs::create_dir_all(dir);
    }
    for (kind, selector) in CACHED_KINDS {
        // kubectl leaves managedFields out unless asked; a watch cache gets them.
        let mut args = vec!["get", kind, "-A", "-o", "json", "--show-managed-fields"];
        if let Some(sel) = selector {
            args.extend(["-l", sel]);
        }
        let Ok(text) = kubectl(layout, &args, None) else { continue };
        let Ok(list) = serde_json::from_str::<serde_json::Value>(&text) else { continue };
        if let Some(dir) = keep {
            let file = format!("{}.json", kind.split('.').next().unwrap_or(kind));
            let _ = std::fs::write(dir.join(file), &text);
        }
        let items = list.get("items").and_then(serde_json::Value::as_array).map(Vec::as_slice).unwrap_or_default();
        let size = |v: Option<&serde_json::Value>| v.map_or(0, |v| serde_json::to_string(v).map_or(0, |t| t.len()));
        let json_bytes = items.iter().map(|i| size(Some(i))).sum();
        let managed_fields_bytes = items.iter().map(|i| size(i.pointer("/metadata/managedFields"))).sum();
        let name = match selector {
            Some(sel) => format!("{kind} [{sel}]"),
            None => kind.to_string(),
        };
        out.push(KindCount { kind: name, objects: items.len(), json_bytes, managed_fields_bytes });
    }
    out
}

impl Scale {
    pub fn controllers(&self, f: impl Fn(&ProcMemory) -> f64) -> f64 {
        self.memory.iter().filter(|m| m.controller).map(f).sum()
    }
    pub fn controllers_idle(&self) -> f64 {
        self.controllers(|m| m.idle_mib)
    }
    pub fn controllers_settled(&self) -> f64 {
        self.controllers(|m| m.settled_mib)
    }
    pub fn controllers_steady(&self) -> f64 {
        self.controllers(|m| m.steady_mib)
    }
    /// (settled − idle) / N, in KiB.
    pub fn per_namespace_kib(&self) -> f64 {
        (self.controllers_settled() - self.controllers_idle()) * 1024.0 / self.namespaces.max(1) as f64
    }
    /// (settled − idle) / N of the controllers' RssAnon, in KiB.
    pub fn per_namespace_anon_kib(&self) -> f64 {
        (self.controllers(|m| m.settled_anon_mib) - self.controllers(|m| m.idle_anon_mib)) * 1024.0 / self.namespaces.max(1) as f64
    }
    pub fn per_namespace_steady_kib(&self) -> f64 {
        (self.controllers_steady() - self.controllers_idle()) * 1024.0 / self.namespaces.max(1) as f64
    }
    fn baseline_of(&self) -> Baseline {
        Baseline {
            namespaces: self.namespaces,
            settled: matches!(self.settle, Settle::Settled(_)),
            growth_mib: self.controllers_settled() - self.controllers_idle(),
            growth_anon_mib: self.controllers(|m| m.settled_anon_mib) - self.controllers(|m| m.idle_anon_mib),
        }
    }
    /// What each namespace beyond the baseline's added to the controllers' settled RSS and
    /// RssAnon, in KiB: (growth at N − growth at the baseline's) / (N − the baseline's N).
    /// `None` without a settled baseline.
    pub fn added_per_namespace_kib(&self) -> Option<(f64, f64)> {
        let base = self.baseline.as_ref()?.as_ref().ok().filter(|b| b.settled && b.namespaces < self.namespaces)?;
        let full = self.baseline_of();
        let added = (self.namespaces - base.namespaces) as f64;
        Some(((full.growth_mib - base.growth_mib) * 1024.0 / added, (full.growth_anon_mib - base.growth_anon_mib) * 1024.0 / added))
    }
}

pub struct E2e {
    pub upstream: Result<Side, String>,
    pub ours: Result<Side, String>,
    /// `None` when the scale run was not asked for.
    pub upstream_scale: Option<Result<Scale, String>>,
    pub ours_scale: Option<Result<Scale, String>>,
    pub cluster_up: Duration,
    /// Fake nodes added for the scale run's pods (besides olm-dev's own).
    pub extra_nodes: usize,
    pub global: GlobalPackage,
    pub options: E2eOptions,
}

pub(crate) struct Proc {
    pub(crate) label: String,
    controller: bool,
    child: Child,
}

impl Proc {
    fn spawn(label: &str, controller: bool, cmd: &mut Command, log: &Path) -> anyhow::Result<Proc> {
        let child = cmd
            .stdin(Stdio::null())
            .stdout(File::create(log)?)
            .stderr(File::create(log.with_extension("err"))?)
            .spawn()
            .with_context(|| format!("starting {label}"))?;
        Ok(Proc { label: label.to_string(), controller, child })
    }
    /// (RSS, peak RSS) in MiB.
    pub(crate) fn memory(&self) -> (f64, f64) {
        memory_mib(self.child.id()).unwrap_or((f64::NAN, f64::NAN))
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

/// A side's running processes and where they listen.
pub(crate) struct Started {
    pub(crate) procs: Vec<Proc>,
    pub(crate) grpc_addr: String,
    /// `olm run`'s admin address (ours only), for /metrics snapshots.
    admin_addr: Option<String>,
}

fn first_dead(procs: &mut [Proc]) -> Option<String> {
    procs.iter_mut().find_map(|p| (!p.alive()).then(|| p.label.clone()))
}

fn layout(work: &Path) -> anyhow::Result<olm_dev::Layout> {
    let mut layout = olm_dev::Layout::from_env().context("olm-dev layout")?;
    layout.state_dir = work.join("cluster");
    // A port base of its own: `olm dev up` uses 28000 and olm-dev's tests other bases (29000 among
    // them), and a second cluster on the same ports would talk to the wrong apiserver. Below the
    // ephemeral range, where an outgoing connection may take one of its ports first.
    const PORT_BASE: u16 = 25000;
    layout.ports = olm_dev::Ports::from_base(PORT_BASE).context("port base out of range")?;
    for port in [layout.ports.etcd_client, layout.ports.etcd_peer, layout.ports.apiserver, layout.ports.kwok] {
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_err() {
            bail!("port {port} (base {PORT_BASE}) is in use; the private control plane needs the range free");
        }
    }
    Ok(layout)
}

fn kubectl_command(layout: &olm_dev::Layout) -> Command {
    let mut cmd = Command::new(layout.kubectl());
    cmd.arg(format!("--kubeconfig={}", layout.kubeconfig().display()));
    cmd
}

pub(crate) fn wait_for(what: &str, timeout: Duration, mut check: impl FnMut() -> anyhow::Result<bool>) -> anyhow::Result<()> {
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

pub(crate) fn catalog_source(name: &str, grpc_addr: &str) -> String {
    format!(
        r#"apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata: {{name: {name}, namespace: {GLOBAL_NAMESPACE}}}
spec: {{sourceType: grpc, address: "{grpc_addr}", displayName: bench}}
"#
    )
}

/// A namespace, its OperatorGroup (`targets`: own namespace, or all namespaces when `None`) and
/// its Subscription, as one multi-document YAML in creation order.
fn namespace_objects(namespace: &str, label: Option<&str>, targets_own: bool, package: &str, channel: &str, source: &str) -> String {
    let labels = label.map(|l| format!(", labels: {{{l}: \"true\"}}")).unwrap_or_default();
    let og_spec = if targets_own { format!("{{targetNamespaces: [{namespace}]}}") } else { "{}".to_string() };
    format!(
        r#"apiVersion: v1
kind: Namespace
metadata: {{name: {namespace}{labels}}}
---
apiVersion: operators.coreos.com/v1
kind: OperatorGroup
metadata: {{name: og, namespace: {namespace}}}
spec: {og_spec}
---
{}"#,
        subscription(namespace, package, channel, source)
    )
}

fn subscription(namespace: &str, package: &str, channel: &str, source: &str) -> String {
    format!(
        r#"apiVersion: operators.coreos.com/v1alpha1
kind: Subscription
metadata: {{name: {package}, namespace: {namespace}}}
spec: {{name: {package}, channel: {channel}, source: {source}, sourceNamespace: {GLOBAL_NAMESPACE}, installPlanApproval: Automatic}}
"#
    )
}

/// `kubectl get -w` streams whose lines arrive, time-stamped on arrival, on one channel.
pub(crate) struct Watches {
    children: Vec<Child>,
    pub(crate) rx: mpsc::Receiver<(Instant, usize, String)>,
}

impl Watches {
    /// One stream per argument list (each is `kubectl get ... -w -o jsonpath=...`); the index of
    /// the list is sent with each line.
    pub(crate) fn start(layout: &olm_dev::Layout, streams: &[Vec<String>], log: &Path) -> anyhow::Result<Watches> {
        let (tx, rx) = mpsc::channel();
        let mut children = Vec::new();
        for (i, args) in streams.iter().enumerate() {
            let mut child = kubectl_command(layout)
                .args(args)
                .stdout(Stdio::piped())
                .stderr(File::create(log.with_extension(format!("watch{i}.err")))?)
                .spawn()
                .context("starting kubectl get -w")?;
            let stdout = child.stdout.take().context("kubectl stdout")?;
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    if tx.send((Instant::now(), i, line)).is_err() {
                        break;
                    }
                }
            });
            children.push(child);
        }
        Ok(Watches { children, rx })
    }
}

impl Drop for Watches {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

pub(crate) fn watch_args(kind: &str, namespace: Option<&str>, jsonpath: &str) -> Vec<String> {
    let mut a = vec!["get".to_string(), kind.to_string()];
    match namespace {
        Some(ns) => a.extend(["-n".to_string(), ns.to_string()]),
        None => a.push("-A".to_string()),
    }
    a.extend(["-w".to_string(), "--output-watch-events".to_string(), "-o".to_string(), format!("jsonpath={jsonpath}{{\"\\n\"}}")]);
    a
}

/// Create the Subscription and time it until the CSV reports Succeeded, read from watches
/// started before the Subscription exists. The clock starts when the Subscription's own ADDED
/// event arrives (so `kubectl apply`'s start-up is not counted; it is returned separately) and
/// stops when the CSV's Succeeded event arrives: both ends go through the same watch path. The
/// same watches give the install's timeline: first time each Subscription state, InstallPlan
/// phase, CSV phase and Deployment availability was seen, until 2 s after Succeeded.
pub(crate) fn time_install(
    layout: &olm_dev::Layout,
    namespace: &str,
    source: &str,
    target_csv: &str,
    procs: &mut [Proc],
    timeout: Duration,
    log: &Path,
) -> anyhow::Result<Install> {
    let streams = [
        ("Subscription", watch_args("subscription", Some(namespace), "{.type} state={.object.status.state}")),
        ("InstallPlan", watch_args("installplan", Some(namespace), "{.type} phase={.object.status.phase}")),
        ("CSV", watch_args("csv", Some(namespace), "{.type} {.object.metadata.name} phase={.object.status.phase}")),
        (
            "Deployment",
            watch_args(
                "deployment",
                Some(namespace),
                "{.type} {.object.metadata.name} Available={.object.status.conditions[?(@.type==\"Available\")].status}",
            ),
        ),
    ];
    let watches = Watches::start(layout, &streams.iter().map(|(_, a)| a.clone()).collect::<Vec<_>>(), log)?;
    // Give the watches a moment to be established before the clock starts.
    std::thread::sleep(Duration::from_millis(700));
    while watches.rx.try_recv().is_ok() {}
    let applied = Instant::now();
    kubectl(layout, &["apply", "-f", "-"], Some(&subscription(namespace, E2E_PACKAGE, E2E_CHANNEL, source)))?;
    let deadline = applied + timeout;
    let mut seen: Vec<(String, Instant)> = Vec::new();
    let mut created: Option<Instant> = None;
    let mut succeeded: Option<Instant> = None;
    let target = format!("{target_csv} phase=Succeeded");
    let result = loop {
        let wait = match succeeded {
            Some(at) => (at + Duration::from_secs(2)).saturating_duration_since(Instant::now()),
            None => Duration::from_millis(500),
        };
        match watches.rx.recv_timeout(wait) {
            Ok((at, i, line)) => {
                let (event, rest) = line.trim().split_once(' ').unwrap_or((line.trim(), ""));
                let kind = streams[i].0;
                let state = rest.split_whitespace().map(|t| if t.ends_with('=') { format!("{t}(none)") } else { t.to_string() }).collect::<Vec<_>>().join(" ");
                let step = if event == "ADDED" && seen.iter().all(|(s, _)| !s.starts_with(kind)) {
                    format!("{kind} created: {state}")
                } else {
                    format!("{kind} {state}")
                };
                if !seen.iter().any(|(s, _)| *s == step) {
                    seen.push((step, at));
                }
                if i == 0 && event == "ADDED" && created.is_none() {
                    created = Some(at);
                }
                if i == 2 && rest.trim() == target && succeeded.is_none() {
                    succeeded = Some(at);
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break Err(anyhow::anyhow!("the kubectl watches ended")),
        }
        if let Some(at) = succeeded {
            if at.elapsed() >= Duration::from_secs(2) {
                break Ok(at);
            }
            continue;
        }
        if let Some(dead) = first_dead(procs) {
            break Err(anyhow::anyhow!("{dead} exited during the install"));
        }
        if Instant::now() > deadline {
            let state = kubectl(layout, &["get", "sub,installplan,csv", "-n", namespace, "-o", "wide"], None).unwrap_or_default();
            break Err(anyhow::anyhow!("{target_csv} not Succeeded after {} s; state:\n{state}", timeout.as_secs()));
        }
    };
    drop(watches);
    let done = result?;
    let created = created.context("the Subscription's ADDED event never arrived")?;
    Ok(Install {
        install: done.saturating_duration_since(created),
        apply_to_added: created.saturating_duration_since(applied),
        timeline: seen.into_iter().map(|(s, at)| (s, at.saturating_duration_since(created))).collect(),
    })
}

pub(crate) struct Install {
    pub(crate) install: Duration,
    pub(crate) apply_to_added: Duration,
    pub(crate) timeline: Vec<(String, Duration)>,
}

pub(crate) fn wait_catalog_ready(layout: &olm_dev::Layout, name: &str) -> anyhow::Result<()> {
    wait_for("the CatalogSource to be READY", Duration::from_secs(120), || {
        let state = kubectl(
            layout,
            &["get", "catalogsource", name, "-n", GLOBAL_NAMESPACE, "-o", "jsonpath={.status.connectionState.lastObservedState}"],
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

/// Delete OLM's CRDs and those the installs created (etcd's and the AllNamespaces package's).
fn delete_crds(layout: &olm_dev::Layout, global_group: &str) {
    if let Ok(names) = kubectl(layout, &["get", "crd", "-o", "name"], None) {
        for n in names
            .lines()
            .filter(|n| n.contains("etcd.database.coreos.com") || n.contains("operators.coreos.com") || n.contains(global_group))
        {
            let _ = kubectl(layout, &["delete", n, "--wait=true", "--timeout=120s"], None);
        }
    }
}

/// Delete the namespaces while the controllers still run (they remove their own finalizers,
/// e.g. upstream's csv-cleanup), then stop them, then drop whatever finalizers are left so the
/// CRDs can go. Bounded: namespaces still terminating after `namespace_timeout` are left to the
/// namespace controller (the next side uses other names).
pub(crate) fn cleanup(layout: &olm_dev::Layout, namespaces: &Selection, procs: Vec<Proc>, global_group: &str, namespace_timeout: Duration) {
    let (delete, get): (Vec<&str>, Vec<&str>) = match namespaces {
        Selection::Names(names) => {
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            let mut d = vec!["delete", "namespace", "--wait=false", "--ignore-not-found"];
            d.extend(&names);
            let mut g = vec!["get", "namespace", "-o", "name", "--ignore-not-found"];
            g.extend(&names);
            (d, g)
        }
        Selection::Label(l) => (
            vec!["delete", "namespace", "-l", l, "--wait=false"],
            vec!["get", "namespace", "-l", l, "-o", "name"],
        ),
    };
    let _ = kubectl(layout, &delete, None);
    let _ = wait_for("the namespaces to be deleted", namespace_timeout, || {
        Ok(kubectl(layout, &get, None).map(|o| o.trim().is_empty()).unwrap_or(false))
    });
    let _ = kubectl(layout, &["delete", "catalogsource", "--all", "-n", GLOBAL_NAMESPACE, "--timeout=30s"], None);
    drop(procs);
    for kind in ["csv", "subscription", "installplan", "operatorgroup", "operatorcondition"] {
        let listing = kubectl(
            layout,
            &[
                "get",
                kind,
                "-A",
                "-o",
                "jsonpath={range .items[?(@.metadata.finalizers)]}{.metadata.namespace}/{.metadata.name}{\"\\n\"}{end}",
            ],
            None,
        );
        if let Ok(names) = listing {
            for item in names.lines().filter(|l| !l.is_empty()) {
                if let Some((n, name)) = item.split_once('/') {
                    let _ = kubectl(layout, &["patch", kind, name, "-n", n, "--type=merge", "-p", r#"{"metadata":{"finalizers":null}}"#], None);
                }
            }
        }
    }
    delete_crds(layout, global_group);
}

pub(crate) enum Selection {
    Names(Vec<String>),
    Label(String),
}

pub(crate) fn install_crds(imp: Impl, tools: &Tools, layout: &olm_dev::Layout, work: &Path) -> anyhow::Result<()> {
    match imp {
        Impl::Upstream => apply_dir(layout, &upstream_module_dir(tools)?.join("deploy/chart/crds")),
        Impl::Ours => {
            let crd_dir = work.join("our-crds");
            let out = Command::new(&tools.olm).args(["crds", "--output-dir"]).arg(&crd_dir).output()?;
            if !out.status.success() {
                bail!("olm crds failed: {}", String::from_utf8_lossy(&out.stderr));
            }
            apply_dir(layout, &crd_dir)
        }
    }
}

/// Start the side's catalog server and controllers; logs go to `work/e2e-<side>-<phase>-*`.
fn start(imp: Impl, tools: &Tools, layout: &olm_dev::Layout, work: &Path, catalog_dir: &Path, phase: &str) -> anyhow::Result<Started> {
    start_with(imp, tools, layout, work, catalog_dir, phase, &[])
}

/// [`start`] with `extra` arguments for the side's controller that reads bundles (upstream's
/// catalog operator, our `olm run`).
pub(crate) fn start_with(
    imp: Impl,
    tools: &Tools,
    layout: &olm_dev::Layout,
    work: &Path,
    catalog_dir: &Path,
    phase: &str,
    extra: &[String],
) -> anyhow::Result<Started> {
    let grpc_port = free_port()?;
    let kubeconfig = layout.kubeconfig();
    let log = |name: &str| work.join(format!("e2e-{}-{phase}-{name}.log", imp.tag()));
    match imp {
        Impl::Upstream => {
            let bin = &tools.upstream_operators;
            let procs = vec![
                Proc::spawn(
                    "opm serve",
                    false,
                    Command::new(&tools.opm)
                        .arg("serve")
                        .arg(catalog_dir)
                        .args(["-p", &grpc_port.to_string(), "--pprof-addr", &format!("127.0.0.1:{}", free_port()?), "-t"])
                        .arg(log("opm-termination")),
                    &log("opm"),
                )?,
                // Both upstream operators listen on a fixed port for health/metrics (:8080, or
                // :8443 with TLS); the olm operator gets TLS (the private cluster's serving
                // certificate) so they do not collide.
                Proc::spawn(
                    "upstream olm operator",
                    true,
                    Command::new(bin.join("olm"))
                        .env("KUBECONFIG", &kubeconfig)
                        .args(["--namespace", GLOBAL_NAMESPACE, "--writeStatusName", "", "--writePackageServerStatusName", ""])
                        .arg("--tls-cert")
                        .arg(layout.pki_file("apiserver.crt"))
                        .arg("--tls-key")
                        .arg(layout.pki_file("apiserver.key")),
                    &log("olm"),
                )?,
                Proc::spawn(
                    "upstream catalog operator",
                    true,
                    Command::new(bin.join("catalog"))
                        .env("KUBECONFIG", &kubeconfig)
                        .arg(format!("--kubeconfig={}", kubeconfig.display()))
                        .args(["--namespace", GLOBAL_NAMESPACE, "--writeStatusName", ""])
                        .args(extra),
                    &log("catalog"),
                )?,
            ];
            Ok(Started { procs, grpc_addr: format!("127.0.0.1:{grpc_port}"), admin_addr: None })
        }
        Impl::Ours => {
            let admin = format!("127.0.0.1:{}", free_port()?);
            let procs = vec![
                Proc::spawn(
                    "olm catalog serve",
                    false,
                    Command::new(&tools.olm)
                        // Reloads the directory (the scale run's catalog updates; nothing else changes it).
                        .args(["catalog", "serve", "--http-addr", "none", "--reload-interval", "5s", "--grpc-addr", &format!("127.0.0.1:{grpc_port}")])
                        .arg(format!("--catalog=community={}", catalog_dir.display())),
                    &log("catalog"),
                )?,
                Proc::spawn(
                    "olm run",
                    true,
                    Command::new(&tools.olm)
                        .args(["run", "--namespace", GLOBAL_NAMESPACE, "--metrics-addr", &admin])
                        .args(["--cluster-catalog-addr", &loopback_port()?])
                        .arg("--kubeconfig")
                        .arg(&kubeconfig)
                        .args(extra),
                    &log("run"),
                )?,
            ];
            Ok(Started { procs, grpc_addr: format!("127.0.0.1:{grpc_port}"), admin_addr: Some(admin) })
        }
    }
}

/// `runs` single installs, each from scratch (CRDs installed, processes started, namespace
/// created, all removed afterwards): one install of a few hundred milliseconds on shared cores
/// varies by a third between runs, so the median run is the one reported.
fn singles(imp: Impl, tools: &Tools, layout: &olm_dev::Layout, work: &Path, catalog_dir: &Path, global: &GlobalPackage, runs: usize) -> anyhow::Result<Side> {
    let mut sides = Vec::new();
    for run in 1..=runs.max(1) {
        let side = single(imp, tools, layout, work, catalog_dir, global, run)?;
        eprintln!("  [{}] single install {run}: {} ms", imp.tag(), side.install.as_millis());
        sides.push(side);
    }
    let times: Vec<Duration> = sides.iter().map(|s| s.install).collect();
    sides.sort_by_key(|s| s.install);
    let mut median = sides.swap_remove(sides.len() / 2);
    median.runs = times;
    Ok(median)
}

fn single(imp: Impl, tools: &Tools, layout: &olm_dev::Layout, work: &Path, catalog_dir: &Path, global: &GlobalPackage, run: usize) -> anyhow::Result<Side> {
    install_crds(imp, tools, layout, work)?;
    let ns = format!("e2e-{}-{run}", imp.tag());
    kubectl(layout, &["create", "namespace", GLOBAL_NAMESPACE], None).ok();
    let mut started = start(imp, tools, layout, work, catalog_dir, "single")?;
    let source = format!("bench-{}-single", imp.tag());
    kubectl(layout, &["apply", "-f", "-"], Some(&catalog_source(&source, &started.grpc_addr)))?;
    let namespace_yaml = format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n---\napiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata: {{name: og, namespace: {ns}}}\nspec: {{targetNamespaces: [{ns}]}}\n");
    kubectl(layout, &["apply", "-f", "-"], Some(&namespace_yaml))?;
    wait_catalog_ready(layout, &source)?;
    let result = time_install(
        layout,
        &ns,
        &source,
        &global.per_namespace_csv,
        &mut started.procs,
        Duration::from_secs(300),
        &work.join(format!("e2e-{}-single-{run}", imp.tag())),
    );
    // time_install keeps watching for 2 s after Succeeded: the RSS is read 2 s after it.
    let rss = if result.is_ok() {
        save_metrics(&started, &work.join(format!("e2e-{}-single-{run}-metrics.txt", imp.tag())));
        started.procs.iter().map(|p| (p.label.clone(), p.memory().0)).collect()
    } else {
        Vec::new()
    };
    cleanup(layout, &Selection::Names(vec![ns]), started.procs, &global.group, Duration::from_secs(120));
    let i = result?;
    Ok(Side { label: imp.label(), install: i.install, runs: vec![i.install], apply_to_added: i.apply_to_added, rss, timeline: i.timeline })
}

/// A free loopback address for an `olm run` the benchmark starts, for its ClusterCatalog
/// content server: left to its default (0.0.0.0:8081), a second `olm run` (a follower) could
/// not start beside the first.
pub(crate) fn loopback_port() -> anyhow::Result<String> {
    Ok(format!("127.0.0.1:{}", free_port()?))
}

/// Whether `olm run`'s admin server at `addr` says every cache synced (/readyz answers 200).
pub(crate) fn ready(addr: &str) -> bool {
    http_get(addr, "/readyz").is_ok_and(|response| response.split_whitespace().nth(1) == Some("200"))
}

/// GET `path` from a plain-HTTP server (olm run's admin server), for the logs.
pub(crate) fn http_get(addr: &str, path: &str) -> anyhow::Result<String> {
    let mut stream = std::net::TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut body = String::new();
    stream.read_to_string(&mut body)?;
    Ok(body)
}

/// Save `olm run`'s /metrics to `file` and return the text.
fn save_metrics(started: &Started, file: &Path) -> Option<String> {
    let addr = started.admin_addr.as_ref()?;
    let text = http_get(addr, "/metrics").ok()?;
    let _ = std::fs::write(file, &text);
    Some(text)
}

/// (controller, reconciles, seconds) from the reconcile-duration histogram's _count and _sum.
fn reconciles(metrics: &str) -> Vec<(String, u64, f64)> {
    let mut by: BTreeMap<String, (u64, f64)> = BTreeMap::new();
    for line in metrics.lines() {
        let Some((series, value)) = line.rsplit_once(' ') else { continue };
        let Some(controller) = series.split("controller=\"").nth(1).and_then(|r| r.split('"').next()) else { continue };
        if series.starts_with("olm_controller_reconcile_duration_seconds_count{") {
            by.entry(controller.to_string()).or_default().0 = value.trim().parse().unwrap_or(0);
        } else if series.starts_with("olm_controller_reconcile_duration_seconds_sum{") {
            by.entry(controller.to_string()).or_default().1 = value.trim().parse().unwrap_or(0.0);
        }
    }
    by.into_iter().map(|(c, (n, s))| (c, n, s)).collect()
}

/// `olm_api_requests_total` series: ("verb resource", count).
pub(crate) fn api_requests(metrics: &str) -> BTreeMap<String, u64> {
    let mut by = BTreeMap::new();
    for line in metrics.lines().filter(|l| l.starts_with("olm_api_requests_total{")) {
        let Some((series, value)) = line.rsplit_once(' ') else { continue };
        let label = |name: &str| series.split(&format!("{name}=\"")).nth(1).and_then(|r| r.split('"').next()).unwrap_or("").to_string();
        *by.entry(format!("{} {}", label("verb"), label("resource"))).or_default() += value.trim().parse::<f64>().unwrap_or(0.0) as u64;
    }
    by
}

/// Requests per verb between two /metrics readings.
fn requests_between(before: &str, after: &str) -> Vec<(String, u64)> {
    let before = api_requests(before);
    let mut by_verb: BTreeMap<String, u64> = BTreeMap::new();
    for (key, n) in api_requests(after) {
        let delta = n.saturating_sub(before.get(&key).copied().unwrap_or(0));
        let verb = key.split(' ').next().unwrap_or("").to_string();
        *by_verb.entry(verb).or_default() += delta;
    }
    by_verb.into_iter().filter(|(_, n)| *n > 0).collect()
}

const WRITE_VERBS: [&str; 6] = ["create", "apply", "patch", "update", "delete", "deletecollection"];

/// The writes (by verb and resource) between two /metrics readings of one process; `before`
/// empty: since it started.
pub(crate) fn writes_between(before: &str, after: &str) -> Vec<(String, u64)> {
    let before = api_requests(before);
    api_requests(after)
        .into_iter()
        .map(|(key, n)| {
            let delta = n.saturating_sub(before.get(&key).copied().unwrap_or(0));
            (key, delta)
        })
        .filter(|(key, n)| *n > 0 && WRITE_VERBS.contains(&key.split(' ').next().unwrap_or("")))
        .collect()
}

/// Count the writes `olm run` (ours) sends in a [`RESTART_WATCH`], then restart it and count
/// the writes the new process sends in [`RESTART_WATCH`] after its /readyz says every cache
/// synced: a restart over a settled cluster should write next to nothing more than the first
/// process was still writing. Returns (writes before the restart, writes after it).
fn writes_around_restart(started: &mut Started, tools: &Tools, layout: &olm_dev::Layout, work: &Path) -> anyhow::Result<(Vec<(String, u64)>, Vec<(String, u64)>)> {
    let admin = started.admin_addr.clone().context("olm run's admin address")?;
    let first = save_metrics(started, &work.join("e2e-ours-scale-metrics-before-restart-start.txt")).context("olm run's /metrics")?;
    std::thread::sleep(RESTART_WATCH);
    let last = save_metrics(started, &work.join("e2e-ours-scale-metrics-before-restart-end.txt")).context("olm run's /metrics")?;
    let writes_before = writes_between(&first, &last);
    let index = started.procs.iter().position(|p| p.label == "olm run").context("the olm run process")?;
    drop(started.procs.remove(index));
    let proc = Proc::spawn(
        "olm run",
        true,
        Command::new(&tools.olm)
            .args(["run", "--namespace", GLOBAL_NAMESPACE, "--metrics-addr", &admin])
            .args(["--cluster-catalog-addr", &loopback_port()?])
            .arg("--kubeconfig")
            .arg(layout.kubeconfig()),
        &work.join("e2e-ours-scale-restarted-run.log"),
    )?;
    started.procs.insert(index, proc);
    wait_for("the restarted olm run's caches synced", Duration::from_secs(300), || {
        Ok(ready(&admin))
    })?;
    std::thread::sleep(RESTART_WATCH);
    let metrics = save_metrics(started, &work.join("e2e-ours-scale-metrics-restarted.txt")).context("the restarted olm run's /metrics")?;
    Ok((writes_before, writes_between("", &metrics)))
}

/// Run `kubectl create -f` on each file, `concurrency` at a time, within `timeout`.
pub(crate) fn create_files(layout: &olm_dev::Layout, files: &[PathBuf], timeout: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    let mut running: Vec<(Child, &PathBuf)> = Vec::new();
    for f in files {
        running.push((
            kubectl_command(layout)
                .args(["create", "-f"])
                .arg(f)
                .stdout(Stdio::null())
                .stderr(File::create(f.with_extension("err"))?)
                .spawn()
                .context("starting kubectl create")?,
            f,
        ));
    }
    let mut failed = Vec::new();
    while !running.is_empty() {
        let mut still = Vec::new();
        for (mut c, f) in running {
            match c.try_wait()? {
                Some(status) if !status.success() => {
                    failed.push(format!("{} ({status}): {}", f.display(), std::fs::read_to_string(f.with_extension("err")).unwrap_or_default()))
                }
                Some(_) => {}
                None if Instant::now() > deadline => {
                    let _ = c.kill();
                    let _ = c.wait();
                    failed.push(format!("{}: still running after {} s", f.display(), timeout.as_secs()));
                }
                None => still.push((c, f)),
            }
        }
        running = still;
        std::thread::sleep(Duration::from_millis(50));
    }
    if !failed.is_empty() {
        bail!("creating the scale run's objects failed: {}", failed.join("; "));
    }
    Ok(())
}

/// Per process: (VmRSS, VmHWM, RssAnon) in MiB.
fn read_memory(procs: &[Proc]) -> Vec<(f64, f64, f64)> {
    procs
        .iter()
        .map(|p| {
            let (rss, hwm) = p.memory();
            (rss, hwm, anon_mib(p.child.id()).unwrap_or(f64::NAN))
        })
        .collect()
}

/// RssAnon: the process's own memory (heap, stacks), without the pages of its executable and
/// libraries, which it shares and which grow when code runs for the first time, whatever the
/// number of namespaces.
fn anon_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    crate::serve::status_field_mib(&status, "RssAnon:")
}

fn scale(
    imp: Impl,
    tools: &Tools,
    layout: &olm_dev::Layout,
    work: &Path,
    catalog_dir: &Path,
    global: &GlobalPackage,
    opts: &E2eOptions,
    run: ScaleRun,
) -> anyhow::Result<Scale> {
    let full = run == ScaleRun::Full;
    let n = if full { opts.scale_namespaces } else { opts.scale_namespaces / 10 };
    let tag = imp.tag();
    // Its own names: the baseline's namespaces may still be going when the full run starts.
    let phase = if full { "scale" } else { "baseline" };
    install_crds(imp, tools, layout, work)?;
    kubectl(layout, &["create", "namespace", GLOBAL_NAMESPACE], None).ok();
    let mut churn = opts.catalog_updates.filter(|_| imp == Impl::Ours).map(|every| CatalogChurn::new(work, catalog_dir, every)).transpose()?;
    let catalog_dir = churn.as_ref().map_or(catalog_dir, |c| c.dir.as_path());
    let mut started = start(imp, tools, layout, work, catalog_dir, phase)?;
    let source = format!("bench-{tag}-scale");
    let mut catalog = catalog_source(&source, &started.grpc_addr);
    if churn.is_some() {
        catalog = catalog.replace("displayName: bench}", "displayName: bench, updateStrategy: {registryPoll: {interval: 30s}}}");
    }
    kubectl(layout, &["apply", "-f", "-"], Some(&catalog))?;
    wait_catalog_ready(layout, &source)?;
    std::thread::sleep(opts.idle_after);
    if let Some(dead) = first_dead(&mut started.procs) {
        bail!("{dead} exited before the scale run");
    }
    let idle = read_memory(&started.procs);
    let idle_metrics = save_metrics(&started, &work.join(format!("e2e-{tag}-{phase}-metrics-idle.txt"))).unwrap_or_default();
    let inventory_idle = if full { inventory(layout, None) } else { Vec::new() };
    let followers_idle = if imp == Impl::Ours && full { probe_followers(tools, layout, work, "idle")? } else { Vec::new() };
    let host = full
        .then(|| crate::host_speed::probe(layout).inspect_err(|err| eprintln!("  [{tag}] host speed probe failed: {err:#}")).ok())
        .flatten();

    // Objects: the AllNamespaces operator first, then the N namespaces, spread over a few files
    // created concurrently (each file in order: namespace, OperatorGroup, Subscription).
    let label = format!("{SCALE_LABEL}-{tag}");
    let global_ns = format!("{phase}-{tag}-global");
    let namespaces: Vec<String> = (0..n).map(|i| format!("{phase}-{tag}-{i:04}")).collect();
    let files_dir = work.join(format!("e2e-{tag}-{phase}-objects"));
    std::fs::create_dir_all(&files_dir)?;
    let chunks = opts.create_concurrency.max(1);
    let mut texts = vec![String::new(); chunks];
    texts[0].push_str(&namespace_objects(&global_ns, Some(&label), false, &global.package, &global.channel, &source));
    for (i, ns) in namespaces.iter().enumerate() {
        let t = &mut texts[(i + 1) % chunks];
        t.push_str("---\n");
        t.push_str(&namespace_objects(ns, Some(&label), true, E2E_PACKAGE, E2E_CHANNEL, &source));
    }
    let mut files = Vec::new();
    for (i, t) in texts.iter().enumerate().filter(|(_, t)| !t.is_empty()) {
        let f = files_dir.join(format!("chunk-{i}.yaml"));
        std::fs::write(&f, t)?;
        files.push(f);
    }

    let watch = crate::csv_watch::start(&layout.kubeconfig())?;
    let mut state = CsvState::default();
    drain(&watch, &mut state, Duration::from_millis(700))?;
    let start_at = Instant::now();
    let api_server_cpu_at_start = crate::host_speed::api_server_cpu_s(layout);
    let deadline = start_at + opts.scale_timeout;
    create_files(layout, &files, opts.scale_timeout)?;
    let create = start_at.elapsed();
    eprintln!("  [{tag}] {n} namespaces + 1 AllNamespaces operator created in {:.1} s", create.as_secs_f64());
    let count = |state: &CsvState| namespaces.iter().filter(|ns| state.succeeded(ns, &global.per_namespace_csv)).count();
    let mut last_report = Instant::now();
    if let Some(churn) = churn.as_mut() {
        churn.begin(start_at);
    }
    let settle = loop {
        drain(&watch, &mut state, Duration::from_millis(250))?;
        if let Some(churn) = churn.as_mut() {
            churn.tick()?;
        }
        let done = count(&state);
        let global_done = state.succeeded(&global_ns, &global.csv_name);
        if done == n && global_done {
            break Settle::Settled(start_at.elapsed());
        }
        if let Some(dead) = first_dead(&mut started.procs) {
            bail!("{dead} exited during the scale run ({done} of {n} Succeeded)");
        }
        if Instant::now() > deadline {
            break Settle::NotSettled { after: start_at.elapsed(), succeeded: done, global_succeeded: global_done };
        }
        if last_report.elapsed() > Duration::from_secs(30) {
            eprintln!("  [{tag}] {:.0} s: {done} of {n} Succeeded, AllNamespaces operator {}", start_at.elapsed().as_secs_f64(), if global_done { "Succeeded" } else { "not yet" });
            last_report = Instant::now();
        }
    };
    let updates_at_settle = churn.as_ref().map_or(0, |c| c.added);
    let api_server_cpu_until_settle = crate::host_speed::api_server_cpu_s(layout).zip(api_server_cpu_at_start).map(|(now, start)| now - start);
    drain(&watch, &mut state, Duration::from_secs(2))?;
    let settled = read_memory(&started.procs);
    let copied_at_settle = state.copied();
    let settled_metrics = save_metrics(&started, &work.join(format!("e2e-{tag}-{phase}-metrics-settled.txt"))).unwrap_or_default();
    let reconciles = reconciles(&settled_metrics);
    let requests = requests_between(&idle_metrics, &settled_metrics);
    let steady_at = Instant::now() + opts.steady_after;
    while Instant::now() < steady_at {
        drain(&watch, &mut state, Duration::from_secs(1).min(steady_at - Instant::now()))?;
        if let Some(churn) = churn.as_mut() {
            churn.tick()?;
        }
    }
    let catalog_updates = (updates_at_settle, churn.as_ref().map_or(0, |c| c.added));
    let steady = read_memory(&started.procs);
    save_metrics(&started, &work.join(format!("e2e-{tag}-{phase}-metrics-steady.txt")));
    let copied_at_end = state.copied();
    let csvs_at_end = state.csvs.len();
    drop(watch);
    let inventory_end = if full { inventory(layout, Some(&work.join(format!("e2e-{tag}-scale-inventory")))) } else { Vec::new() };
    let followers = if imp == Impl::Ours && full {
        let end = probe_followers(tools, layout, work, "end")?;
        followers_idle.into_iter().zip(end).map(|((set, idle), (_, end))| (set, idle, end)).collect()
    } else {
        Vec::new()
    };
    let (writes_before_restart, writes_after_restart) = if imp == Impl::Ours && full {
        let (before, after) = writes_around_restart(&mut started, tools, layout, work)?;
        (Some(before), Some(after))
    } else {
        (None, None)
    };
    let memory = started
        .procs
        .iter()
        .zip(idle.iter().zip(settled.iter().zip(&steady)))
        .map(|(p, (i, (s, st)))| ProcMemory {
            label: p.label.clone(),
            controller: p.controller,
            idle_mib: i.0,
            settled_mib: s.0,
            steady_mib: st.0,
            peak_mib: st.1,
            idle_anon_mib: i.2,
            settled_anon_mib: s.2,
        })
        .collect();
    // Deleting hundreds of namespaces takes the namespace controller a while on 2 cores (1,000
    // most of an hour). Ours runs last and the private control plane is removed after it:
    // only upstream's must be gone before ours starts.
    // The full run follows a baseline: the baseline's namespaces go first, both sides.
    let namespace_timeout = if imp == Impl::Ours && full { Duration::ZERO } else { Duration::from_secs(60 + 2 * n as u64) };
    cleanup(layout, &Selection::Label(label), started.procs, &global.group, namespace_timeout);
    Ok(Scale { label: imp.label(), namespaces: n, create, settle, memory, catalog_updates, copied_at_settle, copied_at_end, csvs_at_end, inventory_idle, inventory_end, followers, reconciles, requests, host, api_server_cpu_until_settle, writes_after_restart, writes_before_restart, baseline: None })
}

/// The scale run's catalog updates: a copy of the catalog directory that the catalog server
/// reloads, into which a package nobody subscribes to (the chaos run's, under `churn/`) gets
/// one more version every `every`. Each update makes every Subscription on the catalog
/// resolve again; what that costs shows in the requests counted until settled.
pub(crate) struct CatalogChurn {
    dir: PathBuf,
    every: Duration,
    versions: Vec<String>,
    pub(crate) added: usize,
    next: Option<Instant>,
}

impl CatalogChurn {
    fn new(work: &Path, catalog_dir: &Path, every: Duration) -> anyhow::Result<CatalogChurn> {
        let dir = work.join("e2e-ours-scale-catalog");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        for entry in std::fs::read_dir(catalog_dir)? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                let status = Command::new("cp").arg("-r").arg(entry.path()).arg(&dir).status()?;
                anyhow::ensure!(status.success(), "copy {} into {}", entry.path().display(), dir.display());
            } else {
                std::fs::copy(entry.path(), dir.join(entry.file_name()))?;
            }
        }
        CatalogChurn::within(dir, every)
    }

    /// Updates of the catalog directory `dir` itself (its `churn/` directory).
    pub(crate) fn within(dir: PathBuf, every: Duration) -> anyhow::Result<CatalogChurn> {
        let versions = vec!["1.0.0".to_owned()];
        crate::chaos_catalog::write(&dir.join("churn"), &versions.iter().map(String::as_str).collect::<Vec<_>>())?;
        Ok(CatalogChurn { dir, every, versions, added: 0, next: None })
    }

    /// The first update comes `every` after `at`.
    pub(crate) fn begin(&mut self, at: Instant) {
        self.next = Some(at + self.every);
    }

    /// Add the next version when it is due.
    pub(crate) fn tick(&mut self) -> anyhow::Result<()> {
        let Some(next) = self.next.filter(|n| Instant::now() >= *n) else { return Ok(()) };
        self.versions.push(format!("1.0.{}", self.versions.len()));
        crate::chaos_catalog::write(&self.dir.join("churn"), &self.versions.iter().map(String::as_str).collect::<Vec<_>>())?;
        self.added += 1;
        self.next = Some(next + self.every);
        eprintln!("  catalog update {}: churn packages at 1.0.{}", self.added, self.versions.len() - 1);
        Ok(())
    }
}

fn upstream_module_dir(tools: &Tools) -> anyhow::Result<PathBuf> {
    let home = std::env::var_os("HOME").context("HOME")?;
    let dir = PathBuf::from(home)
        .join(".cache/olm-dev/go/mod/github.com/operator-framework")
        .join(format!("operator-lifecycle-manager@{}", tools.olm_upstream_version));
    if dir.is_dir() { Ok(dir) } else { bail!("{} missing (the resolver driver build downloads it)", dir.display()) }
}

/// Pods one fake node takes (the scheduler refuses more): olm-dev's node and ours declare this.
pub const PODS_PER_NODE: usize = 110;

/// olm-dev's control plane has one kwok node, and a node takes at most PODS_PER_NODE pods: the
/// scale run's operator Deployments (one per namespace, plus the AllNamespaces one) need more.
/// kwok manages every node annotated kwok.x-k8s.io/node=fake, so these extra Node objects become
/// Ready fake nodes.
pub(crate) fn add_nodes(layout: &olm_dev::Layout, pods: usize) -> anyhow::Result<usize> {
    let extra = pods.div_ceil(PODS_PER_NODE);
    for i in 0..extra {
        let name = format!("olm-bench-node-{i}");
        let node = format!(
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  annotations: {{kwok.x-k8s.io/node: fake, node.alpha.kubernetes.io/ttl: \"0\"}}\n  labels: {{kubernetes.io/arch: amd64, kubernetes.io/hostname: {name}, kubernetes.io/os: linux, kubernetes.io/role: agent, node-role.kubernetes.io/agent: \"\", type: kwok}}\nspec: {{}}\nstatus:\n  allocatable: {{cpu: \"32\", memory: 256Gi, ephemeral-storage: 1Ti, pods: \"{PODS_PER_NODE}\"}}\n  capacity: {{cpu: \"32\", memory: 256Gi, ephemeral-storage: 1Ti, pods: \"{PODS_PER_NODE}\"}}\n"
        );
        kubectl(layout, &["apply", "-f", "-"], Some(&node))?;
        wait_for(&format!("node {name} to be Ready"), Duration::from_secs(60), || {
            let out = kubectl(layout, &["get", "node", &name, "-o", "jsonpath={.status.conditions[?(@.type==\"Ready\")].status} {.status.allocatable.pods}"], None)
                .unwrap_or_default();
            Ok(out.trim().starts_with("True ") && out.trim().ends_with(&PODS_PER_NODE.to_string()))
        })?;
    }
    Ok(extra)
}

/// One side's single install and (when asked for) scale run.
type SideResults = (Result<Side, String>, Option<Result<Scale, String>>);

pub fn run(tools: &Tools, work: &Path, opts: &E2eOptions) -> anyhow::Result<E2e> {
    let catalog_dir = work.join("e2e-catalog");
    let global = crate::catalogs::make_e2e_catalog(&tools.workspace.join("catalogs/community"), &catalog_dir)?;
    let layout = layout(work)?;
    let progress = olm_dev::Progress::quiet();
    let t = Instant::now();
    olm_dev::up(&layout, &progress).context("starting the private control plane")?;
    let cluster_up = t.elapsed();
    // One operator pod per namespace plus the AllNamespaces one.
    let extra_nodes = if opts.scale_namespaces > 0 { add_nodes(&layout, opts.scale_namespaces + 1)? } else { 0 };
    let mut results: BTreeMap<&str, SideResults> = BTreeMap::new();
    // OLM_BENCH_SIDES=ours (or upstream) runs one side only: for working on it, never for the
    // published figures, which need both sides in one run.
    let only = std::env::var("OLM_BENCH_SIDES").ok();
    for imp in [Impl::Upstream, Impl::Ours] {
        if only.as_deref().is_some_and(|o| o != imp.tag()) {
            let skipped = format!("not run (OLM_BENCH_SIDES={})", only.as_deref().unwrap_or_default());
            let scaled = (opts.scale_namespaces > 0).then(|| Err(skipped.clone()));
            results.insert(imp.tag(), (Err(skipped), scaled));
            continue;
        }
        eprintln!("[e2e] {}: single install", imp.label());
        let side = singles(imp, tools, &layout, work, &catalog_dir, &global, opts.single_runs).map_err(|e| format!("{e:#}"));
        let scaled = (opts.scale_namespaces > 0).then(|| {
            let small = opts.scale_namespaces / 10;
            let baseline = (small >= 2).then(|| {
                eprintln!("[e2e] {}: scale run's baseline, {small} namespaces", imp.label());
                scale(imp, tools, &layout, work, &catalog_dir, &global, opts, ScaleRun::Baseline)
                    .map(|b| b.baseline_of())
                    .map_err(|e| format!("{e:#}"))
            });
            eprintln!("[e2e] {}: scale run, {} namespaces", imp.label(), opts.scale_namespaces);
            scale(imp, tools, &layout, work, &catalog_dir, &global, opts, ScaleRun::Full)
                .map(|full| Scale { baseline, ..full })
                .map_err(|e| format!("{e:#}"))
        });
        results.insert(imp.tag(), (side, scaled));
    }
    let _ = olm_dev::down(&layout, &progress, true);
    let (upstream, upstream_scale) = results.remove("upstream").context("upstream ran")?;
    let (ours, ours_scale) = results.remove("ours").context("ours ran")?;
    Ok(E2e { upstream, ours, upstream_scale, ours_scale, cluster_up, global, options: opts.clone(), extra_nodes })
}

#[cfg(test)]
mod tests {
    use super::{Baseline, ProcMemory, Scale, Settle};
    use std::time::Duration;

    fn proc(controller: bool, (idle, settled): (f64, f64), (idle_anon, settled_anon): (f64, f64)) -> ProcMemory {
        ProcMemory { label: "p".into(), controller, idle_mib: idle, settled_mib: settled, steady_mib: settled, peak_mib: settled, idle_anon_mib: idle_anon, settled_anon_mib: settled_anon }
    }

    fn scale(namespaces: usize, memory: Vec<ProcMemory>, baseline: Option<Result<Baseline, String>>) -> Scale {
        Scale {
            label: "ours",
            namespaces,
            create: Duration::ZERO,
            settle: Settle::Settled(Duration::from_secs(40)),
            memory,
            catalog_updates: (0, 0),
            copied_at_settle: 0,
            copied_at_end: 0,
            csvs_at_end: 0,
            inventory_idle: Vec::new(),
            inventory_end: Vec::new(),
            followers: Vec::new(),
            reconciles: Vec::new(),
            requests: Vec::new(),
            host: None,
            api_server_cpu_until_settle: None,
            writes_after_restart: None,
            writes_before_restart: None,
            baseline,
        }
    }

    #[test]
    fn added_namespaces_cost_the_growth_beyond_the_baselines() {
        // The controllers grow 11.2 MiB (5.6 anonymous) with 20 namespaces and 21.5 (16.4) with
        // 200; the catalog server's growth is not counted.
        let baseline = scale(20, vec![proc(true, (47.0, 58.2), (6.1, 11.7)), proc(false, (20.0, 30.0), (4.0, 9.0))], None).baseline_of();
        assert_eq!(baseline.namespaces, 20);
        assert!((baseline.growth_mib - 11.2).abs() < 1e-9 && (baseline.growth_anon_mib - 5.6).abs() < 1e-9);
        let full = scale(200, vec![proc(true, (48.1, 69.6), (6.6, 23.0)), proc(false, (20.0, 40.0), (4.0, 14.0))], Some(Ok(baseline)));
        let (rss, anon) = full.added_per_namespace_kib().expect("a settled baseline");
        assert!((rss - (21.5 - 11.2) * 1024.0 / 180.0).abs() < 1e-6, "{rss}");
        assert!((anon - (16.4 - 5.6) * 1024.0 / 180.0).abs() < 1e-6, "{anon}");
        // The average over all 200 namespaces carries the fixed growth too.
        assert!(full.per_namespace_kib() > rss);
    }

    #[test]
    fn without_a_settled_baseline_there_is_no_added_cost() {
        let memory = || vec![proc(true, (48.0, 70.0), (6.0, 23.0))];
        assert!(scale(200, memory(), None).added_per_namespace_kib().is_none());
        assert!(scale(200, memory(), Some(Err("failed".into()))).added_per_namespace_kib().is_none());
        let unsettled = Baseline { namespaces: 20, settled: false, growth_mib: 10.0, growth_anon_mib: 5.0 };
        assert!(scale(200, memory(), Some(Ok(unsettled))).added_per_namespace_kib().is_none());
    }
}
