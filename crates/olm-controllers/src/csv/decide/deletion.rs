//! Replacement chains (`spec.replaces`) and the way out: the CSV being replaced, its
//! replacement, CRD ownership along the chain, and the cleanup of a deleted CSV.

use std::collections::{BTreeMap, BTreeSet};

use kube::ResourceExt;
use olm_api::v1alpha1::cluster_service_version::{ClusterServiceVersion, WebhookAdmissionType};

use super::finalizer;
use super::{CsvAction, CsvDecision, Observed};
use crate::metadata::is_rollback_of;

/// The CSV that `csv.spec.replaces` names, if it exists in the namespace (not when it is this
/// CSV's rollback: then it is its replacement).
pub(super) fn replaced<'a>(observed: &Observed<'a>) -> Option<&'a ClusterServiceVersion> {
    let name = observed.csv.spec.replaces.as_deref()?;
    let me = observed.csv.name_any();
    observed.peers.iter().copied().find(|p| p.name_any() == name && !is_rollback_of(p, &me))
}

/// The CSV whose `spec.replaces` names this one (not the newer CSV this one rolls back, nor
/// one that this CSV itself replaces, directly or through others: a cycle of replacements
/// replaces nobody, see [`replaces_cycle`]).
pub(super) fn replacement<'a>(observed: &Observed<'a>) -> Option<&'a ClusterServiceVersion> {
    let me = observed.csv.name_any();
    let older = ancestors(observed.csv, &observed.peers);
    observed.peers.iter().copied().find(|p| {
        p.spec.replaces.as_deref() == Some(me.as_str())
            && !is_rollback_of(observed.csv, &p.name_any())
            && !older.contains(&p.name_any())
    })
}

/// The CSVs `csv` replaces among `peers`, following `spec.replaces` until a name is missing
/// or comes back (`csv`'s own name included when it does). A CSV a rollback brought back is no
/// ancestor of the newer one it rolls back, though that one's `spec.replaces` names it: it is
/// its replacement.
fn ancestors(csv: &ClusterServiceVersion, peers: &[&ClusterServiceVersion]) -> BTreeSet<String> {
    let by_name = |name: &str| peers.iter().copied().chain(std::iter::once(csv)).find(|p| p.name_any() == name);
    let mut seen = BTreeSet::new();
    let mut current = csv.name_any();
    let mut cursor = csv.spec.replaces.clone();
    while let Some(name) = cursor {
        let found = by_name(&name);
        if found.is_some_and(|older| is_rollback_of(older, &current)) || !seen.insert(name.clone()) {
            break;
        }
        cursor = found.and_then(|p| p.spec.replaces.clone());
        current = name;
    }
    seen
}

/// When following `spec.replaces` from this CSV comes back to it (A replaces B, B replaces
/// A): the cycle, from this CSV, if this CSV is its newest member (by creationTimestamp, then
/// name). No catalog OLM resolves writes one, but a hand-made CSV or an older OLM may have:
/// the members installed before keep running, and the newest fails saying so, instead of
/// each handing over to the other and the operator going away.
pub(super) fn replaces_cycle(observed: &Observed<'_>) -> Option<Vec<String>> {
    let csv = observed.csv;
    let me = csv.name_any();
    if !ancestors(csv, &observed.peers).contains(&me) {
        return None;
    }
    let by_name = |name: &str| observed.peers.iter().copied().find(|p| p.name_any() == name);
    let mut cycle = vec![me.clone()];
    let mut cursor = csv.spec.replaces.clone();
    while let Some(name) = cursor.filter(|n| *n != me) {
        cursor = by_name(&name).and_then(|p| p.spec.replaces.clone());
        cycle.push(name);
    }
    let age = |c: &ClusterServiceVersion| (c.metadata.creation_timestamp.as_ref().map(|t| t.0), c.name_any());
    let newest = cycle.iter().filter_map(|n| if *n == me { Some(csv) } else { by_name(n) }).max_by_key(|c| age(c))?;
    (newest.name_any() == me).then_some(cycle)
}

/// Names in the replacement chain through this CSV (ancestors and descendants).
fn replacement_chain(observed: &Observed<'_>) -> BTreeSet<String> {
    replacement_chain_of(observed.csv, &observed.peers)
}

/// Names in the replacement chain through `csv` (ancestors and descendants) among `peers`
/// (the other non-copied CSVs of its namespace).
pub fn replacement_chain_of(csv: &ClusterServiceVersion, peers: &[&ClusterServiceVersion]) -> BTreeSet<String> {
    let replaces: BTreeMap<String, Option<String>> = peers
        .iter()
        .copied()
        .chain(std::iter::once(csv))
        .map(|c| (c.name_any(), c.spec.replaces.clone()))
        .collect();
    let me = csv.name_any();
    let mut chain = BTreeSet::from([me.clone()]);
    let mut cursor = csv.spec.replaces.clone();
    while let Some(name) = cursor {
        if !chain.insert(name.clone()) {
            break;
        }
        cursor = replaces.get(&name).cloned().flatten();
    }
    for name in replaces.keys() {
        let mut cursor = Some(name.clone());
        let mut seen = BTreeSet::new();
        while let Some(current) = cursor {
            if current == me {
                chain.insert(name.clone());
                break;
            }
            if !seen.insert(current.clone()) {
                break;
            }
            cursor = replaces.get(&current).cloned().flatten();
        }
    }
    chain
}

/// An owned CRD that another CSV of the namespace, outside the replacement chain, also owns.
pub(super) fn crd_owner_conflict(observed: &Observed<'_>) -> Option<String> {
    let chain = replacement_chain(observed);
    for crd in observed.csv.spec.owned_crds() {
        for peer in &observed.peers {
            if chain.contains(&peer.name_any()) {
                continue;
            }
            if peer.spec.owned_crds().iter().any(|c| c.name == crd.name) {
                return Some(format!(
                    "CRD {} is already owned by ClusterServiceVersion {}, which is not part of this CSV's replacement chain",
                    crd.name,
                    peer.name_any()
                ));
            }
        }
    }
    None
}

/// The decision for a non-copied CSV being deleted (`None` when it is not): namespaced
/// children go with their ownerReferences and copies notice their original is gone; what is
/// cluster-scoped is deleted by owner labels before the cleanup finalizer is released, so it
/// goes even when OLM was down when the CSV was deleted. CRDs and custom resources are never
/// touched.
///
/// A CRD whose conversion calls this operator's webhook would refuse every read and write of
/// its objects once the operator is gone, so unless another CSV replaces this one (and brings
/// its own webhook), the conversion of the CRDs it lists goes back to None, as upstream does.
/// Whether `olm migrate` is handing this CSV's objects to an OLM v1 ClusterExtension
/// (`olm-rs.io/migrating-to`): then OLM v0 neither repairs nor reports on it, and on its way
/// out leaves the CRDs' conversion as the extension set it.
pub fn migrating(csv: &ClusterServiceVersion) -> bool {
    csv.annotations().contains_key(olm_api::keys::MIGRATING_TO_ANNOTATION)
}

pub fn decide_deletion(csv: &ClusterServiceVersion, replaced_by_peer: bool) -> Option<CsvDecision> {
    csv.metadata.deletion_timestamp.as_ref()?;
    let mut decision = CsvDecision {
        actions: Vec::new(),
        status: None,
        events: Vec::new(),
        requeue_after: None,
    };
    if let Some(index) = finalizer::position(csv) {
        decision = decision.act(CsvAction::DeleteOwnedClusterObjects);
        // Migrated to OLM v1: what the ClusterExtension adopted carries no OLM v0 label any
        // more, so the cleanup takes only what it left; the CRDs' conversion is its now.
        if !replaced_by_peer && !migrating(csv) {
            let conversions = csv.spec.webhooks().iter().filter(|h| h.type_ == WebhookAdmissionType::ConversionWebhook);
            let crds: BTreeSet<&String> = conversions.flat_map(|h| h.conversion_crds.iter().flatten()).collect();
            for crd in crds {
                decision = decision.act(CsvAction::ResetCrdConversion { crd: crd.clone() });
            }
        }
        decision = decision.act(CsvAction::RemoveFinalizer { index });
    }
    Some(decision)
}
