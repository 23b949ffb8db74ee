//! OperatorGroup `spec.serviceAccountName` on the local control plane: the etcd catalog served by
//! our catalog server, a Subscription, and an OperatorGroup naming a ServiceAccount. What OLM
//! installs (CRDs excepted) is written as that ServiceAccount, so the API server decides with
//! its permissions; refusals show on the InstallPlan and the Subscription and are retried.

use olm_e2e::controllers;

use std::time::Duration;

use anyhow::Context as _;
use kube::Api;
use olm_api::common::ConditionStatus;
use olm_api::v1alpha1::cluster_service_version::{ClusterServiceVersion, CsvPhase};
use olm_api::v1alpha1::install_plan::{InstallPlan, InstallPlanConditionReason, InstallPlanConditionType, InstallPlanPhase};
use olm_api::v1alpha1::subscription::{Subscription, SubscriptionConditionType};
use controllers::{grant_cluster_wide, create_from_yaml, etcd_catalog_server, service_account_with_role};
use olm_registry::RunningServer;
use olm_testkit::TestNamespace;

const TIMEOUT: Duration = Duration::from_secs(120);
const OBJECTS: &[&str] = &[
    "subscriptions",
    "installplans",
    "clusterserviceversions",
    "operatorgroups",
    "roles",
    "rolebindings",
    "serviceaccounts",
];
const CSV: &str = "etcdoperator.v0.9.4";

/// The catalog, an OperatorGroup installing as `installer`, and a Subscription to etcd.
async fn scoped_subscription(ns: &TestNamespace, server: &RunningServer, installer: &str) -> anyhow::Result<()> {
    let address = server.grpc_addrs.get("community").context("gRPC address")?;
    create_from_yaml(
        ns,
        &format!(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: community\nspec:\n  sourceType: grpc\n  address: \"{address}\"\n"
        ),
    )
    .await?;
    create_from_yaml(
        ns,
        &format!(
            "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata:\n  name: og\nspec:\n  serviceAccountName: {installer}\n  targetNamespaces: [{}]\n",
            ns.name()
        ),
    )
    .await?;
    create_from_yaml(
        ns,
        &format!(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata:\n  name: etcd\nspec:\n  source: community\n  sourceNamespace: {}\n  name: etcd\n  channel: singlenamespace-alpha\n",
            ns.name()
        ),
    )
    .await
}

/// What installing etcd 0.9.4 into one namespace takes, without the RoleBinding rule: the CSV,
/// the operator's ServiceAccount, its Role (with `escalate`/`bind` instead of holding the
/// operator's own permissions) and the operator Deployment.
const RULES_WITHOUT_ROLEBINDINGS: &str = "\
- apiGroups: [operators.coreos.com]
  resources: [clusterserviceversions]
  verbs: [get, create, patch]
- apiGroups: [\"\"]
  resources: [serviceaccounts]
  verbs: [get, create, patch]
- apiGroups: [rbac.authorization.k8s.io]
  resources: [roles]
  verbs: [get, create, patch, escalate, bind]
- apiGroups: [apps]
  resources: [deployments]
  verbs: [get, create, patch, update, delete]
";
const ROLEBINDING_RULES: &str = "\
- apiGroups: [rbac.authorization.k8s.io]
  resources: [rolebindings]
  verbs: [get, create, patch]
";

async fn the_plan(ns: &TestNamespace) -> anyhow::Result<InstallPlan> {
    let api: Api<InstallPlan> = ns.api();
    ns.wait_for("the InstallPlan", TIMEOUT, OBJECTS, || {
        let api = api.clone();
        async move { Ok::<_, String>(api.list(&Default::default()).await.map_err(|e| e.to_string())?.items.into_iter().next()) }
    })
    .await
    .map_err(Into::into)
}

async fn wait_plan<F>(ns: &TestNamespace, what: &str, check: F) -> anyhow::Result<InstallPlan>
where
    F: Fn(&InstallPlan) -> bool + Clone,
{
    let name = kube::ResourceExt::name_any(&the_plan(ns).await?);
    let api: Api<InstallPlan> = ns.api();
    Ok(ns
        .wait_for(&format!("InstallPlan {name}: {what}"), TIMEOUT, OBJECTS, || {
            let (api, name, check) = (api.clone(), name.clone(), check.clone());
            async move {
                let plan = api.get(&name).await.map_err(|e| e.to_string())?;
                Ok::<_, String>(check(&plan).then_some(plan))
            }
        })
        .await?)
}

fn installed_condition(plan: &InstallPlan) -> Option<(ConditionStatus, Option<InstallPlanConditionReason>, String)> {
    plan.status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == Some(InstallPlanConditionType::Installed))
        .map(|c| (c.status.clone().unwrap_or(ConditionStatus::Unknown), c.reason.clone(), c.message.clone().unwrap_or_default()))
}

fn phase(plan: &InstallPlan) -> Option<&InstallPlanPhase> {
    plan.status.as_ref().map(|s| &s.phase)
}

/// The Subscription's `InstallPlanPending` (status, reason, message) once it mentions `needle`.
async fn subscription_pending_with(ns: &TestNamespace, needle: &str) -> anyhow::Result<(String, String)> {
    let api: Api<Subscription> = ns.api();
    let needle = needle.to_owned();
    Ok(ns
        .wait_for(&format!("Subscription etcd: InstallPlanPending mentioning {needle:?}"), TIMEOUT, OBJECTS, || {
            let (api, needle) = (api.clone(), needle.clone());
            async move {
                let sub = api.get("etcd").await.map_err(|e| e.to_string())?;
                let condition = sub
                    .status
                    .as_ref()
                    .and_then(|s| s.condition(&SubscriptionConditionType::InstallPlanPending))
                    .filter(|c| c.status == ConditionStatus::True)
                    .cloned();
                Ok::<_, String>(condition.and_then(|c| {
                    let message = c.message.unwrap_or_default();
                    message.contains(&needle).then(|| (c.reason.unwrap_or_default(), message))
                }))
            }
        })
        .await?)
}

/// The etcd CSV the scoped Subscription installs is Succeeded.
async fn wait_csv_succeeded(ns: &TestNamespace) -> anyhow::Result<()> {
    controllers::wait_csv_succeeded(ns, CSV, TIMEOUT, OBJECTS).await
}

#[tokio::test]
async fn a_service_account_with_enough_permissions_installs_the_operator() -> anyhow::Result<()> {
    let (cluster, _) = controllers::setup().await?;
    let _apis = controllers::ETCD_APIS.read().await;
    let server = etcd_catalog_server(false).await?;
    let ns = cluster.namespace("scoped-ok").await?;
    service_account_with_role(&ns, "installer", "installer", &format!("{RULES_WITHOUT_ROLEBINDINGS}{ROLEBINDING_RULES}")).await?;
    scoped_subscription(&ns, &server, "installer").await?;

    let plan = wait_plan(&ns, "Complete", |p| phase(p) == Some(&InstallPlanPhase::Complete)).await?;
    let status = plan.status.clone().context("plan status")?;
    let attenuated = status.attenuated_service_account_ref.context("status.attenuatedServiceAccountRef")?;
    assert_eq!(attenuated.name.as_deref(), Some("installer"));
    assert_eq!(attenuated.namespace.as_deref(), Some(ns.name()));
    wait_csv_succeeded(&ns).await?;
    ns.cleanup().await?;
    server.shutdown();
    Ok(())
}

#[tokio::test]
async fn a_missing_permission_is_reported_and_granting_it_completes_the_install() -> anyhow::Result<()> {
    let (cluster, _) = controllers::setup().await?;
    let _apis = controllers::ETCD_APIS.read().await;
    let server = etcd_catalog_server(false).await?;
    let ns = cluster.namespace("scoped-deny").await?;
    service_account_with_role(&ns, "installer", "installer", RULES_WITHOUT_ROLEBINDINGS).await?;
    scoped_subscription(&ns, &server, "installer").await?;

    // The RoleBinding step is refused: the plan keeps Installing and says who may not do what.
    let plan = wait_plan(&ns, "Installed=False naming the missing permission", |p| {
        installed_condition(p).is_some_and(|(status, _, message)| status == ConditionStatus::False && message.contains("rolebindings"))
    })
    .await?;
    assert_eq!(phase(&plan), Some(&InstallPlanPhase::Installing), "a refusal is not terminal");
    let (_, reason, message) = installed_condition(&plan).context("Installed condition")?;
    assert_eq!(reason, Some(InstallPlanConditionReason::InstallComponentFailed));
    for part in [
        format!("ServiceAccount {}/installer", ns.name()),
        "may not create rolebindings".to_owned(),
        format!("in namespace {}", ns.name()),
        "Grant it get,create,patch on rolebindings.rbac.authorization.k8s.io".to_owned(),
    ] {
        assert!(message.contains(&part), "{part:?} missing from: {message}");
    }
    // Nothing is half-installed silently: the steps say what was applied and what was not.
    let steps = plan.status.as_ref().and_then(|s| s.plan.clone()).unwrap_or_default();
    let status_of = |kind: &str| {
        steps
            .iter()
            .find(|s| s.resource.kind == kind)
            .map(|s| s.status.as_str().to_owned())
            .unwrap_or_default()
    };
    let applied = ["Created", "Present"];
    assert!(applied.contains(&status_of("ClusterServiceVersion").as_str()), "{steps:?}");
    assert!(applied.contains(&status_of("Role").as_str()), "{steps:?}");
    assert_eq!(status_of("RoleBinding"), "Unknown", "the refused step is not shown as applied");
    // `kubectl describe installplan` shows it too.
    ns.wait_for("a Warning Event InstallComponentFailed", TIMEOUT, OBJECTS, || {
        let ns = &ns;
        async move {
            let out = ns
                .kubectl(&["get", "events", "--field-selector", "reason=InstallComponentFailed,type=Warning", "-o", "jsonpath={.items[*].message}"])
                .await
                .map_err(|e| e.to_string())?;
            Ok::<_, String>(out.stdout.contains("rolebindings").then_some(()))
        }
    })
    .await?;
    let (reason, sub_message) = subscription_pending_with(&ns, "rolebindings").await?;
    assert_eq!(reason, "Installing");
    assert!(sub_message.contains(&format!("ServiceAccount {}/installer", ns.name())), "{sub_message}");

    // Granting the permission completes the same plan, with nobody deleting anything.
    service_account_with_role(&ns, "installer", "installer-bindings", ROLEBINDING_RULES).await?;
    let done = wait_plan(&ns, "Complete", |p| phase(p) == Some(&InstallPlanPhase::Complete)).await?;
    assert_eq!(done.metadata.uid, plan.metadata.uid, "the same plan");
    wait_csv_succeeded(&ns).await?;
    ns.cleanup().await?;
    server.shutdown();
    Ok(())
}

#[tokio::test]
async fn a_group_naming_a_missing_service_account_waits_for_it() -> anyhow::Result<()> {
    let (cluster, _) = controllers::setup().await?;
    let _apis = controllers::ETCD_APIS.read().await;
    let server = etcd_catalog_server(false).await?;
    let ns = cluster.namespace("scoped-ghost").await?;
    scoped_subscription(&ns, &server, "ghost").await?;

    let plan = wait_plan(&ns, "InstallCheckFailed", |p| {
        installed_condition(p).is_some_and(|(_, reason, _)| reason == Some(InstallPlanConditionReason::InstallCheckFailed))
    })
    .await?;
    assert_eq!(phase(&plan), Some(&InstallPlanPhase::Installing));
    let (status, _, words) = installed_condition(&plan).context("Installed condition")?;
    assert_eq!(status, ConditionStatus::False);
    // The condition says it in upstream's words (clients compare them), status.message explains.
    assert_eq!(words, format!("please make sure the service account exists. sa=ghost operatorgroup={}/og", ns.name()));
    let message = plan.status.as_ref().and_then(|s| s.message.clone()).unwrap_or_default();
    assert!(
        message.contains("\"ghost\"") && message.contains("does not exist") && message.contains(&format!("OperatorGroup {}/og", ns.name())),
        "{message}"
    );
    let (reason, sub_message) = subscription_pending_with(&ns, "ghost").await?;
    assert_eq!(reason, "Installing");
    assert!(sub_message.contains("does not exist"), "{sub_message}");
    // Nothing was installed as OLM meanwhile.
    let csvs: Api<ClusterServiceVersion> = ns.api();
    assert!(csvs.get_opt(CSV).await?.is_none(), "no CSV while nobody may install it");

    // The ServiceAccount appears with what the install needs: the plan goes on by itself.
    service_account_with_role(&ns, "ghost", "ghost", &format!("{RULES_WITHOUT_ROLEBINDINGS}{ROLEBINDING_RULES}")).await?;
    wait_plan(&ns, "Complete", |p| phase(p) == Some(&InstallPlanPhase::Complete)).await?;
    wait_csv_succeeded(&ns).await?;
    ns.cleanup().await?;
    server.shutdown();
    Ok(())
}

#[tokio::test]
async fn the_operator_deployment_is_written_as_the_service_account_too() -> anyhow::Result<()> {
    let (cluster, _) = controllers::setup().await?;
    let _apis = controllers::ETCD_APIS.read().await;
    let server = etcd_catalog_server(false).await?;
    let ns = cluster.namespace("scoped-deploy").await?;
    // Everything the plan needs, but nothing on Deployments.
    let plan_rules = RULES_WITHOUT_ROLEBINDINGS.replace(
        "- apiGroups: [apps]\n  resources: [deployments]\n  verbs: [get, create, patch, update, delete]\n",
        "",
    );
    assert_ne!(plan_rules, RULES_WITHOUT_ROLEBINDINGS);
    service_account_with_role(&ns, "installer", "installer", &format!("{plan_rules}{ROLEBINDING_RULES}")).await?;
    scoped_subscription(&ns, &server, "installer").await?;
    wait_plan(&ns, "Complete", |p| phase(p) == Some(&InstallPlanPhase::Complete)).await?;

    // The CSV controller applies the Deployment as the ServiceAccount: refused, and said so.
    let api: Api<ClusterServiceVersion> = ns.api();
    let user = format!("system:serviceaccount:{}:installer", ns.name());
    let message = ns
        .wait_for("CSV Failed naming the ServiceAccount", TIMEOUT, OBJECTS, || {
            let (api, user) = (api.clone(), user.clone());
            async move {
                let csv = api.get_opt(CSV).await.map_err(|e| e.to_string())?;
                let status = csv.and_then(|c| c.status);
                Ok::<_, String>(status.and_then(|s| {
                    let message = s.message.unwrap_or_default();
                    (s.phase == Some(CsvPhase::Failed) && message.contains(&user) && message.contains("deployments")).then_some(message)
                }))
            }
        })
        .await?;
    assert!(message.contains("Deployment") && message.contains("forbidden"), "{message}");
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> = ns.api();
    assert!(deployments.get_opt("etcd-operator").await?.is_none(), "not created with OLM's permissions");

    // Granted: the CSV controller's retry installs it.
    service_account_with_role(
        &ns,
        "installer",
        "installer-deployments",
        "- apiGroups: [apps]\n  resources: [deployments]\n  verbs: [get, create, patch, update, delete]\n",
    )
    .await?;
    wait_csv_succeeded(&ns).await?;
    ns.cleanup().await?;
    server.shutdown();
    Ok(())
}

#[tokio::test]
async fn without_an_operator_group_nothing_is_installed_until_one_exists() -> anyhow::Result<()> {
    let (cluster, _) = controllers::setup().await?;
    let _apis = controllers::ETCD_APIS.read().await;
    let server = etcd_catalog_server(false).await?;
    let ns = cluster.namespace("scoped-noog").await?;
    let address = server.grpc_addrs.get("community").context("gRPC address")?;
    create_from_yaml(
        &ns,
        &format!(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: community\nspec:\n  sourceType: grpc\n  address: \"{address}\"\n---\napiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata:\n  name: etcd\nspec:\n  source: community\n  sourceNamespace: {}\n  name: etcd\n  channel: singlenamespace-alpha\n",
            ns.name()
        ),
    )
    .await?;
    // Without a group OLM cannot know with whose permissions to install: it waits, and says so.
    let plan = wait_plan(&ns, "InstallCheckFailed", |p| {
        installed_condition(p).is_some_and(|(_, reason, _)| reason == Some(InstallPlanConditionReason::InstallCheckFailed))
    })
    .await?;
    let (_, _, words) = installed_condition(&plan).context("Installed condition")?;
    assert_eq!(words, "no operator group found that is managing this namespace");
    let message = plan.status.as_ref().and_then(|s| s.message.clone()).unwrap_or_default();
    assert!(message.contains(&format!("no OperatorGroup in namespace {}", ns.name())), "{message}");
    subscription_pending_with(&ns, "no OperatorGroup").await?;
    let csvs: Api<ClusterServiceVersion> = ns.api();
    assert!(csvs.get_opt(CSV).await?.is_none());

    create_from_yaml(
        &ns,
        &format!(
            "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata:\n  name: og\nspec:\n  targetNamespaces: [{}]\n",
            ns.name()
        ),
    )
    .await?;
    let done = wait_plan(&ns, "Complete", |p| phase(p) == Some(&InstallPlanPhase::Complete)).await?;
    assert!(
        done.status.as_ref().is_some_and(|s| s.attenuated_service_account_ref.is_none()),
        "no ServiceAccount named: OLM installs with its own permissions"
    );
    wait_csv_succeeded(&ns).await?;
    ns.cleanup().await?;
    server.shutdown();
    Ok(())
}

#[tokio::test]
async fn a_role_granting_more_than_the_service_account_holds_is_refused_as_escalation() -> anyhow::Result<()> {
    let (cluster, _) = controllers::setup().await?;
    let _apis = controllers::ETCD_APIS.read().await;
    let server = etcd_catalog_server(false).await?;
    let ns = cluster.namespace("scoped-escalate").await?;
    // May write roles, but neither holds the operator's permissions nor may escalate or bind.
    let rules = RULES_WITHOUT_ROLEBINDINGS.replace("verbs: [get, create, patch, escalate, bind]", "verbs: [get, create, patch]");
    assert_ne!(rules, RULES_WITHOUT_ROLEBINDINGS);
    service_account_with_role(&ns, "installer", "installer", &format!("{rules}{ROLEBINDING_RULES}")).await?;
    scoped_subscription(&ns, &server, "installer").await?;

    let plan = wait_plan(&ns, "Installed=False for the Role", |p| {
        installed_condition(p).is_some_and(|(status, _, message)| status == ConditionStatus::False && message.contains("Role "))
    })
    .await?;
    let (_, _, message) = installed_condition(&plan).context("Installed condition")?;
    assert!(
        message.contains("does not hold itself") && message.contains("escalate verb on roles") && message.contains(&format!("in namespace {}", ns.name())),
        "{message}"
    );
    assert_eq!(phase(&plan), Some(&InstallPlanPhase::Installing));

    service_account_with_role(
        &ns,
        "installer",
        "installer-escalate",
        "- apiGroups: [rbac.authorization.k8s.io]\n  resources: [roles]\n  verbs: [escalate, bind]\n",
    )
    .await?;
    wait_plan(&ns, "Complete", |p| phase(p) == Some(&InstallPlanPhase::Complete)).await?;
    wait_csv_succeeded(&ns).await?;
    ns.cleanup().await?;
    server.shutdown();
    Ok(())
}

#[tokio::test]
async fn cluster_permissions_need_cluster_grants_for_the_service_account() -> anyhow::Result<()> {
    let (cluster, _) = controllers::setup().await?;
    // An all-namespaces group provides the etcd APIs everywhere.
    let _apis = controllers::ETCD_APIS.write().await;
    let server = etcd_catalog_server(false).await?;
    let ns = cluster.namespace("scoped-cluster").await?;
    service_account_with_role(&ns, "installer", "installer", &format!("{RULES_WITHOUT_ROLEBINDINGS}{ROLEBINDING_RULES}")).await?;
    let roles = grant_cluster_wide(
        &ns,
        "installer",
        "roles",
        "- apiGroups: [rbac.authorization.k8s.io]\n  resources: [clusterroles]\n  verbs: [get, create, patch, escalate, bind]\n",
    )
    .await?;
    let address = server.grpc_addrs.get("community").context("gRPC address")?;
    create_from_yaml(
        &ns,
        &format!(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: community\nspec:\n  sourceType: grpc\n  address: \"{address}\"\n---\napiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata:\n  name: og\nspec:\n  serviceAccountName: installer\n---\napiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata:\n  name: etcd\nspec:\n  source: community\n  sourceNamespace: {}\n  name: etcd\n  channel: clusterwide-alpha\n",
            ns.name()
        ),
    )
    .await?;

    let plan = wait_plan(&ns, "Installed=False for the ClusterRoleBinding", |p| {
        installed_condition(p).is_some_and(|(status, _, message)| status == ConditionStatus::False && message.contains("clusterrolebindings"))
    })
    .await?;
    let (_, _, message) = installed_condition(&plan).context("Installed condition")?;
    for part in [
        "may not create clusterrolebindings (API group rbac.authorization.k8s.io) at cluster scope",
        "kubectl create clusterrole",
        &format!("--serviceaccount={}:installer", ns.name()),
    ] {
        assert!(message.contains(part), "{part:?} missing from: {message}");
    }
    let bindings = grant_cluster_wide(
        &ns,
        "installer",
        "bindings",
        "- apiGroups: [rbac.authorization.k8s.io]\n  resources: [clusterrolebindings]\n  verbs: [get, create, patch]\n",
    )
    .await?;
    wait_plan(&ns, "Complete", |p| phase(p) == Some(&InstallPlanPhase::Complete)).await?;
    controllers::wait_csv_succeeded(&ns, "etcdoperator.v0.9.4-clusterwide", TIMEOUT, OBJECTS).await?;
    ns.kubectl(&["delete", "subscription", "etcd"]).await?;
    ns.kubectl(&["delete", "clusterserviceversion", "etcdoperator.v0.9.4-clusterwide"]).await?;
    for name in [roles, bindings] {
        cluster.kubectl(&["delete", "clusterrole,clusterrolebinding", &name]).await?;
    }
    ns.cleanup().await?;
    server.shutdown();
    Ok(())
}
