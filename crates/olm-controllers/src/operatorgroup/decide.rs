//! Pure decisions of the OperatorGroup controller: target namespaces, status, member CSV
//! annotations, the `olm.providedAPIs` annotation and target-namespace labels.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::core::{Selector, SelectorExt};
use olm_api::keys;
use olm_api::v1::operator_group::{
    MULTIPLE_OPERATOR_GROUP_CONDITION, MULTIPLE_OPERATOR_GROUPS_FOUND_REASON, OperatorGroup, OperatorGroupStatus,
    SERVICE_ACCOUNT_CONDITION, SERVICE_ACCOUNT_NOT_FOUND_REASON,
};
use olm_api::v1alpha1::cluster_service_version::{ClusterServiceVersion, CsvPhase, CsvReason};

use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use olm_runtime::Decision;

use crate::metadata::{member_annotations, operator_group_owner_labels, provided_apis};
use crate::rbac::{GENERATED_SUFFIX, ROLE_TYPES, operator_group_aggregation, operator_group_role_prefix, role_is_current};

/// A namespace as the OperatorGroup controller sees it, borrowed from the cache: every pass
/// of every group reads every namespace, so a copy of each was O(N) allocations per pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NamespaceView<'a> {
    /// Name.
    pub name: &'a str,
    /// Labels.
    pub labels: &'a BTreeMap<String, String>,
}

/// What the controller observed for one OperatorGroup.
#[derive(Debug)]
pub struct Observed<'a> {
    /// The group.
    pub group: &'a OperatorGroup,
    /// How many OperatorGroups its namespace has (including this one).
    pub groups_in_namespace: usize,
    /// Every namespace of the cluster.
    pub namespaces: &'a [NamespaceView<'a>],
    /// The CSVs in the group's namespace (copies included; they are skipped).
    pub csvs: Vec<&'a ClusterServiceVersion>,
    /// The ClusterRoles labelled as owned by this group.
    pub cluster_roles: Vec<&'a ClusterRole>,
    /// Names the group's roles could take ([`operator_group_role_names`]) that another
    /// group's role already has.
    pub taken_role_names: BTreeSet<String>,
    /// Whether `spec.serviceAccountName` exists in the group's namespace (None: not set).
    pub service_account_exists: Option<bool>,
}

/// Effects the OperatorGroup controller performs.
#[derive(Clone, Debug, PartialEq)]
pub enum OgAction {
    /// Set (or, for `None` values, remove) annotations on a member CSV.
    AnnotateCsv {
        /// CSV name (in the group's namespace).
        name: String,
        /// Annotation key to value; `None` removes the key.
        annotations: BTreeMap<String, Option<String>>,
    },
    /// Set the group's `olm.providedAPIs` annotation.
    SetProvidedApis {
        /// The sorted, comma-separated list.
        value: String,
    },
    /// Create or update one of the group's aggregated ClusterRoles.
    ApplyClusterRole(Box<ClusterRole>),
    /// Delete a duplicate aggregated ClusterRole.
    DeleteClusterRole {
        /// Name of the role.
        name: String,
    },
    /// Add the `olm.operatorgroup.uid/<uid>` label to a target namespace.
    LabelNamespace {
        /// Namespace.
        namespace: String,
        /// Label key.
        key: String,
    },
    /// Remove the group's `olm.operatorgroup.uid/<uid>` label from a namespace it no longer
    /// targets (or all of them, once it targets all namespaces), as upstream does.
    UnlabelNamespace {
        /// Namespace.
        namespace: String,
        /// Label key.
        key: String,
    },
}

/// The decision for one OperatorGroup.
pub type OgDecision = Decision<OgAction, OperatorGroupStatus>;

/// The resolved target namespaces: explicit list, else selector matches, else all (`[""]`).
/// Sorted and deduplicated; explicit targets that do not exist (yet) are kept, as upstream does,
/// so that an operator sees the namespace as soon as it is created.
///
/// The selector is kube-core's, whose matching is Kubernetes' label-selector matching (matchLabels
/// and In, NotIn, Exists, DoesNotExist, all of them required). A selector without requirements
/// selects every namespace. A selector Kubernetes would refuse for its operator (not one of those
/// four) or for an In or NotIn without `values` selects no namespace: upstream's sync stops at
/// such a group, and a group never targets more than its author asked for.
pub fn target_namespaces(group: &OperatorGroup, namespaces: &[NamespaceView<'_>]) -> Vec<String> {
    let spec = &group.spec;
    if let Some(targets) = spec.target_namespaces.as_ref().filter(|t| !t.is_empty()) {
        let set: BTreeSet<String> = targets.iter().filter(|t| !t.is_empty()).cloned().collect();
        return set.into_iter().collect();
    }
    match spec.selector.clone().map(Selector::try_from) {
        None => vec![String::new()],
        Some(Ok(selector)) if selector.selects_all() => vec![String::new()],
        Some(Ok(selector)) => {
            let set: BTreeSet<String> = namespaces
                .iter()
                .filter(|ns| selector.matches(ns.labels))
                .map(|ns| ns.name.to_owned())
                .collect();
            set.into_iter().collect()
        }
        Some(Err(_)) => Vec::new(),
    }
}

/// CSVs whose APIs do not count as provided by the group: not yet past the group checks
/// (phase None: counting them early would make an older CSV elsewhere see a conflict first), or
/// failed because of their group.
fn excluded_from_provided_apis(csv: &ClusterServiceVersion) -> bool {
    matches!(csv.phase(), None | Some(CsvPhase::None)) || matches!(
        csv.status.as_ref().and_then(|s| s.reason.as_ref()),
        Some(
            CsvReason::InterOperatorGroupOwnerConflict
                | CsvReason::TooManyOperatorGroups
                | CsvReason::NoOperatorGroup
                | CsvReason::UnsupportedOperatorGroup
        )
    )
}

/// How many names a group's role may try before giving up (each after another group's role
/// took the one before).
const ROLE_NAME_CANDIDATES: usize = 8;

/// The names the group's `suffix` role may take, in order: `olm.og.<group>.<suffix>-` and 5
/// characters derived from the group's uid (upstream lets the API server pick them), so that
/// re-applying never creates a second role; then the same from the uid and a counter. Five
/// characters collide often among a thousand groups of the same name in as many namespaces,
/// and two groups writing one role would take turns rewriting it, each aggregating its own APIs.
pub fn operator_group_role_names(group: &OperatorGroup, suffix: &str) -> impl Iterator<Item = String> {
    let prefix = operator_group_role_prefix(&group.name_any(), suffix);
    let uid = group.uid().unwrap_or_default();
    (0..ROLE_NAME_CANDIDATES).map(move |n| {
        let seed = if n == 0 { uid.clone() } else { format!("{uid}/{n}") };
        let tag = crate::metadata::hash_json(&serde_json::Value::String(seed));
        format!("{prefix}{}", &tag[..GENERATED_SUFFIX])
    })
}

/// The group's `suffix` role, named `name`.
pub fn operator_group_role(group: &OperatorGroup, name: String, suffix: &str, apis: &BTreeSet<String>) -> ClusterRole {
    let mut labels = operator_group_owner_labels(group);
    labels.insert(keys::MANAGED_LABEL.to_owned(), "true".to_owned());
    ClusterRole {
        metadata: ObjectMeta {
            name: Some(name),
            labels: Some(labels),
            ..Default::default()
        },
        rules: None,
        aggregation_rule: operator_group_aggregation(apis, suffix),
    }
}

/// Decide the status and effects for one OperatorGroup.
pub fn decide(observed: &Observed<'_>, now: Timestamp) -> OgDecision {
    let group = observed.group;
    let targets = target_namespaces(group, observed.namespaces);
    let previous = group.status.clone().unwrap_or_default();

    let mut status = OperatorGroupStatus {
        namespaces: Some(targets.clone()),
        service_account_ref: previous.service_account_ref.clone(),
        last_updated: previous.last_updated.clone(),
        conditions: None,
    };
    if previous.namespaces.as_ref() != Some(&targets) || status.last_updated.is_none() {
        status.last_updated = Some(Time(now));
    }

    // Conditions set by other writers are kept; ours is set or cleared.
    let mut conditions: Vec<Condition> = previous
        .conditions
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c.type_ != MULTIPLE_OPERATOR_GROUP_CONDITION && c.type_ != SERVICE_ACCOUNT_CONDITION)
        .collect();
    // spec.serviceAccountName: referenced when it exists, reported when it does not.
    status.service_account_ref = None;
    if let (Some(sa), Some(exists)) = (group.spec.service_account_name.as_ref(), observed.service_account_exists) {
        let namespace = group.namespace().unwrap_or_default();
        if exists {
            status.service_account_ref = Some(k8s_openapi::api::core::v1::ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("ServiceAccount".into()),
                name: Some(sa.clone()),
                namespace: Some(namespace),
                ..Default::default()
            });
        } else {
            let transition = previous
                .conditions
                .iter()
                .flatten()
                .find(|c| c.type_ == SERVICE_ACCOUNT_CONDITION && c.status == "True")
                .map(|c| c.last_transition_time.clone())
                .unwrap_or(Time(now));
            conditions.push(Condition {
                type_: SERVICE_ACCOUNT_CONDITION.to_owned(),
                status: "True".to_owned(),
                reason: SERVICE_ACCOUNT_NOT_FOUND_REASON.to_owned(),
                message: format!("ServiceAccount {sa:?} not found in namespace {namespace:?}: create it or fix spec.serviceAccountName"),
                last_transition_time: transition,
                observed_generation: group.metadata.generation,
            });
        }
    }
    if observed.groups_in_namespace > 1 {
        let transition = previous
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == MULTIPLE_OPERATOR_GROUP_CONDITION && c.status == "True")
            .map(|c| c.last_transition_time.clone())
            .unwrap_or(Time(now));
        conditions.push(Condition {
            type_: MULTIPLE_OPERATOR_GROUP_CONDITION.to_owned(),
            status: "True".to_owned(),
            reason: MULTIPLE_OPERATOR_GROUPS_FOUND_REASON.to_owned(),
            message: "Multiple OperatorGroup found in the same namespace".to_owned(),
            last_transition_time: transition,
            observed_generation: group.metadata.generation,
        });
    }
    status.conditions = (!conditions.is_empty()).then_some(conditions);

    let mut decision = OgDecision::status(status);

    let members: Vec<&ClusterServiceVersion> = observed.csvs.iter().copied().filter(|c| !c.is_copied()).collect();

    // Member annotations: only when the group is the namespace's only group; with more than
    // one, the CSVs fail with TooManyOperatorGroups instead.
    if observed.groups_in_namespace == 1 {
        let wanted = member_annotations(group, &targets);
        for csv in &members {
            let current = csv.metadata.annotations.clone().unwrap_or_default();
            let changes: BTreeMap<String, Option<String>> = wanted
                .iter()
                .filter(|(key, value)| current.get(*key) != Some(*value))
                .map(|(key, value)| (key.clone(), Some(value.clone())))
                .collect();
            if !changes.is_empty() {
                decision = decision.act(OgAction::AnnotateCsv {
                    name: csv.name_any(),
                    annotations: changes,
                });
            }
        }
    }

    // olm.providedAPIs: the union of what the members provide. Upstream does not prune while a
    // member is still being set up (phase None or Pending), so an API never flickers away.
    let current: BTreeSet<String> = group
        .annotations()
        .get(keys::PROVIDED_APIS_ANNOTATION)
        .map(|v| v.split(',').filter(|s| !s.is_empty()).map(str::to_owned).collect())
        .unwrap_or_default();
    let mut group_apis = current.clone();
    let mut provided_apis_write = None;
    if !group.spec.static_provided_apis.unwrap_or(false) {
        let mut wanted: BTreeSet<String> = members
            .iter()
            .filter(|csv| !excluded_from_provided_apis(csv))
            .flat_map(|csv| provided_apis(csv))
            .collect();
        let settling = members
            .iter()
            .any(|csv| matches!(csv.phase(), None | Some(CsvPhase::None | CsvPhase::Pending)));
        if settling {
            wanted.extend(current.iter().cloned());
        }
        // Written only when the set changes, as upstream: a group whose members provide
        // nothing has no annotation at all (clients wait for exactly that), and one whose APIs
        // all went keeps an empty one.
        if wanted != current {
            let value = wanted.iter().cloned().collect::<Vec<_>>().join(",");
            provided_apis_write = Some(OgAction::SetProvidedApis { value });
        }
        group_apis = wanted;
    }

    // The group's admin/edit/view roles aggregate the per-API roles of what it provides.
    for (suffix, _) in ROLE_TYPES {
        let prefix = operator_group_role_prefix(&group.name_any(), suffix);
        let mut existing: Vec<&ClusterRole> = observed
            .cluster_roles
            .iter()
            .copied()
            .filter(|r| r.name_any().starts_with(&prefix) && r.name_any().len() == prefix.len() + GENERATED_SUFFIX)
            .collect();
        existing.sort_by_key(|r| r.name_any());
        match existing.split_first() {
            None => {
                // All names taken cannot happen short of thousands of colliding groups; the
                // next pass tries again.
                if let Some(name) = operator_group_role_names(group, suffix).find(|name| !observed.taken_role_names.contains(name)) {
                    let wanted = operator_group_role(group, name, suffix, &group_apis);
                    decision = decision.act(OgAction::ApplyClusterRole(Box::new(wanted)));
                }
            }
            Some((first, extras)) => {
                let wanted = operator_group_role(group, first.name_any(), suffix, &group_apis);
                if !role_is_current(first, &wanted) {
                    decision = decision.act(OgAction::ApplyClusterRole(Box::new(wanted)));
                }
                for extra in extras {
                    decision = decision.act(OgAction::DeleteClusterRole { name: extra.name_any() });
                }
            }
        }
    }

    // The annotation after the roles: its own event brings the next pass, which would write a
    // role again if that role's event had not reached the cache yet (a role whose APIs a
    // client sees in the annotation is then aggregated already, too).
    if let Some(write) = provided_apis_write {
        decision = decision.act(write);
    }

    // Target namespaces carry the group's uid label (not for all-namespaces groups); no other
    // namespace does.
    if let Some(key) = group.namespace_label_key() {
        let labelled = targets != [String::new()];
        for ns in observed.namespaces {
            let wanted = labelled && targets.iter().any(|t| t == ns.name);
            match (wanted, ns.labels.contains_key(&key)) {
                (true, false) => decision = decision.act(OgAction::LabelNamespace { namespace: ns.name.to_owned(), key: key.clone() }),
                (false, true) => decision = decision.act(OgAction::UnlabelNamespace { namespace: ns.name.to_owned(), key: key.clone() }),
                _ => {}
            }
        }
    }
    decision
}

/// The `olm.operatorgroup.uid/<uid>` labels that name no existing OperatorGroup (the group was
/// deleted, maybe while OLM was down): `(namespace, key)` pairs to remove, as upstream's
/// namespace sync removes them.
pub fn stale_group_labels(namespaces: &[NamespaceView<'_>], group_uids: &BTreeSet<String>) -> Vec<(String, String)> {
    namespaces
        .iter()
        .flat_map(|ns| {
            ns.labels
                .keys()
                .filter(|k| k.strip_prefix(keys::OPERATOR_GROUP_UID_LABEL_PREFIX).is_some_and(|uid| !group_uids.contains(uid)))
                .map(|k| (ns.name.to_owned(), k.clone()))
        })
        .collect()
}
