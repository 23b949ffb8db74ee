//! Properties of packages, channels and bundles, and their typed values.

use std::fmt;

use serde_json::{Map, Value};

use super::blob::JsonText;
use super::json::{as_object, get_ci, json_kind, opt_str, req_str};
use crate::canonical::to_canonical_string;
use crate::version::VersionRange;

pub const PROPERTY_PACKAGE: &str = "olm.package";
pub const PROPERTY_GVK: &str = "olm.gvk";
pub const PROPERTY_GVK_REQUIRED: &str = "olm.gvk.required";
pub const PROPERTY_PACKAGE_REQUIRED: &str = "olm.package.required";
pub const PROPERTY_CONSTRAINT: &str = "olm.constraint";
pub const PROPERTY_BUNDLE_OBJECT: &str = "olm.bundle.object";
pub const PROPERTY_CSV_METADATA: &str = "olm.csv.metadata";
pub const PROPERTY_DEPRECATED: &str = "olm.deprecated";
pub const PROPERTY_CHANNEL: &str = "olm.channel";

/// Upstream rejects constraint values larger than this (operator-framework/api).
pub const MAX_CONSTRAINT_BYTES: usize = 131_072;
/// Nesting limit for compound constraints (protects the recursive parser).
const MAX_CONSTRAINT_DEPTH: usize = 32;

/// Group/version/kind of an API.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Gvk {
    pub group: String,
    pub version: String,
    pub kind: String,
}

impl fmt::Display for Gvk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}/{}", self.version, self.kind)
        } else {
            write!(f, "{}/{}/{}", self.group, self.version, self.kind)
        }
    }
}

/// Value of an `olm.package` property.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageProperty {
    pub package_name: String,
    pub version: String,
    pub release: Option<String>,
}

/// Value of an `olm.package.required` property (or a `package` constraint).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageRequired {
    pub package_name: String,
    /// The range text as written.
    pub version_range: String,
    /// The parsed range, when it parses.
    pub range: Option<VersionRange>,
}

/// An `olm.constraint` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constraint {
    pub failure_message: Option<String>,
    pub kind: ConstraintKind,
}

/// The one kind of constraint an `olm.constraint` holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConstraintKind {
    Gvk(Gvk),
    Package(PackageRequired),
    Cel { rule: String },
    All(Vec<Constraint>),
    Any(Vec<Constraint>),
    Not(Vec<Constraint>),
}

/// Typed view of a property.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PropertyKind {
    Package(PackageProperty),
    Gvk(Gvk),
    GvkRequired(Gvk),
    // Boxed: rare, and several times the size of the other kinds; a catalog holds one
    // PropertyKind per property of every bundle.
    PackageRequired(Box<PackageRequired>),
    Constraint(Box<Constraint>),
    /// `olm.bundle.object`; [`Bundle::objects`] decodes it.
    BundleObject,
    /// `olm.csv.metadata`; read it with [`Property::value`] / [`Bundle::csv_metadata`].
    CsvMetadata,
    Deprecated,
    Channel {
        channel_name: String,
    },
    /// Any other type, kept verbatim.
    Other,
}


/// A property: its type, its value as compact canonical JSON, and a typed view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Property {
    pub type_name: String,
    /// Compact JSON with sorted keys (what gRPC `Property.value` carries).
    pub value_json: JsonText,
    pub kind: PropertyKind,
}

impl Property {
    /// Parse `{type, value}`. Errors say what is wrong with the value.
    pub fn parse(raw: &Value) -> Result<Property, String> {
        Property::parse_with_text(raw, None)
    }

    /// Parse, taking the canonical value text from `text` when the caller has it.
    pub(crate) fn parse_with_text(raw: &Value, text: Option<JsonText>) -> Result<Property, String> {
        let Value::Object(map) = raw else {
            return Err(format!(
                "a property must be an object with \"type\" and \"value\", found {}",
                json_kind(raw)
            ));
        };
        let type_name = match get_ci(map, "type") {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            _ => return Err("property has no \"type\" string".into()),
        };
        let value = get_ci(map, "value").unwrap_or(&Value::Null);
        let value_json = match text {
            Some(t) => t,
            None => JsonText::owned(to_canonical_string(value)),
        };
        let kind = parse_property_kind(&type_name, value, value_json.len())
            .map_err(|e| format!("property {type_name:?}: {e}"))?;
        Ok(Property {
            type_name,
            value_json,
            kind,
        })
    }

    /// Construct a property from a type and value.
    pub fn new(type_name: &str, value: Value) -> Result<Property, String> {
        let mut map = Map::new();
        map.insert("type".into(), Value::String(type_name.into()));
        map.insert("value".into(), value);
        Property::parse(&Value::Object(map))
    }

    /// The value as JSON (parsed on demand).
    pub fn value(&self) -> Value {
        serde_json::from_str(&self.value_json.text()).unwrap_or(Value::Null)
    }

    /// `{"type": ..., "value": ...}`
    pub fn to_json(&self) -> Value {
        let mut map = Map::new();
        map.insert("type".into(), Value::String(self.type_name.clone()));
        map.insert("value".into(), self.value());
        Value::Object(map)
    }
}

fn parse_property_kind(
    type_name: &str,
    value: &Value,
    size: usize,
) -> Result<PropertyKind, String> {
    Ok(match type_name {
        PROPERTY_PACKAGE => {
            let obj = as_object(value)?;
            let package_name = req_str(obj, "packageName")?;
            let version = req_str(obj, "version")?;
            let release = match get_ci(obj, "release") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) if s.is_empty() => None,
                Some(Value::String(s)) => Some(s.clone()),
                Some(Value::Number(n)) => Some(n.to_string()),
                Some(other) => {
                    return Err(format!(
                        "\"release\" must be a string, found {}",
                        json_kind(other)
                    ));
                }
            };
            PropertyKind::Package(PackageProperty {
                package_name,
                version,
                release,
            })
        }
        PROPERTY_GVK => PropertyKind::Gvk(parse_gvk(value)?),
        PROPERTY_GVK_REQUIRED => PropertyKind::GvkRequired(parse_gvk(value)?),
        PROPERTY_PACKAGE_REQUIRED => {
            PropertyKind::PackageRequired(Box::new(parse_package_required(value, "versionRange")?))
        }
        PROPERTY_CONSTRAINT => {
            if size > MAX_CONSTRAINT_BYTES {
                return Err(format!(
                    "constraint is {size} bytes, more than the {MAX_CONSTRAINT_BYTES} allowed"
                ));
            }
            PropertyKind::Constraint(Box::new(parse_constraint(value, 0)?))
        }
        PROPERTY_BUNDLE_OBJECT => {
            let obj = as_object(value)?;
            match get_ci(obj, "data") {
                Some(Value::String(_)) => PropertyKind::BundleObject,
                _ => {
                    return Err(
                        "olm.bundle.object needs a \"data\" string (base64 of one manifest)".into(),
                    );
                }
            }
        }
        PROPERTY_CSV_METADATA => {
            as_object(value)?;
            PropertyKind::CsvMetadata
        }
        PROPERTY_DEPRECATED => PropertyKind::Deprecated,
        PROPERTY_CHANNEL => {
            let obj = as_object(value)?;
            PropertyKind::Channel {
                channel_name: req_str(obj, "channelName")?,
            }
        }
        _ => PropertyKind::Other,
    })
}

fn parse_gvk(value: &Value) -> Result<Gvk, String> {
    let obj = as_object(value)?;
    Ok(Gvk {
        group: opt_str(obj, "group")?,
        version: req_str(obj, "version")?,
        kind: req_str(obj, "kind")?,
    })
}

fn parse_package_required(value: &Value, range_key: &str) -> Result<PackageRequired, String> {
    let obj = as_object(value)?;
    let package_name = req_str(obj, "packageName")?;
    let version_range = opt_str(obj, range_key)?;
    let range = if version_range.is_empty() {
        None
    } else {
        Some(VersionRange::parse(&version_range).map_err(|e| e.to_string())?)
    };
    Ok(PackageRequired {
        package_name,
        version_range,
        range,
    })
}

fn parse_constraint(value: &Value, depth: usize) -> Result<Constraint, String> {
    if depth > MAX_CONSTRAINT_DEPTH {
        return Err(format!(
            "constraints nested deeper than {MAX_CONSTRAINT_DEPTH} levels"
        ));
    }
    let obj = as_object(value)?;
    let mut failure_message = None;
    let mut kinds = Vec::new();
    for (key, v) in obj {
        match key.to_lowercase().as_str() {
            "failuremessage" => match v {
                Value::String(s) => failure_message = Some(s.clone()),
                Value::Null => {}
                other => {
                    return Err(format!(
                        "\"failureMessage\" must be a string, found {}",
                        json_kind(other)
                    ));
                }
            },
            "gvk" => kinds.push(ConstraintKind::Gvk(parse_gvk(v)?)),
            "package" => kinds.push(ConstraintKind::Package(parse_package_required(
                v,
                "versionRange",
            )?)),
            "cel" => {
                let o = as_object(v)?;
                let rule = req_str(o, "rule")?;
                // Hostile rules (too long, too deep, too costly) are refused here, so
                // validate, render and serve name the bundle before anything evaluates them.
                crate::cel::CelRule::check_limits(&rule)
                    .map_err(|e| format!("the CEL rule {}: {e}", crate::quote::quoted(&rule)))?;
                kinds.push(ConstraintKind::Cel { rule });
            }
            k @ ("all" | "any" | "not") => {
                let o = as_object(v)?;
                let list = match get_ci(o, "constraints") {
                    Some(Value::Array(items)) => items,
                    _ => return Err(format!("\"{k}\" needs a \"constraints\" list")),
                };
                let mut inner = Vec::with_capacity(list.len());
                for item in list {
                    inner.push(parse_constraint(item, depth + 1)?);
                }
                kinds.push(match k {
                    "all" => ConstraintKind::All(inner),
                    "any" => ConstraintKind::Any(inner),
                    _ => ConstraintKind::Not(inner),
                });
            }
            _ => {
                return Err(format!(
                    "unknown constraint field {key:?}; use one of gvk, package, cel, all, any, not"
                ));
            }
        }
    }
    match kinds.len() {
        1 => Ok(Constraint {
            failure_message,
            kind: kinds.remove(0),
        }),
        0 => Err("constraint has none of gvk, package, cel, all, any, not; set exactly one".into()),
        _ => Err(
            "constraint sets more than one of gvk, package, cel, all, any, not; set exactly one"
                .into(),
        ),
    }
}
