//! `ClusterExtension`, `olm.operatorframework.io/v1`: one package installed from the
//! ClusterCatalogs into a namespace, its bundle rendered to plain objects (no CSV).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::cel;
use super::rules::*;
use crate::enums::closed_string_enum;

closed_string_enum! {
    /// `spec.source.sourceType`; only catalogs exist.
    pub enum SourceType {
        Catalog = "Catalog",
    }
}

closed_string_enum! {
    /// Whether an upgrade must follow the catalog's upgrade graph (`CatalogProvided`, the
    /// default) or may go to any version the range allows (`SelfCertified`).
    pub enum UpgradeConstraintPolicy {
        CatalogProvided = "CatalogProvided",
        SelfCertified = "SelfCertified",
    }
}

impl Default for UpgradeConstraintPolicy {
    fn default() -> Self {
        UpgradeConstraintPolicy::CatalogProvided
    }
}

closed_string_enum! {
    /// `spec.install.preflight.crdUpgradeSafety.enforcement`.
    pub enum CrdUpgradeSafetyEnforcement {
        None = "None",
        Strict = "Strict",
    }
}

closed_string_enum! {
    /// `spec.config.configType`.
    pub enum ConfigType {
        Inline = "Inline",
    }
}

/// The desired state of a ClusterExtension.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
// kube-derive takes one `printcolumn(...)` per column; clippy mistakes them for duplicates.
#[allow(clippy::duplicated_attributes)]
#[kube(
    group = "olm.operatorframework.io",
    version = "v1",
    kind = "ClusterExtension",
    plural = "clusterextensions",
    status = "ClusterExtensionStatus",
    derive = "PartialEq",
    printcolumn(name = "Installed Bundle", type_ = "string", json_path = ".status.install.bundle.name"),
    printcolumn(name = "Version", type_ = "string", json_path = ".status.install.bundle.version"),
    printcolumn(name = "Installed", type_ = "string", json_path = ".status.conditions[?(@.type=='Installed')].status"),
    printcolumn(name = "Progressing", type_ = "string", json_path = ".status.conditions[?(@.type=='Progressing')].status"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    doc = "A package installed from the cluster's catalogs, and kept at the version its spec allows."
)]
pub struct ClusterExtensionSpec {
    /// The namespace the extension's namespaced objects go into (created when missing).
    #[schemars(length(max = 63), extend("x-kubernetes-validations" = cel(&[
        (IMMUTABLE, "namespace is immutable"),
        (DNS1123_LABEL, "namespace must be a valid DNS1123 label"),
    ])))]
    pub namespace: String,
    /// The ServiceAccount in `namespace` whose permissions the install runs with. olm-rs
    /// honours it (operator-controller v1.11 ignores it and installs as itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<ServiceAccountReference>,
    /// Where the content comes from.
    pub source: SourceConfig,
    /// Options of the install (preflight checks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install: Option<ClusterExtensionInstallConfig>,
    /// Configuration given to the bundle (`watchNamespace` for registry+v1 bundles).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<ClusterExtensionConfig>,
    /// How long an install or upgrade may take before `Progressing` says
    /// `ProgressDeadlineExceeded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "progress_deadline_minutes")]
    pub progress_deadline_minutes: Option<i32>,
}

/// A ServiceAccount by name. An empty object is refused (`minProperties: 1`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[schemars(extend("minProperties" = 1))]
pub struct ServiceAccountReference {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), extend("x-kubernetes-validations" = cel(&[
        (IMMUTABLE, "name is immutable once set but may be cleared"),
        (DNS1123_SUBDOMAIN, SERVICE_ACCOUNT_SUBDOMAIN_MESSAGE),
    ])))]
    pub name: Option<String>,
}

/// The source of an extension: a discriminated union on `sourceType`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = cel(&[(
    "has(self.sourceType) && self.sourceType == 'Catalog' ? has(self.catalog) : !has(self.catalog)",
    "catalog is required when sourceType is Catalog, and forbidden otherwise",
)])))]
pub struct SourceConfig {
    pub source_type: SourceType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog: Option<CatalogFilter>,
}

/// Which bundle of which package, from which catalogs.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CatalogFilter {
    #[schemars(length(max = 253), extend("x-kubernetes-validations" = cel(&[
        (IMMUTABLE, "packageName is immutable"),
        (DNS1123_SUBDOMAIN, PACKAGE_NAME_SUBDOMAIN_MESSAGE),
    ])))]
    pub package_name: String,
    /// A version or range (`1.2.3`, `>=1.2, <2`, `~1.2`, `1.x`): Masterminds/semver's syntax.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64), extend("x-kubernetes-validations" = cel(&[(VERSION_RANGE, "invalid version expression")])))]
    pub version: Option<String>,
    /// Only bundles in one of these channels; all channels when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "channels")]
    pub channels: Option<Vec<String>>,
    /// Only catalogs whose labels match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "label_selector")]
    pub selector: Option<LabelSelector>,
    #[serde(default)]
    pub upgrade_constraint_policy: UpgradeConstraintPolicy,
}

/// Install options: a union with at least one member set.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = cel(&[("has(self.preflight)", "at least one of [preflight] are required when install is specified")])))]
pub struct ClusterExtensionInstallConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preflight: Option<PreflightConfig>,
}

/// The checks run before an install or upgrade is applied.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = cel(&[("has(self.crdUpgradeSafety)", "at least one of [crdUpgradeSafety] are required when preflight is specified")])))]
pub struct PreflightConfig {
    pub crd_upgrade_safety: CrdUpgradeSafetyPreflightConfig,
}

/// Whether a CRD change that could lose data or break clients blocks the upgrade.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct CrdUpgradeSafetyPreflightConfig {
    pub enforcement: CrdUpgradeSafetyEnforcement,
}

/// Configuration for the bundle: a discriminated union on `configType`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = cel(&[(
    "has(self.configType) && self.configType == 'Inline' ?has(self.inline) : !has(self.inline)",
    "inline is required when configType is Inline, and forbidden otherwise",
)])))]
pub struct ClusterExtensionConfig {
    pub config_type: ConfigType,
    /// For registry+v1 bundles: `{"watchNamespace": "…"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "inline_config")]
    pub inline: Option<serde_json::Map<String, serde_json::Value>>,
}

/// The observed state of a ClusterExtension.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterExtensionStatus {
    /// `Installed`, `Progressing` and the four deprecation conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions")]
    pub conditions: Vec<Condition>,
    /// The bundle installed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install: Option<ClusterExtensionInstallStatus>,
    /// Revisions still being rolled out or kept running (upstream's Boxcutter runtime).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub active_revisions: Option<Vec<RevisionStatus>>,
}

/// What is installed.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct ClusterExtensionInstallStatus {
    pub bundle: BundleMetadata,
}

/// A bundle by name and version.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct BundleMetadata {
    #[schemars(extend("x-kubernetes-validations" = cel(&[(DNS1123_SUBDOMAIN, PACKAGE_NAME_SUBDOMAIN_MESSAGE)])))]
    pub name: String,
    #[schemars(extend("x-kubernetes-validations" = cel(&[(SEMVER, "version must be well-formed semver")])))]
    pub version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 20), extend("x-kubernetes-validations" = cel(&[(RELEASE, "release must be empty or consist of dot-separated identifiers (numeric without leading zeros, or alphanumeric)")])))]
    pub release: Option<String>,
}

/// A revision's name and its conditions.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct RevisionStatus {
    pub name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions")]
    pub conditions: Vec<Condition>,
}

impl ClusterExtension {
    /// The catalog filter, when the source is a catalog.
    pub fn catalog(&self) -> Option<&CatalogFilter> {
        self.spec.source.catalog.as_ref()
    }

    /// The conditions of the status, empty when none.
    pub fn conditions(&self) -> &[Condition] {
        self.status.as_ref().map_or(&[], |s| s.conditions.as_slice())
    }

    /// `config.inline.watchNamespace`, when given.
    pub fn watch_namespace(&self) -> Option<&str> {
        self.spec.config.as_ref()?.inline.as_ref()?.get("watchNamespace")?.as_str()
    }

    /// Whether CRD upgrade safety is enforced (the default).
    pub fn crd_upgrade_safety(&self) -> bool {
        let enforcement = self.spec.install.as_ref().and_then(|i| i.preflight.as_ref()).map(|p| p.crd_upgrade_safety.enforcement);
        enforcement != Some(CrdUpgradeSafetyEnforcement::None)
    }
}
