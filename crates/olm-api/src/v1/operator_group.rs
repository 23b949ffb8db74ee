//! `OperatorGroup` (`og`), `operators.coreos.com/v1` (the storage version).

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::enums::closed_string_enum;
use crate::unknown::default_when_missing;

closed_string_enum! {
    /// `spec.upgradeStrategy`; defaults to `Default`.
    pub enum UpgradeStrategy {
        Default = "Default",
        TechPreviewUnsafeFailForward = "TechPreviewUnsafeFailForward",
    }
}

/// Condition type set when the group's service account is missing.
pub const SERVICE_ACCOUNT_CONDITION: &str = "OperatorGroupServiceAccount";
/// Its reason.
pub const SERVICE_ACCOUNT_NOT_FOUND_REASON: &str = "ServiceAccountNotFound";
/// Condition type set on every group of a namespace that has more than one.
pub const MULTIPLE_OPERATOR_GROUP_CONDITION: &str = "MultipleOperatorGroup";
/// Its reason.
pub const MULTIPLE_OPERATOR_GROUPS_FOUND_REASON: &str = "MultipleOperatorGroupsFound";

/// The desired state of an OperatorGroup. With neither `targetNamespaces` nor `selector`,
/// the group targets all namespaces.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(remote = "Self", rename_all = "camelCase")]
#[schemars(extend("default" = { "upgradeStrategy": "Default" }))]
#[kube(
    group = "operators.coreos.com",
    version = "v1",
    kind = "OperatorGroup",
    plural = "operatorgroups",
    namespaced,
    status = "OperatorGroupStatus",
    shortname = "og",
    category = "olm",
    derive = "PartialEq",
    derive = "Default",
    doc = "The unit of multitenancy for OLM: the namespaces the operators installed in its namespace watch."
)]
pub struct OperatorGroupSpec {
    /// Selects target namespaces by label (ignored when `targetNamespaces` is set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// An explicit list of target namespaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_namespaces: Option<Vec<String>>,
    /// Install with this service account's permissions instead of OLM's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    /// When true, OLM never edits the `olm.providedAPIs` annotation.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "staticProvidedAPIs")]
    pub static_provided_apis: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Default"))]
    pub upgrade_strategy: Option<UpgradeStrategy>,
}
default_when_missing!(OperatorGroupSpec);

impl OperatorGroupSpec {
    /// The effective upgrade strategy (absent means `Default`).
    pub fn upgrade_strategy(&self) -> UpgradeStrategy {
        self.upgrade_strategy.unwrap_or(UpgradeStrategy::Default)
    }
}

/// The observed state of an OperatorGroup.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperatorGroupStatus {
    /// The resolved target namespaces; `[""]` means all namespaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_ref: Option<ObjectReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_updated: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
}

impl OperatorGroup {
    /// The label put on each target namespace of a group that does not target all
    /// namespaces: `olm.operatorgroup.uid/<uid>` (empty value).
    pub fn namespace_label_key(&self) -> Option<String> {
        self.metadata.uid.as_deref().map(|uid| format!("{}{uid}", crate::keys::OPERATOR_GROUP_UID_LABEL_PREFIX))
    }

    /// Whether the resolved targets mean "all namespaces".
    pub fn targets_all_namespaces(&self) -> bool {
        self.status.as_ref().and_then(|s| s.namespaces.as_deref()) == Some(&[String::new()][..])
    }
}
