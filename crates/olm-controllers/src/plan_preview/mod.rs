//! What an InstallPlan will change, compared with what is installed (pure): the preview a
//! cluster admin reads before approving (issue #22). `observe` reads what it is compared with;
//! `render` says it in words. The InstallPlan controller writes it into plans that wait for
//! approval as the [`PREVIEW_ANNOTATION`] (JSON; upstream clients ignore it), and
//! `olm plan show` computes it again from the cluster as it is now.

mod live;
pub mod observe;
pub mod render;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

use olm_api::v1alpha1::install_plan::Step;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use olm_install::crd_rules::served_schema;

pub use live::{header, preview_of};
pub use olm_api::keys::PREVIEW_ANNOTATION;

/// What a plan will change.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanPreview {
    /// The operators (CSVs) the plan installs, and which installed one each replaces.
    pub operators: Vec<OperatorChange>,
    /// Permissions granted or taken away, one resource (or URL) per line.
    pub permissions: Vec<PermissionChange>,
    /// CustomResourceDefinitions created or changed.
    pub crds: Vec<CrdChange>,
    /// The operators' Deployments created, changed or removed.
    pub deployments: Vec<DeploymentChange>,
    /// Admission and conversion webhooks the new version adds.
    pub webhooks_added: Vec<String>,
    /// APIServices (group/version) the new version adds.
    pub api_services_added: Vec<String>,
    /// Every other object the plan applies, as `Kind name`.
    pub other_objects: Vec<String>,
}

/// One CSV of the plan.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperatorChange {
    /// The CSV the plan installs.
    pub csv: String,
    /// Its `spec.version`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The installed CSV it replaces, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
}

/// Whether something is added or removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Change {
    /// Granted by the new version only.
    Added,
    /// Granted by the installed version only.
    Removed,
}

/// Verbs on one resource (or non-resource URL) granted or taken away.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionChange {
    /// Added or removed.
    pub change: Change,
    /// Where it applies: `cluster` (clusterPermissions, ClusterRoles), `namespace`
    /// (permissions: the operator's target namespaces), or the bundle's `Role NAME` /
    /// `ClusterRole NAME`.
    pub scope: String,
    /// The operator's ServiceAccount that gets it (CSV permissions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<String>,
    /// `resource.group` (core resources without a group), or a non-resource URL.
    pub resource: String,
    /// Only these objects, when the rule names them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_names: Vec<String>,
    /// The verbs added or removed.
    pub verbs: Vec<String>,
}

/// A CustomResourceDefinition the plan creates or changes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CrdChange {
    /// Its name.
    pub name: String,
    /// Not in the cluster yet.
    pub new: bool,
    /// Versions the new CRD adds.
    pub added_versions: Vec<String>,
    /// Versions it drops.
    pub removed_versions: Vec<String>,
    /// Dropped versions that still store objects (`status.storedVersions`): the plan is refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed_stored_versions: Vec<String>,
    /// The storage version before and after, when it changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_version: Option<(String, String)>,
    /// Versions served before and after whose schema changes.
    pub changed_schemas: Vec<String>,
    /// Existing objects the new schema would refuse (filled by `olm plan show`, which lists
    /// them; the controller does not).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub invalid_objects: Vec<String>,
}

/// A Deployment of the operator the plan creates, changes or removes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentChange {
    /// Its name.
    pub name: String,
    /// `added`, `removed` or `changed`.
    pub change: String,
    /// Replicas before and after, when they change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<(Option<i64>, Option<i64>)>,
    /// Containers whose image or resources change, or that come or go.
    pub containers: Vec<ContainerChange>,
}

/// One container of a Deployment.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerChange {
    /// Its name.
    pub name: String,
    /// Image before (absent for a new container).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_before: Option<String>,
    /// Image after (absent for a removed container).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_after: Option<String>,
    /// Resources before and after, as compact JSON, when they change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<(String, String)>,
}

/// What is installed now, that the plan is compared with.
#[derive(Clone, Debug, Default)]
pub struct Installed {
    /// The installed CSVs the plan's CSVs replace, by name.
    pub csvs: BTreeMap<String, Value>,
    /// Existing objects named by the plan's CRD, Role and ClusterRole steps, by (kind, name).
    pub objects: BTreeMap<(String, String), Value>,
}

impl PlanPreview {
    /// Whether the plan grants anything new: a permission, a webhook or an APIService.
    pub fn grants_more(&self) -> bool {
        self.permissions.iter().any(|p| p.change == Change::Added) || !self.webhooks_added.is_empty() || !self.api_services_added.is_empty()
    }
}

/// A step's manifest, parsed (None for a reference to plan content not resolved).
fn manifest(step: &Step) -> Option<Value> {
    serde_json::from_str(step.resource.manifest.as_deref()?).ok()
}

/// The CSV `spec.replaces` of each CSV step of `steps`.
pub fn replaced_csvs(steps: &[Step]) -> Vec<String> {
    steps
        .iter()
        .filter(|s| s.resource.kind == "ClusterServiceVersion")
        .filter_map(manifest)
        .filter_map(|csv| csv.pointer("/spec/replaces").and_then(Value::as_str).map(str::to_owned))
        .filter(|name| !name.is_empty())
        .collect()
}

/// The preview of `steps` (their manifests resolved) against `installed`.
pub fn preview(steps: &[Step], installed: &Installed) -> PlanPreview {
    let mut out = PlanPreview::default();
    let mut permissions = BTreeSet::new();
    for step in steps {
        let r = &step.resource;
        let Some(new) = manifest(step) else {
            out.other_objects.push(format!("{} {}", r.kind, r.name));
            continue;
        };
        let existing = installed.objects.get(&(r.kind.clone(), r.name.clone()));
        match r.kind.as_str() {
            "ClusterServiceVersion" => {
                let replaces = new.pointer("/spec/replaces").and_then(Value::as_str).filter(|s| !s.is_empty());
                let old = replaces.and_then(|name| installed.csvs.get(name));
                out.operators.push(OperatorChange {
                    csv: r.name.clone(),
                    version: new.pointer("/spec/version").and_then(Value::as_str).map(str::to_owned),
                    replaces: replaces.map(str::to_owned),
                });
                let before = old.map(csv_grants).unwrap_or_default();
                diff_grants(&before, &csv_grants(&new), &mut permissions);
                out.deployments.extend(deployment_changes(old, &new));
                let names = |csv: Option<&Value>, pointer: &str, key: fn(&Value) -> Option<String>| -> BTreeSet<String> {
                    csv.and_then(|c| c.pointer(pointer)).and_then(Value::as_array).into_iter().flatten().filter_map(key).collect()
                };
                let webhook = |w: &Value| w.get("generateName").and_then(Value::as_str).map(|n| format!("{} ({})", n, w.get("type").and_then(Value::as_str).unwrap_or("webhook")));
                let api = |a: &Value| Some(format!("{}.{}", a.get("version")?.as_str()?, a.get("group")?.as_str()?));
                let before = names(old, "/spec/webhookdefinitions", webhook);
                out.webhooks_added.extend(names(Some(&new), "/spec/webhookdefinitions", webhook).difference(&before).cloned());
                let before = names(old, "/spec/apiservicedefinitions/owned", api);
                out.api_services_added.extend(names(Some(&new), "/spec/apiservicedefinitions/owned", api).difference(&before).cloned());
            }
            "CustomResourceDefinition" => out.crds.push(crd_change(&r.name, existing, &new)),
            // The CSV's own permissions, generated as roles: compared CSV to CSV above.
            "Role" | "ClusterRole" if generated_from_csv(&new) => out.other_objects.push(format!("{} {}", r.kind, r.name)),
            "Role" | "ClusterRole" => {
                let scope = format!("{} {}", r.kind, r.name);
                let grants = |object: &Value| rule_grants(object.get("rules"), &scope, None);
                diff_grants(&existing.map(grants).unwrap_or_default(), &grants(&new), &mut permissions);
                out.other_objects.push(scope);
            }
            _ => out.other_objects.push(format!("{} {}", r.kind, r.name)),
        }
    }
    out.permissions = group_grants(permissions);
    out
}

/// Whether an RBAC object of a plan is one OLM generates from its CSV's permissions (it carries
/// the CSV's owner labels), not one the bundle ships.
fn generated_from_csv(object: &Value) -> bool {
    object.pointer(&format!("/metadata/labels/{}", olm_api::keys::OWNER_KIND_LABEL.replace('/', "~1"))).and_then(Value::as_str)
        == Some("ClusterServiceVersion")
}

/// Every permission `csv` grants (its install's permissions and clusterPermissions), the verbs
/// of one resource together: what installing it would add where nothing is installed.
pub fn csv_permissions(csv: &Value) -> Vec<PermissionChange> {
    group_grants(csv_grants(csv).into_iter().map(|grant| (Change::Added, grant)).collect())
}

/// One verb on one resource (or URL), in a scope, for an account: what rules are made of.
type Grant = (String, Option<String>, String, Vec<String>, String);

/// Every grant of a CSV's permissions (`namespace`) and clusterPermissions (`cluster`).
fn csv_grants(csv: &Value) -> BTreeSet<Grant> {
    let mut out = BTreeSet::new();
    for (field, scope) in [("permissions", "namespace"), ("clusterPermissions", "cluster")] {
        let entries = csv.pointer(&format!("/spec/install/spec/{field}")).and_then(Value::as_array);
        for entry in entries.into_iter().flatten() {
            let account = entry.get("serviceAccountName").and_then(Value::as_str).map(str::to_owned);
            out.extend(rule_grants(entry.get("rules"), scope, account));
        }
    }
    out
}

fn strings(value: Option<&Value>) -> Vec<String> {
    value.and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).map(str::to_owned).collect()
}

/// The grants of a list of PolicyRules.
fn rule_grants(rules: Option<&Value>, scope: &str, account: Option<String>) -> BTreeSet<Grant> {
    let mut out = BTreeSet::new();
    for rule in rules.and_then(Value::as_array).into_iter().flatten() {
        let verbs = strings(rule.get("verbs"));
        let mut names = strings(rule.get("resourceNames"));
        names.sort();
        let mut targets: Vec<String> = Vec::new();
        let groups = strings(rule.get("apiGroups"));
        for resource in strings(rule.get("resources")) {
            for group in &groups {
                targets.push(if group.is_empty() { resource.clone() } else { format!("{resource}.{group}") });
            }
        }
        targets.extend(strings(rule.get("nonResourceURLs")));
        for target in targets {
            for verb in &verbs {
                out.insert((scope.to_owned(), account.clone(), target.clone(), names.clone(), verb.clone()));
            }
        }
    }
    out
}

fn diff_grants(before: &BTreeSet<Grant>, after: &BTreeSet<Grant>, out: &mut BTreeSet<(Change, Grant)>) {
    out.extend(after.difference(before).map(|g| (Change::Added, g.clone())));
    out.extend(before.difference(after).map(|g| (Change::Removed, g.clone())));
}

/// Grants back into lines: the verbs of one resource in one scope together.
fn group_grants(grants: BTreeSet<(Change, Grant)>) -> Vec<PermissionChange> {
    let mut lines: Vec<PermissionChange> = Vec::new();
    for (change, (scope, service_account, resource, resource_names, verb)) in grants {
        match lines.last_mut() {
            Some(last)
                if last.change == change
                    && last.scope == scope
                    && last.service_account == service_account
                    && last.resource == resource
                    && last.resource_names == resource_names =>
            {
                last.verbs.push(verb);
            }
            _ => lines.push(PermissionChange {
                change,
                scope,
                service_account,
                resource,
                resource_names,
                verbs: vec![verb],
            }),
        }
    }
    lines
}

fn version_names(crd: &Value) -> BTreeSet<String> {
    olm_install::crd_rules::version_names(crd).into_iter().map(str::to_owned).collect()
}

fn storage_version(crd: &Value) -> Option<String> {
    crd.pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|v| v.get("storage") == Some(&Value::Bool(true)))
        .and_then(|v| v.get("name")?.as_str().map(str::to_owned))
}

fn crd_change(name: &str, existing: Option<&Value>, new: &Value) -> CrdChange {
    let after = version_names(new);
    let Some(existing) = existing else {
        return CrdChange {
            name: name.to_owned(),
            new: true,
            added_versions: after.into_iter().collect(),
            ..CrdChange::default()
        };
    };
    let before = version_names(existing);
    let storage = match (storage_version(existing), storage_version(new)) {
        (Some(from), Some(to)) if from != to => Some((from, to)),
        _ => None,
    };
    let stored: BTreeSet<String> = existing
        .pointer("/status/storedVersions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect();
    let removed: Vec<String> = before.difference(&after).cloned().collect();
    CrdChange {
        name: name.to_owned(),
        new: false,
        added_versions: after.difference(&before).cloned().collect(),
        removed_stored_versions: removed.iter().filter(|v| stored.contains(*v)).cloned().collect(),
        removed_versions: removed,
        storage_version: storage,
        changed_schemas: before
            .intersection(&after)
            .filter(|v| served_schema(existing, v) != served_schema(new, v))
            .cloned()
            .collect(),
        invalid_objects: Vec::new(),
    }
}

/// The Deployments of a CSV's install strategy, by name.
fn deployments(csv: &Value) -> BTreeMap<String, &Value> {
    csv.pointer("/spec/install/spec/deployments")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|d| Some((d.get("name")?.as_str()?.to_owned(), d.get("spec")?)))
        .collect()
}

fn containers(spec: &Value) -> BTreeMap<String, &Value> {
    spec.pointer("/template/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| Some((c.get("name")?.as_str()?.to_owned(), c)))
        .collect()
}

fn deployment_changes(old: Option<&Value>, new: &Value) -> Vec<DeploymentChange> {
    let before = old.map(deployments).unwrap_or_default();
    let after = deployments(new);
    let image = |c: &Value| c.get("image").and_then(Value::as_str).map(str::to_owned);
    let replicas = |spec: &Value| spec.get("replicas").and_then(Value::as_i64);
    let mut out = Vec::new();
    for name in before.keys().chain(after.keys()).collect::<BTreeSet<_>>() {
        let (old, new) = (before.get(name), after.get(name));
        let mut change = DeploymentChange { name: name.clone(), ..DeploymentChange::default() };
        let (old_containers, new_containers) = (old.map(|s| containers(s)).unwrap_or_default(), new.map(|s| containers(s)).unwrap_or_default());
        for container in old_containers.keys().chain(new_containers.keys()).collect::<BTreeSet<_>>() {
            let (was, is) = (old_containers.get(container), new_containers.get(container));
            let resources = |c: Option<&&Value>| c.and_then(|c| c.get("resources")).map(Value::to_string).unwrap_or_else(|| "{}".into());
            let entry = ContainerChange {
                name: container.clone(),
                image_before: was.and_then(|c| image(c)),
                image_after: is.and_then(|c| image(c)),
                resources: (was.is_some() && is.is_some() && resources(was) != resources(is)).then(|| (resources(was), resources(is))),
            };
            if was.is_none() || is.is_none() || entry.image_before != entry.image_after || entry.resources.is_some() {
                change.containers.push(entry);
            }
        }
        change.change = match (old, new) {
            (None, _) => "added",
            (_, None) => "removed",
            _ => "changed",
        }
        .to_owned();
        if let (Some(old), Some(new)) = (old, new)
            && replicas(old) != replicas(new)
        {
            change.replicas = Some((replicas(old), replicas(new)));
        }
        if change.change != "changed" || change.replicas.is_some() || !change.containers.is_empty() {
            out.push(change);
        }
    }
    out
}
