//! OLM's controllers need no more than manifests/01-rbac-controllers.yaml grants, and it grants
//! nothing they never use (issue #20). The controllers run here as the ServiceAccount the
//! manifests create (`olm/olm-operator`, through a token), over a workload that touches every
//! path a cluster admin takes: a Subscription upgraded along a channel with its InstallPlans, an
//! install as an OperatorGroup's ServiceAccount (impersonation), a CSV with a webhook (serving
//! certificate, its RBAC, the configuration), removal of both. The API server's audit log
//! (olm-dev logs what OLM's ServiceAccounts ask, `olm_dev::cluster::AUDIT_POLICY`) then says what
//! was used: every rule of the ClusterRole must have been used, or be listed in `NOT_EXERCISED`
//! with why the workload cannot use it. The table of what was used is printed.

use olm_e2e::controllers;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::Context as _;
use controllers::{create_csv_with_permissions, create_from_yaml, edit_csv, load_csv, service_account_with_role, wait_phase};
use olm_e2e::faults::ScopedManager;
use olm_testkit::TestNamespace;
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(120);
const OLM_USER: &str = "system:serviceaccount:olm:olm-operator";

/// Grants of the ClusterRole this workload does not use, and the path that does (API group,
/// resources, verbs, why; `*` as the manifest writes it).
const NOT_EXERCISED: &[(&str, &[&str], &[&str], &str)] = &[
    ("", &["configmaps"], &["get", "create", "patch", "delete"], "ConfigMap catalogs, the plan content of bundles too large for an InstallPlan (large_bundles.rs), bundle objects; a ClusterExtension's record kept in one by olm-rs before session 51, read and deleted"),
    ("", &["pods"], &["list", "create", "delete"], "registry pods of ConfigMap catalogs, made only with `olm run --configmap-server-image` (upstream's e2e suite runs with it: olm-bench --upstream-e2e)"),
    ("", &["serviceaccounts", "secrets"], &["delete"], "a ClusterExtension upgrade whose new bundle drops one (the Service of the workload's upgrade takes the same path)"),
    ("rbac.authorization.k8s.io", &["roles", "rolebindings"], &["delete"], "a ClusterExtension upgrade whose new bundle drops a namespaced permission (OwnNamespace installs: cluster_extensions.rs)"),
    ("rbac.authorization.k8s.io", &["rolebindings"], &["get"], "a ClusterExtension that watches one namespace: its Role and binding checked before they are applied (cluster_extensions.rs)"),
    ("*", &["*"], &["update"], "a CRD upgrade that drops a stored version: its objects are rewritten to the new one first (upgrade_edges.rs)"),
    ("admissionregistration.k8s.io", &["validatingwebhookconfigurations", "mutatingwebhookconfigurations"], &["delete"], "a webhook description removed from a CSV"),
    ("admissionregistration.k8s.io", &["validatingwebhookconfigurations", "mutatingwebhookconfigurations"], &["get"], "a ClusterExtension whose bundle has an admission webhook: the configuration is checked before it is applied (cluster_extensions.rs)"),
    ("apiregistration.k8s.io", &["apiservices"], &["create", "patch", "deletecollection"], "a CSV owning an APIService: kwok pods never serve it, and an unavailable APIService disturbs discovery for every suite (csv_apiservice.rs keeps it short)"),
    ("apps", &["deployments"], &["get", "delete"], "a Deployment read whole when its cached spec is not known to be as wanted; one an upgrade drops or must replace (csv_operatorgroup.rs)"),
    ("authorization.k8s.io", &["subjectaccessreviews"], &["create"], "a CSV's permissions checked before the watch cache shows the Role and binding that grant them (timing)"),
    ("events.k8s.io", &["events"], &["patch"], "the same Event again within six minutes: counted on the first one's series"),
    ("rbac.authorization.k8s.io", &["clusterroles", "roles"], &["get"], "a plan waiting for approval: its preview reads the ClusterRoles and Roles it changes (admin_plugin.rs)"),
    ("operators.coreos.com", &["*"], &["get"], "an AllNamespaces operator's CSV read whole to be copied (csv_operatorgroup.rs), a plan the cache does not show yet (its own create), the CSVs a plan waiting for approval replaces"),
    ("rbac.authorization.k8s.io", &["clusterroles"], &["delete"], "an OperatorGroup's aggregated ClusterRole it no longer wants"),
    ("monitoring.coreos.com", &["prometheusrules", "servicemonitors"], &["create", "patch"], "optional kinds a bundle may carry"),
    ("policy", &["poddisruptionbudgets"], &["create", "patch"], "optional kinds a bundle may carry"),
    ("scheduling.k8s.io", &["priorityclasses"], &["create", "patch"], "optional kinds a bundle may carry"),
    ("autoscaling.k8s.io", &["verticalpodautoscalers"], &["create", "patch"], "optional kinds a bundle may carry"),
    ("networking.k8s.io", &["networkpolicies"], &["create", "patch"], "optional kinds a bundle may carry"),
    (
        "console.openshift.io",
        &["consoleyamlsamples", "consolequickstarts", "consoleclidownloads", "consolelinks", "consoleplugins"],
        &["get", "create", "patch"],
        "optional kinds a bundle may carry",
    ),
];

/// (API group, resource with its subresource, verb) as the audit log and RBAC name them.
type Access = (String, String, String);

/// Every (group, resource, verb) the rules of the ClusterRole `olm-operator` grant.
fn granted() -> anyhow::Result<BTreeSet<Access>> {
    let text = std::fs::read_to_string(olm_e2e::repo().join("manifests/01-rbac-controllers.yaml"))?;
    let mut grants = BTreeSet::new();
    for doc in serde_saphyr::from_multiple::<Value>(&text)? {
        if doc["kind"] != "ClusterRole" {
            continue;
        }
        for rule in doc["rules"].as_array().context("rules")? {
            let list = |key: &str| -> Vec<String> {
                rule[key].as_array().into_iter().flatten().filter_map(|v| v.as_str().map(str::to_owned)).collect()
            };
            for group in list("apiGroups") {
                for resource in list("resources") {
                    for verb in list("verbs") {
                        grants.insert((group.clone(), resource.clone(), verb));
                    }
                }
            }
        }
    }
    Ok(grants)
}

/// What OLM's ServiceAccount asked for itself (not as a user it impersonates), from the audit
/// log past byte `from`, and whether it impersonated anybody.
fn used(audit_log: &std::path::Path, from: usize) -> anyhow::Result<(BTreeMap<Access, usize>, bool)> {
    let text = std::fs::read_to_string(audit_log).with_context(|| format!("read {}", audit_log.display()))?;
    let text = text.get(from..).context("the audit log was rotated during the test")?;
    // The API server may be writing a line as it is read: only whole lines count.
    let text = text.rfind('\n').map_or("", |end| &text[..=end]);
    let mut used = BTreeMap::new();
    let mut impersonated = false;
    for line in text.lines() {
        let event: Value = serde_json::from_str(line)?;
        if event["user"]["username"] != OLM_USER || event["objectRef"].is_null() {
            continue;
        }
        if !event["impersonatedUser"].is_null() {
            impersonated = true;
            continue;
        }
        let object = &event["objectRef"];
        let resource = match object["subresource"].as_str() {
            Some(sub) => format!("{}/{sub}", object["resource"].as_str().unwrap_or_default()),
            None => object["resource"].as_str().unwrap_or_default().to_owned(),
        };
        let group = object["apiGroup"].as_str().unwrap_or_default().to_owned();
        let verb = event["verb"].as_str().unwrap_or_default().to_owned();
        *used.entry((group, resource, verb)).or_insert(0) += 1;
    }
    Ok((used, impersonated))
}

/// Whether the grant (group, resource, verb) covers a request.
fn covers(grant: &Access, request: &Access) -> bool {
    let matches = |granted: &str, asked: &str| granted == "*" || granted == asked;
    // Server-side apply of an object that does not exist yet is authorized as create too.
    let verb = grant.2 == request.2 || grant.2 == "*" || (grant.2 == "create" && request.2 == "patch");
    let resource = matches(&grant.1, &request.1) || (grant.1 == "*" && request.1.contains('/'));
    matches(&grant.0, &request.0) && resource && verb
}

/// An install of etcd 0.9.2 walked to 0.9.4, as a cluster admin does it.
async fn subscription_upgrade(ns: &TestNamespace, address: &str) -> anyhow::Result<()> {
    let name = ns.name();
    create_from_yaml(
        ns,
        &format!(
            "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata:\n  name: og\nspec:\n  targetNamespaces: [{name}]\n---\n\
             apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: community\nspec:\n  sourceType: grpc\n  address: \"{address}\"\n---\n\
             apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata:\n  name: etcd\nspec:\n  source: community\n  sourceNamespace: {name}\n  name: etcd\n  channel: singlenamespace-alpha\n  startingCSV: etcdoperator.v0.9.2\n"
        ),
    )
    .await?;
    controllers::wait_csv_succeeded(ns, "etcdoperator.v0.9.4", TIMEOUT, &["subscriptions", "installplans", "csvs"]).await
}

/// The same install as an OperatorGroup's ServiceAccount that holds what it needs.
async fn scoped_install(ns: &TestNamespace, address: &str) -> anyhow::Result<()> {
    let name = ns.name();
    service_account_with_role(
        ns,
        "installer",
        "installer",
        "- apiGroups: [operators.coreos.com]\n  resources: [clusterserviceversions]\n  verbs: [get, create, patch]\n\
         - apiGroups: [\"\"]\n  resources: [serviceaccounts]\n  verbs: [get, create, patch]\n\
         - apiGroups: [rbac.authorization.k8s.io]\n  resources: [roles, rolebindings]\n  verbs: [get, create, patch, escalate, bind]\n\
         - apiGroups: [apps]\n  resources: [deployments]\n  verbs: [get, create, patch, update, delete]\n",
    )
    .await?;
    create_from_yaml(
        ns,
        &format!(
            "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata:\n  name: og\nspec:\n  serviceAccountName: installer\n  targetNamespaces: [{name}]\n---\n\
             apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: community\nspec:\n  sourceType: grpc\n  address: \"{address}\"\n---\n\
             apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata:\n  name: etcd\nspec:\n  source: community\n  sourceNamespace: {name}\n  name: etcd\n  channel: singlenamespace-alpha\n"
        ),
    )
    .await?;
    controllers::wait_csv_succeeded(ns, "etcdoperator.v0.9.4", TIMEOUT, &["subscriptions", "installplans", "csvs"]).await
}

/// A CSV with a validating webhook: serving certificate, its RBAC, the configuration.
async fn webhook_csv(ns: &TestNamespace) -> anyhow::Result<()> {
    let name = ns.name().to_owned();
    create_from_yaml(ns, &format!("apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata:\n  name: og\nspec:\n  targetNamespaces: [{name}]\n")).await?;
    let csv = edit_csv(&load_csv("etcd-0.9.4/etcdoperator.v0.9.4.clusterserviceversion.yaml", &name)?, |value| {
        value["spec"]["webhookdefinitions"] = json!([{
            "generateName": format!("vetcd.{name}.example.com"), "type": "ValidatingAdmissionWebhook",
            "deploymentName": "etcd-operator", "containerPort": 9443, "webhookPath": "/validate", "sideEffects": "None",
            "admissionReviewVersions": ["v1"], "failurePolicy": "Ignore",
            "rules": [{"apiGroups": ["nothing.example.com"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["nothings"]}],
        }, {
            "generateName": format!("metcd.{name}.example.com"), "type": "MutatingAdmissionWebhook",
            "deploymentName": "etcd-operator", "containerPort": 9443, "webhookPath": "/mutate", "sideEffects": "None",
            "admissionReviewVersions": ["v1"], "failurePolicy": "Ignore",
            "rules": [{"apiGroups": ["nothing.example.com"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["nothings"]}],
        }]);
    })?;
    create_csv_with_permissions(ns, &csv, false).await?;
    wait_phase(ns, "etcdoperator.v0.9.4", "Succeeded", None, TIMEOUT).await
}

#[tokio::test]
async fn the_controllers_role_grants_what_they_use_and_nothing_else() -> anyhow::Result<()> {
    let cluster = controllers::cluster_with_crds().await?;
    let _apis = controllers::ETCD_APIS.read().await;
    let repo = olm_e2e::repo();
    for file in ["manifests/00-namespaces.yaml", "manifests/01-rbac-controllers.yaml"] {
        cluster.kubectl(&["apply", "--server-side", "--force-conflicts", "-f", &repo.join(file).display().to_string()]).await?;
    }
    // The controllers as the ServiceAccount, through a token, as they run in a cluster.
    let token = cluster.kubectl(&["create", "token", "olm-operator", "-n", "olm", "--duration=2h"]).await?.stdout;
    let mut kubeconfig: Value = serde_saphyr::from_str(&std::fs::read_to_string(cluster.kubeconfig())?)?;
    for user in kubeconfig["users"].as_array_mut().context("users")? {
        user["user"] = json!({"token": token.trim()});
    }
    let scratch = tempfile::tempdir()?;
    let path = scratch.path().join("kubeconfig");
    // JSON is YAML: written as JSON.
    std::fs::write(&path, serde_json::to_string(&kubeconfig)?)?;
    let audit_log = cluster.layout().audit_log();
    // Only this run counts (the control plane is shared and kept between runs).
    let from = std::fs::metadata(&audit_log).map(|m| m.len() as usize).unwrap_or(0);
    let manager = ScopedManager::start_all(path, None, false, true).await?;

    let server = controllers::etcd_catalog_server(false).await?;
    let address = server.grpc_addrs.get("community").context("gRPC address")?.to_string();
    let upgrade = cluster.namespace("least-upgrade").await?;
    let scoped = cluster.namespace("least-scoped").await?;
    let webhook = cluster.namespace("least-webhook").await?;
    let v1 = cluster.namespace("least-v1").await?;
    let (a, b, c, d) = tokio::join!(
        subscription_upgrade(&upgrade, &address),
        scoped_install(&scoped, &address),
        webhook_csv(&webhook),
        cluster_catalog(&cluster, &v1)
    );
    a.context("upgrade")?;
    b.context("scoped install")?;
    c.context("webhook CSV")?;
    d.context("OLM v1")?;
    // Removal: the CSVs' cluster-scoped objects go with them (by owner label).
    for ns in [&upgrade, &scoped, &webhook] {
        ns.kubectl(&["delete", "subscriptions,clusterserviceversions", "--all", "--wait=true"]).await?;
    }
    drop(manager);

    let (used, impersonated) = used(&audit_log, from)?;
    let granted = granted()?;
    println!("{:<28} {:<48} {:<18} {:>8}", "API group", "resource", "verb", "requests");
    for ((group, resource, verb), count) in &used {
        println!("{:<28} {:<48} {:<18} {:>8}", if group.is_empty() { "\"\"" } else { group }, resource, verb, count);
    }
    let not_granted: Vec<&Access> = used.keys().filter(|r| !granted.iter().any(|g| covers(g, r))).collect();
    assert!(not_granted.is_empty(), "used but not granted: {not_granted:?}");
    let wrote = |resource: &str| used.keys().any(|(group, r, verb)| group == "rbac.authorization.k8s.io" && r == resource && verb == "patch");
    let exercised = |g: &Access| match (g.0.as_str(), g.1.as_str(), g.2.as_str()) {
        ("", "serviceaccounts", "impersonate") => impersonated,
        // Not requests of their own: the RBAC API checks them when OLM writes a role granting,
        // or binds a role holding, what OLM does not hold itself (every operator's role does).
        ("rbac.authorization.k8s.io", "roles", "escalate" | "bind") => wrote("roles") && wrote("rolebindings"),
        ("rbac.authorization.k8s.io", "clusterroles", "escalate" | "bind") => wrote("clusterroles") && wrote("clusterrolebindings"),
        _ => used.keys().any(|r| covers(g, r) && (g.2 == r.2 || g.2 == "create")),
    };
    let excused = |g: &Access| {
        NOT_EXERCISED
            .iter()
            .any(|(group, resources, verbs, _)| *group == g.0 && resources.contains(&g.1.as_str()) && verbs.contains(&g.2.as_str()))
    };
    let unused: Vec<String> = granted.iter().filter(|g| !exercised(g) && !excused(g)).map(|(g, r, v)| format!("{g}/{r} {v}")).collect();
    assert!(unused.is_empty(), "granted but never used (remove them, or say in NOT_EXERCISED why the workload cannot use them):\n{}", unused.join("\n"));
    for ns in [upgrade, scoped, webhook, v1] {
        ns.cleanup().await?;
    }
    server.shutdown();
    Ok(())
}

/// OLM v1: a ClusterCatalog pulled and served, then deleted; a ClusterExtension installed from
/// another, upgraded to a bundle that drops an object, then deleted.
async fn cluster_catalog(cluster: &olm_testkit::TestCluster, ns: &TestNamespace) -> anyhow::Result<()> {
    use olm_api::olmv1::ClusterCatalog;
    let registry = olm_testkit::registry(olm_testkit::RegistryOptions::new()).await?;
    let image = format!("{}/least-catalog:v1", registry.addr());
    let fixture = olm_e2e::repo().join("crates/olm-registry/testdata/catalog");
    olm_e2e::olm(&["catalog", "push", fixture.to_str().context("path")?, &image])?;
    let api: kube::Api<ClusterCatalog> = kube::Api::all(cluster.client());
    let name = "least-privilege";
    let _ = api.delete(name, &Default::default()).await;
    olm_testkit::wait_for("the last run's ClusterCatalog gone", Duration::from_secs(60), || async { anyhow::Ok(api.get_opt(name).await?.is_none().then_some(())) }).await?;
    let catalog: ClusterCatalog = serde_json::from_value(json!({
        "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterCatalog", "metadata": {"name": name},
        "spec": {"source": {"type": "Image", "image": {"ref": image}}}
    }))?;
    api.create(&Default::default(), &catalog).await?;
    olm_testkit::wait_for("ClusterCatalog least-privilege Serving", Duration::from_secs(120), || async {
        let catalog = api.get(name).await?;
        anyhow::Ok(catalog.conditions().iter().any(|c| c.type_ == "Serving" && c.status == "True").then_some(()))
    })
    .await?;
    api.delete(name, &Default::default()).await?;
    cluster_extension(cluster, ns, &registry).await
}

async fn cluster_extension(cluster: &olm_testkit::TestCluster, ns: &TestNamespace, registry: &olm_testkit::TestRegistry) -> anyhow::Result<()> {
    use olm_api::olmv1::{ClusterCatalog, ClusterExtension};
    let work = tempfile::tempdir()?;
    olm_e2e::olmv1::widget_catalog(work.path(), "least.example.com")?;
    let image = format!("{}/least-widgets:v1", registry.addr());
    olm_e2e::olm(&["catalog", "push", work.path().to_str().context("path")?, &image])?;
    let catalogs: kube::Api<ClusterCatalog> = kube::Api::all(cluster.client());
    let extensions: kube::Api<ClusterExtension> = kube::Api::all(cluster.client());
    let name = "least-privilege-widgets";
    // What a failed earlier run left (absent is fine).
    let _ = extensions.delete(name, &Default::default()).await;
    let _ = catalogs.delete(name, &Default::default()).await;
    olm_testkit::wait_for("the last run's ClusterExtension gone", Duration::from_secs(60), || async { anyhow::Ok(extensions.get_opt(name).await?.is_none().then_some(())) }).await?;
    catalogs.create(&Default::default(), &serde_json::from_value(json!({
        "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterCatalog", "metadata": {"name": name},
        "spec": {"source": {"type": "Image", "image": {"ref": image}}}
    }))?).await?;
    extensions.create(&Default::default(), &serde_json::from_value(json!({
        "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension", "metadata": {"name": name},
        "spec": {"namespace": ns.name(), "source": {"sourceType": "Catalog", "catalog": {"packageName": "widget", "version": "1.0.0",
                 "selector": {"matchLabels": {"olm.operatorframework.io/metadata.name": name}}}}}
    }))?).await?;
    let installed = |bundle: &'static str| {
        let extensions = extensions.clone();
        async move {
            olm_testkit::wait_for(&format!("ClusterExtension {name}: {bundle} installed"), TIMEOUT, || async {
                let extension = extensions.get(name).await?;
                let at = extension.status.as_ref().and_then(|s| s.install.as_ref()).map(|i| i.bundle.name.clone());
                let done = extension.conditions().iter().any(|c| c.type_ == "Progressing" && c.reason == "Succeeded");
                anyhow::Ok((at.as_deref() == Some(bundle) && done).then_some(()))
            })
            .await
        }
    };
    installed("widget.v1.0.0").await?;
    // v2 drops v1's Service: the upgrade deletes it (and v1's generated RBAC, renamed).
    let patch = json!({"spec": {"source": {"catalog": {"version": "2.0.0"}}}});
    extensions.patch(name, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch)).await?;
    installed("widget.v2.0.0").await?;
    extensions.delete(name, &Default::default()).await?;
    catalogs.delete(name, &Default::default()).await?;
    Ok(())
}
