//! The rounds of a pass, table by table: what the end-to-end suites see as the order of
//! writes (CRDs and the CSV first, RBAC, then the rest), what a CRD not yet Established holds
//! back, and what a round's results do to the steps.

use olm_api::v1alpha1::install_plan::{Step, StepResource, StepStatus};
use serde_json::json;

use super::*;

/// A step of `etcd.v1` for `kind` `name`, in `status`; a CRD's manifest defines `Kind` `name`.
fn step(kind: &str, name: &str, status: StepStatus) -> Step {
    let group = match kind {
        "CustomResourceDefinition" => "apiextensions.k8s.io",
        "ClusterServiceVersion" => "operators.coreos.com",
        "Role" | "RoleBinding" | "ClusterRole" | "ClusterRoleBinding" => "rbac.authorization.k8s.io",
        "Widget" => "example.com",
        _ => "",
    };
    let manifest = (kind == "CustomResourceDefinition")
        .then(|| json!({"spec": {"group": "example.com", "names": {"kind": name}}}).to_string());
    Step {
        resolving: "etcd.v1".into(),
        resource: StepResource { group: group.into(), kind: kind.into(), name: name.into(), manifest, ..Default::default() },
        optional: None,
        status,
    }
}

fn unknown(kind: &str, name: &str) -> Step {
    step(kind, name, StepStatus::Unknown)
}

/// A fresh etcd plan: the CSV, two CRDs, its RBAC, a Service and a Widget of its own API.
fn etcd() -> Vec<Step> {
    vec![
        unknown("CustomResourceDefinition", "Widget"),
        unknown("ClusterServiceVersion", "etcd.v1"),
        unknown("CustomResourceDefinition", "Gadget"),
        unknown("ServiceAccount", "etcd-operator"),
        unknown("Role", "etcd.v1-abc"),
        unknown("RoleBinding", "etcd.v1-abc"),
        unknown("ClusterRole", "etcd.v1-def"),
        unknown("ClusterRoleBinding", "etcd.v1-def"),
        unknown("Service", "etcd-metrics"),
        unknown("Widget", "default-widget"),
    ]
}

#[test]
fn a_pass_applies_what_is_left_in_rounds() {
    let mut csv_done_rbac_left = etcd();
    for i in [0, 1, 2, 3] {
        csv_done_rbac_left[i].status = StepStatus::Created;
    }
    let mut all_done = etcd();
    for s in &mut all_done {
        s.status = StepStatus::Present;
    }
    let mut crd_waiting = all_done.clone();
    crd_waiting[0].status = StepStatus::WaitingForApi;
    let mut csv_done_only_crd_left = crd_waiting.clone();
    csv_done_only_crd_left[2].status = StepStatus::Unknown;

    let cases: Vec<(&str, Vec<Step>, bool, Vec<usize>, Vec<Vec<usize>>)> = vec![
        (
            "fresh, as OLM: CRDs and the CSV together, then RBAC with its bindings, then the rest",
            etcd(),
            false,
            vec![0, 2],
            vec![vec![0, 1, 2], vec![3, 4, 5, 6, 7], vec![8, 9]],
        ),
        (
            "fresh, as a group's ServiceAccount: the CSV before the CRDs, bindings a round after their roles",
            etcd(),
            true,
            vec![0, 2],
            vec![vec![1], vec![0, 2], vec![3, 4, 6], vec![5, 7], vec![8, 9]],
        ),
        ("the CSV done and RBAC left: the CSV again, for its uid", csv_done_rbac_left, false, vec![], vec![vec![1], vec![4, 5, 6, 7], vec![8, 9]]),
        ("all done: nothing", all_done, false, vec![], vec![]),
        ("a CRD waiting to be Established: looked at again, not re-checked", crd_waiting, false, vec![], vec![vec![0]]),
        (
            "a CRD waiting and another to write; the CSV owns nothing left, so it is not applied again",
            csv_done_only_crd_left,
            false,
            vec![2],
            vec![vec![0, 2]],
        ),
    ];
    for (what, steps, scoped, checks, rounds) in cases {
        let plan = plan_pass(&steps, scoped);
        assert_eq!(plan, PassPlan { crd_checks: checks, rounds }, "{what}");
    }
}

fn ok(status: StepStatus) -> Result<Applied, StepError> {
    Ok(Applied { status, csv_uid: None, parked: false })
}

#[test]
fn a_crd_not_yet_established_holds_back_objects_of_its_kind_only() {
    let mut progress = Progress::new(etcd());
    let plan = plan_pass(&progress.steps, false);
    let first = progress.runnable(&plan.rounds[0]);
    assert_eq!(first, [0, 1, 2]);
    let csv = Ok(Applied { status: StepStatus::Created, csv_uid: Some("uid-1".into()), parked: false });
    // Widget's CRD is written but not Established; Gadget's share is parked (its CRD serves it).
    let parked = Ok(Applied { status: StepStatus::WaitingForApi, csv_uid: None, parked: true });
    assert!(progress.record(&first, vec![ok(StepStatus::WaitingForApi), csv, parked]).is_none());
    assert_eq!(progress.csv_uids.get("etcd.v1").map(String::as_str), Some("uid-1"));
    assert_eq!(progress.runnable(&plan.rounds[1]), [3, 4, 5, 6, 7]);
    // The Widget waits; the Service goes.
    assert_eq!(progress.runnable(&plan.rounds[2]), [8]);
    let pass = progress.finish(None);
    assert!(pass.waiting_for_api && pass.parked);
    let statuses: Vec<&StepStatus> = pass.steps.iter().take(3).map(|s| &s.status).collect();
    assert_eq!(statuses, [&StepStatus::WaitingForApi, &StepStatus::Created, &StepStatus::WaitingForApi]);
}

#[test]
fn the_first_error_ends_the_pass_and_an_unsupported_kind_is_marked() {
    let mut steps = etcd();
    steps.push(unknown("PodSecurityPolicy", "old"));
    let mut progress = Progress::new(steps);
    let applied = [3, 8, 10];
    let results = vec![
        Err(StepError::new("ServiceAccount etcd-operator: refused", true)),
        ok(StepStatus::Created),
        Err(StepError::new("PodSecurityPolicy is not a kind OLM applies", false)),
    ];
    let error = progress.record(&applied, results).expect("an error");
    assert_eq!(error.message, "ServiceAccount etcd-operator: refused");
    let pass = progress.finish(Some(error));
    assert_eq!(pass.steps[3].status, StepStatus::Unknown, "a kind OLM applies keeps its status, to be retried");
    assert_eq!(pass.steps[8].status, StepStatus::Created);
    assert_eq!(pass.steps[10].status, StepStatus::UnsupportedResource);
    assert!(!pass.waiting_for_api && !pass.parked);
}

#[test]
fn a_crd_manifest_names_the_kind_it_defines() {
    let crd = json!({"spec": {"group": "etcd.database.coreos.com", "names": {"kind": "EtcdCluster"}}}).to_string();
    assert_eq!(defined_kind(Some(&crd)), Some(("etcd.database.coreos.com".into(), "EtcdCluster".into())));
    assert_eq!(defined_kind(Some("{}")), None);
    assert_eq!(defined_kind(Some("not json")), None);
    assert_eq!(defined_kind(None), None);
}
