//! One FBC document and the raw blob catalogd serves for it, and the order opm writes blobs in.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use super::blob::{Blob, Dictionaries};
use super::json::json_kind;

pub const SCHEMA_PACKAGE: &str = "olm.package";
pub const SCHEMA_CHANNEL: &str = "olm.channel";
pub const SCHEMA_BUNDLE: &str = "olm.bundle";
pub const SCHEMA_DEPRECATIONS: &str = "olm.deprecations";

/// One parsed FBC document, before it becomes part of a catalog.
#[derive(Debug, Clone)]
pub struct Document {
    pub value: Value,
    /// File the document came from, for error messages.
    pub source: Option<Arc<Path>>,
}

/// A raw FBC blob as catalogd serves it.
#[derive(Debug, Clone)]
pub struct Meta {
    pub schema: String,
    pub package: String,
    pub name: String,
    /// Canonical JSON (compact, keys sorted), terminated by `\n`.
    pub blob: Blob,
    pub source: Option<Arc<Path>>,
}

impl Meta {
    /// Build a meta from a JSON object: extract `schema`, `package`, `name`
    /// (case-insensitive keys, like opm) and encode the canonical blob.
    pub fn from_value(value: &Value, source: Option<Arc<Path>>) -> Result<Meta, String> {
        Meta::from_value_with_ranges(value, source, None).map(|(meta, _, _)| meta)
    }

    /// Like [`Meta::from_value`], also returning the blob's text and where each
    /// property value sits in it; a bundle's blob is compressed against its package's
    /// reference in `dictionaries` when given.
    pub(crate) fn from_value_with_ranges(
        value: &Value,
        source: Option<Arc<Path>>,
        dictionaries: Option<&mut Dictionaries>,
    ) -> Result<(Meta, Vec<Option<(usize, usize)>>, String), String> {
        let Value::Object(map) = value else {
            return Err(format!(
                "a catalog document must be a JSON/YAML object, found {}",
                json_kind(value)
            ));
        };
        let mut found: [Option<(&str, &Value)>; 3] = [None, None, None];
        for (key, v) in map {
            let lower = key.to_lowercase();
            let slot = match lower.as_str() {
                "schema" => 0,
                "package" => 1,
                "name" => 2,
                _ => continue,
            };
            if let Some((other, _)) = found[slot] {
                return Err(format!(
                    "keys {other:?} and {key:?} differ only by case; keep one"
                ));
            }
            found[slot] = Some((key.as_str(), v));
        }
        let mut strings = [String::new(), String::new(), String::new()];
        for (i, field) in ["schema", "package", "name"].iter().enumerate() {
            if let Some((key, v)) = found[i] {
                match v {
                    Value::String(s) => strings[i] = s.clone(),
                    Value::Null => {}
                    other => {
                        return Err(format!(
                            "{key:?} must be a string, found {}",
                            json_kind(other)
                        ));
                    }
                }
            } else if i == 0 {
                return Err(format!(
                    "document has no {field:?} field; every catalog object needs a schema (e.g. olm.package, olm.channel, olm.bundle)"
                ));
            }
        }
        let [schema, package, name] = strings;
        if schema.is_empty() {
            return Err("document has an empty \"schema\"; set it to olm.package, olm.channel, olm.bundle, olm.deprecations or a custom schema".into());
        }
        let (mut blob, ranges) = crate::canonical::to_canonical_with_property_values(value);
        blob.push('\n');
        let stored = match dictionaries {
            Some(dictionaries) if schema == SCHEMA_BUNDLE => dictionaries.bundle_blob(&package, &blob),
            _ => Blob::new(&blob),
        };
        Ok((
            Meta {
                schema,
                package,
                name,
                blob: stored,
                source,
            },
            ranges,
            blob,
        ))
    }
}

/// The package a blob belongs to (the name, for olm.package blobs).
fn meta_package(m: &Meta) -> &str {
    if m.schema == SCHEMA_PACKAGE {
        &m.name
    } else {
        &m.package
    }
}

/// The sort key of opm's canonical writer order (`Catalog::canonical_metas`).
pub(super) fn meta_sort_key(m: &Meta) -> (bool, &str, u8, &str, &str) {
    let pkg = meta_package(m);
    let rank = match m.schema.as_str() {
        SCHEMA_PACKAGE => 0,
        SCHEMA_CHANNEL => 1,
        SCHEMA_BUNDLE => 2,
        SCHEMA_DEPRECATIONS => 4,
        _ => 3,
    };
    // Blobs without a package go last.
    (
        pkg.is_empty(),
        pkg,
        rank,
        m.schema.as_str(),
        m.name.as_str(),
    )
}
