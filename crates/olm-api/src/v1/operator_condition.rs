//! `OperatorCondition` (`condition`), `operators.coreos.com/v1` (served, not stored).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::unknown::default_when_missing;

/// The desired state of a v1 OperatorCondition (v2 adds `spec.conditions`).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(remote = "Self", rename_all = "camelCase")]
#[kube(
    group = "operators.coreos.com",
    version = "v1",
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_accounts: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployments: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overrides: Option<Vec<crate::common::ConditionOverride>>,
}
default_when_missing!(OperatorConditionSpec);

/// The observed state of an OperatorCondition.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperatorConditionStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
}
