//! `ClusterServiceVersion` (`csv`): one version of an operator and how to install it.
//!
//! Longer than ~600 lines: the CSV type is upstream's largest; most of the length is its round-trip tests.

// kube-derive takes one `printcolumn(...)` per column; clippy mistakes them for duplicates.
#![allow(clippy::duplicated_attributes)]

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::admissionregistration::v1::RuleWithOperations;
use k8s_openapi::api::apps::v1::DeploymentSpec;
use k8s_openapi::api::rbac::v1::PolicyRule;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::enums::{closed_string_enum, open_string_enum};
use crate::unknown::{ExtraFields, Verbatim, keep_unknown_fields};

/// The only install strategy name upstream knows.
pub const INSTALL_STRATEGY_DEPLOYMENT: &str = "deployment";

/// Upstream keeps at most this many entries in `status.conditions`.
pub const CONDITIONS_LENGTH_LIMIT: usize = 20;

/// The desired state of a ClusterServiceVersion.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(remote = "Self", rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
#[kube(
    group = "operators.coreos.com",
    version = "v1alpha1",
    kind = "ClusterServiceVersion",
    plural = "clusterserviceversions",
    namespaced,
    status = "ClusterServiceVersionStatus",
    shortname = "csv",
    shortname = "csvs",
    category = "olm",
    derive = "PartialEq",
    doc = "A version of an operator: what it provides and requires, and how to install it.",
    printcolumn(name = "Display", type_ = "string", json_path = ".spec.displayName", description = "The name of the CSV"),
    printcolumn(name = "Version", type_ = "string", json_path = ".spec.version", description = "The version of the CSV"),
    printcolumn(name = "Release", type_ = "string", json_path = ".spec.release", description = "The release of this version of the CSV"),
    printcolumn(name = "Replaces", type_ = "string", json_path = ".spec.replaces", description = "The name of a CSV that this one replaces"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase")
)]
pub struct ClusterServiceVersionSpec {
    /// How to install the operator.
    // Shared: every namespace's CSV of one operator carries the same strategy, and a watch
    // cache keeps one copy of it (see the CSV cache's trim).
    pub install: Arc<NamedInstallStrategy>,
    /// The operator's semantic version.
    // Kept as written; `ClusterServiceVersionSpec::semver` parses it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The packaging release of this version: dot-separated alphanumeric identifiers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 20),
        extend("x-kubernetes-validations" = [
            {
                "rule": "self.matches('^[0-9A-Za-z-]+(\\\\.[0-9A-Za-z-]+)*$')",
                "message": "release version must be composed of dot-separated identifiers containing only alphanumerics and hyphens"
            },
            {
                "rule": "!self.split('.').exists(x, x.matches('^0[0-9]+$'))",
                "message": "numeric identifiers in release version must not have leading zeros"
            }
        ])
    )]
    pub release: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maturity: Option<String>,
    /// CRDs the operator owns (and so provides) or requires.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "customresourcedefinitions")]
    pub custom_resource_definitions: Option<CustomResourceDefinitions>,
    /// Aggregated APIs the operator owns or requires.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "apiservicedefinitions")]
    pub api_service_definitions: Option<ApiServiceDefinitions>,
    /// Admission and conversion webhooks OLM sets up for the operator.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "webhookdefinitions")]
    pub webhook_definitions: Option<Vec<WebhookDescription>>,
    /// Built-in APIs the operator needs.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "nativeAPIs")]
    pub native_apis: Option<Vec<GroupVersionKind>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_kube_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keywords: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintainers: Option<Vec<Maintainer>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<AppLink>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub links: Option<Vec<AppLink>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon: Option<Vec<Icon>>,
    /// Which OperatorGroup shapes the operator supports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_modes: Option<Vec<InstallMode>>,
    /// The name of the CSV this one replaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::string_map")]
    pub labels: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::string_map")]
    pub annotations: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleanup: Option<CleanupSpec>,
    /// CSV names this one may upgrade from directly (catalog-time only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skips: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub related_images: Option<Vec<RelatedImage>>,
    /// Keys this version does not model (kept for round trips; pruned by the apiserver).
    #[serde(skip)]
    #[schemars(skip)]
    pub extra: ExtraFields,
}
keep_unknown_fields!(ClusterServiceVersionSpec);

impl ClusterServiceVersionSpec {
    /// `spec.version` parsed the way upstream does (a leading `v` and missing minor/patch are
    /// tolerated). `None` when absent; `Err` names the bad value.
    pub fn semver(&self) -> Option<Result<semver_lite::Version, String>> {
        self.version.as_deref().map(semver_lite::parse_tolerant)
    }

    /// The display name, or `""`.
    pub fn display_name(&self) -> &str {
        self.display_name.as_deref().unwrap_or_default()
    }

    /// Install modes as a list (empty when absent).
    pub fn install_modes(&self) -> &[InstallMode] {
        self.install_modes.as_deref().unwrap_or_default()
    }

    /// Owned CRD descriptions (empty when absent).
    pub fn owned_crds(&self) -> &[CrdDescription] {
        self.custom_resource_definitions.as_ref().and_then(|c| c.owned.as_deref()).unwrap_or_default()
    }

    /// Required CRD descriptions (empty when absent).
    pub fn required_crds(&self) -> &[CrdDescription] {
        self.custom_resource_definitions.as_ref().and_then(|c| c.required.as_deref()).unwrap_or_default()
    }

    /// Owned APIService descriptions (empty when absent).
    pub fn owned_api_services(&self) -> &[ApiServiceDescription] {
        self.api_service_definitions.as_ref().and_then(|c| c.owned.as_deref()).unwrap_or_default()
    }

    /// Required APIService descriptions (empty when absent).
    pub fn required_api_services(&self) -> &[ApiServiceDescription] {
        self.api_service_definitions.as_ref().and_then(|c| c.required.as_deref()).unwrap_or_default()
    }

    /// Webhook descriptions (empty when absent).
    pub fn webhooks(&self) -> &[WebhookDescription] {
        self.webhook_definitions.as_deref().unwrap_or_default()
    }

    /// Names of the Deployments of the `deployment` install strategy, in its order.
    pub fn strategy_deployment_names(&self) -> impl Iterator<Item = &str> {
        self.install.spec.iter().flat_map(|s| s.deployments.iter().map(|d| d.name.as_str()))
    }
}

impl ClusterServiceVersion {
    /// Whether this object is a copy OLM placed in a target namespace (label `olm.copiedFrom`).
    pub fn is_copied(&self) -> bool {
        self.metadata.labels.as_ref().is_some_and(|l| l.contains_key(crate::keys::COPIED_FROM_LABEL))
            || self.status.as_ref().and_then(|s| s.reason.as_ref()) == Some(&CsvReason::Copied)
    }

    /// The current phase (`None` before the first sync).
    pub fn phase(&self) -> Option<&CsvPhase> {
        self.status.as_ref().and_then(|s| s.phase.as_ref())
    }

    /// An annotation value.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.metadata.annotations.as_ref().and_then(|a| a.get(key)).map(String::as_str)
    }
}

/// Minimal semantic-version parsing, kept here so the API crate needs no extra dependency.
pub mod semver_lite {
    /// `major.minor.patch[-pre][+build]`.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct Version {
        pub major: u64,
        pub minor: u64,
        pub patch: u64,
        /// Pre-release identifiers, without the leading `-`.
        pub pre: Option<String>,
        /// Build metadata, without the leading `+`.
        pub build: Option<String>,
    }

    /// Parses like blang/semver's `ParseTolerant`: trims spaces and a leading `v`, fills a
    /// missing minor or patch with 0.
    pub fn parse_tolerant(input: &str) -> Result<Version, String> {
        let trimmed = input.trim();
        let trimmed = trimmed.strip_prefix('v').unwrap_or(trimmed);
        let (rest, build) = match trimmed.split_once('+') {
            Some((rest, build)) => (rest, Some(build.to_owned())),
            None => (trimmed, None),
        };
        let (core, pre) = match rest.split_once('-') {
            Some((core, pre)) => (core, Some(pre.to_owned())),
            None => (rest, None),
        };
        let mut numbers = [0u64; 3];
        let parts: Vec<&str> = core.split('.').collect();
        if parts.is_empty() || parts.len() > 3 {
            return Err(format!("{input:?} is not a semantic version (major.minor.patch)"));
        }
        for (slot, part) in numbers.iter_mut().zip(&parts) {
            *slot = part
                .parse()
                .map_err(|_| format!("{input:?} is not a semantic version: {part:?} is not a number"))?;
        }
        Ok(Version { major: numbers[0], minor: numbers[1], patch: numbers[2], pre, build })
    }
}

#[cfg(test)]
mod semver_tests {
    use super::semver_lite::parse_tolerant;

    #[test]
    fn tolerant_parsing_like_upstream() {
        let v = parse_tolerant("v1.2").expect("v-prefix and missing patch");
        assert_eq!((v.major, v.minor, v.patch), (1, 2, 0));
        let v = parse_tolerant("0.9.2-clusterwide+build.5").expect("pre-release and build");
        assert_eq!(v.pre.as_deref(), Some("clusterwide"));
        assert_eq!(v.build.as_deref(), Some("build.5"));
        assert!(parse_tolerant("1.x.0").is_err());
        assert!(parse_tolerant("1.2.3.4").is_err());
    }
}

/// `spec.install`: the strategy name (always `deployment`) and its details.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(remote = "Self", rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct NamedInstallStrategy {
    /// The install strategy; only `deployment` exists.
    pub strategy: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<StrategyDetailsDeployment>,
    #[serde(skip)]
    #[schemars(skip)]
    pub extra: ExtraFields,
}
keep_unknown_fields!(NamedInstallStrategy);

/// `spec.install.spec`: the Deployments and RBAC of a `deployment` strategy.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(remote = "Self", rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct StrategyDetailsDeployment {
    #[serde(default)]
    pub deployments: Vec<StrategyDeploymentSpec>,
    /// Namespaced permissions, per service account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<Vec<StrategyDeploymentPermissions>>,
    /// Cluster-wide permissions, per service account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_permissions: Option<Vec<StrategyDeploymentPermissions>>,
    #[serde(skip)]
    #[schemars(skip)]
    pub extra: ExtraFields,
}
keep_unknown_fields!(StrategyDetailsDeployment);

/// One Deployment OLM creates for the operator.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(remote = "Self", rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct StrategyDeploymentSpec {
    pub name: String,
    /// The Deployment's spec.
    // Kept verbatim when unchanged (see `Verbatim`); not validated by the CRD schema.
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub spec: Verbatim<DeploymentSpec>,
    /// Extra labels for the Deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::string_map")]
    pub label: Option<BTreeMap<String, String>>,
    #[serde(skip)]
    #[schemars(skip)]
    pub extra: ExtraFields,
}
keep_unknown_fields!(StrategyDeploymentSpec);

/// RBAC rules for one service account.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StrategyDeploymentPermissions {
    pub service_account_name: String,
    #[serde(default)]
    pub rules: Vec<Verbatim<PolicyRule>>,
}

/// `spec.customresourcedefinitions`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CustomResourceDefinitions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owned: Option<Vec<CrdDescription>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<Vec<CrdDescription>>,
}

/// `spec.apiservicedefinitions`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiServiceDefinitions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owned: Option<Vec<ApiServiceDescription>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<Vec<ApiServiceDescription>>,
}

/// A CRD the operator owns or requires.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(remote = "Self", rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct CrdDescription {
    /// The CRD's name, `<plural>.<group>`.
    pub name: String,
    pub version: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Vec<ApiResourceReference>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_descriptors: Option<Vec<Descriptor>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_descriptors: Option<Vec<Descriptor>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_descriptors: Option<Vec<Descriptor>>,
    #[serde(skip)]
    #[schemars(skip)]
    pub extra: ExtraFields,
}
keep_unknown_fields!(CrdDescription);

impl CrdDescription {
    /// The group part of `name` (`<plural>.<group>`).
    pub fn group(&self) -> &str {
        self.name.split_once('.').map(|(_, group)| group).unwrap_or_default()
    }
}

/// An aggregated API the operator owns or requires.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(remote = "Self", rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct ApiServiceDescription {
    pub name: String,
    pub group: String,
    pub version: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_port: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Vec<ApiResourceReference>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_descriptors: Option<Vec<Descriptor>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_descriptors: Option<Vec<Descriptor>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_descriptors: Option<Vec<Descriptor>>,
    #[serde(skip)]
    #[schemars(skip)]
    pub extra: ExtraFields,
}
keep_unknown_fields!(ApiServiceDescription);

impl ApiServiceDescription {
    /// The APIService object name, `<version>.<group>`.
    pub fn api_service_name(&self) -> String {
        format!("{}.{}", self.version, self.group)
    }
}

/// A Kubernetes resource kind used by a custom resource.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiResourceReference {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub kind: String,
    pub version: String,
}

/// A spec, status or action descriptor: UI hints for one field of a custom resource.
// Upstream has three identical Go types; one is enough here.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "x-descriptors")]
    pub x_descriptors: Option<Vec<String>>,
    /// Any JSON value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::any_json")]
    pub value: Option<Value>,
}

closed_string_enum! {
    /// `spec.webhookdefinitions[].type`.
    pub enum WebhookAdmissionType {
        ValidatingAdmissionWebhook = "ValidatingAdmissionWebhook",
        MutatingAdmissionWebhook = "MutatingAdmissionWebhook",
        ConversionWebhook = "ConversionWebhook",
    }
}

/// A webhook OLM configures for the operator.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(remote = "Self", rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct WebhookDescription {
    pub generate_name: String,
    #[serde(rename = "type")]
    pub type_: WebhookAdmissionType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_name: Option<String>,
    /// Defaults to 443.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535), extend("default" = 443))]
    pub container_port: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_port: Option<IntOrString>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<Vec<RuleWithOperations>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_selector: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub side_effects: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission_review_versions: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reinvocation_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "conversionCRDs")]
    pub conversion_crds: Option<Vec<String>>,
    #[serde(skip)]
    #[schemars(skip)]
    pub extra: ExtraFields,
}
keep_unknown_fields!(WebhookDescription);

impl WebhookDescription {
    /// The container port, defaulting to 443 as upstream's CRD does.
    pub fn port(&self) -> i32 {
        self.container_port.unwrap_or(443)
    }

    /// The Service name upstream derives: the deployment name with dots replaced by dashes,
    /// plus `-service`.
    pub fn service_name(&self) -> String {
        format!("{}-service", self.deployment_name.as_deref().unwrap_or_default().replace('.', "-"))
    }
}

/// A group/version/kind triple (metav1.GroupVersionKind).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema)]
pub struct GroupVersionKind {
    pub group: String,
    pub version: String,
    pub kind: String,
}

closed_string_enum! {
    /// `spec.installModes[].type`: the OperatorGroup shapes an operator can run in.
    pub enum InstallModeType {
        OwnNamespace = "OwnNamespace",
        SingleNamespace = "SingleNamespace",
        MultiNamespace = "MultiNamespace",
        AllNamespaces = "AllNamespaces",
    }
}

/// Why an OperatorGroup's target namespaces fit no install mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InvalidTargets {
    /// No namespace at all.
    Empty,
    /// All namespaces (`""`) among others.
    AllAmongOthers,
}

impl InstallModeType {
    /// The install modes an operator in namespace `own` needs to watch `targets` (an
    /// OperatorGroup's `status.namespaces`, `[""]` meaning all), in upstream's order of checks
    /// (InstallModeSet.Supports): several namespaces need MultiNamespace, and OwnNamespace too
    /// when `own` is one of them.
    pub fn needed_for(own: &str, targets: &[String]) -> Result<Vec<InstallModeType>, InvalidTargets> {
        match targets {
            [] => Err(InvalidTargets::Empty),
            [all] if all.is_empty() => Ok(vec![InstallModeType::AllNamespaces]),
            [only] if only == own => Ok(vec![InstallModeType::OwnNamespace]),
            [_] => Ok(vec![InstallModeType::SingleNamespace]),
            many if many.iter().any(String::is_empty) => Err(InvalidTargets::AllAmongOthers),
            many if many.iter().any(|t| t == own) => Ok(vec![InstallModeType::MultiNamespace, InstallModeType::OwnNamespace]),
            _ => Ok(vec![InstallModeType::MultiNamespace]),
        }
    }
}

/// Whether the operator supports one install mode.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstallMode {
    #[serde(rename = "type")]
    pub type_: InstallModeType,
    pub supported: bool,
}

/// Cleanup behaviour when the CSV is deleted (accepted, not acted on).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct CleanupSpec {
    #[serde(default)]
    pub enabled: bool,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct Maintainer {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct AppLink {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct Icon {
    #[serde(rename = "base64data", default)]
    pub base64_data: String,
    #[serde(rename = "mediatype", default)]
    pub media_type: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct RelatedImage {
    /// A name for the image.
    // Optional in practice (many bundles omit it), although upstream's Go type requires it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub image: String,
}

open_string_enum! {
    /// `status.phase` of a CSV.
    pub enum CsvPhase {
        /// Not yet processed.
        None = "",
        Pending = "Pending",
        InstallReady = "InstallReady",
        Installing = "Installing",
        Succeeded = "Succeeded",
        Failed = "Failed",
        /// Defined upstream, never set.
        Unknown = "Unknown",
        Replacing = "Replacing",
        Deleting = "Deleting",
    }
}

open_string_enum! {
    /// `status.reason` of a CSV (and of its condition history). Upstream's CatalogSource and
    /// Subscription statuses reuse its Go type; here each has its own
    /// (`catalog_source::CatalogSourceReason`, `subscription::SubscriptionReason`).
    pub enum CsvReason {
        RequirementsUnknown = "RequirementsUnknown",
        RequirementsNotMet = "RequirementsNotMet",
        AllRequirementsMet = "AllRequirementsMet",
        OwnerConflict = "OwnerConflict",
        InstallComponentFailed = "InstallComponentFailed",
        InstallComponentFailedNoRetry = "InstallComponentFailedNoRetry",
        InvalidInstallStrategy = "InvalidInstallStrategy",
        InstallWaiting = "InstallWaiting",
        InstallSucceeded = "InstallSucceeded",
        InstallCheckFailed = "InstallCheckFailed",
        ComponentUnhealthy = "ComponentUnhealthy",
        BeingReplaced = "BeingReplaced",
        Replaced = "Replaced",
        NeedsReinstall = "NeedsReinstall",
        NeedsCertRotation = "NeedsCertRotation",
        ApiServiceResourceIssue = "APIServiceResourceIssue",
        ApiServiceResourcesNeedReinstall = "APIServiceResourcesNeedReinstall",
        ApiServiceInstallFailed = "APIServiceInstallFailed",
        Copied = "Copied",
        InvalidInstallModes = "InvalidInstallModes",
        NoTargetNamespaces = "NoTargetNamespaces",
        UnsupportedOperatorGroup = "UnsupportedOperatorGroup",
        NoOperatorGroup = "NoOperatorGroup",
        TooManyOperatorGroups = "TooManyOperatorGroups",
        InterOperatorGroupOwnerConflict = "InterOperatorGroupOwnerConflict",
        CannotModifyStaticOperatorGroupProvidedApis = "CannotModifyStaticOperatorGroupProvidedAPIs",
        DetectedClusterChange = "DetectedClusterChange",
        InvalidWebhookDescription = "InvalidWebhookDescription",
        OperatorConditionNotUpgradeable = "OperatorConditionNotUpgradeable",
        WaitingOnCleanup = "WaitingOnCleanup",
    }
}

impl CsvReason {
    /// Reasons after which a CSV is not copied into target namespaces.
    pub fn is_uncopiable(&self) -> bool {
        matches!(
            self,
            CsvReason::Copied
                | CsvReason::InvalidInstallModes
                | CsvReason::NoTargetNamespaces
                | CsvReason::UnsupportedOperatorGroup
                | CsvReason::NoOperatorGroup
                | CsvReason::TooManyOperatorGroups
                | CsvReason::InterOperatorGroupOwnerConflict
                | CsvReason::CannotModifyStaticOperatorGroupProvidedApis
        )
    }
}

open_string_enum! {
    /// `status.requirementStatus[].status` and `dependents[].status`.
    pub enum StatusReason {
        Present = "Present",
        NotPresent = "NotPresent",
        PresentNotSatisfied = "PresentNotSatisfied",
        PresentNotAvailable = "PresentNotAvailable",
        Satisfied = "Satisfied",
        NotSatisfied = "NotSatisfied",
        DeploymentFound = "DeploymentFound",
        DeploymentNotFound = "DeploymentNotFound",
    }
}

/// The observed state of a ClusterServiceVersion.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterServiceVersionStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<CsvPhase>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<CsvReason>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// History of phase and reason changes, newest last (at most 20 entries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<ClusterServiceVersionCondition>>,
    // Shared like `spec.install`: the same operator's CSVs report the same requirements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requirement_status: Option<Arc<Vec<RequirementStatus>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certs_last_updated: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certs_rotate_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleanup: Option<CleanupStatus>,
}

/// One entry of the CSV's phase history.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterServiceVersionCondition {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<CsvPhase>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<CsvReason>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

/// The result of one requirement check.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequirementStatus {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub name: String,
    pub status: StatusReason,
    #[serde(default)]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependents: Option<Vec<DependentStatus>>,
}

/// The status of something a requirement depends on (e.g. one RBAC rule).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DependentStatus {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub status: StatusReason,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// `status.cleanup`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CleanupStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_deletion: Option<Vec<ResourceList>>,
}

/// Custom resources of one group/kind blocked on finalizers.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ResourceList {
    pub group: String,
    pub kind: String,
    #[serde(default)]
    pub instances: Vec<ResourceInstance>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ResourceInstance {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}
