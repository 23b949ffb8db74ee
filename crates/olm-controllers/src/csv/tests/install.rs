//! Installing: the phases from None to Succeeded, the Deployments the strategy asks for (shaped by
//! the Subscription's config), their health, the status history, and the CSV's own metadata.

use super::*;

/// With every requirement met, a new CSV goes None → Pending → InstallReady → Installing in one
/// pass (one status write): each step is in the history and has its Event.
#[test]
fn none_goes_through_pending_and_install_ready_to_installing_in_one_pass() {
    let decision = World::etcd_ready(None).decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Installing, CsvReason::InstallSucceeded));
    let reasons: Vec<&str> = decision.events.iter().map(|e| e.reason.as_str()).collect();
    assert_eq!(reasons, ["RequirementsUnknown", "AllRequirementsMet", "InstallSucceeded"]);
    let status = decision.status.as_ref().expect("status");
    assert_eq!(status.last_transition_time, Some(Time(now())));
    let history: Vec<(Option<CsvPhase>, Option<CsvReason>)> =
        status.conditions.iter().flatten().map(|c| (c.phase.clone(), c.reason.clone())).collect();
    assert_eq!(
        history,
        [
            (Some(CsvPhase::Pending), Some(CsvReason::RequirementsUnknown)),
            (Some(CsvPhase::InstallReady), Some(CsvReason::AllRequirementsMet)),
            (Some(CsvPhase::Installing), Some(CsvReason::InstallSucceeded)),
        ]
    );
    assert!(status.requirement_status.is_some(), "the requirement check is recorded");
    assert!(decision.actions.iter().any(|a| matches!(a, CsvAction::ApplyDeployment(_))), "{:?}", decision.actions);
}

#[test]
fn unknown_strategy_is_invalid() {
    let mut world = World::etcd_ready(Some((CsvPhase::Pending, CsvReason::RequirementsUnknown)));
    std::sync::Arc::make_mut(&mut world.csv.spec.install).strategy = "helm".into();
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Failed, CsvReason::InvalidInstallStrategy));
    assert!(decision.status.and_then(|s| s.message).unwrap_or_default().contains("spec.install.strategy"));
}

#[test]
fn install_ready_applies_deployments_with_olm_metadata() {
    let world = World::etcd_ready(Some((CsvPhase::InstallReady, CsvReason::AllRequirementsMet)));
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Installing, CsvReason::InstallSucceeded));
    let [CsvAction::ApplyDeployment(deployment)] = decision.actions.as_slice() else {
        panic!("expected one ApplyDeployment, got {:?}", decision.actions);
    };
    assert_eq!(deployment.name_any(), "etcd-operator");
    let labels = deployment.labels();
    assert_eq!(labels.get(keys::OWNER_LABEL).map(String::as_str), Some("etcdoperator.v0.9.4"));
    assert_eq!(labels.get(keys::OWNER_NAMESPACE_LABEL).map(String::as_str), Some(NS));
    assert_eq!(labels.get(keys::OWNER_KIND_LABEL).map(String::as_str), Some("ClusterServiceVersion"));
    assert!(labels.contains_key(keys::DEPLOYMENT_SPEC_HASH_LABEL));
    let owner = &deployment.metadata.owner_references.as_ref().expect("owner refs")[0];
    assert_eq!((owner.kind.as_str(), owner.uid.as_str()), ("ClusterServiceVersion", "uid-1"));
    let spec = deployment.spec.as_ref().expect("spec");
    let pod_annotations = spec.template.metadata.as_ref().and_then(|m| m.annotations.clone()).unwrap_or_default();
    assert_eq!(pod_annotations.get(keys::TARGET_NAMESPACES_ANNOTATION).map(String::as_str), Some(NS));
    assert_eq!(pod_annotations.get(keys::OPERATOR_GROUP_ANNOTATION).map(String::as_str), Some("og"));
    assert!(pod_annotations.contains_key("alm-examples"), "every CSV annotation reaches the pod template");
    let containers = &spec.template.spec.as_ref().expect("pod spec").containers;
    assert_eq!(containers.len(), 3);
    for container in containers {
        let env = container.env.clone().unwrap_or_default();
        assert!(env.iter().any(|e| e.name == "OPERATOR_CONDITION_NAME" && e.value.as_deref() == Some("etcdoperator.v0.9.4")));
    }
    assert_eq!(spec.revision_history_limit, Some(1));
}

#[test]
fn install_ready_deletes_owned_deployments_no_longer_in_the_strategy() {
    let mut world = World::etcd_ready(Some((CsvPhase::InstallReady, CsvReason::AllRequirementsMet))).with_installed_deployments();
    let mut stale = world.deployments["etcd-operator"].clone();
    stale.metadata.name = Some("old-helper".into());
    world.deployments.insert("old-helper".into(), stale);
    let decision = world.decide();
    assert!(decision.actions.contains(&CsvAction::DeleteDeployment("old-helper".into())));
}

#[test]
fn installing_succeeds_when_deployments_are_available() {
    let world = World::etcd_ready(Some((CsvPhase::Installing, CsvReason::InstallSucceeded))).with_installed_deployments();
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Succeeded, CsvReason::InstallSucceeded));
    assert_eq!(
        decision.status.and_then(|s| s.message).as_deref(),
        Some("install strategy completed with no errors")
    );
}

/// A restarted OLM compares the Deployment as the API server stored it: an empty value in the
/// CSV (aws-efs-operator 0.0.8's `{name: WATCH_NAMESPACE, value: ""}`) is stored without it,
/// which is no drift: the CSV stays Succeeded and nothing is applied.
#[test]
fn a_succeeded_csv_whose_deployment_was_stored_without_its_empty_values_stays_succeeded() {
    let mut world = World::etcd_ready(Some((CsvPhase::Succeeded, CsvReason::InstallSucceeded)));
    let mut csv = serde_json::to_value(&world.csv).expect("a CSV as JSON");
    let container = csv.pointer_mut("/spec/install/spec/deployments/0/spec/template/spec/containers/0").expect("a container");
    let env = container.as_object_mut().expect("an object").entry("env").or_insert_with(|| serde_json::json!([]));
    env.as_array_mut().expect("a list").push(serde_json::json!({"name": "WATCH_NAMESPACE", "value": ""}));
    world.csv = serde_json::from_value(csv).expect("a CSV");
    let mut world = world.with_installed_deployments();
    let mut stripped = 0;
    for deployment in world.deployments.values_mut() {
        let pod = deployment.spec.as_mut().and_then(|s| s.template.spec.as_mut()).expect("a pod spec");
        for var in pod.containers.iter_mut().flat_map(|c| c.env.iter_mut().flatten()) {
            if var.value.as_deref() == Some("") {
                var.value = None;
                stripped += 1;
            }
        }
    }
    assert_eq!(stripped, 1, "the installed Deployment is stored without the empty value");
    let decision = world.decide();
    assert!(!decision.actions.iter().any(|a| matches!(a, CsvAction::ApplyDeployment(_))), "{:?}", decision.actions);
    assert_eq!(phase_reason(&decision), (CsvPhase::Succeeded, CsvReason::InstallSucceeded));
}

#[test]
fn installing_waits_for_an_unavailable_deployment_then_times_out() {
    let mut world = World::etcd_ready(Some((CsvPhase::Installing, CsvReason::InstallSucceeded))).with_installed_deployments();
    if let Some(d) = world.deployments.get_mut("etcd-operator") {
        d.status = Some(DeploymentStatus::default());
    }
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Installing, CsvReason::InstallWaiting));
    assert!(decision.status.as_ref().and_then(|s| s.message.clone()).unwrap_or_default().starts_with("installing: "));

    let long_ago = now() - SignedDuration::from_secs(600);
    if let Some(status) = world.csv.status.as_mut() {
        status.last_transition_time = Some(Time(long_ago));
    }
    let failed = world.decide();
    assert_eq!(phase_reason(&failed), (CsvPhase::Failed, CsvReason::InstallCheckFailed));
    // The timeout says what was still missing and where to look.
    let message = failed.status.and_then(|s| s.message).unwrap_or_default();
    assert!(message.starts_with("install timeout: after 300s still waiting for deployment etcd-operator"), "{message}");
    assert!(message.contains("kubectl describe pods -n "), "{message}");
}

/// A rollout's progress messages are written at most every PROGRESS_REFRESH: a status written
/// moments ago stays as it is (no write, no Event) until the refresh is due, while the move to
/// Succeeded goes at once.
#[test]
fn installing_progress_messages_are_paced_but_success_is_not() {
    let mut world = World::etcd_ready(Some((CsvPhase::Installing, CsvReason::InstallSucceeded))).with_installed_deployments();
    if let Some(d) = world.deployments.get_mut("etcd-operator") {
        d.status = Some(DeploymentStatus::default());
    }
    let written_at = |world: &mut World, ago: i64| {
        if let Some(status) = world.csv.status.as_mut() {
            status.last_update_time = Some(Time(now() - SignedDuration::from_secs(ago)));
        }
    };
    written_at(&mut world, 5);
    let held = world.decide();
    assert_eq!(held.status, world.csv.status, "nothing new is written 5 s after the last write");
    assert!(held.events.is_empty());
    assert_eq!(held.requeue_after, Some(std::time::Duration::from_secs(10)), "looked at again when the refresh is due");

    written_at(&mut world, 20);
    let refreshed = world.decide();
    assert_eq!(phase_reason(&refreshed), (CsvPhase::Installing, CsvReason::InstallWaiting));
    let message = refreshed.status.as_ref().and_then(|s| s.message.clone()).unwrap_or_default();
    assert!(message.starts_with("installing: waiting for deployment etcd-operator"), "{message}");

    let mut available = World::etcd_ready(Some((CsvPhase::Installing, CsvReason::InstallWaiting))).with_installed_deployments();
    written_at(&mut available, 1);
    assert_eq!(phase_reason(&available.decide()), (CsvPhase::Succeeded, CsvReason::InstallSucceeded));
}

#[test]
fn installing_with_a_changed_deployment_goes_back_to_install_ready() {
    let mut world = World::etcd_ready(Some((CsvPhase::Installing, CsvReason::InstallSucceeded))).with_installed_deployments();
    if let Some(d) = world.deployments.get_mut("etcd-operator") {
        d.metadata.labels.get_or_insert_with(BTreeMap::new).insert(keys::DEPLOYMENT_SPEC_HASH_LABEL.into(), "old".into());
    }
    assert_eq!(phase_reason(&world.decide()), (CsvPhase::InstallReady, CsvReason::InstallWaiting));
}

#[test]
fn a_hand_edited_deployment_is_noticed_in_succeeded() {
    let mut world = World::etcd_ready(Some((CsvPhase::Succeeded, CsvReason::InstallSucceeded))).with_installed_deployments();
    assert_eq!(world.decide().status, world.csv.status, "steady state writes nothing new");
    if let Some(pod) = world
        .deployments
        .get_mut("etcd-operator")
        .and_then(|d| d.spec.as_mut())
        .and_then(|s| s.template.spec.as_mut())
    {
        pod.containers[0].image = Some("example.com/hacked:latest".into());
    }
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::InstallReady, CsvReason::ComponentUnhealthy));
}

#[test]
fn a_deleted_deployment_fails_then_reinstalls() {
    let world = World::etcd_ready(Some((CsvPhase::Succeeded, CsvReason::InstallSucceeded)));
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Failed, CsvReason::ComponentUnhealthy));

    let failed = World::etcd_ready(Some((CsvPhase::Failed, CsvReason::ComponentUnhealthy)));
    assert_eq!(phase_reason(&failed.decide()), (CsvPhase::Pending, CsvReason::NeedsReinstall));
}

#[test]
fn a_deployment_past_its_progress_deadline_keeps_the_csv_failed() {
    let mut world = World::etcd_ready(Some((CsvPhase::Succeeded, CsvReason::InstallSucceeded))).with_installed_deployments();
    for deployment in world.deployments.values_mut() {
        let status = deployment.status.as_mut().expect("a status");
        status.conditions.get_or_insert_default().push(DeploymentCondition {
            type_: "Progressing".into(),
            status: "False".into(),
            reason: Some("ProgressDeadlineExceeded".into()),
            ..Default::default()
        });
    }
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Failed, CsvReason::InstallCheckFailed));
    let message = decision.status.as_ref().and_then(|s| s.message.clone()).unwrap_or_default();
    assert_eq!(message, "install failed: deployment etcd-operator exceeded its progress deadline");

    // As upstream: applying the same Deployment again cannot help, so the Failed CSV stays
    // Failed (no cycle through Pending and Installing, no new Event).
    world.csv.status = decision.status.clone();
    let again = world.decide();
    assert_eq!(phase_reason(&again), (CsvPhase::Failed, CsvReason::InstallCheckFailed));
    assert!(again.events.is_empty(), "{:?}", again.events);
    assert!(again.actions.is_empty(), "nothing applied: {:?}", again.actions);
}

#[test]
fn failed_with_healthy_components_recovers_to_succeeded() {
    let world = World::etcd_ready(Some((CsvPhase::Failed, CsvReason::ComponentUnhealthy))).with_installed_deployments();
    assert_eq!(phase_reason(&world.decide()), (CsvPhase::Succeeded, CsvReason::InstallSucceeded));
}

#[test]
fn history_keeps_twenty_entries_and_transition_time_moves_only_with_the_phase() {
    let mut status = ClusterServiceVersionStatus::default();
    for i in 0..25 {
        let reason = if i % 2 == 0 { CsvReason::InstallWaiting } else { CsvReason::InstallSucceeded };
        status = set_phase(&status, CsvPhase::Installing, reason, "m", now() + SignedDuration::from_secs(i));
    }
    assert_eq!(status.conditions.as_ref().map(Vec::len), Some(20));
    assert_eq!(status.last_transition_time, Some(Time(now())));
    let later = set_phase(&status, CsvPhase::Succeeded, CsvReason::InstallSucceeded, "done", now() + SignedDuration::from_secs(100));
    assert_eq!(later.last_transition_time, Some(Time(now() + SignedDuration::from_secs(100))));
}

#[test]
fn install_component_failed_no_retry_is_left_alone() {
    let world = World::etcd_ready(Some((CsvPhase::Failed, CsvReason::InstallComponentFailedNoRetry)));
    let decision = world.decide();
    assert_eq!(decision.status, world.csv.status);
    assert!(decision.actions.is_empty() && decision.events.is_empty());
}

#[test]
fn a_refused_install_is_retried_only_after_a_pause() {
    let mut world = World::etcd_ready(Some((CsvPhase::Failed, CsvReason::InstallComponentFailed)));
    if let Some(status) = world.csv.status.as_mut() {
        status.last_transition_time = Some(Time(now() - SignedDuration::from_secs(5)));
    }
    let decision = world.decide();
    assert_eq!(decision.status, world.csv.status);
    assert_eq!(decision.requeue_after, Some(std::time::Duration::from_secs(25)));
    if let Some(status) = world.csv.status.as_mut() {
        status.last_transition_time = Some(Time(now() - SignedDuration::from_secs(60)));
    }
    assert_eq!(phase_reason(&world.decide()), (CsvPhase::Pending, CsvReason::NeedsReinstall));
}

fn subscription_config(json: serde_json::Value) -> olm_api::v1alpha1::subscription::SubscriptionConfig {
    serde_json::from_value(json).expect("config parses")
}

#[test]
fn subscription_config_shapes_the_deployment_and_its_hash() {
    let mut world = World::etcd_ready(Some((CsvPhase::InstallReady, CsvReason::AllRequirementsMet)));
    let plain = desired_deployments(&world.csv, None, &BTreeMap::new());
    world.subscription_config = Some(subscription_config(serde_json::json!({
        "env": [{"name": "FOO", "value": "bar"}],
        "nodeSelector": {"disk": "ssd"},
        "annotations": {"team": "storage"},
    })));
    let decision = world.decide();
    let applied: Vec<&Deployment> = decision
        .actions
        .iter()
        .filter_map(|a| match a {
            CsvAction::ApplyDeployment(d) => Some(d.as_ref()),
            _ => None,
        })
        .collect();
    assert_eq!(applied.len(), 1);
    let template = pod_of(applied[0]);
    let env = &template["spec"]["containers"][0]["env"];
    assert!(
        env.as_array().is_some_and(|e| e.contains(&serde_json::json!({"name": "FOO", "value": "bar"}))),
        "{env}"
    );
    assert_eq!(template["spec"]["nodeSelector"], serde_json::json!({"disk": "ssd"}));
    assert_eq!(template["metadata"]["annotations"]["team"], serde_json::json!("storage"));
    // The OLM annotations are still there next to the config's.
    assert_eq!(template["metadata"]["annotations"][keys::TARGET_NAMESPACES_ANNOTATION], serde_json::json!(NS));
    assert_eq!(applied[0].annotations().get("team").map(String::as_str), Some("storage"));
    let hash = |d: &Deployment| d.labels().get(keys::DEPLOYMENT_SPEC_HASH_LABEL).cloned();
    assert_ne!(hash(applied[0]), hash(&plain[0]), "the config is part of the spec hash");
}

#[test]
fn a_subscription_config_change_rolls_a_succeeded_operator() {
    let mut world = World::etcd_ready(Some((CsvPhase::Succeeded, CsvReason::InstallSucceeded)));
    world.subscription_config = Some(subscription_config(serde_json::json!({"env": [{"name": "FOO", "value": "bar"}]})));
    let world = world.with_installed_deployments();
    assert_eq!(world.decide().actions, Vec::new(), "installed as configured: nothing to do");

    let mut changed = world;
    changed.subscription_config = Some(subscription_config(serde_json::json!({"env": [{"name": "FOO", "value": "baz"}]})));
    let decision = changed.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::InstallReady, CsvReason::ComponentUnhealthy));
    assert!(
        decision.status.as_ref().and_then(|s| s.message.as_deref()).unwrap_or_default().contains("outdated spec hash"),
        "{:?}",
        decision.status
    );
}

#[test]
fn the_config_comes_from_the_subscription_that_installed_the_csv() {
    use olm_api::v1alpha1::subscription::{Subscription, SubscriptionStatus};
    let csv = etcd();
    let subscription = |name: &str, ns: &str, installed: Option<&str>, current: Option<&str>| {
        let mut s: Subscription = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"name": "etcd", "source": "cat", "sourceNamespace": "olm"},
        }))
        .expect("subscription");
        s.status = Some(SubscriptionStatus {
            installed_csv: installed.map(str::to_owned),
            current_csv: current.map(str::to_owned),
            ..Default::default()
        });
        s
    };
    let elsewhere = subscription("elsewhere", "other", Some("etcdoperator.v0.9.4"), None);
    let upgrading = subscription("upgrading", NS, None, Some("etcdoperator.v0.9.4"));
    let installed = subscription("installed", NS, Some("etcdoperator.v0.9.4"), Some("etcdoperator.v0.9.5"));
    let unrelated = subscription("unrelated", NS, Some("other.v1"), None);
    let pick = |subs: &[&Subscription]| crate::csv::deployment::subscription_for(&csv, subs).map(|s| s.name_any());
    assert_eq!(pick(&[&elsewhere, &upgrading, &installed, &unrelated]).as_deref(), Some("installed"));
    assert_eq!(pick(&[&elsewhere, &upgrading, &unrelated]).as_deref(), Some("upgrading"));
    assert_eq!(pick(&[&elsewhere, &unrelated]), None);
}

#[test]
fn the_cleanup_finalizer_is_added_first_and_keeps_other_finalizers() {
    let mut world = World::etcd_ready(None);
    world.csv.metadata.finalizers = None;
    let decision = world.decide();
    assert_eq!(
        decision.actions.first(),
        Some(&CsvAction::AddFinalizer {
            current: None,
            resource_version: Some("1".into())
        })
    );
    assert_eq!(phase_reason(&decision), (CsvPhase::Installing, CsvReason::InstallSucceeded), "the pass goes on");

    world.csv.metadata.finalizers = Some(vec!["example.com/keep".into()]);
    assert_eq!(
        world.decide().actions.first(),
        Some(&CsvAction::AddFinalizer {
            current: Some(vec!["example.com/keep".into()]),
            resource_version: Some("1".into())
        })
    );
}

#[test]
fn csvs_are_labelled_by_the_apis_they_provide_and_require() {
    use crate::metadata::{api_label_changes, api_label_key};
    // Upstream's own test vectors (FNV-1a of Kind.version.group).
    assert_eq!(api_label_key("Ghost", "v1alpha1", "ghouls"), "olm.api.6435ab0d7c6bda64");
    assert_eq!(api_label_key("Goblin", "v1alpha1", "ghouls"), "olm.api.557c9f42470aa352");

    let mut world = World::etcd_ready(Some((CsvPhase::Succeeded, CsvReason::InstallSucceeded))).with_installed_deployments();
    let labels = world.csv.metadata.labels.get_or_insert_with(BTreeMap::new);
    let cluster = api_label_key("EtcdCluster", "v1beta2", "etcd.database.coreos.com");
    assert_eq!(labels.get(&cluster).map(String::as_str), Some("provided"));
    labels.remove(&cluster);
    labels.insert("olm.api.0000000000000000".into(), "provided".into());
    let decision = world.decide();
    assert_eq!(
        decision.actions.first(),
        Some(&CsvAction::Label(BTreeMap::from([
            ("olm.api.0000000000000000".to_owned(), None),
            (cluster, Some("provided".to_owned())),
        ])))
    );
    assert_eq!(api_label_changes(&etcd()), BTreeMap::new(), "the fixture is labelled as after a pass");
}

/// A CSV as its InstallPlan creates it (stamped with `creation_metadata`) needs no write of its
/// own metadata: the first pass goes straight to installing.
#[test]
fn a_csv_created_with_its_creation_metadata_installs_in_its_first_pass() {
    let mut world = World::etcd_ready(None);
    world.condition = None;
    world.condition_role = None;
    world.condition_binding = None;
    let mut bare: ClusterServiceVersion = olm_api::yaml::from_str(ETCD_CSV, "testdata").expect("fixture parses");
    bare.metadata.namespace = Some(NS.into());
    bare.metadata.uid = Some("uid-1".into());
    let og = world.groups[0].clone();
    let stamp = crate::metadata::creation_metadata(&bare, &[&og]);
    bare.metadata.finalizers = Some(stamp.finalizers);
    bare.metadata.labels.get_or_insert_with(BTreeMap::new).extend(stamp.labels);
    bare.metadata.annotations.get_or_insert_with(BTreeMap::new).extend(stamp.annotations);
    world.csv = bare;
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Installing, CsvReason::InstallSucceeded));
    let names: Vec<&str> = decision.actions.iter().map(CsvAction::name).collect();
    assert!(
        !names.iter().any(|n| matches!(*n, "AddFinalizer" | "Label" | "Annotate")),
        "no metadata writes expected, got {names:?}"
    );
    assert!(names.contains(&"ApplyDeployment") && names.contains(&"ApplyOperatorCondition"), "{names:?}");

    // With two groups (or none resolved) nothing is guessed: the CSV controller decides.
    let second = group("second", &[NS]);
    assert!(crate::metadata::creation_metadata(&world.csv, &[&og, &second]).annotations.is_empty());
    let mut unresolved = og.clone();
    unresolved.status = None;
    assert!(crate::metadata::creation_metadata(&world.csv, &[&unresolved]).annotations.is_empty());
}
