//! The Pending gate: CRDs, ServiceAccounts, permissions, minKubeVersion, native APIs and
//! required APIServices, reported as the requirement status.

use super::*;

/// A requirement not met stops the pass in Pending.
#[test]
fn none_with_a_requirement_missing_stops_in_pending() {
    let mut world = World::etcd_ready(None);
    if let Some(checks) = world.permissions.as_mut() {
        checks[0].satisfied = false;
    }
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Pending, CsvReason::RequirementsNotMet));
    let reasons: Vec<&str> = decision.events.iter().map(|e| e.reason.as_str()).collect();
    assert_eq!(reasons, ["RequirementsUnknown", "RequirementsNotMet"]);
    assert!(!decision.actions.iter().any(|a| matches!(a, CsvAction::ApplyDeployment(_))));
}

/// A CSV created 3 s ago whose plan has not written its ServiceAccount yet says nothing: no
/// status, no Event, another look within 2 s (the account's own event comes sooner). From 10 s
/// on it reports what is missing; a young CSV with everything in place goes on at once.
#[test]
fn a_new_csv_reports_missing_requirements_only_after_its_plans_grace() {
    let created = |world: &mut World, ago: i64| {
        world.csv.metadata.creation_timestamp = Some(Time(now() - SignedDuration::from_secs(ago)));
    };
    let mut world = World::etcd_ready(None);
    world.service_accounts.clear();
    created(&mut world, 3);
    let decision = world.decide();
    assert!(decision.status.is_none(), "no status write yet: {:?}", decision.status);
    assert!(decision.events.is_empty(), "no Event yet: {:?}", decision.events);
    assert_eq!(decision.requeue_after, Some(std::time::Duration::from_secs(2)));

    created(&mut world, 9);
    assert_eq!(world.decide().requeue_after, Some(std::time::Duration::from_secs(1)), "never past the grace");

    created(&mut world, 10);
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Pending, CsvReason::RequirementsNotMet));
    let reasons: Vec<&str> = decision.events.iter().map(|e| e.reason.as_str()).collect();
    assert_eq!(reasons, ["RequirementsUnknown", "RequirementsNotMet"]);

    // A creation time ahead of OLM's clock (skew) holds nothing back.
    created(&mut world, -30);
    assert_eq!(phase_reason(&world.decide()), (CsvPhase::Pending, CsvReason::RequirementsNotMet));

    let mut ready = World::etcd_ready(None);
    created(&mut ready, 1);
    assert_eq!(phase_reason(&ready.decide()), (CsvPhase::Installing, CsvReason::InstallSucceeded));
}

#[test]
fn missing_crds_and_service_account_keep_it_pending_with_requirement_status() {
    let mut world = World::etcd_ready(Some((CsvPhase::Pending, CsvReason::RequirementsUnknown)));
    world.crds.remove("etcdclusters.etcd.database.coreos.com");
    world.crds.insert(
        "etcdbackups.etcd.database.coreos.com".into(),
        CrdState {
            served_versions: vec!["v1beta2".into()],
            established: false,
            names_accepted: true,
            ..Default::default()
        },
    );
    world.service_accounts.clear();
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Pending, CsvReason::RequirementsNotMet));
    let requirements = decision.status.as_ref().and_then(|s| s.requirement_status.clone()).expect("requirement status");
    let find = |name: &str| requirements.iter().find(|r| r.name == name).map(|r| r.status.clone());
    assert_eq!(find("etcdclusters.etcd.database.coreos.com"), Some(StatusReason::NotPresent));
    assert_eq!(find("etcdbackups.etcd.database.coreos.com"), Some(StatusReason::PresentNotAvailable));
    assert_eq!(find("etcdrestores.etcd.database.coreos.com"), Some(StatusReason::Present));
    assert_eq!(find("etcd-operator"), Some(StatusReason::NotPresent));
    assert!(decision.requeue_after.is_some(), "requirements are re-checked periodically");

    // A CRD that does not serve the version the CSV names: upstream's words.
    world.crds.insert(
        "etcdrestores.etcd.database.coreos.com".into(),
        CrdState { served_versions: vec!["v1".into()], established: true, names_accepted: true, ..Default::default() },
    );
    let decision = world.decide();
    let requirements = decision.status.as_ref().and_then(|s| s.requirement_status.clone()).expect("requirement status");
    let restores = requirements.iter().find(|r| r.name == "etcdrestores.etcd.database.coreos.com").expect("entry");
    assert_eq!((restores.status.clone(), restores.message.as_str()), (StatusReason::NotPresent, "CRD version not served"));
}

/// multicluster-operators-subscription 0.4.0 owns gitopsclusters twice: at v1alpha1, which its
/// CRD no longer serves, then at v1beta1. Upstream checks one description per CRD name, the last
/// owned one, so it installs; so must we.
#[test]
fn a_crd_owned_twice_is_checked_at_the_version_listed_last() {
    let mut world = World::etcd_ready(Some((CsvPhase::Pending, CsvReason::RequirementsUnknown)));
    let owned = world.csv.spec.custom_resource_definitions.as_mut().and_then(|c| c.owned.as_mut()).expect("owned CRDs");
    let restores = owned.iter().position(|c| c.name == "etcdrestores.etcd.database.coreos.com").expect("etcdrestores");
    let mut old = owned[restores].clone();
    old.version = "v1alpha1".into();
    owned.insert(restores, old);
    let restores_state = world.crds.get("etcdrestores.etcd.database.coreos.com").cloned().expect("state");
    assert!(!restores_state.served_versions.contains(&"v1alpha1".to_owned()), "the CRD does not serve the first version listed");
    let decision = world.decide();
    let requirements = decision.status.as_ref().and_then(|s| s.requirement_status.clone()).expect("requirement status");
    let entries: Vec<_> = requirements.iter().filter(|r| r.name == "etcdrestores.etcd.database.coreos.com").collect();
    assert_eq!(entries.len(), 1, "one entry per CRD: {entries:?}");
    assert_eq!(entries[0].status, StatusReason::Present, "{entries:?}");
    assert_ne!(phase_reason(&decision), (CsvPhase::Pending, CsvReason::RequirementsNotMet));
}

#[test]
fn unsatisfied_permission_keeps_it_pending() {
    let mut world = World::etcd_ready(Some((CsvPhase::Pending, CsvReason::RequirementsUnknown)));
    if let Some(checks) = world.permissions.as_mut() {
        checks[0].satisfied = false;
    }
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Pending, CsvReason::RequirementsNotMet));
    let requirements = decision.status.as_ref().and_then(|s| s.requirement_status.clone()).expect("requirement status");
    let sa = requirements.iter().find(|r| r.kind == "ServiceAccount").expect("sa entry");
    assert_eq!(sa.status, StatusReason::PresentNotSatisfied);
    let dependents = sa.dependents.clone().unwrap_or_default();
    assert_eq!(dependents[0].status, StatusReason::NotSatisfied);
    assert!(dependents[0].message.as_deref().unwrap_or_default().starts_with("namespaced rule:"));
}

#[test]
fn requirements_met_goes_on_to_install() {
    let world = World::etcd_ready(Some((CsvPhase::Pending, CsvReason::RequirementsNotMet)));
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Installing, CsvReason::InstallSucceeded));
    let history = decision.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    assert!(history.iter().any(|c| c.reason == Some(CsvReason::AllRequirementsMet)), "{history:?}");
    assert!(decision.actions.iter().any(|a| matches!(a, CsvAction::ApplyDeployment(_))), "{:?}", decision.actions);
}

#[test]
fn a_service_account_owned_by_another_csv_is_not_taken_over() {
    let mut world = World::etcd_ready(Some((CsvPhase::Pending, CsvReason::RequirementsUnknown)));
    world.foreign_service_accounts = BTreeMap::from([("etcd-operator".to_owned(), vec!["backup-operator.v1.0.0".to_owned()])]);
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Pending, CsvReason::RequirementsNotMet));
    assert!(!decision.actions.iter().any(|a| matches!(a, CsvAction::ApplyDeployment(_))));
    let requirements = decision.status.as_ref().and_then(|s| s.requirement_status.clone()).unwrap_or_default();
    let sa = requirements.iter().find(|r| r.kind == "ServiceAccount").expect("a ServiceAccount entry");
    assert_eq!(sa.status, StatusReason::PresentNotSatisfied);
    assert!(sa.message.starts_with("Service account is owned by another ClusterServiceVersion"), "{}", sa.message);
    assert!(sa.message.contains("backup-operator.v1.0.0") && sa.message.contains("etcdoperator.v0.9.4"), "{}", sa.message);

    // Taken by another operator after the install: requirements no longer met.
    let mut installed = World::etcd_ready(Some((CsvPhase::Succeeded, CsvReason::InstallSucceeded))).with_installed_deployments();
    installed.foreign_service_accounts = world.foreign_service_accounts.clone();
    assert_eq!(phase_reason(&installed.decide()), (CsvPhase::Failed, CsvReason::RequirementsNotMet));
}

/// An ownerReference to the CSV `name` with `uid`.
fn owner(name: &str, uid: &str) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
        api_version: "operators.coreos.com/v1alpha1".into(),
        kind: "ClusterServiceVersion".into(),
        name: name.into(),
        uid: uid.into(),
        ..Default::default()
    }
}

#[test]
fn only_live_owners_outside_the_replacement_chain_make_an_account_foreign() {
    use crate::csv::requirements::foreign_owners;
    let mut other = etcd();
    other.metadata.name = Some("backup-operator.v1.0.0".into());
    other.metadata.uid = Some("uid-backup".into());
    let mut next = etcd();
    next.metadata.name = Some("etcdoperator.v0.9.5".into());
    next.metadata.uid = Some("uid-next".into());
    next.spec.replaces = Some("etcdoperator.v0.9.4".into());
    let me = etcd();
    let peers = [&other, &next];
    let chain = crate::csv::decide::replacement_chain_of(&me, &peers);
    // Another live operator: foreign.
    assert_eq!(foreign_owners(&[owner("backup-operator.v1.0.0", "uid-backup")], "uid-1", &chain, &peers), ["backup-operator.v1.0.0"]);
    // Also owned by this CSV: fine (upstream merges owners).
    assert!(foreign_owners(&[owner("backup-operator.v1.0.0", "uid-backup"), owner("etcdoperator.v0.9.4", "uid-1")], "uid-1", &chain, &peers).is_empty());
    // Handed to the version replacing this one: part of the upgrade, not a theft.
    assert!(foreign_owners(&[owner("etcdoperator.v0.9.5", "uid-next")], "uid-1", &chain, &peers).is_empty());
    // An owner that is gone (or a different object of that name): garbage collection's business.
    assert!(foreign_owners(&[owner("backup-operator.v1.0.0", "uid-old")], "uid-1", &chain, &peers).is_empty());
    // Not owned by any CSV.
    assert!(foreign_owners(&[], "uid-1", &chain, &peers).is_empty());
}

/// An upgrade's new CSV does not count the account its predecessor still owns as its own
/// until its InstallPlan hands it over: otherwise it replaces the old version, whose deletion
/// takes the account (and its roles) with it (neuvector-operator 1.2.7 → 1.2.8 did).
#[test]
fn an_account_still_owned_only_by_the_replaced_version_is_waited_for() {
    use crate::csv::requirements::{predecessor_owners, replaced_by};
    let mut old = etcd();
    old.metadata.name = Some("etcdoperator.v0.9.2".into());
    old.spec.replaces = Some("etcdoperator.v0.9.0".into());
    let me = etcd();
    let replaced = replaced_by(&me, &[&old]);
    assert_eq!(replaced.iter().map(String::as_str).collect::<Vec<_>>(), ["etcdoperator.v0.9.0", "etcdoperator.v0.9.2"]);
    assert_eq!(predecessor_owners(&[owner("etcdoperator.v0.9.2", "uid-old")], "uid-1", &replaced), ["etcdoperator.v0.9.2"]);
    // Handed over (this CSV among the owners), or not owned by a CSV: nothing to wait for.
    assert!(predecessor_owners(&[owner("etcdoperator.v0.9.2", "uid-old"), owner("etcdoperator.v0.9.4", "uid-1")], "uid-1", &replaced).is_empty());
    assert!(predecessor_owners(&[], "uid-1", &replaced).is_empty());
    // The replaced version does not wait for the account its successor took.
    assert!(predecessor_owners(&[owner("etcdoperator.v0.9.4", "uid-1")], "uid-old", &replaced_by(&old, &[&me])).is_empty());

    let mut world = World::etcd_ready(Some((CsvPhase::Pending, CsvReason::RequirementsUnknown)));
    world.inherited_service_accounts = BTreeMap::from([("etcd-operator".to_owned(), vec!["etcdoperator.v0.9.2".to_owned()])]);
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Pending, CsvReason::RequirementsNotMet));
    let requirements = decision.status.as_ref().and_then(|s| s.requirement_status.clone()).unwrap_or_default();
    let sa = requirements.iter().find(|r| r.kind == "ServiceAccount").expect("a ServiceAccount entry");
    assert!(sa.message.contains("still owned by etcdoperator.v0.9.2") && sa.message.contains("InstallPlan"), "{}", sa.message);
}

#[test]
fn min_kube_version_native_apis_and_required_apiservices_are_requirements() {
    use crate::csv::requirements::parse_version;
    assert_eq!(parse_version("v1.36.0"), Some((1, 36, 0)));
    assert_eq!(parse_version("1.36.2-rc.1+abc"), Some((1, 36, 2)));
    assert_eq!(parse_version("1.20"), Some((1, 20, 0)));
    assert_eq!(parse_version("one"), None);

    let find = |decision: &CsvDecision, kind: &str| {
        decision
            .status
            .as_ref()
            .and_then(|s| s.requirement_status.as_deref().cloned())
            .unwrap_or_default()
            .into_iter()
            .find(|r| r.kind == kind)
    };
    // A newer Kubernetes than the server: not met, saying both versions.
    let mut world = World::etcd_ready(Some((CsvPhase::Pending, CsvReason::RequirementsUnknown)));
    world.csv.spec.min_kube_version = Some("1.40.0".into());
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Pending, CsvReason::RequirementsNotMet));
    let entry = find(&decision, "ClusterServiceVersion").expect("minKubeVersion entry");
    assert_eq!(entry.status, StatusReason::PresentNotSatisfied);
    assert_eq!(entry.message, "CSV version requirement not met: minKubeVersion (1.40.0) > server version (1.36.0)");
    world.csv.spec.min_kube_version = Some("1.25.0".into());
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Installing, CsvReason::InstallSucceeded));
    assert_eq!(find(&decision, "ClusterServiceVersion").map(|e| e.status), Some(StatusReason::Present));
    world.kube_version = None;
    let entry = find(&world.decide(), "ClusterServiceVersion").expect("entry");
    assert_eq!((entry.status, entry.message.as_str()), (StatusReason::PresentNotSatisfied, "Server version discovery error"));

    // A native API the server does not serve.
    let mut world = World::etcd_ready(Some((CsvPhase::Pending, CsvReason::RequirementsUnknown)));
    world.csv.spec.native_apis = Some(vec![olm_api::v1alpha1::cluster_service_version::GroupVersionKind {
        group: "route.openshift.io".into(),
        version: "v1".into(),
        kind: "Route".into(),
    }]);
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Pending, CsvReason::RequirementsNotMet));
    let entry = find(&decision, "Route").expect("native API entry");
    assert_eq!((entry.status, entry.name.as_str(), entry.message.as_str()), (StatusReason::NotPresent, "v1.route.openshift.io", "Native API does not exist"));
    world.served_kinds.insert("route.openshift.io/v1".into(), BTreeSet::from(["Route".to_owned()]));
    assert_eq!(phase_reason(&world.decide()), (CsvPhase::Installing, CsvReason::InstallSucceeded));

    // A required APIService: served, existing and Available.
    let mut world = World::etcd_ready(Some((CsvPhase::Pending, CsvReason::RequirementsUnknown)));
    let mut value = serde_json::to_value(&world.csv).expect("json");
    value["spec"]["apiservicedefinitions"] = serde_json::json!({"required": [
        {"name": "metrics.example.com", "group": "metrics.example.com", "version": "v1beta1", "kind": "NodeMetrics"},
    ]});
    world.csv = serde_json::from_value(value).expect("csv");
    world.served_kinds.insert("metrics.example.com/v1beta1".into(), BTreeSet::from(["NodeMetrics".to_owned()]));
    world.required_api_services.insert("v1beta1.metrics.example.com".into(), false);
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Pending, CsvReason::RequirementsNotMet));
    let entry = find(&decision, "APIService").expect("APIService entry");
    assert_eq!((entry.status, entry.message.as_str()), (StatusReason::NotPresent, "APIService is not Available"));
    world.required_api_services.insert("v1beta1.metrics.example.com".into(), true);
    assert_eq!(phase_reason(&world.decide()), (CsvPhase::Installing, CsvReason::InstallSucceeded));
}

#[test]
fn succeeded_lost_crd_fails_with_requirements_not_met() {
    let mut world = World::etcd_ready(Some((CsvPhase::Succeeded, CsvReason::InstallSucceeded))).with_installed_deployments();
    world.crds.clear();
    assert_eq!(phase_reason(&world.decide()), (CsvPhase::Failed, CsvReason::RequirementsNotMet));
}
