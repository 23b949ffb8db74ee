//! `Operator`, `operators.coreos.com/v1`, cluster-scoped: everything belonging to one
//! installed operator, gathered by label.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::ConditionStatus;
use crate::unknown::default_when_missing;

/// An Operator has no desired state; everything is in its status.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(remote = "Self")]
#[kube(
    group = "operators.coreos.com",
    version = "v1",
    kind = "Operator",
    plural = "operators",
    status = "OperatorStatus",
    category = "olm",
    derive = "PartialEq",
    derive = "Default",
    doc = "An installed operator and the objects that belong to it."
)]
pub struct OperatorSpec {}
default_when_missing!(OperatorSpec);

/// The observed state of an Operator.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperatorStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub components: Option<Components>,
}

/// The operator's components: a label selector and what it currently matches.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Components {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refs: Option<Vec<RichReference>>,
}

/// A reference to a component, with conditions copied from it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RichReference {
    #[serde(flatten)]
    pub object: ObjectReference,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<OperatorComponentCondition>>,
}

/// A component's condition (for a CSV: its phase as the type, status `True`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperatorComponentCondition {
    #[serde(rename = "type")]
    pub type_: String,
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

impl Operator {
    /// The components listed in the status (none before the first status write).
    pub fn component_refs(&self) -> &[RichReference] {
        self.status
            .as_ref()
            .and_then(|s| s.components.as_ref())
            .and_then(|c| c.refs.as_deref())
            .unwrap_or_default()
    }
}
