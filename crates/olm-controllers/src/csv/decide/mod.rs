//! The ClusterServiceVersion phase machine, as a pure function of what was observed and `now`.
//!
//! None → Pending → InstallReady → Installing → Succeeded, plus Failed, Replacing and Deleting,
//! with upstream's phase and reason strings. The OperatorGroup and install-mode checks run first
//! on every pass (`group`), as upstream does; then the phase's own step (`phase`); copies into
//! target namespaces are decided last (`copies`).

mod condition;
mod copies;
mod deletion;
mod exposure;
mod finalizer;
mod group;
mod phase;
mod strategy;
mod trim;

use std::cell::OnceCell;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use olm_api::keys;
use olm_api::v1::operator_group::{OperatorGroup, UpgradeStrategy};
use olm_api::v2::OperatorCondition;
use olm_api::v1alpha1::subscription::SubscriptionConfig;
use olm_api::v1alpha1::cluster_service_version::{
    CONDITIONS_LENGTH_LIMIT, ClusterServiceVersion, ClusterServiceVersionCondition, ClusterServiceVersionStatus,
    CsvPhase, CsvReason,
};

use olm_runtime::{Decision, EventNote};

use super::certs::ServingCert;
use super::api_registration::{self, WebhookConfig};
use super::requirements::{Facts, PermissionCheck};
use crate::metadata::api_label_changes;

pub use condition::{desired_condition_rbac, desired_operator_condition, synced_condition_status};
#[cfg(test)]
pub use copies::{CopyDrift, CopyTemplate};
pub use copies::{CopyWrite, copy_of, decide_copy, tenant_rbac, with_full_content};
pub use deletion::{decide_deletion, migrating, replacement_chain_of};
pub use group::install_modes_support;
pub use strategy::desired_deployments;
pub use trim::{trim_cached_csv, trim_copy};

/// How long Installing may wait for healthy components before failing (upstream: 5 min).
pub const INSTALL_TIMEOUT: Duration = Duration::from_secs(300);

/// Re-check periods when nothing we watch changes.
pub const REQUEUE_WAITING: Duration = Duration::from_secs(10);

/// Re-check period of a CSV whose requirements are not met (RBAC is not watched).
pub const REQUEUE_REQUIREMENTS: Duration = Duration::from_secs(15);

/// How often an Installing CSV's progress message is rewritten at most. A rollout passes
/// through several messages ("spec update to be observed", "0 out of 1 new replicas have been
/// updated", "0 of 1 updated replicas are available"); each was a write of the whole CSV status,
/// an Event, and a change every controller watching CSVs (and the Operator's status) followed:
/// most of an install's CSV writes, all of them while the API server is busiest. Upstream writes
/// every one. A phase change (Succeeded, Failed, back to InstallReady) is never held back.
pub const PROGRESS_REFRESH: Duration = Duration::from_secs(15);

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
    /// What the requirement checks read: CRDs, ServiceAccounts, the server version, served
    /// kinds and required APIServices.
    pub facts: Facts<'a>,
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
    /// The Deployments the strategy asks for, computed once on first use (build with
    /// `Default::default()`; read through [`Observed::desired_deployments`]).
    pub desired: OnceCell<Vec<Deployment>>,
}

impl Observed<'_> {
    /// The Deployments the strategy asks for ([`desired_deployments`] of this observation),
    /// computed once per pass.
    pub fn desired_deployments(&self) -> &[Deployment] {
        self.desired
            .get_or_init(|| desired_deployments(self.csv, self.subscription_config, self.serving_certs))
    }
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

    /// The CSV (namespace, name) they name, when they name one.
    pub fn csv(&self) -> Option<(&str, &str)> {
        (self.kind == "ClusterServiceVersion" && !self.namespace.is_empty() && !self.name.is_empty())
            .then_some((self.namespace.as_str(), self.name.as_str()))
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
    ApplyCopy(CopyWrite),
    /// Write the status of the copy in a namespace, whose other content is current.
    SetCopyStatus {
        /// Namespace of the copy.
        namespace: String,
        /// Its status.
        status: Box<ClusterServiceVersionStatus>,
    },
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
            Self::SetCopyStatus { .. } => "SetCopyStatus",
            Self::DeleteCopy { .. } => "DeleteCopy",
        }
    }
}

/// The decision for one CSV.
pub type CsvDecision = Decision<CsvAction, ClusterServiceVersionStatus>;

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

/// Decide one pass over a non-copied CSV.
pub fn decide(observed: &Observed<'_>, now: Timestamp) -> CsvDecision {
    let csv = observed.csv;
    let replaced_by_peer = deletion::replacement(observed).is_some();
    if let Some(decision) = decide_deletion(csv, replaced_by_peer) {
        return decision;
    }
    let mut decision = decide_live(observed, now);
    let labels = api_label_changes(csv);
    if !labels.is_empty() {
        decision.actions.insert(0, CsvAction::Label(labels));
    }
    if let Some(add) = finalizer::add_action(csv) {
        // First, so it is in place before anything cluster-scoped is created.
        decision.actions.insert(0, add);
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
    let (group, targets) = match group::membership(observed, &previous, now) {
        ControlFlow::Continue(member) => member,
        ControlFlow::Break(decision) => return decision,
    };
    let phase = previous.phase.clone().unwrap_or(CsvPhase::None);
    let selector = api_registration::namespace_selector(group);
    let pass = phase::Pass {
        observed,
        fail_forward: group.spec.upgrade_strategy() == UpgradeStrategy::TechPreviewUnsafeFailForward,
        namespace_selector: selector.as_ref(),
        now,
    };
    let mut decision = phase::decide_phase(&pass, &previous, phase.clone());
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
        decision = condition::with_condition_rbac_and_status(observed, condition, decision);
    }
    copies::decide_copies(observed, Some(&targets), decision)
}
