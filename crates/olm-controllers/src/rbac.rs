//! Generated ClusterRoles, pure part: the per-API admin/edit/view roles of a Succeeded CSV and
//! the aggregated `olm.og.<group>.<admin|edit|view>-` roles of an OperatorGroup.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::rbac::v1::{AggregationRule, ClusterRole, PolicyRule};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use kube::ResourceExt;
use olm_api::keys;
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;

/// Label prefix OperatorGroup roles aggregate on.
pub const OPERATOR_GROUP_AGGREGATION_PREFIX: &str = "olm.opgroup.permissions/aggregate-to-";
/// Label prefix of the default Kubernetes admin/edit/view aggregation.
pub const KUBE_AGGREGATION_PREFIX: &str = "rbac.authorization.k8s.io/aggregate-to-";
/// Role types with their verbs.
pub const ROLE_TYPES: [(&str, &[&str]); 3] = [
    ("admin", &["*"]),
    ("edit", &["create", "update", "patch", "delete"]),
    ("view", &["get", "list", "watch"]),
];
/// Longest object name Kubernetes accepts for a ClusterRole.
const NAME_LIMIT: usize = 253;
/// Characters the API server appends to a generateName (and OLM to an OperatorGroup role).
pub const GENERATED_SUFFIX: usize = 5;

/// FNV-1a, 64 bit: the hash upstream uses for API keys (`Kind.version.group`), as lower hex.
pub fn gvk_hash(api: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in api.as_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{hash:x}")
}

/// The label that aggregates the `suffix` role of `api` (`Kind.version.group`) into groups' roles.
pub fn aggregation_label(api: &str, suffix: &str) -> String {
    format!("{OPERATOR_GROUP_AGGREGATION_PREFIX}{}-{suffix}", gvk_hash(api))
}

/// The name prefix of an OperatorGroup's `suffix` role: `olm.og.<group>.<suffix>-`, with the
/// group name shortened so that the generated name fits.
pub fn operator_group_role_prefix(group: &str, suffix: &str) -> String {
    let fixed = "olm.og.".len() + 1 + suffix.len() + 1 + GENERATED_SUFFIX;
    let keep = NAME_LIMIT.saturating_sub(fixed).min(group.len());
    let mut cut = keep;
    while !group.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("olm.og.{}.{suffix}-", &group[..cut])
}

/// The aggregation rule of an OperatorGroup's `suffix` role over its provided `apis`
/// (`None` when it provides nothing).
pub fn operator_group_aggregation(apis: &BTreeSet<String>, suffix: &str) -> Option<AggregationRule> {
    if apis.is_empty() {
        return None;
    }
    Some(AggregationRule {
        cluster_role_selectors: Some(
            apis.iter()
                .map(|api| LabelSelector {
                    match_labels: Some(BTreeMap::from([(aggregation_label(api, suffix), "true".to_owned())])),
                    match_expressions: None,
                })
                .collect(),
        ),
    })
}

/// The per-API ClusterRoles of a CSV's owned CRDs, each owned by its CRD (so they go with it):
/// `<crd>-<version>-admin|edit|view` and `<crd>-<version>-crdview`. `crd_uids` maps CRD names to
/// uids; CRDs not in it are skipped.
pub fn provided_api_roles(csv: &ClusterServiceVersion, crd_uids: &BTreeMap<String, String>) -> Vec<ClusterRole> {
    let mut roles = Vec::new();
    for owned in csv.spec.owned_crds() {
        let Some(uid) = crd_uids.get(&owned.name) else {
            continue;
        };
        let Some((plural, group)) = owned.name.split_once('.') else {
            continue;
        };
        let api = format!("{}.{}.{}", owned.kind, owned.version, group);
        let owner = OwnerReference {
            api_version: "apiextensions.k8s.io/v1".into(),
            kind: "CustomResourceDefinition".into(),
            name: owned.name.clone(),
            uid: uid.clone(),
            controller: Some(false),
            block_owner_deletion: Some(false),
        };
        let role = |name: String, suffix: &str, rule: PolicyRule| ClusterRole {
            metadata: ObjectMeta {
                name: Some(name),
                labels: Some(BTreeMap::from([
                    (format!("{KUBE_AGGREGATION_PREFIX}{suffix}"), "true".to_owned()),
                    (aggregation_label(&api, suffix), "true".to_owned()),
                    (keys::MANAGED_LABEL.to_owned(), "true".to_owned()),
                ])),
                owner_references: Some(vec![owner.clone()]),
                ..Default::default()
            },
            rules: Some(vec![rule]),
            aggregation_rule: None,
        };
        let prefix = format!("{}-{}-", owned.name, owned.version);
        for (suffix, verbs) in ROLE_TYPES {
            roles.push(role(
                format!("{prefix}{suffix}"),
                suffix,
                PolicyRule {
                    verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
                    api_groups: Some(vec![group.to_owned()]),
                    resources: Some(vec![plural.to_owned()]),
                    ..Default::default()
                },
            ));
        }
        roles.push(role(
            format!("{prefix}crdview"),
            "view",
            PolicyRule {
                verbs: vec!["get".into()],
                api_groups: Some(vec!["apiextensions.k8s.io".into()]),
                resources: Some(vec!["customresourcedefinitions".into()]),
                resource_names: Some(vec![owned.name.clone()]),
                ..Default::default()
            },
        ));
    }
    roles
}

/// The label under which the watch cache keeps a digest of an aggregated role's aggregation
/// rule in place of the rule. Only the cache's copies carry it; nothing writes it.
const CACHED_AGGREGATION_DIGEST: &str = "olm.rs/cached-aggregation-digest";

/// What the watch cache keeps of an OLM ClusterRole: an aggregated one without the rules
/// kube-controller-manager aggregated into it (one copy per OperatorGroup of every provided
/// API's rules), which `role_is_current` does not compare, and with a digest of its
/// aggregation rule for the rule: each of the rule's selectors is a map of its own, and the
/// three roles of every OperatorGroup hold one per API the group provides (at 1,000
/// namespaces, most of what the cache of these roles held). The rule stays, emptied, so that
/// the role still reads as aggregated.
pub fn trim_cached_cluster_role(role: &mut ClusterRole) {
    if role.aggregation_rule.is_some() {
        role.rules = None;
        let digest = aggregation_digest(role.aggregation_rule.as_ref());
        role.aggregation_rule = Some(AggregationRule::default());
        role.metadata.labels.get_or_insert_with(Default::default).insert(CACHED_AGGREGATION_DIGEST.to_owned(), digest);
    }
}

fn aggregation_digest(rule: Option<&AggregationRule>) -> String {
    olm_api::unknown::json_digest(&rule).map_or_else(|_| String::new(), |digest| format!("{digest:016x}"))
}

/// Whether `existing` already is `wanted` (labels, owners, rules unless aggregated, aggregation).
/// `existing` may be as the cache keeps it ([`trim_cached_cluster_role`]).
pub fn role_is_current(existing: &ClusterRole, wanted: &ClusterRole) -> bool {
    let labels_ok = wanted.labels().iter().all(|(k, v)| existing.labels().get(k) == Some(v));
    let owners_ok = wanted.owner_references().iter().all(|w| existing.owner_references().iter().any(|e| e.uid == w.uid));
    // An aggregated role's rules are filled in by kube-controller-manager's aggregation
    // controller: comparing them with the (empty) wanted ones would re-apply the role on every
    // reconcile.
    let rules_ok = wanted.aggregation_rule.is_some() || existing.rules == wanted.rules;
    let existing_aggregation = match existing.labels().get(CACHED_AGGREGATION_DIGEST) {
        Some(digest) => digest.clone(),
        None => aggregation_digest(existing.aggregation_rule.as_ref()),
    };
    labels_ok && owners_ok && rules_ok && existing_aggregation == aggregation_digest(wanted.aggregation_rule.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_hash_matches_the_reference_values() {
        // FNV-1a 64 reference vectors.
        assert_eq!(gvk_hash(""), "cbf29ce484222325");
        assert_eq!(gvk_hash("a"), "af63dc4c8601ec8c");
        assert_eq!(
            aggregation_label("EtcdCluster.v1beta2.etcd.database.coreos.com", "view"),
            format!("olm.opgroup.permissions/aggregate-to-{}-view", gvk_hash("EtcdCluster.v1beta2.etcd.database.coreos.com"))
        );
    }

    #[test]
    fn aggregated_roles_are_current_whatever_rules_were_aggregated_into_them() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
        let aggregation = AggregationRule {
            cluster_role_selectors: Some(vec![LabelSelector {
                match_labels: Some([("olm.opgroup.permissions/aggregate-to-x-view".to_owned(), "true".to_owned())].into()),
                ..Default::default()
            }]),
        };
        let wanted = ClusterRole {
            aggregation_rule: Some(aggregation.clone()),
            ..Default::default()
        };
        let mut existing = wanted.clone();
        existing.rules = Some(vec![PolicyRule {
            verbs: vec!["get".into()],
            ..Default::default()
        }]);
        assert!(role_is_current(&existing, &wanted));
        // As the cache keeps it: without the rules and the rule's selectors.
        let mut cached = existing.clone();
        trim_cached_cluster_role(&mut cached);
        assert_eq!((cached.rules.as_ref(), cached.aggregation_rule.as_ref()), (None, Some(&AggregationRule::default())));
        assert!(role_is_current(&cached, &wanted));
        let mut other = wanted.clone();
        other.aggregation_rule = Some(AggregationRule {
            cluster_role_selectors: Some(vec![LabelSelector {
                match_labels: Some([("olm.opgroup.permissions/aggregate-to-y-view".to_owned(), "true".to_owned())].into()),
                ..Default::default()
            }]),
        });
        assert!(!role_is_current(&cached, &other), "a changed aggregation rule is not current");
        existing.aggregation_rule = None;
        assert!(!role_is_current(&existing, &wanted), "a changed aggregation rule is not current");
        // A plain role's rules still count.
        let plain = ClusterRole { rules: Some(vec![]), ..Default::default() };
        assert!(!role_is_current(&existing, &plain));
    }

    #[test]
    fn group_role_names_fit() {
        assert_eq!(operator_group_role_prefix("og", "admin"), "olm.og.og.admin-");
        let long = "x".repeat(300);
        assert!(operator_group_role_prefix(&long, "admin").len() + GENERATED_SUFFIX <= NAME_LIMIT);
    }
}
