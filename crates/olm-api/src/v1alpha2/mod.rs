//! `operators.coreos.com/v1alpha2`: the older, still served OperatorGroup version.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::unknown::default_when_missing;

/// The desired state of a v1alpha2 OperatorGroup (no `upgradeStrategy`).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(remote = "Self", rename_all = "camelCase")]
#[kube(
    group = "operators.coreos.com",
    version = "v1alpha2",
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_namespaces: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "staticProvidedAPIs")]
    pub static_provided_apis: Option<bool>,
}
default_when_missing!(OperatorGroupSpec);

/// The observed state of a v1alpha2 OperatorGroup.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperatorGroupStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_ref: Option<ObjectReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_updated: Option<Time>,
}
