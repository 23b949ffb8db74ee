//! Phase-machine tests on `decide`, with the real etcd 0.9.4 CSV as fixture (no cluster): the
//! world builder and helpers every topic shares are here, the tests by topic in the submodules.

mod condition;
mod conversion;
mod copies;
mod generated_rbac_grants;
mod groups;
mod install;
mod requirements;
mod upgrade;
mod webhooks;

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
const ETCD_CSV: &str = include_str!("../../../testdata/etcd-0.9.4/etcdoperator.v0.9.4.clusterserviceversion.yaml");
const ETCD_CLUSTERWIDE_CSV: &str =
    include_str!("../../../testdata/etcd-0.9.4-clusterwide/etcdoperator.v0.9.4-clusterwide.clusterserviceversion.yaml");

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
    // A group naming its targets says so in its spec too; one for all namespaces names none.
    let named = targets.iter().all(|t| !t.is_empty());
    let spec = OperatorGroupSpec {
        target_namespaces: named.then(|| targets.iter().map(|t| (*t).to_owned()).collect()),
        ..Default::default()
    };
    let mut og = OperatorGroup::new(name, spec);
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
    inherited_service_accounts: BTreeMap<String, Vec<String>>,
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
            inherited_service_accounts: BTreeMap::new(),
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
                inherited_service_accounts: &self.inherited_service_accounts,
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

fn operator_rbac() -> crate::csv::decide::OwnedRbac {
    use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
    let meta = |name: &str| k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        name: Some(name.into()),
        namespace: Some(NS.into()),
        ..Default::default()
    };
    crate::csv::decide::OwnedRbac {
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

fn pod_of(deployment: &Deployment) -> serde_json::Value {
    serde_json::to_value(deployment.spec.as_ref().map(|s| &s.template)).expect("json")
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
    let cert = crate::csv::certs::generate("etcd-operator-service", NS, now()).expect("certificate");
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
        crate::csv::decide::ExistingApiService {
            available,
            ca_bundle: Some(ca.clone()),
            owner: crate::csv::decide::OwnerLabels::of(&crate::metadata::owner_labels(&world.csv)),
        },
    )]);
    for (generate_name, kind) in [
        ("vbackup.example.com", "ValidatingWebhookConfiguration"),
        ("mbackup.example.com", "MutatingWebhookConfiguration"),
    ] {
        world.webhooks.insert(
            generate_name.to_owned(),
            crate::csv::decide::ExistingWebhook {
                kind: kind.to_owned(),
                name: format!("{generate_name}-abcde"),
                ca_bundle: Some(ca.clone()),
            },
        );
    }
    world.with_installed_deployments()
}

fn csv_owner(name: &str) -> crate::csv::decide::OwnerLabels {
    crate::csv::decide::OwnerLabels {
        kind: "ClusterServiceVersion".into(),
        namespace: NS.into(),
        name: name.into(),
    }
}
