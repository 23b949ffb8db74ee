//! A hostile catalog on a real cluster: the controllers load it in-process (a catalog image
//! is read by OLM itself, not by a registry Pod), so a rule that could overflow a stack or
//! run for minutes would take OLM down with it. Beside the healthy etcd package, one catalog
//! image carries a CEL rule of 40,000 `!` and one of 24 nested macros. The CatalogSource is
//! READY and names what it left out and why, a Subscription to etcd installs, and a
//! Subscription to a hostile package is told why its package was left out.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use kube::Api;
use olm_api::v1alpha1::catalog_source::CatalogSource;
use olm_api::v1alpha1::subscription::SubscriptionConditionType;
use olm_e2e::controllers::{self, create_from_yaml};
use olm_e2e::{journey, olm};
use olm_testkit::RegistryOptions;
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(120);
const OBJECTS: &[&str] = &["subscriptions", "installplans", "csvs", "catalogsources"];

/// A package of one bundle whose `olm.constraint` is the CEL rule `rule`.
fn hostile_package(name: &str, rule: &str) -> String {
    let docs = [
        json!({"schema": "olm.package", "name": name, "defaultChannel": "stable"}),
        json!({"schema": "olm.channel", "package": name, "name": "stable", "entries": [{"name": format!("{name}.v1.0.0")}]}),
        json!({"schema": "olm.bundle", "name": format!("{name}.v1.0.0"), "package": name,
               "image": format!("example.com/{name}@sha256:{}", "a".repeat(64)),
               "properties": [
                   {"type": "olm.package", "value": {"packageName": name, "version": "1.0.0"}},
                   {"type": "olm.constraint", "value": {"cel": {"rule": rule}}},
               ]}),
    ];
    docs.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("\n")
}

#[tokio::test]
async fn a_hostile_catalog_image_leaves_out_only_its_hostile_packages() -> anyhow::Result<()> {
    let _apis = controllers::ETCD_APIS.read().await;
    let (cluster, _) = controllers::setup().await?;
    let registry = olm_testkit::registry(RegistryOptions::new()).await?;
    let work = tempfile::tempdir()?;
    let fbc = work.path().join("catalog");
    std::fs::create_dir_all(fbc.join("etcd"))?;
    std::fs::copy(olm_e2e::repo().join("catalogs/community/etcd/catalog.yaml"), fbc.join("etcd/catalog.yaml"))?;
    let mut nested = "p23.type == 'x'".to_owned();
    for level in (0..24).rev() {
        nested = format!("properties.all(p{level}, {nested})");
    }
    for (name, rule) in [("cel-depth", format!("{}true", "!".repeat(40_000))), ("cel-cost", nested)] {
        std::fs::create_dir_all(fbc.join(name))?;
        std::fs::write(fbc.join(name).join("index.json"), hostile_package(name, &rule))?;
    }
    let image = format!("{}/hostile-catalog:latest", registry.addr());
    olm(&["catalog", "push", fbc.to_str().context("path")?, &image])?;

    let ns = cluster.namespace("hostile-catalog").await?;
    controllers::create_own_namespace_group(&ns, "operators").await?;
    let started = Instant::now();
    create_from_yaml(
        &ns,
        &format!("apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: hostile\nspec:\n  sourceType: grpc\n  image: {image}\n"),
    )
    .await?;
    let catalogs: Api<CatalogSource> = ns.api();
    let message = ns
        .wait_for("CatalogSource hostile READY, naming what it left out", TIMEOUT, OBJECTS, || {
            let catalogs = catalogs.clone();
            async move {
                let status = catalogs.get("hostile").await.map_err(|e| e.to_string())?.status.unwrap_or_default();
                let ready = status.connection_state.is_some_and(|c| c.last_observed_state == "READY");
                Ok::<_, String>(ready.then(|| status.message.unwrap_or_default()).filter(|m| !m.is_empty()))
            }
        })
        .await?;
    eprintln!("catalog READY after {:?}: {message}", started.elapsed());
    for needle in ["package cel-depth left out", "nested more than 100 levels", "package cel-cost left out", "more than the budget of 1000000"] {
        assert!(message.contains(needle), "{needle:?} in {message}");
    }
    assert!(message.len() < 4_000, "rules are quoted cut short: {} bytes", message.len());

    let subscription = |name: &str, package: &str, channel: &str| {
        format!(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata:\n  name: {name}\nspec:\n  source: hostile\n  sourceNamespace: {}\n  name: {package}\n  channel: {channel}\n  installPlanApproval: Automatic\n",
            ns.name()
        )
    };
    create_from_yaml(&ns, &subscription("etcd", "etcd", "singlenamespace-alpha")).await?;
    create_from_yaml(&ns, &subscription("cel-depth", "cel-depth", "stable")).await?;
    journey::csv_succeeded(&ns, "etcdoperator.v0.9.4", TIMEOUT).await?;

    let failed = journey::condition_true(&ns, "cel-depth", SubscriptionConditionType::ResolutionFailed, TIMEOUT).await?;
    for needle in ["cel-depth", "left out of the catalog for its problems", "nested more than 100 levels"] {
        assert!(failed.contains(needle), "{needle:?} in {failed}");
    }
    ns.cleanup().await?;
    Ok(())
}
