//! Watch mappers: which CSVs a change of another object concerns.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};
use olm_api::keys;
use olm_api::v1::operator_group::OperatorGroup;
use olm_api::v1alpha1::cluster_service_version::{ClusterServiceVersion, CsvReason};
use olm_api::v1alpha1::subscription::Subscription;
use olm_api::v2::OperatorCondition;

use super::decide::OwnerLabels;
use super::metrics::CsvMetrics;
use super::requirements::declared_service_accounts;

type Refs = Vec<ObjectRef<ClusterServiceVersion>>;

/// The CSVs of `store` that `keep` selects.
fn select(store: &Store<ClusterServiceVersion>, keep: impl Fn(&ClusterServiceVersion) -> bool) -> Refs {
    store
        .state()
        .iter()
        .filter(|c| keep(c))
        .map(|c| ObjectRef::from_obj(c.as_ref()))
        .collect()
}

/// Replacement-chain neighbours and copies/originals react to each other; CSVs that failed on
/// an owner conflict look again when another CSV changes or goes (the owner of their CRD or
/// APIService may be gone: replaced by a version that no longer owns it); a CSV that is gone
/// from the cache leaves the metrics.
pub(super) fn related(
    store: Store<ClusterServiceVersion>,
    metrics: CsvMetrics,
) -> impl Fn(Arc<ClusterServiceVersion>) -> Refs + Send + Sync + 'static {
    move |changed: Arc<ClusterServiceVersion>| {
        let ns = changed.namespace().unwrap_or_default();
        let name = changed.name_any();
        if store.get(&ObjectRef::from_obj(changed.as_ref())).is_none() && !changed.is_copied() {
            metrics.forget_csv(&ns, &name, changed.spec.version.as_deref().unwrap_or_default());
            metrics.csv_count.set(i64::try_from(store.len()).unwrap_or(i64::MAX));
        }
        let origin = changed.labels().get(keys::COPIED_FROM_LABEL).cloned();
        // Borrowed comparisons: this runs over every CSV for every change of one.
        select(&store, |c| {
            let c_name = c.metadata.name.as_deref().unwrap_or_default();
            let c_ns = c.metadata.namespace.as_deref();
            let same_ns = c_ns == Some(ns.as_str());
            (same_ns
                && (c.spec.replaces.as_deref() == Some(name.as_str())
                    || changed.spec.replaces.as_deref() == Some(c_name)))
                || (c_name == name && c.labels().get(keys::COPIED_FROM_LABEL) == Some(&ns))
                || (c_name == name && origin.as_deref() == c_ns)
                || (!changed.is_copied() && !c.is_copied() && failed_on_owner_conflict(c))
        })
    }
}

fn failed_on_owner_conflict(csv: &ClusterServiceVersion) -> bool {
    csv.status.as_ref().and_then(|s| s.reason.as_ref()) == Some(&CsvReason::OwnerConflict)
}

/// The non-copied CSVs of the group's namespace.
pub(super) fn by_group(store: Store<ClusterServiceVersion>) -> impl Fn(Arc<OperatorGroup>) -> Refs + Send + Sync + 'static {
    move |group: Arc<OperatorGroup>| {
        let ns = group.namespace();
        // A group's olm.providedAPIs changing can end a conflict with another group: the CSVs
        // anywhere that failed for one are looked at again (few, and only those).
        let failed_on_group_apis = |c: &ClusterServiceVersion| {
            matches!(
                c.status.as_ref().and_then(|s| s.reason.as_ref()),
                Some(CsvReason::InterOperatorGroupOwnerConflict | CsvReason::CannotModifyStaticOperatorGroupProvidedApis)
            )
        };
        select(&store, |c| !c.is_copied() && (c.metadata.namespace == ns || failed_on_group_apis(c)))
    }
}

/// The non-copied CSVs that own or require the CRD.
pub(super) fn by_crd(store: Store<ClusterServiceVersion>) -> impl Fn(Arc<CustomResourceDefinition>) -> Refs + Send + Sync + 'static {
    move |crd: Arc<CustomResourceDefinition>| {
        let crd_name = crd.name_any();
        select(&store, |c| {
            !c.is_copied() && c.spec.owned_crds().iter().chain(c.spec.required_crds()).any(|d| d.name == crd_name)
        })
    }
}

/// The non-copied CSVs of the account's namespace that declare it.
pub(super) fn by_service_account(store: Store<ClusterServiceVersion>) -> impl Fn(Arc<ServiceAccount>) -> Refs + Send + Sync + 'static {
    move |sa: Arc<ServiceAccount>| {
        let ns = sa.namespace();
        let sa_name = sa.name_any();
        select(&store, |c| c.metadata.namespace == ns && !c.is_copied() && declared_service_accounts(c).contains(&sa_name))
    }
}

/// The non-copied CSVs of all-namespaces groups (whose copies follow the namespaces and the
/// OLMConfig).
pub(super) fn all_namespace_csvs(store: Store<ClusterServiceVersion>) -> impl Fn() -> Refs + Clone + Send + Sync + 'static {
    move || {
        select(&store, |c| {
            !c.is_copied() && c.annotations().get(keys::TARGET_NAMESPACES_ANNOTATION).is_some_and(String::is_empty)
        })
    }
}

/// Its own CSV (RBAC and status follow the condition) and the CSVs replacing it (the
/// Upgradeable gate).
pub(super) fn by_condition(store: Store<ClusterServiceVersion>) -> impl Fn(Arc<OperatorCondition>) -> Refs + Send + Sync + 'static {
    move |condition: Arc<OperatorCondition>| {
        let ns = condition.namespace();
        let owner = condition.name_any();
        select(&store, |c| {
            c.metadata.namespace == ns
                && (c.spec.replaces.as_deref() == Some(owner.as_str()) || (c.metadata.name.as_deref() == Some(owner.as_str()) && !c.is_copied()))
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
pub(super) fn by_subscription(store: Store<ClusterServiceVersion>) -> impl Fn(Arc<Subscription>) -> Refs + Send + Sync + 'static {
    move |subscription: Arc<Subscription>| {
        let ns = subscription.namespace();
        let status = subscription.status.as_ref();
        let named: BTreeSet<&str> = status
            .into_iter()
            .flat_map(|s| [s.installed_csv.as_deref(), s.current_csv.as_deref()])
            .flatten()
            .collect();
        select(&store, |c| c.namespace() == ns && !c.is_copied() && named.contains(c.name_any().as_str()))
    }
}

/// Generated cluster-scoped objects lead back to their CSV through the owner labels.
pub(super) fn by_owner_labels(labels: &BTreeMap<String, String>) -> Option<ObjectRef<ClusterServiceVersion>> {
    let owner = OwnerLabels::of(labels);
    owner.csv().map(|(namespace, name)| ObjectRef::<ClusterServiceVersion>::new(name).within(namespace))
}

/// An APIService leads to its owner (labels) and to every CSV that owns it (an adoption
/// conflict may have cleared) or requires it (it may have become Available).
pub(super) fn by_api_service(store: Store<ClusterServiceVersion>) -> impl Fn(Arc<APIService>) -> Refs + Send + Sync + 'static {
    move |api: Arc<APIService>| {
        let api_name = api.name_any();
        let mut refs = select(&store, |c| {
            !c.is_copied()
                && c.spec
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
    use kube::runtime::{reflector, watcher};
    use serde_json::json;

    fn csv(name: &str, replaces: Option<&str>, reason: &str) -> ClusterServiceVersion {
        serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"displayName": name, "replaces": replaces, "install": {"strategy": "deployment"}},
            "status": {"phase": "Failed", "reason": reason}
        }))
        .expect("a CSV")
    }

    /// Upstream's subscription_e2e_test.go:1995: nginx-new-b owns a CRD that nginx-a owned; it
    /// fails on the conflict while nginx-a waits to be replaced, and installs once nginx-a goes.
    #[test]
    fn a_csv_failed_on_an_owner_conflict_looks_again_when_another_csv_goes() {
        let (store, mut writer) = reflector::store();
        let conflicted = csv("nginx-new-b", Some("nginx-b"), "OwnerConflict");
        let bystander = csv("nginx-c", None, "InstallCheckFailed");
        for c in [&conflicted, &bystander] {
            writer.apply_watcher_event(&watcher::Event::Apply(c.clone()));
        }
        let metrics = CsvMetrics::register(&mut prometheus_client::registry::Registry::default());
        let related = related(store, metrics);
        let gone = Arc::new(csv("nginx-a", None, "Replaced"));
        assert_eq!(related(gone), vec![ObjectRef::from_obj(&conflicted)]);
    }
}
