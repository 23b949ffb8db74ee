//! `OLMConfig`, `operators.coreos.com/v1`, cluster-scoped; a singleton named `cluster`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::unknown::default_when_missing;

/// The name of the one OLMConfig OLM reads.
pub const OLM_CONFIG_NAME: &str = "cluster";
/// Condition type reporting whether copied CSVs are disabled.
pub const DISABLED_COPIED_CSVS_CONDITION: &str = "DisabledCopiedCSVs";
/// Reason when copied CSVs are enabled.
pub const COPIED_CSVS_ENABLED_REASON: &str = "CopiedCSVsEnabled";
/// Reason when copied CSVs are disabled.
pub const COPIED_CSVS_DISABLED_REASON: &str = "CopiedCSVsDisabled";

/// Cluster-wide OLM settings.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(remote = "Self", rename_all = "camelCase")]
#[kube(
    group = "operators.coreos.com",
    version = "v1",
    kind = "OLMConfig",
    plural = "olmconfigs",
    status = "OLMConfigStatus",
    category = "olm",
    derive = "PartialEq",
    derive = "Default",
    doc = "Cluster-wide configuration of OLM (a singleton named `cluster`)."
)]
pub struct OLMConfigSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub features: Option<Features>,
}
default_when_missing!(OLMConfigSpec);

/// `spec.features`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Features {
    /// When true, operators installed for all namespaces get no copied CSVs.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "disableCopiedCSVs")]
    pub disable_copied_csvs: Option<bool>,
    /// How often packageserver re-reads catalogs, as a Go duration (`5m`, `1h30m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(s|m|h))+$"))]
    pub package_server_sync_interval: Option<String>,
}

/// The observed state of the OLMConfig.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OLMConfigStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
}

impl OLMConfig {
    /// Whether copied CSVs are disabled (default: no).
    pub fn copied_csvs_disabled(&self) -> bool {
        self.spec.features.as_ref().and_then(|f| f.disable_copied_csvs).unwrap_or(false)
    }
}
