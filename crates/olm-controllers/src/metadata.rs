//! The metadata OLM writes on objects, shared by every controller (imported downward, so no
//! controller reaches into another's decisions): owner labels and references, content hashes,
//! the OperatorGroup annotations of member CSVs, the API labels of a CSV, what a new CSV is
//! created with, which CSVs are copied into target namespaces, and what of a CSV wakes the
//! controllers that watch CSVs they do not own (`csv_change`).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::{Resource, ResourceExt};
use olm_api::keys;
use olm_api::v1::operator_group::OperatorGroup;
use olm_api::v1alpha1::cluster_service_version::{ClusterServiceVersion, ClusterServiceVersionStatus, CsvPhase};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// What the Subscription and OperatorGroup controllers read of a CSV they are woken by: its
/// identity, spec, labels, annotations, phase and reason; not the conditions and timestamps
/// that move with every status write (those woke every Subscription of the namespace for
/// nothing, several times per install).
#[derive(Debug, PartialEq, Hash)]
pub struct CsvChange {
    uid: Option<String>,
    generation: Option<i64>,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    phase: Option<CsvPhase>,
    reason: Option<olm_api::v1alpha1::cluster_service_version::CsvReason>,
}

/// The [`CsvChange`] view of `csv`.
pub fn csv_change(csv: &ClusterServiceVersion) -> CsvChange {
    CsvChange {
        uid: csv.uid(),
        generation: csv.meta().generation,
        labels: csv.labels().clone(),
        annotations: csv.annotations().clone(),
        phase: csv.phase().cloned(),
        reason: csv.status.as_ref().and_then(|s| s.reason.clone()),
    }
}

/// Whether `csv` was installed again by a rollback from `newer` (`olm-rs.io/rollback-of`):
/// the two name each other in `spec.replaces`, and `csv` is the replacement.
pub fn is_rollback_of(csv: &ClusterServiceVersion, newer: &str) -> bool {
    csv.annotation(keys::ROLLBACK_OF_ANNOTATION) == Some(newer)
}

/// The labels naming the owner `kind` `namespace/name` of an object OLM made for it.
pub fn owner_labels_of(name: &str, namespace: &str, kind: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (keys::OWNER_LABEL.to_owned(), name.to_owned()),
        (keys::OWNER_NAMESPACE_LABEL.to_owned(), namespace.to_owned()),
        (keys::OWNER_KIND_LABEL.to_owned(), kind.to_owned()),
    ])
}

/// The index key of a set of owner labels (name, namespace, kind), when it has all three.
fn owner_key(labels: &BTreeMap<String, String>) -> Option<u64> {
    let get = |key: &str| labels.get(key).map(String::as_str);
    Some(olm_runtime::cache::digest((get(keys::OWNER_LABEL)?, get(keys::OWNER_NAMESPACE_LABEL)?, get(keys::OWNER_KIND_LABEL)?)))
}

/// The index keys of an object by its owner labels (`Cache::index_by`).
pub fn owner_index_keys<K: Resource>(obj: &K) -> Vec<u64> {
    obj.meta().labels.as_ref().and_then(owner_key).into_iter().collect()
}

/// Whether `obj` carries every label of `owner`.
pub fn carries_owner<K: Resource>(obj: &K, owner: &BTreeMap<String, String>) -> bool {
    owner.iter().all(|(k, v)| obj.labels().get(k) == Some(v))
}

/// The objects of `cache` carrying every label of `owner`: from its owner index (a scan of
/// every object when it has none; per pass of every CSV and OperatorGroup, that was O(N)).
pub fn carrying_owner<K>(cache: &olm_runtime::Cache<K>, owner: &BTreeMap<String, String>) -> Vec<std::sync::Arc<K>>
where
    K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + Send + Sync + 'static,
{
    let carries = |obj: &K| carries_owner(obj, owner);
    match owner_key(owner) {
        Some(key) => cache.select(key, carries),
        None => cache.store().state_filter(carries),
    }
}

/// The owner labels OLM puts on everything it creates for a CSV.
pub fn owner_labels(csv: &ClusterServiceVersion) -> BTreeMap<String, String> {
    owner_labels_of(&csv.name_any(), &csv.namespace().unwrap_or_default(), &ClusterServiceVersion::kind(&()))
}

/// The label selector of what is labelled as owned by `csv`.
pub fn owner_selector(csv: &ClusterServiceVersion) -> String {
    owner_labels(csv)
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The Operator component labels of `csv` (`operators.coreos.com/<operator>`, set by its
/// InstallPlan step). What OLM creates for a CSV carries them too, so that it is a component of
/// the same Operators; a copied CSV has none (upstream's Operator never lists copies).
pub fn component_labels(csv: &ClusterServiceVersion) -> BTreeMap<String, String> {
    if csv.is_copied() {
        return BTreeMap::new();
    }
    csv.labels()
        .iter()
        .filter(|(key, _)| keys::component_of([*key]).next().is_some())
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect()
}

/// Whether `labels` name `csv` as owner.
pub fn owned_by(labels: &BTreeMap<String, String>, csv: &ClusterServiceVersion) -> bool {
    owner_labels(csv).iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// The ownerReference pointing at the CSV (not a controller reference, never blocks deletion).
pub fn owner_reference(csv: &ClusterServiceVersion) -> OwnerReference {
    OwnerReference {
        api_version: ClusterServiceVersion::api_version(&()).into_owned(),
        kind: ClusterServiceVersion::kind(&()).into_owned(),
        name: csv.name_any(),
        uid: csv.uid().unwrap_or_default(),
        controller: Some(false),
        block_owner_deletion: Some(false),
    }
}

/// A short, stable hash of a JSON value (the serialization is canonical: sorted maps).
pub fn hash_json(value: &Value) -> String {
    let bytes = serde_json::to_vec(value).unwrap_or_default();
    let digest = Sha256::digest(&bytes);
    hex::encode(&digest[..10])
}

/// The value of `olm.targetNamespaces` for a target list.
pub fn target_namespaces_annotation(targets: &[String]) -> String {
    targets.join(",")
}

/// The APIs a CSV provides, as `Kind.version.group` (owned CRDs and owned APIServices).
pub fn provided_apis(csv: &ClusterServiceVersion) -> BTreeSet<String> {
    let crds = csv
        .spec
        .owned_crds()
        .iter()
        .map(|crd| format!("{}.{}.{}", crd.kind, crd.version, crd.group()));
    let services = csv
        .spec
        .owned_api_services()
        .iter()
        .map(|api| format!("{}.{}.{}", api.kind, api.version, api.group));
    crds.chain(services).collect()
}

/// The three annotations every member CSV carries for `group` with `targets`.
pub fn member_annotations(group: &OperatorGroup, targets: &[String]) -> BTreeMap<String, String> {
    BTreeMap::from([
        (keys::OPERATOR_GROUP_ANNOTATION.to_owned(), group.name_any()),
        (
            keys::OPERATOR_NAMESPACE_ANNOTATION.to_owned(),
            group.namespace().unwrap_or_default(),
        ),
        (
            keys::TARGET_NAMESPACES_ANNOTATION.to_owned(),
            target_namespaces_annotation(targets),
        ),
    ])
}

/// Labels marking a ClusterRole as owned by `group`.
pub fn operator_group_owner_labels(group: &OperatorGroup) -> BTreeMap<String, String> {
    owner_labels_of(&group.name_any(), &group.namespace().unwrap_or_default(), "OperatorGroup")
}

/// Whether a CSV with `status` is copied into its target namespaces: once it has a phase, and
/// unless its reason says the group does not fit it.
pub fn is_copiable(status: &ClusterServiceVersionStatus) -> bool {
    match (&status.phase, &status.reason) {
        (None | Some(CsvPhase::None), _) => false,
        (_, Some(reason)) => !reason.is_uncopiable(),
        (_, None) => true,
    }
}

/// The `olm.api.<hash>` label of an API: FNV-1a (64 bit, lower-case hex) of `Kind.version.group`,
/// as upstream computes it.
pub fn api_label_key(kind: &str, version: &str, group: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in format!("{kind}.{version}.{group}").bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{}{hash:x}", keys::API_LABEL_PREFIX)
}

/// The label changes that index the CSV by the APIs it provides (`provided`) and requires
/// (`required`; upstream computes these but never writes them, we do), removing stale ones.
pub fn api_label_changes(csv: &ClusterServiceVersion) -> BTreeMap<String, Option<String>> {
    let mut wanted: BTreeMap<String, String> = BTreeMap::new();
    for crd in csv.spec.owned_crds() {
        wanted.insert(api_label_key(&crd.kind, &crd.version, crd.group()), "provided".to_owned());
    }
    for api in csv.spec.owned_api_services() {
        wanted.insert(api_label_key(&api.kind, &api.version, &api.group), "provided".to_owned());
    }
    for crd in csv.spec.required_crds() {
        wanted.insert(api_label_key(&crd.kind, &crd.version, crd.group()), "required".to_owned());
    }
    for api in csv.spec.required_api_services() {
        wanted.insert(api_label_key(&api.kind, &api.version, &api.group), "required".to_owned());
    }
    let labels = csv.labels();
    let mut changes: BTreeMap<String, Option<String>> = wanted
        .iter()
        .filter(|(k, v)| labels.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), Some(v.clone())))
        .collect();
    for key in labels.keys() {
        if key.starts_with(keys::API_LABEL_PREFIX) && !wanted.contains_key(key) {
            changes.insert(key.clone(), None);
        }
    }
    changes
}

/// What the CSV controller's first passes would write into a new CSV's metadata before
/// anything else (the cleanup finalizer, the API labels, its OperatorGroup's annotations when
/// the namespace has exactly one group with resolved targets): the InstallPlan creates the CSV
/// with them, so the install does not start with one write and one watch round trip per item.
pub struct CreationMetadata {
    /// Finalizers to add.
    pub finalizers: Vec<String>,
    /// Labels to set.
    pub labels: BTreeMap<String, String>,
    /// Annotations to set.
    pub annotations: BTreeMap<String, String>,
}

/// See [`CreationMetadata`]; `groups` are the OperatorGroups of the CSV's namespace.
pub fn creation_metadata(csv: &ClusterServiceVersion, groups: &[&OperatorGroup]) -> CreationMetadata {
    let labels = api_label_changes(csv).into_iter().filter_map(|(k, v)| v.map(|v| (k, v))).collect();
    let annotations = match groups {
        [group] => match group.status.as_ref().and_then(|s| s.namespaces.as_deref()) {
            Some(targets) if !targets.is_empty() => member_annotations(group, targets),
            _ => BTreeMap::new(),
        },
        _ => BTreeMap::new(),
    };
    CreationMetadata {
        finalizers: vec![keys::CSV_CLEANUP_FINALIZER.to_owned()],
        labels,
        annotations,
    }
}
