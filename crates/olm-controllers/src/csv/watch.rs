//! Watch mappers: which CSVs a change of another object concerns.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use olm_api::keys;
use olm_api::v1::operator_group::OperatorGroup;
use olm_api::v1alpha1::cluster_service_version::{ClusterServiceVersion, CsvReason};
use olm_api::v1alpha1::subscription::Subscription;
use olm_api::v2::OperatorCondition;

use super::decide::OwnerLabels;
use super::metrics::CsvMetrics;
use super::requirements::declared_service_accounts;

type Refs = Vec<ObjectRef<ClusterServiceVersion>>;
type Csvs = olm_runtime::Cache<ClusterServiceVersion>;

// Every mapper reads the CSV cache's indexes (`crate::csv_index`): the
// CSVs of one namespace, the copies of one original, the originals. A pass over every CSV of
// the cluster for each change was quadratic in the namespaces: at 10,000 namespaces with five
// all-namespaces operators the cache holds 51,000 CSVs, and each of the 50,000 copies written
// and the 10,000 namespaces and ServiceAccounts created looked at all of them.

/// The CSVs of `found` that `keep` selects, as references.
fn refs(found: Vec<Arc<ClusterServiceVersion>>, keep: impl Fn(&ClusterServiceVersion) -> bool) -> Refs {
    found.iter().filter(|c| keep(c)).map(|c| ObjectRef::from_obj(c.as_ref())).collect()
}

/// The CSVs that are no copy that `keep` selects.
fn originals(csvs: &Csvs, keep: impl Fn(&ClusterServiceVersion) -> bool) -> Refs {
    refs(crate::csv_index::originals(csvs, keep), |_| true)
}

/// Replacement-chain neighbours and copies/originals react to each other; CSVs that failed on
/// an owner conflict look again when another CSV changes or goes (the owner of their CRD or
/// APIService may be gone: replaced by a version that no longer owns it); a CSV that is gone
/// from the cache leaves the metrics.
pub(super) fn related(csvs: Csvs, metrics: CsvMetrics) -> impl Fn(Arc<ClusterServiceVersion>) -> Refs + Send + Sync + 'static {
    move |changed: Arc<ClusterServiceVersion>| {
        let ns = changed.namespace().unwrap_or_default();
        let name = changed.name_any();
        if csvs.store().get(&ObjectRef::from_obj(changed.as_ref())).is_none() && !changed.is_copied() {
            metrics.forget_csv(&ns, &name, changed.spec.version.as_deref().unwrap_or_default());
            metrics.csv_count.set(i64::try_from(csvs.store().len()).unwrap_or(i64::MAX));
        }
        let mut found = refs(csvs.list_in(&ns), |c| {
            c.spec.replaces.as_deref() == Some(name.as_str()) || changed.spec.replaces.is_some() && changed.spec.replaces == c.metadata.name
        });
        // Its copies, or its original.
        found.extend(refs(crate::csv_index::copies_of(&csvs, &ns, &name), |_| true));
        if let Some(origin) = changed.labels().get(keys::COPIED_FROM_LABEL) {
            found.extend(csvs.store().get(&ObjectRef::new(&name).within(origin)).map(|c| ObjectRef::from_obj(c.as_ref())));
        }
        if !changed.is_copied() {
            found.extend(originals(&csvs, failed_on_owner_conflict));
        }
        found.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        found.dedup();
        found
    }
}

fn failed_on_owner_conflict(csv: &ClusterServiceVersion) -> bool {
    csv.status.as_ref().and_then(|s| s.reason.as_ref()) == Some(&CsvReason::OwnerConflict)
}

/// The non-copied CSVs of the group's namespace.
pub(super) fn by_group(csvs: Csvs) -> impl Fn(Arc<OperatorGroup>) -> Refs + Send + Sync + 'static {
    move |group: Arc<OperatorGroup>| {
        let ns = group.namespace().unwrap_or_default();
        // A group's olm.providedAPIs changing can end a conflict with another group: the CSVs
        // anywhere that failed for one are looked at again (few, and only those).
        let failed_on_group_apis = |c: &ClusterServiceVersion| {
            c.metadata.namespace.as_deref() != Some(ns.as_str())
                && matches!(
                    c.status.as_ref().and_then(|s| s.reason.as_ref()),
                    Some(CsvReason::InterOperatorGroupOwnerConflict | CsvReason::CannotModifyStaticOperatorGroupProvidedApis)
                )
        };
        let mut found = refs(csvs.list_in(&ns), |c| !c.is_copied());
        found.extend(originals(&csvs, failed_on_group_apis));
        found
    }
}

/// The non-copied CSVs that own or require the CRD.
pub(super) fn by_crd(csvs: Csvs) -> impl Fn(Arc<CustomResourceDefinition>) -> Refs + Send + Sync + 'static {
    move |crd: Arc<CustomResourceDefinition>| {
        let crd_name = crd.name_any();
        originals(&csvs, |c| c.spec.owned_crds().iter().chain(c.spec.required_crds()).any(|d| d.name == crd_name))
    }
}

/// The non-copied CSVs of the account's namespace that declare it.
pub(super) fn by_service_account(csvs: Csvs) -> impl Fn(Arc<ServiceAccount>) -> Refs + Send + Sync + 'static {
    move |sa: Arc<ServiceAccount>| {
        let sa_name = sa.name_any();
        refs(csvs.list_in(&sa.namespace().unwrap_or_default()), |c| !c.is_copied() && declared_service_accounts(c).contains(&sa_name))
    }
}

/// The non-copied CSVs of all-namespaces groups (whose copies follow the namespaces and the
/// OLMConfig).
pub(super) fn all_namespace_csvs(csvs: Csvs) -> impl Fn() -> Refs + Clone + Send + Sync + 'static {
    move || originals(&csvs, |c| c.annotations().get(keys::TARGET_NAMESPACES_ANNOTATION).is_some_and(String::is_empty))
}

/// Its own CSV (RBAC and status follow the condition) and the CSVs replacing it (the
/// Upgradeable gate).
pub(super) fn by_condition(csvs: Csvs) -> impl Fn(Arc<OperatorCondition>) -> Refs + Send + Sync + 'static {
    move |condition: Arc<OperatorCondition>| {
        let owner = condition.name_any();
        refs(csvs.list_in(&condition.namespace().unwrap_or_default()), |c| {
            c.spec.replaces.as_deref() == Some(owner.as_str()) || (c.metadata.name.as_deref() == Some(owner.as_str()) && !c.is_copied())
        })
    }
}

/// The CSV whose OperatorCondition controls `object` (its Role or RoleBinding): the CSV of the
/// same name.
pub(super) fn condition_owner<K: ResourceExt>(object: &K) -> Option<ObjectRef<ClusterServiceVersion>> {
    let namespace = object.namespace().unwrap_or_default();
    object
        .owner_references()
        .iter()
        .find(|o| o.kind == "OperatorCondition")
        .map(|o| ObjectRef::<ClusterServiceVersion>::new(&o.name).within(&namespace))
}

/// The non-copied CSVs the Subscription installed or is installing (its `spec.config` shapes
/// their Deployments).
pub(super) fn by_subscription(csvs: Csvs) -> impl Fn(Arc<Subscription>) -> Refs + Send + Sync + 'static {
    move |subscription: Arc<Subscription>| {
        let status = subscription.status.as_ref();
        let named: BTreeSet<&str> = status
            .into_iter()
            .flat_map(|s| [s.installed_csv.as_deref(), s.current_csv.as_deref()])
            .flatten()
            .collect();
        if named.is_empty() {
            return Vec::new();
        }
        refs(csvs.list_in(&subscription.namespace().unwrap_or_default()), |c| {
            !c.is_copied() && c.metadata.name.as_deref().is_some_and(|n| named.contains(n))
        })
    }
}

/// Generated cluster-scoped objects lead back to their CSV through the owner labels.
pub(super) fn by_owner_labels(labels: &BTreeMap<String, String>) -> Option<ObjectRef<ClusterServiceVersion>> {
    let owner = OwnerLabels::of(labels);
    owner.csv().map(|(namespace, name)| ObjectRef::<ClusterServiceVersion>::new(name).within(namespace))
}

/// An APIService leads to its owner (labels) and to every CSV that owns it (an adoption
/// conflict may have cleared) or requires it (it may have become Available).
pub(super) fn by_api_service(csvs: Csvs) -> impl Fn(Arc<APIService>) -> Refs + Send + Sync + 'static {
    move |api: Arc<APIService>| {
        let api_name = api.name_any();
        let mut refs = originals(&csvs, |c| {
            c.spec
                .owned_api_services()
                .iter()
                .chain(c.spec.required_api_services())
                .any(|d| d.api_service_name() == api_name)
        });
        refs.extend(by_owner_labels(api.labels()));
        refs.dedup();
        refs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn csv(namespace: &str, name: &str, replaces: Option<&str>, reason: &str, copied_from: Option<&str>) -> ClusterServiceVersion {
        let labels = copied_from.map(|origin| json!({ keys::COPIED_FROM_LABEL: origin }));
        serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": name, "namespace": namespace, "labels": labels,
                         "annotations": {keys::TARGET_NAMESPACES_ANNOTATION: if copied_from.is_some() { "ns" } else { "" }}},
            "spec": {"displayName": name, "replaces": replaces, "install": {"strategy": "deployment"}},
            "status": {"phase": "Failed", "reason": reason}
        }))
        .expect("a CSV")
    }

    fn metrics() -> CsvMetrics {
        CsvMetrics::register(&mut prometheus_client::registry::Registry::default())
    }

    fn names(mut refs: Refs) -> Vec<String> {
        refs.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        refs.iter().map(|r| format!("{}/{}", r.namespace.as_deref().unwrap_or_default(), r.name)).collect()
    }

    /// A cache of `objects` indexed as the controller indexes it, and one that is not (every
    /// mapper then passes over all CSVs with the same filters): both must answer alike.
    fn caches(objects: &[ClusterServiceVersion]) -> (Csvs, Csvs) {
        let indexed = Csvs::holding(objects.to_vec());
        crate::csv_index::index(&indexed);
        (indexed, Csvs::holding(objects.to_vec()))
    }

    /// Upstream's subscription_e2e_test.go:1995: nginx-new-b owns a CRD that nginx-a owned; it
    /// fails on the conflict while nginx-a waits to be replaced, and installs once nginx-a goes.
    #[test]
    fn a_csv_failed_on_an_owner_conflict_looks_again_when_another_csv_goes() {
        let conflicted = csv("ns", "nginx-new-b", Some("nginx-b"), "OwnerConflict", None);
        let bystander = csv("ns", "nginx-c", None, "InstallCheckFailed", None);
        for cache in <[Csvs; 2]>::from(caches(&[conflicted, bystander])) {
            let gone = Arc::new(csv("ns", "nginx-a", None, "Replaced", None));
            assert_eq!(names(related(cache, metrics())(gone)), ["ns/nginx-new-b"]);
        }
    }

    /// What an all-namespaces operator's copies and its upgrade wake, from the indexes, as a pass
    /// over every CSV finds it.
    #[test]
    fn the_indexed_mappers_find_what_a_pass_over_every_csv_finds() {
        let mut objects = vec![
            csv("ops", "op.v1", None, "Replaced", None),
            csv("ops", "op.v2", Some("op.v1"), "InstallWaiting", None),
            csv("ops", "other.v1", None, "OwnerConflict", None),
            csv("team", "op.v2", None, "InstallSucceeded", None),
        ];
        for i in 0..50 {
            objects.push(csv(&format!("ns{i}"), "op.v2", None, "Copied", Some("ops")));
            objects.push(csv(&format!("ns{i}"), "op.v2-elsewhere", None, "Copied", Some("team")));
        }
        let (indexed, full) = caches(&objects);
        let (related_indexed, related_full) = (related(indexed.clone(), metrics()), related(full.clone(), metrics()));
        let upgrade = Arc::new(objects[1].clone());
        let expected_upgrade: Vec<String> = ["ops/op.v1", "ops/other.v1"]
            .into_iter()
            .map(String::from)
            .chain((0..50).map(|i| format!("ns{i}/op.v2")))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        assert_eq!(names(related_indexed(upgrade.clone())), expected_upgrade, "its predecessor, its copies, the conflicted");
        assert_eq!(names(related_full(upgrade)), expected_upgrade);
        let copy = Arc::new(objects[10].clone());
        assert_eq!(names(related_indexed(copy.clone())), ["ops/op.v2"], "a copy wakes its original only");
        assert_eq!(names(related_full(copy)), ["ops/op.v2"]);
        let all = ["ops/op.v1", "ops/op.v2", "ops/other.v1", "team/op.v2"];
        assert_eq!(names(all_namespace_csvs(indexed)()), all, "originals only, never the 100 copies");
        assert_eq!(names(all_namespace_csvs(full)()), all);
    }
}
