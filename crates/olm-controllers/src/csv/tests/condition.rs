//! The OperatorCondition with its RBAC and status, and the provided APIs' ClusterRoles.

use super::*;

#[test]
fn succeeded_csv_keeps_per_api_cluster_roles_owned_by_the_crds() {
    let mut world = World::etcd_ready(Some((CsvPhase::Succeeded, CsvReason::InstallSucceeded))).with_installed_deployments();
    world.crd_uids = world.crds.keys().map(|name| (name.clone(), format!("uid-{name}"))).collect();
    let decision = world.decide();
    let roles: Vec<k8s_openapi::api::rbac::v1::ClusterRole> = decision
        .actions
        .iter()
        .filter_map(|a| match a {
            CsvAction::ApplyApiRole(role) => Some((**role).clone()),
            _ => None,
        })
        .collect();
    assert_eq!(roles.len(), 12, "3 CRDs x admin/edit/view/crdview");
    let admin = roles
        .iter()
        .find(|r| r.name_any() == "etcdclusters.etcd.database.coreos.com-v1beta2-admin")
        .expect("admin role");
    assert_eq!(admin.labels().get("rbac.authorization.k8s.io/aggregate-to-admin").map(String::as_str), Some("true"));
    let rule = &admin.rules.as_ref().expect("rules")[0];
    assert_eq!(rule.verbs, vec!["*".to_owned()]);
    assert_eq!(rule.resources, Some(vec!["etcdclusters".to_owned()]));
    assert_eq!(admin.owner_references()[0].uid, "uid-etcdclusters.etcd.database.coreos.com");
    world.cluster_roles = roles.into_iter().map(|r| (r.name_any(), r)).collect();
    assert!(world.decide().actions.is_empty(), "existing roles are not re-applied");
}

#[test]
fn the_operator_may_read_and_update_its_own_operator_condition() {
    let mut world = World::etcd_ready(Some((CsvPhase::Succeeded, CsvReason::InstallSucceeded))).with_installed_deployments();
    world.condition_role = None;
    world.condition_binding = None;
    let decision = world.decide();
    let role = decision.actions.iter().find_map(|a| match a {
        CsvAction::ApplyRole(r) => Some(r),
        _ => None,
    });
    let role = role.expect("the OperatorCondition's Role");
    assert_eq!(role.name_any(), "etcdoperator.v0.9.4");
    assert_eq!(role.labels().get(keys::MANAGED_LABEL).map(String::as_str), Some("true"));
    let rule = &role.rules.as_deref().unwrap_or_default()[0];
    assert_eq!(rule.verbs, ["get", "update", "patch"]);
    assert_eq!(rule.resources.as_deref(), Some(&["operatorconditions".to_owned()][..]));
    assert_eq!(rule.resource_names.as_deref(), Some(&["etcdoperator.v0.9.4".to_owned()][..]));
    let owner = &role.owner_references()[0];
    assert_eq!((owner.kind.as_str(), owner.uid.as_str(), owner.controller), ("OperatorCondition", "uid-condition", Some(true)));
    let binding = decision.actions.iter().find_map(|a| match a {
        CsvAction::ApplyRoleBinding(b) => Some(b),
        _ => None,
    });
    let binding = binding.expect("the OperatorCondition's RoleBinding");
    assert_eq!(binding.role_ref.name, "etcdoperator.v0.9.4");
    let subjects: Vec<(&str, Option<&str>)> = binding
        .subjects
        .iter()
        .flatten()
        .map(|s| (s.name.as_str(), s.namespace.as_deref()))
        .collect();
    assert_eq!(subjects, [("etcd-operator", Some(NS))]);
    assert_eq!(phase_reason(&decision), (CsvPhase::Succeeded, CsvReason::InstallSucceeded));

    // In place: nothing to do.
    let settled = World::etcd_ready(Some((CsvPhase::Succeeded, CsvReason::InstallSucceeded))).with_installed_deployments();
    assert!(
        !settled.decide().actions.iter().any(|a| matches!(a, CsvAction::ApplyRole(_) | CsvAction::ApplyRoleBinding(_))),
        "nothing reapplied when current"
    );
}

#[test]
fn operator_condition_status_follows_its_spec_with_the_observed_generation() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
    let reported = |status: &str, at: i64| Condition {
        type_: "Upgradeable".into(),
        status: status.into(),
        reason: "Migrating".into(),
        message: "a migration is running".into(),
        observed_generation: None,
        last_transition_time: Time(Timestamp::from_second(at).expect("time")),
    };
    let mut world = World::etcd_ready(Some((CsvPhase::Succeeded, CsvReason::InstallSucceeded))).with_installed_deployments();
    let condition = world.condition.as_mut().expect("condition");
    condition.metadata.generation = Some(3);
    condition.spec.conditions = Some(vec![reported("False", 1_700_000_000)]);
    let statuses = |decision: &CsvDecision| -> Vec<olm_api::v2::OperatorConditionStatus> {
        decision
            .actions
            .iter()
            .filter_map(|a| match a {
                CsvAction::ApplyOperatorConditionStatus(s) => Some((**s).clone()),
                _ => None,
            })
            .collect()
    };
    let written = statuses(&world.decide());
    assert_eq!(written.len(), 1);
    let condition_status = written[0].conditions.clone().unwrap_or_default();
    assert_eq!(condition_status.len(), 1);
    assert_eq!((condition_status[0].status.as_str(), condition_status[0].observed_generation), ("False", Some(3)));

    // Written: nothing more to do.
    let condition = world.condition.as_mut().expect("condition");
    condition.status = Some(written[0].clone());
    assert!(statuses(&world.decide()).is_empty());

    // The spec is edited again (same status): only the generation moves, not the transition time.
    let condition = world.condition.as_mut().expect("condition");
    condition.metadata.generation = Some(4);
    condition.spec.conditions = Some(vec![reported("False", 1_700_000_500)]);
    let written = statuses(&world.decide());
    let updated = written[0].conditions.clone().unwrap_or_default();
    assert_eq!(updated[0].observed_generation, Some(4));
    assert_eq!(updated[0].last_transition_time, Time(Timestamp::from_second(1_700_000_000).expect("time")));
}
