//! Benchmark: time from creating a Subscription to its CSV Succeeded, for etcd on the local
//! control plane, with the catalog served in-process by our catalog server (gRPC on loopback)
//! and every controller running in this process.
//!
//! `cargo run --release -p olm-e2e --example e2e_bench -- [rounds]`
//!
//! Prints, per round: the direct install of the channel head (one InstallPlan), and the full
//! upgrade walk from startingCSV etcdoperator.v0.9.0 to etcdoperator.v0.9.4 (three plans).
//! `OLM_BENCH_TIMELINE=1` prints when each step was first seen; `OLM_BENCH_FRESH_CRDS=1` deletes
//! the etcd CRDs before each round, so the install creates them (as in bench/run.sh).
//! Another OLM running against the same cluster (e.g. `olm dev up` with its `olm run`) also
//! acts on the objects and skews the numbers: stop it first.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use olm_api::v1alpha1::catalog_source::CatalogSource;
use olm_api::v1alpha1::cluster_service_version::{ClusterServiceVersion, CsvPhase};
use olm_api::v1alpha1::subscription::Subscription;
use olm_controllers::manager::{Manager, ManagerConfig};
use olm_registry::ServeConfig;
use serde_json::json;

async fn install_olm_crds(client: &Client) -> anyhow::Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply("olm-e2e-bench").force();
    let crds = olm_api::crds::all().context("generate OLM CRDs")?;
    for crd in &crds {
        api.patch(&crd.name_any(), &params, &Patch::Apply(crd))
            .await
            .with_context(|| crd.name_any())?;
    }
    for crd in &crds {
        poll(Duration::from_secs(60), || async {
            let crd = api.get(&crd.name_any()).await?;
            Ok(crd
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True"))
        })
        .await?;
    }
    Ok(())
}

async fn poll<F, Fut>(timeout: Duration, mut check: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if check().await.unwrap_or(false) {
            return Ok(());
        }
        anyhow::ensure!(Instant::now() < deadline, "timed out after {timeout:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn object<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> anyhow::Result<T> {
    Ok(serde_json::from_value(value)?)
}

/// One round in a fresh namespace; returns the time from Subscription creation to `target`
/// Succeeded.
async fn round(client: &Client, address: &str, starting: Option<&str>, target: &str) -> anyhow::Result<Duration> {
    let name = olm_testkit::random_name("bench");
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &object(json!({"metadata": {"name": name, "labels": {olm_testkit::NAMESPACE_LABEL: "olm-e2e-bench"}}}))?,
        )
        .await?;
    let groups: Api<olm_api::v1::operator_group::OperatorGroup> = Api::namespaced(client.clone(), &name);
    groups
        .create(
            &PostParams::default(),
            &object(json!({"metadata": {"name": "og"}, "spec": {"targetNamespaces": [name]}}))?,
        )
        .await?;
    let catalogs: Api<CatalogSource> = Api::namespaced(client.clone(), &name);
    catalogs
        .create(
            &PostParams::default(),
            &object(json!({"metadata": {"name": "community"}, "spec": {"sourceType": "grpc", "address": address}}))?,
        )
        .await?;
    poll(Duration::from_secs(30), || async {
        let c = catalogs.get("community").await?;
        Ok(c.status
            .and_then(|s| s.connection_state)
            .is_some_and(|s| s.last_observed_state == "READY"))
    })
    .await
    .context("catalog READY")?;
    let subs: Api<Subscription> = Api::namespaced(client.clone(), &name);
    let mut spec = json!({"source": "community", "sourceNamespace": name, "name": "etcd", "channel": "singlenamespace-alpha"});
    if let Some(starting) = starting {
        spec["startingCSV"] = json!(starting);
    }
    if std::env::var_os("OLM_BENCH_FRESH_CRDS").is_some() {
        // Like the side-by-side benchmark: the install creates the etcd CRDs and waits for them.
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        for crd in ["etcdclusters", "etcdbackups", "etcdrestores"] {
            let crd = format!("{crd}.etcd.database.coreos.com");
            if crds.get_opt(&crd).await?.is_some() {
                crds.delete(&crd, &Default::default()).await?;
                poll(Duration::from_secs(60), || async { Ok(crds.get_opt(&crd).await?.is_none()) }).await?;
            }
        }
    }
    let timeline = Timeline::start(client, &name);
    let started = Instant::now();
    subs.create(
        &PostParams::default(),
        &object(json!({"metadata": {"name": "etcd"}, "spec": spec}))?,
    )
    .await?;
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &name);
    poll(Duration::from_secs(60), || async {
        Ok(csvs.get_opt(target).await?.is_some_and(|c| c.phase() == Some(&CsvPhase::Succeeded)))
    })
    .await
    .with_context(|| format!("{target} Succeeded in {name}"))?;
    let elapsed = started.elapsed();
    if std::env::var_os("OLM_BENCH_TIMELINE").is_some() {
        println!("  timeline: {}", timeline.report(started));
    }
    timeline.stop();
    namespaces.delete(&name, &Default::default()).await?;
    Ok(elapsed)
}

/// When each step of an install was first seen through watches (`OLM_BENCH_TIMELINE=1`), to
/// show where the time goes.
struct Timeline {
    seen: std::sync::Arc<std::sync::Mutex<Vec<(String, Instant)>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Timeline {
    fn start(client: &Client, namespace: &str) -> Self {
        use futures::StreamExt;
        use kube::runtime::watcher;
        let seen: std::sync::Arc<std::sync::Mutex<Vec<(String, Instant)>>> = Default::default();
        let mut tasks = Vec::new();
        fn note(seen: &std::sync::Mutex<Vec<(String, Instant)>>, what: String) {
            let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
            if !seen.iter().any(|(w, _)| *w == what) {
                seen.push((what, Instant::now()));
            }
        }
        macro_rules! watch {
            ($kind:ty, $describe:expr) => {{
                let api: Api<$kind> = Api::namespaced(client.clone(), namespace);
                let seen = seen.clone();
                tasks.push(tokio::spawn(async move {
                    let mut stream = watcher(api, watcher::Config::default()).boxed();
                    while let Some(event) = stream.next().await {
                        if let Ok(watcher::Event::Apply(obj) | watcher::Event::InitApply(obj)) = event {
                            for what in $describe(&obj) {
                                note(&seen, what);
                            }
                        }
                    }
                }));
            }};
        }
        watch!(Subscription, |s: &Subscription| {
            let state = s.status.as_ref().and_then(|st| st.state.clone()).map(|st| format!("{st:?}")).unwrap_or_default();
            vec![format!("Subscription {state}")]
        });
        watch!(olm_api::v1alpha1::install_plan::InstallPlan, |ip: &olm_api::v1alpha1::install_plan::InstallPlan| {
            let phase = ip.status.as_ref().map(|st| format!("{:?}", st.phase)).unwrap_or_else(|| "created".into());
            vec![format!("InstallPlan {} {phase}", ip.name_any())]
        });
        watch!(ClusterServiceVersion, |c: &ClusterServiceVersion| {
            let phase = c.phase().map(|p| p.as_str().to_owned()).unwrap_or_else(|| "created".into());
            vec![format!("CSV {} {phase}", c.name_any())]
        });
        watch!(k8s_openapi::api::apps::v1::Deployment, |d: &k8s_openapi::api::apps::v1::Deployment| {
            let available = d
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Available" && c.status == "True"));
            vec![format!("Deployment {} {}", d.name_any(), if available { "Available" } else { "created" })]
        });
        Self { seen, tasks }
    }

    fn report(&self, started: Instant) -> String {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner()).clone();
        seen.sort_by_key(|(_, at)| *at);
        seen.iter()
            .map(|(what, at)| format!("{:.0} ms {what}", at.saturating_duration_since(started).as_secs_f64() * 1000.0))
            .collect::<Vec<_>>()
            .join(" | ")
    }

    fn stop(self) {
        for task in self.tasks {
            task.abort();
        }
    }
}

fn summary(label: &str, mut times: Vec<Duration>) {
    times.sort();
    let ms = |d: &Duration| d.as_secs_f64() * 1000.0;
    let median = times.get(times.len() / 2).map(ms).unwrap_or_default();
    println!(
        "{label}: min {:.0} ms, median {median:.0} ms, max {:.0} ms over {} rounds (target < 3000 ms)",
        times.first().map(ms).unwrap_or_default(),
        times.last().map(ms).unwrap_or_default(),
        times.len()
    );
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).try_init();
    let rounds: usize = std::env::args().nth(1).map(|r| r.parse()).transpose()?.unwrap_or(5);
    let cluster = olm_testkit::cluster().await?;
    let client = cluster.client();
    install_olm_crds(&client).await?;
    let dir = olm_e2e::repo().join("crates/olm-registry/testdata/catalog/etcd");
    let mut config = ServeConfig::new(vec![("community".into(), dir)]);
    config.grpc_addrs = vec![("community".into(), "127.0.0.1:0".parse()?)];
    config.reload_interval = None;
    let server = olm_registry::start(config).await?;
    let address = server.grpc_addrs.get("community").context("gRPC address")?.to_string();
    let manager = Manager::start(
        client.clone(),
        ManagerConfig {
            cache_thread_init: None,
            images: olm_e2e::image_client()?,
            extra: Vec::new(),
            configmap_server_image: None,
            controllers: Vec::new(),
            admin_addr: None,
            leader_election: None,
        },
    )
    .await?;
    poll(Duration::from_secs(30), || async { Ok(manager.is_ready()) }).await?;

    let mut head = Vec::new();
    let mut walk = Vec::new();
    for i in 0..rounds {
        let direct = round(&client, &address, None, "etcdoperator.v0.9.4").await?;
        let upgrades = round(&client, &address, Some("etcdoperator.v0.9.0"), "etcdoperator.v0.9.4").await?;
        println!(
            "round {}: Subscription → etcdoperator.v0.9.4 Succeeded: {:.0} ms; startingCSV v0.9.0 → v0.9.2 → v0.9.4 Succeeded: {:.0} ms",
            i + 1,
            direct.as_secs_f64() * 1000.0,
            upgrades.as_secs_f64() * 1000.0
        );
        head.push(direct);
        walk.push(upgrades);
    }
    summary("install (channel head)", head);
    summary("install + 2 upgrades", walk);
    manager.stop(Duration::from_secs(5)).await;
    server.shutdown();
    Ok(())
}
