//! `granted_by`: what the RBAC generated for a CSV grants without asking the API server.

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::api::ObjectMeta;

use super::{ETCD_CSV, NS, declared_rules, load};
use crate::csv::requirements::{GeneratedRbac, granted_by};

fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: namespace.map(Into::into),
        ..ObjectMeta::default()
    }
}

fn account(name: &str, namespace: &str) -> Subject {
    Subject {
        kind: "ServiceAccount".into(),
        name: name.into(),
        namespace: Some(namespace.into()),
        ..Subject::default()
    }
}

fn role_ref(kind: &str, name: &str) -> RoleRef {
    RoleRef {
        api_group: Some("rbac.authorization.k8s.io".into()),
        kind: kind.into(),
        name: name.into(),
    }
}

/// What the InstallPlan writes for the etcd CSV: one Role with its rules, bound to its account.
fn generated(rules: Vec<PolicyRule>) -> GeneratedRbac {
    GeneratedRbac {
        roles: vec![Role { metadata: meta("etcd-role", Some(NS)), rules: Some(rules) }],
        bindings: vec![RoleBinding {
            metadata: meta("etcd-role", Some(NS)),
            role_ref: role_ref("Role", "etcd-role"),
            subjects: Some(vec![account("etcd-operator", NS)]),
        }],
        ..GeneratedRbac::default()
    }
}

fn etcd_rules() -> Vec<(String, bool, PolicyRule)> {
    declared_rules(&load(ETCD_CSV))
}

#[test]
fn the_generated_role_and_binding_grant_every_rule_they_hold() {
    let rules = etcd_rules();
    let rbac = generated(rules.iter().map(|(_, _, r)| r.clone()).collect());
    assert!(!rules.is_empty());
    for (sa, cluster, rule) in &rules {
        assert!(granted_by(&rbac, NS, sa, *cluster, rule), "{rule:?} should be granted");
    }
}

#[test]
fn a_rule_missing_from_the_role_is_left_to_the_api_server() {
    let rules = etcd_rules();
    let (sa, _, first) = &rules[0];
    let rbac = generated(rules.iter().skip(1).map(|(_, _, r)| r.clone()).collect());
    assert!(!granted_by(&rbac, NS, sa, false, first));
}

#[test]
fn a_binding_to_another_account_or_namespace_grants_nothing() {
    let rules = etcd_rules();
    let (sa, _, rule) = &rules[0];
    let mut rbac = generated(vec![rule.clone()]);
    rbac.bindings[0].subjects = Some(vec![account("someone-else", NS), account(sa, "other-namespace")]);
    assert!(!granted_by(&rbac, NS, sa, false, rule));
    // A Role elsewhere does not grant in this namespace either.
    let mut elsewhere = generated(vec![rule.clone()]);
    elsewhere.roles[0].metadata.namespace = Some("other-namespace".into());
    assert!(!granted_by(&elsewhere, NS, sa, false, rule));
}

#[test]
fn cluster_rules_need_a_cluster_role_bound_cluster_wide() {
    let rules = etcd_rules();
    let (sa, _, rule) = &rules[0];
    // A namespaced Role never grants a cluster rule.
    assert!(!granted_by(&generated(vec![rule.clone()]), NS, sa, true, rule));
    let cluster = GeneratedRbac {
        cluster_roles: vec![ClusterRole {
            metadata: meta("etcd-cluster", None),
            rules: Some(vec![rule.clone()]),
            ..ClusterRole::default()
        }],
        cluster_bindings: vec![ClusterRoleBinding {
            metadata: meta("etcd-cluster", None),
            role_ref: role_ref("ClusterRole", "etcd-cluster"),
            subjects: Some(vec![account(sa, NS)]),
        }],
        ..GeneratedRbac::default()
    };
    assert!(granted_by(&cluster, NS, sa, true, rule));
    // Cluster-wide grants hold in the namespace too.
    assert!(granted_by(&cluster, NS, sa, false, rule));
    // A binding to a Role of the same name is not a binding to the ClusterRole.
    let mut wrong_kind = cluster.clone();
    wrong_kind.cluster_bindings[0].role_ref = role_ref("Role", "etcd-cluster");
    assert!(!granted_by(&wrong_kind, NS, sa, true, rule));
}
