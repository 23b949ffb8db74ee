//! `operators.coreos.com/v2`: OperatorCondition (the storage version).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::unknown::default_when_missing;

/// The condition type an operator sets to block or allow upgrades.
pub const UPGRADEABLE: &str = "Upgradeable";

/// The desired state of an OperatorCondition.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(remote = "Self", rename_all = "camelCase")]
#[kube(
    group = "operators.coreos.com",
    version = "v2",
    kind = "OperatorCondition",
    plural = "operatorconditions",
    namespaced,
    status = "OperatorConditionStatus",
    shortname = "condition",
    category = "olm",
    derive = "PartialEq",
    derive = "Default",
    doc = "Conditions an operator reports to OLM (e.g. Upgradeable), and admin overrides."
)]
pub struct OperatorConditionSpec {
    /// The service accounts allowed to update this object (the operator's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_accounts: Option<Vec<String>>,
    /// The operator's Deployments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployments: Option<Vec<String>>,
    /// Admin overrides; they win over what the operator reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overrides: Option<Vec<crate::common::ConditionOverride>>,
    /// What the operator reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
}
default_when_missing!(OperatorConditionSpec);

/// The observed state of an OperatorCondition.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperatorConditionStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
}

impl OperatorCondition {
    /// The effective `Upgradeable` status and message: an override wins over the
    /// operator's report. `None` when neither says anything.
    /// After the overrides, the operator's report: `False` in the spec counts at once; then,
    /// as upstream, the status condition, which must be for the object's generation (a stale
    /// one blocks: "the operatorcondition status ... is outdated").
    pub fn upgradeable(&self) -> Option<(crate::common::ConditionStatus, std::borrow::Cow<'_, str>)> {
        use crate::common::ConditionStatus;
        let overrides = self.spec.overrides.as_deref().unwrap_or_default();
        if let Some(o) = overrides.iter().find(|c| c.type_ == UPGRADEABLE) {
            return Some((o.status.clone(), o.message.as_str().into()));
        }
        let reported = self.spec.conditions.as_deref().unwrap_or_default().iter().find(|c| c.type_ == UPGRADEABLE);
        if let Some(c) = reported.filter(|c| ConditionStatus::parse(&c.status) == ConditionStatus::False) {
            return Some((ConditionStatus::False, c.message.as_str().into()));
        }
        let status = self.status.as_ref().and_then(|s| s.conditions.as_deref()).unwrap_or_default().iter().find(|c| c.type_ == UPGRADEABLE);
        if let Some(c) = status {
            if c.observed_generation != self.metadata.generation {
                return Some((ConditionStatus::False, format!("the operatorcondition status \"{}\"=\"{}\" is outdated", c.type_, c.status).into()));
            }
            return Some((ConditionStatus::parse(&c.status), c.message.as_str().into()));
        }
        reported.map(|c| (ConditionStatus::parse(&c.status), c.message.as_str().into()))
    }
}
