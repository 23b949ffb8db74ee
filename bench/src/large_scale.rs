//! The large-scale run (issue #57): OLM as `olm dev up` runs it (`dev_env`), on a private
//! control plane with fake (kwok) nodes, against a cluster the size of the largest published
//! OLM figures: N namespaces (10,000 by default), five real AllNamespaces operators (their
//! bundles from tests/testdata/community) in `operators`, and in S of the namespaces (1,000) an
//! OperatorGroup and a Subscription to etcd, while the catalog gets a new bundle every few
//! minutes. It runs once with copied CSVs and once with them switched off through OLMConfig,
//! each time on a fresh control plane, and measures what issue #57 asks: every process's
//! memory and CPU (OLM's three, the API server's, etcd's), requests per namespace by kind (OLM's
//! own and all clients'), the time to settle, `kubectl get packagemanifests` and one more
//! install at that size, and what a restart of `olm run` costs. The report is
//! `large_scale_report.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::Value;

use crate::csv_watch::{CsvState, drain};
use crate::dev_env::{self, DevEnv};
use crate::e2e::{CatalogChurn, RESTART_WATCH, add_nodes, create_files, http_get, writes_between};

/// Its own ports: `olm dev up` uses 28000, the tests 29000, the e2e bench 25000, chaos 26000.
const PORT_BASE: u16 = 27000;
/// The catalog's name (a CatalogSource in `olm`, served by the environment's `olm catalog serve`).
const SOURCE: &str = "large";
/// Where the AllNamespaces operators are installed (`olm dev up`'s global OperatorGroup).
const GLOBAL_NAMESPACE: &str = "operators";
/// The AllNamespaces operators: real packages whose head installs with one Deployment, CRDs
/// and RBAC (tests/testdata/community/README.md has their provenance).
pub const OPERATORS: [&str; 5] = ["ack-ecr-controller", "aws-efs-operator", "dns-operator", "gitlab-runner-operator", "limitador-operator"];
/// The per-namespace package (the repository's catalogs/community).
const PACKAGE: &str = "etcd";
const CHANNEL: &str = "singlenamespace-alpha";

pub struct LargeOptions {
    pub namespaces: usize,
    pub subscriptions: usize,
    /// Run with copied CSVs (`true`), without (`false`), in this order.
    pub copies: Vec<bool>,
    pub catalog_updates: Duration,
    pub settle_timeout: Duration,
    /// After settling: how long the steady reading waits (catalog updates go on).
    pub steady_after: Duration,
    pub create_concurrency: usize,
    pub olm: PathBuf,
    pub out: PathBuf,
}

/// One process's readings: RSS (MiB) idle, settled, steady, its peak, and CPU seconds used from
/// the first create until settled.
pub struct ProcReading {
    pub name: String,
    pub idle_mib: f64,
    pub settled_mib: f64,
    pub steady_mib: f64,
    pub peak_mib: f64,
    pub cpu_until_settled_s: f64,
}

pub struct Restart {
    /// Killed → /readyz answers 200 (every cache synced).
    pub ready_after: Duration,
    /// Writes (verb resource → count) in RESTART_WATCH before the restart and after ready.
    pub writes_before: Vec<(String, u64)>,
    pub writes_after: Vec<(String, u64)>,
    /// The new process's RSS and peak RSS RESTART_WATCH after ready (MiB).
    pub rss_mib: f64,
    pub peak_mib: f64,
}

pub struct Variant {
    pub copies: bool,
    pub create: Duration,
    /// `Err(what was left)` when it did not settle within the timeout.
    pub settle: Result<Duration, String>,
    pub catalog_updates: usize,
    pub copied_at_settle: usize,
    pub processes: Vec<ProcReading>,
    /// OLM's own requests (`olm run`'s `olm_api_requests_total`), idle → settled: (verb resource, count).
    pub olm_requests: Vec<(String, u64)>,
    /// Every client's (`apiserver_request_total`), idle → settled: (VERB resource, count).
    pub all_requests: Vec<(String, u64)>,
    /// `apiserver_storage_size_bytes` when settled.
    pub storage_mib: Option<f64>,
    /// CSVs in the cluster when settled (originals and copies).
    pub csvs_stored: usize,
    /// `kubectl get packagemanifests` in one namespace: each run's time and the rows listed.
    pub packagemanifests: Vec<Duration>,
    pub packagemanifest_rows: usize,
    /// One more Subscription (a namespace of its own) → its CSV Succeeded, at that size.
    pub probe_install: Result<Duration, String>,
    pub restart: Result<Restart, String>,
}

pub struct LargeRun {
    pub options: LargeOptionsEcho,
    pub variants: Vec<Result<Variant, String>>,
    pub total: Duration,
}

/// What the report repeats of the options.
pub struct LargeOptionsEcho {
    pub namespaces: usize,
    pub subscriptions: usize,
    pub catalog_updates: Duration,
    pub steady_after: Duration,
    pub create_concurrency: usize,
}

/// The catalog of the run: etcd (catalogs/community), the five operators rendered from their
/// bundle directories, and the churn package (`CatalogChurn`). Returns each operator's
/// (package, default channel, head CSV) and the etcd channel's head.
fn write_catalog(workspace: &Path, dir: &Path) -> anyhow::Result<(Vec<(String, String, String)>, String)> {
    std::fs::create_dir_all(dir.join(PACKAGE))?;
    let etcd = workspace.join("catalogs/community/etcd/catalog.yaml");
    std::fs::copy(&etcd, dir.join(PACKAGE).join("catalog.yaml")).with_context(|| format!("copying {}", etcd.display()))?;
    let (etcd_docs, problems) = olm_catalog::load::load_fbc_documents(&dir.join(PACKAGE)).context("loading etcd's catalog")?;
    if !problems.is_empty() {
        bail!("{} has problems: {problems:?}", etcd.display());
    }
    let etcd_head = crate::catalogs::channel_head(&etcd_docs, PACKAGE, CHANNEL)?;
    let options = olm_catalog::RenderOptions { objects: olm_catalog::ObjectMode::BundleObjects, image: None };
    let mut operators = Vec::new();
    for package in OPERATORS {
        let src = workspace.join("tests/testdata/community").join(package);
        let (_, documents, problems) = olm_catalog::source::load_documents(&src, &options).with_context(|| format!("rendering {}", src.display()))?;
        if let Some(problem) = problems.iter().find(|p| !p.warning) {
            bail!("rendering {}: {problem}", src.display());
        }
        let channel = documents
            .iter()
            .find(|d| d.value.get("schema").and_then(Value::as_str) == Some("olm.package"))
            .and_then(|d| d.value.get("defaultChannel").and_then(Value::as_str))
            .with_context(|| format!("{} has no olm.package with a default channel", src.display()))?
            .to_owned();
        let head = crate::catalogs::channel_head(&documents, package, &channel)?;
        let mut text = String::new();
        for d in &documents {
            text.push_str(&serde_json::to_string(&d.value)?);
            text.push('\n');
        }
        std::fs::create_dir_all(dir.join(package))?;
        std::fs::write(dir.join(package).join("catalog.json"), text)?;
        operators.push((package.to_owned(), channel, head));
    }
    Ok((operators, etcd_head))
}

fn namespace_name(i: usize) -> String {
    format!("large-{i:05}")
}

fn subscription(namespace: &str, package: &str, channel: &str) -> String {
    format!(
        "---\napiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata: {{name: {package}, namespace: {namespace}}}\nspec: {{source: {SOURCE}, sourceNamespace: olm, name: {package}, channel: {channel}}}\n"
    )
}

/// Namespace, and for the first `subscriptions` an OperatorGroup and a Subscription; spread over
/// `chunks` files, each created in order by its own `kubectl create`.
fn object_files(dir: &Path, namespaces: usize, subscriptions: usize, chunks: usize, operators: &[(String, String, String)]) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let chunks = chunks.max(1);
    let mut texts = vec![String::new(); chunks];
    for (package, channel, _) in operators {
        texts[0].push_str(&subscription(GLOBAL_NAMESPACE, package, channel));
    }
    for i in 0..namespaces {
        let ns = namespace_name(i);
        let text = &mut texts[i % chunks];
        text.push_str(&format!("---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n"));
        if i < subscriptions {
            text.push_str(&format!(
                "---\napiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata: {{name: own, namespace: {ns}}}\nspec: {{targetNamespaces: [{ns}]}}\n"
            ));
            text.push_str(&subscription(&ns, PACKAGE, CHANNEL));
        }
    }
    let mut files = Vec::new();
    for (i, text) in texts.iter().enumerate().filter(|(_, t)| !t.is_empty()) {
        let file = dir.join(format!("chunk-{i:02}.yaml"));
        std::fs::write(&file, text)?;
        files.push(file);
    }
    Ok(files)
}

/// The processes measured, by pid-file name.
const PROCESSES: [&str; 5] = [dev_env::CONTROLLERS, dev_env::CATALOG_SERVER, dev_env::PACKAGE_SERVER, "kube-apiserver", "etcd"];

/// (RSS, peak, CPU s) of each of [`PROCESSES`].
fn read_processes(env: &DevEnv) -> anyhow::Result<Vec<(f64, f64, f64)>> {
    PROCESSES
        .iter()
        .map(|name| {
            let pid = env.pid(name)?;
            let (rss, peak) = crate::serve::memory_mib(pid).with_context(|| format!("reading {name}'s memory"))?;
            Ok((rss, peak, crate::host_speed::cpu_s(pid).unwrap_or(f64::NAN)))
        })
        .collect()
}

/// The API server's /metrics.
fn api_server_metrics(env: &DevEnv) -> String {
    env.kubectl(&["get", "--raw", "/metrics"], None).unwrap_or_default()
}

/// `apiserver_request_total` summed by "VERB resource[/subresource]".
fn api_server_requests(metrics: &str) -> BTreeMap<String, u64> {
    let mut by = BTreeMap::new();
    for line in metrics.lines().filter(|l| l.starts_with("apiserver_request_total{")) {
        let Some((series, value)) = line.rsplit_once(' ') else { continue };
        let label = |name: &str| series.split(&format!(",{name}=\"")).nth(1).or_else(|| series.split(&format!("{{{name}=\"")).nth(1)).and_then(|r| r.split('"').next()).unwrap_or("").to_owned();
        let subresource = label("subresource");
        let resource = if subresource.is_empty() { label("resource") } else { format!("{}/{subresource}", label("resource")) };
        *by.entry(format!("{} {resource}", label("verb"))).or_default() += value.trim().parse::<f64>().unwrap_or(0.0) as u64;
    }
    by
}

fn delta(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> =
        after.iter().map(|(k, n)| (k.clone(), n.saturating_sub(before.get(k).copied().unwrap_or(0)))).filter(|(_, n)| *n > 0).collect();
    out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    out
}

/// A gauge of the API server's /metrics (the first series of that name with `filter` in it).
fn gauge(metrics: &str, name: &str, filter: &str) -> Option<f64> {
    metrics
        .lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']) && l.contains(filter))
        .find_map(|l| l.rsplit_once(' ')?.1.trim().parse().ok())
}

fn olm_metrics(env: &DevEnv, work: &Path, name: &str) -> String {
    let text = http_get(&env.controllers_admin(), "/metrics").unwrap_or_default();
    let _ = std::fs::write(work.join(format!("metrics-{name}.txt")), &text);
    text
}

/// No progress for this long is a stall: the run says what is missing, as the watch and as the
/// API server see it.
const STALL: Duration = Duration::from_secs(120);

/// Say what a stalled run waits for: the copies missing as the run's watch sees them and as a
/// fresh list from the API server does (they differ when the watch fell behind), by operator,
/// and the missing ones in `work/stall-SECONDS.txt`.
fn report_stall(env: &DevEnv, work: &Path, state: &CsvState, heads: &BTreeSet<String>, n: usize, at: Duration) {
    let listed = env.kubectl(
        &["get", "csv", "-A", "-l", "olm.copiedFrom", "--no-headers", "-o", "custom-columns=NS:.metadata.namespace,NAME:.metadata.name,PHASE:.status.phase"],
        None,
    );
    let listed: BTreeSet<(String, String)> = match &listed {
        Ok(text) => text
            .lines()
            .filter_map(|l| {
                let mut cols = l.split_whitespace();
                let (ns, name, phase) = (cols.next()?, cols.next()?, cols.next()?);
                (phase == "Succeeded").then(|| (ns.to_owned(), name.to_owned()))
            })
            .collect(),
        Err(err) => {
            eprintln!("large: stalled at {:.0} s; listing the copies failed: {err:#}", at.as_secs_f64());
            return;
        }
    };
    let mut missing = String::new();
    let mut summary = Vec::new();
    for head in heads {
        let (mut by_watch, mut by_api) = (0, 0);
        for ns in (0..n).map(namespace_name) {
            let key = (ns.clone(), head.clone());
            let seen = state.csvs.get(&key).is_some_and(|(phase, copied)| *copied && phase == "Succeeded");
            let there = listed.contains(&key);
            by_watch += usize::from(!seen);
            by_api += usize::from(!there);
            if !seen || !there {
                missing.push_str(&format!("{ns} {head} watch={} api={}\n", if seen { "ok" } else { "missing" }, if there { "ok" } else { "missing" }));
            }
        }
        summary.push(format!("{head}: {by_watch} missing by the watch, {by_api} by the API server"));
    }
    let file = work.join(format!("stall-{:.0}.txt", at.as_secs_f64()));
    let _ = std::fs::write(&file, missing);
    eprintln!("large: no progress for {} s at {:.0} s ({} lists by the watch); {}; see {}", STALL.as_secs(), at.as_secs_f64(), state.lists, summary.join("; "), file.display());
}

/// Copies of the operators' CSVs, Succeeded, in the run's namespaces.
fn copies_succeeded(state: &CsvState, heads: &BTreeSet<String>) -> usize {
    state
        .csvs
        .iter()
        .filter(|((ns, name), (phase, copied))| *copied && phase == "Succeeded" && ns.starts_with("large-") && heads.contains(name))
        .count()
}

fn run_variant(workspace: &Path, opts: &LargeOptions, copies: bool) -> anyhow::Result<Variant> {
    let work = workspace.join(format!("target/olm-bench/large-scale/copies-{}", if copies { "on" } else { "off" }));
    let env = DevEnv::fresh(&work, &opts.olm, &work.join("catalog"), PORT_BASE)?;
    let (operators, etcd_head) = write_catalog(workspace, &env.catalog_dir)?;
    let mut churn = CatalogChurn::within(env.catalog_dir.clone(), opts.catalog_updates)?;
    eprintln!("large: copies {}: olm dev up on ports from {PORT_BASE} ({})", if copies { "on" } else { "off" }, work.display());
    env.up()?;
    let result = drive(&env, &work, opts, copies, &operators, &etcd_head, &mut churn);
    eprintln!("large: stopping the environment");
    let _ = env.down();
    result
}

fn drive(
    env: &DevEnv,
    work: &Path,
    opts: &LargeOptions,
    copies: bool,
    operators: &[(String, String, String)],
    etcd_head: &str,
    churn: &mut CatalogChurn,
) -> anyhow::Result<Variant> {
    let (n, s) = (opts.namespaces, opts.subscriptions.min(opts.namespaces));
    add_nodes(&env.layout, s + operators.len() + 1)?;
    env.kubectl(
        &["apply", "-f", "-"],
        Some(&format!(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata: {{name: {SOURCE}, namespace: olm}}\nspec:\n  sourceType: grpc\n  address: 127.0.0.1:{}\n  displayName: Large-scale run\n  updateStrategy: {{registryPoll: {{interval: 30s}}}}\n",
            env.layout.host_ports.catalog_grpc
        )),
    )?;
    if !copies {
        env.kubectl(&["patch", "olmconfig", "cluster", "--type=merge", "-p", r#"{"spec":{"features":{"disableCopiedCSVs":true}}}"#], None)?;
    }
    crate::e2e::wait_catalog_ready(&env.layout, SOURCE)?;
    std::thread::sleep(Duration::from_secs(20));
    let idle = read_processes(env)?;
    let idle_olm = olm_metrics(env, work, "idle");
    let idle_api = api_server_metrics(env);

    let files = object_files(&work.join("objects"), n, s, opts.create_concurrency, operators)?;
    let watch = crate::csv_watch::start(&env.layout.kubeconfig())?;
    let mut state = CsvState::default();
    drain(&watch, &mut state, Duration::from_millis(700))?;
    let heads: BTreeSet<String> = operators.iter().map(|(_, _, head)| head.clone()).collect();
    let subscribed: Vec<String> = (0..s).map(namespace_name).collect();
    let start = Instant::now();
    let deadline = start + opts.settle_timeout;
    churn.begin(start);
    create_files(&env.layout, &files, opts.settle_timeout)?;
    let create = start.elapsed();
    eprintln!("large: {n} namespaces, {s} Subscriptions and {} AllNamespaces operators created in {:.1} s", operators.len(), create.as_secs_f64());
    let mut last_report = Instant::now();
    let mut progress_at = (Instant::now(), (0, 0, 0));
    let settle = loop {
        drain(&watch, &mut state, Duration::from_secs(2))?;
        churn.tick()?;
        let installed = subscribed.iter().filter(|ns| state.succeeded(ns, etcd_head)).count();
        let globals = heads.iter().filter(|head| state.succeeded(GLOBAL_NAMESPACE, head)).count();
        let copied = copies_succeeded(&state, &heads);
        if progress_at.1 != (installed, globals, copied) {
            progress_at = (Instant::now(), (installed, globals, copied));
        } else if copies && progress_at.0.elapsed() > STALL {
            report_stall(env, work, &state, &heads, n, start.elapsed());
            progress_at.0 = Instant::now();
        }
        let copies_done = if copies { copied == n * heads.len() } else { state.copied() == 0 };
        if installed == s && globals == heads.len() && copies_done {
            break Ok(start.elapsed());
        }
        let progress = format!("{installed} of {s} Subscriptions, {globals} of {} AllNamespaces operators, {copied} copies Succeeded", heads.len());
        if Instant::now() > deadline {
            break Err(format!("not settled after {:.0} s: {progress}", start.elapsed().as_secs_f64()));
        }
        if last_report.elapsed() > Duration::from_secs(30) {
            eprintln!("large: {:.0} s: {progress}", start.elapsed().as_secs_f64());
            last_report = Instant::now();
        }
    };
    let settled = read_processes(env)?;
    let settled_olm = olm_metrics(env, work, "settled");
    let settled_api = api_server_metrics(env);
    let _ = std::fs::write(work.join("apiserver-metrics-settled.txt"), &settled_api);
    let catalog_updates = churn.added;
    let copied_at_settle = copies_succeeded(&state, &heads);
    let csvs_stored = state.csvs.len();
    eprintln!("large: settled: {settle:?}");

    // At that size: what a user does.
    let mut packagemanifests = Vec::new();
    let mut packagemanifest_rows = 0;
    for _ in 0..5 {
        let t = Instant::now();
        let out = env.kubectl(&["get", "packagemanifests", "-n", &namespace_name(0)], None)?;
        packagemanifests.push(t.elapsed());
        packagemanifest_rows = out.lines().count().saturating_sub(1);
    }
    let probe_install = probe_install(env, &watch, &mut state, etcd_head, churn).map_err(|e| format!("{e:#}"));

    let steady_at = Instant::now() + opts.steady_after;
    while Instant::now() < steady_at {
        drain(&watch, &mut state, Duration::from_secs(1))?;
        churn.tick()?;
    }
    let steady = read_processes(env)?;
    drop(watch);
    let restart = restart(env, work).map_err(|e| format!("{e:#}"));
    let processes = PROCESSES
        .iter()
        .enumerate()
        .map(|(i, name)| ProcReading {
            name: (*name).to_owned(),
            idle_mib: idle[i].0,
            settled_mib: settled[i].0,
            steady_mib: steady[i].0,
            peak_mib: steady[i].1,
            cpu_until_settled_s: settled[i].2 - idle[i].2,
        })
        .collect();
    Ok(Variant {
        copies,
        create,
        settle,
        catalog_updates,
        copied_at_settle,
        processes,
        olm_requests: delta(&crate::e2e::api_requests(&idle_olm), &crate::e2e::api_requests(&settled_olm)),
        all_requests: delta(&api_server_requests(&idle_api), &api_server_requests(&settled_api)),
        storage_mib: gauge(&settled_api, "apiserver_storage_size_bytes", "").map(|b| b / 1024.0 / 1024.0),
        csvs_stored,
        packagemanifests,
        packagemanifest_rows,
        probe_install,
        restart,
    })
}

/// One more OwnNamespace install in a namespace of its own: created → its CSV Succeeded.
fn probe_install(env: &DevEnv, watch: &std::sync::mpsc::Receiver<String>, state: &mut CsvState, etcd_head: &str, churn: &mut CatalogChurn) -> anyhow::Result<Duration> {
    let ns = "large-probe";
    let objects = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n---\napiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata: {{name: own, namespace: {ns}}}\nspec: {{targetNamespaces: [{ns}]}}\n{}",
        subscription(ns, PACKAGE, CHANNEL)
    );
    let t = Instant::now();
    env.kubectl(&["create", "-f", "-"], Some(&objects))?;
    while !state.succeeded(ns, etcd_head) {
        if t.elapsed() > Duration::from_secs(600) {
            bail!("{ns}: the CSV {etcd_head} did not succeed within 600 s");
        }
        drain(watch, state, Duration::from_millis(50))?;
        churn.tick()?;
    }
    Ok(t.elapsed())
}

/// Writes in RESTART_WATCH before, then `olm run` stopped (SIGTERM) and started again by `olm dev
/// up`: time until ready, its writes in RESTART_WATCH after, and its memory then.
fn restart(env: &DevEnv, work: &Path) -> anyhow::Result<Restart> {
    let first = olm_metrics(env, work, "before-restart-start");
    std::thread::sleep(RESTART_WATCH);
    let last = olm_metrics(env, work, "before-restart-end");
    let writes_before = writes_between(&first, &last);
    let pid = env.pid(dev_env::CONTROLLERS)?;
    let t = Instant::now();
    let status = std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status()?;
    anyhow::ensure!(status.success(), "kill -TERM {pid} failed");
    crate::e2e::wait_for("olm run to stop", Duration::from_secs(60), || Ok(!Path::new(&format!("/proc/{pid}")).exists()))?;
    env.up()?;
    let admin = env.controllers_admin();
    crate::e2e::wait_for("the restarted olm run's caches synced", Duration::from_secs(600), || {
        Ok(crate::e2e::ready(&admin))
    })?;
    let ready_after = t.elapsed();
    std::thread::sleep(RESTART_WATCH);
    let metrics = olm_metrics(env, work, "restarted");
    let (rss_mib, peak_mib) = crate::serve::memory_mib(env.pid(dev_env::CONTROLLERS)?)?;
    Ok(Restart { ready_after, writes_before, writes_after: writes_between("", &metrics), rss_mib, peak_mib })
}

pub fn run(workspace: &Path, opts: &LargeOptions) -> anyhow::Result<LargeRun> {
    let started = Instant::now();
    let variants = opts
        .copies
        .iter()
        .map(|&copies| run_variant(workspace, opts, copies).map_err(|e| format!("{e:#}")))
        .collect();
    Ok(LargeRun {
        options: LargeOptionsEcho {
            namespaces: opts.namespaces,
            subscriptions: opts.subscriptions.min(opts.namespaces),
            catalog_updates: opts.catalog_updates,
            steady_after: opts.steady_after,
            create_concurrency: opts.create_concurrency,
        },
        variants,
        total: started.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_server_requests_sum_by_verb_and_resource() {
        let metrics = "\
apiserver_request_total{code=\"201\",component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"namespaces\",scope=\"resource\",subresource=\"\",verb=\"POST\",version=\"v1\"} 10
apiserver_request_total{code=\"409\",component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"namespaces\",scope=\"resource\",subresource=\"\",verb=\"POST\",version=\"v1\"} 2
apiserver_request_total{code=\"200\",component=\"apiserver\",dry_run=\"\",group=\"operators.coreos.com\",resource=\"clusterserviceversions\",scope=\"resource\",subresource=\"status\",verb=\"APPLY\",version=\"v1alpha1\"} 7
apiserver_request_duration_seconds_count{verb=\"POST\",resource=\"namespaces\"} 99
";
        let by = api_server_requests(metrics);
        assert_eq!(by.get("POST namespaces"), Some(&12));
        assert_eq!(by.get("APPLY clusterserviceversions/status"), Some(&7));
        assert_eq!(by.len(), 2);
        let before = BTreeMap::from([("POST namespaces".to_owned(), 2)]);
        assert_eq!(delta(&before, &by), vec![("POST namespaces".to_owned(), 10), ("APPLY clusterserviceversions/status".to_owned(), 7)]);
    }

    #[test]
    fn gauges_are_read_by_name_and_label() {
        let metrics = "apiserver_storage_objects{resource=\"namespaces\"} 12\napiserver_storage_objects{resource=\"clusterserviceversions.operators.coreos.com\"} 5005\napiserver_storage_size_bytes{storage_cluster_id=\"x\"} 1.048576e+06\n";
        assert_eq!(gauge(metrics, "apiserver_storage_objects", "clusterserviceversions"), Some(5005.0));
        assert_eq!(gauge(metrics, "apiserver_storage_size_bytes", ""), Some(1_048_576.0));
        assert_eq!(gauge(metrics, "apiserver_storage", ""), None);
    }

    #[test]
    fn objects_put_every_namespace_in_one_file_with_its_subscription() {
        let dir = tempfile::tempdir().unwrap();
        let operators = vec![("dns-operator".to_owned(), "stable".to_owned(), "dns-operator.v0.6.0".to_owned())];
        let files = object_files(dir.path(), 5, 2, 2, &operators).unwrap();
        let texts: Vec<String> = files.iter().map(|f| std::fs::read_to_string(f).unwrap()).collect();
        let all = texts.concat();
        assert_eq!(all.matches("kind: Namespace").count(), 5);
        assert_eq!(all.matches("kind: Subscription").count(), 3);
        assert!(texts[0].contains("name: dns-operator, namespace: operators"));
        // A namespace's OperatorGroup and Subscription follow it in the same file.
        let with_sub = texts.iter().find(|t| t.contains("name: large-00001}")).unwrap();
        assert!(with_sub.contains("name: etcd, namespace: large-00001"));
        assert!(!all.contains("namespace: large-00002}"), "namespaces past the subscribed ones are bare");
    }
}
