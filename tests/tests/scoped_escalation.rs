//! A CSV installed for an OperatorGroup that names a ServiceAccount gains nothing that
//! ServiceAccount does not hold, through any path of the CSV controller: its webhook
//! configurations, the RBAC of its serving certificates and the ClusterRoles its Roles become in
//! an all-namespaces group are written as the ServiceAccount, so the API server refuses what it
//! may not grant. The CSV says so (naming the object, the ServiceAccount and its group), nothing
//! is created with OLM's own permissions meanwhile, and granting the permission completes the
//! install. (The InstallPlan's steps: scoped_install.rs.)

use olm_e2e::controllers;

use std::time::Duration;

use controllers::{grant_cluster_wide, create_csv_with_permissions, create_from_yaml, edit_csv, load_csv, service_account_with_role, setup};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::ListParams;
use kube::Api;
use olm_api::keys;
use olm_api::v1alpha1::cluster_service_version::{ClusterServiceVersion, CsvPhase};
use olm_testkit::TestNamespace;
use serde_json::json;

const ETCD: &str = "etcd-0.9.4/etcdoperator.v0.9.4.clusterserviceversion.yaml";
const CSV_NAME: &str = "etcdoperator.v0.9.4";
const TIMEOUT: Duration = Duration::from_secs(90);
const OBJECTS: &[&str] = &["clusterserviceversions", "operatorgroups", "roles", "rolebindings", "deployments"];

/// What the CSV controller writes in the namespace for etcd as the ServiceAccount: the
/// Deployment, and the serving certificate's Role and RoleBinding (held via escalate/bind).
const NAMESPACE_RULES: &str = "\
- apiGroups: [apps]
  resources: [deployments]
  verbs: [get, create, patch, update, delete]
- apiGroups: [rbac.authorization.k8s.io]
  resources: [roles, rolebindings]
  verbs: [get, create, patch, escalate, bind]
";

/// The serving certificate's cluster-wide RBAC: binding system:auth-delegator, and the
/// authentication reader Role in kube-system.
const CERT_CLUSTER_RULES: &str = "\
- apiGroups: [rbac.authorization.k8s.io]
  resources: [clusterrolebindings, rolebindings]
  verbs: [get, create, patch]
- apiGroups: [rbac.authorization.k8s.io]
  resources: [clusterroles, roles]
  verbs: [bind]
";

/// An OperatorGroup installing as `installer`, targeting `targets` (all namespaces when empty).
async fn scoped_group(ns: &TestNamespace, targets: &[&str]) -> anyhow::Result<()> {
    let targets = if targets.is_empty() {
        String::new()
    } else {
        format!("  targetNamespaces: [{}]\n", targets.join(", "))
    };
    create_from_yaml(
        ns,
        &format!("apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata:\n  name: og\nspec:\n  serviceAccountName: installer\n{targets}"),
    )
    .await
}

/// Wait until the CSV is Failed with a message holding every part of `parts`; returns it.
async fn failed_with(ns: &TestNamespace, parts: &[String]) -> anyhow::Result<String> {
    let api: Api<ClusterServiceVersion> = ns.api();
    let message = ns.wait_for("CSV Failed naming the refused write", TIMEOUT, OBJECTS, || {
        let api = api.clone();
        async move {
            let status = api.get_opt(CSV_NAME).await.map_err(|e| e.to_string())?.and_then(|c| c.status);
            let Some(status) = status else { return Ok(None) };
            let message = status.message.unwrap_or_default();
            let all = parts.iter().all(|part| message.contains(part.as_str()));
            if status.phase == Some(CsvPhase::Failed) && all {
                Ok(Some(message))
            } else {
                Err(format!("{:?}: {message}", status.phase))
            }
        }
    })
    .await?;
    Ok(message)
}

/// Remove the CSV, the grant made before it, the grant `result` made (when it got that far) and
/// the namespace; then the test's result.
async fn clean_up(ns: TestNamespace, earlier_grant: &str, result: anyhow::Result<String>) -> anyhow::Result<()> {
    ns.kubectl(&["delete", "clusterserviceversion", CSV_NAME, "--wait=true"]).await?;
    ns.cluster().kubectl(&["delete", "clusterrole,clusterrolebinding", earlier_grant]).await?;
    let grant = result?;
    ns.cluster().kubectl(&["delete", "clusterrole,clusterrolebinding", &grant]).await?;
    ns.cleanup().await?;
    Ok(())
}

fn owner_selector(namespace: &str) -> String {
    format!("{}={CSV_NAME},{}={namespace}", keys::OWNER_LABEL, keys::OWNER_NAMESPACE_LABEL)
}

#[tokio::test]
async fn a_webhook_is_configured_only_when_the_service_account_may_configure_it() -> anyhow::Result<()> {
    let (cluster, _) = setup().await?;
    let _apis = controllers::ETCD_APIS.read().await;
    let ns = cluster.namespace("scoped-webhook").await?;
    let name = ns.name().to_owned();
    service_account_with_role(&ns, "installer", "installer", NAMESPACE_RULES).await?;
    let cert_rbac = grant_cluster_wide(&ns, "installer", "cert-rbac", CERT_CLUSTER_RULES).await?;
    scoped_group(&ns, &[&name]).await?;
    // A webhook on an API nobody uses, failing open: harmless to the shared control plane.
    let csv = edit_csv(&load_csv(ETCD, &name)?, |value| {
        value["spec"]["webhookdefinitions"] = json!([{
            "generateName": format!("vetcd.{name}.example.com"), "type": "ValidatingAdmissionWebhook",
            "deploymentName": "etcd-operator", "containerPort": 9443, "webhookPath": "/validate", "sideEffects": "None",
            "admissionReviewVersions": ["v1"], "failurePolicy": "Ignore",
            "rules": [{"apiGroups": ["nothing.example.com"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["nothings"]}],
        }]);
    })?;
    create_csv_with_permissions(&ns, &csv, false).await?;

    let webhooks: Api<ValidatingWebhookConfiguration> = Api::all(cluster.client());
    let selector = ListParams::default().labels(&owner_selector(&name));
    let result = async {
        let message = failed_with(
            &ns,
            &[
                "apply ValidatingWebhookConfiguration".into(),
                format!("as ServiceAccount {name}/installer (spec.serviceAccountName of OperatorGroup {name}/og)"),
                format!("system:serviceaccount:{name}:installer"),
                "validatingwebhookconfigurations".into(),
                "forbidden".into(),
            ],
        )
        .await?;
        assert!(!message.contains("Error {"), "no debug output: {message}");
        assert!(webhooks.list(&selector).await?.items.is_empty(), "not configured with OLM's permissions");

        let grant = grant_cluster_wide(
            &ns,
            "installer",
            "webhooks",
            "- apiGroups: [admissionregistration.k8s.io]\n  resources: [validatingwebhookconfigurations]\n  verbs: [get, create, patch]\n",
        )
        .await?;
        controllers::wait_phase(&ns, CSV_NAME, "Succeeded", None, TIMEOUT).await?;
        anyhow::ensure!(webhooks.list(&selector).await?.items.len() == 1, "configured once granted");
        Ok::<_, anyhow::Error>(grant)
    }
    .await;
    clean_up(ns, &cert_rbac, result).await
}

#[tokio::test]
async fn an_all_namespaces_install_lifts_roles_to_cluster_roles_only_as_far_as_the_service_account_may() -> anyhow::Result<()> {
    let (cluster, _) = setup().await?;
    // An all-namespaces group provides the etcd APIs everywhere.
    let _apis = controllers::ETCD_APIS.write().await;
    let ns = cluster.namespace("scoped-lift").await?;
    let name = ns.name().to_owned();
    service_account_with_role(&ns, "installer", "installer", NAMESPACE_RULES).await?;
    // May write ClusterRoles and their bindings, but holds nothing cluster-wide to put in them.
    let cluster_rbac = grant_cluster_wide(
        &ns,
        "installer",
        "cluster-rbac",
        "- apiGroups: [rbac.authorization.k8s.io]\n  resources: [clusterroles, clusterrolebindings]\n  verbs: [get, create, patch]\n",
    )
    .await?;
    scoped_group(&ns, &[]).await?;
    let csv = edit_csv(&load_csv(ETCD, &name)?, |value| {
        value["spec"]["installModes"] = json!([{"type": "AllNamespaces", "supported": true}]);
    })?;
    create_csv_with_permissions(&ns, &csv, false).await?;
    // The operator's Role, owned by the CSV as the InstallPlan leaves it.
    let role = format!("{CSV_NAME}-0");
    let cluster_roles: Api<ClusterRole> = Api::all(cluster.client());
    let result = async {
        failed_with(
            &ns,
            &[
                format!("apply ClusterRole {role} as ServiceAccount {name}/installer"),
                "attempting to grant RBAC permissions not currently held".into(),
            ],
        )
        .await?;
        assert!(cluster_roles.get_opt(&role).await?.is_none(), "not lifted with OLM's permissions");

        let grant = grant_cluster_wide(
            &ns,
            "installer",
            "escalate",
            "- apiGroups: [rbac.authorization.k8s.io]\n  resources: [clusterroles]\n  verbs: [escalate, bind]\n",
        )
        .await?;
        let lifted = ns
            .wait_for("the Role lifted to a ClusterRole", TIMEOUT, OBJECTS, || {
                let cluster_roles = cluster_roles.clone();
                let role = role.clone();
                async move { Ok::<_, String>(cluster_roles.get_opt(&role).await.map_err(|e| e.to_string())?) }
            })
            .await?;
        let rules = serde_json::to_string(&lifted.rules)?;
        assert!(rules.contains("etcdclusters") && rules.contains("namespaces"), "{rules}");
        controllers::wait_phase(&ns, CSV_NAME, "Succeeded", None, TIMEOUT).await?;
        Ok::<_, anyhow::Error>(grant)
    }
    .await;
    clean_up(ns, &cluster_rbac, result).await
}
