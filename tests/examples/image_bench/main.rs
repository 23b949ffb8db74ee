//! Benchmark (issue #17): operators and catalogs from OCI images, on the local control plane
//! with every controller in this process and a real registry (CNCF distribution on loopback).
//!
//! ```text
//! cargo build --release -p olm
//! cargo run --release -p olm-e2e --example image_bench -- [--rounds N] [--fbc DIR] [--skip-install] [--skip-catalog] [--markdown FILE]
//! ```
//!
//! `--rounds` (or `OLM_BENCH_ROUNDS`, default 5) is the number of rounds of each measurement;
//! `--markdown FILE` writes the findings as BENCHMARKS.md §4's body (`bench/run.sh` asks for it);
//! `--fbc` the real file-based catalog for part 2 (default
//! /work/shared/real-catalogs/community-operators-prod-fbc-v4.21/catalog; `OLM_BENCH_FBC`).
//! The `olm` binary pushes and renders (`OLM_BIN`, else `target/release/olm` beside this
//! example).
//!
//! 1. **Subscription → CSV Succeeded** for etcd 0.9.4 (crates/olm-registry/testdata/bundles/etcd/0.9.4)
//!    in an own-namespace OperatorGroup, each round in a fresh namespace with its own
//!    CatalogSource (`spec.image`, READY before the Subscription is created; not timed), three ways:
//!    - *inline*: the catalog image carries the manifests (`olm.bundle.object`), nothing else is pulled;
//!    - *image-only, cold*: the catalog names the bundle by digest with only `olm.csv.metadata`
//!      (`olm catalog render --migrate-level bundle-object-to-csv-metadata`), and the controllers'
//!      image cache is emptied (every blob and image record deleted from its directory) right before
//!      the Subscription is created, so the bundle's manifest, config and layer come from the registry;
//!    - *image-only, warm*: the same, with the bundle image already in the cache.
//!
//!    Each round checks what it claims: a cold round finds the bundle absent from the cache before
//!    and present after, an inline round absent after, a warm round present before. Rounds go
//!    inline, cold, warm in turn, so load on the machine falls on every mode alike; each waits
//!    until the previous namespace is gone. Times are from the Subscription create request to the
//!    CSV's Succeeded event on a watch started beforehand; the first events of the InstallPlan,
//!    the CSV and the operator's Deployment, and the Deployment's Available, split it (the
//!    bundle is read before the InstallPlan is created; Deployment created → Available is
//!    kube-controller-manager's and the kwok node's).
//! 2. **Catalog image ready** for the real 745-bundle FBC: pushed with `olm catalog push`,
//!    then per round a CatalogSource with `spec.image` (the tag) in a fresh namespace, the image
//!    cache emptied first: creation → `status.connectionState.lastObservedState` READY. Then
//!    the same work with the library alone, each round with a fresh cache directory:
//!    `ImageClient::digest_of`, `pull`, `unpack` of /configs (what `ImageClient::catalog` does),
//!    `olm_catalog::load::load_fbc_documents` and `CatalogContent::from_documents` (catalog model
//!    and resolver snapshot), and `olm_catalog_client::fetch_image` (all of these, as the
//!    CatalogSource controller calls them).
//!
//! Another OLM acting on the same cluster (`olm dev up`'s `olm run`, an e2e suite running at the
//! same time) also reconciles these objects and skews the numbers: stop it first. The
//! control plane is the e2e suites' (started if it is not running).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use olm_api::v1alpha1::catalog_source::CatalogSource;
use olm_api::v1alpha1::cluster_service_version::{ClusterServiceVersion, CsvPhase};
use olm_api::v1alpha1::install_plan::InstallPlan;
use olm_api::v1alpha1::subscription::Subscription;
use olm_controllers::manager::{Manager, ManagerConfig};
use olm_e2e::olm;
use olm_image::{Credentials, ImageClient, Limits, RegistryConfig};
use serde_json::{Value, json};

mod report;
use report::{Part, Report};

const BUNDLE: &str = "crates/olm-registry/testdata/bundles/etcd/0.9.4";
const CSV: &str = "etcdoperator.v0.9.4";
const DEFAULT_FBC: &str = "/work/shared/real-catalogs/community-operators-prod-fbc-v4.21/catalog";
/// Label of this benchmark's namespaces (not olm-testkit's, whose sweep would take them from
/// under a run when a test binary starts meanwhile).
const LABEL: &str = "olm.image-bench/created-by";

struct Options {
    rounds: usize,
    fbc: PathBuf,
    install: bool,
    catalog: bool,
    /// Where to write the findings as Markdown (BENCHMARKS.md §4's body).
    markdown: Option<PathBuf>,
}

fn options() -> anyhow::Result<Options> {
    let mut opts = Options {
        rounds: std::env::var("OLM_BENCH_ROUNDS").ok().map(|r| r.parse()).transpose().context("OLM_BENCH_ROUNDS")?.unwrap_or(5),
        fbc: std::env::var_os("OLM_BENCH_FBC").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(DEFAULT_FBC)),
        install: true,
        catalog: true,
        markdown: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--rounds" => opts.rounds = args.next().context("--rounds N")?.parse().context("--rounds N")?,
            "--fbc" => opts.fbc = PathBuf::from(args.next().context("--fbc DIR")?),
            "--skip-install" => opts.install = false,
            "--skip-catalog" => opts.catalog = false,
            "--markdown" => opts.markdown = Some(PathBuf::from(args.next().context("--markdown FILE")?)),
            "-h" | "--help" => {
                println!("image_bench [--rounds N] [--fbc DIR] [--skip-install] [--skip-catalog] [--markdown FILE]");
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?} (try --help)"),
        }
    }
    ensure!(opts.rounds > 0, "--rounds must be at least 1");
    // The folder of the real catalog holds SOURCE.md beside `catalog/`, the FBC root.
    if opts.fbc.join("SOURCE.md").is_file() && opts.fbc.join("catalog").is_dir() {
        opts.fbc = opts.fbc.join("catalog");
    }
    Ok(opts)
}

/// The 1, 5 and 15 minute load averages (the machine may be shared: read the numbers with them).
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn mib(bytes: u64) -> String {
    format!("{:.2} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// Median (upper middle) and p90 (nearest rank) of durations, in ms.
struct Stats {
    median: f64,
    p90: f64,
    min: f64,
    max: f64,
    all: Vec<f64>,
}

fn stats(times: &[Duration]) -> Stats {
    let all: Vec<f64> = times.iter().copied().map(ms).collect();
    let mut sorted = all.clone();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let rank = |q: f64| sorted[((q * n as f64).ceil() as usize).clamp(1, n) - 1];
    Stats {
        median: sorted[n / 2],
        p90: rank(0.9),
        min: sorted[0],
        max: sorted[n - 1],
        all,
    }
}

fn list(values: &[f64]) -> String {
    values.iter().map(|v| format!("{v:.0}")).collect::<Vec<_>>().join(", ")
}

/// First time each named state was seen on watches, by arrival at this process.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<HashMap<String, Instant>>>);

impl Seen {
    fn note(&self, what: String) {
        let now = Instant::now();
        self.0.lock().unwrap_or_else(|p| p.into_inner()).entry(what).or_insert(now);
    }

    fn get(&self, what: &str) -> Option<Instant> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).get(what).copied()
    }

    async fn wait(&self, what: &str, timeout: Duration) -> Option<Instant> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(at) = self.get(what) {
                return Some(at);
            }
            if Instant::now() > deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

/// Watch `api`, noting what `describe` says of each object, from the initial list on; returns
/// once the initial list is in.
async fn watch<K>(api: Api<K>, seen: Seen, describe: fn(&K) -> Vec<String>) -> tokio::task::JoinHandle<()>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default,
{
    let (tx, rx) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let mut tx = Some(tx);
        let mut stream = watcher(api, watcher::Config::default()).boxed();
        while let Some(event) = stream.next().await {
            match event {
                Ok(watcher::Event::Apply(obj) | watcher::Event::InitApply(obj)) => {
                    for what in describe(&obj) {
                        seen.note(what);
                    }
                }
                Ok(watcher::Event::InitDone) => {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(());
                    }
                }
                _ => {}
            }
        }
    });
    let _ = tokio::time::timeout(Duration::from_secs(10), rx).await;
    task
}

fn describe_plan(_: &InstallPlan) -> Vec<String> {
    vec!["InstallPlan".into()]
}

fn describe_csv(csv: &ClusterServiceVersion) -> Vec<String> {
    let mut seen = vec!["CSV".to_owned()];
    if csv.name_any() == CSV && csv.phase() == Some(&CsvPhase::Succeeded) {
        seen.push("CSV Succeeded".into());
    }
    seen
}

fn describe_deployment(deployment: &k8s_openapi::api::apps::v1::Deployment) -> Vec<String> {
    let mut seen = vec!["Deployment".to_owned()];
    if olm_e2e::controllers::deployment_available(deployment) {
        seen.push("Deployment Available".into());
    }
    seen
}

/// The steps of an install, as first seen on the watches: (key noted, column title).
const STEPS: [(&str, &str); 4] = [
    ("InstallPlan", "→ InstallPlan created"),
    ("CSV", "→ CSV created"),
    ("Deployment", "→ Deployment created"),
    ("Deployment Available", "→ Deployment Available"),
];

fn describe_catalog(catalog: &CatalogSource) -> Vec<String> {
    let state = catalog
        .status
        .as_ref()
        .and_then(|s| s.connection_state.as_ref())
        .map(|c| c.last_observed_state.clone());
    state.map(|s| vec![s]).unwrap_or_default()
}

fn object<T: serde::de::DeserializeOwned>(value: Value) -> anyhow::Result<T> {
    Ok(serde_json::from_value(value)?)
}

/// The client of the e2e suites' control plane. When it already runs it is used as it is:
/// `olm_testkit::cluster()` would also sweep the namespaces of every other test process,
/// which may be running now.
async fn connect() -> anyhow::Result<Client> {
    let layout = olm_testkit::test_layout()?;
    let kubeconfig = layout.kubeconfig();
    if kubeconfig.is_file() {
        let config = kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::read_from(&kubeconfig)?,
            &kube::config::KubeConfigOptions::default(),
        )
        .await?;
        let client = Client::try_from(config)?;
        if client.apiserver_version().await.is_ok() {
            return Ok(client);
        }
    }
    Ok(olm_testkit::cluster().await?.client())
}

async fn create_namespace(client: &Client, prefix: &str) -> anyhow::Result<String> {
    let name = olm_testkit::random_name(prefix);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &object(json!({"metadata": {"name": name, "labels": {LABEL: "image-bench"}}}))?,
        )
        .await
        .with_context(|| format!("create namespace {name}"))?;
    Ok(name)
}

/// Delete the namespace and wait until it is gone (its CSV's finalizer is the controllers').
async fn delete_namespace(client: &Client, name: &str) -> anyhow::Result<()> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let _ = namespaces.delete(name, &DeleteParams::default()).await;
    let deadline = Instant::now() + Duration::from_secs(180);
    while namespaces.get_opt(name).await?.is_some() {
        ensure!(Instant::now() < deadline, "namespace {name} still there after 180 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// Namespaces an earlier, interrupted run left: deleted (CSV finalizers dropped, as no
/// controller of that run is left to handle them).
async fn sweep(client: &Client) -> anyhow::Result<()> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for ns in namespaces.list(&ListParams::default().labels(LABEL)).await?.items {
        let name = ns.name_any();
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &name);
        for csv in csvs.list(&ListParams::default()).await?.items {
            let _ = csvs
                .patch(&csv.name_any(), &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": null}})))
                .await;
        }
        println!("deleting namespace {name} left by an earlier run");
        delete_namespace(client, &name).await?;
    }
    Ok(())
}

/// Delete every blob and image record from the image cache at `dir`.
fn empty_cache(dir: &Path) -> anyhow::Result<()> {
    for sub in ["blobs/sha256", "images"] {
        for entry in std::fs::read_dir(dir.join(sub))? {
            std::fs::remove_file(entry?.path())?;
        }
    }
    Ok(())
}

/// Whether the image `digest` is in the cache at `dir` (its record and all its layers).
fn cached(dir: &Path, digest: &str) -> anyhow::Result<bool> {
    Ok(olm_image::store::BlobStore::open(dir, u64::MAX)?.record(digest).is_some())
}

fn digest_of(reference: &str) -> anyhow::Result<&str> {
    reference.split_once('@').map(|(_, d)| d).context("a digest reference")
}

/// Create the CatalogSource `name` with `spec.image` in `namespace`; returns when it is READY,
/// with the time from the create request.
async fn catalog_ready(client: &Client, namespace: &str, name: &str, image: &str, timeout: Duration) -> anyhow::Result<Duration> {
    let catalogs: Api<CatalogSource> = Api::namespaced(client.clone(), namespace);
    let seen = Seen::default();
    let task = watch(catalogs.clone(), seen.clone(), describe_catalog).await;
    let started = Instant::now();
    catalogs
        .create(
            &PostParams::default(),
            &object(json!({"metadata": {"name": name}, "spec": {"sourceType": "grpc", "image": image}}))?,
        )
        .await?;
    let ready = seen.wait("READY", timeout).await;
    task.abort();
    match ready {
        Some(at) => Ok(at.saturating_duration_since(started)),
        None => {
            let status = catalogs.get(name).await?.status;
            bail!("CatalogSource {namespace}/{name} not READY after {timeout:?}: {status:?}")
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Mode {
    Inline,
    Cold,
    Warm,
}

impl Mode {
    fn label(self) -> &'static str {
        match self {
            Mode::Inline => "inline (catalog carries the manifests)",
            Mode::Cold => "image-only, cold cache",
            Mode::Warm => "image-only, warm cache",
        }
    }
}

struct Install {
    total: Duration,
    /// Per [`STEPS`].
    steps: Vec<Duration>,
}

struct Env {
    client: Client,
    images: Arc<ImageClient>,
    cache: PathBuf,
}

/// One install round in a fresh namespace.
async fn install_round(env: &Env, mode: Mode, catalog_image: &str, bundle: &str) -> anyhow::Result<Install> {
    let client = &env.client;
    let ns = create_namespace(client, "imgbench").await?;
    let groups: Api<olm_api::v1::operator_group::OperatorGroup> = Api::namespaced(client.clone(), &ns);
    groups
        .create(&PostParams::default(), &object(json!({"metadata": {"name": "og"}, "spec": {"targetNamespaces": [ns]}}))?)
        .await?;
    catalog_ready(client, &ns, "etcd", catalog_image, Duration::from_secs(60)).await?;
    let digest = digest_of(bundle)?;
    match mode {
        Mode::Inline | Mode::Cold => empty_cache(&env.cache)?,
        Mode::Warm => {
            env.images.pull(bundle, &Credentials::anonymous()).await?;
        }
    }
    let before = cached(&env.cache, digest)?;
    ensure!(before == (mode == Mode::Warm), "{mode:?}: bundle cached before the round: {before}");

    let seen = Seen::default();
    let tasks = [
        watch(Api::<InstallPlan>::namespaced(client.clone(), &ns), seen.clone(), describe_plan).await,
        watch(Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns), seen.clone(), describe_csv).await,
        watch(Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(client.clone(), &ns), seen.clone(), describe_deployment).await,
    ];
    let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns);
    let started = Instant::now();
    subs.create(
        &PostParams::default(),
        &object(json!({"metadata": {"name": "etcd"}, "spec": {
            "source": "etcd", "sourceNamespace": ns, "name": "etcd",
            "channel": "singlenamespace-alpha", "installPlanApproval": "Automatic"}}))?,
    )
    .await?;
    let succeeded = seen.wait("CSV Succeeded", Duration::from_secs(120)).await;
    for task in &tasks {
        task.abort();
    }
    let Some(succeeded) = succeeded else {
        let status = subs.get("etcd").await?.status;
        bail!("{mode:?}: {CSV} not Succeeded in {ns} after 120 s; Subscription status: {status:?}");
    };
    let since = |what: &str| seen.get(what).map(|at| at.saturating_duration_since(started)).unwrap_or_default();
    let result = Install {
        total: succeeded.saturating_duration_since(started),
        steps: STEPS.iter().map(|(key, _)| since(key)).collect(),
    };
    let after = cached(&env.cache, digest)?;
    ensure!(after == (mode != Mode::Inline), "{mode:?}: bundle cached after the round: {after}");
    delete_namespace(client, &ns).await?;
    Ok(result)
}

/// A catalog of the etcd package with 0.9.4 alone in `singlenamespace-alpha`, its bundle
/// rendered by `olm catalog render` with its image reference (`csv_metadata`: only
/// olm.csv.metadata, else every manifest as olm.bundle.object).
fn write_catalog(dir: &Path, bundle_image: &str, csv_metadata: bool) -> anyhow::Result<()> {
    let bundle_dir = olm_e2e::repo().join(BUNDLE);
    let mut args = vec!["catalog", "render", bundle_dir.to_str().context("path")?, "--image", bundle_image, "-o", "json"];
    if csv_metadata {
        args.extend(["--migrate-level", "bundle-object-to-csv-metadata"]);
    }
    let rendered: Value = serde_json::from_str(&olm(&args)?).context("rendered bundle")?;
    let text = rendered.to_string();
    ensure!(text.contains("olm.bundle.object") != csv_metadata, "render gave the wrong kind of bundle");
    let docs = [
        json!({"schema": "olm.package", "name": "etcd", "defaultChannel": "singlenamespace-alpha"}),
        rendered,
        json!({"schema": "olm.channel", "package": "etcd", "name": "singlenamespace-alpha", "entries": [{"name": CSV}]}),
    ];
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("catalog.json"), docs.iter().map(Value::to_string).collect::<Vec<_>>().join("\n"))?;
    Ok(())
}

fn layer_bytes(pulled: &olm_image::PulledImage) -> anyhow::Result<u64> {
    let mut total = 0;
    for layer in &pulled.layers {
        total += std::fs::metadata(&layer.path)?.len();
    }
    Ok(total)
}

async fn install_bench(env: &Env, registry: &str, rounds: usize, report: &mut Report) -> anyhow::Result<()> {
    let work = tempfile::tempdir()?;
    let bundle_dir = olm_e2e::repo().join(BUNDLE);
    let bundle = olm(&["bundle", "push", bundle_dir.to_str().context("path")?, &format!("{registry}/etcd-bundle:0.9.4")])?
        .trim()
        .to_owned();
    write_catalog(&work.path().join("inline"), &bundle, false)?;
    write_catalog(&work.path().join("image-only"), &bundle, true)?;
    let inline = olm(&["catalog", "push", work.path().join("inline").to_str().context("path")?, &format!("{registry}/etcd-catalog:inline")])?
        .trim()
        .to_owned();
    let image_only = olm(&["catalog", "push", work.path().join("image-only").to_str().context("path")?, &format!("{registry}/etcd-catalog:image-only")])?
        .trim()
        .to_owned();
    {
        let probe = tempfile::tempdir()?;
        let probe_client = ImageClient::new(probe.path(), RegistryConfig::default(), Limits::default())?;
        let anon = Credentials::anonymous();
        let sizes = [
            ("bundle", &bundle),
            ("inline catalog", &inline),
            ("image-only catalog", &image_only),
        ];
        let mut described = Vec::new();
        for (what, image) in sizes {
            let pulled = probe_client.pull(image, &anon).await?;
            described.push(format!("{what} {} bytes", layer_bytes(&pulled)?));
        }
        report.line(Part::Install, format!("Layers, compressed: {}.\n", described.join(", ")));
    }

    // One untimed round first: the first install of a process pays for lazily built state.
    println!("warm-up round (not counted)...");
    install_round(env, Mode::Warm, &image_only, &bundle).await?;

    let mut results: Vec<(Mode, Vec<Install>)> = vec![(Mode::Inline, vec![]), (Mode::Cold, vec![]), (Mode::Warm, vec![])];
    for round in 1..=rounds {
        let mut line = format!("round {round}:");
        for (mode, times) in &mut results {
            let catalog = if *mode == Mode::Inline { &inline } else { &image_only };
            let r = install_round(env, *mode, catalog, &bundle).await?;
            let steps: Vec<String> = r.steps.iter().map(|d| format!("{:.0}", ms(*d))).collect();
            line.push_str(&format!(" {mode:?} {:.0} ms (steps {});", ms(r.total), steps.join("/")));
            times.push(r);
        }
        println!("{line}");
    }
    println!();
    report.line(Part::Install, format!("Subscription → {CSV} Succeeded, {rounds} rounds per mode (ms):\n"));
    let titles: Vec<&str> = STEPS.iter().map(|(_, title)| *title).collect();
    report.line(Part::Install, format!("| mode | median | p90 | min | max | {} (medians) | every round |", titles.join(" | ")));
    report.line(Part::Install, format!("|---|---|---|---|---|{}---|", "---|".repeat(STEPS.len())));
    let mut medians = HashMap::new();
    for (mode, times) in &results {
        let total = stats(&times.iter().map(|r| r.total).collect::<Vec<_>>());
        let steps: Vec<String> = (0..STEPS.len())
            .map(|i| format!("{:.0}", stats(&times.iter().map(|r| r.steps[i]).collect::<Vec<_>>()).median))
            .collect();
        report.line(Part::Install, format!(
            "| {} | {:.0} | {:.0} | {:.0} | {:.0} | {} | {} |",
            mode.label(),
            total.median,
            total.p90,
            total.min,
            total.max,
            steps.join(" | "),
            list(&total.all)
        ));
        medians.insert(*mode, total.median);
    }
    let ratio = |mode: Mode| medians[&mode] / medians[&Mode::Inline];
    report.line(Part::Install, format!(
        "\n**Median warm/inline {:.2} (target: within 2×, {}); cold/inline {:.2}.**",
        ratio(Mode::Warm),
        if ratio(Mode::Warm) <= 2.0 { "met" } else { "NOT met" },
        ratio(Mode::Cold)
    ));
    Ok(())
}

// The library's pieces of a catalog image's load, as the table names them.
const DIGEST: &str = "`ImageClient::digest_of` (HEAD of the tag)";
const PULL: &str = "`ImageClient::pull` (manifest, config, layer → cache, digests verified)";
const UNPACK: &str = "`ImageClient::unpack` of /configs and the parsed form beside it";
const YAML: &str = "`olm_catalog::load::load_fbc_documents` (parse the YAML: what an image without the parsed form costs)";
const PARSED: &str = "`olm_catalog::parsed::read_file` (the parsed form `olm catalog push` ships, which the controller reads)";
const INDEX: &str = "`CatalogContent::from_documents` (catalog model and resolver snapshot)";
const WHOLE: &str = "`olm_catalog_client::fetch_image` (HEAD, pull, unpack, parsed form, model and snapshot, as the controller calls it)";

async fn catalog_bench(env: &Env, registry: &str, fbc: &Path, rounds: usize, report: &mut Report) -> anyhow::Result<()> {
    if !fbc.is_dir() {
        report.line(Part::Catalog, format!(
            "Not measured: the real catalog is not at {} (pass --fbc DIR or OLM_BENCH_FBC: the file-based catalog of \
             community-operators-prod catalogs/v4.21, see /work/shared/real-catalogs/README.md)",
            fbc.display()
        ));
        return Ok(());
    }
    println!("\ncatalog: {}", fbc.display());
    let tag = format!("{registry}/community-operators:v4.21");
    let started = Instant::now();
    let pushed = olm(&["catalog", "push", fbc.to_str().context("path")?, &tag])?.trim().to_owned();
    let push_ms = ms(started.elapsed());
    println!("olm catalog push: {pushed} in {push_ms:.0} ms (build + push, first push of these blobs)");
    let digest = digest_of(&pushed)?.to_owned();
    let anon = Credentials::anonymous();

    let mut ready = Vec::new();
    let mut pieces: HashMap<&str, Vec<Duration>> = HashMap::new();
    let mut sizes = None;
    for round in 1..=rounds {
        // The controllers: a CatalogSource naming the tag, the image not in their cache.
        let ns = create_namespace(&env.client, "imgbench-cat").await?;
        empty_cache(&env.cache)?;
        ensure!(!cached(&env.cache, &digest)?, "catalog image cached before the round");
        let took = catalog_ready(&env.client, &ns, "community", &tag, Duration::from_secs(300)).await?;
        ensure!(cached(&env.cache, &digest)?, "catalog image not in the controllers' cache after READY");
        delete_namespace(&env.client, &ns).await?;
        ready.push(took);

        // The library alone, a fresh cache each time.
        let cache = tempfile::tempdir()?;
        let images = ImageClient::new(cache.path(), RegistryConfig::default(), Limits::default())?;
        let t = Instant::now();
        let head = images.digest_of(&tag, &anon).await?;
        let t_digest = t.elapsed();
        ensure!(head == digest, "the tag names {head}, pushed {digest}");
        let t = Instant::now();
        let pulled = images.pull(&tag, &anon).await?;
        let t_pull = t.elapsed();
        let scratch = images.scratch()?;
        let t = Instant::now();
        let unpacked = images.unpack(&pulled, &["configs", olm_image::catalog::PARSED_PATH], scratch.path()).await?;
        let t_unpack = t.elapsed();
        let root = scratch.path().join("configs");
        let parsed = scratch.path().join(olm_image::catalog::PARSED_PATH);
        let t = Instant::now();
        let yaml_root = root.clone();
        let (yaml_documents, _problems) = tokio::task::spawn_blocking(move || olm_catalog::load::load_fbc_documents(&yaml_root)).await??;
        let t_yaml = t.elapsed();
        drop(yaml_documents);
        // What the controller reads: the parsed form `olm catalog push` put beside /configs.
        let t = Instant::now();
        let documents = tokio::task::spawn_blocking(move || olm_catalog::parsed::read_file(&parsed, &root)).await??;
        let t_load = t.elapsed();
        let t = Instant::now();
        let content = tokio::task::spawn_blocking(move || {
            olm_catalog_client::CatalogContent::from_documents(
                olm_resolver::CatalogKey::new("community".to_owned(), "bench".to_owned()),
                0,
                documents,
                None,
                Default::default(),
            )
        })
        .await?
        .map_err(anyhow::Error::msg)?;
        let t_index = t.elapsed();
        let counts = content.counts();
        drop(content);
        drop(scratch);
        let whole_cache = tempfile::tempdir()?;
        let access = olm_catalog_client::ImageAccess {
            client: Arc::new(ImageClient::new(whole_cache.path(), RegistryConfig::default(), Limits::default())?),
            creds: anon.clone(),
        };
        let t = Instant::now();
        let fetched = olm_catalog_client::fetch_image(
            &access,
            &tag,
            olm_resolver::CatalogKey::new("community".to_owned(), "bench".to_owned()),
            0,
            None,
            &[],
        )
        .await?;
        let t_whole = t.elapsed();
        ensure!(matches!(fetched, olm_catalog_client::ImageFetch::Content(_)), "fetch_image read nothing");
        drop(fetched);
        if sizes.is_none() {
            sizes = Some((layer_bytes(&pulled)?, unpacked, counts));
        }
        println!(
            "round {round}: CatalogSource created → READY {:.0} ms | library: digest_of {:.0}, pull {:.0}, unpack {:.0}, YAML {:.0}, parsed form {:.0}, index {:.0}; fetch_image {:.0} ms",
            ms(took),
            ms(t_digest),
            ms(t_pull),
            ms(t_unpack),
            ms(t_yaml),
            ms(t_load),
            ms(t_index),
            ms(t_whole)
        );
        for (name, d) in [
            (DIGEST, t_digest),
            (PULL, t_pull),
            (UNPACK, t_unpack),
            (YAML, t_yaml),
            (PARSED, t_load),
            (INDEX, t_index),
            (WHOLE, t_whole),
        ] {
            pieces.entry(name).or_default().push(d);
        }
    }
    let (compressed, unpacked, (packages, bundles)) = sizes.context("no round")?;
    println!();
    report.line(Part::Catalog, format!(
        "{} ({packages} packages, {bundles} bundles), pushed with `olm catalog push` in {push_ms:.0} ms (build and push): **one layer of {} ({compressed} bytes) compressed**, {} in {} files unpacked.\n",
        fbc.display(),
        mib(compressed),
        mib(unpacked.bytes),
        unpacked.files,
    ));
    let r = stats(&ready);
    report.line(Part::Catalog, "| | median | p90 | every round (ms) |");
    report.line(Part::Catalog, "|---|---|---|---|");
    report.line(Part::Catalog, format!("| **CatalogSource created → READY (controllers, cold cache)** | **{:.0} ms** | {:.0} ms | {} |", r.median, r.p90, list(&r.all)));
    for name in [DIGEST, PULL, UNPACK, YAML, PARSED, INDEX, WHOLE] {
        let s = stats(&pieces[name]);
        report.line(Part::Catalog, format!("| library: {name} | {:.0} ms | {:.0} ms | |", s.median, s.p90));
    }
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
    let opts = options()?;
    let began = Instant::now();
    let bin = olm_e2e::olm_bin();
    println!("olm binary: {}", bin.display());
    let client = connect().await?;
    olm_e2e::controllers::install_crds(&client).await?;
    sweep(&client).await?;
    let registry = olm_testkit::registry(olm_testkit::RegistryOptions::new()).await?;
    let registry_addr = registry.addr().to_owned();
    println!("registry: {registry_addr}");

    let cache_dir = tempfile::tempdir()?;
    let images = Arc::new(ImageClient::new(cache_dir.path(), RegistryConfig::default(), Limits::default())?);
    let manager = Manager::start(
        client.clone(),
        ManagerConfig {
            cache_thread_init: None,
            images: images.clone(),
            extra: Vec::new(),
            configmap_server_image: None,
            controllers: Vec::new(),
            admin_addr: None,
            leader_election: None,
        },
    )
    .await?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !manager.is_ready() {
        ensure!(Instant::now() < deadline, "controllers not ready after 60 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let env = Env { client: client.clone(), images, cache: cache_dir.path().to_owned() };

    let mut report = Report::default();
    let outcome = async {
        if opts.install {
            println!("load average before part 1: {}", loadavg());
            install_bench(&env, &registry_addr, opts.rounds, &mut report).await?;
            println!("load average after part 1: {}", loadavg());
        }
        if opts.catalog {
            println!("\nload average before part 2: {}", loadavg());
            catalog_bench(&env, &registry_addr, &opts.fbc, opts.rounds, &mut report).await?;
            println!("load average after part 2: {}", loadavg());
        }
        println!("\n{} cores; whole run {:.0} s", std::thread::available_parallelism().map_or(0, |n| n.get()), began.elapsed().as_secs_f64());
        anyhow::Ok(())
    }
    .await;
    if outcome.is_err() {
        let _ = sweep(&client).await;
    }
    manager.stop(Duration::from_secs(5)).await;
    drop(registry);
    outcome?;
    if let Some(file) = &opts.markdown {
        std::fs::write(file, report.markdown(opts.rounds)).with_context(|| format!("writing {}", file.display()))?;
    }
    Ok(())
}
