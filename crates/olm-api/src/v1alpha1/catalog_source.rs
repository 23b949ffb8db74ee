//! `CatalogSource` (`catsrc`): where a namespace's operator catalog comes from.

// kube-derive takes one `printcolumn(...)` per column; clippy mistakes them for duplicates.
#![allow(clippy::duplicated_attributes)]

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Affinity, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::cluster_service_version::Icon;
use crate::enums::{closed_string_enum, open_string_enum};
use crate::unknown::{ExtraFields, keep_unknown_fields};

/// The poll interval used when `spec.updateStrategy.registryPoll.interval` does not parse.
pub const DEFAULT_REGISTRY_POLL_INTERVAL: std::time::Duration = std::time::Duration::from_secs(15 * 60);

open_string_enum! {
    /// `spec.sourceType` (a plain string in upstream's CRD: an unknown type is accepted, and
    /// the CatalogSource reports it as an invalid spec).
    pub enum SourceType {
        /// Deprecated; behaves like `configmap`.
        Internal = "internal",
        ConfigMap = "configmap",
        Grpc = "grpc",
    }
}

open_string_enum! {
    /// `status.reason` of a CatalogSource: why its content is not served as the spec says.
    /// Upstream types it as the CSV's `ConditionReason` and defines these four for it.
    pub enum CatalogSourceReason {
        /// The spec names no usable source (`spec.message` says what is missing).
        SpecInvalidError = "SpecInvalidError",
        /// The ConfigMap of a `configmap` catalog is missing or its content cannot be used.
        ConfigMapError = "ConfigMapError",
        /// The catalog's server or image cannot be read.
        RegistryServerError = "RegistryServerError",
        /// `spec.updateStrategy.registryPoll.interval` is not a usable duration.
        InvalidIntervalError = "InvalidIntervalError",
    }
}

closed_string_enum! {
    /// `spec.grpcPodConfig.securityContextConfig`.
    pub enum SecurityConfig {
        Legacy = "legacy",
        Restricted = "restricted",
    }
}

/// The desired state of a CatalogSource.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(remote = "Self", rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
#[kube(
    group = "operators.coreos.com",
    version = "v1alpha1",
    kind = "CatalogSource",
    plural = "catalogsources",
    namespaced,
    status = "CatalogSourceStatus",
    shortname = "catsrc",
    category = "olm",
    derive = "PartialEq",
    doc = "A repository of operator bundles that OLM can install from.",
    printcolumn(name = "Display", type_ = "string", json_path = ".spec.displayName", description = "The pretty name of the catalog"),
    printcolumn(name = "Type", type_ = "string", json_path = ".spec.sourceType", description = "The type of the catalog"),
    printcolumn(name = "Publisher", type_ = "string", json_path = ".spec.publisher", description = "The publisher of the catalog"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
pub struct CatalogSourceSpec {
    pub source_type: SourceType,
    /// Higher is preferred when several catalogs provide a dependency. Defaults to 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    /// For `configmap`: the ConfigMap holding the catalog.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<String>,
    /// For `grpc`: `host:port` of an existing registry server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// For `grpc`: the catalog image OLM runs as a registry pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc_pod_config: Option<GrpcPodConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_strategy: Option<UpdateStrategy>,
    /// Pull secrets for the catalog image and its bundles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secrets: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publisher: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon: Option<Icon>,
    #[serde(skip)]
    #[schemars(skip)]
    pub extra: ExtraFields,
}
keep_unknown_fields!(CatalogSourceSpec);

impl CatalogSourceSpec {
    /// The registry poll interval as written, if any.
    pub fn poll_interval(&self) -> Option<&str> {
        self.update_strategy.as_ref()?.registry_poll.as_ref()?.interval.as_deref()
    }

    /// Whether OLM polls the image for updates (grpc source with an image and a poll
    /// strategy), as upstream decides.
    pub fn polls(&self) -> bool {
        self.source_type == SourceType::Grpc
            && self.image.as_deref().is_some_and(|image| !image.is_empty())
            && self.update_strategy.as_ref().is_some_and(|u| u.registry_poll.is_some())
    }
}

/// `spec.grpcPodConfig`: scheduling and resources of the registry pod.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrpcPodConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::string_map")]
    pub node_selector: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context_config: Option<SecurityConfig>,
    /// Sets GOMEMLIMIT and the memory request of the registry container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_target: Option<Quantity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extract_content: Option<ExtractContentConfig>,
}

/// `spec.grpcPodConfig.extractContent`: serve the FBC copied out of the image.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExtractContentConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_dir: Option<String>,
    pub catalog_dir: String,
}

/// `spec.updateStrategy`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateStrategy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry_poll: Option<RegistryPoll>,
}

/// `spec.updateStrategy.registryPoll`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct RegistryPoll {
    /// How often to check the catalog image for updates, as a Go duration (`15m`, `1h30m`).
    /// An unparsable value falls back to 15m and is reported in the status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
}

/// The observed state of a CatalogSource.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CatalogSourceStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `SpecInvalidError`, `ConfigMapError`, `RegistryServerError` or `InvalidIntervalError`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<CatalogSourceReason>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest_image_registry_poll: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "configMapReference")]
    pub config_map_reference: Option<ConfigMapResourceReference>,
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "registryService")]
    pub registry_service: Option<RegistryServiceStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "connectionState")]
    pub connection_state: Option<GrpcConnectionState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
}

/// The ConfigMap a `configmap` catalog was last built from.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapResourceReference {
    pub name: String,
    pub namespace: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
}

/// The Service in front of the registry pod.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegistryServiceStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_namespace: Option<String>,
    /// The port, as a string (`"50051"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Time>,
}

/// The last observed gRPC connection state (`IDLE`, `CONNECTING`, `READY`,
/// `TRANSIENT_FAILURE`, `SHUTDOWN`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrpcConnectionState {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    #[serde(default)]
    pub last_observed_state: String,
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "lastConnect")]
    pub last_connect: Option<Time>,
}
