//! The CEL rules and hand-written schemas of the v1 CRDs. The rule texts are upstream's
//! (operator-controller v1.11.0's kubebuilder markers), so that the API server accepts and
//! refuses exactly what upstream's does, with the same messages.

use schemars::{Schema, SchemaGenerator, json_schema};

/// A DNS-1123 subdomain (package, channel, service account and bundle names).
pub const DNS1123_SUBDOMAIN: &str = r#"self.matches("^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")"#;
/// A DNS-1123 label (the install namespace).
pub const DNS1123_LABEL: &str = r#"self.matches("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")"#;
/// Immutable once set.
pub const IMMUTABLE: &str = "self == oldSelf";
/// The message of the subdomain rule on a package name (and, as upstream has it, on
/// `status.install.bundle.name`).
pub const PACKAGE_NAME_SUBDOMAIN_MESSAGE: &str = "packageName must be a valid DNS1123 subdomain. It must contain only lowercase alphanumeric characters, hyphens (-) or periods (.), start and end with an alphanumeric character, and be no longer than 253 characters";
pub const SERVICE_ACCOUNT_SUBDOMAIN_MESSAGE: &str = "name must be a valid DNS1123 subdomain. It must contain only lowercase alphanumeric characters, hyphens (-) or periods (.), start and end with an alphanumeric character, and be no longer than 253 characters";

/// A version range in Masterminds/semver's constraint syntax (what `spec.source.catalog.version` takes).
pub const VERSION_RANGE: &str = r#"self.matches("^(\\s*(=||!=|>|<|>=|=>|<=|=<|~|~>|\\^)\\s*(v?(0|[1-9]\\d*|[x|X|\\*])(\\.(0|[1-9]\\d*|x|X|\\*]))?(\\.(0|[1-9]\\d*|x|X|\\*))?(-([0-9A-Za-z\\-]+(\\.[0-9A-Za-z\\-]+)*))?(\\+([0-9A-Za-z\\-]+(\\.[0-9A-Za-z\\-]+)*))?)\\s*)((?:\\s+|,\\s*|\\s*\\|\\|\\s*)(=||!=|>|<|>=|=>|<=|=<|~|~>|\\^)\\s*(v?(0|[1-9]\\d*|x|X|\\*])(\\.(0|[1-9]\\d*|x|X|\\*))?(\\.(0|[1-9]\\d*|x|X|\\*]))?(-([0-9A-Za-z\\-]+(\\.[0-9A-Za-z\\-]+)*))?(\\+([0-9A-Za-z\\-]+(\\.[0-9A-Za-z\\-]+)*))?)\\s*)*$")"#;
/// A bundle's semver version.
pub const SEMVER: &str = r#"self.matches("^([0-9]+)(\\.[0-9]+)?(\\.[0-9]+)?(-([-0-9A-Za-z]+(\\.[-0-9A-Za-z]+)*))?(\\+([-0-9A-Za-z]+(-\\.[-0-9A-Za-z]+)*))?")"#;
/// A bundle's release: empty, or dot-separated identifiers.
pub const RELEASE: &str = r#"self.matches("^$|^(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)(\\.(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*))*$")"#;

/// An image reference's domain.
pub const IMAGE_DOMAIN: &str = r#"self.matches('^([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])((\\.([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))+)?(:[0-9]+)?\\b')"#;
pub const IMAGE_DOMAIN_MESSAGE: &str = r#"must start with a valid domain. valid domains must be alphanumeric characters (lowercase and uppercase) separated by the "." character."#;
/// An image reference's repository path.
pub const IMAGE_NAME: &str = r#"self.find('(\\/[a-z0-9]+((([._]|__|[-]*)[a-z0-9]+)+)?((\\/[a-z0-9]+((([._]|__|[-]*)[a-z0-9]+)+)?)+)?)') != """#;
pub const IMAGE_NAME_MESSAGE: &str = r#"a valid name is required. valid names must contain lowercase alphanumeric characters separated only by the ".", "_", "__", "-" characters."#;
pub const IMAGE_DIGEST_OR_TAG: &str = r#"self.find('(@.*:)') != "" || self.find(':.*$') != """#;
pub const IMAGE_DIGEST: &str = r#"self.find('(@.*:)') != """#;
pub const IMAGE_TAG_LENGTH: &str = r#"self.find('(@.*:)') == "" ? (self.find(':.*$') != "" ? self.find(':.*$').substring(1).size() <= 127 : true) : true"#;
pub const IMAGE_TAG_CHARACTERS: &str = r#"self.find('(@.*:)') == "" ? (self.find(':.*$') != "" ? self.find(':.*$').matches(':[\\w][\\w.-]*$') : true) : true"#;
pub const IMAGE_TAG_CHARACTERS_MESSAGE: &str = r#"tag is invalid. valid tags must begin with a word character (alphanumeric + "_") followed by word characters or ".", and "-" characters"#;
pub const IMAGE_DIGEST_ALGORITHM: &str = r#"self.find('(@.*:)') != "" ? self.find('(@.*:)').matches('(@[A-Za-z][A-Za-z0-9]*([-_+.][A-Za-z][A-Za-z0-9]*)*[:])') : true"#;
pub const IMAGE_DIGEST_ALGORITHM_MESSAGE: &str = r#"digest algorithm is not valid. valid algorithms must start with an uppercase or lowercase alpha character followed by alphanumeric characters and may contain the "-", "_", "+", and "." characters."#;
pub const IMAGE_DIGEST_LENGTH: &str = r#"self.find('(@.*:)') != "" ? self.find(':.*$').substring(1).size() >= 32 : true"#;
pub const IMAGE_DIGEST_HEX: &str = r#"self.find('(@.*:)') != "" ? self.find(':.*$').matches(':[0-9A-Fa-f]*$') : true"#;

/// `metav1.Condition` as upstream's CRDs validate it.
fn condition() -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "required": ["lastTransitionTime", "message", "reason", "status", "type"],
        "properties": {
            "lastTransitionTime": {"type": "string", "format": "date-time"},
            "message": {"type": "string", "maxLength": 32768},
            "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
            "reason": {"type": "string", "maxLength": 1024, "minLength": 1, "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"},
            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
            "type": {
                "type": "string",
                "maxLength": 316,
                "pattern": "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
            }
        }
    })
}

/// A list of conditions, one per type (`+listType=map`, `+listMapKey=type`).
pub fn conditions(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": condition(),
        "x-kubernetes-list-map-keys": ["type"],
        "x-kubernetes-list-type": "map",
    })
}

/// `channels`: at most 256 names, each a DNS-1123 subdomain of at most 253 characters.
pub fn channels(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "maxItems": 256,
        "items": {
            "type": "string",
            "maxLength": 253,
            "x-kubernetes-validations": [{"rule": DNS1123_SUBDOMAIN, "message": "channels entries must be valid DNS1123 subdomains"}]
        }
    })
}

/// An integer without a `format`: Go's `int`, which controller-gen writes bare.
fn integer_at_least(minimum: i64) -> Schema {
    json_schema!({"type": "integer", "minimum": minimum})
}

/// `pollIntervalMinutes`: at least 1.
pub fn poll_interval_minutes(_: &mut SchemaGenerator) -> Schema {
    integer_at_least(1)
}

/// `progressDeadlineMinutes`: an int32 from 10 to 720.
pub fn progress_deadline_minutes(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "integer", "format": "int32", "minimum": 10, "maximum": 720})
}

/// `priority`: any int32, 0 when absent.
pub fn priority(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "integer", "format": "int32", "default": 0, "minimum": -2147483648i64, "maximum": 2147483647})
}

/// `config.inline`: any object with at least one key, kept as written.
pub fn inline_config(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "object", "minProperties": 1, "x-kubernetes-preserve-unknown-fields": true})
}

/// A label selector as upstream's CRDs have it (an atomic map; atomic lists inside).
pub fn label_selector(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-map-type": "atomic",
        "properties": {
            "matchExpressions": {
                "type": "array",
                "x-kubernetes-list-type": "atomic",
                "items": {
                    "type": "object",
                    "required": ["key", "operator"],
                    "properties": {
                        "key": {"type": "string"},
                        "operator": {"type": "string"},
                        "values": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "atomic"}
                    }
                }
            },
            "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}}
        }
    })
}
