//! Small types shared by several kinds.

use crate::enums::open_string_enum;

open_string_enum! {
    /// The status of a condition: `True`, `False` or `Unknown` (corev1.ConditionStatus).
    pub enum ConditionStatus {
        True = "True",
        False = "False",
        Unknown = "Unknown",
    }
}

impl ConditionStatus {
    /// `True` or `False` from a boolean.
    pub fn from_bool(value: bool) -> Self {
        if value { ConditionStatus::True } else { ConditionStatus::False }
    }
}

/// An admin override of a condition the operator reports; it wins over the operator's value.
// Like metav1.Condition, except that `lastTransitionTime` may be omitted (upstream's schema
// allows that for overrides, and its documented examples omit it).
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConditionOverride {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: ConditionStatus,
    pub reason: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
