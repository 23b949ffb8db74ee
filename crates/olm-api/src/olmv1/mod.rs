//! OLM v1's API, `olm.operatorframework.io/v1`, wire-compatible with operator-controller
//! v1.11.0 (its "experimental" CRDs, a superset of the standard ones: every standard v1 YAML
//! applies unchanged).
//!
//! * [`cluster_catalog`]: `ClusterCatalog`, a catalog image unpacked and served over HTTP.
//! * [`cluster_extension`]: `ClusterExtension`, a package installed from the catalogs.
//!
//! Field names, defaults, enums, CEL rules and printer columns are upstream's; a test holds the
//! generated CRDs against upstream's (`crates/olm-api/tests/olmv1_crds.rs`).

pub mod cluster_catalog;
pub mod cluster_extension;
pub mod rules;

pub use cluster_catalog::{ClusterCatalog, ClusterCatalogSpec, ClusterCatalogStatus};
pub use cluster_extension::{ClusterExtension, ClusterExtensionSpec, ClusterExtensionStatus};

/// The API group.
pub const GROUP: &str = "olm.operatorframework.io";

/// The label upstream's webhook gives every ClusterCatalog, with its own name, so that a
/// ClusterExtension's `selector` can pick catalogs by name. olm-rs has no webhook: resolution
/// is to treat every catalog as carrying it.
pub const METADATA_NAME_LABEL: &str = "olm.operatorframework.io/metadata.name";

/// Condition types and reasons shared by both kinds (upstream's `common_types.go`).
pub mod conditions {
    pub const PROGRESSING: &str = "Progressing";
    pub const INSTALLED: &str = "Installed";
    pub const SERVING: &str = "Serving";
    pub const DEPRECATED: &str = "Deprecated";
    pub const PACKAGE_DEPRECATED: &str = "PackageDeprecated";
    pub const CHANNEL_DEPRECATED: &str = "ChannelDeprecated";
    pub const BUNDLE_DEPRECATED: &str = "BundleDeprecated";

    /// Progressing: the desired state was reached, ready for the next change.
    pub const SUCCEEDED: &str = "Succeeded";
    /// Progressing: an error that may go away on its own; tried again.
    pub const RETRYING: &str = "Retrying";
    /// Progressing False: needs a person (the spec, the catalog) to change.
    pub const BLOCKED: &str = "Blocked";
    /// Progressing: an install or upgrade is being rolled out.
    pub const ROLLING_OUT: &str = "RollingOut";
    /// Progressing False: the spec asks for something that cannot be done as written.
    pub const INVALID_CONFIGURATION: &str = "InvalidConfiguration";
    /// Progressing: `progressDeadlineMinutes` passed without reaching the desired state.
    pub const PROGRESS_DEADLINE_EXCEEDED: &str = "ProgressDeadlineExceeded";
    /// Installed False: nothing installed yet.
    pub const FAILED: &str = "Failed";
    pub const ABSENT: &str = "Absent";
    pub const DEPRECATED_REASON: &str = "Deprecated";
    pub const NOT_DEPRECATED: &str = "NotDeprecated";
    pub const DEPRECATION_STATUS_UNKNOWN: &str = "DeprecationStatusUnknown";
    /// Serving True: the content is served.
    pub const AVAILABLE: &str = "Available";
    /// Serving False: no content to serve yet.
    pub const UNAVAILABLE: &str = "Unavailable";
    /// Serving False: `availabilityMode: Unavailable`.
    pub const USER_SPECIFIED_UNAVAILABLE: &str = "UserSpecifiedUnavailable";
}

/// `x-kubernetes-validations` entries, as `{rule, message}` objects.
pub(crate) fn cel(rules: &[(&str, &str)]) -> serde_json::Value {
    serde_json::Value::Array(rules.iter().map(|(rule, message)| serde_json::json!({"rule": rule, "message": message})).collect())
}
