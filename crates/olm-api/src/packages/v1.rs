//! `packages.operators.coreos.com/v1` PackageManifest.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ListMeta, ObjectMeta};
use serde::{Deserialize, Serialize};

use crate::v1alpha1::cluster_service_version::StrategyDeploymentPermissions;
use crate::v1alpha1::{ApiServiceDefinitions, AppLink, CustomResourceDefinitions, GroupVersionKind, InstallMode, Maintainer};

/// The API group.
pub const GROUP: &str = "packages.operators.coreos.com";
/// The API version.
pub const VERSION: &str = "v1";
/// `apiVersion` of these objects.
pub const API_VERSION: &str = "packages.operators.coreos.com/v1";
/// Resource (plural) name.
pub const PLURAL: &str = "packagemanifests";

fn api_version() -> String {
    API_VERSION.to_owned()
}

fn kind_manifest() -> String {
    "PackageManifest".to_owned()
}

fn kind_list() -> String {
    "PackageManifestList".to_owned()
}

/// One package of one catalog, as packageserver shows it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PackageManifest {
    #[serde(default = "api_version")]
    pub api_version: String,
    #[serde(default = "kind_manifest")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Always empty.
    #[serde(default)]
    pub spec: PackageManifestSpec,
    #[serde(default)]
    pub status: PackageManifestStatus,
}

impl PackageManifest {
    /// A manifest with `apiVersion`/`kind` set.
    pub fn new(metadata: ObjectMeta, status: PackageManifestStatus) -> Self {
        PackageManifest { api_version: api_version(), kind: kind_manifest(), metadata, spec: PackageManifestSpec {}, status }
    }

    /// The default channel, or the only channel when none is named.
    pub fn default_channel(&self) -> Option<&str> {
        if !self.status.default_channel.is_empty() {
            return Some(&self.status.default_channel);
        }
        match self.status.channels.as_slice() {
            [only] => Some(&only.name),
            _ => None,
        }
    }

    /// The channel a package is shown by: its default channel, else its first.
    pub fn shown_channel(&self) -> Option<&PackageChannel> {
        let default = self.default_channel();
        self.status.channels.iter().find(|c| Some(c.name.as_str()) == default).or(self.status.channels.first())
    }
}

/// A list of PackageManifests.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PackageManifestList {
    #[serde(default = "api_version")]
    pub api_version: String,
    #[serde(default = "kind_list")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ListMeta,
    #[serde(default)]
    pub items: Vec<PackageManifest>,
}

impl PackageManifestList {
    /// A list with `apiVersion`/`kind` set.
    pub fn new(items: Vec<PackageManifest>) -> Self {
        PackageManifestList { api_version: api_version(), kind: kind_list(), metadata: ListMeta::default(), items }
    }
}

/// Always empty.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct PackageManifestSpec {}

/// What packageserver knows about the package.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PackageManifestStatus {
    #[serde(default)]
    pub catalog_source: String,
    #[serde(default)]
    pub catalog_source_display_name: String,
    #[serde(default)]
    pub catalog_source_publisher: String,
    #[serde(default)]
    pub catalog_source_namespace: String,
    #[serde(default)]
    pub provider: AppLink,
    #[serde(default)]
    pub package_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecation: Option<Deprecation>,
    /// Sorted by name.
    #[serde(default)]
    pub channels: Vec<PackageChannel>,
    #[serde(default)]
    pub default_channel: String,
}

/// A deprecation notice.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Deprecation {
    pub message: String,
}

/// One channel of the package.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PackageChannel {
    pub name: String,
    /// The channel head.
    #[serde(rename = "currentCSV")]
    pub current_csv: String,
    #[serde(rename = "currentCSVDesc", default)]
    pub current_csv_desc: CsvDescription,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecation: Option<Deprecation>,
    /// Newest first.
    #[serde(default)]
    pub entries: Vec<ChannelEntry>,
}

/// A bundle of a channel.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ChannelEntry {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecation: Option<Deprecation>,
}

/// The channel head's CSV metadata.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CsvDescription {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub display_name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub icon: Vec<PackageIcon>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
    #[serde(default)]
    pub provider: AppLink,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keywords: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<AppLink>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub maintainers: Vec<Maintainer>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub maturity: String,
    /// The CSV's `spec.description`.
    #[serde(default, skip_serializing_if = "String::is_empty", rename = "description")]
    pub long_description: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub install_modes: Vec<InstallMode>,
    #[serde(default, rename = "customresourcedefinitions")]
    pub custom_resource_definitions: CustomResourceDefinitions,
    #[serde(default, rename = "apiservicedefinitions")]
    pub api_service_definitions: ApiServiceDefinitions,
    /// Note the spelling: `nativeApis` here, `nativeAPIs` in the CSV.
    #[serde(default, skip_serializing_if = "Vec::is_empty", rename = "nativeApis")]
    pub native_apis: Vec<GroupVersionKind>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub min_kube_version: String,
    /// Image references only (not `{name, image}` as in the CSV).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub related_images: Vec<String>,
    /// olm-rs's addition, which upstream's clients ignore: what the CSV's install grants, so a
    /// console can show it before anything is installed. Absent when the catalog carries only
    /// the CSV's metadata (no install strategy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_permissions: Option<InstallPermissions>,
    /// olm-rs's addition: the packages the head bundle needs installed beside it
    /// (`olm.package.required`), which OLM resolves and installs with it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_packages: Vec<RequiredPackage>,
    /// olm-rs's addition: the APIs the head bundle needs another operator to provide
    /// (`olm.gvk.required`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_apis: Vec<GroupVersionKind>,
}

/// A package a bundle requires, and the versions of it that do.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RequiredPackage {
    pub package_name: String,
    pub version_range: String,
}

/// The permissions of a CSV's install strategy, as its `spec.install.spec` lists them.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct InstallPermissions {
    /// Granted in each namespace the operator watches.
    #[serde(default)]
    pub permissions: Vec<StrategyDeploymentPermissions>,
    /// Granted cluster-wide.
    #[serde(default)]
    pub cluster_permissions: Vec<StrategyDeploymentPermissions>,
}

/// An icon; both fields are optional here (unlike the CSV's icon).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct PackageIcon {
    #[serde(default, skip_serializing_if = "String::is_empty", rename = "base64data")]
    pub base64_data: String,
    #[serde(default, skip_serializing_if = "String::is_empty", rename = "mediatype")]
    pub media_type: String,
}
