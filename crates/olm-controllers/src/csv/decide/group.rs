//! OperatorGroup membership, checked on every pass before the phase machine: one group with
//! resolved targets, the CSV annotated for it, install modes that allow them, and no provided
//! API another group (or a static group) stands against.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use olm_api::keys;
use olm_api::v1::operator_group::OperatorGroup;
use olm_api::v1alpha1::cluster_service_version::{ClusterServiceVersion, ClusterServiceVersionStatus, CsvPhase, CsvReason, InstallModeType, InvalidTargets};

use super::copies::decide_copies;
use super::{CsvAction, CsvDecision, Observed, REQUEUE_RESYNC, REQUEUE_WAITING, transition};
use crate::metadata::{member_annotations, owned_by};

/// The namespace's OperatorGroup and its resolved targets (`Continue`) once the CSV is a
/// settled member of it; else the decision of this pass (`Break`): Failed (with its copies
/// withdrawn), waiting for the targets, writing the group's annotations first, or back to
/// Pending once an OperatorGroup problem is gone.
pub(super) fn membership<'a>(
    observed: &Observed<'a>,
    previous: &ClusterServiceVersionStatus,
    now: Timestamp,
) -> ControlFlow<CsvDecision, (&'a OperatorGroup, Vec<String>)> {
    let csv = observed.csv;
    let failed = |d: CsvDecision| ControlFlow::Break(decide_copies(observed, None, d.requeue(REQUEUE_RESYNC)));
    let group = match observed.groups.as_slice() {
        [] => {
            let d = transition(previous, CsvPhase::Failed, CsvReason::NoOperatorGroup, "csv in namespace with no operatorgroups", now);
            return failed(d);
        }
        [group] => *group,
        _ => {
            let d = transition(
                previous,
                CsvPhase::Failed,
                CsvReason::TooManyOperatorGroups,
                "csv created in namespace with multiple operatorgroups, can't pick one automatically",
                now,
            );
            return failed(d);
        }
    };
    let Some(targets) = group.status.as_ref().and_then(|s| s.namespaces.clone()) else {
        // The OperatorGroup controller has not resolved the targets yet; its status write
        // triggers this CSV again.
        return ControlFlow::Break(CsvDecision::status(previous.clone()).requeue(REQUEUE_WAITING));
    };
    if targets.is_empty() {
        let d = transition(
            previous,
            CsvPhase::Failed,
            CsvReason::NoTargetNamespaces,
            "no targetNamespaces are matched operatorgroups namespace selection",
            now,
        );
        return failed(d);
    }
    let wanted_annotations = member_annotations(group, &targets);
    let stale: BTreeMap<String, Option<String>> = wanted_annotations
        .iter()
        .filter(|(k, v)| csv.annotations().get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), Some(v.clone())))
        .collect();
    if !stale.is_empty() {
        // Write the annotations first; the update triggers the next pass.
        return ControlFlow::Break(CsvDecision::status(previous.clone()).act(CsvAction::Annotate(stale)));
    }
    let own = csv.namespace().unwrap_or_default();
    if let Err((reason, message)) = install_modes_support(csv, &own, &targets) {
        let d = transition(previous, CsvPhase::Failed, reason, message, now);
        return failed(d);
    }
    if static_group_refuses(observed, group, &targets) {
        let d = transition(
            previous,
            CsvPhase::Failed,
            CsvReason::CannotModifyStaticOperatorGroupProvidedApis,
            "static provided api operatorgroup cannot be modified by these apis",
            now,
        );
        // As upstream: no operator runs for a CSV its group refuses.
        return failed(without_operator(observed, d));
    }
    if let Some(conflict) = inter_group_conflict(observed, &targets) {
        let d = transition(previous, CsvPhase::Failed, CsvReason::InterOperatorGroupOwnerConflict, conflict, now);
        // Upstream removes the operator of a CSV that lost such a conflict.
        return failed(without_operator(observed, d));
    }
    let phase = previous.phase.clone().unwrap_or(CsvPhase::None);
    if phase == CsvPhase::Failed && is_operator_group_reason(previous.reason.as_ref()) {
        let d = transition(
            previous,
            CsvPhase::Pending,
            CsvReason::RequirementsUnknown,
            "InstallModes now support target namespaces",
            now,
        );
        return ControlFlow::Break(decide_copies(observed, Some(&targets), d));
    }
    ControlFlow::Continue((group, targets))
}

/// `decision` with the deletion of every Deployment the CSV owns.
fn without_operator(observed: &Observed<'_>, mut decision: CsvDecision) -> CsvDecision {
    for deployment in observed.deployments.values() {
        if owned_by(deployment.labels(), observed.csv) {
            decision = decision.act(CsvAction::DeleteDeployment(deployment.name_any()));
        }
    }
    decision
}

/// OG-related reasons: a Failed CSV with one of them goes back to Pending once the problem is gone.
fn is_operator_group_reason(reason: Option<&CsvReason>) -> bool {
    matches!(
        reason,
        Some(
            CsvReason::NoOperatorGroup
                | CsvReason::TooManyOperatorGroups
                | CsvReason::UnsupportedOperatorGroup
                | CsvReason::NoTargetNamespaces
                | CsvReason::InvalidInstallModes
                | CsvReason::InterOperatorGroupOwnerConflict
                | CsvReason::CannotModifyStaticOperatorGroupProvidedApis
        )
    )
}

/// Whether a group with `spec.staticProvidedAPIs` refuses this CSV: upstream fails the CSV
/// when its APIs would have to be added to the group's fixed `olm.providedAPIs` (not all
/// listed, no intersecting group provides them) or removed from it (all listed, but an
/// intersecting group provides some too).
fn static_group_refuses(observed: &Observed<'_>, group: &OperatorGroup, targets: &[String]) -> bool {
    if group.spec.static_provided_apis != Some(true) {
        return false;
    }
    let mine = crate::metadata::provided_apis(observed.csv);
    if mine.is_empty() {
        return false;
    }
    let provided: BTreeSet<&str> = group
        .annotations()
        .get(keys::PROVIDED_APIS_ANNOTATION)
        .map(|v| v.split(',').map(str::trim).filter(|s| !s.is_empty()).collect())
        .unwrap_or_default();
    let listed = mine.iter().all(|api| provided.contains(api.as_str()));
    let intersecting = inter_group_conflict(observed, targets).is_some();
    // (listed, intersecting): (false, false) would add, (true, true) would remove;
    // (false, true) is an InterOperatorGroupOwnerConflict, (true, false) is fine.
    listed == intersecting
}

/// Another OperatorGroup whose targets intersect ours already provides one of our APIs.
fn inter_group_conflict(observed: &Observed<'_>, targets: &[String]) -> Option<String> {
    let mine = crate::metadata::provided_apis(observed.csv);
    if mine.is_empty() {
        return None;
    }
    let all = |t: &[String]| t == [String::new()];
    for other in &observed.other_groups {
        let Some(other_targets) = other.status.as_ref().and_then(|s| s.namespaces.as_deref()) else {
            continue;
        };
        let intersects = all(targets) || all(other_targets) || targets.iter().any(|t| other_targets.contains(t));
        if !intersects {
            continue;
        }
        let provided: BTreeSet<&str> = other
            .annotations()
            .get(keys::PROVIDED_APIS_ANNOTATION)
            .map(|v| v.split(',').filter(|s| !s.is_empty()).collect())
            .unwrap_or_default();
        let clash: Vec<&str> = mine.iter().map(String::as_str).filter(|api| provided.contains(api)).collect();
        if !clash.is_empty() {
            return Some(format!(
                "provided API(s) {} are already provided by OperatorGroup {}/{}, whose target namespaces intersect this group's",
                clash.join(", "),
                other.namespace().unwrap_or_default(),
                other.name_any()
            ));
        }
    }
    None
}

/// Upstream's InstallModeSet.Supports: can an operator in `own` watch `targets`?
pub fn install_modes_support(csv: &ClusterServiceVersion, own: &str, targets: &[String]) -> Result<(), (CsvReason, String)> {
    let mut supported = BTreeMap::new();
    for mode in csv.spec.install_modes() {
        if supported.insert(mode.type_, mode.supported).is_some() {
            return Err((
                CsvReason::InvalidInstallModes,
                format!("install mode {} is listed more than once in spec.installModes", mode.type_.as_str()),
            ));
        }
    }
    let needed = InstallModeType::needed_for(own, targets).map_err(|invalid| {
        let what = match invalid {
            InvalidTargets::Empty => "cannot configure to watch zero namespaces",
            InvalidTargets::AllAmongOthers => "NamespaceAll found when |selected namespaces| > 1",
        };
        (CsvReason::UnsupportedOperatorGroup, format!("operatorgroup has invalid selected namespaces, {what}"))
    })?;
    match needed.into_iter().find(|t| !supported.get(t).copied().unwrap_or(false)) {
        None => Ok(()),
        Some(lacking) => {
            let what = match lacking {
                InstallModeType::AllNamespaces => "all namespaces".to_owned(),
                InstallModeType::OwnNamespace => "own namespace".to_owned(),
                InstallModeType::SingleNamespace => "one namespace".to_owned(),
                _ => format!("{} namespaces", targets.len()),
            };
            Err((
                CsvReason::UnsupportedOperatorGroup,
                format!("{} InstallModeType not supported, cannot configure to watch {what}", lacking.as_str()),
            ))
        }
    }
}
