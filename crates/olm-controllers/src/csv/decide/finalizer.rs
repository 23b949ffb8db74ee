//! The cleanup finalizer (`operators.coreos.com/csv-cleanup`), decided: where it stands in a
//! CSV's finalizers and the action that adds it. The patches that add and remove it are
//! `csv::finalizer`'s, run by `act`.

use kube::ResourceExt;
use olm_api::keys;
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;

use super::CsvAction;

/// Where the cleanup finalizer stands in `metadata.finalizers`, if it is there.
pub(super) fn position(csv: &ClusterServiceVersion) -> Option<usize> {
    csv.finalizers().iter().position(|f| f == keys::CSV_CLEANUP_FINALIZER)
}

/// The action that adds the cleanup finalizer, unless the CSV has it.
pub(super) fn add_action(csv: &ClusterServiceVersion) -> Option<CsvAction> {
    position(csv).is_none().then(|| CsvAction::AddFinalizer {
        current: csv.metadata.finalizers.clone(),
        resource_version: csv.resource_version(),
    })
}
