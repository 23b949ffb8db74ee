//! Rollback (#22), on real koku-metrics-operator bundles from community-operators:
//! - `kubectl olm rollback` after a successful upgrade (0.9.1 → 0.9.2): 0.9.1 comes back from
//!   the catalog through an InstallPlan, 0.9.2 goes and is not installed again;
//! - `olm-rs.io/auto-rollback`: an upgrade to a 0.9.2 whose Deployment never becomes Available
//!   (a node selector no node matches, a 10 s progress deadline) fails and is rolled back to
//!   0.9.1 with its own Deployment; when the catalog offers 0.9.3 (the publisher's fix, a
//!   skipRange from 0.9.1), it is installed;
//! - a rollback from 0.9.3, whose CRD stores v1beta1, to 0.9.1, whose CRD has only v1alpha1, is
//!   refused before anything changes, with the reason, and the request withdrawn.

use olm_e2e::controllers;

use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use olm_api::keys::ROLLED_BACK_FROM_ANNOTATION;
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use olm_api::v1alpha1::subscription::{Subscription, SubscriptionConditionType};
use olm_e2e::admin::{koku_catalog as catalog, kubectl_olm, plugin_dir, remove_koku_crd};
use olm_e2e::journey::csv_succeeded;
use olm_testkit::TestNamespace;
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(120);
const OBJECTS: &[&str] = &["subscriptions", "installplans", "clusterserviceversions", "deployments"];
const V1: &str = "koku-metrics-operator.v0.9.1";
const V2: &str = "koku-metrics-operator.v0.9.2";
const V3: &str = "koku-metrics-operator.v0.9.3";

/// 0.9.2 as a broken release: its Deployment waits for a node that does not exist, and gives
/// up after 10 s. 0.9.3 as the publisher's fix: reachable from 0.9.1 by a skipRange.
fn broken_and_fixed(version: &str, csv: &mut Value) {
    match version {
        "0.9.2" => {
            let deployment = &mut csv["spec"]["install"]["spec"]["deployments"][0]["spec"];
            deployment["progressDeadlineSeconds"] = json!(10);
            deployment["template"]["spec"]["nodeSelector"] = json!({"olm-test/no-such-node": "true"});
        }
        "0.9.3" => csv["metadata"]["annotations"]["olm.skipRange"] = json!(">=0.9.1 <0.9.3"),
        _ => {}
    }
}

async fn subscribe(ns: &TestNamespace, address: &str, annotations: &str) -> anyhow::Result<()> {
    controllers::create_own_namespace_group(ns, "koku").await?;
    controllers::create_from_yaml(
        ns,
        &format!(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: koku\nspec:\n  sourceType: grpc\n  address: \"{address}\"\n---\napiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata:\n  name: koku\n  annotations: {annotations}\nspec:\n  source: koku\n  sourceNamespace: {}\n  name: koku-metrics-operator\n  channel: alpha\n  startingCSV: {V1}\n  installPlanApproval: Automatic\n",
            ns.name()
        ),
    )
    .await
}

/// The Subscription once `check` says it is as expected.
async fn sub_until(ns: &TestNamespace, what: &str, check: impl Fn(&Subscription) -> bool) -> anyhow::Result<Subscription> {
    let subs: Api<Subscription> = ns.api();
    let check = &check;
    Ok(ns
        .wait_for(what, TIMEOUT, OBJECTS, || {
            let subs = subs.clone();
            async move {
                let sub = subs.get("koku").await.map_err(|e| e.to_string())?;
                Ok::<_, String>(check(&sub).then_some(sub))
            }
        })
        .await?)
}

fn condition(sub: &Subscription, type_: SubscriptionConditionType) -> Option<(String, String)> {
    sub.status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_)
        .map(|c| (c.reason.clone().unwrap_or_default(), c.message.clone().unwrap_or_default()))
}

async fn csv_gone(ns: &TestNamespace, name: &str) -> anyhow::Result<()> {
    let csvs: Api<ClusterServiceVersion> = ns.api();
    ns.wait_for(&format!("{name} gone"), TIMEOUT, OBJECTS, || {
        let csvs = csvs.clone();
        async move { Ok::<_, String>(csvs.get_opt(name).await.map_err(|e| e.to_string())?.is_none().then_some(())) }
    })
    .await?;
    Ok(())
}

#[tokio::test]
async fn upgrades_roll_back_on_request_and_on_failure_and_unsafe_rollbacks_are_refused() -> anyhow::Result<()> {
    let (cluster, _) = controllers::setup().await?;
    remove_koku_crd(&cluster).await?;
    let plugins = plugin_dir()?;
    let work = tempfile::tempdir()?;

    // 1. Asked for: 0.9.1 → 0.9.2 (real, healthy), then back to 0.9.1 from the catalog.
    let healthy = work.path().join("healthy");
    catalog(&healthy, &["0.9.1", "0.9.2"], |_, _| {})?;
    let server = controllers::catalog_server("koku", healthy, false).await?;
    let ns = cluster.namespace("rollback-asked").await?;
    subscribe(&ns, &server.grpc_addrs["koku"].to_string(), "{}").await?;
    csv_succeeded(&ns, V2, TIMEOUT).await?;
    csv_gone(&ns, V1).await?;
    let (code, out, err) = kubectl_olm(&cluster, plugins.path(), &["rollback", "koku", "-n", ns.name(), "--yes"])?;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&format!("{V1} comes back from catalog {}/koku through an InstallPlan (Automatic approval)", ns.name())), "{out}");
    assert!(out.contains(&format!("Rolled back to {V1}.")), "{out}");
    csv_gone(&ns, V2).await?;
    let sub = sub_until(&ns, "the rollback recorded, 0.9.2 rejected", |s| {
        condition(s, SubscriptionConditionType::BehindChannelHead).is_some_and(|(reason, _)| reason == "UpgradeRolledBack")
    })
    .await?;
    let status = sub.status.clone().unwrap_or_default();
    assert_eq!(status.installed_csv.as_deref(), Some(V1));
    let (reason, message) = condition(&sub, SubscriptionConditionType::RolledBack).context("a RolledBack condition")?;
    assert_eq!(reason, "RollbackRequested");
    assert!(message.contains(&format!("rolling back from {V2} to {V1}")), "{message}");
    ns.cleanup().await?;
    drop(server);
    remove_koku_crd(&cluster).await?;

    // 2. Automatic: the broken 0.9.2 fails and 0.9.1 takes its Deployment back.
    let broken = work.path().join("broken");
    catalog(&broken, &["0.9.1", "0.9.2"], broken_and_fixed)?;
    let server = controllers::catalog_server("koku", broken, false).await?;
    let ns = cluster.namespace("rollback-auto").await?;
    subscribe(&ns, &server.grpc_addrs["koku"].to_string(), "{olm-rs.io/auto-rollback: \"true\"}").await?;
    let sub = sub_until(&ns, "the failed upgrade to 0.9.2 rolled back", |s| {
        condition(s, SubscriptionConditionType::RolledBack).is_some()
            && s.status.as_ref().and_then(|st| st.installed_csv.as_deref()) == Some(V1)
    })
    .await?;
    assert_eq!(sub.annotations().get(ROLLED_BACK_FROM_ANNOTATION).map(String::as_str), Some(V2));
    let (reason, message) = condition(&sub, SubscriptionConditionType::RolledBack).unwrap_or_default();
    assert_eq!(reason, "UpgradeFailed");
    assert!(message.contains(&format!("the upgrade to {V2} failed")) && message.contains("progress deadline"), "{message}");
    csv_gone(&ns, V2).await?;
    csv_succeeded(&ns, V1, TIMEOUT).await?;
    let deployments: Api<Deployment> = ns.api();
    let deployment = deployments.get("koku-metrics-controller-manager").await?;
    let pod = deployment.spec.and_then(|s| s.template.spec).context("a pod template")?;
    assert_eq!(pod.node_selector, None, "0.9.1's Deployment again");
    assert_eq!(pod.containers.len(), 2, "0.9.1 runs kube-rbac-proxy beside the manager");
    sub_until(&ns, "0.9.2 not tried again", |s| {
        condition(s, SubscriptionConditionType::BehindChannelHead).is_some_and(|(reason, _)| reason == "UpgradeRolledBack")
    })
    .await?;
    let (code, out, _) = kubectl_olm(&cluster, plugins.path(), &["status", "koku", "-n", ns.name()])?;
    assert_eq!(code, 0, "0.9.1 Succeeded is healthy: {out}");
    assert!(out.contains(&format!("{V2} was rolled back")), "{out}");

    // The publisher's fix appears: 0.9.3 is installed and the rollback is history.
    let fixed = work.path().join("fixed");
    catalog(&fixed, &["0.9.1", "0.9.2", "0.9.3"], broken_and_fixed)?;
    let fixed_server = controllers::catalog_server("koku", fixed, false).await?;
    let catalogs: Api<olm_api::v1alpha1::catalog_source::CatalogSource> = ns.api();
    let address = fixed_server.grpc_addrs["koku"].to_string();
    catalogs.patch("koku", &PatchParams::default(), &Patch::Merge(json!({"spec": {"address": address}}))).await?;
    csv_succeeded(&ns, V3, TIMEOUT).await?;
    sub_until(&ns, "the RolledBack condition cleared", |s| condition(s, SubscriptionConditionType::RolledBack).is_none()).await?;

    // 3. Back from 0.9.3 to 0.9.1 would lose the objects stored as v1beta1: refused, nothing changed.
    let (code, out, err) = kubectl_olm(&cluster, plugins.path(), &["rollback", "koku", "-n", ns.name(), "--yes"])?;
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains(&format!("cannot roll back from {V3} to {V1}")) && err.contains("v1beta1"), "{err}");
    assert!(err.contains("the request was withdrawn"), "{err}");
    let subs: Api<Subscription> = ns.api();
    let annotation = subs.get("koku").await?.annotations().get(ROLLED_BACK_FROM_ANNOTATION).cloned();
    assert_eq!(annotation.as_deref(), Some(V2), "as before the request: 0.9.2 stays rejected");
    csv_succeeded(&ns, V3, TIMEOUT).await?;
    ns.cleanup().await?;
    remove_koku_crd(&cluster).await?;
    Ok(())
}
