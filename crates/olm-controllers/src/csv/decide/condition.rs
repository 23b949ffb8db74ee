//! The CSV's OperatorCondition: the object OLM keeps for it, the RBAC that lets the operator
//! update it, and its status kept in step with its spec.

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use olm_api::keys;
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use olm_api::v2::{OperatorCondition, OperatorConditionSpec};

use super::{CsvAction, CsvDecision, Observed};

/// The OperatorCondition OLM keeps for a CSV: named after it, owned by it, listing its
/// Deployments and ServiceAccounts (`default` when it declares none), as upstream does.
pub fn desired_operator_condition(csv: &ClusterServiceVersion) -> OperatorCondition {
    let deployments: Vec<String> = csv.spec.strategy_deployment_names().map(str::to_owned).collect();
    let mut accounts: Vec<String> = crate::csv::requirements::declared_service_accounts(csv).into_iter().collect();
    if accounts.is_empty() {
        accounts.push("default".into());
    }
    OperatorCondition {
        metadata: ObjectMeta {
            name: Some(csv.name_any()),
            namespace: csv.namespace(),
            owner_references: Some(vec![crate::metadata::owner_reference(csv)]),
            ..Default::default()
        },
        // Only the fields OLM owns are applied; conditions and overrides belong to others.
        spec: OperatorConditionSpec {
            deployments: Some(deployments),
            service_accounts: Some(accounts),
            conditions: None,
            overrides: None,
        },
        status: None,
    }
}

/// The Role and RoleBinding that let the operator's ServiceAccounts read and update its own
/// OperatorCondition (upstream's: named after it, labelled `olm.managed=true`, controlled by
/// the OperatorCondition so they go with it).
pub fn desired_condition_rbac(condition: &OperatorCondition) -> (Role, RoleBinding) {
    let name = condition.name_any();
    let namespace = condition.namespace();
    let meta = ObjectMeta {
        name: Some(name.clone()),
        namespace: namespace.clone(),
        labels: Some(BTreeMap::from([(keys::MANAGED_LABEL.to_owned(), "true".to_owned())])),
        owner_references: Some(vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "operators.coreos.com/v2".to_owned(),
            kind: "OperatorCondition".to_owned(),
            name: name.clone(),
            uid: condition.uid().unwrap_or_default(),
            controller: Some(true),
            block_owner_deletion: Some(false),
        }]),
        ..Default::default()
    };
    let role = Role {
        metadata: meta.clone(),
        rules: Some(vec![PolicyRule {
            verbs: vec!["get".to_owned(), "update".to_owned(), "patch".to_owned()],
            api_groups: Some(vec!["operators.coreos.com".to_owned()]),
            resources: Some(vec!["operatorconditions".to_owned()]),
            resource_names: Some(vec![name.clone()]),
            ..Default::default()
        }]),
    };
    let subjects = condition
        .spec
        .service_accounts
        .iter()
        .flatten()
        .map(|sa| k8s_openapi::api::rbac::v1::Subject {
            kind: "ServiceAccount".to_owned(),
            name: sa.clone(),
            namespace: namespace.clone(),
            api_group: None,
        })
        .collect();
    let binding = RoleBinding {
        metadata: meta,
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".to_owned()),
            kind: "Role".to_owned(),
            name,
        },
        subjects: Some(subjects),
    };
    (role, binding)
}

/// The OperatorCondition's status when it lags its spec (`None` when it does not): each
/// condition the operator reports in `spec.conditions` is copied with `observedGeneration`
/// set to the object's generation; the transition time stays when the status did not change.
/// Conditions no longer reported are left as they are, as upstream does. A status condition
/// already written for this generation (or, by someone else, for a later one) is left too:
/// upstream syncs on a change of the spec, not on every look.
pub fn synced_condition_status(condition: &OperatorCondition) -> Option<olm_api::v2::OperatorConditionStatus> {
    let generation = condition.metadata.generation;
    let mut conditions = condition.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    let mut changed = false;
    for reported in condition.spec.conditions.iter().flatten() {
        let existing = conditions.iter_mut().find(|c| c.type_ == reported.type_);
        match existing {
            Some(c) if c.observed_generation.unwrap_or(0) >= generation.unwrap_or(0) => {}
            Some(c) => {
                let transition = if c.status == reported.status {
                    c.last_transition_time.clone()
                } else {
                    reported.last_transition_time.clone()
                };
                *c = reported.clone();
                c.last_transition_time = transition;
                c.observed_generation = generation;
                changed = true;
            }
            None => {
                let mut added = reported.clone();
                added.observed_generation = generation;
                conditions.push(added);
                changed = true;
            }
        }
    }
    changed.then_some(olm_api::v2::OperatorConditionStatus { conditions: Some(conditions) })
}

/// Keep the OperatorCondition's RBAC in place and its status in step with its spec.
pub(super) fn with_condition_rbac_and_status(observed: &Observed<'_>, condition: &OperatorCondition, mut decision: CsvDecision) -> CsvDecision {
    let (role, binding) = desired_condition_rbac(condition);
    let controlled = |refs: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference]| {
        refs.iter().any(|r| Some(&r.uid) == condition.metadata.uid.as_ref() && r.controller == Some(true))
    };
    let (found_role, found_binding) = observed.condition_rbac;
    let role_current = found_role.is_some_and(|r| r.rules == role.rules && controlled(r.owner_references()));
    if !role_current {
        decision = decision.act(CsvAction::ApplyRole(Box::new(role)));
    }
    let binding_current = found_binding.is_some_and(|b| {
        b.role_ref == binding.role_ref && b.subjects == binding.subjects && controlled(b.owner_references())
    });
    if !binding_current {
        decision = decision.act(CsvAction::ApplyRoleBinding(Box::new(binding)));
    }
    if let Some(status) = synced_condition_status(condition) {
        decision = decision.act(CsvAction::ApplyOperatorConditionStatus(Box::new(status)));
    }
    decision
}
