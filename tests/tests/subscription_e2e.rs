//! End to end on the local control plane: the etcd catalog served by our catalog server
//! (in-process, gRPC on loopback), a CatalogSource with `spec.address`, an OperatorGroup, and a
//! Subscription created with `kubectl create -f`; the in-process manager runs every controller
//! (OperatorGroup, CSV, CatalogSource, Subscription, InstallPlan).
//!
//! Tests that install the etcd APIs hold `controllers::ETCD_APIS` (read for a namespaced group, write
//! for an all-namespaces one): two groups whose targets intersect may not provide the same API.
//!
//! Longer than ~600 lines: one suite, a scenario per test, sharing its catalog and namespace helpers.

use olm_e2e::controllers;

use std::time::Duration;

use anyhow::Context as _;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use olm_api::common::ConditionStatus;
use olm_api::v1alpha1::catalog_source::CatalogSource;
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use olm_api::v1alpha1::install_plan::{InstallPlan, InstallPlanPhase};
use olm_api::v1alpha1::subscription::{Subscription, SubscriptionConditionType, SubscriptionState};
use controllers::{create_from_yaml, etcd_catalog_server};
use olm_e2e::widget::{widget_crd, widget_csv};
use olm_registry::RunningServer;
use olm_testkit::TestNamespace;
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(120);
const OBJECTS: &[&str] = &[
    "subscriptions",
    "installplans",
    "clusterserviceversions",
    "catalogsources",
    "operatorgroups",
];

fn grpc_address(server: &RunningServer) -> anyhow::Result<String> {
    Ok(server.grpc_addrs.get("community").context("gRPC address of community")?.to_string())
}

async fn operator_group(ns: &TestNamespace, all_namespaces: bool) -> anyhow::Result<()> {
    let targets = if all_namespaces {
        String::new()
    } else {
        format!("\n  targetNamespaces: [{}]", ns.name())
    };
    create_from_yaml(
        ns,
        &format!(
            "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata:\n  name: og\nspec:{}\n",
            if targets.is_empty() { " {}" } else { &targets }
        ),
    )
    .await
}

async fn catalog_source(ns: &TestNamespace, name: &str, address: &str) -> anyhow::Result<()> {
    create_from_yaml(
        ns,
        &format!(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: {name}\nspec:\n  sourceType: grpc\n  address: \"{address}\"\n  displayName: {name}\n"
        ),
    )
    .await
}

async fn subscription(
    ns: &TestNamespace,
    name: &str,
    package: &str,
    source: &str,
    channel: &str,
    starting: Option<&str>,
    approval: &str,
) -> anyhow::Result<()> {
    let starting = starting.map(|s| format!("\n  startingCSV: {s}")).unwrap_or_default();
    create_from_yaml(
        ns,
        &format!(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata:\n  name: {name}\nspec:\n  source: {source}\n  sourceNamespace: {}\n  name: {package}\n  channel: {channel}{starting}\n  installPlanApproval: {approval}\n",
            ns.name()
        ),
    )
    .await
}

async fn wait_csv_succeeded(ns: &TestNamespace, name: &str) -> anyhow::Result<()> {
    controllers::wait_csv_succeeded(ns, name, TIMEOUT, OBJECTS).await
}

async fn wait_subscription<F>(ns: &TestNamespace, name: &str, what: &str, check: F) -> anyhow::Result<Subscription>
where
    F: Fn(&Subscription) -> bool + Clone,
{
    let api: Api<Subscription> = ns.api();
    Ok(ns
        .wait_for(&format!("Subscription {name}: {what}"), TIMEOUT, OBJECTS, || {
            let api = api.clone();
            let name = name.to_owned();
            let check = check.clone();
            async move {
                let sub = api.get(&name).await.map_err(|e| e.to_string())?;
                Ok::<_, String>(check(&sub).then_some(sub))
            }
        })
        .await?)
}

fn installed(sub: &Subscription) -> Option<&str> {
    sub.status.as_ref()?.installed_csv.as_deref()
}

fn state(sub: &Subscription) -> Option<&SubscriptionState> {
    sub.status.as_ref()?.state.as_ref()
}

async fn csv_names(ns: &TestNamespace) -> anyhow::Result<Vec<String>> {
    let api: Api<ClusterServiceVersion> = ns.api();
    let mut names: Vec<String> = api.list(&Default::default()).await?.items.iter().map(|c| c.name_any()).collect();
    names.sort();
    Ok(names)
}

async fn wait_csvs(ns: &TestNamespace, expected: &[&str]) -> anyhow::Result<()> {
    let api: Api<ClusterServiceVersion> = ns.api();
    let expected: Vec<String> = expected.iter().map(|s| s.to_string()).collect();
    ns.wait_for(&format!("exactly the CSVs {expected:?}"), TIMEOUT, OBJECTS, || {
        let api = api.clone();
        let expected = expected.clone();
        async move {
            let mut names: Vec<String> = api
                .list(&Default::default())
                .await
                .map_err(|e| e.to_string())?
                .items
                .iter()
                .map(|c| c.name_any())
                .collect();
            names.sort();
            if names == expected {
                Ok(Some(()))
            } else {
                Err(format!("CSVs now: {names:?}"))
            }
        }
    })
    .await?;
    Ok(())
}

async fn story(ns: &TestNamespace) -> String {
    match ns.kubectl(&["get", "subscriptions,installplans,clusterserviceversions"]).await {
        Ok(out) => out.stdout,
        Err(err) => err.to_string(),
    }
}

/// A namespaced OperatorGroup, the fixture catalog as CatalogSource "community", and a
/// Subscription "etcd" to its singlenamespace-alpha channel starting at 0.9.0 (older than the
/// channel head, so upgrades follow) with `approval`.
async fn subscribe_to_etcd_from_0_9_0(ns: &TestNamespace, server: &RunningServer, approval: &str) -> anyhow::Result<()> {
    operator_group(ns, false).await?;
    catalog_source(ns, "community", &grpc_address(server)?).await?;
    subscription(ns, "etcd", "etcd", "community", "singlenamespace-alpha", Some("etcdoperator.v0.9.0"), approval).await
}

#[tokio::test]
async fn automatic_subscription_installs_and_upgrades_along_the_channel() -> anyhow::Result<()> {
    let (cluster, _) = controllers::setup().await?;
    let _apis = controllers::ETCD_APIS.read().await;
    let server = etcd_catalog_server(true).await?;
    let ns = cluster.namespace("sub-auto").await?;
    subscribe_to_etcd_from_0_9_0(&ns, &server, "Automatic").await?;

    // 0.9.0 is installed first, then the channel is followed to its head without any help.
    let sub = wait_subscription(&ns, "etcd", "at etcdoperator.v0.9.4", |s| {
        installed(s) == Some("etcdoperator.v0.9.4") && state(s) == Some(&SubscriptionState::AtLatestKnown)
    })
    .await?;
    wait_csv_succeeded(&ns, "etcdoperator.v0.9.4").await?;
    wait_csvs(&ns, &["etcdoperator.v0.9.4"]).await?;

    let plans: Api<InstallPlan> = ns.api();
    let mut plans = plans.list(&Default::default()).await?.items;
    plans.sort_by_key(|p| p.spec.generation);
    let installed_by_plans: Vec<String> = plans.iter().flat_map(|p| p.spec.cluster_service_version_names.clone()).collect();
    let listing: Vec<String> = plans
        .iter()
        .map(|p| {
            format!(
                "{} gen={:?} {:?} {:?}",
                p.name_any(),
                p.spec.generation,
                p.spec.cluster_service_version_names,
                p.metadata.creation_timestamp
            )
        })
        .collect();
    let expected = ["etcdoperator.v0.9.0", "etcdoperator.v0.9.2", "etcdoperator.v0.9.4"];
    // The tests' cluster is their own (olm-testkit): no other OLM plans here, so exactly one
    // plan per step of the channel.
    assert_eq!(installed_by_plans, expected, "{listing:#?}\n{}", story(&ns).await);
    for plan in &plans {
        let status = plan.status.clone().unwrap_or_default();
        assert_eq!(status.phase, InstallPlanPhase::Complete, "{}", plan.name_any());
        assert!(plan.spec.approved);
        let steps = status.plan.unwrap_or_default();
        assert!(steps.iter().any(|s| s.resource.kind == "ClusterServiceVersion"));
        assert!(steps.iter().any(|s| s.resource.kind == "CustomResourceDefinition"));
        assert!(steps.iter().any(|s| s.resource.kind == "ServiceAccount"));
        assert!(
            status
                .bundle_lookups
                .unwrap_or_default()
                .iter()
                .all(|l| l.path.starts_with("quay.io/operatorhubio/etcd:"))
        );
        assert!(plan.owner_references().iter().any(|o| o.kind == "Subscription" && o.name == "etcd"));
    }
    let status = sub.status.clone().unwrap_or_default();
    assert_eq!(
        status.install_plan_ref.as_ref().and_then(|r| r.name.clone()),
        Some(plans[2].name_any())
    );
    let health = status
        .condition(&SubscriptionConditionType::CatalogSourcesUnhealthy)
        .map(|c| c.status.clone());
    assert_eq!(health, Some(ConditionStatus::False));
    assert!(status.condition(&SubscriptionConditionType::ResolutionFailed).is_none());

    // The CSV carries the bundle's properties, and its RBAC exists.
    let csv: ClusterServiceVersion = ns.api().get("etcdoperator.v0.9.4").await?;
    assert!(
        csv.annotations()
            .get("operatorframework.io/properties")
            .is_some_and(|p| p.contains("olm.package"))
    );
    let out = ns.kubectl(&["get", "rolebindings", "-o", "name"]).await?;
    assert!(out.stdout.contains("etcdoperator.v0.9.4-etcd-operator-"), "{}", out.stdout);

    println!("{}", story(&ns).await);
    ns.cleanup().await?;
    server.shutdown();
    Ok(())
}

async fn approve_next(ns: &TestNamespace, csv: &str) -> anyhow::Result<()> {
    let api: Api<InstallPlan> = ns.api();
    let plan = ns
        .wait_for(&format!("an InstallPlan for {csv} waiting for approval"), TIMEOUT, OBJECTS, || {
            let api = api.clone();
            let csv = csv.to_owned();
            async move {
                let plans = api.list(&Default::default()).await.map_err(|e| e.to_string())?.items;
                Ok::<_, String>(plans.into_iter().find(|p| {
                    p.spec.cluster_service_version_names.contains(&csv)
                        && p.status.as_ref().is_some_and(|s| s.phase == InstallPlanPhase::RequiresApproval)
                }))
            }
        })
        .await?;
    assert!(!plan.spec.approved);
    // Nothing of it is installed before approval.
    let names = csv_names(ns).await?;
    assert!(!names.contains(&csv.to_owned()), "{csv} installed before approval: {names:?}");
    ns.kubectl(&[
        "patch",
        "installplan",
        &plan.name_any(),
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"approved":true}}"#,
    ])
    .await?;
    wait_csv_succeeded(ns, csv).await
}

#[tokio::test]
async fn manual_subscription_waits_for_each_approval() -> anyhow::Result<()> {
    let (cluster, _) = controllers::setup().await?;
    let _apis = controllers::ETCD_APIS.read().await;
    let server = etcd_catalog_server(true).await?;
    let ns = cluster.namespace("sub-manual").await?;
    subscribe_to_etcd_from_0_9_0(&ns, &server, "Manual").await?;

    let sub = wait_subscription(&ns, "etcd", "an InstallPlan pending approval", |s| {
        s.status
            .as_ref()
            .and_then(|st| st.condition(&SubscriptionConditionType::InstallPlanPending))
            .is_some_and(|c| c.reason.as_deref() == Some("RequiresApproval"))
    })
    .await?;
    assert_eq!(state(&sub), Some(&SubscriptionState::UpgradePending));
    approve_next(&ns, "etcdoperator.v0.9.0").await?;
    approve_next(&ns, "etcdoperator.v0.9.2").await?;
    approve_next(&ns, "etcdoperator.v0.9.4").await?;
    wait_subscription(&ns, "etcd", "at etcdoperator.v0.9.4", |s| {
        installed(s) == Some("etcdoperator.v0.9.4") && state(s) == Some(&SubscriptionState::AtLatestKnown)
    })
    .await?;
    wait_csvs(&ns, &["etcdoperator.v0.9.4"]).await?;
    println!("{}", story(&ns).await);
    ns.cleanup().await?;
    server.shutdown();
    Ok(())
}

#[tokio::test]
async fn a_broken_catalog_only_affects_subscriptions_that_use_it() -> anyhow::Result<()> {
    let (cluster, _) = controllers::setup().await?;
    let _apis = controllers::ETCD_APIS.read().await;
    let server = etcd_catalog_server(true).await?;
    let ns = cluster.namespace("sub-broken").await?;
    operator_group(&ns, false).await?;
    // Nothing listens on port 1.
    catalog_source(&ns, "broken", "127.0.0.1:1").await?;
    catalog_source(&ns, "community", &grpc_address(&server)?).await?;
    subscription(&ns, "needs-broken", "other", "broken", "stable", None, "Automatic").await?;
    subscription(&ns, "etcd", "etcd", "community", "singlenamespace-alpha", None, "Automatic").await?;

    let sub = wait_subscription(&ns, "etcd", "at the channel head", |s| installed(s) == Some("etcdoperator.v0.9.4")).await?;
    wait_csv_succeeded(&ns, "etcdoperator.v0.9.4").await?;
    let status = sub.status.clone().unwrap_or_default();
    assert!(status.condition(&SubscriptionConditionType::ResolutionFailed).is_none());
    // Every visible catalog is listed: both of the namespace (and the global ones, if any).
    let health: Vec<_> = status
        .catalog_health
        .unwrap_or_default()
        .into_iter()
        .filter(|h| h.catalog_source_ref.as_ref().and_then(|r| r.namespace.as_deref()) == Some(ns.name()))
        .map(|h| (h.catalog_source_ref.and_then(|r| r.name).unwrap_or_default(), h.healthy))
        .collect();
    assert_eq!(health, [("broken".to_owned(), false), ("community".to_owned(), true)]);

    let broken = wait_subscription(&ns, "needs-broken", "reports its catalog", |s| {
        s.status
            .as_ref()
            .and_then(|st| st.condition(&SubscriptionConditionType::CatalogSourcesUnhealthy))
            .is_some_and(|c| c.status == ConditionStatus::True)
    })
    .await?;
    let failed = broken
        .status
        .as_ref()
        .and_then(|s| s.condition(&SubscriptionConditionType::ResolutionFailed))
        .cloned();
    let message = failed.and_then(|c| c.message).unwrap_or_default();
    assert!(message.contains("broken") && message.contains("cannot be read"), "{message}");

    let catalog: CatalogSource = ns.api().get("broken").await?;
    let connection = catalog.status.and_then(|s| s.connection_state).context("connectionState")?;
    assert_eq!(connection.last_observed_state, "TRANSIENT_FAILURE");
    let catalog: CatalogSource = ns.api().get("community").await?;
    let connection = catalog.status.and_then(|s| s.connection_state).context("connectionState")?;
    assert_eq!(connection.last_observed_state, "READY");
    assert!(connection.last_connect.is_some());
    println!("{}", story(&ns).await);
    ns.cleanup().await?;
    server.shutdown();
    Ok(())
}

#[tokio::test]
async fn an_unknown_package_fails_resolution_naming_it_and_what_exists() -> anyhow::Result<()> {
    let (cluster, _) = controllers::setup().await?;
    let server = etcd_catalog_server(true).await?;
    let ns = cluster.namespace("sub-unknown").await?;
    operator_group(&ns, false).await?;
    catalog_source(&ns, "community", &grpc_address(&server)?).await?;
    subscription(&ns, "typo", "etcdd", "community", "alpha", None, "Automatic").await?;
    let sub = wait_subscription(&ns, "typo", "ResolutionFailed", |s| {
        s.status
            .as_ref()
            .and_then(|st| st.condition(&SubscriptionConditionType::ResolutionFailed))
            .is_some_and(|c| c.status == ConditionStatus::True)
    })
    .await?;
    let condition = sub
        .status
        .as_ref()
        .and_then(|s| s.condition(&SubscriptionConditionType::ResolutionFailed))
        .cloned()
        .context("condition")?;
    let message = condition.message.unwrap_or_default();
    assert!(message.contains("etcdd"), "names the package: {message}");
    assert!(message.contains("etcd"), "lists what exists: {message}");
    assert_eq!(condition.reason.as_deref(), Some("ConstraintsNotSatisfiable"));
    let plans: Api<InstallPlan> = ns.api();
    assert!(plans.list(&Default::default()).await?.items.is_empty());
    ns.cleanup().await?;
    server.shutdown();
    Ok(())
}

#[tokio::test]
async fn http_and_configmap_catalogs_are_read() -> anyhow::Result<()> {
    let (cluster, _) = controllers::setup().await?;
    let server = etcd_catalog_server(true).await?;
    let ns = cluster.namespace("catsrc-kinds").await?;
    let http = format!("http://{}/catalogs/community", server.http_addr.context("http address")?);
    catalog_source(&ns, "over-http", &http).await?;
    let configmap = json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "legacy"},
        "data": {
            "packages": "- packageName: demo\n  channels:\n  - name: stable\n    currentCSV: demo.v1\n",
            "clusterServiceVersions": "- apiVersion: operators.coreos.com/v1alpha1\n  kind: ClusterServiceVersion\n  metadata: {name: demo.v1}\n  spec: {version: 1.0.0, install: {strategy: deployment, spec: {deployments: []}}}\n",
        }
    });
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = ns.api();
    cms.create(&PostParams::default(), &serde_json::from_value(configmap.clone())?)
        .await?;
    create_from_yaml(&ns, "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: legacy\nspec:\n  sourceType: configmap\n  configMap: legacy\n").await?;
    create_from_yaml(
        &ns,
        "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: invalid\nspec:\n  sourceType: grpc\n",
    )
    .await?;
    let api: Api<CatalogSource> = ns.api();
    for name in ["over-http", "legacy"] {
        ns.wait_for(&format!("CatalogSource {name} READY"), TIMEOUT, OBJECTS, || {
            let api = api.clone();
            async move {
                let c = api.get(name).await.map_err(|e| e.to_string())?;
                let state = c.status.and_then(|s| s.connection_state).map(|s| s.last_observed_state);
                Ok::<_, String>((state.as_deref() == Some("READY")).then_some(()))
            }
        })
        .await?;
    }
    let invalid = catalog_status_with_reason(&ns, "invalid", "SpecInvalidError").await?;
    assert!(invalid.message.unwrap_or_default().contains("spec.address"));
    // An unknown sourceType is accepted by the API (a plain string, as upstream's CRD) and
    // reported by OLM as an invalid spec.
    create_from_yaml(&ns, "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: goose\nspec:\n  sourceType: goose\n").await?;
    let goose = catalog_status_with_reason(&ns, "goose", "SpecInvalidError").await?;
    assert!(goose.message.unwrap_or_default().contains("unknown sourcetype: goose"));
    // An image catalog is pulled by OLM itself (no registry Pod): an unreachable registry is
    // named in the status, with the image, and nothing else is created.
    create_from_yaml(&ns, "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: from.image\nspec:\n  sourceType: grpc\n  image: 127.0.0.1:1/operatorhubio/catalog:latest\n").await?;
    let unreachable = catalog_status_with_reason(&ns, "from.image", "RegistryServerError").await?;
    let message = unreachable.message.unwrap_or_default();
    assert!(
        message.contains("cannot reach registry 127.0.0.1:1 for image 127.0.0.1:1/operatorhubio/catalog:latest"),
        "{message}"
    );
    assert!(unreachable.registry_service.is_none(), "no registryService for an image catalog never read");
    let pods: Api<k8s_openapi::api::core::v1::Pod> = ns.api();
    assert!(pods.list(&Default::default()).await?.items.is_empty(), "no registry Pod");
    // A ConfigMap catalog whose ConfigMap does not exist yet says so, and recovers by itself.
    create_from_yaml(
        &ns,
        "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: late\nspec:\n  sourceType: configmap\n  configMap: late\n",
    )
    .await?;
    let late = catalog_status_with_reason(&ns, "late", "ConfigMapError").await?;
    assert!(late.message.unwrap_or_default().contains("does not exist"));
    let mut late_cm = configmap.clone();
    late_cm["metadata"]["name"] = json!("late");
    cms.create(&PostParams::default(), &serde_json::from_value(late_cm)?).await?;
    ns.wait_for("CatalogSource late READY", TIMEOUT, OBJECTS, || {
        let api = api.clone();
        async move {
            let c = api.get("late").await.map_err(|e| e.to_string())?;
            let state = c.status.and_then(|s| s.connection_state).map(|s| s.last_observed_state);
            Ok::<_, String>((state.as_deref() == Some("READY")).then_some(()))
        }
    })
    .await?;
    let legacy = api.get("legacy").await?;
    let before = legacy.status.as_ref().and_then(|s| s.config_map_reference.clone()).context("configMapReference")?;
    assert_eq!(before.name, "legacy");
    // The ConfigMap is owned by its CatalogSource (deleting the catalog deletes it, as upstream).
    let owners = cms.get("legacy").await?.metadata.owner_references.unwrap_or_default();
    assert!(
        owners.iter().any(|o| o.kind == "CatalogSource" && o.name == "legacy" && Some(&o.uid) == legacy.metadata.uid.as_ref()),
        "{owners:?}"
    );
    // A changed ConfigMap is served again, and the status says so the way clients read it:
    // connectionState.lastConnect after configMapReference.lastUpdateTime (whole seconds), READY.
    cms.patch(
        "legacy",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"packages": "- packageName: demo\n  channels:\n  - name: beta\n    currentCSV: demo.v1\n"}})),
    )
    .await?;
    let before_version = before.resource_version.clone();
    let before_time = before.last_update_time.clone().context("lastUpdateTime")?.0;
    ns.wait_for("CatalogSource legacy to serve its changed ConfigMap", TIMEOUT, OBJECTS, || {
        let api = api.clone();
        let before_version = before_version.clone();
        async move {
            let status = api.get("legacy").await.map_err(|e| e.to_string())?.status.unwrap_or_default();
            let (Some(reference), Some(connection)) = (status.config_map_reference, status.connection_state) else {
                return Ok(None);
            };
            let updated = reference.last_update_time.map(|t| t.0);
            let connected = connection.last_connect.map(|t| t.0);
            let served = reference.resource_version != before_version
                && updated.is_some_and(|u| u.as_second() >= before_time.as_second())
                && connected.zip(updated).is_some_and(|(c, u)| c.as_second() > u.as_second())
                && connection.last_observed_state == "READY";
            Ok::<_, String>(served.then_some(()))
        }
    })
    .await?;
    // A poll interval that is not a duration is reported and does not stop the catalog.
    api.patch(
        "over-http",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"updateStrategy": {"registryPoll": {"interval": "often"}}}})),
    )
    .await?;
    ns.wait_for("InvalidIntervalError", TIMEOUT, OBJECTS, || {
        let api = api.clone();
        async move {
            let c = api.get("over-http").await.map_err(|e| e.to_string())?;
            Ok::<_, String>(
                c.status
                    .filter(|s| s.reason.as_ref().map(|r| r.as_str()) == Some("InvalidIntervalError"))
                    .map(|_| ()),
            )
        }
    })
    .await?;
    ns.cleanup().await?;
    server.shutdown();
    Ok(())
}

/// The status of CatalogSource `name` once it reports `reason`.
async fn catalog_status_with_reason(ns: &TestNamespace, name: &str, reason: &str) -> anyhow::Result<olm_api::v1alpha1::catalog_source::CatalogSourceStatus> {
    let api: Api<CatalogSource> = ns.api();
    ns.wait_for(&format!("CatalogSource {name} to report {reason}"), TIMEOUT, OBJECTS, || {
        let api = api.clone();
        async move {
            let c = api.get(name).await.map_err(|e| e.to_string())?;
            Ok::<_, String>(c.status.filter(|s| s.reason.as_ref().map(|r| r.as_str()) == Some(reason)))
        }
    })
    .await
    .map_err(anyhow::Error::from)
}

/// `/metrics` of the in-process manager.
async fn metrics(admin: std::net::SocketAddr) -> anyhow::Result<String> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(admin).await?;
    stream.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n").await?;
    let mut body = String::new();
    stream.read_to_string(&mut body).await?;
    Ok(body)
}

#[tokio::test]
async fn clusterwide_operator_serves_etcdclusters_which_outlive_it() -> anyhow::Result<()> {
    let (cluster, admin) = controllers::setup().await?;
    let _apis = controllers::ETCD_APIS.write().await;
    let server = etcd_catalog_server(true).await?;
    let ns = cluster.namespace("sub-clusterwide").await?;
    operator_group(&ns, true).await?;
    catalog_source(&ns, "community", &grpc_address(&server)?).await?;
    subscription(&ns, "etcd", "etcd", "community", "clusterwide-alpha", None, "Automatic").await?;
    wait_subscription(&ns, "etcd", "at etcdoperator.v0.9.4-clusterwide", |s| {
        installed(s) == Some("etcdoperator.v0.9.4-clusterwide")
    })
    .await?;
    wait_csv_succeeded(&ns, "etcdoperator.v0.9.4-clusterwide").await?;

    // The operator's API works once the CSV succeeded.
    create_from_yaml(&ns, "apiVersion: etcd.database.coreos.com/v1beta2\nkind: EtcdCluster\nmetadata:\n  name: example\nspec:\n  size: 3\n  version: 3.2.13\n").await?;

    // The catalog-operator metrics are exported with upstream's names.
    let text = metrics(admin).await?;
    for needle in [
        "catalog_source_count ",
        &format!("catalogsource_ready{{namespace=\"{}\",name=\"community\"}} 1", ns.name()),
        "subscription_sync_total{name=\"etcd\"",
        "olm_resolution_duration_seconds_count{outcome=\"succeeded\"}",
        "install_plan_count ",
    ] {
        assert!(text.contains(needle), "/metrics lacks {needle}");
    }

    let out = cluster
        .kubectl(&[
            "get",
            "clusterrolebindings",
            "-l",
            &format!("olm.owner=etcdoperator.v0.9.4-clusterwide,olm.owner.namespace={}", ns.name()),
            "-o",
            "name",
        ])
        .await?;
    assert!(
        out.stdout.contains("etcdoperator.v0.9.4-clusterwide-"),
        "cluster permissions were granted: {}",
        out.stdout
    );
    // Removing the operator keeps its CRDs and the user's EtcdCluster.
    ns.kubectl(&["delete", "subscription", "etcd"]).await?;
    ns.kubectl(&["delete", "clusterserviceversion", "etcdoperator.v0.9.4-clusterwide"])
        .await?;
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> = ns.api();
    ns.wait_for("the operator Deployment to go", TIMEOUT, OBJECTS, || {
        let deployments = deployments.clone();
        async move {
            let left = deployments.list(&Default::default()).await.map_err(|e| e.to_string())?.items.len();
            Ok::<_, String>((left == 0).then_some(()))
        }
    })
    .await?;
    // Its cluster-scoped RBAC (owner labels only) goes with the CSV (the CSV controller cleans it up).
    let bindings: Api<k8s_openapi::api::rbac::v1::ClusterRoleBinding> = Api::all(cluster.client());
    let selector = format!("olm.owner=etcdoperator.v0.9.4-clusterwide,olm.owner.namespace={}", ns.name());
    ns.wait_for("the CSV's ClusterRoleBindings to go", Duration::from_secs(150), OBJECTS, || {
        let bindings = bindings.clone();
        let selector = selector.clone();
        async move {
            let left = bindings
                .list(&kube::api::ListParams::default().labels(&selector))
                .await
                .map_err(|e| e.to_string())?
                .items
                .len();
            if left == 0 { Ok(Some(())) } else { Err(format!("{left} left")) }
        }
    })
    .await?;
    let out = ns.kubectl(&["get", "etcdcluster", "example", "-o", "name"]).await?;
    assert!(out.stdout.contains("example"), "{}", out.stdout);
    let out = cluster
        .kubectl(&["get", "crd", "etcdclusters.etcd.database.coreos.com", "-o", "name"])
        .await?;
    assert!(out.stdout.contains("etcdclusters"), "{}", out.stdout);
    ns.cleanup().await?;
    server.shutdown();
    Ok(())
}

#[tokio::test]
async fn a_crd_update_that_breaks_existing_objects_fails_the_plan_naming_them() -> anyhow::Result<()> {
    let (cluster, _) = controllers::setup().await?;
    let ns = cluster.namespace("sub-crdcheck").await?;
    let random = ns.name().rsplit('-').next().unwrap_or("x").to_owned();
    operator_group(&ns, false).await?;
    // A legacy ConfigMap catalog: widget v1, and v2 whose CRD makes spec.color required.
    let yaml_list = |items: Vec<serde_json::Value>| serde_json::to_string(&items).unwrap_or_default();
    let configmap = json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "widgets"},
        "data": {
            "packages": "- packageName: widget\n  channels:\n  - name: stable\n    currentCSV: widget.v2.0.0\n",
            "clusterServiceVersions": yaml_list(vec![widget_csv("1.0.0", None, &random), widget_csv("2.0.0", Some("widget.v1.0.0"), &random)]),
            "customResourceDefinitions": yaml_list(vec![widget_crd(true, &random)]),
        }
    });
    // v1 of the catalog ships the permissive CRD: install it from there first.
    let mut v1 = configmap.clone();
    v1["data"]["customResourceDefinitions"] = json!(yaml_list(vec![widget_crd(false, &random)]));
    v1["data"]["packages"] = json!("- packageName: widget\n  channels:\n  - name: stable\n    currentCSV: widget.v1.0.0\n");
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = ns.api();
    cms.create(&PostParams::default(), &serde_json::from_value(v1)?).await?;
    create_from_yaml(
        &ns,
        "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: widgets\nspec:\n  sourceType: configmap\n  configMap: widgets\n",
    )
    .await?;
    subscription(&ns, "widget", "widget", "widgets", "stable", None, "Manual").await?;
    approve_next(&ns, "widget.v1.0.0").await?;

    // A Widget without a color, valid today.
    create_from_yaml(
        &ns,
        &format!("apiVersion: {random}.olm.test/v1\nkind: Widget\nmetadata:\n  name: plain\nspec:\n  size: 1\n"),
    )
    .await?;
    // The catalog moves to v2, whose CRD requires spec.color.
    cms.patch(
        "widgets",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": configmap["data"]})),
    )
    .await?;
    let api: Api<InstallPlan> = ns.api();
    let plan = ns
        .wait_for("the v2 InstallPlan", TIMEOUT, OBJECTS, || {
            let api = api.clone();
            async move {
                let plans = api.list(&Default::default()).await.map_err(|e| e.to_string())?.items;
                Ok::<_, String>(
                    plans
                        .into_iter()
                        .find(|p| p.spec.cluster_service_version_names.contains(&"widget.v2.0.0".to_owned())),
                )
            }
        })
        .await?;
    ns.kubectl(&[
        "patch",
        "installplan",
        &plan.name_any(),
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"approved":true}}"#,
    ])
    .await?;
    let failed = ns
        .wait_for("the v2 InstallPlan Failed", TIMEOUT, OBJECTS, || {
            let api = api.clone();
            let name = plan.name_any();
            async move {
                let p = api.get(&name).await.map_err(|e| e.to_string())?;
                Ok::<_, String>(p.status.filter(|s| s.phase == InstallPlanPhase::Failed))
            }
        })
        .await?;
    let message = failed.message.unwrap_or_default();
    assert!(
        message.contains("Widget") && message.contains("/plain") && message.contains("spec.color: required"),
        "{message}"
    );
    let sub = wait_subscription(&ns, "widget", "UpgradeFailed", |s| {
        state(s) == Some(&SubscriptionState::UpgradeFailed)
    })
    .await?;
    let condition = sub
        .status
        .as_ref()
        .and_then(|s| s.condition(&SubscriptionConditionType::InstallPlanFailed))
        .cloned();
    assert_eq!(condition.and_then(|c| c.reason).as_deref(), Some("InstallComponentFailed"));
    // v1 keeps running.
    wait_csv_succeeded(&ns, "widget.v1.0.0").await?;
    ns.cleanup().await?;
    cluster
        .kubectl(&["delete", "crd", &format!("widgets.{random}.olm.test"), "--wait=false"])
        .await?;
    Ok(())
}
