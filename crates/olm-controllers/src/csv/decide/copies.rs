//! Copies of a CSV in its group's target namespaces, and the operator RBAC that goes with them
//! (lifted to cluster scope for an all-namespaces group, copied per namespace for explicit
//! targets).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use olm_api::keys;
use olm_api::v1alpha1::cluster_service_version::{ClusterServiceVersion, ClusterServiceVersionStatus, CsvReason};
use olm_runtime::EventNote;

use super::{CsvAction, CsvDecision, Observed, OwnedRbac, REQUEUE_RESYNC};
use crate::metadata::is_copiable;

/// What every copy of one original carries whatever its namespace, made once per pass: with
/// thousands of target namespaces, building and hashing a whole copy for each namespace on every
/// pass of an all-namespaces operator was most of its CPU.
pub struct CopyTemplate {
    labels: BTreeMap<String, String>,
    /// The original's annotations, minus what a copy must not carry, plus the spec hash.
    annotations: BTreeMap<String, String>,
    status: ClusterServiceVersionStatus,
}

/// How an existing copy differs from what it should be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyDrift {
    /// Nothing to write.
    None,
    /// Only its status: one status write.
    Status,
    /// Its spec, labels or annotations (or it does not exist): the whole copy is written.
    Content,
}

impl CopyTemplate {
    /// The template of `csv`'s copies when its status is `status`.
    pub fn of(csv: &ClusterServiceVersion, status: &ClusterServiceVersionStatus) -> Self {
        let own_ns = csv.namespace().unwrap_or_default();
        let mut labels = csv.labels().clone();
        // A copy is no component of the operator's Operator (upstream disowns copies).
        labels.retain(|key, _| keys::component_of([key]).next().is_none());
        labels.insert(keys::COPIED_FROM_LABEL.to_owned(), own_ns.clone());
        let mut annotations = csv.annotations().clone();
        annotations.remove(keys::TARGET_NAMESPACES_ANNOTATION);
        annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
        let status = ClusterServiceVersionStatus {
            phase: status.phase.clone(),
            reason: Some(CsvReason::Copied),
            message: Some(format!("The operator is running in {own_ns} but is managing this namespace")),
            last_update_time: status.last_update_time.clone(),
            last_transition_time: status.last_transition_time.clone(),
            ..Default::default()
        };
        // The hash lets a copy be compared without its content: the cache keeps copies without
        // their spec (one per namespace for every all-namespaces operator). The status needs
        // none: the cache keeps it, and it is written on its own.
        let copied = serde_json::json!({"spec": &csv.spec, "labels": &labels, "annotations": &annotations});
        annotations.insert(keys::COPY_HASH_SPEC_ANNOTATION.to_owned(), crate::metadata::hash_json(&copied));
        CopyTemplate { labels, annotations, status }
    }

    /// The copy of `csv` (the original the template was made of) in `namespace`.
    pub fn copy_into(&self, csv: &ClusterServiceVersion, namespace: &str) -> ClusterServiceVersion {
        ClusterServiceVersion {
            metadata: ObjectMeta {
                name: Some(csv.name_any()),
                namespace: Some(namespace.to_owned()),
                labels: Some(self.labels.clone()),
                annotations: Some(self.annotations.clone()),
                ..Default::default()
            },
            spec: csv.spec.clone(),
            status: Some(self.status.clone()),
        }
    }

    /// The status every copy carries.
    pub fn status(&self) -> &ClusterServiceVersionStatus {
        &self.status
    }

    /// How `existing` (maybe trimmed by the cache) differs from its template.
    pub fn drift(&self, existing: &ClusterServiceVersion) -> CopyDrift {
        let hash = self.annotations.get(keys::COPY_HASH_SPEC_ANNOTATION);
        let content = hash.is_some()
            && existing.annotations().get(keys::COPY_HASH_SPEC_ANNOTATION) == hash
            && self.labels.iter().all(|(k, v)| existing.labels().get(k) == Some(v))
            && !existing.annotations().contains_key(keys::TARGET_NAMESPACES_ANNOTATION);
        // The status is compared times included: a hand edit of a copy's status, even of a
        // time alone, is reverted (upstream's csv_e2e_test.go:573).
        let status_key = |s: &ClusterServiceVersionStatus| {
            (s.phase.clone(), s.reason.clone(), s.message.clone(), s.last_update_time.clone(), s.last_transition_time.clone())
        };
        if !content {
            CopyDrift::Content
        } else if existing.status.as_ref().map(status_key) != Some(status_key(&self.status)) {
            CopyDrift::Status
        } else {
            CopyDrift::None
        }
    }
}

/// A copy to write into one namespace. The copy itself is made when it is written: a pass of
/// an all-namespaces operator writes thousands, and holding each whole in the decision was
/// most of `olm run`'s peak memory at 10,000 namespaces (716 MiB against 559 settled).
#[derive(Debug, Clone, PartialEq)]
pub struct CopyWrite {
    namespace: String,
    /// The uid of the copy it rewrites (none: a new copy, created).
    uid: Option<String>,
    /// The copy without namespace, shared by every namespace of the pass.
    template: std::sync::Arc<ClusterServiceVersion>,
}

impl CopyWrite {
    /// The namespace it writes into.
    pub fn namespace(&self) -> Option<String> {
        Some(self.namespace.clone())
    }

    /// The copy it writes.
    pub fn build(&self) -> ClusterServiceVersion {
        let mut copy = (*self.template).clone();
        copy.metadata.namespace = Some(self.namespace.clone());
        copy.metadata.uid.clone_from(&self.uid);
        copy
    }
}

/// The copy of `csv` OLM places in `namespace`.
pub fn copy_of(csv: &ClusterServiceVersion, namespace: &str, status: &ClusterServiceVersionStatus) -> ClusterServiceVersion {
    CopyTemplate::of(csv, status).copy_into(csv, namespace)
}

/// `copy` (decided from the cached, trimmed original) with the fields the cache leaves out
/// taken from `full`, a fresh read of the original; the copy hashes stay those of the decision.
pub fn with_full_content(copy: &ClusterServiceVersion, full: &ClusterServiceVersion) -> ClusterServiceVersion {
    let mut copy = copy.clone();
    copy.spec = full.spec.clone();
    let annotations = copy.metadata.annotations.get_or_insert_with(Default::default);
    for (key, value) in full.annotations() {
        if key != keys::TARGET_NAMESPACES_ANNOTATION && key != "kubectl.kubernetes.io/last-applied-configuration" {
            annotations.entry(key.clone()).or_insert_with(|| value.clone());
        }
    }
    copy
}

/// Add the copy actions for the status the CSV ends up with.
pub(super) fn decide_copies(observed: &Observed<'_>, targets: Option<&[String]>, mut decision: CsvDecision) -> CsvDecision {
    let csv = observed.csv;
    let own = csv.namespace().unwrap_or_default();
    let status = decision.status.clone().or_else(|| csv.status.clone()).unwrap_or_default();
    let copiable = is_copiable(&status);
    let wanted: BTreeSet<String> = match targets {
        Some(targets) if copiable => {
            if targets == [String::new()] {
                if observed.copied_csvs_disabled {
                    BTreeSet::new()
                } else {
                    observed.active_namespaces.iter().filter(|ns| **ns != own).cloned().collect()
                }
            } else {
                targets
                    .iter()
                    .filter(|ns| **ns != own && observed.active_namespaces.contains(ns))
                    .cloned()
                    .collect()
            }
        }
        _ => BTreeSet::new(),
    };
    let existing: BTreeMap<String, &ClusterServiceVersion> = observed
        .copies
        .iter()
        .map(|c| (c.namespace().unwrap_or_default(), *c))
        .collect();
    // The lifted roles go first: when the group's ServiceAccount may not write them, the pass
    // stops there and no copy tells other namespaces the operator succeeded.
    if copiable && targets.is_some_and(|t| t == [String::new()]) {
        decision = lift_rbac(observed, decision);
    }
    let template = CopyTemplate::of(csv, &status);
    let mut whole: Option<std::sync::Arc<ClusterServiceVersion>> = None;
    for ns in wanted.iter().filter(|ns| !observed.taken_namespaces.contains(*ns)) {
        match existing.get(ns).map_or(CopyDrift::Content, |current| template.drift(current)) {
            CopyDrift::None => {}
            CopyDrift::Status => {
                decision = decision.act(CsvAction::SetCopyStatus { namespace: ns.clone(), status: Box::new(template.status().clone()) });
            }
            CopyDrift::Content => {
                // The uid of the copy it rewrites (none: a new copy, created, never applied over
                // whatever took the name meanwhile): a copy is written over its own copy only,
                // never over another group's CSV of the same name the cache has not shown yet.
                let template = whole.get_or_insert_with(|| {
                    let mut copy = template.copy_into(csv, "");
                    copy.metadata.namespace = None;
                    std::sync::Arc::new(copy)
                });
                let uid = existing.get(ns).and_then(|current| current.metadata.uid.clone());
                decision = decision.act(CsvAction::ApplyCopy(CopyWrite { namespace: ns.clone(), uid, template: template.clone() }));
            }
        }
    }
    let mut removed = 0usize;
    for ns in existing.keys() {
        if !wanted.contains(ns) {
            decision = decision.act(CsvAction::DeleteCopy { namespace: ns.clone() });
            removed += 1;
        }
    }
    let disabled_for_all = copiable && observed.copied_csvs_disabled && targets.is_some_and(|t| t == [String::new()]);
    if disabled_for_all && removed > 0 {
        decision = decision.event(EventNote::warning(
            "DisabledCopiedCSVs",
            "DeleteCopies",
            format!(
                "Copied CSVs are disabled by OLMConfig {}: removing {removed} copies of this all-namespaces operator",
                olm_api::v1::olm_config::OLM_CONFIG_NAME
            ),
        ));
    }
    decision
}

/// For an all-namespaces group the operator's Roles and RoleBindings become ClusterRoles and
/// ClusterRoleBindings of the same names (plus read access to namespaces), as upstream does.
/// Lifted roles carry `olm.managed=true` and the CSV's owner labels (they are deleted with it).
fn lift_rbac(observed: &Observed<'_>, mut decision: CsvDecision) -> CsvDecision {
    let owner = crate::metadata::owner_labels(observed.csv);
    for role in &observed.owned_rbac.roles {
        let mut labels = role.labels().clone();
        labels.extend(owner.clone());
        labels.insert(keys::MANAGED_LABEL.to_owned(), "true".to_owned());
        let mut rules = role.rules.clone().unwrap_or_default();
        rules.push(PolicyRule {
            verbs: vec!["get".into(), "list".into(), "watch".into()],
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["namespaces".into()]),
            ..Default::default()
        });
        let lifted = ClusterRole {
            metadata: ObjectMeta {
                name: Some(role.name_any()),
                labels: Some(labels),
                ..Default::default()
            },
            rules: Some(rules),
            aggregation_rule: None,
        };
        let current = observed
            .cluster_roles
            .get(&role.name_any())
            .is_some_and(|existing| crate::rbac::role_is_current(existing, &lifted));
        if current {
            continue;
        }
        decision = decision.act(CsvAction::ApplyClusterRole(Box::new(lifted)));
        for binding in observed.owned_rbac.bindings.iter().filter(|b| b.role_ref.name == role.name_any()) {
            let mut labels = binding.labels().clone();
            labels.extend(owner.clone());
            labels.insert(keys::MANAGED_LABEL.to_owned(), "true".to_owned());
            decision = decision.act(CsvAction::ApplyClusterRoleBinding(Box::new(ClusterRoleBinding {
                metadata: ObjectMeta {
                    name: Some(binding.name_any()),
                    labels: Some(labels),
                    ..Default::default()
                },
                role_ref: RoleRef {
                    api_group: Some("rbac.authorization.k8s.io".into()),
                    kind: "ClusterRole".into(),
                    name: binding.role_ref.name.clone(),
                },
                subjects: binding.subjects.clone(),
            })));
        }
    }
    decision
}

/// The operator's Roles and RoleBindings copied into a target namespace, owned by the copied
/// CSV there (so they go with it) and labelled `olm.copiedFrom`.
pub fn tenant_rbac(original: &ClusterServiceVersion, owned: &OwnedRbac, copy: &ClusterServiceVersion) -> Vec<CsvAction> {
    let own = original.namespace().unwrap_or_default();
    let target = copy.namespace().unwrap_or_default();
    let mut labels = crate::metadata::owner_labels(copy);
    labels.insert(keys::COPIED_FROM_LABEL.to_owned(), own);
    let owner = copy.uid().map(|uid| {
        vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "operators.coreos.com/v1alpha1".into(),
            kind: "ClusterServiceVersion".into(),
            name: copy.name_any(),
            uid,
            controller: Some(false),
            block_owner_deletion: Some(false),
        }]
    });
    let meta = |name: String| ObjectMeta {
        name: Some(name),
        namespace: Some(target.clone()),
        labels: Some(labels.clone()),
        owner_references: owner.clone(),
        ..Default::default()
    };
    let roles = owned.roles.iter().map(|role| {
        CsvAction::ApplyRole(Box::new(Role {
            metadata: meta(role.name_any()),
            rules: role.rules.clone(),
        }))
    });
    let bindings = owned.bindings.iter().map(|binding| {
        CsvAction::ApplyRoleBinding(Box::new(RoleBinding {
            metadata: meta(binding.name_any()),
            role_ref: binding.role_ref.clone(),
            subjects: binding.subjects.clone(),
        }))
    });
    roles.chain(bindings).collect()
}

/// Decide for a copied CSV: it is deleted once its original is gone; the original keeps it
/// up to date and removes it from namespaces that are no longer targets. In a namespace that an
/// explicit target list names, the copy carries the operator's Roles and RoleBindings, so the
/// operator may act there (upstream's tenant RBAC).
pub fn decide_copy(copy: &ClusterServiceVersion, original: Option<&ClusterServiceVersion>, owned: &OwnedRbac) -> CsvDecision {
    let mut decision = CsvDecision {
        actions: Vec::new(),
        status: None,
        events: Vec::new(),
        requeue_after: Some(REQUEUE_RESYNC),
    };
    // A copy carries no finalizer: the controller that removes it acts on originals only. One
    // that has the cleanup finalizer (a CSV that an older OLM's copy was written over) would
    // hold its namespace Terminating for ever: its cluster objects go and the finalizer with them.
    if let Some(index) = super::finalizer::position(copy) {
        if copy.metadata.deletion_timestamp.is_some() {
            decision = decision.act(CsvAction::DeleteOwnedClusterObjects);
        }
        return decision.act(CsvAction::RemoveFinalizer { index });
    }
    if copy.metadata.deletion_timestamp.is_some() {
        return decision;
    }
    let Some(original) = original else {
        return decision.act(CsvAction::DeleteSelf);
    };
    // A copy whose olm.operatorNamespace does not name its original's namespace (someone
    // changed it) is deleted, as upstream deletes such dangling copies; the original copies
    // itself again.
    let operator_namespace = copy.annotations().get(keys::OPERATOR_NAMESPACE_ANNOTATION);
    if operator_namespace.is_some_and(|ns| Some(ns) != original.namespace().as_ref() || Some(ns) == copy.namespace().as_ref()) {
        return decision.act(CsvAction::DeleteSelf);
    }
    let explicit_targets = original
        .annotations()
        .get(keys::TARGET_NAMESPACES_ANNOTATION)
        .is_some_and(|t| !t.is_empty());
    if explicit_targets {
        for action in tenant_rbac(original, owned, copy) {
            decision = decision.act(action);
        }
    }
    decision
}
