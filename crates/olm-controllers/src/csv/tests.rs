//! Phase-machine tests on `decide`, with the real etcd 0.9.4 CSV as fixture (no cluster).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;
use olm_api::keys;
use olm_api::v1::operator_group::{OperatorGroup, OperatorGroupSpec, OperatorGroupStatus};
use olm_api::v1alpha1::cluster_service_version::{ClusterServiceVersion, ClusterServiceVersionStatus, CsvPhase, CsvReason, StatusReason};

use super::decide::{CsvAction, CsvDecision, Observed, decide, decide_copy, desired_deployments, set_phase};
use super::requirements::{CrdState, PermissionCheck, declared_rules};
use olm_runtime::Severity;

const NS: &str = "ns";
const ETCD_CSV: &str = include_str!("../../testdata/etcd-0.9.4/etcdoperator.v0.9.4.clusterserviceversion.yaml");
const ETCD_CLUSTERWIDE_CSV: &str =
    include_str!("../../testdata/etcd-0.9.4-clusterwide/etcdoperator.v0.9.4-clusterwide.clusterserviceversion.yaml");

fn now() -> Timestamp {
    Timestamp::from_second(1_800_000_000).expect("valid timestamp")
}

fn load(text: &str) -> ClusterServiceVersion {
    let mut csv: ClusterServiceVersion = olm_api::yaml::from_str(text, "testdata").expect("fixture parses");
    csv.metadata.namespace = Some(NS.into());
    csv.metadata.uid = Some("uid-1".into());
    csv.metadata.resource_version = Some("1".into());
    // As after the first pass; the finalizer tests start without it.
    csv.metadata.finalizers = Some(vec![keys::CSV_CLEANUP_FINALIZER.to_owned()]);
    let labels: BTreeMap<String, String> = crate::metadata::api_label_changes(&csv)
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect();
    csv.metadata.labels.get_or_insert_with(BTreeMap::new).extend(labels);
    csv
}

fn etcd() -> ClusterServiceVersion {
    load(ETCD_CSV)
}

fn with_phase(mut csv: ClusterServiceVersion, phase: CsvPhase, reason: CsvReason) -> ClusterServiceVersion {
    let previous = csv.status.clone().unwrap_or_default();
    let earlier = now() - SignedDuration::from_secs(30);
    csv.status = Some(set_phase(&previous, phase, reason, "earlier", earlier));
    csv
}

fn group(name: &str, targets: &[&str]) -> OperatorGroup {
    let mut og = OperatorGroup::new(name, OperatorGroupSpec::default());
    og.metadata.namespace = Some(NS.into());
    og.metadata.uid = Some(format!("uid-{name}"));
    og.status = Some(OperatorGroupStatus {
        namespaces: Some(targets.iter().map(|t| (*t).to_owned()).collect()),
        ..Default::default()
    });
    og
}

fn annotate_for(mut csv: ClusterServiceVersion, og: &OperatorGroup) -> ClusterServiceVersion {
    let targets = og.status.as_ref().and_then(|s| s.namespaces.clone()).unwrap_or_default();
    let annotations = csv.metadata.annotations.get_or_insert_with(BTreeMap::new);
    annotations.extend(crate::metadata::member_annotations(og, &targets));
    csv
}

fn available(mut deployment: Deployment) -> Deployment {
    deployment.metadata.generation = Some(1);
    deployment.status = Some(DeploymentStatus {
        observed_generation: Some(1),
        replicas: Some(1),
        updated_replicas: Some(1),
        available_replicas: Some(1),
        conditions: Some(vec![DeploymentCondition {
            type_: "Available".into(),
            status: "True".into(),
            ..Default::default()
        }]),
        ..Default::default()
    });
    deployment
}

/// Everything a test can set; `observed()` borrows it as the controller would.
struct World {
    csv: ClusterServiceVersion,
    groups: Vec<OperatorGroup>,
    other_groups: Vec<OperatorGroup>,
    crds: BTreeMap<String, CrdState>,
    service_accounts: BTreeSet<String>,
    foreign_service_accounts: BTreeMap<String, Vec<String>>,
    kube_version: Option<String>,
    served_kinds: BTreeMap<String, BTreeSet<String>>,
    required_api_services: BTreeMap<String, bool>,
    permissions: Option<Vec<PermissionCheck>>,
    deployments: BTreeMap<String, Deployment>,
    peers: Vec<ClusterServiceVersion>,
    copies: Vec<ClusterServiceVersion>,
    namespaces: Vec<String>,
    copies_disabled: bool,
    crd_uids: BTreeMap<String, String>,
    cluster_roles: BTreeMap<String, k8s_openapi::api::rbac::v1::ClusterRole>,
    owned_rbac: super::decide::OwnedRbac,
    taken: BTreeSet<String>,
    condition: Option<olm_api::v2::OperatorCondition>,
    condition_role: Option<k8s_openapi::api::rbac::v1::Role>,
    condition_binding: Option<k8s_openapi::api::rbac::v1::RoleBinding>,
    replaced_condition: Option<olm_api::v2::OperatorCondition>,
    subscription_config: Option<olm_api::v1alpha1::subscription::SubscriptionConfig>,
    serving_certs: BTreeMap<String, super::certs::ServingCert>,
    api_services: BTreeMap<String, super::decide::ExistingApiService>,
    webhooks: BTreeMap<String, super::decide::ExistingWebhook>,
}

impl World {
    /// The etcd CSV in an OwnNamespace group, annotated, with every requirement present.
    fn etcd_ready(phase: Option<(CsvPhase, CsvReason)>) -> World {
        let og = group("og", &[NS]);
        let mut csv = annotate_for(etcd(), &og);
        if let Some((phase, reason)) = phase {
            csv = with_phase(csv, phase, reason);
        }
        let crds = csv
            .spec
            .owned_crds()
            .iter()
            .map(|c| {
                (
                    c.name.clone(),
                    CrdState {
                        served_versions: vec![c.version.clone()],
                        established: true,
                        names_accepted: true,
                        ..Default::default()
                    },
                )
            })
            .collect();
        let permissions = declared_rules(&csv)
            .into_iter()
            .map(|(sa, cluster, rule)| PermissionCheck {
                service_account: sa,
                cluster,
                rule,
                satisfied: true,
            })
            .collect();
        let mut condition = super::decide::desired_operator_condition(&csv);
        condition.metadata.uid = Some("uid-condition".into());
        let (condition_role, condition_binding) = super::decide::desired_condition_rbac(&condition);
        World {
            csv,
            groups: vec![og],
            other_groups: Vec::new(),
            crds,
            service_accounts: BTreeSet::from(["etcd-operator".to_owned()]),
            foreign_service_accounts: BTreeMap::new(),
            kube_version: Some("v1.36.0".into()),
            served_kinds: BTreeMap::new(),
            required_api_services: BTreeMap::new(),
            permissions: Some(permissions),
            deployments: BTreeMap::new(),
            peers: Vec::new(),
            copies: Vec::new(),
            namespaces: vec![NS.into(), "other".into(), "kube-system".into()],
            copies_disabled: false,
            crd_uids: BTreeMap::new(),
            cluster_roles: BTreeMap::new(),
            owned_rbac: super::decide::OwnedRbac::default(),
            taken: BTreeSet::new(),
            // The OperatorCondition already exists unless a test says otherwise.
            condition: Some(condition.clone()),
            condition_role: Some(condition_role),
            condition_binding: Some(condition_binding),
            replaced_condition: None,
            subscription_config: None,
            serving_certs: BTreeMap::new(),
            api_services: BTreeMap::new(),
            webhooks: BTreeMap::new(),
        }
    }

    fn with_installed_deployments(mut self) -> World {
        for deployment in desired_deployments(&self.csv, self.subscription_config.as_ref(), &self.serving_certs) {
            self.deployments.insert(deployment.name_any(), available(deployment));
        }
        self
    }

    fn decide(&self) -> CsvDecision {
        let observed = Observed {
            csv: &self.csv,
            groups: self.groups.iter().collect(),
            other_groups: self.other_groups.iter().collect(),
            facts: super::requirements::Facts {
                crds: &self.crds,
                service_accounts: &self.service_accounts,
                foreign_service_accounts: &self.foreign_service_accounts,
                kube_version: self.kube_version.as_deref(),
                served_kinds: &self.served_kinds,
                required_api_services: &self.required_api_services,
            },
            permissions: self.permissions.as_deref(),
            deployments: &self.deployments,
            peers: self.peers.iter().collect(),
            copies: self.copies.iter().collect(),
            taken_namespaces: self.taken.clone(),
            crd_uids: &self.crd_uids,
            cluster_roles: &self.cluster_roles,
            owned_rbac: &self.owned_rbac,
            operator_condition: self.condition.as_ref(),
            condition_rbac: (self.condition_role.as_ref(), self.condition_binding.as_ref()),
            replaced_condition: self.replaced_condition.as_ref(),
            active_namespaces: &self.namespaces,
            copied_csvs_disabled: self.copies_disabled,
            subscription_config: self.subscription_config.as_ref(),
            serving_certs: &self.serving_certs,
            api_services: &self.api_services,
            webhooks: &self.webhooks,
            desired: Default::default(),
        };
        decide(&observed, now())
    }
}

fn phase_reason(decision: &CsvDecision) -> (CsvPhase, CsvReason) {
    let status = decision.status.as_ref().expect("a status");
    (
        status.phase.clone().expect("a phase"),
        status.reason.clone().expect("a reason"),
    )
}

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
    assert_eq!(phase_reason(&world.decide()), (CsvPhase::Failed, CsvReason::InstallCheckFailed));
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
fn failed_with_healthy_components_recovers_to_succeeded() {
    let world = World::etcd_ready(Some((CsvPhase::Failed, CsvReason::ComponentUnhealthy))).with_installed_deployments();
    assert_eq!(phase_reason(&world.decide()), (CsvPhase::Succeeded, CsvReason::InstallSucceeded));
}

#[test]
fn succeeded_lost_crd_fails_with_requirements_not_met() {
    let mut world = World::etcd_ready(Some((CsvPhase::Succeeded, CsvReason::InstallSucceeded))).with_installed_deployments();
    world.crds.clear();
    assert_eq!(phase_reason(&world.decide()), (CsvPhase::Failed, CsvReason::RequirementsNotMet));
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

#[test]
fn all_namespaces_csv_is_copied_unless_disabled() {
    let og = group("global", &[""]);
    let mut world = World::etcd_ready(Some((CsvPhase::Succeeded, CsvReason::InstallSucceeded)));
    world.csv = annotate_for(with_phase(load(ETCD_CLUSTERWIDE_CSV), CsvPhase::Succeeded, CsvReason::InstallSucceeded), &og);
    world.groups = vec![og];
    world = world.with_installed_deployments();
    let decision = world.decide();
    let copied: Vec<String> = decision
        .actions
        .iter()
        .filter_map(|a| match a {
            CsvAction::ApplyCopy(copy) => Some(copy.namespace().unwrap_or_default()),
            _ => None,
        })
        .collect();
    assert_eq!(copied, vec!["kube-system".to_owned(), "other".to_owned()]);
    let Some(CsvAction::ApplyCopy(copy)) = decision.actions.iter().find(|a| matches!(a, CsvAction::ApplyCopy(_))) else {
        panic!("a copy");
    };
    assert_eq!(copy.labels().get(keys::COPIED_FROM_LABEL).map(String::as_str), Some(NS));
    assert!(!copy.annotations().contains_key(keys::TARGET_NAMESPACES_ANNOTATION));
    let copy_status = copy.status.as_ref().expect("copy status");
    assert_eq!(copy_status.reason, Some(CsvReason::Copied));
    assert_eq!(copy_status.phase, Some(CsvPhase::Succeeded));

    // Up-to-date copies are left alone; a copy in a namespace that is gone is deleted.
    let mut stale = (**copy).clone();
    stale.metadata.namespace = Some("gone".into());
    world.copies = decision
        .actions
        .iter()
        .filter_map(|a| match a {
            CsvAction::ApplyCopy(copy) => Some((**copy).clone()),
            _ => None,
        })
        .chain(std::iter::once(stale))
        .collect();
    let decision = world.decide();
    assert_eq!(decision.actions, vec![CsvAction::DeleteCopy { namespace: "gone".into() }]);

    // A namespace where a CSV of that name is installed for real is never overwritten.
    world.copies.clear();
    world.taken.insert("other".into());
    let decision = world.decide();
    assert!(decision.actions.iter().all(|a| !matches!(a, CsvAction::ApplyCopy(c) if c.namespace().as_deref() == Some("other"))));
    world.taken.clear();
    world.copies = decision
        .actions
        .iter()
        .filter_map(|a| match a {
            CsvAction::ApplyCopy(copy) => Some((**copy).clone()),
            _ => None,
        })
        .collect();
    world.copies.push({
        let mut other = world.copies[0].clone();
        other.metadata.namespace = Some("other".into());
        other
    });
    world.copies.push({
        let mut gone = world.copies[0].clone();
        gone.metadata.namespace = Some("gone".into());
        gone
    });

    world.copies_disabled = true;
    let decision = world.decide();
    assert_eq!(decision.events.iter().map(|e| e.reason.as_str()).collect::<Vec<_>>(), vec!["DisabledCopiedCSVs"]);
    assert!(decision.actions.iter().all(|a| matches!(a, CsvAction::DeleteCopy { .. })));
    assert_eq!(decision.actions.len(), 3);
}

#[test]
fn own_namespace_csv_is_not_copied() {
    let world = World::etcd_ready(Some((CsvPhase::Succeeded, CsvReason::InstallSucceeded))).with_installed_deployments();
    assert!(world.decide().actions.is_empty());
}

#[test]
fn a_copy_without_its_original_deletes_itself() {
    let mut copy = etcd();
    copy.metadata.labels.get_or_insert_with(BTreeMap::new).insert(keys::COPIED_FROM_LABEL.into(), "operators".into());
    let no_rbac = super::decide::OwnedRbac::default();
    assert_eq!(decide_copy(&copy, None, &no_rbac).actions, vec![CsvAction::DeleteSelf]);
    let original = etcd();
    assert!(decide_copy(&copy, Some(&original), &no_rbac).actions.is_empty());
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

fn operator_rbac() -> super::decide::OwnedRbac {
    use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
    let meta = |name: &str| k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        name: Some(name.into()),
        namespace: Some(NS.into()),
        ..Default::default()
    };
    super::decide::OwnedRbac {
        roles: vec![Role {
            metadata: meta("etcd-role"),
            rules: Some(vec![PolicyRule { verbs: vec!["*".into()], api_groups: Some(vec!["".into()]), resources: Some(vec!["pods".into()]), ..Default::default() }]),
        }],
        bindings: vec![RoleBinding {
            metadata: meta("etcd-binding"),
            role_ref: RoleRef { api_group: Some("rbac.authorization.k8s.io".into()), kind: "Role".into(), name: "etcd-role".into() },
            subjects: Some(vec![Subject { kind: "ServiceAccount".into(), name: "etcd-operator".into(), namespace: Some(NS.into()), api_group: None }]),
        }],
    }
}

#[test]
fn all_namespaces_operator_rbac_is_lifted_to_cluster_roles() {
    let og = group("global", &[""]);
    let mut world = World::etcd_ready(Some((CsvPhase::Succeeded, CsvReason::InstallSucceeded)));
    world.csv = annotate_for(with_phase(load(ETCD_CLUSTERWIDE_CSV), CsvPhase::Succeeded, CsvReason::InstallSucceeded), &og);
    world.groups = vec![og];
    world.namespaces = vec![NS.into()];
    world.owned_rbac = operator_rbac();
    world = world.with_installed_deployments();
    let decision = world.decide();
    let role = decision.actions.iter().find_map(|a| match a {
        CsvAction::ApplyClusterRole(role) if role.name_any() == "etcd-role" => Some(role.clone()),
        _ => None,
    });
    let role = role.expect("the Role is lifted");
    let rules = role.rules.clone().unwrap_or_default();
    assert!(rules.iter().any(|r| r.resources == Some(vec!["namespaces".to_owned()])), "{rules:?}");
    assert_eq!(role.labels().get(keys::OWNER_LABEL).map(String::as_str), Some("etcdoperator.v0.9.4-clusterwide"));
    let binding = decision.actions.iter().find_map(|a| match a {
        CsvAction::ApplyClusterRoleBinding(b) => Some(b.clone()),
        _ => None,
    });
    let binding = binding.expect("the RoleBinding is lifted");
    assert_eq!((binding.role_ref.kind.as_str(), binding.role_ref.name.as_str()), ("ClusterRole", "etcd-role"));
}

#[test]
fn a_copy_in_an_explicit_target_carries_the_operator_rbac() {
    let mut original = etcd();
    original.metadata.annotations.get_or_insert_with(BTreeMap::new).insert(keys::TARGET_NAMESPACES_ANNOTATION.into(), "team-a,team-b".into());
    let mut copy = etcd();
    copy.metadata.namespace = Some("team-a".into());
    copy.metadata.uid = Some("copy-uid".into());
    copy.metadata.labels.get_or_insert_with(BTreeMap::new).insert(keys::COPIED_FROM_LABEL.into(), NS.into());
    let decision = decide_copy(&copy, Some(&original), &operator_rbac());
    let [CsvAction::ApplyRole(role), CsvAction::ApplyRoleBinding(binding)] = decision.actions.as_slice() else {
        panic!("expected a Role and a RoleBinding: {:?}", decision.actions);
    };
    assert_eq!(role.metadata.namespace.as_deref(), Some("team-a"));
    assert_eq!(role.owner_references()[0].uid, "copy-uid");
    assert_eq!(role.labels().get(keys::COPIED_FROM_LABEL).map(String::as_str), Some(NS));
    assert_eq!(binding.role_ref.name, "etcd-role");
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

fn subscription_config(json: serde_json::Value) -> olm_api::v1alpha1::subscription::SubscriptionConfig {
    serde_json::from_value(json).expect("config parses")
}

fn pod_of(deployment: &Deployment) -> serde_json::Value {
    serde_json::to_value(deployment.spec.as_ref().map(|s| &s.template)).expect("json")
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
    let pick = |subs: &[&Subscription]| super::deployment::subscription_for(&csv, subs).map(|s| s.name_any());
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

/// The etcd CSV with an owned APIService and a validating and a mutating webhook, all served
/// by the etcd-operator Deployment.
fn etcd_exposing(world: &mut World) {
    let spec = serde_json::json!({
        "apiservicedefinitions": {"owned": [{
            "name": "backups.example.com", "group": "example.com", "version": "v1", "kind": "Backup",
            "deploymentName": "etcd-operator", "containerPort": 8443,
        }]},
        "webhookdefinitions": [
            {"generateName": "vbackup.example.com", "type": "ValidatingAdmissionWebhook", "deploymentName": "etcd-operator",
             "containerPort": 9443, "webhookPath": "/validate", "sideEffects": "None", "admissionReviewVersions": ["v1"],
             "rules": [{"apiGroups": ["example.com"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["backups"]}]},
            {"generateName": "mbackup.example.com", "type": "MutatingAdmissionWebhook", "deploymentName": "etcd-operator",
             "containerPort": 9443, "webhookPath": "/mutate", "sideEffects": "None", "admissionReviewVersions": ["v1"]},
        ],
    });
    let mut value = serde_json::to_value(&world.csv).expect("csv json");
    value["spec"]["apiservicedefinitions"] = spec["apiservicedefinitions"].clone();
    value["spec"]["webhookdefinitions"] = spec["webhookdefinitions"].clone();
    world.csv = serde_json::from_value(value).expect("csv with exposure");
    let cert = super::certs::generate("etcd-operator-service", NS, now()).expect("certificate");
    world.serving_certs = BTreeMap::from([("etcd-operator".to_owned(), cert)]);
}

fn exposed_world(phase: (CsvPhase, CsvReason)) -> World {
    let mut world = World::etcd_ready(Some(phase));
    etcd_exposing(&mut world);
    world
}

/// What the cluster shows once everything was applied with the world's certificates.
fn with_exposure_installed(mut world: World, available: bool) -> World {
    let ca = world.serving_certs["etcd-operator"].ca_pem.as_bytes().to_vec();
    for cert in world.serving_certs.values_mut() {
        cert.fresh = false;
    }
    world.api_services = BTreeMap::from([(
        "v1.example.com".to_owned(),
        super::decide::ExistingApiService {
            available,
            ca_bundle: Some(ca.clone()),
            owner: super::decide::OwnerLabels::of(&crate::metadata::owner_labels(&world.csv)),
        },
    )]);
    for (generate_name, kind) in [
        ("vbackup.example.com", "ValidatingWebhookConfiguration"),
        ("mbackup.example.com", "MutatingWebhookConfiguration"),
    ] {
        world.webhooks.insert(
            generate_name.to_owned(),
            super::decide::ExistingWebhook {
                kind: kind.to_owned(),
                name: format!("{generate_name}-abcde"),
                ca_bundle: Some(ca.clone()),
            },
        );
    }
    world.with_installed_deployments()
}

#[test]
fn generated_certificates_name_the_service_and_round_trip_through_the_secret() {
    let csv = etcd();
    let cert = super::certs::generate("etcd-operator-service", NS, now()).expect("certificate");
    assert!(cert.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"), "{}", cert.ca_pem);
    assert!(cert.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
    assert!(cert.key_pem.contains("PRIVATE KEY"));
    let other = super::certs::generate("etcd-operator-service", NS, now()).expect("certificate");
    assert_ne!(cert.ca_hash(), other.ca_hash(), "fresh keys every time");

    let secret = super::certs::render_secret(&csv, "etcd-operator", &cert);
    assert_eq!(secret.metadata.name.as_deref(), Some("etcd-operator-service-cert"));
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    let keys_present: Vec<&String> = secret.data.as_ref().map(|d| d.keys().collect()).unwrap_or_default();
    assert_eq!(keys_present, ["olmCAKey", "tls.crt", "tls.key"]);
    let stored = super::certs::from_secret(&secret).expect("complete secret");
    assert_eq!((stored.ca_pem.as_str(), stored.fresh), (cert.ca_pem.as_str(), false));

    // Rotation: missing, never stamped, or past certsRotateAt.
    let rotate = super::certs::rotate_at(now());
    assert_eq!(rotate.duration_since(now()), SignedDuration::from_hours(729 * 24));
    assert!(super::certs::needs_rotation(None, Some(rotate), now()));
    assert!(super::certs::needs_rotation(Some(&stored), None, now()));
    assert!(!super::certs::needs_rotation(Some(&stored), Some(rotate), now()));
    assert!(super::certs::needs_rotation(Some(&stored), Some(rotate), rotate));
}

#[test]
fn install_ready_exposes_apiservices_and_webhooks_with_the_generated_ca() {
    let world = exposed_world((CsvPhase::InstallReady, CsvReason::AllRequirementsMet));
    let ca = world.serving_certs["etcd-operator"].ca_pem.clone();
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Installing, CsvReason::InstallSucceeded));
    let status = decision.status.as_ref().expect("status");
    assert_eq!(status.certs_last_updated, Some(Time(now())));
    assert_eq!(status.certs_rotate_at, Some(Time(super::certs::rotate_at(now()))));

    let kinds: Vec<&str> = decision
        .actions
        .iter()
        .map(|a| match a {
            CsvAction::ApplySecret(_) => "Secret",
            CsvAction::ApplyService(_) => "Service",
            CsvAction::ApplyDeployment(_) => "Deployment",
            CsvAction::ApplyApiService(_) => "APIService",
            CsvAction::ApplyWebhook { .. } => "Webhook",
            _ => "other",
        })
        .filter(|k| *k != "other")
        .collect();
    assert_eq!(kinds, ["Secret", "Service", "Deployment", "APIService", "Webhook", "Webhook"], "apply order");

    for action in &decision.actions {
        match action {
            CsvAction::ApplyService(service) => {
                assert_eq!(service.metadata.name.as_deref(), Some("etcd-operator-service"));
                let ports = service.spec.as_ref().and_then(|s| s.ports.clone()).unwrap_or_default();
                let pairs: Vec<(i32, serde_json::Value)> = ports
                    .iter()
                    .map(|p| (p.port, serde_json::to_value(&p.target_port).expect("json")))
                    .collect();
                assert_eq!(pairs, [(443, serde_json::json!(8443)), (9443, serde_json::json!(9443))]);
                let selector = service.spec.as_ref().and_then(|s| s.selector.clone()).unwrap_or_default();
                assert_eq!(selector.get("name").map(String::as_str), Some("etcd-operator-alm-owned"));
            }
            CsvAction::ApplyDeployment(deployment) => {
                let template = pod_of(deployment);
                let mounts = &template["spec"]["containers"][0]["volumeMounts"];
                let paths: Vec<&str> = mounts.as_array().into_iter().flatten().filter_map(|m| m["mountPath"].as_str()).collect();
                assert_eq!(paths, ["/apiserver.local.config/certificates", "/tmp/k8s-webhook-server/serving-certs"]);
                let volumes = &template["spec"]["volumes"];
                assert_eq!(volumes[0]["secret"]["secretName"], serde_json::json!("etcd-operator-service-cert"));
                assert_eq!(volumes[0]["secret"]["items"][0], serde_json::json!({"key": "tls.crt", "path": "apiserver.crt"}));
                assert_eq!(volumes[1]["secret"]["items"][1], serde_json::json!({"key": "tls.key", "path": "tls.key"}));
                assert!(template["metadata"]["annotations"]["olmcahash"].is_string());
            }
            CsvAction::ApplyApiService(api) => {
                assert_eq!(api.metadata.name.as_deref(), Some("v1.example.com"));
                assert_eq!(api.labels().get(keys::OWNER_LABEL).map(String::as_str), Some("etcdoperator.v0.9.4"));
                let spec = api.spec.as_ref().expect("spec");
                assert_eq!(spec.ca_bundle.as_ref().map(|b| b.0.clone()), Some(ca.as_bytes().to_vec()));
                assert_eq!((spec.group_priority_minimum, spec.version_priority), (2000, 15));
                let service = spec.service.as_ref().expect("service");
                assert_eq!((service.name.as_deref(), service.namespace.as_deref(), service.port), (Some("etcd-operator-service"), Some(NS), Some(443)));
            }
            CsvAction::ApplyWebhook { existing, config } => {
                assert_eq!(existing, &None, "nothing to update yet");
                let value = match config.as_ref() {
                    super::certs::WebhookConfig::Validating(c) => serde_json::to_value(c),
                    super::certs::WebhookConfig::Mutating(c) => serde_json::to_value(c),
                }
                .expect("json");
                let generate_name = config.generate_name();
                let name = value["metadata"]["name"].as_str().unwrap_or_default().to_owned();
                assert!(name.starts_with(&format!("{generate_name}-")) && name.len() == generate_name.len() + 11, "{name}");
                assert_eq!(value["metadata"].get("generateName"), None, "a fixed name keeps creation idempotent");
                assert_eq!(value["metadata"]["labels"][keys::OWNER_KIND_LABEL], serde_json::json!("ClusterServiceVersion"));
                let hook = &value["webhooks"][0];
                assert_eq!(hook["clientConfig"]["service"]["name"], serde_json::json!("etcd-operator-service"));
                assert_eq!(hook["clientConfig"]["service"]["port"], serde_json::json!(9443));
                let expected_path = if generate_name.starts_with('v') { "/validate" } else { "/mutate" };
                assert_eq!(hook["clientConfig"]["service"]["path"], serde_json::json!(expected_path));
                assert_eq!(hook["namespaceSelector"]["matchExpressions"][0]["key"], serde_json::json!("olm.operatorgroup.uid/uid-og"));
                use base64::Engine as _;
                let bundle = base64::engine::general_purpose::STANDARD.encode(ca.as_bytes());
                assert_eq!(hook["clientConfig"]["caBundle"], serde_json::json!(bundle));
            }
            _ => {}
        }
    }
}

#[test]
fn an_all_namespaces_operator_webhook_selects_every_namespace() {
    let og = group("og", &[""]);
    assert_eq!(super::certs::namespace_selector(&og, &[String::new()]), None);
}

#[test]
fn installing_waits_for_the_apiservice_and_reapplies_what_is_missing() {
    // Everything applied, APIService not Available yet: keep waiting.
    let waiting = with_exposure_installed(exposed_world((CsvPhase::Installing, CsvReason::InstallSucceeded)), false);
    let decision = waiting.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Installing, CsvReason::InstallWaiting));
    assert!(
        decision.status.as_ref().and_then(|s| s.message.as_deref()).unwrap_or_default().contains("APIService v1.example.com"),
        "{:?}",
        decision.status
    );

    // Available: Succeeded, with the ordinary resync (the exposure objects are watched).
    let ready = with_exposure_installed(exposed_world((CsvPhase::Installing, CsvReason::InstallSucceeded)), true);
    let decision = ready.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Succeeded, CsvReason::InstallSucceeded));
    assert_eq!(decision.requeue_after, Some(super::decide::REQUEUE_RESYNC));

    // A webhook configuration deleted by hand: back to InstallReady, which re-creates it.
    let mut lost = with_exposure_installed(exposed_world((CsvPhase::Installing, CsvReason::InstallSucceeded)), true);
    lost.webhooks.remove("mbackup.example.com");
    assert_eq!(phase_reason(&lost.decide()), (CsvPhase::InstallReady, CsvReason::InstallWaiting));

    // An existing configuration is updated in place, by its generated name.
    let mut again = with_exposure_installed(exposed_world((CsvPhase::InstallReady, CsvReason::InstallWaiting)), true);
    again.webhooks.remove("mbackup.example.com");
    let existing: Vec<Option<String>> = again
        .decide()
        .actions
        .iter()
        .filter_map(|a| match a {
            CsvAction::ApplyWebhook { existing, .. } => Some(existing.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(existing, [Some("vbackup.example.com-abcde".to_owned()), None]);
}

#[test]
fn certificates_are_rotated_before_they_expire() {
    let mut world = with_exposure_installed(exposed_world((CsvPhase::Succeeded, CsvReason::InstallSucceeded)), true);
    if let Some(status) = world.csv.status.as_mut() {
        status.certs_rotate_at = Some(Time(now() + SignedDuration::from_hours(1)));
    }
    assert_eq!(world.decide().status.as_ref().and_then(|s| s.phase.clone()), Some(CsvPhase::Succeeded));
    if let Some(status) = world.csv.status.as_mut() {
        status.certs_rotate_at = Some(Time(now() - SignedDuration::from_secs(1)));
    }
    assert_eq!(phase_reason(&world.decide()), (CsvPhase::InstallReady, CsvReason::NeedsCertRotation));
}

#[test]
fn a_webhook_without_a_listed_deployment_is_an_invalid_strategy() {
    let mut world = exposed_world((CsvPhase::InstallReady, CsvReason::AllRequirementsMet));
    let mut value = serde_json::to_value(&world.csv).expect("json");
    value["spec"]["webhookdefinitions"][0]["deploymentName"] = serde_json::json!("nope");
    world.csv = serde_json::from_value(value).expect("csv");
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Failed, CsvReason::InvalidInstallStrategy));
    let message = decision.status.as_ref().and_then(|s| s.message.clone()).unwrap_or_default();
    assert!(message.contains("spec.webhookdefinitions[0]") && message.contains("\"nope\""), "{message}");
}

#[test]
fn a_serving_deployment_gets_secret_access_and_delegated_auth_rbac() {
    let world = exposed_world((CsvPhase::InstallReady, CsvReason::AllRequirementsMet));
    let decision = world.decide();
    let role = decision.actions.iter().find_map(|a| match a {
        CsvAction::ApplyRole(r) => Some(r),
        _ => None,
    });
    let role = role.expect("a Role for the certificate Secret");
    assert_eq!(role.metadata.name.as_deref(), Some("etcd-operator-service-cert"));
    let rules = role.rules.clone().unwrap_or_default();
    assert_eq!(rules[0].resource_names, Some(vec!["etcd-operator-service-cert".to_owned()]));
    let bindings: Vec<(Option<String>, String, String)> = decision
        .actions
        .iter()
        .filter_map(|a| match a {
            CsvAction::ApplyRoleBinding(b) => Some((b.metadata.namespace.clone(), b.name_any(), b.role_ref.name.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        bindings,
        [
            (Some(NS.to_owned()), "etcd-operator-service-cert".to_owned(), "etcd-operator-service-cert".to_owned()),
            (
                Some("kube-system".to_owned()),
                "etcd-operator-service-auth-reader".to_owned(),
                "extension-apiserver-authentication-reader".to_owned()
            ),
        ]
    );
    let delegator = decision.actions.iter().find_map(|a| match a {
        CsvAction::ApplyClusterRoleBinding(b) => Some(b),
        _ => None,
    });
    let delegator = delegator.expect("auth-delegator binding");
    assert_eq!(delegator.name_any(), "etcd-operator-service-system:auth-delegator");
    assert_eq!(delegator.role_ref.name, "system:auth-delegator");
    let subject = &delegator.subjects.as_deref().unwrap_or_default()[0];
    assert_eq!((subject.name.as_str(), subject.namespace.as_deref()), ("etcd-operator", Some(NS)));
    assert!(delegator.labels().contains_key(keys::OWNER_LABEL), "deleted by owner labels with the CSV");
}

#[test]
fn configurations_of_removed_webhook_descriptions_are_deleted() {
    let mut world = with_exposure_installed(exposed_world((CsvPhase::InstallReady, CsvReason::InstallWaiting)), true);
    world.webhooks.insert(
        "gone.example.com".to_owned(),
        super::decide::ExistingWebhook {
            kind: "ValidatingWebhookConfiguration".into(),
            name: "gone.example.com-xyz".into(),
            ca_bundle: None,
        },
    );
    let deleted: Vec<CsvAction> = world
        .decide()
        .actions
        .into_iter()
        .filter(|a| matches!(a, CsvAction::DeleteWebhook { .. }))
        .collect();
    assert_eq!(
        deleted,
        [CsvAction::DeleteWebhook {
            kind: "ValidatingWebhookConfiguration".into(),
            name: "gone.example.com-xyz".into()
        }]
    );
}

const ETCDCLUSTERS: &str = "etcdclusters.etcd.database.coreos.com";

/// The etcd CSV with a conversion webhook for its EtcdCluster CRD, in an all-namespaces group;
/// `only_all_namespaces` says whether its install modes allow nothing else (upstream's rule).
fn conversion_world(phase: (CsvPhase, CsvReason), only_all_namespaces: bool) -> World {
    let mut world = World::etcd_ready(Some(phase));
    let og = group("og", &[""]);
    let mut value = serde_json::to_value(&world.csv).expect("csv json");
    value["spec"]["installModes"] = serde_json::json!([
        {"type": "OwnNamespace", "supported": !only_all_namespaces},
        {"type": "SingleNamespace", "supported": false},
        {"type": "MultiNamespace", "supported": false},
        {"type": "AllNamespaces", "supported": true},
    ]);
    value["spec"]["webhookdefinitions"] = serde_json::json!([{
        "generateName": "cetcd.example.com", "type": "ConversionWebhook", "deploymentName": "etcd-operator",
        "containerPort": 9443, "webhookPath": "/convert", "admissionReviewVersions": ["v1", "v1beta1"],
        "conversionCRDs": [ETCDCLUSTERS],
    }]);
    world.csv = annotate_for(serde_json::from_value(value).expect("csv with a conversion webhook"), &og);
    world.groups = vec![og];
    let cert = super::certs::generate("etcd-operator-service", NS, now()).expect("certificate");
    world.serving_certs = BTreeMap::from([("etcd-operator".to_owned(), cert)]);
    world
}

fn crd_conversions(decision: &CsvDecision) -> Vec<(String, k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceConversion)> {
    decision
        .actions
        .iter()
        .filter_map(|a| match a {
            CsvAction::ApplyCrdConversion { crd, conversion } => Some((crd.clone(), (**conversion).clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_conversion_webhook_points_its_crds_at_the_operator_service_with_the_generated_ca() {
    let world = conversion_world((CsvPhase::InstallReady, CsvReason::AllRequirementsMet), true);
    let ca = world.serving_certs["etcd-operator"].ca_pem.clone();
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Installing, CsvReason::InstallSucceeded));
    let conversions = crd_conversions(&decision);
    assert_eq!(conversions.len(), 1, "{:?}", decision.actions);
    let (crd, conversion) = &conversions[0];
    assert_eq!(crd, ETCDCLUSTERS);
    assert_eq!(conversion.strategy, "Webhook");
    let webhook = conversion.webhook.as_ref().expect("webhook");
    assert_eq!(webhook.conversion_review_versions, ["v1", "v1beta1"]);
    let client = webhook.client_config.as_ref().expect("client config");
    assert_eq!(client.ca_bundle.as_ref().map(|b| b.0.clone()), Some(ca.into_bytes()));
    let service = client.service.as_ref().expect("service");
    assert_eq!(
        (service.namespace.as_str(), service.name.as_str(), service.path.as_deref(), service.port),
        (NS, "etcd-operator-service", Some("/convert"), Some(9443))
    );
    // The serving Deployment mounts the pair and its Service exposes the webhook port.
    let service = decision.actions.iter().find_map(|a| match a {
        CsvAction::ApplyService(s) => Some(s),
        _ => None,
    });
    let ports: Vec<i32> = service.and_then(|s| s.spec.as_ref()).and_then(|s| s.ports.clone()).unwrap_or_default().iter().map(|p| p.port).collect();
    assert_eq!(ports, [9443]);
    let mounted = decision.actions.iter().any(|a| match a {
        CsvAction::ApplyDeployment(d) => d
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .is_some_and(|p| p.containers[0].volume_mounts.iter().flatten().any(|m| m.mount_path == super::certs::WEBHOOK_CERT_DIR)),
        _ => false,
    });
    assert!(mounted, "the webhook certificate is mounted into the serving Deployment");
    // No admission configuration is made for a conversion webhook.
    assert!(!decision.actions.iter().any(|a| matches!(a, CsvAction::ApplyWebhook { .. })));
}

#[test]
fn a_crd_whose_conversion_drifted_is_configured_again() {
    let mut world = conversion_world((CsvPhase::Installing, CsvReason::InstallSucceeded), true);
    for cert in world.serving_certs.values_mut() {
        cert.fresh = false;
    }
    let mut world = world.with_installed_deployments();
    // Not configured (strategy None): back to InstallReady, which applies it.
    world.crds.get_mut(ETCDCLUSTERS).expect("crd").conversion = Some(Default::default());
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::InstallReady, CsvReason::InstallWaiting));
    let message = decision.status.as_ref().and_then(|s| s.message.clone()).unwrap_or_default();
    assert!(message.contains(ETCDCLUSTERS), "{message}");

    // Configured as rendered (the API server defaults nothing we set): Succeeded.
    let hook = world.csv.spec.webhooks()[0].clone();
    let wanted = super::certs::render_conversion(&world.csv, &hook, &world.serving_certs["etcd-operator"]);
    world.crds.get_mut(ETCDCLUSTERS).expect("crd").conversion = Some(wanted.clone());
    assert_eq!(phase_reason(&world.decide()), (CsvPhase::Succeeded, CsvReason::InstallSucceeded));

    // A stale CA (certificates rotated, CRD not updated yet) counts as drift.
    let mut stale = wanted;
    if let Some(client) = stale.webhook.as_mut().and_then(|w| w.client_config.as_mut()) {
        client.ca_bundle = Some(k8s_openapi::ByteString(b"old".to_vec()));
    }
    world.crds.get_mut(ETCDCLUSTERS).expect("crd").conversion = Some(stale);
    assert_eq!(phase_reason(&world.decide()), (CsvPhase::InstallReady, CsvReason::InstallWaiting));
}

#[test]
fn a_conversion_webhook_needs_an_operator_that_supports_only_all_namespaces() {
    let world = conversion_world((CsvPhase::InstallReady, CsvReason::AllRequirementsMet), false);
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Failed, CsvReason::InstallComponentFailed));
    assert_eq!(
        decision.status.as_ref().and_then(|s| s.message.as_deref()),
        Some("install strategy failed: unable to manage conversion webhook: CSVs with conversion webhooks must support only AllNamespaces")
    );
    assert!(crd_conversions(&decision).is_empty(), "nothing is configured");
    assert!(!decision.actions.iter().any(|a| matches!(a, CsvAction::ApplyDeployment(_))), "no install");

    // It stays Failed (no reinstall loop) until the CSV or the CRD changes.
    let mut failed = conversion_world((CsvPhase::InstallReady, CsvReason::AllRequirementsMet), false);
    failed.csv.status = decision.status.clone();
    if let Some(status) = failed.csv.status.as_mut() {
        status.last_transition_time = Some(Time(now() - SignedDuration::from_secs(3600)));
    }
    let again = failed.decide();
    assert_eq!(phase_reason(&again), (CsvPhase::Failed, CsvReason::InstallComponentFailed));
    assert!(again.events.is_empty());
}

#[test]
fn a_conversion_crd_must_be_owned_and_must_not_preserve_unknown_fields() {
    let mut world = conversion_world((CsvPhase::InstallReady, CsvReason::AllRequirementsMet), true);
    world.crds.get_mut(ETCDCLUSTERS).expect("crd").preserve_unknown_fields = true;
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Failed, CsvReason::InstallComponentFailed));
    let message = decision.status.as_ref().and_then(|s| s.message.clone()).unwrap_or_default();
    assert!(message.contains("PreserveUnknownFields must be false") && message.contains(ETCDCLUSTERS), "{message}");

    let mut world = conversion_world((CsvPhase::InstallReady, CsvReason::AllRequirementsMet), true);
    let mut value = serde_json::to_value(&world.csv).expect("json");
    value["spec"]["webhookdefinitions"][0]["conversionCRDs"] = serde_json::json!(["things.example.com"]);
    world.csv = serde_json::from_value(value).expect("csv");
    let decision = world.decide();
    let message = decision.status.as_ref().and_then(|s| s.message.clone()).unwrap_or_default();
    assert!(message.contains("does not own CRD things.example.com"), "{message}");

    let mut value = serde_json::to_value(&world.csv).expect("json");
    value["spec"]["webhookdefinitions"][0]["conversionCRDs"] = serde_json::json!([]);
    world.csv = serde_json::from_value(value).expect("csv");
    let message = world.decide().status.and_then(|s| s.message).unwrap_or_default();
    assert!(message.contains("conversion webhook must have at least one CRD specified"), "{message}");
}

#[test]
fn deleting_a_csv_that_nothing_replaces_removes_its_conversion_webhook_from_the_crds() {
    let mut world = conversion_world((CsvPhase::Succeeded, CsvReason::InstallSucceeded), true);
    world.csv.metadata.deletion_timestamp = Some(Time(now()));
    let resets: Vec<CsvAction> = world
        .decide()
        .actions
        .into_iter()
        .filter(|a| matches!(a, CsvAction::ResetCrdConversion { .. } | CsvAction::RemoveFinalizer { .. }))
        .collect();
    assert_eq!(
        resets,
        [CsvAction::ResetCrdConversion { crd: ETCDCLUSTERS.to_owned() }, CsvAction::RemoveFinalizer { index: 0 }],
        "reset before the finalizer goes"
    );

    // Being replaced by a newer version: the CRD keeps its webhook (the new operator serves it).
    let mut next = world.csv.clone();
    next.metadata.name = Some("etcdoperator.v0.9.5".into());
    next.metadata.deletion_timestamp = None;
    next.spec.replaces = Some(world.csv.name_any());
    world.peers = vec![next];
    assert!(!world.decide().actions.iter().any(|a| matches!(a, CsvAction::ResetCrdConversion { .. })));
}

fn api_service_owned_by(world: &mut World, owner: super::decide::OwnerLabels) {
    world.api_services.insert(
        "v1.example.com".to_owned(),
        super::decide::ExistingApiService {
            available: true,
            ca_bundle: None,
            owner,
        },
    );
}

fn csv_owner(name: &str) -> super::decide::OwnerLabels {
    super::decide::OwnerLabels {
        kind: "ClusterServiceVersion".into(),
        namespace: NS.into(),
        name: name.into(),
    }
}

#[test]
fn an_apiservice_of_another_csv_or_of_nobody_is_not_adopted() {
    // Not labelled by OLM at all: upstream refuses to take it over.
    let mut world = exposed_world((CsvPhase::Pending, CsvReason::RequirementsUnknown));
    api_service_owned_by(&mut world, super::decide::OwnerLabels::default());
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Failed, CsvReason::OwnerConflict));
    let message = decision.status.as_ref().and_then(|s| s.message.clone()).unwrap_or_default();
    assert!(message.starts_with("unable to adopt APIService v1.example.com: it exists without OLM owner labels"), "{message}");

    // Owned by an unrelated CSV: the message names it.
    let mut world = exposed_world((CsvPhase::Pending, CsvReason::RequirementsUnknown));
    api_service_owned_by(&mut world, csv_owner("backup-operator.v1.0.0"));
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Failed, CsvReason::OwnerConflict));
    let message = decision.status.as_ref().and_then(|s| s.message.clone()).unwrap_or_default();
    assert!(message.contains(&format!("owned by ClusterServiceVersion {NS}/backup-operator.v1.0.0")), "{message}");
    assert!(!decision.actions.iter().any(|a| matches!(a, CsvAction::ApplyApiService(_))), "never overwritten");

    // Failed with the conflict still there: stays (no reinstall loop); it is re-checked when
    // the APIService changes.
    world.csv.status = decision.status.clone();
    let again = world.decide();
    assert_eq!(phase_reason(&again), (CsvPhase::Failed, CsvReason::OwnerConflict));
    assert!(again.events.is_empty());
    assert!(!again.actions.iter().any(|a| matches!(a, CsvAction::ApplyApiService(_))));

    // The conflict is gone (the APIService was deleted): the CSV installs again.
    world.api_services.clear();
    assert_ne!(world.decide().status.and_then(|s| s.reason), Some(CsvReason::OwnerConflict));
}

#[test]
fn an_apiservice_of_the_replaced_csv_is_adopted() {
    let mut world = exposed_world((CsvPhase::Pending, CsvReason::RequirementsUnknown));
    let mut old = with_phase(etcd(), CsvPhase::Replacing, CsvReason::BeingReplaced);
    old.metadata.name = Some("etcdoperator.v0.9.2".into());
    world.csv.spec.replaces = Some("etcdoperator.v0.9.2".into());
    world.peers = vec![old];
    api_service_owned_by(&mut world, csv_owner("etcdoperator.v0.9.2"));
    // Requirements met and installing in the same pass: taken over by applying it with this
    // CSV's labels, Service and CA.
    let ca = world.serving_certs["etcd-operator"].ca_pem.clone();
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Installing, CsvReason::InstallSucceeded));
    let applied = decision.actions.iter().find_map(|a| match a {
        CsvAction::ApplyApiService(api) => Some(api),
        _ => None,
    });
    let applied = applied.expect("the APIService is applied");
    assert!(crate::metadata::owned_by(applied.labels(), &world.csv), "{:?}", applied.labels());
    let spec = applied.spec.as_ref().expect("spec");
    assert_eq!(spec.ca_bundle.as_ref().map(|b| b.0.clone()), Some(ca.into_bytes()));
    assert_eq!(spec.service.as_ref().and_then(|s| s.name.as_deref()), Some("etcd-operator-service"));

    // Still labelled for the old CSV after the install: applied again (not a conflict).
    let mut installing = with_exposure_installed(exposed_world((CsvPhase::Installing, CsvReason::InstallSucceeded)), true);
    installing.csv.spec.replaces = Some("etcdoperator.v0.9.2".into());
    installing.peers = world.peers.clone();
    if let Some(api) = installing.api_services.get_mut("v1.example.com") {
        api.owner = csv_owner("etcdoperator.v0.9.2");
    }
    assert_eq!(phase_reason(&installing.decide()), (CsvPhase::InstallReady, CsvReason::InstallWaiting));
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

#[test]
fn webhook_descriptions_must_have_unique_names_and_leave_olm_alone() {
    let cases = [
        (
            serde_json::json!({"generateName": "vbackup.example.com"}),
            "CSV contains repeated WebhookDescription name",
        ),
        (
            serde_json::json!({"generateName": "all.example.com", "rules": [{"apiGroups": ["*"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]}),
            "webhook rules cannot include all groups",
        ),
        (
            serde_json::json!({"generateName": "olm.example.com", "rules": [{"apiGroups": ["operators.coreos.com"], "apiVersions": ["v1alpha1"], "operations": ["CREATE"], "resources": ["subscriptions"]}]}),
            "webhook rules cannot include the OLM group",
        ),
        (
            serde_json::json!({"generateName": "hooks.example.com", "rules": [{"apiGroups": ["admissionregistration.k8s.io"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["validatingwebhookconfigurations"]}]}),
            "webhook rules cannot include MutatingWebhookConfiguration or ValidatingWebhookConfiguration resources",
        ),
    ];
    for (extra, message) in cases {
        let mut world = exposed_world((CsvPhase::Pending, CsvReason::RequirementsUnknown));
        let mut value = serde_json::to_value(&world.csv).expect("json");
        let mut hook = value["spec"]["webhookdefinitions"][0].clone();
        for (k, v) in extra.as_object().expect("object") {
            hook[k] = v.clone();
        }
        value["spec"]["webhookdefinitions"].as_array_mut().expect("array").push(hook);
        world.csv = serde_json::from_value(value).expect("csv");
        let decision = world.decide();
        assert_eq!(phase_reason(&decision), (CsvPhase::Failed, CsvReason::InvalidWebhookDescription), "{message}");
        assert_eq!(decision.status.as_ref().and_then(|s| s.message.as_deref()), Some(message));
        // Stays Failed until the CSV is fixed.
        world.csv.status = decision.status.clone();
        assert_eq!(phase_reason(&world.decide()), (CsvPhase::Failed, CsvReason::InvalidWebhookDescription));
    }
}

#[test]
fn min_kube_version_native_apis_and_required_apiservices_are_requirements() {
    use super::requirements::parse_version;
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
fn an_owned_apiservice_needs_its_deployment_in_the_strategy() {
    let mut world = exposed_world((CsvPhase::Pending, CsvReason::RequirementsUnknown));
    let decision = world.decide();
    let owned = decision
        .status
        .as_ref()
        .and_then(|s| s.requirement_status.as_deref().cloned())
        .unwrap_or_default()
        .into_iter()
        .find(|r| r.kind == "APIService")
        .expect("owned APIService entry");
    assert_eq!((owned.name.as_str(), owned.status), ("v1.example.com", StatusReason::DeploymentFound));
    let mut value = serde_json::to_value(&world.csv).expect("json");
    value["spec"]["apiservicedefinitions"]["owned"][0]["deploymentName"] = serde_json::json!("nope");
    world.csv = serde_json::from_value(value).expect("csv");
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Pending, CsvReason::RequirementsNotMet));
    let owned = decision.status.and_then(|s| s.requirement_status).unwrap_or_default();
    assert!(owned.iter().any(|r| r.kind == "APIService" && r.status == StatusReason::DeploymentNotFound), "{owned:?}");
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

#[test]
fn a_lost_apiservice_fails_the_succeeded_csv_then_is_reinstalled() {
    let mut world = with_exposure_installed(exposed_world((CsvPhase::Succeeded, CsvReason::InstallSucceeded)), true);
    assert_eq!(phase_reason(&world.decide()), (CsvPhase::Succeeded, CsvReason::InstallSucceeded));
    world.api_services.clear();
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Failed, CsvReason::ApiServiceResourceIssue));
    assert_eq!(decision.status.as_ref().and_then(|s| s.message.as_deref()), Some("APIService v1.example.com not found"));

    // Failed with it still missing: Pending to reinstall, with upstream's reason.
    world.csv.status = decision.status.clone();
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Pending, CsvReason::ApiServiceResourcesNeedReinstall));
    world.csv.status = decision.status.clone();
    assert_eq!(phase_reason(&world.decide()), (CsvPhase::Installing, CsvReason::InstallSucceeded));

    // Taken by another operator meanwhile: stays Failed, nothing reinstalled over it.
    let mut taken = with_exposure_installed(exposed_world((CsvPhase::Succeeded, CsvReason::InstallSucceeded)), true);
    if let Some(api) = taken.api_services.get_mut("v1.example.com") {
        api.owner = csv_owner("backup-operator.v1.0.0");
    }
    let decision = taken.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Failed, CsvReason::ApiServiceResourceIssue));
    taken.csv.status = decision.status.clone();
    let again = taken.decide();
    assert_eq!(phase_reason(&again), (CsvPhase::Failed, CsvReason::ApiServiceResourceIssue));
    assert!(!again.actions.iter().any(|a| matches!(a, CsvAction::ApplyApiService(_))));
}

#[test]
fn only_live_owners_outside_the_replacement_chain_make_an_account_foreign() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use super::requirements::foreign_owners;
    let owner = |name: &str, uid: &str| OwnerReference {
        api_version: "operators.coreos.com/v1alpha1".into(),
        kind: "ClusterServiceVersion".into(),
        name: name.into(),
        uid: uid.into(),
        ..Default::default()
    };
    let mut other = etcd();
    other.metadata.name = Some("backup-operator.v1.0.0".into());
    other.metadata.uid = Some("uid-backup".into());
    let mut next = etcd();
    next.metadata.name = Some("etcdoperator.v0.9.5".into());
    next.metadata.uid = Some("uid-next".into());
    next.spec.replaces = Some("etcdoperator.v0.9.4".into());
    let me = etcd();
    let peers = [&other, &next];
    let chain = super::decide::replacement_chain_of(&me, &peers);
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

/// A copy is compared through its hash annotations, so the cache can keep it without its spec:
/// a trimmed copy of the same original is current, one of a changed original or status is not.
#[test]
fn a_copy_trimmed_in_the_cache_is_still_known_to_be_current() {
    use super::decide::{copy_is_current, copy_of, trim_copy};
    let mut original = with_phase(etcd(), CsvPhase::Succeeded, CsvReason::InstallSucceeded);
    original.metadata.annotations.get_or_insert_with(Default::default).insert("alm-examples".into(), "[{}]".into());
    let status = original.status.clone().unwrap_or_default();
    let wanted = copy_of(&original, "team-a", &status);
    assert!(wanted.annotations().contains_key(keys::COPY_HASH_SPEC_ANNOTATION));
    assert!(wanted.annotations().contains_key(keys::COPY_HASH_STATUS_ANNOTATION));
    assert_eq!(wanted.spec, original.spec, "the copy written carries the full spec");

    let mut cached = wanted.clone();
    trim_copy(&mut cached);
    assert_eq!(cached.spec, Default::default());
    assert!(!cached.annotations().contains_key("alm-examples"));
    assert!(copy_is_current(&cached, &wanted));

    let mut changed = original.clone();
    changed.spec.description = Some("a new description".into());
    assert!(!copy_is_current(&cached, &copy_of(&changed, "team-a", &status)));
    let failed = set_phase(&status, CsvPhase::Failed, CsvReason::InstallCheckFailed, "install failed", now());
    assert!(!copy_is_current(&cached, &copy_of(&original, "team-a", &failed)));

    // An original is never trimmed.
    let mut kept = original.clone();
    trim_copy(&mut kept);
    assert_eq!(kept, original);
}

/// The cache keeps an original CSV without what only people read; a copy decided from that is
/// written with those fields from the full original, and its hashes stay those of the decision.
#[test]
fn a_trimmed_original_still_yields_complete_copies() {
    use super::decide::{copy_is_current, copy_of, trim_cached_csv, with_full_content};
    let mut full = with_phase(etcd(), CsvPhase::Succeeded, CsvReason::InstallSucceeded);
    full.spec.description = Some("etcd is a distributed key value store".into());
    full.metadata.annotations.get_or_insert_with(Default::default).insert(keys::ALM_EXAMPLES_ANNOTATION.into(), "[{}]".into());
    let mut cached = full.clone();
    trim_cached_csv(&mut cached);
    assert_eq!(cached.spec.description, None);
    assert_eq!(cached.spec.icon, None);
    assert!(!cached.annotations().contains_key(keys::ALM_EXAMPLES_ANNOTATION));
    assert_eq!(cached.spec.install, full.spec.install, "what reconciles read is kept");

    let status = full.status.clone().unwrap_or_default();
    let decided = copy_of(&cached, "team-a", &status);
    let written = with_full_content(&decided, &full);
    assert_eq!(written.spec, full.spec);
    assert_eq!(written.annotations().get(keys::ALM_EXAMPLES_ANNOTATION).map(String::as_str), Some("[{}]"));
    assert_eq!(
        written.annotations().get(keys::COPY_HASH_SPEC_ANNOTATION),
        decided.annotations().get(keys::COPY_HASH_SPEC_ANNOTATION)
    );
    // Next pass: the written copy, as the cache keeps it, is current for the same decision.
    let mut cached_copy = written.clone();
    trim_cached_csv(&mut cached_copy);
    assert!(copy_is_current(&cached_copy, &copy_of(&cached, "team-a", &status)));
}

/// Every namespace's CSV of one operator carries the same install strategy: the cache holds
/// it once, and a CSV with another strategy keeps its own.
#[test]
fn cached_csvs_share_equal_install_strategies() {
    use super::decide::trim_cached_csv;
    let read = |namespace: &str| {
        // As the watch hands them over: each decoded on its own.
        let mut csv = etcd();
        csv.metadata.namespace = Some(namespace.into());
        csv.status = Some(olm_api::v1alpha1::ClusterServiceVersionStatus {
            requirement_status: Some(std::sync::Arc::new(vec![olm_api::v1alpha1::RequirementStatus {
                group: "".into(),
                version: "v1".into(),
                kind: "ServiceAccount".into(),
                name: "etcd-operator".into(),
                status: olm_api::v1alpha1::StatusReason::Present,
                message: "".into(),
                uuid: None,
                dependents: None,
            }])),
            ..Default::default()
        });
        let mut decoded: ClusterServiceVersion = serde_json::from_value(serde_json::to_value(&csv).unwrap()).unwrap();
        trim_cached_csv(&mut decoded);
        decoded
    };
    let (a, b) = (read("team-a"), read("team-b"));
    assert!(std::sync::Arc::ptr_eq(&a.spec.install, &b.spec.install));
    let (ra, rb) = (a.status.as_ref().and_then(|s| s.requirement_status.as_ref()), b.status.as_ref().and_then(|s| s.requirement_status.as_ref()));
    assert!(std::sync::Arc::ptr_eq(ra.expect("etcd() has requirement status"), rb.expect("etcd() has requirement status")));
    assert_eq!(a.spec.install, etcd().spec.install);

    let mut other = etcd();
    std::sync::Arc::make_mut(&mut other.spec.install).strategy = "helm".into();
    let mut other: ClusterServiceVersion = serde_json::from_value(serde_json::to_value(&other).unwrap()).unwrap();
    trim_cached_csv(&mut other);
    assert!(!std::sync::Arc::ptr_eq(&a.spec.install, &other.spec.install));
    assert_eq!(other.spec.install.strategy, "helm");
}

mod generated_rbac_grants {
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
