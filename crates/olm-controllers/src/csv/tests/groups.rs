//! OperatorGroup membership: one group with resolved targets, the CSV annotated for it,
//! install modes that allow them, no provided-API conflict with other or static groups.

use super::*;

#[test]
fn no_operator_group_fails() {
    let mut world = World::etcd_ready(None);
    world.groups.clear();
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Failed, CsvReason::NoOperatorGroup));
    assert_eq!(decision.events[0].severity, Severity::Warning);
}

#[test]
fn two_operator_groups_fail_with_too_many() {
    let mut world = World::etcd_ready(Some((CsvPhase::Succeeded, CsvReason::InstallSucceeded))).with_installed_deployments();
    world.groups.push(group("second", &[NS]));
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Failed, CsvReason::TooManyOperatorGroups));
    assert!(decision.status.as_ref().and_then(|s| s.message.as_deref()).unwrap_or_default().contains("multiple operatorgroups"));
}

#[test]
fn missing_group_annotations_are_written_first() {
    let mut world = World::etcd_ready(None);
    world.csv.metadata.annotations.as_mut().expect("annotations").remove(keys::TARGET_NAMESPACES_ANNOTATION);
    let decision = world.decide();
    assert_eq!(decision.status, world.csv.status.clone().or(Some(ClusterServiceVersionStatus::default())));
    assert_eq!(
        decision.actions,
        vec![CsvAction::Annotate(BTreeMap::from([(
            keys::TARGET_NAMESPACES_ANNOTATION.to_owned(),
            Some(NS.to_owned())
        )]))]
    );
}

#[test]
fn unsupported_install_mode_fails_and_recovers_when_the_group_changes() {
    // etcd 0.9.4 does not support AllNamespaces.
    let mut world = World::etcd_ready(Some((CsvPhase::Pending, CsvReason::RequirementsUnknown)));
    let all = group("og", &[""]);
    world.csv = annotate_for(world.csv.clone(), &all);
    world.groups = vec![all];
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Failed, CsvReason::UnsupportedOperatorGroup));
    assert_eq!(
        decision.status.as_ref().and_then(|s| s.message.clone()).as_deref(),
        Some("AllNamespaces InstallModeType not supported, cannot configure to watch all namespaces")
    );

    let mut fixed = World::etcd_ready(Some((CsvPhase::Failed, CsvReason::UnsupportedOperatorGroup)));
    fixed.permissions = None;
    let decision = fixed.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Pending, CsvReason::RequirementsUnknown));
}

#[test]
fn an_api_already_provided_by_an_intersecting_group_is_a_conflict() {
    let mut world = World::etcd_ready(Some((CsvPhase::Succeeded, CsvReason::InstallSucceeded))).with_installed_deployments();
    let mut global = group("global-operators", &[""]);
    global.metadata.namespace = Some("operators".into());
    global.metadata.annotations = Some(BTreeMap::from([(
        keys::PROVIDED_APIS_ANNOTATION.to_owned(),
        "EtcdCluster.v1beta2.etcd.database.coreos.com".to_owned(),
    )]));
    world.other_groups.push(global);
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Failed, CsvReason::InterOperatorGroupOwnerConflict));
    assert!(decision.actions.contains(&CsvAction::DeleteDeployment("etcd-operator".into())));
    // A group elsewhere that does not intersect is no conflict.
    if let Some(status) = world.other_groups[0].status.as_mut() {
        status.namespaces = Some(vec!["elsewhere".into()]);
    }
    assert_eq!(world.decide().status, world.csv.status);
}

fn static_group(world: &mut World, provided: &str) {
    let og = &mut world.groups[0];
    og.spec.static_provided_apis = Some(true);
    og.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(keys::PROVIDED_APIS_ANNOTATION.to_owned(), provided.to_owned());
}

#[test]
fn a_static_operator_group_refuses_apis_it_does_not_list() {
    let mut world = World::etcd_ready(Some((CsvPhase::Succeeded, CsvReason::InstallSucceeded))).with_installed_deployments();
    static_group(&mut world, "Other.v1.example.com");
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Failed, CsvReason::CannotModifyStaticOperatorGroupProvidedApis));
    assert_eq!(
        decision.status.as_ref().and_then(|s| s.message.as_deref()),
        Some("static provided api operatorgroup cannot be modified by these apis")
    );
    assert!(
        decision.actions.contains(&CsvAction::DeleteDeployment("etcd-operator".into())),
        "the operator is removed: {:?}",
        decision.actions
    );

    // Listing every API of the CSV: accepted as is, and a refused CSV comes back.
    let all: Vec<String> = crate::metadata::provided_apis(&world.csv).into_iter().collect();
    let mut listed = World::etcd_ready(Some((CsvPhase::Succeeded, CsvReason::InstallSucceeded))).with_installed_deployments();
    static_group(&mut listed, &all.join(","));
    assert_eq!(phase_reason(&listed.decide()), (CsvPhase::Succeeded, CsvReason::InstallSucceeded));
    listed.csv.status = decision.status.clone();
    assert_eq!(phase_reason(&listed.decide()), (CsvPhase::Pending, CsvReason::RequirementsUnknown));

    // Not static: the annotation is the OperatorGroup controller's to extend.
    let mut dynamic = World::etcd_ready(Some((CsvPhase::Succeeded, CsvReason::InstallSucceeded))).with_installed_deployments();
    static_group(&mut dynamic, "Other.v1.example.com");
    dynamic.groups[0].spec.static_provided_apis = Some(false);
    assert_eq!(phase_reason(&dynamic.decide()), (CsvPhase::Succeeded, CsvReason::InstallSucceeded));
}
