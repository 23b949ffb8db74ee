//! Upgrades and deletion: the replacement chain (handover, Replacing, Deleting, fail-forward,
//! the Upgradeable veto), CRD ownership along it, and the cleanup of a deleted CSV.

use super::*;

#[test]
fn waits_until_the_replaced_csv_hands_over() {
    let mut world = World::etcd_ready(Some((CsvPhase::Pending, CsvReason::RequirementsUnknown)));
    let mut old = with_phase(etcd(), CsvPhase::Succeeded, CsvReason::InstallSucceeded);
    old.metadata.name = Some("etcdoperator.v0.9.2".into());
    old.spec.replaces = None;
    world.peers.push(old.clone());
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Pending, CsvReason::RequirementsUnknown));
    assert!(decision.events.is_empty());

    world.peers = vec![with_phase(old, CsvPhase::Replacing, CsvReason::BeingReplaced)];
    assert_eq!(phase_reason(&world.decide()), (CsvPhase::Installing, CsvReason::InstallSucceeded));
}

#[test]
fn crd_owned_by_an_unrelated_csv_is_an_owner_conflict() {
    let mut world = World::etcd_ready(Some((CsvPhase::Pending, CsvReason::RequirementsUnknown)));
    let mut other = etcd();
    other.metadata.name = Some("someone-else".into());
    other.spec.replaces = None;
    world.peers.push(other);
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Failed, CsvReason::OwnerConflict));
}

#[test]
fn upgrade_chain_replacing_then_deleting() {
    let mut world = World::etcd_ready(Some((CsvPhase::Succeeded, CsvReason::InstallSucceeded))).with_installed_deployments();
    world.csv.spec.replaces = None;
    let mut next = etcd();
    next.metadata.name = Some("etcdoperator.v0.9.5".into());
    next.spec.replaces = Some("etcdoperator.v0.9.4".into());
    world.peers.push(next.clone());
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Replacing, CsvReason::BeingReplaced));
    assert_eq!(
        decision.status.as_ref().and_then(|s| s.message.clone()).as_deref(),
        Some("being replaced by csv: etcdoperator.v0.9.5")
    );

    world.csv = with_phase(world.csv, CsvPhase::Replacing, CsvReason::BeingReplaced);
    let waiting = world.decide();
    assert_eq!(phase_reason(&waiting), (CsvPhase::Replacing, CsvReason::BeingReplaced));
    world.peers = vec![with_phase(next, CsvPhase::Succeeded, CsvReason::InstallSucceeded)];
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Deleting, CsvReason::Replaced));

    world.csv = with_phase(world.csv, CsvPhase::Deleting, CsvReason::Replaced);
    assert_eq!(world.decide().actions, vec![CsvAction::DeleteSelf]);
}

/// A walk faster than this CSV's passes: its replacement went Succeeded, then Replacing (the
/// next version came) before this CSV saw it succeed. The chain's newest has Succeeded, so the
/// oldest goes (and the one after it next); waiting for its direct replacement to succeed
/// would wait for ever, that one waiting for this one to go first.
#[test]
fn the_oldest_of_a_chain_goes_once_a_newer_csv_along_it_has_succeeded() {
    let mut world = World::etcd_ready(Some((CsvPhase::Replacing, CsvReason::BeingReplaced))).with_installed_deployments();
    world.csv.spec.replaces = None;
    // Annotated for the group as the oldest is: the middle one is decided on below.
    let mut middle = world.csv.clone();
    middle.metadata.name = Some("etcdoperator.v0.9.5".into());
    middle.spec.replaces = Some("etcdoperator.v0.9.4".into());
    let mut newest = etcd();
    newest.metadata.name = Some("etcdoperator.v0.9.6".into());
    newest.spec.replaces = Some("etcdoperator.v0.9.5".into());
    let middle = with_phase(middle, CsvPhase::Replacing, CsvReason::BeingReplaced);
    world.peers = vec![middle.clone(), with_phase(newest.clone(), CsvPhase::Installing, CsvReason::InstallWaiting)];
    assert_eq!(phase_reason(&world.decide()), (CsvPhase::Replacing, CsvReason::BeingReplaced), "nothing newer has succeeded yet");

    world.peers = vec![middle.clone(), with_phase(newest.clone(), CsvPhase::Succeeded, CsvReason::InstallSucceeded)];
    assert_eq!(phase_reason(&world.decide()), (CsvPhase::Deleting, CsvReason::Replaced));

    // The middle one waits for the oldest to go, then goes itself.
    let oldest = std::mem::replace(&mut world.csv, middle);
    world.peers = vec![oldest, with_phase(newest.clone(), CsvPhase::Succeeded, CsvReason::InstallSucceeded)];
    assert_eq!(phase_reason(&world.decide()), (CsvPhase::Replacing, CsvReason::BeingReplaced), "not the oldest");
    world.peers = vec![with_phase(newest, CsvPhase::Succeeded, CsvReason::InstallSucceeded)];
    assert_eq!(phase_reason(&world.decide()), (CsvPhase::Deleting, CsvReason::Replaced));
}

#[test]
fn fail_forward_lets_a_failed_csv_be_replaced() {
    let mut world = World::etcd_ready(Some((CsvPhase::Failed, CsvReason::ComponentUnhealthy)));
    world.csv.spec.replaces = None;
    let mut next = etcd();
    next.metadata.name = Some("etcdoperator.v0.9.5".into());
    next.spec.replaces = Some("etcdoperator.v0.9.4".into());
    world.peers.push(next);
    // Default strategy: a failed CSV is reinstalled, not replaced.
    assert_eq!(phase_reason(&world.decide()), (CsvPhase::Pending, CsvReason::NeedsReinstall));
    world.groups[0].spec.upgrade_strategy = Some(olm_api::v1::operator_group::UpgradeStrategy::TechPreviewUnsafeFailForward);
    assert_eq!(phase_reason(&world.decide()), (CsvPhase::Replacing, CsvReason::BeingReplaced));
}

#[test]
fn a_failed_csv_hands_over_to_the_version_a_rollback_brings_back_and_not_the_other_way() {
    // etcdoperator.v0.9.4 (replaces v0.9.2) failed; v0.9.2 comes back from the catalog,
    // replacing v0.9.4 and annotated as its rollback: each names the other in spec.replaces.
    let mut world = World::etcd_ready(Some((CsvPhase::Failed, CsvReason::ComponentUnhealthy)));
    let mut back = with_phase(etcd(), CsvPhase::Pending, CsvReason::RequirementsUnknown);
    back.metadata.name = Some("etcdoperator.v0.9.2".into());
    back.spec.replaces = Some("etcdoperator.v0.9.4".into());
    back.metadata.annotations.get_or_insert_default().insert(olm_api::keys::ROLLBACK_OF_ANNOTATION.into(), "etcdoperator.v0.9.4".into());
    world.peers.push(back.clone());
    assert_eq!(phase_reason(&world.decide()), (CsvPhase::Replacing, CsvReason::BeingReplaced), "no fail-forward needed");
    // Replacing, it is not held back by v0.9.2 as if v0.9.2 were older: deleted once v0.9.2 succeeds.
    world.csv = with_phase(world.csv.clone(), CsvPhase::Replacing, CsvReason::BeingReplaced);
    world.peers = vec![with_phase(back.clone(), CsvPhase::Succeeded, CsvReason::InstallSucceeded)];
    assert_eq!(phase_reason(&world.decide()), (CsvPhase::Deleting, CsvReason::Replaced));

    // The rollback itself waits for v0.9.4 to hand over, and v0.9.4 never counts as its replacement.
    let failed = with_phase(etcd(), CsvPhase::Failed, CsvReason::ComponentUnhealthy);
    let mut world = World::etcd_ready(Some((CsvPhase::Pending, CsvReason::RequirementsUnknown)));
    world.csv = with_phase(back.clone(), CsvPhase::Pending, CsvReason::RequirementsUnknown);
    world.peers = vec![failed.clone()];
    assert_eq!(phase_reason(&world.decide()), (CsvPhase::Pending, CsvReason::RequirementsUnknown));
    world.peers = vec![with_phase(failed, CsvPhase::Replacing, CsvReason::BeingReplaced)];
    world.csv = with_phase(back, CsvPhase::Succeeded, CsvReason::InstallSucceeded);
    let (phase, _) = phase_reason(&world.decide());
    assert_ne!(phase, CsvPhase::Replacing, "the newer CSV it rolled back is not its replacement");

    // v0.9.2 was still there, waiting in Replacing when v0.9.4 failed: the rollback's plan
    // turns it into v0.9.4's replacement, and it installs again.
    let mut world = World::etcd_ready(Some((CsvPhase::Replacing, CsvReason::BeingReplaced)));
    world.csv = with_phase(world.csv.clone(), CsvPhase::Replacing, CsvReason::BeingReplaced);
    world.csv.metadata.name = Some("etcdoperator.v0.9.2".into());
    world.csv.spec.replaces = Some("etcdoperator.v0.9.4".into());
    world.csv.metadata.annotations.get_or_insert_default().insert(olm_api::keys::ROLLBACK_OF_ANNOTATION.into(), "etcdoperator.v0.9.4".into());
    let mut failed = with_phase(etcd(), CsvPhase::Failed, CsvReason::ComponentUnhealthy);
    failed.spec.replaces = Some("etcdoperator.v0.9.2".into());
    world.peers = vec![failed];
    assert_eq!(phase_reason(&world.decide()), (CsvPhase::Pending, CsvReason::NeedsReinstall));
}

#[test]
fn the_operator_condition_is_kept_and_can_veto_an_upgrade() {
    let mut world = World::etcd_ready(Some((CsvPhase::Pending, CsvReason::RequirementsUnknown)));
    world.condition = None;
    let decision = world.decide();
    let Some(CsvAction::ApplyOperatorCondition(condition)) = decision.actions.first() else {
        panic!("expected the OperatorCondition first: {:?}", decision.actions);
    };
    assert_eq!(condition.metadata.name.as_deref(), Some("etcdoperator.v0.9.4"));
    assert_eq!(condition.spec.deployments, Some(vec!["etcd-operator".to_owned()]));
    assert_eq!(condition.spec.service_accounts, Some(vec!["etcd-operator".to_owned()]));
    world.condition = Some((**condition).clone());
    assert!(!world.decide().actions.iter().any(|a| matches!(a, CsvAction::ApplyOperatorCondition(_))));

    let mut veto = olm_api::v2::OperatorCondition::new("etcdoperator.v0.9.2", Default::default());
    veto.spec.conditions = Some(vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
        type_: "Upgradeable".into(),
        status: "False".into(),
        reason: "Migrating".into(),
        message: "a data migration is running".into(),
        last_transition_time: Time(now()),
        observed_generation: None,
    }]);
    world.replaced_condition = Some(veto);
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Pending, CsvReason::OperatorConditionNotUpgradeable));
    assert!(decision.status.and_then(|s| s.message).unwrap_or_default().contains("a data migration is running"));
}

#[test]
fn a_deleted_csv_cleans_cluster_objects_then_releases_its_finalizer() {
    let mut world = World::etcd_ready(Some((CsvPhase::Succeeded, CsvReason::InstallSucceeded))).with_installed_deployments();
    world.csv.metadata.deletion_timestamp = Some(Time(now()));
    world.csv.metadata.finalizers = Some(vec!["example.com/other".into(), keys::CSV_CLEANUP_FINALIZER.into()]);
    let decision = world.decide();
    assert_eq!(
        decision.actions,
        vec![CsvAction::DeleteOwnedClusterObjects, CsvAction::RemoveFinalizer { index: 1 }]
    );
    assert_eq!(decision.status, None, "no status write on the way out");

    // Already released (or never added): nothing to do, never a re-add.
    world.csv.metadata.finalizers = Some(vec!["example.com/other".into()]);
    assert_eq!(world.decide().actions, Vec::new());
}

#[test]
fn a_csv_migrated_to_olm_v1_leaves_the_crds_conversion_to_the_extension() {
    let mut world = World::etcd_ready(Some((CsvPhase::Succeeded, CsvReason::InstallSucceeded))).with_installed_deployments();
    world.csv.spec.webhook_definitions = Some(vec![serde_json::from_value(serde_json::json!({
        "type": "ConversionWebhook", "generateName": "cv.example.com", "deploymentName": "etcd-operator",
        "admissionReviewVersions": ["v1"], "sideEffects": "None", "webhookPath": "/convert",
        "conversionCRDs": ["etcdclusters.etcd.database.coreos.com"]
    }))
    .unwrap()]);
    world.csv.metadata.deletion_timestamp = Some(Time(now()));
    world.csv.metadata.finalizers = Some(vec![keys::CSV_CLEANUP_FINALIZER.into()]);
    assert!(world.decide().actions.iter().any(|a| matches!(a, CsvAction::ResetCrdConversion { .. })), "uninstalled: conversion reset");

    world.csv.metadata.annotations.get_or_insert_default().insert(keys::MIGRATING_TO_ANNOTATION.into(), "etcd".into());
    assert_eq!(
        world.decide().actions,
        vec![CsvAction::DeleteOwnedClusterObjects, CsvAction::RemoveFinalizer { index: 0 }],
        "only what carries OLM v0's labels still goes: what the extension adopted does not"
    );
}

#[test]
fn a_cycle_of_replacements_keeps_the_running_csv_and_fails_the_newest() {
    // v0.9.4 runs and replaces v0.9.2; a v0.9.2 created later names v0.9.4 in spec.replaces.
    let created = |csv: &mut ClusterServiceVersion, ago: i64| {
        csv.metadata.creation_timestamp = Some(Time(now() - SignedDuration::from_secs(ago)));
    };
    let mut world = World::etcd_ready(Some((CsvPhase::Succeeded, CsvReason::InstallSucceeded))).with_installed_deployments();
    created(&mut world.csv, 600);
    let mut older = world.csv.clone();
    older.metadata.name = Some("etcdoperator.v0.9.2".into());
    older.spec.replaces = Some("etcdoperator.v0.9.4".into());
    created(&mut older, 60);
    world.peers.push(older.clone());
    // The running one is not handed over to the CSV it replaces.
    assert_eq!(phase_reason(&world.decide()), (CsvPhase::Succeeded, CsvReason::InstallSucceeded));

    // The newest member of the cycle fails, naming it and what to do.
    let running = world.csv.clone();
    world.csv = with_phase(older, CsvPhase::Pending, CsvReason::RequirementsUnknown);
    world.peers = vec![running];
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Failed, CsvReason::Other("ReplacesCycle".into())));
    let message = decision.status.as_ref().and_then(|s| s.message.clone()).unwrap_or_default();
    assert!(
        message.contains("etcdoperator.v0.9.2 -> etcdoperator.v0.9.4 -> etcdoperator.v0.9.2"),
        "{message}"
    );
    assert!(!decision.actions.iter().any(|a| matches!(a, CsvAction::DeleteSelf)));
}
