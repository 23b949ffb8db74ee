//! The ClusterServiceVersion phase machine, as a pure function of what was observed and `now`.
//!
//! None → Pending → InstallReady → Installing → Succeeded, plus Failed, Replacing and Deleting,
//! with upstream's phase and reason strings. The OperatorGroup and install-mode checks run first
//! on every pass, as upstream does; copies into target namespaces are decided last.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;
use olm_api::keys;
use olm_api::v1::operator_group::{OperatorGroup, UpgradeStrategy};
use olm_api::v2::{OperatorCondition, OperatorConditionSpec};
use olm_api::v1alpha1::subscription::SubscriptionConfig;
use olm_api::v1alpha1::cluster_service_version::{
    CONDITIONS_LENGTH_LIMIT, ClusterServiceVersion, ClusterServiceVersionCondition, ClusterServiceVersionStatus,
    CsvPhase, CsvReason, INSTALL_STRATEGY_DEPLOYMENT, InstallModeType, WebhookAdmissionType,
};

use olm_runtime::{Decision, EventNote};

use super::certs::{self, ServingCert, WebhookConfig, cert_deployments};
use super::deployment::{DeploymentProblem, check_drift, check_health, desired_deployment};
use super::requirements::{self, CrdState, PermissionCheck};
use crate::metadata::{api_label_changes, is_copiable, member_annotations, owned_by};

/// How long Installing may wait for healthy components before failing (upstream: 5 min).
pub const INSTALL_TIMEOUT: Duration = Duration::from_secs(300);
/// Re-check periods when nothing we watch changes.
pub const REQUEUE_WAITING: Duration = Duration::from_secs(10);
/// Re-check period of a CSV whose requirements are not met (RBAC is not watched).
pub const REQUEUE_REQUIREMENTS: Duration = Duration::from_secs(15);
/// Minimum time a CSV stays Failed/InstallComponentFailed before it is reinstalled.
pub const REINSTALL_PAUSE: Duration = Duration::from_secs(30);
/// Periodic resync of a settled CSV (APIServices, webhook configurations and CRDs are
/// watched, so their changes do not wait for it).
pub const REQUEUE_RESYNC: Duration = Duration::from_secs(300);

/// Everything the CSV controller observed for one (non-copied) CSV.
#[derive(Debug)]
pub struct Observed<'a> {
    /// The CSV.
    pub csv: &'a ClusterServiceVersion,
    /// OperatorGroups in its namespace.
    pub groups: Vec<&'a OperatorGroup>,
    /// OperatorGroups of the other namespaces (for provided-API conflicts).
    pub other_groups: Vec<&'a OperatorGroup>,
    /// CRDs the CSV owns or requires, by name (absent = not found).
    pub crds: &'a BTreeMap<String, CrdState>,
    /// ServiceAccounts that exist in the namespace.
    pub service_accounts: &'a BTreeSet<String>,
    /// ServiceAccounts owned (ownerReferences) by other ClusterServiceVersions and not by this
    /// one, with the names of those owners.
    pub foreign_service_accounts: &'a BTreeMap<String, Vec<String>>,
    /// The API server's `gitVersion`, read when the CSV sets `minKubeVersion`.
    pub kube_version: Option<&'a str>,
    /// Kinds served per group/version named by `nativeAPIs` and required APIServices.
    pub served_kinds: &'a BTreeMap<String, BTreeSet<String>>,
    /// Required APIServices that exist, by name, with whether they are Available.
    pub required_api_services: &'a BTreeMap<String, bool>,
    /// Permission checks, when they were run (see [`needs_permission_check`]).
    pub permissions: Option<&'a [PermissionCheck]>,
    /// Deployments in the namespace by name (those the strategy names or labelled as ours).
    pub deployments: &'a BTreeMap<String, Deployment>,
    /// The other non-copied CSVs of the namespace.
    pub peers: Vec<&'a ClusterServiceVersion>,
    /// Existing copies of this CSV in other namespaces.
    pub copies: Vec<&'a ClusterServiceVersion>,
    /// Namespaces holding a CSV of the same name that is not our copy (an operator installed
    /// there, or another namespace's copy): never overwritten with a copy.
    pub taken_namespaces: BTreeSet<String>,
    /// CRD uids by name (owners of the per-API ClusterRoles).
    pub crd_uids: &'a BTreeMap<String, String>,
    /// Existing OLM-managed ClusterRoles by name.
    pub cluster_roles: &'a BTreeMap<String, ClusterRole>,
    /// Roles and RoleBindings in the CSV's namespace labelled as owned by it (created by the
    /// InstallPlan); read only when the group targets other namespaces.
    pub owned_rbac: &'a OwnedRbac,
    /// The CSV's OperatorCondition, if it exists.
    pub operator_condition: Option<&'a OperatorCondition>,
    /// The Role and RoleBinding named after the CSV's OperatorCondition, if they exist.
    pub condition_rbac: (Option<&'a Role>, Option<&'a RoleBinding>),
    /// The OperatorCondition of the CSV this one replaces, if any.
    pub replaced_condition: Option<&'a OperatorCondition>,
    /// Namespaces that exist and are not terminating.
    pub active_namespaces: &'a [String],
    /// OLMConfig `spec.features.disableCopiedCSVs`.
    pub copied_csvs_disabled: bool,
    /// `spec.config` of the Subscription that installed this CSV, applied to its Deployments.
    pub subscription_config: Option<&'a SubscriptionConfig>,
    /// Serving certificates by Deployment name, for the Deployments behind owned APIServices
    /// and webhooks: the stored ones, or fresh ones when missing or due for rotation.
    pub serving_certs: &'a BTreeMap<String, ServingCert>,
    /// Owned APIServices that exist, by name: whether they are Available, and their caBundle.
    pub api_services: &'a BTreeMap<String, ExistingApiService>,
    /// Webhook configurations labelled with this CSV as owner, by description generateName.
    pub webhooks: &'a BTreeMap<String, ExistingWebhook>,
}

/// An APIService the CSV owns (by its description), as found on the cluster, whoever made it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExistingApiService {
    /// Its `Available` condition is True.
    pub available: bool,
    /// `spec.caBundle`.
    pub ca_bundle: Option<Vec<u8>>,
    /// Its owner labels (empty strings where absent).
    pub owner: OwnerLabels,
}

/// The `olm.owner.kind`, `olm.owner.namespace` and `olm.owner` labels of an object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OwnerLabels {
    /// `olm.owner.kind`.
    pub kind: String,
    /// `olm.owner.namespace`.
    pub namespace: String,
    /// `olm.owner`.
    pub name: String,
}

impl OwnerLabels {
    /// The owner labels of `labels`.
    pub fn of(labels: &BTreeMap<String, String>) -> OwnerLabels {
        let get = |key: &str| labels.get(key).cloned().unwrap_or_default();
        OwnerLabels {
            kind: get(keys::OWNER_KIND_LABEL),
            namespace: get(keys::OWNER_NAMESPACE_LABEL),
            name: get(keys::OWNER_LABEL),
        }
    }

    /// Whether they name `csv`.
    pub fn is(&self, csv: &ClusterServiceVersion) -> bool {
        self.kind == "ClusterServiceVersion"
            && csv.namespace().as_deref() == Some(self.namespace.as_str())
            && self.name == csv.name_any()
    }
}

/// A webhook configuration generated for one description, as found on the cluster.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExistingWebhook {
    /// `ValidatingWebhookConfiguration` or `MutatingWebhookConfiguration`.
    pub kind: String,
    /// Its generated name.
    pub name: String,
    /// The caBundle of its first webhook.
    pub ca_bundle: Option<Vec<u8>>,
}

/// The operator's own namespaced RBAC, as created for it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OwnedRbac {
    /// Roles labelled with the CSV as owner.
    pub roles: Vec<Role>,
    /// RoleBindings labelled with the CSV as owner.
    pub bindings: Vec<RoleBinding>,
}

/// Effects of a CSV decision.
#[derive(Clone, Debug, PartialEq)]
pub enum CsvAction {
    /// Merge annotations into the CSV (`None` removes a key).
    Annotate(BTreeMap<String, Option<String>>),
    /// Merge labels into the CSV (`None` removes a key): the `olm.api.<hash>` index.
    Label(BTreeMap<String, Option<String>>),
    /// Server-side apply a Deployment.
    ApplyDeployment(Box<Deployment>),
    /// Delete a Deployment this CSV owns that its strategy no longer lists.
    DeleteDeployment(String),
    /// Create or update the CSV's OperatorCondition (its deployments and service accounts).
    ApplyOperatorCondition(Box<OperatorCondition>),
    /// Write the OperatorCondition's status: the conditions its spec reports, stamped with
    /// the generation they were observed at.
    ApplyOperatorConditionStatus(Box<olm_api::v2::OperatorConditionStatus>),
    /// Create or update a Role lifted to a ClusterRole for an all-namespaces group.
    ApplyClusterRole(Box<ClusterRole>),
    /// Create or update a provided API's ClusterRole (`<crd>-<version>-admin|edit|view|crdview`):
    /// nothing in the pass needs it, so it is written after the status (a CSV turns Succeeded
    /// without waiting for a dozen role writes).
    ApplyApiRole(Box<ClusterRole>),
    /// Create or update a ClusterRoleBinding lifted from a RoleBinding (all-namespaces group).
    ApplyClusterRoleBinding(Box<ClusterRoleBinding>),
    /// Create or update a Role copied into a target namespace (owned by the copied CSV there).
    ApplyRole(Box<Role>),
    /// Create or update a RoleBinding copied into a target namespace.
    ApplyRoleBinding(Box<RoleBinding>),
    /// Delete the CSV itself (phase Deleting, or a copy whose original is gone).
    DeleteSelf,
    /// Add the `operators.coreos.com/csv-cleanup` finalizer; `current` is the finalizer list
    /// observed (the patch tests it, so a concurrent change is never overwritten).
    AddFinalizer {
        /// `metadata.finalizers` as observed.
        current: Option<Vec<String>>,
        /// `metadata.resourceVersion` as observed (tested when there is no list yet).
        resource_version: Option<String>,
    },
    /// Delete the cluster-scoped objects labelled with the CSV as owner (ClusterRoles and
    /// ClusterRoleBindings: the InstallPlan's and the ones lifted for an all-namespaces group).
    DeleteOwnedClusterObjects,
    /// Remove the cleanup finalizer at `index` (tested to still be there).
    RemoveFinalizer {
        /// Position in `metadata.finalizers`.
        index: usize,
    },
    /// Server-side apply the TLS Secret of a Deployment's serving certificate.
    ApplySecret(Box<k8s_openapi::api::core::v1::Secret>),
    /// Server-side apply the Service in front of a Deployment that serves an APIService or a webhook.
    ApplyService(Box<k8s_openapi::api::core::v1::Service>),
    /// Server-side apply an owned APIService.
    ApplyApiService(Box<k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService>),
    /// Create (generateName) or update (`existing`) a webhook configuration.
    ApplyWebhook {
        /// The name of the configuration generated for this description before, if any.
        existing: Option<String>,
        /// The configuration.
        config: Box<WebhookConfig>,
    },
    /// Point a CRD listed by a conversion webhook description at the operator's Service.
    ApplyCrdConversion {
        /// The CRD's name.
        crd: String,
        /// Its wanted `spec.conversion`.
        conversion: Box<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceConversion>,
    },
    /// Set a CRD's conversion back to strategy None (its webhook's operator is going away).
    ResetCrdConversion {
        /// The CRD's name.
        crd: String,
    },
    /// Delete a webhook configuration generated for a description the CSV no longer declares.
    DeleteWebhook {
        /// `ValidatingWebhookConfiguration` or `MutatingWebhookConfiguration`.
        kind: String,
        /// Its name.
        name: String,
    },
    /// Create or update a copy in another namespace (object and status).
    ApplyCopy(Box<ClusterServiceVersion>),
    /// Delete the copy in a namespace that is no longer a target.
    DeleteCopy {
        /// Namespace of the copy.
        namespace: String,
    },
}

impl CsvAction {
    /// The action's name, for logs.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Annotate(_) => "Annotate",
            Self::Label(_) => "Label",
            Self::ApplyDeployment(_) => "ApplyDeployment",
            Self::DeleteDeployment(_) => "DeleteDeployment",
            Self::ApplyOperatorCondition(_) => "ApplyOperatorCondition",
            Self::ApplyOperatorConditionStatus(_) => "ApplyOperatorConditionStatus",
            Self::ApplyClusterRole(_) => "ApplyClusterRole",
            Self::ApplyApiRole(_) => "ApplyApiRole",
            Self::ApplyClusterRoleBinding(_) => "ApplyClusterRoleBinding",
            Self::ApplyRole(_) => "ApplyRole",
            Self::ApplyRoleBinding(_) => "ApplyRoleBinding",
            Self::DeleteSelf => "DeleteSelf",
            Self::AddFinalizer { .. } => "AddFinalizer",
            Self::DeleteOwnedClusterObjects => "DeleteOwnedClusterObjects",
            Self::RemoveFinalizer { .. } => "RemoveFinalizer",
            Self::ApplySecret(_) => "ApplySecret",
            Self::ApplyService(_) => "ApplyService",
            Self::ApplyApiService(_) => "ApplyApiService",
            Self::ApplyWebhook { .. } => "ApplyWebhook",
            Self::ApplyCrdConversion { .. } => "ApplyCrdConversion",
            Self::ResetCrdConversion { .. } => "ResetCrdConversion",
            Self::DeleteWebhook { .. } => "DeleteWebhook",
            Self::ApplyCopy(_) => "ApplyCopy",
            Self::DeleteCopy { .. } => "DeleteCopy",
        }
    }
}

/// The decision for one CSV.
pub type CsvDecision = Decision<CsvAction, ClusterServiceVersionStatus>;

fn facts<'a>(observed: &Observed<'a>) -> requirements::Facts<'a> {
    requirements::Facts {
        crds: observed.crds,
        service_accounts: observed.service_accounts,
        foreign_service_accounts: observed.foreign_service_accounts,
        kube_version: observed.kube_version,
        served_kinds: observed.served_kinds,
        required_api_services: observed.required_api_services,
    }
}

/// Whether the observe step should run permission checks (they cost API calls): only where the
/// phase machine reads them.
pub fn needs_permission_check(csv: &ClusterServiceVersion) -> bool {
    matches!(
        csv.phase(),
        None | Some(CsvPhase::None | CsvPhase::Pending | CsvPhase::Failed)
    )
}

/// The status after moving to `phase`/`reason` with `message` at `now`: the transition time
/// moves only when the phase changes; a history entry is added when phase or reason change.
pub fn set_phase(
    previous: &ClusterServiceVersionStatus,
    phase: CsvPhase,
    reason: CsvReason,
    message: impl Into<String>,
    now: Timestamp,
) -> ClusterServiceVersionStatus {
    let message = message.into();
    let mut status = previous.clone();
    let phase_changed = previous.phase.as_ref() != Some(&phase);
    let reason_changed = previous.reason.as_ref() != Some(&reason);
    let message_changed = previous.message.as_deref() != Some(message.as_str());
    if phase_changed || previous.last_transition_time.is_none() {
        status.last_transition_time = Some(Time(now));
    }
    if phase_changed || reason_changed || message_changed || previous.last_update_time.is_none() {
        status.last_update_time = Some(Time(now));
    }
    if phase_changed || reason_changed {
        let mut history = status.conditions.take().unwrap_or_default();
        history.push(ClusterServiceVersionCondition {
            phase: Some(phase.clone()),
            message: Some(message.clone()),
            reason: Some(reason.clone()),
            last_update_time: Some(Time(now)),
            last_transition_time: Some(Time(now)),
        });
        let excess = history.len().saturating_sub(CONDITIONS_LENGTH_LIMIT);
        history.drain(..excess);
        status.conditions = Some(history);
    }
    status.phase = Some(phase);
    status.reason = Some(reason);
    status.message = Some(message);
    status
}

/// Build a decision moving to `phase`/`reason`, with an Event when phase or reason changed.
fn transition(
    previous: &ClusterServiceVersionStatus,
    phase: CsvPhase,
    reason: CsvReason,
    message: impl Into<String>,
    now: Timestamp,
) -> CsvDecision {
    let status = set_phase(previous, phase.clone(), reason.clone(), message, now);
    let changed = previous.phase.as_ref() != Some(&phase) || previous.reason.as_ref() != Some(&reason);
    let mut decision = CsvDecision::status(status.clone());
    if changed {
        let message = status.message.clone().unwrap_or_default();
        let note = if phase == CsvPhase::Failed {
            EventNote::warning(reason.as_str(), "Transition", message)
        } else {
            EventNote::normal(reason.as_str(), "Transition", message)
        };
        decision = decision.event(note);
    }
    decision
}

/// OG-related reasons: a Failed CSV with one of them goes back to Pending once the problem is gone.
fn is_operator_group_reason(reason: Option<&CsvReason>) -> bool {
    matches!(
        reason,
        Some(
            CsvReason::NoOperatorGroup
                | CsvReason::TooManyOperatorGroups
                | CsvReason::UnsupportedOperatorGroup
                | CsvReason::NoTargetNamespaces
                | CsvReason::InvalidInstallModes
                | CsvReason::InterOperatorGroupOwnerConflict
                | CsvReason::CannotModifyStaticOperatorGroupProvidedApis
        )
    )
}

/// Whether a group with `spec.staticProvidedAPIs` refuses this CSV: upstream fails the CSV
/// when its APIs would have to be added to the group's fixed `olm.providedAPIs` (not all
/// listed, no intersecting group provides them) or removed from it (all listed, but an
/// intersecting group provides some too).
fn static_group_refuses(observed: &Observed<'_>, group: &OperatorGroup, targets: &[String]) -> bool {
    if group.spec.static_provided_apis != Some(true) {
        return false;
    }
    let mine = crate::metadata::provided_apis(observed.csv);
    if mine.is_empty() {
        return false;
    }
    let provided: BTreeSet<&str> = group
        .annotations()
        .get(keys::PROVIDED_APIS_ANNOTATION)
        .map(|v| v.split(',').map(str::trim).filter(|s| !s.is_empty()).collect())
        .unwrap_or_default();
    let listed = mine.iter().all(|api| provided.contains(api.as_str()));
    let intersecting = inter_group_conflict(observed, targets).is_some();
    // (listed, intersecting): (false, false) would add, (true, true) would remove;
    // (false, true) is an InterOperatorGroupOwnerConflict, (true, false) is fine.
    listed == intersecting
}

/// Another OperatorGroup whose targets intersect ours already provides one of our APIs.
fn inter_group_conflict(observed: &Observed<'_>, targets: &[String]) -> Option<String> {
    let mine = crate::metadata::provided_apis(observed.csv);
    if mine.is_empty() {
        return None;
    }
    let all = |t: &[String]| t == [String::new()];
    for other in &observed.other_groups {
        let Some(other_targets) = other.status.as_ref().and_then(|s| s.namespaces.as_deref()) else {
            continue;
        };
        let intersects = all(targets) || all(other_targets) || targets.iter().any(|t| other_targets.contains(t));
        if !intersects {
            continue;
        }
        let provided: BTreeSet<&str> = other
            .annotations()
            .get(keys::PROVIDED_APIS_ANNOTATION)
            .map(|v| v.split(',').filter(|s| !s.is_empty()).collect())
            .unwrap_or_default();
        let clash: Vec<&str> = mine.iter().map(String::as_str).filter(|api| provided.contains(api)).collect();
        if !clash.is_empty() {
            return Some(format!(
                "provided API(s) {} are already provided by OperatorGroup {}/{}, whose target namespaces intersect this group's",
                clash.join(", "),
                other.namespace().unwrap_or_default(),
                other.name_any()
            ));
        }
    }
    None
}

/// Upstream's InstallModeSet.Supports: can an operator in `own` watch `targets`?
pub fn install_modes_support(csv: &ClusterServiceVersion, own: &str, targets: &[String]) -> Result<(), (CsvReason, String)> {
    let mut supported = BTreeMap::new();
    for mode in csv.spec.install_modes() {
        if supported.insert(mode.type_, mode.supported).is_some() {
            return Err((
                CsvReason::InvalidInstallModes,
                format!("install mode {} is listed more than once in spec.installModes", mode.type_.as_str()),
            ));
        }
    }
    let supports = |t: InstallModeType| supported.get(&t).copied().unwrap_or(false);
    let unsupported = |t: InstallModeType, what: String| {
        Err((
            CsvReason::UnsupportedOperatorGroup,
            format!("{} InstallModeType not supported, cannot configure to watch {what}", t.as_str()),
        ))
    };
    match targets {
        [] => Err((
            CsvReason::UnsupportedOperatorGroup,
            "operatorgroup has invalid selected namespaces, cannot configure to watch zero namespaces".to_owned(),
        )),
        [only] if only.is_empty() => {
            if supports(InstallModeType::AllNamespaces) {
                Ok(())
            } else {
                unsupported(InstallModeType::AllNamespaces, "all namespaces".into())
            }
        }
        [only] if only == own => {
            if supports(InstallModeType::OwnNamespace) {
                Ok(())
            } else {
                unsupported(InstallModeType::OwnNamespace, "own namespace".into())
            }
        }
        [_] => {
            if supports(InstallModeType::SingleNamespace) {
                Ok(())
            } else {
                unsupported(InstallModeType::SingleNamespace, "one namespace".into())
            }
        }
        many => {
            if many.iter().any(String::is_empty) {
                return Err((
                    CsvReason::UnsupportedOperatorGroup,
                    "operatorgroup has invalid selected namespaces, NamespaceAll found when |selected namespaces| > 1".to_owned(),
                ));
            }
            if !supports(InstallModeType::MultiNamespace) {
                return unsupported(InstallModeType::MultiNamespace, format!("{} namespaces", many.len()));
            }
            if many.iter().any(|t| t == own) && !supports(InstallModeType::OwnNamespace) {
                return unsupported(InstallModeType::OwnNamespace, "own namespace".into());
            }
            Ok(())
        }
    }
}

/// Problems with `spec.install` that no retry fixes.
fn invalid_strategy(csv: &ClusterServiceVersion) -> Option<String> {
    if csv.spec.install.strategy != INSTALL_STRATEGY_DEPLOYMENT {
        return Some(format!(
            "spec.install.strategy is {:?}; the only supported strategy is \"deployment\"",
            csv.spec.install.strategy
        ));
    }
    let Some(details) = csv.spec.install.spec.as_ref() else {
        return Some("spec.install.spec is missing: it must list the deployments to create".into());
    };
    let mut names = BTreeSet::new();
    for (index, deployment) in details.deployments.iter().enumerate() {
        if deployment.name.is_empty() {
            return Some(format!("spec.install.spec.deployments[{index}].name is empty"));
        }
        if !names.insert(deployment.name.as_str()) {
            return Some(format!(
                "spec.install.spec.deployments[{index}].name {:?} is used twice",
                deployment.name
            ));
        }
        if deployment.spec.template.spec.is_none() {
            return Some(format!(
                "spec.install.spec.deployments[{index}] ({}) has no spec.template.spec",
                deployment.name
            ));
        }
    }
    None
}

/// The Deployments the strategy asks for, with the Subscription's `spec.config` applied and
/// the serving certificates mounted.
pub fn desired_deployments(
    csv: &ClusterServiceVersion,
    config: Option<&SubscriptionConfig>,
    certs: &BTreeMap<String, ServingCert>,
) -> Vec<Deployment> {
    let uses = cert_deployments(csv);
    csv.spec
        .install
        .spec
        .iter()
        .flat_map(|details| details.deployments.iter())
        .map(|entry| {
            let mount = uses.get(&entry.name).copied().zip(certs.get(&entry.name));
            desired_deployment(csv, entry, config, mount)
        })
        .collect()
}

/// The objects that expose the operator's APIServices and webhooks, in apply order: Secrets
/// and Services first (the Deployments mount and sit behind them), then APIServices and
/// webhook configurations (which send traffic to them).
fn exposure_actions(
    observed: &Observed<'_>,
    namespace_selector: Option<&LabelSelector>,
) -> (Vec<CsvAction>, Vec<CsvAction>) {
    let csv = observed.csv;
    let mut before = Vec::new();
    let mut after = Vec::new();
    let deployments: BTreeMap<&str, &k8s_openapi::api::apps::v1::DeploymentSpec> = csv
        .spec
        .install
        .spec
        .iter()
        .flat_map(|s| s.deployments.iter().map(|d| (d.name.as_str(), &*d.spec)))
        .collect();
    for name in cert_deployments(csv).keys() {
        let (Some(cert), Some(spec)) = (observed.serving_certs.get(name), deployments.get(name.as_str())) else {
            continue;
        };
        before.push(CsvAction::ApplySecret(Box::new(certs::render_secret(csv, name, cert))));
        before.push(CsvAction::ApplyService(Box::new(certs::render_service(csv, name, spec))));
        let (role, binding, delegator, reader) = certs::render_cert_rbac(csv, name, spec);
        before.push(CsvAction::ApplyRole(Box::new(role)));
        before.push(CsvAction::ApplyRoleBinding(Box::new(binding)));
        before.push(CsvAction::ApplyClusterRoleBinding(Box::new(delegator)));
        before.push(CsvAction::ApplyRoleBinding(Box::new(reader)));
    }
    // Configurations of descriptions the CSV no longer has (or whose type changed) go.
    for (generate_name, existing) in observed.webhooks {
        let still_declared = csv.spec.webhooks().iter().any(|hook| {
            hook.generate_name == *generate_name
                && match hook.type_ {
                    WebhookAdmissionType::ValidatingAdmissionWebhook => existing.kind == "ValidatingWebhookConfiguration",
                    WebhookAdmissionType::MutatingAdmissionWebhook => existing.kind == "MutatingWebhookConfiguration",
                    _ => false,
                }
        });
        if !still_declared {
            after.push(CsvAction::DeleteWebhook {
                kind: existing.kind.clone(),
                name: existing.name.clone(),
            });
        }
    }
    let annotations = observed.subscription_config.and_then(|c| c.annotations.as_ref());
    for api in csv.spec.owned_api_services() {
        let Some(cert) = api.deployment_name.as_ref().and_then(|d| observed.serving_certs.get(d)) else {
            continue;
        };
        after.push(CsvAction::ApplyApiService(Box::new(certs::render_api_service(csv, api, cert, annotations))));
    }
    for hook in csv.spec.webhooks() {
        let Some(cert) = hook.deployment_name.as_ref().and_then(|d| observed.serving_certs.get(d)) else {
            continue;
        };
        if hook.type_ == WebhookAdmissionType::ConversionWebhook {
            let conversion = certs::render_conversion(csv, hook, cert);
            for crd in hook.conversion_crds.iter().flatten() {
                after.push(CsvAction::ApplyCrdConversion {
                    crd: crd.clone(),
                    conversion: Box::new(conversion.clone()),
                });
            }
            continue;
        }
        if let Some(config) = certs::render_webhook(csv, hook, cert, namespace_selector.cloned()) {
            let existing = observed
                .webhooks
                .get(&hook.generate_name)
                .filter(|w| w.kind == config.kind())
                .map(|w| w.name.clone());
            after.push(CsvAction::ApplyWebhook {
                existing,
                config: Box::new(config),
            });
        }
    }
    (before, after)
}

/// Why the conversion webhooks cannot be configured (upstream's messages), if they cannot: the
/// description itself, or a listed CRD that preserves unknown fields.
fn conversion_problem(observed: &Observed<'_>) -> Option<String> {
    let csv = observed.csv;
    if let Some(problem) = certs::conversion_description_problem(csv) {
        return Some(problem);
    }
    let conversions = csv.spec.webhooks().iter().filter(|h| h.type_ == WebhookAdmissionType::ConversionWebhook);
    for crd in conversions.flat_map(|h| h.conversion_crds.iter().flatten()) {
        if observed.crds.get(crd).is_some_and(|c| c.preserve_unknown_fields) {
            return Some(format!(
                "crd.Spec.PreserveUnknownFields must be false to let API Server call webhook to do the conversion (CRD {crd})"
            ));
        }
    }
    None
}

/// An owned APIService that exists but may not be taken over, with what to do about it.
/// Upstream's rule: only one labelled as owned by a ClusterServiceVersion of this namespace that
/// is this CSV, the one it replaces, or one being replaced or deleted.
fn api_service_conflict(observed: &Observed<'_>) -> Option<String> {
    let csv = observed.csv;
    let own_ns = csv.namespace().unwrap_or_default();
    for api in csv.spec.owned_api_services() {
        let name = api.api_service_name();
        let Some(found) = observed.api_services.get(&name) else {
            continue;
        };
        let owner = &found.owner;
        if owner.kind.is_empty() || owner.namespace.is_empty() || owner.name.is_empty() {
            return Some(format!(
                "unable to adopt APIService {name}: it exists without OLM owner labels (olm.owner, olm.owner.namespace, olm.owner.kind); delete it, or label it as owned by ClusterServiceVersion {own_ns}/{}",
                csv.name_any()
            ));
        }
        if owner.kind != "ClusterServiceVersion" {
            return Some(format!(
                "unable to adopt APIService {name}: it is owned by {} {}/{}",
                owner.kind, owner.namespace, owner.name
            ));
        }
        let same_ns = owner.namespace == own_ns;
        let is_me = same_ns && owner.name == csv.name_any();
        let replaced_by_me = same_ns
            && csv.spec.replaces.as_deref() == Some(owner.name.as_str())
            && observed.peers.iter().any(|p| p.name_any() == owner.name);
        let leaving = same_ns
            && observed.peers.iter().any(|p| {
                p.name_any() == owner.name && matches!(p.phase(), Some(CsvPhase::Replacing | CsvPhase::Deleting))
            });
        if !(is_me || replaced_by_me || leaving) {
            return Some(format!(
                "unable to adopt APIService {name}: it is owned by ClusterServiceVersion {}/{}, which this CSV ({own_ns}/{}) does not replace",
                owner.namespace,
                owner.name,
                csv.name_any()
            ));
        }
    }
    None
}

/// The owned APIServices' first problem that applying them again fixes (missing, stale CA,
/// adoptable but not yet adopted) or that nothing fixes (owned by someone else), and the
/// first one that is only not Available yet.
fn api_service_problems(observed: &Observed<'_>) -> (Option<DeploymentProblem>, Option<DeploymentProblem>) {
    let csv = observed.csv;
    let mut waiting = None;
    for api in csv.spec.owned_api_services() {
        let name = api.api_service_name();
        let ca = api
            .deployment_name
            .as_ref()
            .and_then(|d| observed.serving_certs.get(d))
            .map(|c| c.ca_pem.as_bytes().to_vec());
        let broken = match observed.api_services.get(&name) {
            None => Some(DeploymentProblem::Updated(format!("APIService {name} not found"))),
            // Adoptable ones are taken over by applying them again; others are a conflict.
            Some(found) if !found.owner.is(csv) => Some(match api_service_conflict(observed) {
                Some(conflict) => DeploymentProblem::Unrecoverable(conflict),
                None => DeploymentProblem::Updated(format!("APIService {name} is to be adopted")),
            }),
            Some(found) if found.ca_bundle != ca => Some(DeploymentProblem::Updated(format!("APIService {name} has a stale caBundle"))),
            Some(found) if !found.available => {
                waiting.get_or_insert(DeploymentProblem::Waiting(format!("waiting for APIService {name} to become Available")));
                None
            }
            Some(_) => None,
        };
        if broken.is_some() {
            return (broken, None);
        }
    }
    (None, waiting)
}

/// The first problem with the owned APIServices and webhooks: missing or with a stale CA
/// (re-apply), or an APIService not Available yet (wait).
fn exposure_problem(observed: &Observed<'_>) -> Option<DeploymentProblem> {
    let csv = observed.csv;
    let ca_of = |deployment: Option<&String>| {
        deployment
            .and_then(|d| observed.serving_certs.get(d))
            .map(|c| c.ca_pem.as_bytes().to_vec())
    };
    let (broken, waiting) = api_service_problems(observed);
    if broken.is_some() {
        return broken;
    }
    for hook in csv.spec.webhooks() {
        if hook.type_ == WebhookAdmissionType::ConversionWebhook {
            let Some(cert) = hook.deployment_name.as_ref().and_then(|d| observed.serving_certs.get(d)) else {
                continue;
            };
            let want = certs::render_conversion(csv, hook, cert);
            for crd in hook.conversion_crds.iter().flatten() {
                let found = observed.crds.get(crd).and_then(|c| c.conversion.as_ref());
                if !certs::conversion_matches(found, &want) {
                    return Some(DeploymentProblem::Updated(format!(
                        "CRD {crd} does not use the conversion webhook of {} with the current CA",
                        hook.generate_name
                    )));
                }
            }
            continue;
        }
        match observed.webhooks.get(&hook.generate_name) {
            None => {
                return Some(DeploymentProblem::Updated(format!(
                    "webhook configuration for {} not found",
                    hook.generate_name
                )));
            }
            Some(found) if found.ca_bundle != ca_of(hook.deployment_name.as_ref()) => {
                return Some(DeploymentProblem::Updated(format!(
                    "webhook configuration {} has a stale caBundle",
                    found.name
                )));
            }
            Some(_) => {}
        }
    }
    waiting
}

/// The first problem of the installed strategy: drift before health.
fn strategy_problem(observed: &Observed<'_>, desired: &[Deployment]) -> Option<DeploymentProblem> {
    let drift = desired
        .iter()
        .find_map(|want| check_drift(want, observed.deployments.get(&want.name_any())).err());
    if drift.is_some() {
        return drift;
    }
    let health = desired
        .iter()
        .filter_map(|want| observed.deployments.get(&want.name_any()))
        .find_map(|actual| check_health(actual).err());
    match (health, exposure_problem(observed)) {
        (_, Some(problem)) if problem.needs_apply() => Some(problem),
        (Some(problem), _) => Some(problem),
        (None, other) => other,
    }
}

/// The CSV that `csv.spec.replaces` names, if it exists in the namespace.
fn replaced<'a>(observed: &Observed<'a>) -> Option<&'a ClusterServiceVersion> {
    let name = observed.csv.spec.replaces.as_deref()?;
    observed.peers.iter().copied().find(|p| p.name_any() == name)
}

/// The CSV whose `spec.replaces` names this one.
fn replacement<'a>(observed: &Observed<'a>) -> Option<&'a ClusterServiceVersion> {
    let me = observed.csv.name_any();
    observed
        .peers
        .iter()
        .copied()
        .find(|p| p.spec.replaces.as_deref() == Some(me.as_str()))
}

/// Names in the replacement chain through this CSV (ancestors and descendants).
fn replacement_chain(observed: &Observed<'_>) -> BTreeSet<String> {
    replacement_chain_of(observed.csv, &observed.peers)
}

/// Names in the replacement chain through `csv` (ancestors and descendants) among `peers`
/// (the other non-copied CSVs of its namespace).
pub fn replacement_chain_of(csv: &ClusterServiceVersion, peers: &[&ClusterServiceVersion]) -> BTreeSet<String> {
    let replaces: BTreeMap<String, Option<String>> = peers
        .iter()
        .copied()
        .chain(std::iter::once(csv))
        .map(|c| (c.name_any(), c.spec.replaces.clone()))
        .collect();
    let me = csv.name_any();
    let mut chain = BTreeSet::from([me.clone()]);
    let mut cursor = csv.spec.replaces.clone();
    while let Some(name) = cursor {
        if !chain.insert(name.clone()) {
            break;
        }
        cursor = replaces.get(&name).cloned().flatten();
    }
    for name in replaces.keys() {
        let mut cursor = Some(name.clone());
        let mut seen = BTreeSet::new();
        while let Some(current) = cursor {
            if current == me {
                chain.insert(name.clone());
                break;
            }
            if !seen.insert(current.clone()) {
                break;
            }
            cursor = replaces.get(&current).cloned().flatten();
        }
    }
    chain
}

/// An owned CRD that another CSV of the namespace, outside the replacement chain, also owns.
fn crd_owner_conflict(observed: &Observed<'_>) -> Option<String> {
    let chain = replacement_chain(observed);
    for crd in observed.csv.spec.owned_crds() {
        for peer in &observed.peers {
            if chain.contains(&peer.name_any()) {
                continue;
            }
            if peer.spec.owned_crds().iter().any(|c| c.name == crd.name) {
                return Some(format!(
                    "CRD {} is already owned by ClusterServiceVersion {}, which is not part of this CSV's replacement chain",
                    crd.name,
                    peer.name_any()
                ));
            }
        }
    }
    None
}

/// The copy of `csv` OLM places in `namespace`.
pub fn copy_of(csv: &ClusterServiceVersion, namespace: &str, status: &ClusterServiceVersionStatus) -> ClusterServiceVersion {
    let own_ns = csv.namespace().unwrap_or_default();
    let mut labels = csv.labels().clone();
    labels.insert(keys::COPIED_FROM_LABEL.to_owned(), own_ns.clone());
    let mut annotations = csv.annotations().clone();
    annotations.remove(keys::TARGET_NAMESPACES_ANNOTATION);
    annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    let copy_status = ClusterServiceVersionStatus {
        phase: status.phase.clone(),
        reason: Some(CsvReason::Copied),
        message: Some(format!("The operator is running in {own_ns} but is managing this namespace")),
        last_update_time: status.last_update_time.clone(),
        last_transition_time: status.last_transition_time.clone(),
        ..Default::default()
    };
    // The hashes let a copy be compared without its content: the cache keeps copies without
    // their spec (one per namespace for every all-namespaces operator).
    let copied = serde_json::json!({"spec": &csv.spec, "labels": &labels, "annotations": &annotations});
    let status_key = serde_json::json!([&copy_status.phase, &copy_status.reason, &copy_status.message]);
    annotations.insert(keys::COPY_HASH_SPEC_ANNOTATION.to_owned(), crate::metadata::hash_json(&copied));
    annotations.insert(keys::COPY_HASH_STATUS_ANNOTATION.to_owned(), crate::metadata::hash_json(&status_key));
    ClusterServiceVersion {
        metadata: ObjectMeta {
            name: Some(csv.name_any()),
            namespace: Some(namespace.to_owned()),
            labels: Some(labels),
            annotations: Some(annotations),
            ..Default::default()
        },
        spec: csv.spec.clone(),
        status: Some(copy_status),
    }
}

/// What the watch cache keeps of a copied CSV: its metadata (with the copy hashes) and status;
/// the spec is the original's, read from there when a copy is written.
pub fn trim_copy(csv: &mut ClusterServiceVersion) {
    if csv.labels().contains_key(keys::COPIED_FROM_LABEL) {
        csv.spec = Default::default();
        csv.metadata.annotations.iter_mut().for_each(|annotations| {
            annotations.retain(|k, _| k.starts_with("olm."));
        });
    }
}

/// What the watch cache keeps of any CSV: a copy as [`trim_copy`] says; an original without
/// what is there for people and consoles and no reconcile reads (icon, description, keywords,
/// maintainers, provider, links, related images, fields this version does not know, the
/// descriptors of its CRDs, the alm-examples annotation), most of a typical CSV. A copy is
/// written with those fields from a fresh read of the original (`reconcile::act`). The install
/// strategy, the largest part left, and the requirement status are held once for all CSVs
/// that carry the same.
pub fn trim_cached_csv(csv: &mut ClusterServiceVersion) {
    if csv.labels().contains_key(keys::COPIED_FROM_LABEL) {
        return trim_copy(csv);
    }
    static INSTALL_STRATEGIES: std::sync::LazyLock<olm_runtime::cache::Interner<olm_api::v1alpha1::cluster_service_version::NamedInstallStrategy>> =
        std::sync::LazyLock::new(|| olm_runtime::cache::Interner::new(|value| olm_api::unknown::json_digest(value).ok()));
    INSTALL_STRATEGIES.intern(&mut csv.spec.install);
    static REQUIREMENTS: std::sync::LazyLock<olm_runtime::cache::Interner<Vec<olm_api::v1alpha1::RequirementStatus>>> =
        std::sync::LazyLock::new(|| olm_runtime::cache::Interner::new(|value| olm_api::unknown::json_digest(value).ok()));
    if let Some(requirements) = csv.status.as_mut().and_then(|status| status.requirement_status.as_mut()) {
        REQUIREMENTS.intern(requirements);
    }
    csv.spec.icon = None;
    csv.spec.description = None;
    csv.spec.keywords = None;
    csv.spec.maintainers = None;
    csv.spec.provider = None;
    csv.spec.links = None;
    csv.spec.related_images = None;
    csv.spec.extra = Default::default();
    if let Some(crds) = csv.spec.custom_resource_definitions.as_mut() {
        for crd in crds.owned.iter_mut().flatten().chain(crds.required.iter_mut().flatten()) {
            crd.spec_descriptors = None;
            crd.status_descriptors = None;
            crd.action_descriptors = None;
            crd.description = None;
        }
    }
    if let Some(annotations) = csv.metadata.annotations.as_mut() {
        annotations.remove(keys::ALM_EXAMPLES_ANNOTATION);
    }
}

/// `copy` (decided from the cached, trimmed original) with the fields the cache leaves out
/// taken from `full`, a fresh read of the original; the copy hashes stay those of the decision.
pub fn with_full_content(copy: &ClusterServiceVersion, full: &ClusterServiceVersion) -> ClusterServiceVersion {
    let mut copy = copy.clone();
    copy.spec = full.spec.clone();
    let annotations = copy.metadata.annotations.get_or_insert_with(Default::default);
    for (key, value) in full.annotations() {
        if key != keys::TARGET_NAMESPACES_ANNOTATION && key != "kubectl.kubernetes.io/last-applied-configuration" {
            annotations.entry(key.clone()).or_insert_with(|| value.clone());
        }
    }
    copy
}

/// For an all-namespaces group the operator's Roles and RoleBindings become ClusterRoles and
/// ClusterRoleBindings of the same names (plus read access to namespaces), as upstream does.
/// Lifted roles carry `olm.managed=true` and the CSV's owner labels (they are deleted with it).
fn lift_rbac(observed: &Observed<'_>, mut decision: CsvDecision) -> CsvDecision {
    let owner = crate::metadata::owner_labels(observed.csv);
    for role in &observed.owned_rbac.roles {
        let mut labels = role.labels().clone();
        labels.extend(owner.clone());
        labels.insert(keys::MANAGED_LABEL.to_owned(), "true".to_owned());
        let mut rules = role.rules.clone().unwrap_or_default();
        rules.push(PolicyRule {
            verbs: vec!["get".into(), "list".into(), "watch".into()],
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["namespaces".into()]),
            ..Default::default()
        });
        let lifted = ClusterRole {
            metadata: ObjectMeta {
                name: Some(role.name_any()),
                labels: Some(labels),
                ..Default::default()
            },
            rules: Some(rules),
            aggregation_rule: None,
        };
        let current = observed
            .cluster_roles
            .get(&role.name_any())
            .is_some_and(|existing| crate::rbac::role_is_current(existing, &lifted));
        if current {
            continue;
        }
        decision = decision.act(CsvAction::ApplyClusterRole(Box::new(lifted)));
        for binding in observed.owned_rbac.bindings.iter().filter(|b| b.role_ref.name == role.name_any()) {
            let mut labels = binding.labels().clone();
            labels.extend(owner.clone());
            labels.insert(keys::MANAGED_LABEL.to_owned(), "true".to_owned());
            decision = decision.act(CsvAction::ApplyClusterRoleBinding(Box::new(ClusterRoleBinding {
                metadata: ObjectMeta {
                    name: Some(binding.name_any()),
                    labels: Some(labels),
                    ..Default::default()
                },
                role_ref: RoleRef {
                    api_group: Some("rbac.authorization.k8s.io".into()),
                    kind: "ClusterRole".into(),
                    name: binding.role_ref.name.clone(),
                },
                subjects: binding.subjects.clone(),
            })));
        }
    }
    decision
}

/// The operator's Roles and RoleBindings copied into a target namespace, owned by the copied
/// CSV there (so they go with it) and labelled `olm.copiedFrom`.
pub fn tenant_rbac(original: &ClusterServiceVersion, owned: &OwnedRbac, copy: &ClusterServiceVersion) -> Vec<CsvAction> {
    let own = original.namespace().unwrap_or_default();
    let target = copy.namespace().unwrap_or_default();
    let mut labels = crate::metadata::owner_labels(copy);
    labels.insert(keys::COPIED_FROM_LABEL.to_owned(), own);
    let owner = copy.uid().map(|uid| {
        vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "operators.coreos.com/v1alpha1".into(),
            kind: "ClusterServiceVersion".into(),
            name: copy.name_any(),
            uid,
            controller: Some(false),
            block_owner_deletion: Some(false),
        }]
    });
    let meta = |name: String| ObjectMeta {
        name: Some(name),
        namespace: Some(target.clone()),
        labels: Some(labels.clone()),
        owner_references: owner.clone(),
        ..Default::default()
    };
    let roles = owned.roles.iter().map(|role| {
        CsvAction::ApplyRole(Box::new(Role {
            metadata: meta(role.name_any()),
            rules: role.rules.clone(),
        }))
    });
    let bindings = owned.bindings.iter().map(|binding| {
        CsvAction::ApplyRoleBinding(Box::new(RoleBinding {
            metadata: meta(binding.name_any()),
            role_ref: binding.role_ref.clone(),
            subjects: binding.subjects.clone(),
        }))
    });
    roles.chain(bindings).collect()
}

/// The OperatorCondition OLM keeps for a CSV: named after it, owned by it, listing its
/// Deployments and ServiceAccounts (`default` when it declares none), as upstream does.
pub fn desired_operator_condition(csv: &ClusterServiceVersion) -> OperatorCondition {
    let deployments: Vec<String> = csv.spec.strategy_deployment_names().map(str::to_owned).collect();
    let mut accounts: Vec<String> = super::requirements::declared_service_accounts(csv).into_iter().collect();
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
/// Conditions no longer reported are left as they are, as upstream does.
pub fn synced_condition_status(condition: &OperatorCondition) -> Option<olm_api::v2::OperatorConditionStatus> {
    let generation = condition.metadata.generation;
    let mut conditions = condition.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    let mut changed = false;
    for reported in condition.spec.conditions.iter().flatten() {
        let existing = conditions.iter_mut().find(|c| c.type_ == reported.type_);
        match existing {
            Some(c) if c.status == reported.status && c.observed_generation == generation => {}
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

/// Whether an existing copy already matches the wanted one.
pub(crate) fn copy_is_current(existing: &ClusterServiceVersion, wanted: &ClusterServiceVersion) -> bool {
    let same = |key: &str| {
        let wanted = wanted.annotations().get(key);
        wanted.is_some() && existing.annotations().get(key) == wanted
    };
    // The hashes cover the spec, labels, annotations and copied status; the status itself is
    // compared too, since a hand edit of a copy's status leaves its annotations as they were.
    let status_key = |c: &ClusterServiceVersion| c.status.as_ref().map(|s| (s.phase.clone(), s.reason.clone(), s.message.clone()));
    same(keys::COPY_HASH_SPEC_ANNOTATION)
        && same(keys::COPY_HASH_STATUS_ANNOTATION)
        && wanted.labels().iter().all(|(k, v)| existing.labels().get(k) == Some(v))
        && !existing.annotations().contains_key(keys::TARGET_NAMESPACES_ANNOTATION)
        && status_key(existing) == status_key(wanted)
}

/// Add the copy actions for the status the CSV ends up with.
fn decide_copies(observed: &Observed<'_>, targets: Option<&[String]>, mut decision: CsvDecision) -> CsvDecision {
    let csv = observed.csv;
    let own = csv.namespace().unwrap_or_default();
    let status = decision.status.clone().or_else(|| csv.status.clone()).unwrap_or_default();
    let copiable = is_copiable(&status);
    let wanted: BTreeSet<String> = match targets {
        Some(targets) if copiable => {
            if targets == [String::new()] {
                if observed.copied_csvs_disabled {
                    BTreeSet::new()
                } else {
                    observed.active_namespaces.iter().filter(|ns| **ns != own).cloned().collect()
                }
            } else {
                targets
                    .iter()
                    .filter(|ns| **ns != own && observed.active_namespaces.contains(ns))
                    .cloned()
                    .collect()
            }
        }
        _ => BTreeSet::new(),
    };
    let existing: BTreeMap<String, &ClusterServiceVersion> = observed
        .copies
        .iter()
        .map(|c| (c.namespace().unwrap_or_default(), *c))
        .collect();
    for ns in wanted.iter().filter(|ns| !observed.taken_namespaces.contains(*ns)) {
        let copy = copy_of(csv, ns, &status);
        if existing.get(ns).is_none_or(|current| !copy_is_current(current, &copy)) {
            decision = decision.act(CsvAction::ApplyCopy(Box::new(copy)));
        }
    }
    if copiable && targets.is_some_and(|t| t == [String::new()]) {
        decision = lift_rbac(observed, decision);
    }
    let mut removed = 0usize;
    for ns in existing.keys() {
        if !wanted.contains(ns) {
            decision = decision.act(CsvAction::DeleteCopy { namespace: ns.clone() });
            removed += 1;
        }
    }
    let disabled_for_all = copiable && observed.copied_csvs_disabled && targets.is_some_and(|t| t == [String::new()]);
    if disabled_for_all && removed > 0 {
        decision = decision.event(EventNote::warning(
            "DisabledCopiedCSVs",
            "DeleteCopies",
            format!(
                "Copied CSVs are disabled by OLMConfig {}: removing {removed} copies of this all-namespaces operator",
                olm_api::v1::olm_config::OLM_CONFIG_NAME
            ),
        ));
    }
    decision
}

/// The decision for a non-copied CSV being deleted (`None` when it is not): namespaced
/// children go with their ownerReferences and copies notice their original is gone; what is
/// cluster-scoped is deleted by owner labels before the cleanup finalizer is released, so it
/// goes even when OLM was down when the CSV was deleted. CRDs and custom resources are never
/// touched.
///
/// A CRD whose conversion calls this operator's webhook would refuse every read and write of
/// its objects once the operator is gone, so unless another CSV replaces this one (and brings
/// its own webhook), the conversion of the CRDs it lists goes back to None, as upstream does.
pub fn decide_deletion(csv: &ClusterServiceVersion, replaced_by_peer: bool) -> Option<CsvDecision> {
    csv.metadata.deletion_timestamp.as_ref()?;
    let mut decision = CsvDecision {
        actions: Vec::new(),
        status: None,
        events: Vec::new(),
        requeue_after: None,
    };
    let index = csv
        .finalizers()
        .iter()
        .position(|f| f == keys::CSV_CLEANUP_FINALIZER);
    if let Some(index) = index {
        decision = decision.act(CsvAction::DeleteOwnedClusterObjects);
        if !replaced_by_peer {
            let conversions = csv.spec.webhooks().iter().filter(|h| h.type_ == WebhookAdmissionType::ConversionWebhook);
            let crds: BTreeSet<&String> = conversions.flat_map(|h| h.conversion_crds.iter().flatten()).collect();
            for crd in crds {
                decision = decision.act(CsvAction::ResetCrdConversion { crd: crd.clone() });
            }
        }
        decision = decision.act(CsvAction::RemoveFinalizer { index });
    }
    Some(decision)
}

/// Decide one pass over a non-copied CSV.
pub fn decide(observed: &Observed<'_>, now: Timestamp) -> CsvDecision {
    let csv = observed.csv;
    let replaced_by_peer = replacement(observed).is_some();
    if let Some(decision) = decide_deletion(csv, replaced_by_peer) {
        return decision;
    }
    let mut decision = decide_live(observed, now);
    let labels = api_label_changes(csv);
    if !labels.is_empty() {
        decision.actions.insert(0, CsvAction::Label(labels));
    }
    if !csv.finalizers().iter().any(|f| f == keys::CSV_CLEANUP_FINALIZER) {
        // First, so it is in place before anything cluster-scoped is created.
        decision.actions.insert(
            0,
            CsvAction::AddFinalizer {
                current: csv.metadata.finalizers.clone(),
                resource_version: csv.resource_version(),
            },
        );
    }
    decision
}

fn decide_live(observed: &Observed<'_>, now: Timestamp) -> CsvDecision {
    let csv = observed.csv;
    let previous = csv.status.clone().unwrap_or_default();
    if previous.reason == Some(CsvReason::InstallComponentFailedNoRetry) {
        return CsvDecision::status(previous);
    }

    // OperatorGroup membership, on every pass.
    let group = match observed.groups.as_slice() {
        [] => {
            let d = transition(&previous, CsvPhase::Failed, CsvReason::NoOperatorGroup, "csv in namespace with no operatorgroups", now);
            return decide_copies(observed, None, d.requeue(REQUEUE_RESYNC));
        }
        [group] => *group,
        _ => {
            let d = transition(
                &previous,
                CsvPhase::Failed,
                CsvReason::TooManyOperatorGroups,
                "csv created in namespace with multiple operatorgroups, can't pick one automatically",
                now,
            );
            return decide_copies(observed, None, d.requeue(REQUEUE_RESYNC));
        }
    };
    let Some(targets) = group.status.as_ref().and_then(|s| s.namespaces.clone()) else {
        // The OperatorGroup controller has not resolved the targets yet; its status write
        // triggers this CSV again.
        return CsvDecision::status(previous).requeue(REQUEUE_WAITING);
    };
    if targets.is_empty() {
        let d = transition(
            &previous,
            CsvPhase::Failed,
            CsvReason::NoTargetNamespaces,
            "no targetNamespaces are matched operatorgroups namespace selection",
            now,
        );
        return decide_copies(observed, None, d.requeue(REQUEUE_RESYNC));
    }
    let wanted_annotations = member_annotations(group, &targets);
    let stale: BTreeMap<String, Option<String>> = wanted_annotations
        .iter()
        .filter(|(k, v)| csv.annotations().get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), Some(v.clone())))
        .collect();
    if !stale.is_empty() {
        // Write the annotations first; the update triggers the next pass.
        return CsvDecision::status(previous).act(CsvAction::Annotate(stale));
    }
    let own = csv.namespace().unwrap_or_default();
    if let Err((reason, message)) = install_modes_support(csv, &own, &targets) {
        let d = transition(&previous, CsvPhase::Failed, reason, message, now);
        return decide_copies(observed, None, d.requeue(REQUEUE_RESYNC));
    }
    if static_group_refuses(observed, group, &targets) {
        let mut d = transition(
            &previous,
            CsvPhase::Failed,
            CsvReason::CannotModifyStaticOperatorGroupProvidedApis,
            "static provided api operatorgroup cannot be modified by these apis",
            now,
        );
        // As upstream: no operator runs for a CSV its group refuses.
        for deployment in observed.deployments.values() {
            if owned_by(deployment.labels(), csv) {
                d = d.act(CsvAction::DeleteDeployment(deployment.name_any()));
            }
        }
        return decide_copies(observed, None, d.requeue(REQUEUE_RESYNC));
    }
    if let Some(conflict) = inter_group_conflict(observed, &targets) {
        let mut d = transition(&previous, CsvPhase::Failed, CsvReason::InterOperatorGroupOwnerConflict, conflict, now);
        // Upstream removes the operator of a CSV that lost such a conflict.
        for deployment in observed.deployments.values() {
            if owned_by(deployment.labels(), csv) {
                d = d.act(CsvAction::DeleteDeployment(deployment.name_any()));
            }
        }
        return decide_copies(observed, None, d.requeue(REQUEUE_RESYNC));
    }
    let phase = previous.phase.clone().unwrap_or(CsvPhase::None);
    if phase == CsvPhase::Failed && is_operator_group_reason(previous.reason.as_ref()) {
        let d = transition(
            &previous,
            CsvPhase::Pending,
            CsvReason::RequirementsUnknown,
            "InstallModes now support target namespaces",
            now,
        );
        return decide_copies(observed, Some(&targets), d);
    }

    let fail_forward = group.spec.upgrade_strategy() == UpgradeStrategy::TechPreviewUnsafeFailForward;
    let selector = certs::namespace_selector(group, &targets);
    let mut decision = decide_phase(observed, &previous, phase.clone(), fail_forward, selector.as_ref(), now);
    if !matches!(phase, CsvPhase::Deleting | CsvPhase::Replacing) {
        let wanted = desired_operator_condition(csv);
        let current = observed.operator_condition.is_some_and(|c| {
            c.spec.deployments == wanted.spec.deployments && c.spec.service_accounts == wanted.spec.service_accounts
        });
        if !current {
            decision.actions.insert(0, CsvAction::ApplyOperatorCondition(Box::new(wanted)));
        }
    }
    if let Some(condition) = observed.operator_condition {
        decision = with_condition_rbac_and_status(observed, condition, decision);
    }
    decide_copies(observed, Some(&targets), decision)
}

/// Keep the OperatorCondition's RBAC in place and its status in step with its spec.
fn with_condition_rbac_and_status(observed: &Observed<'_>, condition: &OperatorCondition, mut decision: CsvDecision) -> CsvDecision {
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

/// A Succeeded CSV keeps admin/edit/view ClusterRoles for each API it provides (written after
/// the status, see `ApplyApiRole`).
fn with_api_roles(observed: &Observed<'_>, mut decision: CsvDecision) -> CsvDecision {
    for role in crate::rbac::provided_api_roles(observed.csv, observed.crd_uids) {
        let current = observed
            .cluster_roles
            .get(&role.name_any())
            .is_some_and(|existing| crate::rbac::role_is_current(existing, &role));
        if !current {
            decision = decision.act(CsvAction::ApplyApiRole(Box::new(role)));
        }
    }
    decision
}

/// Go on deciding, from `first`'s status, in phase `next` with the same observation. A move
/// that needs nothing but a status change (None → Pending, Pending → InstallReady) is not worth
/// a status write and a watch round trip of its own: that is most of an install's time. The
/// conditions history still records every step, and the Events of both steps are kept.
fn and_then_phase(
    first: CsvDecision,
    observed: &Observed<'_>,
    next: CsvPhase,
    fail_forward: bool,
    namespace_selector: Option<&LabelSelector>,
    now: Timestamp,
) -> CsvDecision {
    let Some(status) = first.status.clone() else {
        return first;
    };
    let mut second = decide_phase(observed, &status, next, fail_forward, namespace_selector, now);
    if second.status.is_none() {
        second.status = first.status;
    }
    let mut actions = first.actions;
    actions.append(&mut second.actions);
    second.actions = actions;
    let mut events = first.events;
    events.append(&mut second.events);
    second.events = events;
    second
}

/// The per-phase part of the machine.
fn decide_phase(
    observed: &Observed<'_>,
    previous: &ClusterServiceVersionStatus,
    phase: CsvPhase,
    fail_forward: bool,
    namespace_selector: Option<&LabelSelector>,
    now: Timestamp,
) -> CsvDecision {
    let csv = observed.csv;
    match phase {
        CsvPhase::None | CsvPhase::Unknown | CsvPhase::Other(_) => {
            let pending = transition(previous, CsvPhase::Pending, CsvReason::RequirementsUnknown, "requirements not yet checked", now);
            and_then_phase(pending, observed, CsvPhase::Pending, fail_forward, namespace_selector, now)
        }
        CsvPhase::Pending => {
            // The operator being replaced can veto its upgrade through its OperatorCondition.
            if let Some((olm_api::ConditionStatus::False, message)) = observed.replaced_condition.and_then(|c| c.upgradeable()) {
                return transition(
                    previous,
                    CsvPhase::Pending,
                    CsvReason::OperatorConditionNotUpgradeable,
                    format!("The operator is not upgradeable: {message}"),
                    now,
                )
                .requeue(REQUEUE_REQUIREMENTS);
            }
            if let Some(problem) = invalid_strategy(csv) {
                return transition(previous, CsvPhase::Failed, CsvReason::InvalidInstallStrategy, problem, now);
            }
            let (entries, met) = requirements::check(csv, &facts(observed), observed.permissions);
            if !met {
                let mut d = transition(
                    previous,
                    CsvPhase::Pending,
                    CsvReason::RequirementsNotMet,
                    "one or more requirements couldn't be found",
                    now,
                );
                if let Some(status) = d.status.as_mut() {
                    status.requirement_status = Some(Arc::new(entries));
                }
                return d.requeue(REQUEUE_REQUIREMENTS);
            }
            if let Some(problem) = certs::webhook_description_problem(csv) {
                return transition(previous, CsvPhase::Failed, CsvReason::InvalidWebhookDescription, problem, now);
            }
            if let Some(conflict) = crd_owner_conflict(observed) {
                return transition(previous, CsvPhase::Failed, CsvReason::OwnerConflict, format!("owner conflict: {conflict}"), now);
            }
            if let Some(conflict) = api_service_conflict(observed) {
                return transition(previous, CsvPhase::Failed, CsvReason::OwnerConflict, conflict, now);
            }
            if let Some(old) = replaced(observed)
                && old.phase() != Some(&CsvPhase::Replacing)
            {
                // Wait until the CSV we replace hands over (it moves to Replacing when it sees
                // us); its status change triggers this CSV again.
                let mut status = previous.clone();
                status.requirement_status = Some(Arc::new(entries));
                return CsvDecision::status(status).requeue(REQUEUE_WAITING);
            }
            let mut d = transition(
                previous,
                CsvPhase::InstallReady,
                CsvReason::AllRequirementsMet,
                "all requirements found, attempting install",
                now,
            );
            if let Some(status) = d.status.as_mut() {
                status.requirement_status = Some(Arc::new(entries));
            }
            and_then_phase(d, observed, CsvPhase::InstallReady, fail_forward, namespace_selector, now)
        }
        CsvPhase::InstallReady => {
            if let Some(problem) = invalid_strategy(csv) {
                return transition(previous, CsvPhase::Failed, CsvReason::InvalidInstallStrategy, problem, now);
            }
            if let Some(problem) = certs::invalid_descriptions(csv) {
                return transition(previous, CsvPhase::Failed, CsvReason::InvalidInstallStrategy, problem, now);
            }
            if let Some(conflict) = api_service_conflict(observed) {
                // Never overwrite an APIService that belongs to someone else.
                return transition(previous, CsvPhase::Failed, CsvReason::OwnerConflict, conflict, now);
            }
            if let Some(problem) = conversion_problem(observed) {
                // Upstream finds this while installing: the install fails with the reason below.
                return transition(
                    previous,
                    CsvPhase::Failed,
                    CsvReason::InstallComponentFailed,
                    format!("install strategy failed: {problem}"),
                    now,
                );
            }
            let desired = desired_deployments(csv, observed.subscription_config, observed.serving_certs);
            let wanted_names: BTreeSet<String> = desired.iter().map(|d| d.name_any()).collect();
            let mut d = transition(
                previous,
                CsvPhase::Installing,
                CsvReason::InstallSucceeded,
                "waiting for install components to report healthy",
                now,
            );
            if observed.serving_certs.values().any(|c| c.fresh)
                && let Some(status) = d.status.as_mut()
            {
                status.certs_last_updated = Some(Time(now));
                status.certs_rotate_at = Some(Time(certs::rotate_at(now)));
            }
            let (before, after) = exposure_actions(observed, namespace_selector);
            for action in before {
                d = d.act(action);
            }
            for deployment in desired {
                d = d.act(CsvAction::ApplyDeployment(Box::new(deployment)));
            }
            for action in after {
                d = d.act(action);
            }
            for (name, deployment) in observed.deployments {
                if !wanted_names.contains(name) && owned_by(deployment.labels(), csv) {
                    d = d.act(CsvAction::DeleteDeployment(name.clone()));
                }
            }
            d.requeue(REQUEUE_WAITING)
        }
        CsvPhase::Installing => {
            let desired = desired_deployments(csv, observed.subscription_config, observed.serving_certs);
            match strategy_problem(observed, &desired) {
                None => with_api_roles(
                    observed,
                    transition(previous, CsvPhase::Succeeded, CsvReason::InstallSucceeded, "install strategy completed with no errors", now),
                )
                .requeue(REQUEUE_RESYNC),
                Some(DeploymentProblem::Unrecoverable(message)) => {
                    transition(previous, CsvPhase::Failed, CsvReason::InstallCheckFailed, format!("install failed: {message}"), now)
                }
                Some(problem) if problem.needs_apply() && !matches!(problem, DeploymentProblem::Missing(_)) => transition(
                    previous,
                    CsvPhase::InstallReady,
                    CsvReason::InstallWaiting,
                    format!("installing: {}", problem.message()),
                    now,
                ),
                Some(problem) => {
                    let since = previous.last_transition_time.as_ref().map(|t| t.0).unwrap_or(now);
                    let timeout = SignedDuration::try_from(INSTALL_TIMEOUT).unwrap_or(SignedDuration::from_secs(300));
                    if since + timeout < now {
                        transition(previous, CsvPhase::Failed, CsvReason::InstallCheckFailed, "install timeout", now)
                    } else {
                        transition(
                            previous,
                            CsvPhase::Installing,
                            CsvReason::InstallWaiting,
                            format!("installing: {}", problem.message()),
                            now,
                        )
                        .requeue(REQUEUE_WAITING)
                    }
                }
            }
        }
        CsvPhase::Succeeded => {
            if let Some(next) = replacement(observed) {
                return transition(
                    previous,
                    CsvPhase::Replacing,
                    CsvReason::BeingReplaced,
                    format!("being replaced by csv: {}", next.name_any()),
                    now,
                );
            }
            let rotation_due = previous.certs_rotate_at.as_ref().is_some_and(|at| at.0 <= now);
            if rotation_due && !cert_deployments(csv).is_empty() {
                return transition(
                    previous,
                    CsvPhase::InstallReady,
                    CsvReason::NeedsCertRotation,
                    "CSV owns resources that require a cert refresh",
                    now,
                );
            }
            // As upstream: a generated APIService that is gone, stale or taken fails the CSV
            // with this reason; the Failed pass reinstalls it when it can.
            if let (Some(problem), _) = api_service_problems(observed) {
                return transition(previous, CsvPhase::Failed, CsvReason::ApiServiceResourceIssue, problem.message(), now);
            }
            let (entries, met) = requirements::check(csv, &facts(observed), None);
            if !met {
                let mut d = transition(
                    previous,
                    CsvPhase::Failed,
                    CsvReason::RequirementsNotMet,
                    "requirements no longer met",
                    now,
                );
                if let Some(status) = d.status.as_mut() {
                    status.requirement_status = Some(Arc::new(entries));
                }
                return d;
            }
            let desired = desired_deployments(csv, observed.subscription_config, observed.serving_certs);
            match strategy_problem(observed, &desired) {
                None => with_api_roles(observed, CsvDecision::status(previous.clone())).requeue(REQUEUE_RESYNC),
                Some(problem @ (DeploymentProblem::Updated(_) | DeploymentProblem::AnnotationsMissing(_))) => transition(
                    previous,
                    CsvPhase::InstallReady,
                    CsvReason::ComponentUnhealthy,
                    format!("installing: {}", problem.message()),
                    now,
                ),
                Some(problem) => transition(
                    previous,
                    CsvPhase::Failed,
                    CsvReason::ComponentUnhealthy,
                    format!("installing: {}", problem.message()),
                    now,
                ),
            }
        }
        CsvPhase::Failed => {
            // With the fail-forward upgrade strategy a failed CSV hands over to its replacement.
            if fail_forward && let Some(next) = replacement(observed) {
                return transition(
                    previous,
                    CsvPhase::Replacing,
                    CsvReason::BeingReplaced,
                    format!("being replaced by csv: {}", next.name_any()),
                    now,
                );
            }
            let (entries, met) = requirements::check(csv, &facts(observed), observed.permissions);
            if !met {
                let mut d = transition(
                    previous,
                    CsvPhase::Pending,
                    CsvReason::RequirementsNotMet,
                    "one or more requirements couldn't be found",
                    now,
                );
                if let Some(status) = d.status.as_mut() {
                    status.requirement_status = Some(Arc::new(entries));
                }
                return d.requeue(REQUEUE_REQUIREMENTS);
            }
            if invalid_strategy(csv).is_some() {
                // Nothing to retry until the CSV itself changes.
                return CsvDecision::status(previous.clone());
            }
            if previous.reason == Some(CsvReason::InvalidWebhookDescription) && certs::webhook_description_problem(csv).is_some() {
                // Fixed only by editing the CSV.
                return CsvDecision::status(previous.clone());
            }
            if previous.reason == Some(CsvReason::InstallComponentFailed) && conversion_problem(observed).is_some() {
                // Retrying cannot help until the CSV or the CRD changes (both are watched).
                return CsvDecision::status(previous.clone()).requeue(REQUEUE_RESYNC);
            }
            if previous.reason == Some(CsvReason::InstallComponentFailed) {
                // The API server refused the install; wait before trying again so a CSV that is
                // refused every time cycles slowly instead of hot-looping through the phases.
                let since = previous.last_transition_time.as_ref().map(|t| t.0).unwrap_or(now);
                let pause = SignedDuration::try_from(REINSTALL_PAUSE).unwrap_or(SignedDuration::from_secs(30));
                if since + pause > now {
                    let left = (since + pause).duration_since(now).unsigned_abs();
                    return CsvDecision::status(previous.clone()).requeue(left.max(Duration::from_secs(1)));
                }
            }
            if previous.reason == Some(CsvReason::OwnerConflict)
                && (crd_owner_conflict(observed).is_some() || api_service_conflict(observed).is_some())
            {
                return CsvDecision::status(previous.clone()).requeue(REQUEUE_RESYNC);
            }
            match api_service_problems(observed) {
                (Some(DeploymentProblem::Unrecoverable(_)), _) => {
                    // Owned by someone else now: nothing to reinstall until that changes.
                    return CsvDecision::status(previous.clone()).requeue(REQUEUE_RESYNC);
                }
                (Some(problem), _) => {
                    return transition(
                        previous,
                        CsvPhase::Pending,
                        CsvReason::ApiServiceResourcesNeedReinstall,
                        problem.message(),
                        now,
                    );
                }
                (None, _) => {}
            }
            let desired = desired_deployments(csv, observed.subscription_config, observed.serving_certs);
            match strategy_problem(observed, &desired) {
                None => transition(previous, CsvPhase::Succeeded, CsvReason::InstallSucceeded, "install strategy completed with no errors", now)
                    .requeue(REQUEUE_RESYNC),
                Some(problem @ (DeploymentProblem::Updated(_) | DeploymentProblem::AnnotationsMissing(_))) => transition(
                    previous,
                    CsvPhase::InstallReady,
                    CsvReason::NeedsReinstall,
                    format!("installing: {}", problem.message()),
                    now,
                ),
                Some(problem) => transition(
                    previous,
                    CsvPhase::Pending,
                    CsvReason::NeedsReinstall,
                    format!("installing: {}", problem.message()),
                    now,
                ),
            }
        }
        CsvPhase::Replacing => {
            if replaced(observed).is_some() {
                // Not the oldest of the chain: deleting it now would break the chain.
                return CsvDecision::status(previous.clone()).requeue(REQUEUE_WAITING);
            }
            match replacement(observed) {
                Some(next) if next.phase() == Some(&CsvPhase::Succeeded) => transition(
                    previous,
                    CsvPhase::Deleting,
                    CsvReason::Replaced,
                    "has been replaced by a newer ClusterServiceVersion that has successfully installed.",
                    now,
                ),
                Some(_) => CsvDecision::status(previous.clone()).requeue(REQUEUE_WAITING),
                // The replacement disappeared: run again as the installed version.
                None => transition(previous, CsvPhase::Pending, CsvReason::NeedsReinstall, "the replacing ClusterServiceVersion is gone", now),
            }
        }
        CsvPhase::Deleting => CsvDecision::status(previous.clone()).act(CsvAction::DeleteSelf),
    }
}

/// Decide for a copied CSV: it is deleted once its original is gone; the original keeps it
/// up to date and removes it from namespaces that are no longer targets. In a namespace that an
/// explicit target list names, the copy carries the operator's Roles and RoleBindings, so the
/// operator may act there (upstream's tenant RBAC).
pub fn decide_copy(copy: &ClusterServiceVersion, original: Option<&ClusterServiceVersion>, owned: &OwnedRbac) -> CsvDecision {
    let mut decision = CsvDecision {
        actions: Vec::new(),
        status: None,
        events: Vec::new(),
        requeue_after: Some(REQUEUE_RESYNC),
    };
    if copy.metadata.deletion_timestamp.is_some() {
        return decision;
    }
    let Some(original) = original else {
        return decision.act(CsvAction::DeleteSelf);
    };
    let explicit_targets = original
        .annotations()
        .get(keys::TARGET_NAMESPACES_ANNOTATION)
        .is_some_and(|t| !t.is_empty());
    if explicit_targets {
        for action in tenant_rbac(original, owned, copy) {
            decision = decision.act(action);
        }
    }
    decision
}
