//! `InstallPlan` (`ip`): the resolved set of objects to create for a namespace.

// kube-derive takes one `printcolumn(...)` per column; clippy mistakes them for duplicates.
#![allow(clippy::duplicated_attributes)]

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::ConditionStatus;
use crate::enums::{closed_string_enum, open_string_enum};

closed_string_enum! {
    /// `Automatic` or `Manual` (Subscription `spec.installPlanApproval`, InstallPlan `spec.approval`).
    pub enum Approval {
        Automatic = "Automatic",
        Manual = "Manual",
    }
}

/// The desired state of an InstallPlan.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[kube(
    group = "operators.coreos.com",
    version = "v1alpha1",
    kind = "InstallPlan",
    plural = "installplans",
    namespaced,
    status = "InstallPlanStatus",
    shortname = "ip",
    category = "olm",
    derive = "PartialEq",
    doc = "The objects OLM will create to install or upgrade the operators of a namespace.",
    printcolumn(name = "CSV", type_ = "string", json_path = ".spec.clusterServiceVersionNames[0]", description = "The first CSV in the list of clusterServiceVersionNames"),
    printcolumn(name = "Approval", type_ = "string", json_path = ".spec.approval", description = "The approval mode"),
    printcolumn(name = "Approved", type_ = "boolean", json_path = ".spec.approved")
)]
pub struct InstallPlanSpec {
    /// Legacy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Legacy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_namespace: Option<String>,
    #[serde(default, rename = "clusterServiceVersionNames")]
    pub cluster_service_version_names: Vec<String>,
    pub approval: Approval,
    pub approved: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
}

open_string_enum! {
    /// `status.phase` of an InstallPlan.
    pub enum InstallPlanPhase {
        None = "",
        /// Legacy, unused.
        Planning = "Planning",
        RequiresApproval = "RequiresApproval",
        Installing = "Installing",
        Complete = "Complete",
        Failed = "Failed",
    }
}

open_string_enum! {
    /// `status.conditions[].type`.
    pub enum InstallPlanConditionType {
        Resolved = "Resolved",
        Installed = "Installed",
    }
}

open_string_enum! {
    /// `status.conditions[].reason`.
    pub enum InstallPlanConditionReason {
        PlanUnknown = "PlanUnknown",
        InstallCheckFailed = "InstallCheckFailed",
        DependenciesConflict = "DependenciesConflict",
        InstallComponentFailed = "InstallComponentFailed",
    }
}

open_string_enum! {
    /// `status.plan[].status`.
    pub enum StepStatus {
        Unknown = "Unknown",
        NotPresent = "NotPresent",
        Present = "Present",
        Created = "Created",
        NotCreated = "NotCreated",
        WaitingForApi = "WaitingForApi",
        UnsupportedResource = "UnsupportedResource",
    }
}

open_string_enum! {
    /// `status.bundleLookups[].conditions[].type`.
    pub enum BundleLookupConditionType {
        BundleLookupPending = "BundleLookupPending",
        BundleLookupFailed = "BundleLookupFailed",
    }
}

/// The observed state of an InstallPlan.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstallPlanStatus {
    /// The plan's phase (`""` before the first sync).
    pub phase: InstallPlanPhase,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<InstallPlanCondition>>,
    /// The catalogs the plan was resolved from.
    // Required by upstream's schema, so always written (`[]` when empty).
    #[serde(default)]
    pub catalog_sources: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Vec<Step>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bundle_lookups: Option<Vec<BundleLookup>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attenuated_service_account_ref: Option<ObjectReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl Default for InstallPlanStatus {
    fn default() -> Self {
        InstallPlanStatus {
            phase: InstallPlanPhase::None,
            conditions: None,
            catalog_sources: Vec::new(),
            plan: None,
            bundle_lookups: None,
            attenuated_service_account_ref: None,
            start_time: None,
            message: None,
        }
    }
}

/// One InstallPlan condition.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstallPlanCondition {
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "type")]
    pub type_: Option<InstallPlanConditionType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ConditionStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<InstallPlanConditionReason>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// One object to create, and where it stands.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// The CSV this step belongs to.
    pub resolving: String,
    pub resource: StepResource,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
    pub status: StepStatus,
}

/// The object of a step; `manifest` is its JSON (or a bundle reference).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepResource {
    pub source_name: String,
    pub source_namespace: String,
    pub group: String,
    pub version: String,
    pub kind: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<String>,
}

/// A bundle that still has to be unpacked before its steps are known.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BundleLookup {
    /// The bundle image.
    pub path: String,
    /// The CSV name.
    pub identifier: String,
    #[serde(default)]
    pub replaces: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog_source_ref: Option<ObjectReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<BundleLookupCondition>>,
    /// The bundle's properties as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<String>,
}

/// A condition of a bundle lookup.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BundleLookupCondition {
    #[serde(rename = "type")]
    pub type_: BundleLookupConditionType,
    pub status: ConditionStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}
