//! Requirements read from the API server itself, against the real local control plane:
//! `minKubeVersion` against the server's version, and `nativeAPIs` against discovery; and
//! the `olm.api.<hash>` labels that index the CSV by its APIs; and a CSV written as real
//! bundles write it, which the CSV CRD refuses as written and upstream installs anyway.

use olm_e2e::controllers;

use std::time::Duration;

use controllers::{create_csv_with_permissions, create_own_namespace_group, edit_csv, load_csv, setup, wait_phase};
use kube::Api;
use kube::api::{Patch, PatchParams};
use olm_api::v1alpha1::cluster_service_version::{ClusterServiceVersion, StatusReason};
use serde_json::json;

const ETCD: &str = "etcd-0.9.4/etcdoperator.v0.9.4.clusterserviceversion.yaml";
const CSV_NAME: &str = "etcdoperator.v0.9.4";
const TIMEOUT: Duration = Duration::from_secs(90);

#[tokio::test]
async fn min_kube_version_and_native_apis_are_checked_against_the_server() -> anyhow::Result<()> {
    let (cluster, _admin) = setup().await?;
    let _apis = controllers::ETCD_APIS.read().await;
    let ns = cluster.namespace("csv-requirements").await?;
    let name = ns.name().to_owned();
    create_own_namespace_group(&ns, "own").await?;
    let csv = edit_csv(&load_csv(ETCD, &name)?, |value| {
        value["spec"]["minKubeVersion"] = json!("99.0.0");
        value["spec"]["nativeAPIs"] = json!([
            {"group": "apps", "version": "v1", "kind": "Deployment"},
            {"group": "route.openshift.io", "version": "v1", "kind": "Route"},
        ]);
    })?;
    create_csv_with_permissions(&ns, &csv, false).await?;
    wait_phase(&ns, CSV_NAME, "Pending", Some("RequirementsNotMet"), TIMEOUT).await?;

    let csvs: Api<ClusterServiceVersion> = ns.api();
    let requirements = csvs.get(CSV_NAME).await?.status.and_then(|s| s.requirement_status).unwrap_or_default();
    let entry = |kind: &str| requirements.iter().find(|r| r.kind == kind).cloned();
    let version = entry("ClusterServiceVersion").ok_or_else(|| anyhow::anyhow!("no minKubeVersion entry: {requirements:?}"))?;
    assert_eq!(version.status, StatusReason::PresentNotSatisfied);
    assert!(
        version.message.starts_with("CSV version requirement not met: minKubeVersion (99.0.0) > server version (1."),
        "{}",
        version.message
    );
    let deployment = entry("Deployment").ok_or_else(|| anyhow::anyhow!("no apps/v1 entry"))?;
    assert_eq!((deployment.status, deployment.message.as_str()), (StatusReason::Present, "Native API exists"));
    let route = entry("Route").ok_or_else(|| anyhow::anyhow!("no Route entry"))?;
    assert_eq!((route.status, route.name.as_str()), (StatusReason::NotPresent, "v1.route.openshift.io"));

    // Asking only for what this server has: it installs.
    let fixed = json!({"spec": {"minKubeVersion": "1.20.0", "nativeAPIs": [{"group": "apps", "version": "v1", "kind": "Deployment"}]}});
    csvs.patch(CSV_NAME, &PatchParams::default(), &Patch::Merge(&fixed)).await?;
    wait_phase(&ns, CSV_NAME, "Succeeded", Some("InstallSucceeded"), TIMEOUT).await?;

    // Indexed by the APIs it provides (upstream's olm.api.<hash> labels).
    let labels = csvs.get(CSV_NAME).await?.metadata.labels.unwrap_or_default();
    let key = olm_controllers::metadata::api_label_key("EtcdCluster", "v1beta2", "etcd.database.coreos.com");
    assert_eq!(labels.get(&key).map(String::as_str), Some("provided"), "{labels:?}");
    ns.cleanup().await?;
    Ok(())
}

/// project-quay 3.18.0 lists its owned CRD's `resources` without `version` (the CRD requires
/// it) and one of them as `Kind:`. Upstream decodes the CSV into Go structs before creating it,
/// so it sends `version: ""` and `kind`; the CSV installs. Here too, read off the CRD's schema.
#[tokio::test]
async fn a_csv_with_fields_only_a_typed_decode_accepts_installs_as_upstream_writes_it() -> anyhow::Result<()> {
    use olm_e2e::widget::{subscribe_to_widgets, widget_csv};
    let (cluster, _admin) = setup().await?;
    let ns = cluster.namespace("csv-typed").await?;
    let random = ns.name().rsplit('-').next().unwrap_or("x").to_owned();
    create_own_namespace_group(&ns, "widgets").await?;
    let mut csv = widget_csv("1.0.0", None, &random);
    csv["spec"]["customresourcedefinitions"]["owned"][0]["resources"] = json!([{"kind": "Deployment"}, {"Kind": "Job"}]);
    subscribe_to_widgets(&ns, &random, "widget.v1.0.0", vec![csv], None).await?;
    wait_phase(&ns, "widget.v1.0.0", "Succeeded", Some("InstallSucceeded"), TIMEOUT).await?;

    let csvs: Api<ClusterServiceVersion> = ns.api();
    let written = serde_json::to_value(csvs.get("widget.v1.0.0").await?)?;
    let owned = &written["spec"]["customresourcedefinitions"]["owned"][0];
    assert_eq!(owned["resources"], json!([{"kind": "Deployment", "version": ""}, {"kind": "Job", "version": ""}]), "{owned}");
    ns.cleanup().await?;
    cluster.kubectl(&["delete", "crd", &format!("widgets.{random}.olm.test"), "--wait=false"]).await?;
    Ok(())
}
