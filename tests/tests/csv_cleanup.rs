//! The `operators.coreos.com/csv-cleanup` finalizer against the real local control plane: a
//! deleted CSV stays until its cluster-scoped RBAC is gone, and CRDs are never deleted.

use olm_e2e::controllers;

use std::time::Duration;

use controllers::{create_csv_with_permissions, create_own_namespace_group, load_csv, setup, wait_gone, wait_phase};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use olm_api::keys;
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use serde_json::json;

const ETCD: &str = "etcd-0.9.4/etcdoperator.v0.9.4.clusterserviceversion.yaml";
const CSV_NAME: &str = "etcdoperator.v0.9.4";
/// A finalizer of the test's own, holding the CSV after OLM released it so the test can look.
const TEST_HOLD: &str = "example.com/test-hold";
const TIMEOUT: Duration = Duration::from_secs(90);

#[tokio::test]
async fn deleting_a_csv_removes_its_cluster_rbac_before_the_finalizer_is_released() -> anyhow::Result<()> {
    let (cluster, _admin) = setup().await?;
    let _apis = controllers::ETCD_APIS.read().await;
    let client = cluster.client();
    let ns = cluster.namespace("csv-cleanup").await?;
    let name = ns.name().to_owned();

    create_own_namespace_group(&ns, "etcd-og").await?;
    let mut csv = load_csv(ETCD, &name)?;
    csv.metadata.finalizers = Some(vec![TEST_HOLD.to_owned()]);
    // Cluster-wide grants labelled with the CSV as owner, as an InstallPlan creates them.
    create_csv_with_permissions(&ns, &csv, true).await?;
    wait_phase(&ns, CSV_NAME, "Succeeded", Some("InstallSucceeded"), TIMEOUT).await?;

    let csvs: Api<ClusterServiceVersion> = ns.api();
    let finalizers = csvs.get(CSV_NAME).await?.finalizers().to_vec();
    assert_eq!(finalizers, vec![TEST_HOLD.to_owned(), keys::CSV_CLEANUP_FINALIZER.to_owned()], "added, others kept");

    let owner = format!(
        "{}={CSV_NAME},{}={name},{}=ClusterServiceVersion",
        keys::OWNER_LABEL,
        keys::OWNER_NAMESPACE_LABEL,
        keys::OWNER_KIND_LABEL
    );
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    let owned = ListParams::default().labels(&owner);
    assert!(!roles.list(&owned).await?.items.is_empty(), "the owned ClusterRole exists before deletion");
    assert!(!bindings.list(&owned).await?.items.is_empty(), "the owned ClusterRoleBinding exists before deletion");

    csvs.delete(CSV_NAME, &DeleteParams::default()).await?;
    ns.wait_for("OLM to release its finalizer", TIMEOUT, &["clusterserviceversions"], || {
        let csvs = csvs.clone();
        async move {
            let csv = csvs.get(CSV_NAME).await.map_err(|e| e.to_string())?;
            if csv.finalizers() == [TEST_HOLD.to_owned()] {
                Ok(Some(()))
            } else {
                Err(format!("finalizers {:?}", csv.finalizers()))
            }
        }
    })
    .await?;
    // By the time OLM lets go, what it owned cluster-wide is gone.
    let left_roles: Vec<String> = roles.list(&owned).await?.items.iter().map(|r| r.name_any()).collect();
    let left_bindings: Vec<String> = bindings.list(&owned).await?.items.iter().map(|r| r.name_any()).collect();
    assert!(left_roles.is_empty(), "ClusterRoles left: {left_roles:?}");
    assert!(left_bindings.is_empty(), "ClusterRoleBindings left: {left_bindings:?}");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    assert!(crds.get_opt("etcdclusters.etcd.database.coreos.com").await?.is_some(), "CRDs are never deleted");

    let release = json!([
        {"op": "test", "path": "/metadata/finalizers/0", "value": TEST_HOLD},
        {"op": "remove", "path": "/metadata/finalizers/0"},
    ]);
    csvs.patch(CSV_NAME, &PatchParams::default(), &Patch::<()>::Json(serde_json::from_value(release)?))
        .await?;
    wait_gone(&ns, "the CSV to be gone", &csvs, CSV_NAME, &["clusterserviceversions"]).await?;
    ns.cleanup().await?;
    Ok(())
}

/// Cluster RBAC an InstallPlan applied for a CSV after the CSV's own cleanup (its namespace
/// terminating while the plan ran) has no CSV left to delete it: once the namespace is gone,
/// OLM deletes the ClusterRoles and bindings owned by CSVs of that namespace, and nothing else.
#[tokio::test]
async fn cluster_rbac_left_in_a_deleted_namespace_is_removed() -> anyhow::Result<()> {
    let (cluster, _admin) = setup().await?;
    let client = cluster.client();
    let ns = cluster.namespace("orphaned-rbac").await?;
    let namespace = ns.name().to_owned();
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    let labels = |kind: &str| {
        json!({keys::OWNER_LABEL: "ghost.v1.0.0", keys::OWNER_NAMESPACE_LABEL: namespace, keys::OWNER_KIND_LABEL: kind})
    };
    // As an InstallPlan writes them for a CSV that is already gone, and one of an
    // OperatorGroup of the same namespace, which is not OLM's CSV cleanup to remove.
    let orphan = format!("{namespace}-ghost");
    let kept = format!("{namespace}-group");
    for (name, kind) in [(&orphan, "ClusterServiceVersion"), (&kept, "OperatorGroup")] {
        let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name, "labels": labels(kind)},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]});
        roles.create(&Default::default(), &serde_json::from_value(role)?).await?;
        let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": labels(kind)},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": "ghost", "namespace": namespace}]});
        bindings.create(&Default::default(), &serde_json::from_value(binding)?).await?;
    }
    let waiter = cluster.namespace("orphaned-rbac-wait").await?;
    ns.cleanup().await?;
    waiter
        .wait_for("the ghost CSV's ClusterRole and binding to be deleted", TIMEOUT, &["clusterroles", "clusterrolebindings"], || {
            let (roles, bindings, orphan) = (roles.clone(), bindings.clone(), orphan.clone());
            async move {
                let role = roles.get_opt(&orphan).await.map_err(|e| e.to_string())?;
                let binding = bindings.get_opt(&orphan).await.map_err(|e| e.to_string())?;
                Ok::<_, String>((role.is_none() && binding.is_none()).then_some(()))
            }
        })
        .await?;
    assert!(roles.get_opt(&kept).await?.is_some(), "the OperatorGroup's ClusterRole is not OLM's CSV cleanup to delete");
    roles.delete(&kept, &DeleteParams::default()).await?;
    bindings.delete(&kept, &DeleteParams::default()).await?;
    waiter.cleanup().await?;
    Ok(())
}

/// An APIService labelled as made for a CSV that does not exist (its namespace gone, or the
/// CSV) is deleted, as upstream deletes orphaned APIServices; one of an existing CSV, or not
/// made for a CSV, stays.
#[tokio::test]
async fn an_apiservice_whose_csv_does_not_exist_is_deleted() -> anyhow::Result<()> {
    use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
    let (cluster, _admin) = setup().await?;
    let ns = cluster.namespace("orphaned-apiservice").await?;
    let api_services: Api<APIService> = Api::all(cluster.client());
    let group = format!("hats.{}.example.com", ns.name());
    let name = format!("v1alpha1.{group}");
    let create = |labels: serde_json::Value| {
        let api_services = api_services.clone();
        let object = json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": name, "labels": labels},
            "spec": {"group": group, "version": "v1alpha1", "groupPriorityMinimum": 100, "versionPriority": 100}});
        async move { api_services.create(&Default::default(), &serde_json::from_value::<APIService>(object)?).await.map_err(anyhow::Error::from) }
    };
    let gone = |what: &'static str| {
        let (api_services, name) = (api_services.clone(), name.clone());
        ns.wait_for(what, TIMEOUT, &["apiservices"], move || {
            let (api_services, name) = (api_services.clone(), name.clone());
            async move { Ok::<_, String>(api_services.get_opt(&name).await.map_err(|e| e.to_string())?.is_none().then_some(())) }
        })
    };
    let owned_by = |namespace: &str| json!({keys::OWNER_LABEL: "hat-server.v1", keys::OWNER_KIND_LABEL: "ClusterServiceVersion", keys::OWNER_NAMESPACE_LABEL: namespace});
    create(owned_by("nonexistent-namespace")).await?;
    gone("the APIService of a CSV in a namespace that does not exist to be deleted").await?;
    create(owned_by(ns.name())).await?;
    gone("the APIService of a CSV that does not exist to be deleted").await?;
    // Not made for a CSV: OLM leaves it alone.
    create(json!({"app": "hats"})).await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(api_services.get_opt(&name).await?.is_some(), "an APIService not made for a CSV is not OLM's to delete");
    api_services.delete(&name, &DeleteParams::default()).await?;
    ns.cleanup().await?;
    Ok(())
}
