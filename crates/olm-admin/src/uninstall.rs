//! Uninstalling an operator: the Subscription, its CSV and everything OLM created for it; the
//! operands (objects of the CRDs it owns) and the CRDs only when asked, and never a CRD
//! another operator still owns or requires. [`observe`] reads what would go, [`Plan::summary`]
//! says it (what goes, what stays), [`execute`] does it: operands first, while the operator
//! still runs to finish them (finalizers); the Operator object of the package last, once it
//! lists nothing.

use std::collections::BTreeSet;
use std::time::Instant;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use olm_api::keys::{OWNER_LABEL, OWNER_NAMESPACE_LABEL, TARGET_NAMESPACES_ANNOTATION};
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use olm_api::v1alpha1::install_plan::InstallPlan;
use olm_api::v1alpha1::subscription::Subscription;

use crate::{AdminError, Waiting};

/// What to delete besides the operator itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    /// Every object of the CRDs the operator owns, in its target namespaces.
    pub delete_operands: bool,
    /// The CRDs it owns that nobody else owns or requires (their objects go with them, so
    /// this implies `delete_operands`).
    pub delete_crds: bool,
}

impl Options {
    fn operands(self) -> bool {
        self.delete_operands || self.delete_crds
    }
}

/// How the front end names the two options when it says what they would do (a flag in a
/// terminal, a checkbox's label in a page).
#[derive(Debug, Clone, Copy)]
pub struct OptionNames<'a> {
    pub delete_operands: &'a str,
    pub delete_crds: &'a str,
}

/// A CRD the operator owns, and what becomes of it.
#[derive(Debug, Clone)]
pub struct OwnedCrd {
    pub name: String,
    /// The operand objects and their API.
    pub operands: Vec<(DynamicObject, ApiResource)>,
    /// Who else owns or requires it, `namespace/csv` (then it is never deleted).
    pub used_by: Vec<String>,
}

/// What an uninstall would delete, read from the cluster.
#[derive(Debug, Clone)]
pub struct Plan {
    pub namespace: String,
    pub subscription: Subscription,
    /// The CSV the Subscription installed (or is installing).
    pub csv: Option<String>,
    /// What OLM made for the CSV and goes with it, `Kind name`.
    pub made: Vec<String>,
    /// The Subscription's InstallPlans.
    pub plans: Vec<String>,
    pub crds: Vec<OwnedCrd>,
}

/// One line of a summary, with the lines under it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub text: String,
    pub details: Vec<String>,
}

impl Item {
    fn line(text: impl Into<String>) -> Self {
        Item { text: text.into(), details: Vec::new() }
    }
}

/// What an uninstall deletes and what it keeps, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub title: String,
    pub goes: Vec<Item>,
    pub kept: Vec<Item>,
}

/// The other operators that own or require `crd`: `namespace/csv`, copies and `csv` itself
/// left out.
pub fn crd_users(crd: &str, csv: &ClusterServiceVersion, all: &[ClusterServiceVersion]) -> Vec<String> {
    let me = (csv.namespace(), csv.name_any());
    all.iter()
        .filter(|c| !c.is_copied() && (c.namespace(), c.name_any()) != me)
        .filter(|c| c.spec.owned_crds().iter().chain(c.spec.required_crds()).any(|d| d.name == crd))
        .map(|c| format!("{}/{}", c.namespace().unwrap_or_default(), c.name_any()))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// `Kind namespace/name`, or `Kind name` when cluster-scoped.
pub fn describe(object: &DynamicObject, kind: &str) -> String {
    match object.namespace() {
        Some(ns) => format!("{kind} {ns}/{}", object.name_any()),
        None => format!("{kind} {}", object.name_any()),
    }
}

/// Reads what uninstalling Subscription `namespace/name` would delete.
pub async fn observe(client: &kube::Client, namespace: &str, name: &str) -> Result<Plan, AdminError> {
    let (_, sub) = crate::subscription(client, namespace, name).await?;
    let status = sub.status.clone().unwrap_or_default();
    let csv_name = status.installed_csv.clone().or(status.current_csv.clone()).filter(|c| !c.is_empty());
    let csv = match &csv_name {
        Some(csv) => Api::<ClusterServiceVersion>::namespaced(client.clone(), namespace)
            .get_opt(csv)
            .await
            .map_err(|err| AdminError::api(format!("cannot read ClusterServiceVersion {namespace}/{csv}"), err))?,
        None => None,
    };
    let plans = Api::<InstallPlan>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await
        .map_err(|err| AdminError::api(format!("cannot list InstallPlans in {namespace}"), err))?
        .items
        .into_iter()
        .filter(|p| p.owner_references().iter().any(|o| Some(&o.uid) == sub.uid().as_ref()))
        .map(|p| p.name_any())
        .collect();
    let (made, crds) = match &csv {
        Some(csv) => (made_for(client, namespace, csv).await?, owned_crds(client, csv).await?),
        None => (Vec::new(), Vec::new()),
    };
    Ok(Plan { namespace: namespace.to_owned(), subscription: sub, csv: csv_name, made, plans, crds })
}

/// What OLM made for `csv` that goes with it: its Deployments, its cluster RBAC.
async fn made_for(client: &kube::Client, namespace: &str, csv: &ClusterServiceVersion) -> Result<Vec<String>, AdminError> {
    let uid = csv.uid().unwrap_or_default();
    let mut made = Vec::new();
    let deployments = Api::<Deployment>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await
        .map_err(|err| AdminError::api(format!("cannot list Deployments in {namespace}"), err))?;
    made.extend(deployments.items.iter().filter(|d| d.owner_references().iter().any(|o| o.uid == uid)).map(|d| format!("Deployment {}", d.name_any())));
    let labels = ListParams::default().labels(&format!("{OWNER_LABEL}={},{OWNER_NAMESPACE_LABEL}={namespace}", csv.name_any()));
    let roles = Api::<ClusterRole>::all(client.clone()).list(&labels).await.map_err(|err| AdminError::api("cannot list ClusterRoles", err))?;
    made.extend(roles.items.iter().map(|r| format!("ClusterRole {}", r.name_any())));
    let bindings = Api::<ClusterRoleBinding>::all(client.clone()).list(&labels).await.map_err(|err| AdminError::api("cannot list ClusterRoleBindings", err))?;
    made.extend(bindings.items.iter().map(|b| format!("ClusterRoleBinding {}", b.name_any())));
    Ok(made)
}

/// The CRDs `csv` owns, each with its objects in the CSV's target namespaces (all, for a
/// cluster-scoped CRD or an AllNamespaces install) and who else uses it.
async fn owned_crds(client: &kube::Client, csv: &ClusterServiceVersion) -> Result<Vec<OwnedCrd>, AdminError> {
    let targets: Vec<String> = csv.annotation(TARGET_NAMESPACES_ANNOTATION).unwrap_or_default().split(',').filter(|t| !t.is_empty()).map(str::to_owned).collect();
    let all_csvs = Api::<ClusterServiceVersion>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|err| AdminError::api("cannot list ClusterServiceVersions", err))?
        .items;
    let crd_api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut crds: Vec<OwnedCrd> = Vec::new();
    for owned in csv.spec.owned_crds() {
        if crds.iter().any(|c| c.name == owned.name) {
            continue;
        }
        let mut operands = Vec::new();
        if let Some(crd) = crd_api.get_opt(&owned.name).await.map_err(|err| AdminError::api(format!("cannot read CRD {}", owned.name), err))? {
            let version = crd.spec.versions.iter().find(|v| v.storage).or(crd.spec.versions.first()).map(|v| v.name.clone()).unwrap_or_default();
            let resource = ApiResource {
                group: crd.spec.group.clone(),
                version: version.clone(),
                api_version: format!("{}/{version}", crd.spec.group),
                kind: crd.spec.names.kind.clone(),
                plural: crd.spec.names.plural.clone(),
            };
            let namespaced = crd.spec.scope == "Namespaced";
            let scopes: Vec<Option<&str>> = if namespaced && !targets.is_empty() { targets.iter().map(|t| Some(t.as_str())).collect() } else { vec![None] };
            for scope in scopes {
                let list = dynamic_api(client, scope, &resource)
                    .list(&ListParams::default())
                    .await
                    .map_err(|err| AdminError::api(format!("cannot list {} objects", resource.kind), err))?;
                operands.extend(list.items.into_iter().map(|o| (o, resource.clone())));
            }
        }
        crds.push(OwnedCrd { name: owned.name.clone(), operands, used_by: crd_users(&owned.name, csv, &all_csvs) });
    }
    Ok(crds)
}

fn dynamic_api(client: &kube::Client, namespace: Option<&str>, resource: &ApiResource) -> Api<DynamicObject> {
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
        None => Api::all_with(client.clone(), resource),
    }
}

impl Plan {
    /// The Subscription's name.
    pub fn name(&self) -> String {
        self.subscription.name_any()
    }

    /// What goes and what stays with `options`, naming the options as the front end does.
    pub fn summary(&self, options: Options, names: OptionNames<'_>) -> Summary {
        let name = self.name();
        let namespace = &self.namespace;
        let title = format!("Uninstalls Subscription {namespace}/{name}{}", self.csv.as_deref().map(|c| format!(" ({c})")).unwrap_or_default());
        let mut goes = vec![Item::line(format!("Subscription {name}"))];
        if let Some(csv) = &self.csv {
            goes.push(Item {
                text: format!(
                    "ClusterServiceVersion {csv}, and with it what OLM created for it (its copies in the target namespaces, ServiceAccounts, Roles, Services, Secrets, webhook configurations){}",
                    if self.made.is_empty() { "" } else { ":" }
                ),
                details: self.made.clone(),
            });
        }
        goes.extend(self.plans.iter().map(|p| Item::line(format!("InstallPlan {p}"))));
        let operands = || self.crds.iter().flat_map(|c| c.operands.iter().map(|(object, resource)| describe(object, &resource.kind)));
        if options.operands() {
            goes.extend(operands().map(|o| Item::line(format!("{o} (operand)"))));
        }
        let mut kept = Vec::new();
        for crd in &self.crds {
            match (options.delete_crds, crd.used_by.is_empty()) {
                (true, true) => goes.push(Item::line(format!("CustomResourceDefinition {}", crd.name))),
                (true, false) => kept.push(Item::line(format!("CustomResourceDefinition {} (still used by {})", crd.name, crd.used_by.join(", ")))),
                (false, _) => kept.push(Item::line(format!("CustomResourceDefinition {} ({} deletes it)", crd.name, names.delete_crds))),
            }
        }
        let operand_count = operands().count();
        if !options.operands() && operand_count > 0 {
            kept.push(Item {
                text: format!("{operand_count} operand(s), the objects of its CRDs ({} deletes them):", names.delete_operands),
                details: operands().collect(),
            });
        }
        kept.push(Item::line(format!("the OperatorGroup of {namespace} (yours: delete it when nothing else uses it).")));
        Summary { title, goes, kept }
    }
}

/// What an uninstall did: the operator uninstalled, and a note when the Operator object of
/// its package was left in place (it still lists something).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Done {
    pub uninstalled: String,
    pub note: Option<String>,
}

/// Uninstalls what `plan` lists, with `options`. A step that fails stops it, saying what was
/// deleted before and what holds the rest.
pub async fn execute(client: &kube::Client, plan: &Plan, options: Options, waiting: &Waiting<'_>) -> Result<Done, AdminError> {
    let namespace = &plan.namespace;
    let name = plan.name();
    // Operands first, while the operator runs to finish them.
    if options.operands() {
        for crd in &plan.crds {
            for (object, resource) in &crd.operands {
                match dynamic_api(client, object.namespace().as_deref(), resource).delete(&object.name_any(), &DeleteParams::default()).await {
                    Ok(_) => {}
                    Err(err) if olm_runtime::error::is_not_found(&err) => {}
                    Err(err) => return Err(AdminError::api(format!("cannot delete {} (nothing else was deleted)", describe(object, &resource.kind)), err)),
                }
            }
        }
        operands_gone(client, &plan.crds, waiting).await?;
    }
    let gone = |result: Result<(), kube::Error>, what: String| match result {
        Err(err) if !olm_runtime::error::is_not_found(&err) => Err(AdminError::api(format!("cannot delete {what}"), err)),
        _ => Ok(()),
    };
    let subs: Api<Subscription> = Api::namespaced(client.clone(), namespace);
    gone(subs.delete(&name, &DeleteParams::default()).await.map(drop), format!("Subscription {namespace}/{name}"))?;
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), namespace);
    if let Some(csv) = &plan.csv {
        gone(csvs.delete(csv, &DeleteParams::default()).await.map(drop), format!("ClusterServiceVersion {namespace}/{csv}"))?;
    }
    let plan_api: Api<InstallPlan> = Api::namespaced(client.clone(), namespace);
    for p in &plan.plans {
        gone(plan_api.delete(p, &DeleteParams::default()).await.map(drop), format!("InstallPlan {namespace}/{p}"))?;
    }
    if let Some(csv) = &plan.csv {
        csv_gone(client, namespace, csv, waiting).await?;
    }
    let crd_api: Api<CustomResourceDefinition> = Api::all(client.clone());
    if options.delete_crds {
        for crd in plan.crds.iter().filter(|c| c.used_by.is_empty()) {
            gone(crd_api.delete(&crd.name, &DeleteParams::default()).await.map(drop), format!("CustomResourceDefinition {}", crd.name))?;
        }
    }
    let operator = olm_api::keys::operator_name(&plan.subscription.spec.name, namespace);
    // A CRD kept is no longer a component of the operator uninstalled here (other installs'
    // labels stay).
    if let Some(label) = olm_api::keys::operator_component_label(&operator) {
        let patch = serde_json::json!({"metadata": {"labels": {label: null}}});
        for crd in &plan.crds {
            gone(
                crd_api.patch(&crd.name, &PatchParams::default(), &Patch::Merge(&patch)).await.map(drop),
                format!("the Operator label of CustomResourceDefinition {}", crd.name),
            )?;
        }
    }
    let note = remove_operator(client, &operator, waiting).await?;
    Ok(Done { uninstalled: plan.csv.clone().unwrap_or(name), note })
}

/// Waits until every operand deleted is gone, saying which hold on (finalizers).
async fn operands_gone(client: &kube::Client, crds: &[OwnedCrd], waiting: &Waiting<'_>) -> Result<(), AdminError> {
    let started = Instant::now();
    loop {
        let mut left = Vec::new();
        for (object, resource) in crds.iter().flat_map(|c| &c.operands) {
            let what = describe(object, &resource.kind);
            let found = dynamic_api(client, object.namespace().as_deref(), resource)
                .get_opt(&object.name_any())
                .await
                .map_err(|err| AdminError::api(format!("cannot read {what}"), err))?;
            if let Some(found) = found {
                let finalizers = found.finalizers().join(", ");
                left.push(if finalizers.is_empty() { what } else { format!("{what} (finalizers: {finalizers})") });
            }
        }
        if left.is_empty() {
            return Ok(());
        }
        if started.elapsed() > waiting.limit {
            return Err(AdminError::NotFinished(format!(
                "operands still there after {} s: {}; the operator, its Subscription and CSV were left installed so it can finish them",
                waiting.limit.as_secs(),
                left.join("; ")
            )));
        }
        (waiting.progress)(&format!("waiting for {} operand(s) to go: {}", left.len(), left.join("; ")));
        tokio::time::sleep(waiting.poll).await;
    }
}

/// Deletes the Operator object `name` once it lists no component (what the CSV owned is
/// garbage collected a moment after the CSV). Deleted while components remain, OLM would make
/// it again: then it is left, and the note returned says what it still lists.
pub async fn remove_operator(client: &kube::Client, name: &str, waiting: &Waiting<'_>) -> Result<Option<String>, AdminError> {
    let operators: Api<olm_api::v1::operator::Operator> = Api::all(client.clone());
    let started = Instant::now();
    loop {
        let Some(operator) = operators.get_opt(name).await.map_err(|err| AdminError::api(format!("cannot read Operator {name}"), err))? else {
            return Ok(None);
        };
        let left = operator.component_refs();
        if left.is_empty() {
            return match operators.delete(name, &DeleteParams::default()).await {
                Err(err) if !olm_runtime::error::is_not_found(&err) => Err(AdminError::api(format!("cannot delete Operator {name}"), err)),
                _ => Ok(None),
            };
        }
        if started.elapsed() > waiting.limit {
            let named: Vec<String> =
                left.iter().map(|r| format!("{} {}", r.object.kind.as_deref().unwrap_or_default(), r.object.name.as_deref().unwrap_or_default())).collect();
            return Ok(Some(format!("Operator {name} still lists {} (labelled operators.coreos.com/{name}); it is left in place", named.join(", "))));
        }
        (waiting.progress)(&format!("waiting for the components of Operator {name} to go"));
        tokio::time::sleep(waiting.poll).await;
    }
}

/// Waits until the CSV is gone, and the cluster RBAC made for it: OLM deletes that by its
/// owner labels once the CSV has left its cache, a moment after the CSV itself.
async fn csv_gone(client: &kube::Client, namespace: &str, name: &str, waiting: &Waiting<'_>) -> Result<(), AdminError> {
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), namespace);
    let owned = ListParams::default().labels(&format!("{OWNER_LABEL}={name},{OWNER_NAMESPACE_LABEL}={namespace}"));
    let started = Instant::now();
    loop {
        let csv_left = csvs.get_opt(name).await.map_err(|err| AdminError::api(format!("cannot read ClusterServiceVersion {namespace}/{name}"), err))?.is_some();
        let roles_left = Api::<ClusterRole>::all(client.clone()).list(&owned).await.map_err(|err| AdminError::api("cannot list ClusterRoles", err))?.items.len()
            + Api::<ClusterRoleBinding>::all(client.clone()).list(&owned).await.map_err(|err| AdminError::api("cannot list ClusterRoleBindings", err))?.items.len();
        if !csv_left && roles_left == 0 {
            return Ok(());
        }
        if started.elapsed() > waiting.limit {
            return Err(AdminError::NotFinished(format!(
                "ClusterServiceVersion {name} or {roles_left} ClusterRole(s)/binding(s) made for it still there after {} s (kubectl describe csv {name} -n {namespace} tells what holds it)",
                waiting.limit.as_secs()
            )));
        }
        (waiting.progress)(&format!("waiting for ClusterServiceVersion {name} and what OLM made for it to go"));
        tokio::time::sleep(waiting.poll).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn csv(namespace: &str, name: &str, owned: &[&str], required: &[&str], copied: bool) -> ClusterServiceVersion {
        let describe = |names: &[&str]| names.iter().map(|n| json!({"name": n, "version": "v1", "kind": "K"})).collect::<Vec<_>>();
        let labels = if copied { json!({"olm.copiedFrom": "elsewhere"}) } else { json!({}) };
        serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"displayName": name, "install": {"strategy": "deployment"},
                     "customresourcedefinitions": {"owned": describe(owned), "required": describe(required)}}
        }))
        .expect("a CSV")
    }

    #[test]
    fn a_crd_another_operator_owns_or_requires_is_in_use_copies_and_itself_aside() {
        let me = csv("a", "koku.v1", &["k.example.com"], &[], false);
        let all = vec![
            me.clone(),
            csv("b", "koku.v1", &["k.example.com"], &[], true),
            csv("c", "consumer.v2", &[], &["k.example.com"], false),
            csv("d", "koku.v1", &["k.example.com"], &[], false),
            csv("e", "other.v1", &["o.example.com"], &[], false),
        ];
        assert_eq!(crd_users("k.example.com", &me, &all), vec!["c/consumer.v2", "d/koku.v1"]);
        assert!(crd_users("k.example.com", &me, &[me.clone(), all[1].clone()]).is_empty(), "only a copy of itself");
    }

    fn plan() -> Plan {
        let sub: Subscription = serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": "koku", "namespace": "a"}, "spec": {"name": "koku-metrics-operator", "source": "c", "sourceNamespace": "olm"}}))
        .expect("a Subscription");
        let resource = ApiResource { group: "k.example.com".into(), version: "v1".into(), api_version: "k.example.com/v1".into(), kind: "Config".into(), plural: "configs".into() };
        let operand = DynamicObject::new("sample", &resource).within("a");
        Plan {
            namespace: "a".into(),
            subscription: sub,
            csv: Some("koku.v2".into()),
            made: vec!["Deployment koku-manager".into()],
            plans: vec!["install-x".into()],
            crds: vec![
                OwnedCrd { name: "configs.k.example.com".into(), operands: vec![(operand, resource)], used_by: Vec::new() },
                OwnedCrd { name: "shared.k.example.com".into(), operands: Vec::new(), used_by: vec!["b/other.v1".into()] },
            ],
        }
    }

    const FLAGS: OptionNames<'static> = OptionNames { delete_operands: "--delete-operands", delete_crds: "--delete-crds" };

    fn texts(items: &[Item]) -> Vec<&str> {
        items.iter().map(|i| i.text.as_str()).collect()
    }

    #[test]
    fn by_default_operands_and_crds_stay_and_the_summary_names_the_option_that_deletes_them() {
        let summary = plan().summary(Options::default(), FLAGS);
        assert_eq!(summary.title, "Uninstalls Subscription a/koku (koku.v2)");
        assert_eq!(texts(&summary.goes)[0], "Subscription koku");
        assert!(summary.goes[1].text.starts_with("ClusterServiceVersion koku.v2, and with it") && summary.goes[1].details == ["Deployment koku-manager"], "{summary:?}");
        assert_eq!(texts(&summary.goes)[2..], ["InstallPlan install-x"]);
        assert_eq!(
            texts(&summary.kept),
            [
                "CustomResourceDefinition configs.k.example.com (--delete-crds deletes it)",
                "CustomResourceDefinition shared.k.example.com (--delete-crds deletes it)",
                "1 operand(s), the objects of its CRDs (--delete-operands deletes them):",
                "the OperatorGroup of a (yours: delete it when nothing else uses it).",
            ]
        );
        assert_eq!(summary.kept[2].details, ["Config a/sample"]);
    }

    #[test]
    fn deleting_crds_deletes_the_operands_too_but_never_a_crd_someone_else_uses() {
        let summary = plan().summary(Options { delete_operands: false, delete_crds: true }, FLAGS);
        assert_eq!(texts(&summary.goes)[3..], ["Config a/sample (operand)", "CustomResourceDefinition configs.k.example.com"]);
        assert_eq!(
            texts(&summary.kept),
            ["CustomResourceDefinition shared.k.example.com (still used by b/other.v1)", "the OperatorGroup of a (yours: delete it when nothing else uses it)."]
        );
        let operands_only = plan().summary(Options { delete_operands: true, delete_crds: false }, OptionNames { delete_operands: "x", delete_crds: "“Delete its CRDs”" });
        assert!(texts(&operands_only.goes).contains(&"Config a/sample (operand)"));
        assert_eq!(operands_only.kept[0].text, "CustomResourceDefinition configs.k.example.com (“Delete its CRDs” deletes it)");
    }
}
