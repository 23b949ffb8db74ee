//! `olm migrate` (issue #54) on the real control plane, against the `olm run` binary: etcd,
//! installed by OLM v0 from a Subscription for all namespaces with a custom resource of its
//! own, becomes an OLM v1 ClusterExtension in place — the same Deployment (uid and generation:
//! no pod restarted), the same pods, the same CRD and custom resource, every object now the
//! extension's and none left with OLM v0's labels — then upgrades through the extension's
//! version. A dry run changes nothing; what v1 cannot express is refused with what to do.

use std::process::Output;
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use olm_api::olmv1::{ClusterCatalog, ClusterExtension};
use olm_api::v1::operator_group::OperatorGroup;
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use olm_api::v1alpha1::subscription::Subscription;
use olm_e2e::controllers::{self, create_from_yaml};
use olm_e2e::olmv1::OlmRun;
use olm_e2e::{images, journey, olm};
use olm_testkit::{RegistryOptions, TestCluster, TestNamespace, wait_for};
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(180);
const ETCD_CRDS: [&str; 3] = ["etcdclusters.etcd.database.coreos.com", "etcdbackups.etcd.database.coreos.com", "etcdrestores.etcd.database.coreos.com"];

fn migrate(cluster: &TestCluster, args: &[&str]) -> anyhow::Result<Output> {
    let kubeconfig = format!("--kubeconfig={}", cluster.kubeconfig().display());
    Ok(std::process::Command::new(olm_e2e::olm_bin()).arg("migrate").args(args).arg(&kubeconfig).output()?)
}

fn text(output: &Output) -> (String, String) {
    (String::from_utf8_lossy(&output.stdout).into_owned(), String::from_utf8_lossy(&output.stderr).into_owned())
}

fn etcd_clusters() -> ApiResource {
    ApiResource {
        group: "etcd.database.coreos.com".into(),
        version: "v1beta2".into(),
        api_version: "etcd.database.coreos.com/v1beta2".into(),
        kind: "EtcdCluster".into(),
        plural: "etcdclusters".into(),
    }
}

/// What must not change across the migration.
#[derive(Debug, PartialEq)]
struct Running {
    deployment_uid: Option<String>,
    deployment_generation: Option<i64>,
    pod_uids: Vec<String>,
    crd_uid: Option<String>,
    custom_resource: (Option<String>, Option<String>),
}

async fn running(cluster: &TestCluster, ns: &TestNamespace) -> anyhow::Result<Running> {
    let deployment = Api::<Deployment>::namespaced(cluster.client(), ns.name()).get("etcd-operator").await?;
    let mut pod_uids: Vec<String> = Api::<Pod>::namespaced(cluster.client(), ns.name())
        .list(&ListParams::default().labels("name=etcd-operator-alm-owned"))
        .await?
        .items
        .iter()
        .filter_map(|p| p.metadata.uid.clone())
        .collect();
    pod_uids.sort();
    let crd = Api::<CustomResourceDefinition>::all(cluster.client()).get(ETCD_CRDS[0]).await?;
    let cr = Api::<DynamicObject>::namespaced_with(cluster.client(), ns.name(), &etcd_clusters()).get("example").await?;
    Ok(Running {
        deployment_uid: deployment.metadata.uid,
        deployment_generation: deployment.metadata.generation,
        pod_uids,
        crd_uid: crd.metadata.uid,
        custom_resource: (cr.metadata.uid, cr.metadata.resource_version),
    })
}

#[tokio::test]
async fn etcd_moves_from_a_subscription_to_a_cluster_extension_in_place_then_upgrades_through_it() -> anyhow::Result<()> {
    let cluster = controllers::cluster_with_crds().await?;
    // OLM v0 suites on this shared control plane leave etcd's CRDs; this test's v0 install
    // must be the one that created them.
    let mut args = vec!["delete", "--ignore-not-found", "--wait=true"];
    let crds: Vec<String> = ETCD_CRDS.iter().map(|c| format!("customresourcedefinitions/{c}")).collect();
    args.extend(crds.iter().map(String::as_str));
    cluster.kubectl(&args).await?;
    // What a failed earlier run left (cluster-scoped, so not gone with its namespace).
    let extensions: Api<ClusterExtension> = Api::all(cluster.client());
    for left in extensions.list(&ListParams::default()).await?.items.iter().filter(|e| e.name_any().starts_with("migrated-etcd-")) {
        let _ = extensions.delete(&left.name_any(), &DeleteParams::default()).await;
    }
    let registry = olm_testkit::registry(RegistryOptions::new()).await?;
    let work = tempfile::tempdir()?;
    let _olm = OlmRun::start(&cluster, &work.path().join("cache")).await?;
    let ns = cluster.namespace("migrate").await?;

    // OLM v0: etcd 0.9.2 for all namespaces, Manual approval (the starting version approved by
    // olm-rs's annotation), from a catalog image.
    let image = format!("{}/migrate-catalog:v1", registry.addr());
    olm(&["catalog", "push", olm_e2e::repo().join("crates/olm-registry/testdata/catalog").to_str().context("path")?, &image])?;
    // A ClusterCatalog of the CatalogSource's name is made: a name of this run's own.
    let source = olm_testkit::random_name("etcd-catalog");
    create_from_yaml(&ns, &images::catalog_source(&source, &image)).await?;
    create_from_yaml(&ns, "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata:\n  name: global\nspec: {}\n").await?;
    create_from_yaml(
        &ns,
        &format!(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata:\n  name: etcd\n  annotations:\n    olm-rs.io/auto-approve-starting-csv: \"true\"\nspec:\n  source: {source}\n  sourceNamespace: {}\n  name: etcd\n  channel: clusterwide-alpha\n  startingCSV: etcdoperator.v0.9.2-clusterwide\n  installPlanApproval: Manual\n",
            ns.name(),
        ),
    )
    .await?;
    journey::csv_succeeded(&ns, "etcdoperator.v0.9.2-clusterwide", TIMEOUT).await?;
    ns.kubectl_with_input(
        &["create", "-f", "-"],
        "apiVersion: etcd.database.coreos.com/v1beta2\nkind: EtcdCluster\nmetadata:\n  name: example\nspec:\n  size: 3\n  version: 3.2.13\n",
    )
    .await?;
    wait_for("the operator's pod", TIMEOUT, || async {
        let pods = Api::<Pod>::namespaced(cluster.client(), ns.name()).list(&ListParams::default().labels("name=etcd-operator-alm-owned")).await?;
        anyhow::Ok((!pods.items.is_empty()).then_some(()))
    })
    .await?;
    let before = running(&cluster, &ns).await?;
    let subs: Api<Subscription> = Api::namespaced(cluster.client(), ns.name());
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(cluster.client(), ns.name());
    let name = olm_testkit::random_name("migrated-etcd");
    let ns_flag = format!("--namespace={}", ns.name());
    let name_flag = format!("--name={name}");

    // Manual approval has no v1 counterpart: refused, with what to do.
    let refused = migrate(&cluster, &["etcd", &ns_flag, &name_flag, "--dry-run"])?;
    let (_, stderr) = text(&refused);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("installPlanApproval: Manual") && stderr.contains("--pin"), "{stderr}");

    // A dry run prints the plan and changes nothing.
    let sub_version = subs.get("etcd").await?.metadata.resource_version;
    let csv_version = csvs.get("etcdoperator.v0.9.2-clusterwide").await?.metadata.resource_version;
    let unnamed = migrate(&cluster, &[&ns_flag, "--dry-run"])?;
    assert!(!unnamed.status.success() && text(&unnamed).1.contains("--all"), "{:?}", text(&unnamed));
    // --all: every Subscription of the namespace (here the one).
    let dry = migrate(&cluster, &["--all", &ns_flag, &name_flag, "--pin", "--dry-run"])?;
    let (stdout, stderr) = text(&dry);
    assert!(dry.status.success(), "{stdout}{stderr}");
    for expected in [
        format!("create ClusterCatalog {source} for {image}"),
        format!("create ClusterExtension {name}: package etcd version 0.9.2-clusterwide in namespace {}", ns.name()),
        format!("Deployment {}/etcd-operator", ns.name()),
        format!("CustomResourceDefinition {} (its objects untouched)", ETCD_CRDS[0]),
        format!("Subscription {}/etcd", ns.name()),
        format!("OperatorGroup {}/global", ns.name()),
        "then keep ClusterExtension".to_owned(),
    ] {
        assert!(stdout.contains(&expected), "{expected:?} in the plan:\n{stdout}");
    }
    assert_eq!(subs.get("etcd").await?.metadata.resource_version, sub_version, "the dry run wrote the Subscription");
    assert_eq!(csvs.get("etcdoperator.v0.9.2-clusterwide").await?.metadata.resource_version, csv_version, "the dry run wrote the CSV");
    assert!(extensions.get_opt(&name).await?.is_none(), "the dry run created the ClusterExtension");

    // The migration.
    let done = migrate(&cluster, &["etcd", &ns_flag, &name_flag, "--pin", "--yes"])?;
    let (stdout, stderr) = text(&done);
    assert!(done.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains(&format!("Subscription {}/etcd is ClusterExtension {name} now", ns.name())), "{stdout}");

    let after = running(&cluster, &ns).await?;
    assert_eq!(after, before, "the operator, its pods, its CRD and its custom resource are the same objects, unchanged");
    let extension = extensions.get(&name).await?;
    assert_eq!(extension.status.as_ref().and_then(|s| s.install.as_ref()).map(|i| i.bundle.version.clone()).as_deref(), Some("0.9.2-clusterwide"));
    assert_eq!(extension.spec.source.catalog.as_ref().and_then(|c| c.version.clone()).as_deref(), Some("0.9.2-clusterwide"), "--pin keeps the version");
    let origin = extension.conditions().iter().find(|c| c.type_ == "MigratedFromOLMv0").cloned().context("the MigratedFromOLMv0 condition")?;
    assert_eq!(origin.status, "True");
    assert!(
        origin.message.contains(&format!("Subscription {}/etcd", ns.name())) && origin.message.contains("etcdoperator.v0.9.2-clusterwide"),
        "{}",
        origin.message
    );
    let deployment = Api::<Deployment>::namespaced(cluster.client(), ns.name()).get("etcd-operator").await?;
    let labels = deployment.labels();
    assert_eq!(labels.get("olm.operatorframework.io/owner-name"), Some(&name));
    assert!(!labels.keys().any(|k| k.starts_with("olm.owner") || k.starts_with("operators.coreos.com/")), "OLM v0's labels left: {labels:?}");
    let owners: Vec<_> = deployment.owner_references().iter().map(|o| o.kind.clone()).collect();
    assert_eq!(owners, ["ClusterExtension"]);
    let crd = Api::<CustomResourceDefinition>::all(cluster.client()).get(ETCD_CRDS[0]).await?;
    assert_eq!(crd.labels().get("olm.operatorframework.io/owner-name"), Some(&name));
    // OLM v0's objects are gone, and nothing carries its labels for the CSV.
    assert!(subs.get_opt("etcd").await?.is_none());
    wait_for("the CSV gone", TIMEOUT, || async { anyhow::Ok(csvs.get_opt("etcdoperator.v0.9.2-clusterwide").await?.is_none().then_some(())) }).await?;
    assert!(Api::<OperatorGroup>::namespaced(cluster.client(), ns.name()).get_opt("global").await?.is_none());
    let v0_labelled = "olm.owner=etcdoperator.v0.9.2-clusterwide";
    assert!(Api::<ClusterRole>::all(cluster.client()).list(&ListParams::default().labels(v0_labelled)).await?.items.is_empty());
    assert!(Api::<ClusterRoleBinding>::all(cluster.client()).list(&ListParams::default().labels(v0_labelled)).await?.items.is_empty());
    assert!(Api::<ClusterCatalog>::all(cluster.client()).get_opt(&source).await?.is_some());
    let events = Api::<Event>::namespaced(cluster.client(), "default")
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await?;
    assert!(
        events.items.iter().any(|e| e.reason.as_deref() == Some("MigratedFromOLMv0") && e.message.as_deref().is_some_and(|m| m.contains("etcdoperator.v0.9.2-clusterwide"))),
        "an Event names what it came from; olm migrate said:\n{stderr}"
    );

    // An upgrade through the extension's version: now v1's own pod template.
    extensions
        .patch(&name, &PatchParams::default(), &Patch::Merge(json!({"spec": {"source": {"catalog": {"version": "0.9.4-clusterwide"}}}})))
        .await?;
    wait_for("0.9.4 installed through the extension", TIMEOUT, || async {
        let extension = extensions.get(&name).await?;
        anyhow::Ok(extension.status.and_then(|s| s.install).filter(|i| i.bundle.version == "0.9.4-clusterwide").map(drop))
    })
    .await?;
    let upgraded = Api::<Deployment>::namespaced(cluster.client(), ns.name()).get("etcd-operator").await?;
    assert_eq!(upgraded.metadata.uid, before.deployment_uid);
    assert_ne!(upgraded.metadata.generation, before.deployment_generation, "the new bundle's pod template rolled out");
    let cr = Api::<DynamicObject>::namespaced_with(cluster.client(), ns.name(), &etcd_clusters()).get("example").await?;
    assert_eq!(cr.metadata.uid, before.custom_resource.0, "the custom resource survives the upgrade");

    extensions.delete(&name, &DeleteParams::default()).await?;
    let _ = Api::<ClusterCatalog>::all(cluster.client()).delete(&source, &DeleteParams::default()).await;
    Ok(())
}
