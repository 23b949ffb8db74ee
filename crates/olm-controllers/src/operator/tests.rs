use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use olm_api::common::ConditionStatus;
use olm_api::v1::operator::RichReference;
use olm_api::v1alpha1::cluster_service_version::{ClusterServiceVersion, ClusterServiceVersionStatus, CsvPhase, CsvReason};
use serde_json::json;

use super::components::{Seen, conditions_from, csv_conditions, desired_status};

fn reference(kind: &str, api_version: &str, namespace: Option<&str>, name: &str) -> RichReference {
    RichReference {
        object: ObjectReference {
            kind: Some(kind.into()),
            api_version: Some(api_version.into()),
            namespace: namespace.map(Into::into),
            name: Some(name.into()),
            ..Default::default()
        },
        conditions: None,
    }
}

#[test]
fn the_status_selects_by_label_and_sorts_references_as_upstream() {
    let status = desired_status(
        "operators.coreos.com/etcd.team-a",
        vec![
            reference("ServiceAccount", "v1", Some("team-a"), "etcd-operator"),
            reference("ClusterServiceVersion", "operators.coreos.com/v1alpha1", Some("team-a"), "etcdoperator.v0.9.4"),
            reference("CustomResourceDefinition", "apiextensions.k8s.io/v1", None, "etcdclusters.etcd.database.coreos.com"),
            reference("CustomResourceDefinition", "apiextensions.k8s.io/v1", None, "etcdbackups.etcd.database.coreos.com"),
        ],
    );
    let value = serde_json::to_value(&status).expect("json");
    assert_eq!(
        value.pointer("/components/labelSelector"),
        Some(&json!({"matchExpressions": [{"key": "operators.coreos.com/etcd.team-a", "operator": "Exists"}]}))
    );
    let names: Vec<&str> = value
        .pointer("/components/refs")
        .and_then(|r| r.as_array())
        .into_iter()
        .flatten()
        .filter_map(|r| r.get("name").and_then(|n| n.as_str()))
        .collect();
    assert_eq!(
        names,
        ["etcdoperator.v0.9.4", "etcdbackups.etcd.database.coreos.com", "etcdclusters.etcd.database.coreos.com", "etcd-operator"]
    );
    let empty = serde_json::to_value(desired_status("operators.coreos.com/x.y", vec![])).expect("json");
    assert_eq!(empty.pointer("/components/refs"), None, "no components: no refs, the selector stays");
}

#[test]
fn a_csv_shows_its_phase_as_its_condition() {
    let at = Time(Timestamp::from_second(1_800_000_000).unwrap_or(Timestamp::UNIX_EPOCH));
    let mut csv = ClusterServiceVersion::new("etcdoperator.v0.9.4", Default::default());
    assert_eq!(csv_conditions(&csv), None, "no status yet");
    csv.status = Some(ClusterServiceVersionStatus {
        phase: Some(CsvPhase::Succeeded),
        reason: Some(CsvReason::InstallSucceeded),
        message: Some("install strategy completed with no errors".into()),
        last_transition_time: Some(at.clone()),
        ..Default::default()
    });
    let conditions = csv_conditions(&csv).expect("a condition");
    assert_eq!(conditions.len(), 1);
    assert_eq!(conditions[0].type_, "Succeeded");
    assert_eq!(conditions[0].status, ConditionStatus::True);
    assert_eq!(conditions[0].reason.as_deref(), Some("InstallSucceeded"));
    assert_eq!(conditions[0].message.as_deref(), Some("install strategy completed with no errors"));
    assert_eq!(conditions[0].last_transition_time, Some(at));
}

#[test]
fn conditions_of_any_kind_are_read_by_name() {
    let deployment_conditions = json!([
        {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable", "message": "ok",
         "lastUpdateTime": "2026-11-27T10:00:00Z", "lastTransitionTime": "2026-11-27T10:00:00Z"},
        {"type": "Progressing", "status": "maybe"},
        {"status": "True"}
    ]);
    let conditions = conditions_from(Some(&deployment_conditions)).expect("conditions");
    assert_eq!(conditions.len(), 2, "a condition without a type is left out: {conditions:?}");
    assert_eq!(conditions[0].type_, "Available");
    assert_eq!(conditions[1].status, ConditionStatus::Other("maybe".into()), "an odd status is shown as it is");
    assert_eq!(conditions[0].reason.as_deref(), Some("MinimumReplicasAvailable"));
    assert!(conditions[0].last_update_time.is_some());
    assert_eq!(conditions_from::<serde_json::Value>(None), None);
    assert_eq!(conditions_from(Some(&json!([]))), None);
}

#[test]
fn only_a_change_of_membership_or_conditions_concerns_operators() {
    let key = || (Some("team-a".to_owned()), "etcd-operator".to_owned());
    let names = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<std::collections::BTreeSet<String>>();
    let mut seen = Seen::default();
    assert_eq!(seen.changed(key(), vec!["etcd.team-a".into()], 1), names(&["etcd.team-a"]), "a new component");
    assert_eq!(seen.changed(key(), vec!["etcd.team-a".into()], 1), names(&[]), "annotations or replicas changed");
    assert_eq!(seen.changed(key(), vec!["etcd.team-a".into()], 2), names(&["etcd.team-a"]), "its conditions changed");
    assert_eq!(
        seen.changed(key(), vec!["etcd.team-a".into(), "etcd.team-b".into()], 2),
        names(&["etcd.team-b"]),
        "labelled for one more Operator (a shared CRD): that one only"
    );
    assert_eq!(
        seen.changed(key(), vec!["etcd.team-b".into()], 3),
        names(&["etcd.team-a", "etcd.team-b"]),
        "left one while its conditions changed: both"
    );
    assert_eq!(seen.changed(key(), vec![], 0), names(&["etcd.team-b"]), "unlabelled or deleted");
    assert_eq!(seen.changed(key(), vec![], 0), names(&[]), "an object never labelled");
}

#[test]
fn a_label_added_lately_is_not_added_again_until_it_had_time_to_show() {
    let labelled = super::Labelled::default();
    let start = std::time::Instant::now();
    let sub = "Subscription team-a/etcd";
    assert!(!labelled.lately_or_now(sub, "operators.coreos.com/etcd.team-a", start), "first time: add it");
    assert!(labelled.lately_or_now(sub, "operators.coreos.com/etcd.team-a", start + std::time::Duration::from_secs(1)), "the cache lags");
    assert!(!labelled.lately_or_now("Subscription team-b/etcd", "operators.coreos.com/etcd.team-b", start), "another object");
    assert!(
        !labelled.lately_or_now(sub, "operators.coreos.com/etcd.team-a", start + super::LABEL_SETTLES),
        "still missing once it had time to show: removed since, add it again"
    );
    labelled.failed(sub, "operators.coreos.com/etcd.team-a");
    assert!(!labelled.lately_or_now(sub, "operators.coreos.com/etcd.team-a", start + super::LABEL_SETTLES), "a failed patch is retried");
}

#[test]
fn the_cache_keeps_a_digest_of_the_status_that_tells_a_change_but_not_a_new_timestamp() {
    use olm_api::v1::operator::{Operator, OperatorComponentCondition, OperatorSpec};
    let condition = |message: &str, at: &str| OperatorComponentCondition {
        type_: "Succeeded".into(),
        status: ConditionStatus::True,
        reason: Some("InstallSucceeded".into()),
        message: Some(message.into()),
        last_update_time: Some(Time(at.parse::<Timestamp>().expect("time"))),
        last_transition_time: None,
    };
    let status = |message: &str, at: &str| {
        let mut csv = reference("ClusterServiceVersion", "operators.coreos.com/v1alpha1", Some("team-a"), "etcdoperator.v0.9.4");
        csv.conditions = Some(vec![condition(message, at)]);
        desired_status("operators.coreos.com/etcd.team-a", vec![csv])
    };
    let mut operator = Operator::new("etcd.team-a", OperatorSpec::default());
    operator.status = Some(status("install strategy completed", "2026-11-28T08:00:00Z"));
    let untrimmed = operator.clone();
    super::trim_cached_operator(&mut operator);
    assert!(operator.status.is_none(), "the cache keeps no components");
    assert_eq!(super::observed_status_digest(&operator), super::observed_status_digest(&untrimmed), "trimmed or not, the same digest");
    let observed = super::observed_status_digest(&operator);
    assert_eq!(observed, super::status_digest(Some(&status("install strategy completed", "2026-11-28T09:30:00Z"))), "a new timestamp is no change");
    assert_ne!(observed, super::status_digest(Some(&status("install strategy completed again", "2026-11-28T08:00:00Z"))), "a new message is");
    assert_ne!(observed, super::status_digest(None), "no status at all is");

    let mut empty = Operator::new("etcd.team-b", OperatorSpec::default());
    super::trim_cached_operator(&mut empty);
    assert_eq!(super::observed_status_digest(&empty), super::status_digest(Some(&olm_api::v1::operator::OperatorStatus::default())), "no status is an empty one");
}
