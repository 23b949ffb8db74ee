//! Benchmark (issue #53): one operator installed through OLM v1's ClusterExtension and through
//! OLM v0's Subscription, side by side on the tests' control plane (kube-apiserver, kwok node),
//! with `olm run` of this build and a real registry (CNCF distribution on loopback).
//!
//! ```text
//! cargo build --release -p olm
//! OLM_BIN=target/release/olm cargo run --release -p olm-e2e --example v1_bench -- [rounds]
//! ```
//!
//! The operator is etcd 0.9.4 for all namespaces (`etcdoperator.v0.9.4-clusterwide`, channel
//! `clusterwide-alpha`), from one catalog image that carries its manifests
//! (crates/olm-registry/testdata/catalog): for v0 a CatalogSource with `spec.image` and an
//! OperatorGroup for all namespaces in a fresh namespace (READY before the clock starts), for v1 a
//! ClusterCatalog (Serving before the clock starts). Each phase runs a fresh `olm run`; rounds
//! start without the etcd CRDs, so every install creates them. Timed per round, by polling the
//! API server every 10 ms: Subscription created → CSV Succeeded (v0), ClusterExtension created →
//! `Installed` True (v1), and for both, created → the operator's Deployment Available. Then the
//! resident memory of `olm run` after the phase's last install.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use kube::api::{DeleteParams, DynamicObject, PostParams};
use kube::{Api, Client};
use olm_api::olmv1::{ClusterCatalog, ClusterExtension};
use olm_e2e::olmv1::{OlmRun, cluster_catalog};
use olm_testkit::{RegistryOptions, TestCluster};
use serde_json::{Value, json};

const CRDS: [&str; 3] = ["etcdclusters.etcd.database.coreos.com", "etcdbackups.etcd.database.coreos.com", "etcdrestores.etcd.database.coreos.com"];
const TIMEOUT: Duration = Duration::from_secs(120);

/// Poll `check` every 10 ms until it holds; the time it took from `since`.
async fn until<F, Fut>(what: &str, since: Instant, mut check: F) -> anyhow::Result<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    loop {
        if check().await? {
            return Ok(since.elapsed());
        }
        if since.elapsed() > TIMEOUT {
            bail!("{what}: not after {TIMEOUT:?}");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn dynamic(client: &Client, api_version: &str, kind: &str, plural: &str, namespace: Option<&str>) -> Api<DynamicObject> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let resource = kube::api::ApiResource::from_gvk_with_plural(&kube::core::GroupVersionKind::gvk(group, version, kind), plural);
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

async fn deployment_available(client: &Client, namespace: &str) -> anyhow::Result<bool> {
    let api = dynamic(client, "apps/v1", "Deployment", "deployments", Some(namespace)).await;
    let Some(deployment) = api.get_opt("etcd-operator").await? else { return Ok(false) };
    Ok(deployment.data["status"]["conditions"].as_array().into_iter().flatten().any(|c| c["type"] == "Available" && c["status"] == "True"))
}

async fn without_crds(cluster: &TestCluster) -> anyhow::Result<()> {
    let api = dynamic(&cluster.client(), "apiextensions.k8s.io/v1", "CustomResourceDefinition", "customresourcedefinitions", None).await;
    for crd in CRDS {
        let _ = api.delete(crd, &DeleteParams::default()).await;
    }
    until("the etcd CRDs gone", Instant::now(), || async {
        for crd in CRDS {
            if api.get_opt(crd).await?.is_some() {
                return Ok(false);
            }
        }
        Ok(true)
    })
    .await?;
    Ok(())
}

/// (created → installed, created → Deployment Available) of one v0 round.
async fn v0_round(cluster: &TestCluster, image: &str) -> anyhow::Result<(Duration, Duration)> {
    let ns = cluster.namespace("v1bench-sub").await?;
    let client = cluster.client();
    let create = |kind: &str, body: Value| {
        let api_version = if kind == "OperatorGroup" { "operators.coreos.com/v1" } else { "operators.coreos.com/v1alpha1" };
        let mut object = json!({"apiVersion": api_version, "kind": kind});
        if let (Some(o), Value::Object(b)) = (object.as_object_mut(), body) {
            o.extend(b);
        }
        object
    };
    let plural = |kind: &str| format!("{}s", kind.to_lowercase());
    for (kind, body) in [
        ("OperatorGroup", json!({"metadata": {"name": "global"}, "spec": {}})),
        ("CatalogSource", json!({"metadata": {"name": "community"}, "spec": {"sourceType": "grpc", "image": image}})),
    ] {
        let object = create(kind, body);
        let api = dynamic(&client, object["apiVersion"].as_str().unwrap_or_default(), kind, &plural(kind), Some(ns.name())).await;
        api.create(&PostParams::default(), &serde_json::from_value(object)?).await?;
    }
    let catalogs = dynamic(&client, "operators.coreos.com/v1alpha1", "CatalogSource", "catalogsources", Some(ns.name())).await;
    until("CatalogSource READY", Instant::now(), || async {
        Ok(catalogs.get("community").await?.data["status"]["connectionState"]["lastObservedState"] == "READY")
    })
    .await?;
    let subscription = create(
        "Subscription",
        json!({"metadata": {"name": "etcd"}, "spec": {"name": "etcd", "channel": "clusterwide-alpha", "source": "community", "sourceNamespace": ns.name()}}),
    );
    let subscriptions = dynamic(&client, "operators.coreos.com/v1alpha1", "Subscription", "subscriptions", Some(ns.name())).await;
    let csvs = dynamic(&client, "operators.coreos.com/v1alpha1", "ClusterServiceVersion", "clusterserviceversions", Some(ns.name())).await;
    let started = Instant::now();
    subscriptions.create(&PostParams::default(), &serde_json::from_value(subscription)?).await?;
    let installed = until("CSV Succeeded", started, || async {
        Ok(csvs.get_opt("etcdoperator.v0.9.4-clusterwide").await?.is_some_and(|csv| csv.data["status"]["phase"] == "Succeeded"))
    })
    .await?;
    let available = until("Deployment Available", started, || deployment_available(&client, ns.name())).await?;
    ns.cleanup().await?;
    without_crds(cluster).await?;
    Ok((installed, available))
}

/// (created → installed, created → Deployment Available) of one v1 round.
async fn v1_round(cluster: &TestCluster, catalog: &str, round: usize) -> anyhow::Result<(Duration, Duration)> {
    let ns = cluster.namespace("v1bench-ext").await?;
    let client = cluster.client();
    let extensions: Api<ClusterExtension> = Api::all(client.clone());
    let name = format!("v1bench-{round}");
    let extension: ClusterExtension = serde_json::from_value(json!({
        "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension", "metadata": {"name": name},
        "spec": {"namespace": ns.name(), "source": {"sourceType": "Catalog", "catalog": {"packageName": "etcd", "channels": ["clusterwide-alpha"],
                 "selector": {"matchLabels": {"olm.operatorframework.io/metadata.name": catalog}}}}}
    }))?;
    let started = Instant::now();
    extensions.create(&PostParams::default(), &extension).await?;
    let installed = until("Installed", started, || async {
        let extension = extensions.get(&name).await?;
        Ok(extension.conditions().iter().any(|c| c.type_ == "Installed" && c.status == "True"))
    })
    .await?;
    let available = until("Deployment Available", started, || deployment_available(&client, ns.name())).await?;
    extensions.delete(&name, &DeleteParams::default()).await?;
    without_crds(cluster).await?;
    ns.cleanup().await?;
    Ok((installed, available))
}

fn rss_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok()))
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}

fn ms(d: &Duration) -> String {
    format!("{:.0}", d.as_secs_f64() * 1000.0)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let rounds: usize = std::env::args().nth(1).map(|r| r.parse()).transpose().context("rounds: a number")?.unwrap_or(5);
    let cluster = olm_e2e::controllers::cluster_with_crds().await?;
    let registry = olm_testkit::registry(RegistryOptions::new()).await?;
    let image = format!("{}/v1bench-catalog:v1", registry.addr());
    let fixture = olm_e2e::repo().join("crates/olm-registry/testdata/catalog");
    olm_e2e::olm(&["catalog", "push", fixture.to_str().context("path")?, &image])?;
    let work = tempfile::tempdir()?;
    without_crds(&cluster).await?;
    let mut table = Vec::new();
    for phase in ["v0", "v1"] {
        let run = OlmRun::start(&cluster, &work.path().join(format!("cache-{phase}"))).await?;
        tokio::time::sleep(Duration::from_secs(3)).await;
        let idle = rss_mib(run.pid());
        let catalog = format!("v1bench-{}", std::process::id());
        if phase == "v1" {
            cluster.kubectl_with_input(&["create", "-f", "-"], &cluster_catalog(&catalog, &image, None)).await?;
            let catalogs: Api<ClusterCatalog> = Api::all(cluster.client());
            until("ClusterCatalog Serving", Instant::now(), || async {
                Ok(catalogs.get(&catalog).await?.conditions().iter().any(|c| c.type_ == "Serving" && c.status == "True"))
            })
            .await?;
        }
        let (mut installed, mut available) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            let (i, a) = if phase == "v0" { v0_round(&cluster, &image).await? } else { v1_round(&cluster, &catalog, round).await? };
            println!("{phase} round {round}: created → installed {} ms, → Deployment Available {} ms", ms(&i), ms(&a));
            installed.push(i);
            available.push(a);
        }
        let rss = rss_mib(run.pid());
        if phase == "v1" {
            let catalogs: Api<ClusterCatalog> = Api::all(cluster.client());
            catalogs.delete(&catalog, &DeleteParams::default()).await?;
        }
        table.push((phase, median(installed.clone()), median(available.clone()), installed, idle, rss));
        drop(run);
    }
    println!();
    println!("| install | created → installed (median) | every run | created → Deployment Available (median) | olm run RSS idle → after the installs |");
    println!("|---|---|---|---|---|");
    for (phase, installed, available, every, idle, rss) in table {
        let what = if phase == "v0" { "Subscription → CSV Succeeded (v0)" } else { "ClusterExtension → Installed True (v1)" };
        println!(
            "| {what} | {} ms | {} | {} ms | {idle:.1} → {rss:.1} MiB |",
            ms(&installed),
            every.iter().map(|d| format!("{} ms", ms(d))).collect::<Vec<_>>().join(", "),
            ms(&available)
        );
    }
    Ok(())
}
