//! The OperatorGroup and CSV controllers against the real local control plane, with the real
//! etcd 0.9.4 bundle.

use olm_e2e::controllers;

use std::collections::BTreeMap;
use std::time::Duration;

use controllers::{admin_get, create_csv, deployment_available, edit_csv, grant_permissions, load_csv, phase_of, setup, wait_gone, wait_phase};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use olm_api::Verbatim;
use olm_api::v1alpha1::cluster_service_version::StrategyDeploymentPermissions;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use olm_api::keys;
use olm_api::v1::olm_config::OLMConfig;
use olm_api::v1::operator_group::{OperatorGroup, OperatorGroupSpec};
use olm_api::v1alpha1::cluster_service_version::{ClusterServiceVersion, StatusReason};

const ETCD: &str = "etcd-0.9.4/etcdoperator.v0.9.4.clusterserviceversion.yaml";
const ETCD_092: &str = "etcd-0.9.2/etcdoperator.v0.9.2.clusterserviceversion.yaml";
const ETCD_CLUSTERWIDE: &str = "etcd-0.9.4-clusterwide/etcdoperator.v0.9.4-clusterwide.clusterserviceversion.yaml";
const TIMEOUT: Duration = Duration::from_secs(90);

fn operator_group(name: &str, targets: Option<Vec<String>>) -> OperatorGroup {
    OperatorGroup::new(
        name,
        OperatorGroupSpec {
            target_namespaces: targets,
            ..Default::default()
        },
    )
}

async fn deployment_where(
    ns: &olm_testkit::TestNamespace,
    name: &str,
    what: &str,
    check: impl Fn(&Deployment) -> Result<(), String>,
) -> anyhow::Result<Deployment> {
    let api: Api<Deployment> = ns.api();
    let dep_ref = format!("deployment/{name}");
    let found = ns
        .wait_for(what, TIMEOUT, &[dep_ref.as_str(), "clusterserviceversions"], || {
            let api = api.clone();
            let check = &check;
            async move {
                let Some(dep) = api.get_opt(name).await.map_err(|e| e.to_string())? else {
                    return Err("deployment not found".to_owned());
                };
                check(&dep).map(|()| Some(dep))
            }
        })
        .await?;
    Ok(found)
}

fn available(dep: &Deployment) -> Result<(), String> {
    if deployment_available(dep) { Ok(()) } else { Err(format!("not Available: {:?}", dep.status)) }
}

fn image(dep: &Deployment) -> String {
    dep.spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|p| p.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default()
}

/// The acceptance path of issue 6 for an OwnNamespace install: Pending until the ServiceAccount
/// exists, Succeeded with the Deployment Available and the group annotations on the pod
/// template; a hand edit and a deletion are reverted; a second OperatorGroup fails the CSV with
/// TooManyOperatorGroups and removing it recovers; deleting the CSV removes the Deployment but
/// keeps the CRDs.
#[tokio::test]
async fn etcd_own_namespace_install_is_kept_as_declared() -> anyhow::Result<()> {
    let (cluster, admin) = setup().await?;
    let _apis = controllers::ETCD_APIS.read().await;
    let client = cluster.client();
    let ns = cluster.namespace("csv-etcd").await?;
    let name = ns.name().to_owned();

    let groups: Api<OperatorGroup> = ns.api();
    groups.create(&PostParams::default(), &operator_group("etcd-og", Some(vec![name.clone()]))).await?;
    let csv = load_csv(ETCD, &name)?;
    create_csv(&ns, &csv).await?;

    // No ServiceAccount yet: Pending, and the requirement status names it.
    wait_phase(&ns, "etcdoperator.v0.9.4", "Pending", Some("RequirementsNotMet"), TIMEOUT).await?;
    let csvs: Api<ClusterServiceVersion> = ns.api();
    let requirements = ns
        .wait_for("requirementStatus to name the missing ServiceAccount", TIMEOUT, &["clusterserviceversions"], || {
            let csvs = csvs.clone();
            async move {
                let csv = csvs.get("etcdoperator.v0.9.4").await.map_err(|e| e.to_string())?;
                let requirements = csv.status.and_then(|s| s.requirement_status).unwrap_or_default();
                let missing = requirements
                    .iter()
                    .any(|r| r.kind == "ServiceAccount" && r.name == "etcd-operator" && r.status == StatusReason::NotPresent);
                if missing { Ok(Some(requirements)) } else { Err(format!("requirementStatus {requirements:?}")) }
            }
        })
        .await?;
    assert!(
        requirements
            .iter()
            .filter(|r| r.kind == "CustomResourceDefinition")
            .all(|r| r.status == StatusReason::Present),
        "{requirements:?}"
    );

    grant_permissions(&client, &csv, &name, false).await?;
    wait_phase(&ns, "etcdoperator.v0.9.4", "Succeeded", Some("InstallSucceeded"), TIMEOUT).await?;

    let dep = deployment_where(&ns, "etcd-operator", "etcd-operator Available", available).await?;
    let annotations = dep
        .spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.annotations.clone())
        .unwrap_or_default();
    assert_eq!(annotations.get(keys::TARGET_NAMESPACES_ANNOTATION), Some(&name));
    assert_eq!(annotations.get(keys::OPERATOR_GROUP_ANNOTATION).map(String::as_str), Some("etcd-og"));
    assert_eq!(annotations.get(keys::OPERATOR_NAMESPACE_ANNOTATION), Some(&name));
    let labels = dep.labels();
    assert_eq!(labels.get(keys::OWNER_LABEL).map(String::as_str), Some("etcdoperator.v0.9.4"));
    assert_eq!(labels.get(keys::OWNER_KIND_LABEL).map(String::as_str), Some("ClusterServiceVersion"));
    assert!(labels.contains_key(keys::DEPLOYMENT_SPEC_HASH_LABEL));
    let owners = dep.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(owners.len(), 1);
    assert_eq!(owners[0].kind, "ClusterServiceVersion");
    let original_image = image(&dep);

    // The CSV carries the group annotations; the group lists its targets and provided APIs.
    let installed = csvs.get("etcdoperator.v0.9.4").await?;
    assert_eq!(installed.annotations().get(keys::TARGET_NAMESPACES_ANNOTATION), Some(&name));
    let og = groups.get("etcd-og").await?;
    assert_eq!(og.status.as_ref().and_then(|s| s.namespaces.clone()), Some(vec![name.clone()]));
    assert_eq!(
        og.annotations().get(keys::PROVIDED_APIS_ANNOTATION).map(String::as_str),
        Some("EtcdBackup.v1beta2.etcd.database.coreos.com,EtcdCluster.v1beta2.etcd.database.coreos.com,EtcdRestore.v1beta2.etcd.database.coreos.com")
    );

    // The OperatorCondition the operator reports through (OPERATOR_CONDITION_NAME).
    let conditions: Api<olm_api::v2::OperatorCondition> = ns.api();
    let condition = conditions.get("etcdoperator.v0.9.4").await?;
    assert_eq!(condition.spec.deployments, Some(vec!["etcd-operator".to_owned()]));
    assert_eq!(condition.spec.service_accounts, Some(vec!["etcd-operator".to_owned()]));
    assert_eq!(condition.owner_references()[0].name, "etcdoperator.v0.9.4");

    // Generated ClusterRoles: per-API roles owned by the CRD, and the group's aggregated roles.
    let cluster_roles: Api<ClusterRole> = Api::all(client.clone());
    let admin_role = ns
        .wait_for("the per-API admin ClusterRole", TIMEOUT, &[], || {
            let cluster_roles = cluster_roles.clone();
            async move { cluster_roles.get_opt("etcdclusters.etcd.database.coreos.com-v1beta2-admin").await.map_err(|e| e.to_string()) }
        })
        .await?;
    assert_eq!(admin_role.owner_references()[0].kind, "CustomResourceDefinition");
    assert_eq!(admin_role.labels().get("rbac.authorization.k8s.io/aggregate-to-admin").map(String::as_str), Some("true"));
    let og_roles = cluster_roles
        .list(&ListParams::default().labels(&format!("olm.owner=etcd-og,olm.owner.namespace={name},olm.owner.kind=OperatorGroup")))
        .await?
        .items;
    let mut role_names: Vec<String> = og_roles.iter().map(|r| r.name_any()).collect();
    role_names.sort();
    assert_eq!(role_names.len(), 3, "{role_names:?}");
    assert!(role_names[0].starts_with("olm.og.etcd-og.admin-"), "{role_names:?}");
    let selectors = og_roles
        .iter()
        .find(|r| r.name_any().starts_with("olm.og.etcd-og.view-"))
        .and_then(|r| r.aggregation_rule.clone())
        .and_then(|a| a.cluster_role_selectors)
        .unwrap_or_default();
    assert_eq!(selectors.len(), 3, "one selector per provided API: {selectors:?}");

    // Events for the transitions.
    let events: Api<Event> = ns.api();
    let reasons: Vec<String> = events
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("etcdoperator.v0.9.4"))
        .filter_map(|e| e.reason)
        .collect();
    for wanted in ["RequirementsUnknown", "RequirementsNotMet", "AllRequirementsMet", "InstallSucceeded"] {
        assert!(reasons.iter().any(|r| r == wanted), "no {wanted} event in {reasons:?}");
    }

    // Metrics and readiness.
    let series = format!(r#"csv_succeeded{{namespace="{name}",name="etcdoperator.v0.9.4",version="0.9.4"}} 1"#);
    ns.wait_for(&format!("/metrics to show {series}"), TIMEOUT, &[], || {
        let series = series.clone();
        async move {
            let metrics = admin_get(admin, "/metrics").await.map_err(|e| e.to_string())?;
            Ok::<_, String>(metrics.contains(&series).then_some(()))
        }
    })
    .await?;
    assert!(admin_get(admin, "/readyz").await?.starts_with("HTTP/1.1 200"));

    // A hand edit of the Deployment is reverted.
    let deployments: Api<Deployment> = ns.api();
    let edit = serde_json::json!({"spec": {"template": {"spec": {"containers": [
        {"name": "etcd-operator", "image": "example.com/not-etcd:latest"}]}}}});
    deployments
        .patch("etcd-operator", &PatchParams::apply("hand-edit").force(), &Patch::Apply(&serde_json::json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "etcd-operator"}, "spec": edit["spec"]
        })))
        .await?;
    deployment_where(&ns, "etcd-operator", "the hand-edited image to be reverted", |d| {
        if image(d) == original_image { Ok(()) } else { Err(format!("image is {}", image(d))) }
    })
    .await?;
    wait_phase(&ns, "etcdoperator.v0.9.4", "Succeeded", None, TIMEOUT).await?;

    // A deleted Deployment is put back.
    let uid_before = deployments.get("etcd-operator").await?.uid();
    deployments.delete("etcd-operator", &DeleteParams::default()).await?;
    deployment_where(&ns, "etcd-operator", "the deleted deployment to come back", |d| {
        if d.uid() != uid_before && d.metadata.deletion_timestamp.is_none() {
            available(d)
        } else {
            Err("still the old deployment".to_owned())
        }
    })
    .await?;
    wait_phase(&ns, "etcdoperator.v0.9.4", "Succeeded", None, TIMEOUT).await?;

    // A second OperatorGroup: TooManyOperatorGroups; removing it recovers.
    groups.create(&PostParams::default(), &operator_group("second-og", Some(vec![name.clone()]))).await?;
    wait_phase(&ns, "etcdoperator.v0.9.4", "Failed", Some("TooManyOperatorGroups"), TIMEOUT).await?;
    let (_, _, message) = phase_of(&csvs, "etcdoperator.v0.9.4").await.map_err(anyhow::Error::msg)?.unwrap_or_default();
    assert!(message.contains("multiple operatorgroups"), "{message}");
    groups.delete("second-og", &DeleteParams::default()).await?;
    wait_phase(&ns, "etcdoperator.v0.9.4", "Succeeded", None, TIMEOUT).await?;

    // Deleting the CSV removes its Deployment (ownerReference) but never the CRDs.
    csvs.delete("etcdoperator.v0.9.4", &DeleteParams::default()).await?;
    let what = "the operator Deployment to be garbage-collected";
    wait_gone(&ns, what, &deployments, "etcd-operator", &["deployments"]).await?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    assert!(crds.get_opt("etcdclusters.etcd.database.coreos.com").await?.is_some());

    ns.cleanup().await?;
    Ok(())
}

/// The clusterwide etcd CSV in an AllNamespaces group is copied into other namespaces
/// (Succeeded / Copied, label olm.copiedFrom); deleting it removes the copies.
#[tokio::test]
async fn clusterwide_csv_is_copied_into_target_namespaces() -> anyhow::Result<()> {
    let (cluster, _admin) = setup().await?;
    let _apis = controllers::ETCD_APIS.write().await;
    let client = cluster.client();
    let ns = cluster.namespace("csv-global").await?;
    let other = cluster.namespace("csv-copy-target").await?;
    let name = ns.name().to_owned();
    let groups: Api<OperatorGroup> = ns.api();
    groups.create(&PostParams::default(), &operator_group("global", None)).await?;
    let mut csv = load_csv(ETCD_CLUSTERWIDE, &name)?;
    // The clusterwide bundle only has clusterPermissions; add a namespaced permission so that
    // its Role (created as the InstallPlan would) must be lifted to a ClusterRole.
    if let Some(strategy) = std::sync::Arc::make_mut(&mut csv.spec.install).spec.as_mut() {
        strategy.permissions = Some(vec![StrategyDeploymentPermissions {
            service_account_name: "etcd-operator".into(),
            rules: vec![Verbatim::new(PolicyRule {
                verbs: vec!["get".into(), "list".into()],
                api_groups: Some(vec![String::new()]),
                resources: Some(vec!["configmaps".into()]),
                ..Default::default()
            })],
        }]);
    }
    grant_permissions(&client, &csv, &name, false).await?;
    create_csv(&ns, &csv).await?;
    let csv_name = csv.name_any();
    wait_phase(&ns, &csv_name, "Succeeded", Some("InstallSucceeded"), TIMEOUT).await?;

    let og = groups.get("global").await?;
    assert_eq!(og.status.and_then(|s| s.namespaces), Some(vec![String::new()]));
    let dep = deployment_where(&ns, "etcd-operator", "etcd-operator Available", available).await?;
    let template_annotations = dep
        .spec
        .and_then(|s| s.template.metadata)
        .and_then(|m| m.annotations)
        .unwrap_or_default();
    assert_eq!(template_annotations.get(keys::TARGET_NAMESPACES_ANNOTATION).map(String::as_str), Some(""));

    let cluster_roles: Api<ClusterRole> = Api::all(client.clone());
    let lifted_name = format!("{csv_name}-0");
    let lifted = ns
        .wait_for("the operator's Role lifted to a ClusterRole", TIMEOUT, &[], || {
            let cluster_roles = cluster_roles.clone();
            let lifted_name = lifted_name.clone();
            async move { cluster_roles.get_opt(&lifted_name).await.map_err(|e| e.to_string()) }
        })
        .await?;
    let rules = lifted.rules.unwrap_or_default();
    assert!(rules.iter().any(|r| r.resources == Some(vec!["namespaces".to_owned()])), "{rules:?}");
    // Written right after the role: waited for too.
    let bindings: Api<k8s_openapi::api::rbac::v1::ClusterRoleBinding> = Api::all(client.clone());
    ns.wait_for("the operator's RoleBinding lifted to a ClusterRoleBinding", TIMEOUT, &[], || {
        let bindings = bindings.clone();
        let lifted_name = lifted_name.clone();
        async move { bindings.get_opt(&lifted_name).await.map_err(|e| e.to_string()) }
    })
    .await?;

    let copies: Api<ClusterServiceVersion> = other.api();
    let copy = other
        .wait_for("the copied CSV", TIMEOUT, &["clusterserviceversions"], || {
            let copies = copies.clone();
            let csv_name = csv_name.clone();
            async move {
                let copy = copies.get_opt(&csv_name).await.map_err(|e| e.to_string())?;
                match copy.as_ref().and_then(|c| c.status.as_ref()) {
                    Some(status) if status.reason.as_ref().map(|r| r.as_str()) == Some("Copied") => Ok(copy),
                    Some(status) => Err(format!("copy status {:?}/{:?}", status.phase, status.reason)),
                    None => Err("no copy yet".to_owned()),
                }
            }
        })
        .await?;
    assert_eq!(copy.labels().get(keys::COPIED_FROM_LABEL), Some(&name));
    // The copy shows what the operator's own CSV shows (the controllers' cache keeps the
    // original without icon and description; copies are written from a fresh read).
    assert!(csv.spec.icon.is_some() && csv.spec.description.is_some(), "the clusterwide etcd CSV has both");
    assert_eq!(copy.spec.icon, csv.spec.icon);
    assert_eq!(copy.spec.description, csv.spec.description);
    assert_eq!(copy.spec.install, csv.spec.install);
    assert!(!copy.annotations().contains_key(keys::TARGET_NAMESPACES_ANNOTATION));
    let status = copy.status.clone().unwrap_or_default();
    assert_eq!(status.phase.map(|p| p.as_str().to_owned()).as_deref(), Some("Succeeded"));
    assert_eq!(
        status.message.as_deref(),
        Some(format!("The operator is running in {name} but is managing this namespace").as_str())
    );

    // OLMConfig can switch copies off (and back on) for all-namespaces operators.
    let configs: Api<OLMConfig> = Api::all(client.clone());
    let set_disabled = |disabled: bool| {
        let configs = configs.clone();
        async move {
            let config = serde_json::json!({
                "apiVersion": "operators.coreos.com/v1", "kind": "OLMConfig",
                "metadata": {"name": "cluster"},
                "spec": {"features": {"disableCopiedCSVs": disabled}}
            });
            configs.patch("cluster", &PatchParams::apply("olm-controllers-tests").force(), &Patch::Apply(&config)).await
        }
    };
    // The OLMConfig's DisabledCopiedCSVs condition reports how the copies stand.
    let condition_is = |status: &'static str, reason: &'static str, message: &'static str| {
        let configs = configs.clone();
        async move {
            let config = configs.get_opt("cluster").await.map_err(|e| e.to_string())?;
            let conditions = config.and_then(|c| c.status).and_then(|s| s.conditions).unwrap_or_default();
            match conditions.iter().find(|c| c.type_ == "DisabledCopiedCSVs") {
                Some(c) if c.status == status && c.reason == reason && c.message == message => Ok(Some(())),
                Some(c) => Err(format!("condition {}/{}: {}", c.status, c.reason, c.message)),
                None => Err("no DisabledCopiedCSVs condition".to_owned()),
            }
        }
    };
    set_disabled(false).await?;
    ns.wait_for("OLMConfig to report the copies present", TIMEOUT, &[], || {
        condition_is("False", "CopiedCSVsEnabled", "Copied CSVs are enabled and present across the cluster")
    })
    .await?;
    set_disabled(true).await?;
    ns.wait_for("OLMConfig to report copies disabled and none left", TIMEOUT, &[], || {
        condition_is(
            "True",
            "CopiedCSVsDisabled",
            "Copied CSVs are disabled and no unexpected copied CSVs were found for operators installed in AllNamespace mode",
        )
    })
    .await?;
    let what = "the copy to be removed while copies are disabled";
    let copy_gone = wait_gone(&other, what, &copies, &csv_name, &["clusterserviceversions"]).await;
    set_disabled(false).await?;
    copy_gone?;
    other
        .wait_for("the copy to come back once copies are enabled again", TIMEOUT, &["clusterserviceversions"], || {
            let copies = copies.clone();
            let csv_name = csv_name.clone();
            async move { copies.get_opt(&csv_name).await.map_err(|e| e.to_string()) }
        })
        .await?;

    let csvs: Api<ClusterServiceVersion> = ns.api();
    csvs.delete(&csv_name, &DeleteParams::default()).await?;
    let what = "the copy to be removed with its original";
    wait_gone(&other, what, &copies, &csv_name, &["clusterserviceversions"]).await?;
    let what = "the lifted ClusterRole to be removed with the CSV";
    wait_gone(&ns, what, &cluster_roles, &lifted_name, &[]).await?;
    ns.cleanup().await?;
    other.cleanup().await?;
    Ok(())
}

/// An own-namespace group in `ns` and etcd 0.9.2 installed there, Succeeded and Available.
async fn install_etcd_092(ns: &olm_testkit::TestNamespace, client: &kube::Client) -> anyhow::Result<()> {
    let name = ns.name().to_owned();
    let groups: Api<OperatorGroup> = ns.api();
    groups.create(&PostParams::default(), &operator_group("og", Some(vec![name.clone()]))).await?;
    let old = load_csv(ETCD_092, &name)?;
    grant_permissions(client, &old, &name, false).await?;
    create_csv(ns, &old).await?;
    wait_phase(ns, "etcdoperator.v0.9.2", "Succeeded", None, TIMEOUT).await?;
    deployment_where(ns, "etcd-operator", "0.9.2 Available", available).await?;
    Ok(())
}

/// 0.9.4 replaces an installed 0.9.2: the old CSV goes Replacing → Deleting → deleted, and the
/// Deployment (same name) now belongs to 0.9.4 and stays Available.
#[tokio::test]
async fn replacing_csv_upgrades_cleanly() -> anyhow::Result<()> {
    let (cluster, admin) = setup().await?;
    let _apis = controllers::ETCD_APIS.read().await;
    let client = cluster.client();
    let ns = cluster.namespace("csv-upgrade").await?;
    let name = ns.name().to_owned();
    install_etcd_092(&ns, &client).await?;

    let new = load_csv(ETCD, &name)?;
    grant_permissions(&client, &new, &name, false).await?;
    create_csv(&ns, &new).await?;
    wait_phase(&ns, "etcdoperator.v0.9.4", "Succeeded", None, TIMEOUT).await?;
    let csvs: Api<ClusterServiceVersion> = ns.api();
    ns.wait_for("0.9.2 to be deleted", TIMEOUT, &["clusterserviceversions"], || {
        let csvs = csvs.clone();
        async move {
            match phase_of(&csvs, "etcdoperator.v0.9.2").await? {
                None if csvs.get_opt("etcdoperator.v0.9.2").await.map_err(|e| e.to_string())?.is_none() => Ok(Some(())),
                other => Err(format!("0.9.2 still there: {other:?}")),
            }
        }
    })
    .await?;
    let dep = deployment_where(&ns, "etcd-operator", "the Deployment owned by 0.9.4 and Available", |d| {
        if d.labels().get(keys::OWNER_LABEL).map(String::as_str) == Some("etcdoperator.v0.9.4") {
            available(d)
        } else {
            Err(format!("owner label {:?}", d.labels().get(keys::OWNER_LABEL)))
        }
    })
    .await?;
    let owners: Vec<String> = dep.metadata.owner_references.unwrap_or_default().into_iter().map(|o| o.name).collect();
    assert_eq!(owners, vec!["etcdoperator.v0.9.4".to_owned()]);
    let metrics = admin_get(admin, "/metrics").await?;
    let upgrades: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("csv_upgrade_count "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0);
    assert!(upgrades >= 1.0, "csv_upgrade_count is {upgrades}");
    ns.cleanup().await?;
    Ok(())
}

/// An upgrade whose Deployment changes `spec.selector` (immutable) replaces the Deployment, as
/// upstream's install strategy does, instead of leaving the new CSV failing and retrying.
#[tokio::test]
async fn an_upgrade_that_changes_a_deployment_selector_replaces_the_deployment() -> anyhow::Result<()> {
    let (cluster, _admin) = setup().await?;
    let _apis = controllers::ETCD_APIS.read().await;
    let client = cluster.client();
    let ns = cluster.namespace("csv-selector").await?;
    let name = ns.name().to_owned();
    install_etcd_092(&ns, &client).await?;

    // 0.9.4 with the same Deployment name under another selector.
    let new = edit_csv(&load_csv(ETCD, &name)?, |csv| {
        let deployment = &mut csv["spec"]["install"]["spec"]["deployments"][0]["spec"];
        deployment["selector"] = serde_json::json!({"matchLabels": {"name": "etcd-operator-v2"}});
        deployment["template"]["metadata"]["labels"] = serde_json::json!({"name": "etcd-operator-v2"});
    })?;
    grant_permissions(&client, &new, &name, false).await?;
    create_csv(&ns, &new).await?;
    wait_phase(&ns, "etcdoperator.v0.9.4", "Succeeded", None, TIMEOUT).await?;
    let dep = deployment_where(&ns, "etcd-operator", "the Deployment with the new selector, Available", |d| {
        let selector = d.spec.as_ref().and_then(|s| s.selector.match_labels.clone()).unwrap_or_default();
        if selector.get("name").map(String::as_str) == Some("etcd-operator-v2") {
            available(d)
        } else {
            Err(format!("selector {selector:?}"))
        }
    })
    .await?;
    assert_eq!(dep.labels().get(keys::OWNER_LABEL).map(String::as_str), Some("etcdoperator.v0.9.4"));
    ns.cleanup().await?;
    Ok(())
}

/// An upgrade whose Deployment goes from RollingUpdate to Recreate (koku-metrics-operator's
/// 3.2.0 does) is applied: the rollingUpdate the API server defaulted is cleared first.
#[tokio::test]
async fn an_upgrade_from_rolling_update_to_recreate_applies() -> anyhow::Result<()> {
    let (cluster, _admin) = setup().await?;
    let _apis = controllers::ETCD_APIS.read().await;
    let client = cluster.client();
    let ns = cluster.namespace("csv-recreate").await?;
    let name = ns.name().to_owned();
    install_etcd_092(&ns, &client).await?;

    let new = edit_csv(&load_csv(ETCD, &name)?, |csv| {
        csv["spec"]["install"]["spec"]["deployments"][0]["spec"]["strategy"] = serde_json::json!({"type": "Recreate"});
    })?;
    grant_permissions(&client, &new, &name, false).await?;
    create_csv(&ns, &new).await?;
    wait_phase(&ns, "etcdoperator.v0.9.4", "Succeeded", None, TIMEOUT).await?;
    let dep = deployment_where(&ns, "etcd-operator", "the Deployment with strategy Recreate, Available", |d| {
        let strategy = d.spec.as_ref().and_then(|s| s.strategy.clone()).unwrap_or_default();
        if strategy.type_.as_deref() == Some("Recreate") && strategy.rolling_update.is_none() {
            available(d)
        } else {
            Err(format!("strategy {strategy:?}"))
        }
    })
    .await?;
    assert_eq!(dep.labels().get(keys::OWNER_LABEL).map(String::as_str), Some("etcdoperator.v0.9.4"));
    ns.cleanup().await?;
    Ok(())
}

/// A Deployment the API server refuses (no image) fails the CSV with a message naming it,
/// without hot-looping.
#[tokio::test]
async fn refused_deployment_fails_with_install_component_failed() -> anyhow::Result<()> {
    let (cluster, _admin) = setup().await?;
    let _apis = controllers::ETCD_APIS.read().await;
    let client = cluster.client();
    let ns = cluster.namespace("csv-broken").await?;
    let name = ns.name().to_owned();
    let groups: Api<OperatorGroup> = ns.api();
    groups.create(&PostParams::default(), &operator_group("og", Some(vec![name.clone()]))).await?;
    let mut csv = load_csv(ETCD, &name)?;
    csv.metadata.name = Some("broken.v1.0.0".into());
    csv.spec.replaces = None;
    if let Some(pod) = std::sync::Arc::make_mut(&mut csv.spec.install)
        .spec
        .as_mut()
        .and_then(|s| s.deployments.first_mut())
        .and_then(|d| d.spec.template.spec.as_mut())
    {
        pod.containers[0].image = None;
    }
    grant_permissions(&client, &csv, &name, false).await?;
    create_csv(&ns, &csv).await?;
    wait_phase(&ns, "broken.v1.0.0", "Failed", Some("InstallComponentFailed"), TIMEOUT).await?;
    let csvs: Api<ClusterServiceVersion> = ns.api();
    let (_, _, message) = phase_of(&csvs, "broken.v1.0.0").await.map_err(anyhow::Error::msg)?.unwrap_or_default();
    assert!(message.contains("Deployment") && message.contains("etcd-operator"), "{message}");
    // Bounded retries: the condition history does not explode within a few seconds.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let history = csvs.get("broken.v1.0.0").await?.status.and_then(|s| s.conditions).unwrap_or_default();
    assert!(history.len() <= 8, "too many transitions: {}", history.len());
    ns.cleanup().await?;
    Ok(())
}

/// A namespace label is what selector-based groups match; the group's status follows.
#[tokio::test]
async fn selector_group_targets_follow_namespace_labels() -> anyhow::Result<()> {
    let (cluster, _admin) = setup().await?;
    let client = cluster.client();
    let ns = cluster.namespace("og-selector").await?;
    let target = cluster.namespace("og-selected").await?;
    let label = format!("olm-test-{}", ns.name());
    let mut og = operator_group("by-label", None);
    og.spec.selector = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
        match_labels: Some(BTreeMap::from([(label.clone(), "yes".to_owned())])),
        ..Default::default()
    });
    let groups: Api<OperatorGroup> = ns.api();
    groups.create(&PostParams::default(), &og).await?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .patch(target.name(), &PatchParams::default(), &Patch::Merge(serde_json::json!({"metadata": {"labels": {label.clone(): "yes"}}})))
        .await?;
    let want = vec![target.name().to_owned()];
    ns.wait_for("status.namespaces to list the labelled namespace", TIMEOUT, &["operatorgroups"], || {
        let groups = groups.clone();
        let want = want.clone();
        async move {
            let og = groups.get("by-label").await.map_err(|e| e.to_string())?;
            let got = og.status.and_then(|s| s.namespaces);
            if got.as_ref() == Some(&want) { Ok(Some(())) } else { Err(format!("namespaces {got:?}")) }
        }
    })
    .await?;

    // The targeted namespace carries the group's uid label, and loses it when the group stops
    // targeting it or is deleted (what upstream's webhook namespaceSelectors and users select on).
    let uid = groups.get("by-label").await?.uid().unwrap_or_default();
    let uid_label = format!("olm.operatorgroup.uid/{uid}");
    let labelled = |want: bool, what: &'static str| {
        let namespaces = namespaces.clone();
        let uid_label = uid_label.clone();
        let name = target.name().to_owned();
        ns.wait_for(what, TIMEOUT, &["operatorgroups"], move || {
            let namespaces = namespaces.clone();
            let uid_label = uid_label.clone();
            let name = name.clone();
            async move {
                let got = namespaces.get(&name).await.map_err(|e| e.to_string())?.labels().contains_key(&uid_label);
                if got == want { Ok(Some(())) } else { Err(format!("{uid_label} on {name}: {got}")) }
            }
        })
    };
    labelled(true, "the group's uid label on the targeted namespace").await?;
    namespaces
        .patch(target.name(), &PatchParams::default(), &Patch::Merge(serde_json::json!({"metadata": {"labels": {label.clone(): null}}})))
        .await?;
    labelled(false, "the uid label removed from a namespace no longer selected").await?;
    namespaces
        .patch(target.name(), &PatchParams::default(), &Patch::Merge(serde_json::json!({"metadata": {"labels": {label.clone(): "yes"}}})))
        .await?;
    labelled(true, "the uid label back on the namespace selected again").await?;

    // Deleting the group deletes its aggregated ClusterRoles.
    let cluster_roles: Api<ClusterRole> = Api::all(client.clone());
    let selector = format!("olm.owner=by-label,olm.owner.namespace={},olm.owner.kind=OperatorGroup", ns.name());
    ns.wait_for("the group's ClusterRoles", TIMEOUT, &[], || {
        let cluster_roles = cluster_roles.clone();
        let selector = selector.clone();
        async move {
            let n = cluster_roles.list(&ListParams::default().labels(&selector)).await.map_err(|e| e.to_string())?.items.len();
            if n == 3 { Ok(Some(())) } else { Err(format!("{n} roles")) }
        }
    })
    .await?;
    groups.delete("by-label", &DeleteParams::default()).await?;
    ns.wait_for("the group's ClusterRoles to be deleted", TIMEOUT, &[], || {
        let cluster_roles = cluster_roles.clone();
        let selector = selector.clone();
        async move {
            let n = cluster_roles.list(&ListParams::default().labels(&selector)).await.map_err(|e| e.to_string())?.items.len();
            if n == 0 { Ok(Some(())) } else { Err(format!("{n} roles left")) }
        }
    })
    .await?;
    labelled(false, "the deleted group's uid label removed").await?;
    ns.cleanup().await?;
    target.cleanup().await?;
    Ok(())
}
