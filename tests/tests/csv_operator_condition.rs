//! The OperatorCondition of an installed CSV, against the real local control plane: the
//! operator's ServiceAccount may get and update it (a Role and RoleBinding named after it,
//! put back when deleted), and what the operator reports in `spec.conditions` shows in
//! `status.conditions` with the generation it was observed at.

use olm_e2e::controllers;

use std::time::Duration;

use controllers::{create_csv_with_permissions, create_own_namespace_group, load_csv, setup, wait_phase};
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use k8s_openapi::api::rbac::v1::Role;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use olm_api::v2::OperatorCondition;
use serde_json::json;

const ETCD: &str = "etcd-0.9.4/etcdoperator.v0.9.4.clusterserviceversion.yaml";
const CSV_NAME: &str = "etcdoperator.v0.9.4";
const TIMEOUT: Duration = Duration::from_secs(90);

async fn operator_may(client: &kube::Client, namespace: &str, verb: &str) -> anyhow::Result<bool> {
    let review = SubjectAccessReview {
        metadata: Default::default(),
        spec: SubjectAccessReviewSpec {
            user: Some(format!("system:serviceaccount:{namespace}:etcd-operator")),
            groups: Some(vec!["system:serviceaccounts".into(), format!("system:serviceaccounts:{namespace}")]),
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(namespace.to_owned()),
                group: Some("operators.coreos.com".into()),
                resource: Some("operatorconditions".into()),
                name: Some(CSV_NAME.into()),
                verb: Some(verb.into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        status: None,
    };
    let answer = Api::<SubjectAccessReview>::all(client.clone()).create(&PostParams::default(), &review).await?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

#[tokio::test]
async fn the_operator_can_update_its_condition_and_sees_it_observed() -> anyhow::Result<()> {
    let (cluster, _admin) = setup().await?;
    let _apis = controllers::ETCD_APIS.read().await;
    let client = cluster.client();
    let ns = cluster.namespace("csv-condition").await?;
    let name = ns.name().to_owned();
    create_own_namespace_group(&ns, "own").await?;
    let csv = load_csv(ETCD, &name)?;
    create_csv_with_permissions(&ns, &csv, false).await?;
    wait_phase(&ns, CSV_NAME, "Succeeded", Some("InstallSucceeded"), TIMEOUT).await?;

    let roles: Api<Role> = ns.api();
    let wait_for_access = || {
        ns.wait_for("the operator to be allowed to update its OperatorCondition", TIMEOUT, &["roles", "rolebindings"], || {
            let client = client.clone();
            let name = name.clone();
            async move {
                let update = operator_may(&client, &name, "update").await.map_err(|e| e.to_string())?;
                let get = operator_may(&client, &name, "get").await.map_err(|e| e.to_string())?;
                if update && get { Ok(Some(())) } else { Err(format!("get {get}, update {update}")) }
            }
        })
    };
    wait_for_access().await?;
    let role = roles.get(CSV_NAME).await?;
    assert_eq!(role.owner_references()[0].kind, "OperatorCondition");
    assert!(!operator_may(&client, &name, "delete").await?, "only get, update and patch");

    // Deleted by hand: put back (the Role is watched).
    roles.delete(CSV_NAME, &DeleteParams::default()).await?;
    ns.wait_for("the Role to come back", TIMEOUT, &["roles"], || {
        let roles = roles.clone();
        let old_uid = role.uid();
        async move {
            match roles.get_opt(CSV_NAME).await.map_err(|e| e.to_string())? {
                Some(again) if again.uid() != old_uid => Ok(Some(())),
                _ => Err("not recreated yet".to_owned()),
            }
        }
    })
    .await?;
    wait_for_access().await?;

    // The operator reports a condition: its status carries it with the observed generation.
    let conditions: Api<OperatorCondition> = ns.api();
    let report = json!({"spec": {"conditions": [{
        "type": "Upgradeable", "status": "False", "reason": "Migrating", "message": "a migration is running",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }]}});
    let patched = conditions.patch(CSV_NAME, &PatchParams::default(), &Patch::Merge(&report)).await?;
    let generation = patched.metadata.generation;
    ns.wait_for("the reported condition in status", TIMEOUT, &["operatorconditions"], || {
        let conditions = conditions.clone();
        async move {
            let condition = conditions.get(CSV_NAME).await.map_err(|e| e.to_string())?;
            let status = condition.status.and_then(|s| s.conditions).unwrap_or_default();
            match status.iter().find(|c| c.type_ == "Upgradeable") {
                Some(c) if c.status == "False" && c.observed_generation == generation => Ok(Some(())),
                other => Err(format!("status {other:?}, generation {generation:?}")),
            }
        }
    })
    .await?;
    ns.cleanup().await?;
    Ok(())
}
