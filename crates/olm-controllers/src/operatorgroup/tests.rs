//! OperatorGroup decisions (no cluster).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement, Time};
use k8s_openapi::jiff::Timestamp;
use olm_api::keys;

use olm_api::v1::operator_group::{OperatorGroup, OperatorGroupSpec, OperatorGroupStatus};
use olm_api::v1alpha1::cluster_service_version::{ClusterServiceVersion, ClusterServiceVersionStatus, CsvPhase};

use super::decide::{NamespaceView, Observed, OgAction, decide, stale_group_labels, target_namespaces};

const ETCD_CSV: &str = include_str!("../../testdata/etcd-0.9.4/etcdoperator.v0.9.4.clusterserviceversion.yaml");

fn now() -> Timestamp {
    Timestamp::from_second(1_800_000_000).expect("valid timestamp")
}

fn namespaces() -> Vec<NamespaceView<'static>> {
    static TEAM_X: std::sync::LazyLock<BTreeMap<String, String>> = std::sync::LazyLock::new(|| BTreeMap::from([("team".into(), "x".into())]));
    static NONE: BTreeMap<String, String> = BTreeMap::new();
    vec![
        NamespaceView { name: "a", labels: &TEAM_X },
        NamespaceView { name: "b", labels: &NONE },
        NamespaceView { name: "ops", labels: &TEAM_X },
    ]
}

fn group(spec: OperatorGroupSpec) -> OperatorGroup {
    let mut og = OperatorGroup::new("og", spec);
    og.metadata.namespace = Some("ops".into());
    og.metadata.uid = Some("1234".into());
    og
}

fn etcd() -> ClusterServiceVersion {
    let mut csv: ClusterServiceVersion = olm_api::yaml::from_str(ETCD_CSV, "testdata").expect("fixture parses");
    csv.metadata.namespace = Some("ops".into());
    csv
}

#[test]
fn targets_come_from_the_list_the_selector_or_everything() {
    let ns = namespaces();
    let explicit = group(OperatorGroupSpec { target_namespaces: Some(vec!["b".into(), "a".into(), "a".into()]), ..Default::default() });
    assert_eq!(target_namespaces(&explicit, &ns), vec!["a".to_owned(), "b".to_owned()]);
    let selected = group(OperatorGroupSpec {
        selector: Some(LabelSelector { match_labels: Some(BTreeMap::from([("team".into(), "x".into())])), ..Default::default() }),
        ..Default::default()
    });
    assert_eq!(target_namespaces(&selected, &ns), vec!["a".to_owned(), "ops".to_owned()]);
    assert_eq!(target_namespaces(&group(OperatorGroupSpec::default()), &ns), vec![String::new()]);
    let empty_list = group(OperatorGroupSpec { target_namespaces: Some(vec![]), ..Default::default() });
    assert_eq!(target_namespaces(&empty_list, &ns), vec![String::new()]);
}

/// The label selectors of `spec.selector`, matched as Kubernetes does (kube-core's `Selector`).
#[test]
fn a_selector_matches_namespace_labels_as_kubernetes_does() {
    let ns = namespaces();
    let requirement = |key: &str, operator: &str, values: Option<&[&str]>| LabelSelectorRequirement {
        key: key.into(),
        operator: operator.into(),
        values: values.map(|v| v.iter().map(|s| (*s).to_owned()).collect()),
    };
    let by_labels = |labels: &[(&str, &str)]| LabelSelector {
        match_labels: Some(labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()),
        ..Default::default()
    };
    let by_expressions = |expressions: Vec<LabelSelectorRequirement>| LabelSelector { match_expressions: Some(expressions), ..Default::default() };
    let all = vec![String::new()];
    let x = vec!["a".to_owned(), "ops".to_owned()];
    let cases: Vec<(&str, LabelSelector, Vec<String>)> = vec![
        ("empty: everything", LabelSelector::default(), all.clone()),
        ("empty matchLabels: everything", by_labels(&[]), all.clone()),
        ("matchLabels", by_labels(&[("team", "x")]), x.clone()),
        ("matchLabels, another value", by_labels(&[("team", "y")]), vec![]),
        ("In", by_expressions(vec![requirement("team", "In", Some(&["x", "y"]))]), x.clone()),
        ("NotIn: absent counts", by_expressions(vec![requirement("team", "NotIn", Some(&["x"]))]), vec!["b".to_owned()]),
        ("Exists", by_expressions(vec![requirement("team", "Exists", None)]), x.clone()),
        ("DoesNotExist", by_expressions(vec![requirement("team", "DoesNotExist", None)]), vec!["b".to_owned()]),
        (
            "every requirement",
            LabelSelector { match_expressions: Some(vec![requirement("team", "Exists", None)]), ..by_labels(&[("team", "y")]) },
            vec![],
        ),
        ("an unknown operator: nothing", by_expressions(vec![requirement("team", "Matches", Some(&["x"]))]), vec![]),
        ("NotIn without values: nothing", by_expressions(vec![requirement("team", "NotIn", None)]), vec![]),
        ("In without values: nothing", by_expressions(vec![requirement("team", "In", None)]), vec![]),
    ];
    for (what, selector, expected) in cases {
        let og = group(OperatorGroupSpec { selector: Some(selector), ..Default::default() });
        assert_eq!(target_namespaces(&og, &ns), expected, "{what}");
    }
}

#[test]
fn status_annotations_provided_apis_and_namespace_labels() {
    let ns = namespaces();
    let og = group(OperatorGroupSpec { target_namespaces: Some(vec!["ops".into()]), ..Default::default() });
    let unchecked = etcd();
    let observed = Observed { group: &og, groups_in_namespace: 1, namespaces: &ns, csvs: vec![&unchecked], cluster_roles: vec![], taken_role_names: Default::default(), service_account_exists: None };
    assert!(
        !decide(&observed, now()).actions.iter().any(|a| matches!(a, OgAction::SetProvidedApis { .. })),
        "a CSV that has not passed the group checks provides nothing yet: no annotation is written"
    );
    let mut csv = etcd();
    csv.status = Some(ClusterServiceVersionStatus { phase: Some(CsvPhase::Pending), ..Default::default() });
    let observed = Observed { group: &og, groups_in_namespace: 1, namespaces: &ns, csvs: vec![&csv], cluster_roles: vec![], taken_role_names: Default::default(), service_account_exists: None };
    let decision = decide(&observed, now());
    let status = decision.status.clone().expect("status");
    assert_eq!(status.namespaces, Some(vec!["ops".to_owned()]));
    assert_eq!(status.last_updated, Some(Time(now())));
    assert_eq!(status.conditions, None);
    let annotate = decision.actions.iter().find_map(|a| match a {
        OgAction::AnnotateCsv { name, annotations } => Some((name.clone(), annotations.clone())),
        _ => None,
    });
    let (name, annotations) = annotate.expect("the CSV is annotated");
    assert_eq!(name, "etcdoperator.v0.9.4");
    assert_eq!(annotations.get(keys::TARGET_NAMESPACES_ANNOTATION), Some(&Some("ops".to_owned())));
    assert_eq!(annotations.get(keys::OPERATOR_GROUP_ANNOTATION), Some(&Some("og".to_owned())));
    assert_eq!(annotations.get(keys::OPERATOR_NAMESPACE_ANNOTATION), Some(&Some("ops".to_owned())));
    assert!(decision.actions.contains(&OgAction::SetProvidedApis {
        value: "EtcdBackup.v1beta2.etcd.database.coreos.com,EtcdCluster.v1beta2.etcd.database.coreos.com,EtcdRestore.v1beta2.etcd.database.coreos.com".into()
    }));
    assert!(decision.actions.contains(&OgAction::LabelNamespace { namespace: "ops".into(), key: "olm.operatorgroup.uid/1234".into() }));
}

#[test]
fn an_unchanged_group_keeps_its_last_updated_time() {
    let ns = namespaces();
    let mut og = group(OperatorGroupSpec::default());
    let earlier = Time(Timestamp::from_second(1_700_000_000).expect("valid timestamp"));
    og.status = Some(OperatorGroupStatus { namespaces: Some(vec![String::new()]), last_updated: Some(earlier.clone()), ..Default::default() });
    let observed = Observed { group: &og, groups_in_namespace: 1, namespaces: &ns, csvs: vec![], cluster_roles: vec![], taken_role_names: Default::default(), service_account_exists: None };
    let decision = decide(&observed, now());
    assert_eq!(decision.status.and_then(|s| s.last_updated), Some(earlier));
    assert!(
        !decision.actions.iter().any(|a| matches!(a, OgAction::LabelNamespace { .. })),
        "all-namespaces groups label no namespace: {:?}",
        decision.actions
    );
}

#[test]
fn a_second_group_sets_multiple_operator_group_and_stops_annotating() {
    let ns = namespaces();
    let og = group(OperatorGroupSpec::default());
    let csv = etcd();
    let observed = Observed { group: &og, groups_in_namespace: 2, namespaces: &ns, csvs: vec![&csv], cluster_roles: vec![], taken_role_names: Default::default(), service_account_exists: None };
    let decision = decide(&observed, now());
    let conditions = decision.status.clone().and_then(|s| s.conditions).unwrap_or_default();
    assert_eq!(conditions.len(), 1);
    assert_eq!(conditions[0].type_, "MultipleOperatorGroup");
    assert_eq!(conditions[0].reason, "MultipleOperatorGroupsFound");
    assert!(!decision.actions.iter().any(|a| matches!(a, OgAction::AnnotateCsv { .. })));
}

#[test]
fn aggregated_roles_are_created_once_and_follow_the_provided_apis() {
    let ns = namespaces();
    // Static provided APIs: the annotation is taken as is.
    let mut og = group(OperatorGroupSpec { static_provided_apis: Some(true), ..Default::default() });
    og.metadata.annotations = Some(BTreeMap::from([(
        keys::PROVIDED_APIS_ANNOTATION.to_owned(),
        "EtcdCluster.v1beta2.etcd.database.coreos.com".to_owned(),
    )]));
    let observed = Observed { group: &og, groups_in_namespace: 1, namespaces: &ns, csvs: vec![], cluster_roles: vec![], taken_role_names: Default::default(), service_account_exists: None };
    let decision = decide(&observed, now());
    let roles: Vec<k8s_openapi::api::rbac::v1::ClusterRole> = decision
        .actions
        .iter()
        .filter_map(|a| match a {
            OgAction::ApplyClusterRole(role) => Some((**role).clone()),
            _ => None,
        })
        .collect();
    let names: Vec<String> = roles.iter().map(|r| r.metadata.name.clone().unwrap_or_default()).collect();
    assert_eq!(names.len(), 3);
    assert!(names[0].starts_with("olm.og.og.admin-") && names[0].len() == "olm.og.og.admin-".len() + 5, "{names:?}");
    let selectors = roles[2].aggregation_rule.clone().and_then(|r| r.cluster_role_selectors).unwrap_or_default();
    let label = crate::rbac::aggregation_label("EtcdCluster.v1beta2.etcd.database.coreos.com", "view");
    assert_eq!(selectors[0].match_labels.clone().unwrap_or_default().get(&label).map(String::as_str), Some("true"));
    // Once they exist unchanged, nothing more is applied.
    let observed = Observed { group: &og, groups_in_namespace: 1, namespaces: &ns, csvs: vec![], cluster_roles: roles.iter().collect(), taken_role_names: Default::default(), service_account_exists: None };
    assert!(!decide(&observed, now()).actions.iter().any(|a| matches!(a, OgAction::ApplyClusterRole(_))));
}

fn applied_roles(observed: &Observed<'_>) -> Vec<k8s_openapi::api::rbac::v1::ClusterRole> {
    decide(observed, now())
        .actions
        .into_iter()
        .filter_map(|a| match a {
            OgAction::ApplyClusterRole(role) => Some(*role),
            _ => None,
        })
        .collect()
}

#[test]
fn a_role_name_another_group_holds_is_passed_over_for_the_next() {
    let ns = namespaces();
    let og = group(OperatorGroupSpec::default());
    let first: Vec<String> = ["admin", "edit", "view"]
        .iter()
        .map(|suffix| super::decide::operator_group_role_names(&og, suffix).next().expect("a first name"))
        .collect();
    let free = Observed { group: &og, groups_in_namespace: 1, namespaces: &ns, csvs: vec![], cluster_roles: vec![], taken_role_names: Default::default(), service_account_exists: None };
    let names = |roles: &[k8s_openapi::api::rbac::v1::ClusterRole]| roles.iter().map(|r| r.metadata.name.clone().unwrap_or_default()).collect::<Vec<_>>();
    assert_eq!(names(&applied_roles(&free)), first);

    // A group of the same name elsewhere holds the first name of the view role.
    let taken = Observed { taken_role_names: [first[2].clone()].into(), ..free };
    let roles = applied_roles(&taken);
    let chosen = names(&roles);
    assert_eq!(chosen[..2], first[..2]);
    assert!(chosen[2].starts_with("olm.og.og.view-") && chosen[2].len() == first[2].len() && chosen[2] != first[2], "{chosen:?}");

    // Once the group's own role exists under that name, it is left alone.
    let mine = Observed { cluster_roles: roles.iter().collect(), ..taken };
    assert!(applied_roles(&mine).is_empty());
}

#[test]
fn the_service_account_of_a_scoped_group_is_referenced_or_reported_missing() {
    let ns = namespaces();
    let og = group(OperatorGroupSpec { service_account_name: Some("scoped".into()), ..Default::default() });
    let missing = Observed { group: &og, groups_in_namespace: 1, namespaces: &ns, csvs: vec![], cluster_roles: vec![], taken_role_names: Default::default(), service_account_exists: Some(false) };
    let status = decide(&missing, now()).status.expect("status");
    let condition = status.conditions.unwrap_or_default().into_iter().find(|c| c.type_ == "OperatorGroupServiceAccount").expect("condition");
    assert_eq!((condition.status.as_str(), condition.reason.as_str()), ("True", "ServiceAccountNotFound"));
    assert!(condition.message.contains("scoped"));
    let found = Observed { group: &og, groups_in_namespace: 1, namespaces: &ns, csvs: vec![], cluster_roles: vec![], taken_role_names: Default::default(), service_account_exists: Some(true) };
    let status = decide(&found, now()).status.expect("status");
    assert_eq!(status.service_account_ref.and_then(|r| r.name).as_deref(), Some("scoped"));
    assert_eq!(status.conditions, None);
}

#[test]
fn only_groups_whose_targets_a_namespace_can_change_are_concerned_by_it() {
    use super::reconcile::namespace_may_concern;
    use olm_api::v1::operator_group::{OperatorGroup, OperatorGroupSpec};
    let group = |ns: &str, spec: OperatorGroupSpec| {
        let mut g = OperatorGroup::new("og", spec);
        g.metadata.namespace = Some(ns.into());
        g
    };
    let all = group("operators", OperatorGroupSpec::default());
    let explicit = group("team", OperatorGroupSpec { target_namespaces: Some(vec!["team".into(), "app".into()]), ..Default::default() });
    let selector = group("sel", OperatorGroupSpec { selector: Some(Default::default()), ..Default::default() });
    assert!(!namespace_may_concern(&all, "new-namespace"), "all-namespaces targets do not depend on namespaces");
    assert!(namespace_may_concern(&all, "operators"), "its own namespace");
    assert!(namespace_may_concern(&explicit, "app"));
    assert!(!namespace_may_concern(&explicit, "other"));
    assert!(namespace_may_concern(&selector, "anything"), "a selector may match any namespace");
}

#[test]
fn a_namespace_no_longer_targeted_loses_the_group_label_and_deleted_groups_labels_go() {
    let key = "olm.operatorgroup.uid/1234".to_owned();
    let mut labels: Vec<BTreeMap<String, String>> = namespaces().iter().map(|view| view.labels.clone()).collect();
    for l in &mut labels {
        l.insert(key.clone(), String::new());
    }
    labels[1].insert("olm.operatorgroup.uid/gone".into(), String::new());
    let ns: Vec<NamespaceView<'_>> = namespaces().iter().zip(&labels).map(|(view, labels)| NamespaceView { name: view.name, labels }).collect();
    // Targets only "a": "b" and "ops" lose the label.
    let og = group(OperatorGroupSpec { target_namespaces: Some(vec!["a".into()]), ..Default::default() });
    let observed = Observed { group: &og, groups_in_namespace: 1, namespaces: &ns, csvs: vec![], cluster_roles: vec![], taken_role_names: Default::default(), service_account_exists: None };
    let unlabelled: Vec<String> = decide(&observed, now())
        .actions
        .iter()
        .filter_map(|a| match a {
            OgAction::UnlabelNamespace { namespace, key: k } if *k == key => Some(namespace.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(unlabelled, ["b", "ops"]);
    // Become all-namespaces: every namespace loses it.
    let all = group(OperatorGroupSpec::default());
    let observed = Observed { group: &all, groups_in_namespace: 1, namespaces: &ns, csvs: vec![], cluster_roles: vec![], taken_role_names: Default::default(), service_account_exists: None };
    let count = decide(&observed, now()).actions.iter().filter(|a| matches!(a, OgAction::UnlabelNamespace { .. })).count();
    assert_eq!(count, 3);
    // Labels of groups that no longer exist.
    let uids = std::collections::BTreeSet::from(["1234".to_owned()]);
    assert_eq!(stale_group_labels(&ns, &uids), [("b".to_owned(), "olm.operatorgroup.uid/gone".to_owned())]);
}
