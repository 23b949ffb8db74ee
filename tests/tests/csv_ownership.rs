//! What a CSV may not take from others, against the real local control plane: a ServiceAccount
//! owned by another CSV (requirement not met until it is released), and APIs a static
//! OperatorGroup does not list (CannotModifyStaticOperatorGroupProvidedAPIs until it does).

use olm_e2e::controllers;

use std::time::Duration;

use controllers::{create_csv, create_csv_with_permissions, create_own_namespace_group, csv_message, edit_csv, grant_permissions, load_csv, own_namespace_group, setup, wait_phase};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use olm_api::keys;
use olm_api::v1::operator_group::OperatorGroup;
use olm_api::v1alpha1::cluster_service_version::{ClusterServiceVersion, StatusReason};
use serde_json::json;

const ETCD: &str = "etcd-0.9.4/etcdoperator.v0.9.4.clusterserviceversion.yaml";
const CSV_NAME: &str = "etcdoperator.v0.9.4";
const OTHER: &str = "backup-operator.v1.0.0";
const TIMEOUT: Duration = Duration::from_secs(90);

#[tokio::test]
async fn a_service_account_of_another_csv_is_not_used_until_released() -> anyhow::Result<()> {
    let (cluster, _admin) = setup().await?;
    let _apis = controllers::ETCD_APIS.read().await;
    let client = cluster.client();
    let ns = cluster.namespace("csv-sa-owner").await?;
    let name = ns.name().to_owned();
    create_own_namespace_group(&ns, "own").await?;

    // Another operator (owning nothing, running nothing) that owns the account.
    let other = edit_csv(&load_csv(ETCD, &name)?, |value| {
        value["metadata"]["name"] = json!(OTHER);
        value["spec"]["customresourcedefinitions"] = json!({});
        value["spec"]["install"]["spec"] = json!({"deployments": []});
    })?;
    let other = create_csv(&ns, &other).await?;
    let csv = load_csv(ETCD, &name)?;
    grant_permissions(&client, &csv, &name, false).await?;
    let accounts: Api<ServiceAccount> = ns.api();
    let owned = json!({"metadata": {"ownerReferences": [{
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "name": OTHER, "uid": other.uid().unwrap_or_default(),
    }]}});
    accounts.patch("etcd-operator", &PatchParams::default(), &Patch::Merge(&owned)).await?;

    create_csv(&ns, &csv).await?;
    wait_phase(&ns, CSV_NAME, "Pending", Some("RequirementsNotMet"), TIMEOUT).await?;
    let csvs: Api<ClusterServiceVersion> = ns.api();
    let requirements = csvs.get(CSV_NAME).await?.status.and_then(|s| s.requirement_status).unwrap_or_default();
    let entry = requirements
        .iter()
        .find(|r| r.kind == "ServiceAccount" && r.name == "etcd-operator")
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("no ServiceAccount requirement in {requirements:?}"))?;
    assert_eq!(entry.status, StatusReason::PresentNotSatisfied);
    assert!(
        entry.message.starts_with("Service account is owned by another ClusterServiceVersion")
            && entry.message.contains(OTHER)
            && entry.message.contains(CSV_NAME),
        "{}",
        entry.message
    );
    let deployments: Api<Deployment> = ns.api();
    assert!(deployments.get_opt("etcd-operator").await?.is_none(), "no operator runs as another's account");

    // Released: the ServiceAccount watch lets the install go on.
    let released = json!({"metadata": {"ownerReferences": null}});
    accounts.patch("etcd-operator", &PatchParams::default(), &Patch::Merge(&released)).await?;
    wait_phase(&ns, CSV_NAME, "Succeeded", Some("InstallSucceeded"), TIMEOUT).await?;
    ns.cleanup().await?;
    Ok(())
}

#[tokio::test]
async fn a_static_operator_group_refuses_apis_it_does_not_list() -> anyhow::Result<()> {
    let (cluster, _admin) = setup().await?;
    let _apis = controllers::ETCD_APIS.read().await;
    let ns = cluster.namespace("csv-static-og").await?;
    let name = ns.name().to_owned();
    let groups: Api<OperatorGroup> = ns.api();
    let mut group = own_namespace_group("own", &name);
    group.spec.static_provided_apis = Some(true);
    group
        .metadata
        .annotations
        .get_or_insert_default()
        .insert(keys::PROVIDED_APIS_ANNOTATION.to_owned(), "Other.v1.example.com".to_owned());
    groups.create(&PostParams::default(), &group).await?;
    let csv = load_csv(ETCD, &name)?;
    create_csv_with_permissions(&ns, &csv, false).await?;
    wait_phase(&ns, CSV_NAME, "Failed", Some("CannotModifyStaticOperatorGroupProvidedAPIs"), TIMEOUT).await?;
    let message = csv_message(&ns, CSV_NAME).await?;
    assert_eq!(message, "static provided api operatorgroup cannot be modified by these apis");
    let deployments: Api<Deployment> = ns.api();
    assert!(deployments.get_opt("etcd-operator").await?.is_none(), "nothing installed");
    let annotation = groups.get("own").await?.annotations().get(keys::PROVIDED_APIS_ANNOTATION).cloned();
    assert_eq!(annotation.as_deref(), Some("Other.v1.example.com"), "a static group's list is left alone");

    // The administrator lists the operator's APIs: it installs.
    let listed = "EtcdBackup.v1beta2.etcd.database.coreos.com,EtcdCluster.v1beta2.etcd.database.coreos.com,EtcdRestore.v1beta2.etcd.database.coreos.com";
    let patch = json!({"metadata": {"annotations": {keys::PROVIDED_APIS_ANNOTATION: listed}}});
    groups.patch("own", &PatchParams::default(), &Patch::Merge(&patch)).await?;
    wait_phase(&ns, CSV_NAME, "Succeeded", Some("InstallSucceeded"), TIMEOUT).await?;
    ns.cleanup().await?;
    Ok(())
}
