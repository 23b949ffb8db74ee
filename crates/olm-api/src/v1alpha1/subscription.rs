//! `Subscription` (`sub`): keep a package from a catalog installed and up to date.

// kube-derive takes one `printcolumn(...)` per column; clippy mistakes them for duplicates.
#![allow(clippy::duplicated_attributes)]

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, EnvFromSource, EnvVar, ObjectReference, ResourceRequirements, Toleration, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::install_plan::Approval;
use crate::enums::open_string_enum;
use crate::unknown::{ExtraFields, keep_unknown_fields};
use crate::common::ConditionStatus;

/// The desired state of a Subscription.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(remote = "Self", rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
#[kube(
    group = "operators.coreos.com",
    version = "v1alpha1",
    kind = "Subscription",
    plural = "subscriptions",
    namespaced,
    status = "SubscriptionStatus",
    shortname = "sub",
    shortname = "subs",
    category = "olm",
    derive = "PartialEq",
    doc = "Keeps a package from a catalog installed in this namespace and upgrades it along a channel.",
    printcolumn(name = "Package", type_ = "string", json_path = ".spec.name", description = "The package subscribed to"),
    printcolumn(name = "Source", type_ = "string", json_path = ".spec.source", description = "The catalog source for the specified package"),
    printcolumn(name = "Channel", type_ = "string", json_path = ".spec.channel", description = "The channel of updates to subscribe to")
)]
pub struct SubscriptionSpec {
    /// The CatalogSource name.
    pub source: String,
    /// The CatalogSource namespace (this namespace or the global catalog namespace).
    pub source_namespace: String,
    /// The package name.
    pub name: String,
    /// The channel; empty means the package's default channel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// The first CSV to install (ignored once something is installed).
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "startingCSV")]
    pub starting_csv: Option<String>,
    /// `Automatic` (the default) or `Manual`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_plan_approval: Option<Approval>,
    /// Overrides applied to the operator's Deployments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<SubscriptionConfig>,
    #[serde(skip)]
    #[schemars(skip)]
    pub extra: ExtraFields,
}
keep_unknown_fields!(SubscriptionSpec);

impl SubscriptionSpec {
    /// The effective approval: anything but `Manual` is `Automatic`, as upstream.
    pub fn approval(&self) -> Approval {
        match self.install_plan_approval {
            Some(Approval::Manual) => Approval::Manual,
            _ => Approval::Automatic,
        }
    }
}

/// `spec.config`: what OLM injects into the operator's Deployments.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionConfig {
    /// Accepted but not applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::string_map")]
    pub node_selector: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_from: Option<Vec<EnvFromSource>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<EnvVar>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volumes: Option<Vec<Volume>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_mounts: Option<Vec<VolumeMount>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::string_map")]
    pub annotations: Option<BTreeMap<String, String>>,
}

open_string_enum! {
    /// `status.state`.
    pub enum SubscriptionState {
        None = "",
        UpgradeFailed = "UpgradeFailed",
        /// Defined upstream, never set.
        UpgradeAvailable = "UpgradeAvailable",
        UpgradePending = "UpgradePending",
        AtLatestKnown = "AtLatestKnown",
    }
}

open_string_enum! {
    /// `status.reason`. Upstream types it as the CSV's `ConditionReason` and defines these two
    /// for it; its controller sets neither, nor does ours: the conditions say why.
    pub enum SubscriptionReason {
        InvalidCatalog = "InvalidCatalog",
        UpgradeSucceeded = "UpgradeSucceeded",
    }
}

open_string_enum! {
    /// `status.conditions[].type`.
    pub enum SubscriptionConditionType {
        CatalogSourcesUnhealthy = "CatalogSourcesUnhealthy",
        InstallPlanMissing = "InstallPlanMissing",
        InstallPlanPending = "InstallPlanPending",
        InstallPlanFailed = "InstallPlanFailed",
        ResolutionFailed = "ResolutionFailed",
        BundleUnpacking = "BundleUnpacking",
        BundleUnpackFailed = "BundleUnpackFailed",
        Deprecated = "Deprecated",
        PackageDeprecated = "PackageDeprecated",
        ChannelDeprecated = "ChannelDeprecated",
        BundleDeprecated = "BundleDeprecated",
        /// olm-rs: the installed CSV is not the head of the Subscription's channel, and why.
        BehindChannelHead = "BehindChannelHead",
        /// olm-rs: a write OLM makes for this Subscription (its InstallPlan, the plan's status,
        /// its content ConfigMaps) is refused by the API server; reason: the error's category.
        InstallPlanWriteFailed = "InstallPlanWriteFailed",
        /// olm-rs: an upgrade was rolled back (annotation `olm-rs.io/rolled-back-from`), which
        /// version, and why.
        RolledBack = "RolledBack",
        /// olm-rs: the CSV this Subscription installed is `Failed`; reason and message are the
        /// CSV's, so the Subscription says why its operator does not run (upstream says
        /// `AtLatestKnown` and nothing else).
        InstalledCsvFailed = "InstalledCSVFailed",
    }
}

/// Reasons used on Subscription conditions (they are free strings on the wire).
pub mod reasons {
    pub const NO_CATALOG_SOURCES_FOUND: &str = "NoCatalogSourcesFound";
    pub const ALL_CATALOG_SOURCES_HEALTHY: &str = "AllCatalogSourcesHealthy";
    pub const CATALOG_SOURCES_ADDED: &str = "CatalogSourcesAdded";
    pub const CATALOG_SOURCES_UPDATED: &str = "CatalogSourcesUpdated";
    pub const CATALOG_SOURCES_DELETED: &str = "CatalogSourcesDeleted";
    pub const UNHEALTHY_CATALOG_SOURCE_FOUND: &str = "UnhealthyCatalogSourceFound";
    pub const REFERENCED_INSTALL_PLAN_NOT_FOUND: &str = "ReferencedInstallPlanNotFound";
    pub const INSTALL_PLAN_NOT_YET_RECONCILED: &str = "InstallPlanNotYetReconciled";
    pub const INSTALL_PLAN_FAILED: &str = "InstallPlanFailed";
    pub const CONSTRAINTS_NOT_SATISFIABLE: &str = "ConstraintsNotSatisfiable";
    pub const ERROR_PREVENTED_RESOLUTION: &str = "ErrorPreventedResolution";
    pub const UNPACKING_IN_PROGRESS: &str = "UnpackingInProgress";
    pub const BUNDLE_UNPACK_FAILED: &str = "BundleUnpackFailed";
    pub const ERROR_PREVENTED_UNPACKING: &str = "ErrorPreventedUnpacking";
    pub const ENSURE_INSTALL_PLAN_FAILED: &str = "EnsureInstallPlanFailed";
}

/// One Subscription condition (not a metav1.Condition: it has `lastHeartbeatTime`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionCondition {
    #[serde(rename = "type")]
    pub type_: SubscriptionConditionType,
    pub status: ConditionStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_heartbeat_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

/// The observed state of a Subscription.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionStatus {
    /// The CSV being installed or last installed by this Subscription.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "currentCSV")]
    pub current_csv: Option<String>,
    /// Set once `currentCSV` exists on the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "installedCSV")]
    pub installed_csv: Option<String>,
    /// Deprecated reference to the InstallPlan.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "installplan")]
    pub install_plan: Option<InstallPlanReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<SubscriptionState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<SubscriptionReason>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_plan_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_plan_ref: Option<ObjectReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog_health: Option<Vec<SubscriptionCatalogHealth>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<SubscriptionCondition>>,
    /// When the status was last updated.
    // Required by upstream's schema (optional here so a partial status write is never
    // rejected); OLM always writes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_updated: Option<Time>,
}

impl SubscriptionStatus {
    /// The condition of this type, if present.
    pub fn condition(&self, type_: &SubscriptionConditionType) -> Option<&SubscriptionCondition> {
        self.conditions.as_deref().unwrap_or_default().iter().find(|c| &c.type_ == type_)
    }
}

/// Deprecated InstallPlan reference (`status.installplan`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstallPlanReference {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub uuid: String,
}

/// The health of one catalog, as seen by a Subscription.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionCatalogHealth {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog_source_ref: Option<ObjectReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_updated: Option<Time>,
    pub healthy: bool,
}
