//! The catalog model: an immutable, indexed snapshot of packages, channels and
//! bundles, plus the raw FBC blobs it was built from.
//!
//! Build one with [`Catalog::build`] (lenient: always returns a catalog plus every
//! problem found) or [`Catalog::from_documents`] (strict: any problem is an error).
//! A `Catalog` is `Send + Sync` and never mutated after construction; share it as
//! `Arc<Catalog>`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::borrow::Cow;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::canonical::to_canonical_string;
use crate::error::{CatalogError, Problem};
use crate::version::{Version, VersionRange};

pub const SCHEMA_PACKAGE: &str = "olm.package";
pub const SCHEMA_CHANNEL: &str = "olm.channel";
pub const SCHEMA_BUNDLE: &str = "olm.bundle";
pub const SCHEMA_DEPRECATIONS: &str = "olm.deprecations";

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
        Meta::from_value_with_ranges(value, source).map(|(meta, _, _)| meta)
    }

    /// Like [`Meta::from_value`], also returning the blob's text and where each
    /// property value sits in it.
    pub(crate) fn from_value_with_ranges(
        value: &Value,
        source: Option<Arc<Path>>,
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
        Ok((
            Meta {
                schema,
                package,
                name,
                blob: Blob::new(&blob),
                source,
            },
            ranges,
            blob,
        ))
    }
}

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
    PackageRequired(PackageRequired),
    Constraint(Constraint),
    /// `olm.bundle.object`; the decoded object lives in [`Bundle::objects`].
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

/// The canonical text of a catalog document, held LZ4-compressed when that pays.
///
/// A catalog's memory is mostly these texts (CSV metadata: CRD descriptions, examples,
/// long descriptions), and each is read only when served; compressed they take about a
/// third of the bytes, and decompressing one costs microseconds. Short texts, and texts
/// that do not compress, are kept as they are.
#[derive(Clone)]
pub struct Blob(BlobRepr);

#[derive(Clone)]
enum BlobRepr {
    Plain(Arc<str>),
    Lz4 { len: u32, bytes: Arc<[u8]> },
}

impl Blob {
    /// Texts shorter than this are not worth a decompression on every read.
    const COMPRESS_FROM: usize = 1024;

    /// Hold `text`, compressed when that saves at least an eighth of it.
    pub fn new(text: &str) -> Blob {
        if text.len() >= Self::COMPRESS_FROM
            && let Ok(len) = u32::try_from(text.len())
        {
            let compressed = lz4_flex::block::compress(text.as_bytes());
            if compressed.len() <= text.len() - text.len() / 8 {
                return Blob(BlobRepr::Lz4 { len, bytes: Arc::from(compressed) });
            }
        }
        Blob(BlobRepr::Plain(Arc::from(text)))
    }

    /// Length of the text (not of its compressed form).
    pub fn len(&self) -> usize {
        match &self.0 {
            BlobRepr::Plain(text) => text.len(),
            BlobRepr::Lz4 { len, .. } => *len as usize,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held in memory for the text.
    pub fn stored_len(&self) -> usize {
        match &self.0 {
            BlobRepr::Plain(text) => text.len(),
            BlobRepr::Lz4 { bytes, .. } => bytes.len(),
        }
    }

    /// The text, decompressed when held compressed.
    pub fn text(&self) -> Cow<'_, str> {
        match &self.0 {
            BlobRepr::Plain(text) => Cow::Borrowed(text),
            BlobRepr::Lz4 { len, bytes } => {
                // Only `Blob::new` makes these, from valid UTF-8, so neither step fails;
                // were memory ever corrupted, an empty text fails JSON parsing loudly
                // downstream instead of aborting the server.
                let decoded = lz4_flex::block::decompress(bytes, *len as usize).unwrap_or_default();
                Cow::Owned(String::from_utf8(decoded).unwrap_or_default())
            }
        }
    }

    /// `start..end` of the text.
    fn slice(&self, start: usize, end: usize) -> Cow<'_, str> {
        match self.text() {
            Cow::Borrowed(text) => Cow::Borrowed(text.get(start..end).unwrap_or_default()),
            Cow::Owned(text) => Cow::Owned(text.get(start..end).unwrap_or_default().to_string()),
        }
    }

    fn is_compressed(&self) -> bool {
        matches!(self.0, BlobRepr::Lz4 { .. })
    }
}

impl PartialEq for Blob {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.text() == other.text()
    }
}
impl Eq for Blob {}

impl fmt::Debug for Blob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Blob")
            .field("len", &self.len())
            .field("stored", &self.stored_len())
            .finish()
    }
}

impl fmt::Display for Blob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text())
    }
}

/// Compact JSON text of a property value. Large values share their bundle's blob
/// instead of holding a copy; read the text with [`JsonText::text`].
#[derive(Clone)]
pub struct JsonText(JsonTextRepr);

#[derive(Clone)]
enum JsonTextRepr {
    Owned(Box<str>),
    Shared {
        blob: Blob,
        start: u32,
        end: u32,
    },
}

impl JsonText {
    fn owned(text: String) -> JsonText {
        JsonText(JsonTextRepr::Owned(text.into_boxed_str()))
    }

    /// The text at `start..end` of `blob`, whose text is `plain`: shared when long,
    /// copied when short. A compressed blob is shared only for values that make most of
    /// it (a CSV's metadata), so reading a small value never decompresses a whole document.
    fn from_blob(blob: &Blob, plain: &str, start: usize, end: usize) -> Option<JsonText> {
        let text = plain.get(start..end)?;
        let share_from = if blob.is_compressed() { Blob::COMPRESS_FROM } else { 64 };
        if text.len() >= share_from && end <= u32::MAX as usize {
            Some(JsonText(JsonTextRepr::Shared {
                blob: blob.clone(),
                start: start as u32,
                end: end as u32,
            }))
        } else {
            Some(JsonText::owned(text.to_string()))
        }
    }

    /// The JSON text.
    pub fn text(&self) -> Cow<'_, str> {
        match &self.0 {
            JsonTextRepr::Owned(s) => Cow::Borrowed(s),
            JsonTextRepr::Shared { blob, start, end } => blob.slice(*start as usize, *end as usize),
        }
    }

    /// Length of the JSON text.
    pub fn len(&self) -> usize {
        match &self.0 {
            JsonTextRepr::Owned(s) => s.len(),
            JsonTextRepr::Shared { start, end, .. } => (*end - *start) as usize,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl PartialEq for JsonText {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.text() == other.text()
    }
}
impl Eq for JsonText {}

impl fmt::Debug for JsonText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.text(), f)
    }
}

impl fmt::Display for JsonText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text())
    }
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
            PropertyKind::PackageRequired(parse_package_required(value, "versionRange")?)
        }
        PROPERTY_CONSTRAINT => {
            if size > MAX_CONSTRAINT_BYTES {
                return Err(format!(
                    "constraint is {size} bytes, more than the {MAX_CONSTRAINT_BYTES} allowed"
                ));
            }
            PropertyKind::Constraint(parse_constraint(value, 0)?)
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
                kinds.push(ConstraintKind::Cel {
                    rule: req_str(o, "rule")?,
                });
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

/// `icon` of an `olm.package`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Icon {
    /// Standard base64, as written in the catalog.
    pub base64data: String,
    pub mediatype: String,
}

/// An image related to a bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelatedImage {
    pub name: String,
    pub image: String,
}

/// What an `olm.deprecations` entry refers to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DeprecationReference {
    Package,
    Channel(String),
    Bundle(String),
}

/// One `olm.deprecations` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeprecationEntry {
    pub reference: DeprecationReference,
    pub message: String,
}

/// A package (`olm.package`) with its channels and bundles.
#[derive(Debug, Clone)]
pub struct Package {
    pub name: String,
    pub default_channel: String,
    pub description: Option<String>,
    pub icon: Option<Icon>,
    /// Message of a package-level deprecation.
    pub deprecation: Option<String>,
    /// Every `olm.deprecations` entry of the package.
    pub deprecations: Vec<DeprecationEntry>,
    pub properties: Vec<Property>,
    pub source: Option<Arc<Path>>,
    channels: Vec<Channel>,
    channel_index: HashMap<String, usize>,
    bundles: Vec<Bundle>,
    bundle_index: HashMap<String, usize>,
}

impl Package {
    /// Channels sorted by name.
    pub fn channels(&self) -> &[Channel] {
        &self.channels
    }
    pub fn channel(&self, name: &str) -> Option<&Channel> {
        self.channel_index.get(name).map(|&i| &self.channels[i])
    }
    pub fn default_channel(&self) -> Option<&Channel> {
        self.channel(&self.default_channel)
    }
    /// Bundles sorted by name.
    pub fn bundles(&self) -> &[Bundle] {
        &self.bundles
    }
    pub fn bundle(&self, name: &str) -> Option<&Bundle> {
        self.bundle_index.get(name).map(|&i| &self.bundles[i])
    }
    /// Head bundle of the default channel.
    pub fn default_head(&self) -> Option<&Bundle> {
        self.default_channel()
            .and_then(|c| c.head())
            .and_then(|e| self.bundle(&e.name))
    }
    /// Bundle with the highest version (semver precedence; ties: release present wins).
    pub fn newest_bundle(&self) -> Option<&Bundle> {
        self.bundles.iter().max_by(|a, b| a.cmp_version(b))
    }
}

/// One node of a channel's upgrade graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelEntry {
    pub name: String,
    pub replaces: Option<String>,
    pub skips: Vec<String>,
    /// The `skipRange` text as written.
    pub skip_range: Option<String>,
    /// The parsed `skipRange` (None when absent or unparsable).
    pub skip_range_parsed: Option<VersionRange>,
}

impl ChannelEntry {
    /// Whether this entry is an upgrade from the bundle `name` at `version`
    /// (replaces it, skips it, or its skipRange contains the version).
    pub fn upgrades_from(&self, name: &str, version: Option<&Version>) -> bool {
        self.replaces.as_deref() == Some(name)
            || self.skips.iter().any(|s| s == name)
            || matches!((&self.skip_range_parsed, version), (Some(r), Some(v)) if r.contains(v))
    }
}

/// A channel (`olm.channel`) with its computed head and replaces chain.
#[derive(Debug, Clone)]
pub struct Channel {
    pub name: String,
    pub package: String,
    pub deprecation: Option<String>,
    pub properties: Vec<Property>,
    pub source: Option<Arc<Path>>,
    entries: Vec<ChannelEntry>,
    entry_index: HashMap<String, usize>,
    head: Option<usize>,
    replaces_chain: Vec<usize>,
}

impl Channel {
    /// Entries in the order they were written.
    pub fn entries(&self) -> &[ChannelEntry] {
        &self.entries
    }
    pub fn entry(&self, name: &str) -> Option<&ChannelEntry> {
        self.entry_index.get(name).map(|&i| &self.entries[i])
    }
    /// The unique entry nothing replaces or skips (None if the channel has no
    /// unique head, which validation reports).
    pub fn head(&self) -> Option<&ChannelEntry> {
        self.head.map(|i| &self.entries[i])
    }
    /// Entries from the head following `replaces` (newest first), stopping at a
    /// skipped entry, a missing target or a cycle.
    pub fn replaces_chain(&self) -> impl Iterator<Item = &ChannelEntry> {
        self.replaces_chain.iter().map(|&i| &self.entries[i])
    }
    /// Entries that upgrade from bundle `name` at `version` in this channel.
    pub fn successors(&self, name: &str, version: Option<&Version>) -> Vec<&ChannelEntry> {
        self.entries
            .iter()
            .filter(|e| e.name != name && e.upgrades_from(name, version))
            .collect()
    }
}

/// A bundle (`olm.bundle`).
#[derive(Debug, Clone)]
pub struct Bundle {
    pub name: String,
    pub package: String,
    pub image: String,
    pub version: Version,
    pub release: Option<String>,
    pub properties: Vec<Property>,
    pub related_images: Vec<RelatedImage>,
    /// Manifests inlined with `olm.bundle.object` (or read from a bundle
    /// directory), in order. The CSV is one of them.
    pub objects: Vec<Value>,
    /// Channels of the package that list this bundle, sorted.
    pub channels: Vec<String>,
    pub deprecation: Option<String>,
    pub source: Option<Arc<Path>>,
    csv_index: Option<usize>,
}

impl Bundle {
    /// The ClusterServiceVersion object, when the catalog inlines it.
    pub fn csv(&self) -> Option<&Value> {
        self.csv_index.and_then(|i| self.objects.get(i))
    }
    /// Value of the `olm.csv.metadata` property, when present.
    pub fn csv_metadata(&self) -> Option<Value> {
        self.properties
            .iter()
            .find(|p| p.kind == PropertyKind::CsvMetadata)
            .map(Property::value)
    }
    /// APIs this bundle provides (`olm.gvk`).
    pub fn provided_gvks(&self) -> impl Iterator<Item = &Gvk> {
        self.properties.iter().filter_map(|p| match &p.kind {
            PropertyKind::Gvk(g) => Some(g),
            _ => None,
        })
    }
    /// APIs this bundle requires (`olm.gvk.required`).
    pub fn required_gvks(&self) -> impl Iterator<Item = &Gvk> {
        self.properties.iter().filter_map(|p| match &p.kind {
            PropertyKind::GvkRequired(g) => Some(g),
            _ => None,
        })
    }
    /// Packages this bundle requires (`olm.package.required`).
    pub fn required_packages(&self) -> impl Iterator<Item = &PackageRequired> {
        self.properties.iter().filter_map(|p| match &p.kind {
            PropertyKind::PackageRequired(r) => Some(r),
            _ => None,
        })
    }
    /// Generic constraints (`olm.constraint`).
    pub fn constraints(&self) -> impl Iterator<Item = &Constraint> {
        self.properties.iter().filter_map(|p| match &p.kind {
            PropertyKind::Constraint(c) => Some(c),
            _ => None,
        })
    }
    /// Whether an `olm.deprecated` property marks this bundle.
    pub fn has_deprecated_property(&self) -> bool {
        self.properties
            .iter()
            .any(|p| p.kind == PropertyKind::Deprecated)
    }
    /// Version order as opm defines it: semver precedence, then a bundle with a
    /// release above one without, then releases compared as pre-release identifiers.
    pub fn cmp_version(&self, other: &Bundle) -> std::cmp::Ordering {
        use std::cmp::Ordering;
        match self.version.cmp_precedence(&other.version) {
            Ordering::Equal => {}
            o => return o,
        }
        match (&self.release, &other.release) {
            (None, None) => Ordering::Equal,
            (Some(_), None) => Ordering::Greater,
            (None, Some(_)) => Ordering::Less,
            (Some(a), Some(b)) => match (semver::Prerelease::new(a), semver::Prerelease::new(b)) {
                (Ok(a), Ok(b)) => a.cmp(&b),
                _ => a.cmp(b),
            },
        }
    }
}

/// Address of a bundle inside a catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct BundleAddr {
    package: u32,
    bundle: u32,
}

/// An immutable, indexed catalog snapshot.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    packages: Vec<Package>,
    package_index: HashMap<String, usize>,
    metas: Vec<Meta>,
    metas_by_package: HashMap<String, Vec<u32>>,
    bundles_by_name: HashMap<String, Vec<BundleAddr>>,
    providers: HashMap<Gvk, Vec<BundleAddr>>,
}

/// Filter for [`Catalog::metas`]; empty fields match everything.
#[derive(Debug, Clone, Default)]
pub struct MetaFilter<'a> {
    pub schema: Option<&'a str>,
    pub package: Option<&'a str>,
    pub name: Option<&'a str>,
}

impl Catalog {
    /// Strict build: any problem is an error listing every problem.
    pub fn from_documents(documents: Vec<Document>) -> Result<Catalog, CatalogError> {
        let (catalog, problems) = Catalog::build(documents);
        if problems.is_empty() {
            Ok(catalog)
        } else {
            Err(CatalogError::Invalid(problems))
        }
    }

    /// Lenient build: returns the catalog of everything usable and every problem
    /// (opm's validation rules) found on the way.
    pub fn build(documents: Vec<Document>) -> (Catalog, Vec<Problem>) {
        build::build(documents)
    }

    /// Packages sorted by name.
    pub fn packages(&self) -> &[Package] {
        &self.packages
    }
    pub fn package(&self, name: &str) -> Option<&Package> {
        self.package_index.get(name).map(|&i| &self.packages[i])
    }
    pub fn channel(&self, package: &str, channel: &str) -> Option<&Channel> {
        self.package(package).and_then(|p| p.channel(channel))
    }
    pub fn bundle(&self, package: &str, name: &str) -> Option<&Bundle> {
        self.package(package).and_then(|p| p.bundle(name))
    }
    /// Bundles with this name in any package (normally at most one).
    pub fn bundles_named<'a>(&'a self, name: &str) -> impl Iterator<Item = &'a Bundle> + 'a {
        self.bundles_by_name
            .get(name)
            .into_iter()
            .flatten()
            .map(|a| self.at(*a))
    }
    /// Every bundle, by package then name.
    pub fn bundles(&self) -> impl Iterator<Item = &Bundle> {
        self.packages.iter().flat_map(|p| p.bundles.iter())
    }
    /// Bundles that provide `gvk` (`olm.gvk`), by package then name.
    pub fn bundles_providing<'a>(&'a self, gvk: &Gvk) -> impl Iterator<Item = &'a Bundle> + 'a {
        self.providers
            .get(gvk)
            .into_iter()
            .flatten()
            .map(|a| self.at(*a))
    }
    /// Every blob in load order (files in lexical path order, documents in file
    /// order), which is the order catalogd serves `/api/v1/all` in.
    pub fn all_metas(&self) -> &[Meta] {
        &self.metas
    }
    /// Every blob in opm's canonical writer order: packages by name; per package the
    /// olm.package blob, channels by name, bundles by name, other schemas, the
    /// deprecations; then blobs without a package.
    pub fn canonical_metas(&self) -> Vec<&Meta> {
        let mut out: Vec<&Meta> = self.metas.iter().collect();
        out.sort_by(|a, b| build::meta_sort_key(a).cmp(&build::meta_sort_key(b)));
        out
    }
    /// Blobs matching the filter, in load order (catalogd `/api/v1/metas`: exact
    /// matches; `package` matches the blob's `package` field only, so an olm.package
    /// blob is found by `schema=olm.package&name=...`).
    pub fn metas<'a>(&'a self, filter: MetaFilter<'a>) -> impl Iterator<Item = &'a Meta> + 'a {
        let candidates: Box<dyn Iterator<Item = &'a Meta> + 'a> =
            match filter.package.filter(|p| !p.is_empty()) {
                Some(p) => Box::new(
                    self.metas_by_package
                        .get(p)
                        .into_iter()
                        .flatten()
                        .map(move |&i| &self.metas[i as usize]),
                ),
                None => Box::new(self.metas.iter()),
            };
        candidates.filter(move |m| {
            filter.schema.is_none_or(|s| s.is_empty() || m.schema == s)
                && filter
                    .package
                    .is_none_or(|p| p.is_empty() || m.package == p)
                && filter.name.is_none_or(|n| n.is_empty() || m.name == n)
        })
    }
    /// Counts: (packages, channels, bundles).
    pub fn counts(&self) -> (usize, usize, usize) {
        let channels = self.packages.iter().map(|p| p.channels.len()).sum();
        let bundles = self.packages.iter().map(|p| p.bundles.len()).sum();
        (self.packages.len(), channels, bundles)
    }

    fn at(&self, a: BundleAddr) -> &Bundle {
        &self.packages[a.package as usize].bundles[a.bundle as usize]
    }
}

// ---- small JSON helpers -------------------------------------------------------

pub(crate) fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Field lookup, exact first, then case-insensitive (Go `encoding/json` semantics).
pub(crate) fn get_ci<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    map.get(key).or_else(|| {
        map.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v)
    })
}

fn as_object(v: &Value) -> Result<&Map<String, Value>, String> {
    match v {
        Value::Object(m) => Ok(m),
        other => Err(format!(
            "value must be an object, found {}",
            json_kind(other)
        )),
    }
}

pub(crate) fn opt_str(map: &Map<String, Value>, key: &str) -> Result<String, String> {
    match get_ci(map, key) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(format!(
            "{key:?} must be a string, found {}",
            json_kind(other)
        )),
    }
}

fn req_str(map: &Map<String, Value>, key: &str) -> Result<String, String> {
    let s = opt_str(map, key)?;
    if s.is_empty() {
        Err(format!("{key:?} must be set"))
    } else {
        Ok(s)
    }
}

mod build {
    //! Turning documents into a [`Catalog`], checking opm's rules on the way.

    use super::*;
    use base64::Engine as _;

    struct PendingChannel {
        channel: Channel,
    }

    /// A document turned into its blob and typed object (the expensive, parallel
    /// part of building); the JSON tree is dropped afterwards.
    #[allow(clippy::large_enum_variant)] // transient, one per document
    pub(crate) enum Prepared {
        Failed(Problem),
        Item { meta: Meta, item: Item },
    }

    pub(crate) enum Item {
        Package(Result<Package, Problem>),
        Channel(Result<(Channel, Vec<Problem>), Problem>),
        Bundle(Result<Bundle, Problem>),
        Deprecations(Result<Vec<DeprecationEntry>, Problem>),
        Other,
    }

    pub(crate) fn prepare(doc: Document) -> Prepared {
        let src = doc.source.as_deref();
        let (meta, ranges, text) = match Meta::from_value_with_ranges(&doc.value, doc.source.clone()) {
            Ok(m) => m,
            Err(e) => return Prepared::Failed(Problem::new(e).file(src)),
        };
        let Value::Object(obj) = &doc.value else {
            return Prepared::Failed(Problem::new("document is not an object").file(src));
        };
        let item = match meta.schema.as_str() {
            SCHEMA_PACKAGE => Item::Package(
                parse_package(obj, &meta)
                    .map_err(|e| Problem::new(e).file(src).package(&meta.name)),
            ),
            SCHEMA_CHANNEL => Item::Channel(parse_channel(obj, &meta).map_err(|e| {
                Problem::new(e)
                    .file(src)
                    .package(&meta.package)
                    .channel(&meta.name)
            })),
            SCHEMA_BUNDLE => Item::Bundle(parse_bundle(obj, &meta, &text, &ranges).map_err(|e| {
                Problem::new(e)
                    .file(src)
                    .package(&meta.package)
                    .bundle(&meta.name)
            })),
            SCHEMA_DEPRECATIONS => Item::Deprecations(
                parse_deprecations(obj)
                    .map_err(|e| Problem::new(e).file(src).package(&meta.package)),
            ),
            _ => Item::Other, // custom schema: kept as a meta only
        };
        Prepared::Item { meta, item }
    }

    pub(super) fn build(documents: Vec<Document>) -> (Catalog, Vec<Problem>) {
        let prepared = crate::load::parallel_map_owned(documents, prepare);
        assemble(prepared)
    }

    pub(crate) fn assemble(prepared: Vec<Prepared>) -> (Catalog, Vec<Problem>) {
        let mut problems = Vec::new();
        let mut metas: Vec<Meta> = Vec::with_capacity(prepared.len());
        let mut packages: BTreeMap<String, Package> = BTreeMap::new();
        let mut channels: Vec<PendingChannel> = Vec::new();
        let mut bundles: Vec<Bundle> = Vec::new();
        let mut deprecations: Vec<(String, Vec<DeprecationEntry>, Option<Arc<Path>>)> = Vec::new();

        for p in prepared {
            let (meta, item) = match p {
                Prepared::Failed(problem) => {
                    problems.push(problem);
                    continue;
                }
                Prepared::Item { meta, item } => (meta, item),
            };
            let src = meta.source.as_deref();
            match item {
                Item::Package(Ok(p)) => {
                    if p.name.is_empty() {
                        problems.push(
                            Problem::new("olm.package has no name")
                                .file(src)
                                .fix("set \"name\""),
                        );
                    } else if packages.contains_key(&p.name) {
                        problems.push(
                            Problem::new("duplicate olm.package")
                                .file(src)
                                .package(&p.name)
                                .code("DuplicatePackage")
                                .fix("keep exactly one olm.package per package name"),
                        );
                    } else {
                        if let Some(err) = dns1123_label_error(&p.name) {
                            problems.push(
                                Problem::new(format!(
                                    "package name is not a valid DNS-1123 label: {err}"
                                ))
                                .file(src)
                                .package(&p.name)
                                .fix(
                                    "use lowercase letters, digits and '-', at most 63 characters",
                                ),
                            );
                        }
                        packages.insert(p.name.clone(), p);
                    }
                }
                Item::Channel(Ok((ch, mut ps))) => {
                    problems.append(&mut ps);
                    channels.push(PendingChannel { channel: ch });
                }
                Item::Bundle(Ok(b)) => bundles.push(b),
                Item::Deprecations(Ok(entries)) => {
                    deprecations.push((meta.package.clone(), entries, meta.source.clone()))
                }
                Item::Package(Err(e))
                | Item::Channel(Err(e))
                | Item::Bundle(Err(e))
                | Item::Deprecations(Err(e)) => problems.push(e),
                Item::Other => {}
            }
            metas.push(meta);
        }

        // Channels into packages.
        for PendingChannel { channel } in channels {
            let src = channel.source.clone();
            let Some(pkg) = packages.get_mut(&channel.package) else {
                problems.push(
                    Problem::new(if channel.package.is_empty() {
                        "channel has no package".to_string()
                    } else {
                        "channel refers to a package that has no olm.package".to_string()
                    })
                    .code("UnknownPackage")
                    .file(src.as_deref())
                    .package(&channel.package)
                    .channel(&channel.name)
                    .fix(
                        "add an olm.package blob for the package or fix the channel's \"package\"",
                    ),
                );
                continue;
            };
            if pkg.channel_index.contains_key(&channel.name) {
                problems.push(
                    Problem::new("duplicate channel")
                        .code("DuplicateChannel")
                        .file(src.as_deref())
                        .package(&pkg.name)
                        .channel(&channel.name)
                        .fix("merge the entries into one olm.channel blob"),
                );
                continue;
            }
            pkg.channel_index
                .insert(channel.name.clone(), pkg.channels.len());
            pkg.channels.push(channel);
        }

        // Bundles into packages.
        for bundle in bundles {
            let src = bundle.source.clone();
            let Some(pkg) = packages.get_mut(&bundle.package) else {
                problems.push(
                    Problem::new("bundle refers to a package that has no olm.package").code("UnknownPackage")
                        .file(src.as_deref())
                        .package(&bundle.package)
                        .bundle(&bundle.name)
                        .fix("add an olm.package blob for the package or fix the bundle's \"package\""),
                );
                continue;
            };
            if pkg.bundle_index.contains_key(&bundle.name) {
                problems.push(
                    Problem::new("duplicate bundle")
                        .code("DuplicateBundle")
                        .file(src.as_deref())
                        .package(&pkg.name)
                        .bundle(&bundle.name)
                        .fix("remove one of the two olm.bundle blobs with this name"),
                );
                continue;
            }
            pkg.bundle_index
                .insert(bundle.name.clone(), pkg.bundles.len());
            pkg.bundles.push(bundle);
        }

        // Deprecations.
        let mut seen_deprecations: HashSet<String> = HashSet::new();
        for (package, entries, src) in deprecations {
            let Some(pkg) = packages.get_mut(&package) else {
                problems.push(
                    Problem::new("olm.deprecations refers to a package that has no olm.package")
                        .file(src.as_deref())
                        .package(&package)
                        .fix("fix \"package\" or remove the blob"),
                );
                continue;
            };
            if !seen_deprecations.insert(package.clone()) {
                problems.push(
                    Problem::new("more than one olm.deprecations blob")
                        .file(src.as_deref())
                        .package(&package)
                        .fix("merge them into one"),
                );
                continue;
            }
            let mut refs = HashSet::new();
            for entry in entries {
                if !refs.insert(entry.reference.clone()) {
                    problems.push(
                        Problem::new(format!(
                            "duplicate deprecation reference {:?}",
                            entry.reference
                        ))
                        .file(src.as_deref())
                        .package(&package)
                        .fix("keep one entry per reference"),
                    );
                    continue;
                }
                match &entry.reference {
                    DeprecationReference::Package => pkg.deprecation = Some(entry.message.clone()),
                    DeprecationReference::Channel(c) => match pkg.channel_index.get(c) {
                        Some(&i) => pkg.channels[i].deprecation = Some(entry.message.clone()),
                        None => problems.push(
                            Problem::new("deprecation refers to a channel that does not exist")
                                .file(src.as_deref())
                                .package(&package)
                                .channel(c)
                                .fix("fix the reference name or remove the entry"),
                        ),
                    },
                    DeprecationReference::Bundle(b) => match pkg.bundle_index.get(b) {
                        Some(&i) => pkg.bundles[i].deprecation = Some(entry.message.clone()),
                        None => problems.push(
                            Problem::new(
                                "deprecation refers to a bundle that does not exist in the package",
                            )
                            .file(src.as_deref())
                            .package(&package)
                            .bundle(b)
                            .fix("fix the reference name or remove the entry"),
                        ),
                    },
                }
                pkg.deprecations.push(entry);
            }
        }

        // Per-package checks, channel graphs, indexes.
        for pkg in packages.values_mut() {
            check_package(pkg, &mut problems);
        }

        let packages: Vec<Package> = packages.into_values().collect();
        let package_index = packages
            .iter()
            .enumerate()
            .map(|(i, p)| (p.name.clone(), i))
            .collect();
        let mut bundles_by_name: HashMap<String, Vec<BundleAddr>> = HashMap::new();
        let mut providers: HashMap<Gvk, Vec<BundleAddr>> = HashMap::new();
        for (pi, pkg) in packages.iter().enumerate() {
            for (bi, b) in pkg.bundles.iter().enumerate() {
                let addr = BundleAddr {
                    package: pi as u32,
                    bundle: bi as u32,
                };
                bundles_by_name
                    .entry(b.name.clone())
                    .or_default()
                    .push(addr);
                let mut seen = HashSet::new();
                for gvk in b.provided_gvks() {
                    if seen.insert(gvk) {
                        providers.entry(gvk.clone()).or_default().push(addr);
                    }
                }
            }
        }

        let mut metas_by_package: HashMap<String, Vec<u32>> = HashMap::new();
        for (i, m) in metas.iter().enumerate() {
            if !m.package.is_empty() {
                metas_by_package
                    .entry(m.package.clone())
                    .or_default()
                    .push(i as u32);
            }
        }

        let catalog = Catalog {
            packages,
            package_index,
            metas,
            metas_by_package,
            bundles_by_name,
            providers,
        };
        (catalog, problems)
    }

    /// The package a blob belongs to (the name, for olm.package blobs).
    fn meta_package(m: &Meta) -> &str {
        if m.schema == SCHEMA_PACKAGE {
            &m.name
        } else {
            &m.package
        }
    }

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

    fn parse_package(obj: &Map<String, Value>, meta: &Meta) -> Result<Package, String> {
        let icon = match get_ci(obj, "icon") {
            None | Some(Value::Null) => None,
            Some(Value::Object(icon)) => {
                let base64data = opt_str(icon, "base64data")?;
                let cleaned: String = base64data
                    .chars()
                    .filter(|c| *c != '\n' && *c != '\r')
                    .collect();
                if base64::engine::general_purpose::STANDARD
                    .decode(cleaned.as_bytes())
                    .is_err()
                {
                    return Err(
                        "icon.base64data is not valid standard base64; re-encode the icon".into(),
                    );
                }
                Some(Icon {
                    base64data,
                    mediatype: opt_str(icon, "mediatype")?,
                })
            }
            Some(other) => {
                return Err(format!(
                    "\"icon\" must be an object, found {}",
                    json_kind(other)
                ));
            }
        };
        let description = opt_str(obj, "description")?;
        Ok(Package {
            name: meta.name.clone(),
            default_channel: opt_str(obj, "defaultChannel")?,
            description: (!description.is_empty()).then_some(description),
            icon,
            deprecation: None,
            deprecations: Vec::new(),
            properties: parse_properties(obj)?,
            source: meta.source.clone(),
            channels: Vec::new(),
            channel_index: HashMap::new(),
            bundles: Vec::new(),
            bundle_index: HashMap::new(),
        })
    }

    fn parse_properties(obj: &Map<String, Value>) -> Result<Vec<Property>, String> {
        parse_properties_in(obj, None)
    }

    /// Parse `properties`; with `blob`, values are taken from the blob's bytes.
    fn parse_properties_in(
        obj: &Map<String, Value>,
        blob: Option<(&Blob, &str, &[Option<(usize, usize)>])>,
    ) -> Result<Vec<Property>, String> {
        // Ranges only exist for the exact key "properties".
        let exact = obj.contains_key("properties");
        match get_ci(obj, "properties") {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let text = match blob {
                        Some((b, text, ranges)) if exact => ranges
                            .get(i)
                            .copied()
                            .flatten()
                            .and_then(|(s, e)| JsonText::from_blob(b, text, s, e)),
                        _ => None,
                    };
                    Property::parse_with_text(p, text).map_err(|e| format!("properties[{i}]: {e}"))
                })
                .collect::<Result<Vec<_>, _>>()
                // Collecting through a Result grows the Vec by doubling; the catalog keeps
                // these for its lifetime (one per bundle), so drop the unused capacity.
                .map(|mut properties| {
                    properties.shrink_to_fit();
                    properties
                }),
            Some(other) => Err(format!(
                "\"properties\" must be a list, found {}",
                json_kind(other)
            )),
        }
    }

    fn parse_channel(
        obj: &Map<String, Value>,
        meta: &Meta,
    ) -> Result<(Channel, Vec<Problem>), String> {
        let src = meta.source.as_deref();
        let mut problems = Vec::new();
        if meta.name.is_empty() {
            return Err("olm.channel has no name; set \"name\"".into());
        }
        let items = match get_ci(obj, "entries") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items.clone(),
            Some(other) => {
                return Err(format!(
                    "\"entries\" must be a list, found {}",
                    json_kind(other)
                ));
            }
        };
        let mut entries = Vec::with_capacity(items.len());
        let mut entry_index = HashMap::new();
        for (i, item) in items.iter().enumerate() {
            let Value::Object(e) = item else {
                return Err(format!(
                    "entries[{i}] must be an object, found {}",
                    json_kind(item)
                ));
            };
            let name = opt_str(e, "name").map_err(|m| format!("entries[{i}]: {m}"))?;
            if name.is_empty() {
                problems.push(
                    Problem::new(format!("entries[{i}] has no name"))
                        .file(src)
                        .package(&meta.package)
                        .channel(&meta.name)
                        .fix("set the entry's \"name\" to a bundle name"),
                );
                continue;
            }
            let replaces = opt_str(e, "replaces").map_err(|m| format!("entry {name:?}: {m}"))?;
            let skips = match get_ci(e, "skips") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(s)) => {
                    let mut out = Vec::with_capacity(s.len());
                    for (j, v) in s.iter().enumerate() {
                        match v {
                            Value::String(x) if !x.is_empty() => out.push(x.clone()),
                            Value::String(_) => problems.push(
                                Problem::new(format!("skips[{j}] of entry is empty"))
                                    .file(src)
                                    .package(&meta.package)
                                    .channel(&meta.name)
                                    .bundle(&name)
                                    .fix("remove the empty skip"),
                            ),
                            other => {
                                return Err(format!(
                                    "entry {name:?}: skips[{j}] must be a string, found {}",
                                    json_kind(other)
                                ));
                            }
                        }
                    }
                    out
                }
                Some(other) => {
                    return Err(format!(
                        "entry {name:?}: \"skips\" must be a list, found {}",
                        json_kind(other)
                    ));
                }
            };
            let skip_range = opt_str(e, "skipRange").map_err(|m| format!("entry {name:?}: {m}"))?;
            let skip_range_parsed = if skip_range.is_empty() {
                None
            } else {
                match VersionRange::parse(&skip_range) {
                    Ok(r) => Some(r),
                    Err(err) => {
                        problems.push(
                            Problem::new(format!("skipRange does not parse: {err}"))
                                .code("InvalidSkipRange")
                                .file(src)
                                .package(&meta.package)
                                .channel(&meta.name)
                                .bundle(&name)
                                .fix("write a blang/semver range such as \">=1.0.0 <1.2.0\""),
                        );
                        None
                    }
                }
            };
            if entry_index.contains_key(&name) {
                problems.push(
                    Problem::new("duplicate entry in channel")
                        .code("DuplicateEntry")
                        .file(src)
                        .package(&meta.package)
                        .channel(&meta.name)
                        .bundle(&name)
                        .fix("keep one entry per bundle name"),
                );
                continue;
            }
            entry_index.insert(name.clone(), entries.len());
            entries.push(ChannelEntry {
                name,
                replaces: (!replaces.is_empty()).then_some(replaces),
                skips,
                skip_range: (!skip_range.is_empty()).then_some(skip_range),
                skip_range_parsed,
            });
        }
        let channel = Channel {
            name: meta.name.clone(),
            package: meta.package.clone(),
            deprecation: None,
            properties: parse_properties(obj)?,
            source: meta.source.clone(),
            entries,
            entry_index,
            head: None,
            replaces_chain: Vec::new(),
        };
        Ok((channel, problems))
    }

    fn parse_bundle(
        obj: &Map<String, Value>,
        meta: &Meta,
        text: &str,
        ranges: &[Option<(usize, usize)>],
    ) -> Result<Bundle, String> {
        if meta.name.is_empty() {
            return Err(
                "olm.bundle has no name; set \"name\" (conventionally the CSV name)".into(),
            );
        }
        if meta.package.is_empty() {
            return Err("olm.bundle has no package; set \"package\"".into());
        }
        let image = opt_str(obj, "image")?;
        if let Some(err) = image_ref_error(&image) {
            return Err(format!(
                "image {image:?} is not a valid image reference: {err}"
            ));
        }
        let properties = parse_properties_in(obj, Some((&meta.blob, text, ranges)))?;
        let pkg_props: Vec<&PackageProperty> = properties
            .iter()
            .filter_map(|p| match &p.kind {
                PropertyKind::Package(pp) => Some(pp),
                _ => None,
            })
            .collect();
        let pp = match pkg_props.as_slice() {
            [one] => *one,
            [] => return Err("bundle has no olm.package property; add {type: olm.package, value: {packageName, version}}".into()),
            _ => return Err(format!("bundle has {} olm.package properties; keep exactly one", pkg_props.len())),
        };
        if pp.package_name != meta.package {
            return Err(format!(
                "olm.package property says packageName {:?} but the bundle's package is {:?}; make them equal",
                pp.package_name, meta.package
            ));
        }
        let version = Version::parse(&pp.version)
            .map_err(|e| format!("olm.package version {:?} is not valid semver ({e}); use MAJOR.MINOR.PATCH[-pre][+build] without a leading 'v'", pp.version))?;
        if let Some(release) = &pp.release {
            if !version.build.is_empty() {
                return Err("version has build metadata and a release is set; drop one".into());
            }
            if release.len() > 20 || semver::Prerelease::new(release).is_err() {
                return Err(format!(
                    "release {release:?} must be dot-separated alphanumerics/hyphens, at most 20 characters"
                ));
            }
            let expected = format!("{}-v{}-{}", meta.package, pp.version, release);
            if meta.name != expected {
                return Err(format!(
                    "a bundle with a release must be named {expected:?}"
                ));
            }
        }
        let related_images = match get_ci(obj, "relatedImages") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => {
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    let Value::Object(ri) = item else {
                        return Err(format!("relatedImages[{i}] must be an object"));
                    };
                    let image = opt_str(ri, "image")?;
                    if let Some(err) = image_ref_error(&image) {
                        return Err(format!(
                            "relatedImages[{i}].image {image:?} is not a valid image reference: {err}"
                        ));
                    }
                    out.push(RelatedImage {
                        name: opt_str(ri, "name")?,
                        image,
                    });
                }
                out
            }
            Some(other) => {
                return Err(format!(
                    "\"relatedImages\" must be a list, found {}",
                    json_kind(other)
                ));
            }
        };
        let mut objects = Vec::new();
        for p in &properties {
            if p.kind == PropertyKind::BundleObject {
                let v = p.value();
                let data = v.get("data").and_then(Value::as_str).unwrap_or_default();
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(data.trim().as_bytes())
                    .map_err(|e| format!("olm.bundle.object data is not valid base64: {e}"))?;
                let text = String::from_utf8(bytes)
                    .map_err(|_| "olm.bundle.object data is not UTF-8 text".to_string())?;
                let docs = crate::load::parse_manifest_text(&text)
                    .map_err(|e| format!("olm.bundle.object does not decode: {e}"))?;
                objects.extend(docs);
            }
        }
        let csv_index = objects.iter().position(is_csv);
        Ok(Bundle {
            name: meta.name.clone(),
            package: meta.package.clone(),
            image,
            version,
            release: pp.release.clone(),
            properties,
            related_images,
            objects,
            channels: Vec::new(),
            deprecation: None,
            source: meta.source.clone(),
            csv_index,
        })
    }

    fn parse_deprecations(obj: &Map<String, Value>) -> Result<Vec<DeprecationEntry>, String> {
        let items = match get_ci(obj, "entries") {
            None | Some(Value::Null) => return Ok(Vec::new()),
            Some(Value::Array(items)) => items,
            Some(other) => {
                return Err(format!(
                    "\"entries\" must be a list, found {}",
                    json_kind(other)
                ));
            }
        };
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let Value::Object(e) = item else {
                return Err(format!("entries[{i}] must be an object"));
            };
            let Some(Value::Object(r)) = get_ci(e, "reference") else {
                return Err(format!("entries[{i}] has no \"reference\" object"));
            };
            let schema = opt_str(r, "schema")?;
            let name = opt_str(r, "name")?;
            let reference = match schema.as_str() {
                SCHEMA_PACKAGE if name.is_empty() => DeprecationReference::Package,
                SCHEMA_PACKAGE => {
                    return Err(format!(
                        "entries[{i}]: a package reference must not set a name (the package is implied)"
                    ));
                }
                SCHEMA_CHANNEL | SCHEMA_BUNDLE if name.is_empty() => {
                    return Err(format!("entries[{i}]: reference.name must be set"));
                }
                SCHEMA_CHANNEL => DeprecationReference::Channel(name),
                SCHEMA_BUNDLE => DeprecationReference::Bundle(name),
                "" => return Err(format!("entries[{i}]: reference.schema must be set")),
                other => {
                    return Err(format!(
                        "entries[{i}]: reference.schema {other:?} is not olm.package, olm.channel or olm.bundle"
                    ));
                }
            };
            let message = opt_str(e, "message")?;
            if message.is_empty() {
                return Err(format!("entries[{i}]: message must not be empty"));
            }
            out.push(DeprecationEntry { reference, message });
        }
        Ok(out)
    }

    fn check_package(pkg: &mut Package, problems: &mut Vec<Problem>) {
        let src = pkg.source.clone();
        let name = pkg.name.clone();
        // Sort channels and bundles by name; rebuild indexes.
        pkg.channels.sort_by(|a, b| a.name.cmp(&b.name));
        pkg.channel_index = pkg
            .channels
            .iter()
            .enumerate()
            .map(|(i, c)| (c.name.clone(), i))
            .collect();
        pkg.bundles.sort_by(|a, b| a.name.cmp(&b.name));
        pkg.bundle_index = pkg
            .bundles
            .iter()
            .enumerate()
            .map(|(i, b)| (b.name.clone(), i))
            .collect();

        if pkg.default_channel.is_empty() {
            problems.push(
                Problem::new("package has no defaultChannel")
                    .code("MissingDefaultChannel")
                    .file(src.as_deref())
                    .package(&name)
                    .fix("set defaultChannel to one of its channels"),
            );
        } else if !pkg.channel_index.contains_key(&pkg.default_channel) {
            problems.push(
                Problem::new(format!(
                    "default channel {:?} does not exist",
                    pkg.default_channel
                ))
                .code("MissingDefaultChannel")
                .file(src.as_deref())
                .package(&name)
                .fix(format!(
                    "add an olm.channel named {:?} or set defaultChannel to one of: {}",
                    pkg.default_channel,
                    names(pkg.channels.iter().map(|c| c.name.as_str()))
                )),
            );
        }
        if pkg.channels.is_empty() {
            problems.push(
                Problem::new("package has no channels")
                    .code("NoChannels")
                    .file(src.as_deref())
                    .package(&name)
                    .fix("add an olm.channel blob listing its bundles"),
            );
        }

        let mut in_channels: HashMap<String, Vec<String>> = HashMap::new();
        for ch in &mut pkg.channels {
            let csrc = ch.source.clone();
            if ch.entries.is_empty() {
                problems.push(
                    Problem::new("channel has no entries")
                        .code("EmptyChannel")
                        .file(csrc.as_deref())
                        .package(&name)
                        .channel(&ch.name)
                        .fix("add at least one bundle entry"),
                );
                continue;
            }
            for e in &ch.entries {
                if pkg.bundle_index.contains_key(&e.name) {
                    in_channels
                        .entry(e.name.clone())
                        .or_default()
                        .push(ch.name.clone());
                } else {
                    problems.push(
                        Problem::new(format!(
                            "channel entry {:?} has no olm.bundle in the package",
                            e.name
                        ))
                        .file(csrc.as_deref())
                        .package(&name)
                        .channel(&ch.name)
                        .bundle(&e.name)
                        .code("MissingBundle")
                        .fix("add the olm.bundle or remove the entry from the channel"),
                    );
                }
            }
            compute_graph(ch, &name, problems);
        }
        for b in &mut pkg.bundles {
            match in_channels.remove(&b.name) {
                Some(mut chs) => {
                    chs.sort();
                    b.channels = chs;
                }
                None => problems.push(
                    Problem::new("bundle is not in any channel")
                        .code("BundleNotInChannel")
                        .file(b.source.as_deref())
                        .package(&name)
                        .bundle(&b.name)
                        .fix(
                            "add an entry for it to a channel of the package, or remove the bundle",
                        ),
                ),
            }
        }
        for b in &pkg.bundles {
            if b.image.is_empty() && b.objects.is_empty() {
                problems.push(
                    Problem::new("bundle image is not set and the bundle inlines no manifests (olm.bundle.object)")
                        .file(b.source.as_deref())
                        .package(&name)
                        .bundle(&b.name)
                        .code("MissingImage")
                        .fix("set \"image\" to the bundle image reference"),
                );
            }
        }
        // Unique versions (version + release).
        let mut by_version: BTreeMap<String, Vec<&str>> = BTreeMap::new();
        for b in &pkg.bundles {
            let key = match &b.release {
                Some(r) => format!("{}-{}", b.version, r),
                None => b.version.to_string(),
            };
            by_version.entry(key).or_default().push(&b.name);
        }
        for (v, bs) in by_version {
            if bs.len() > 1 {
                problems.push(
                    Problem::new(format!(
                        "bundles {} share version {v}",
                        names(bs.iter().copied())
                    ))
                    .code("DuplicateVersion")
                    .file(src.as_deref())
                    .package(&name)
                    .fix("give every bundle of a package a distinct version"),
                );
            }
        }
    }

    fn names<'a>(it: impl Iterator<Item = &'a str>) -> String {
        let v: Vec<String> = it.map(|s| format!("{s:?}")).collect();
        if v.is_empty() {
            "(none)".into()
        } else {
            v.join(", ")
        }
    }

    /// Head, replaces chain, cycles and stranded entries (operator-registry's
    /// `validateReplacesChain` rules).
    fn compute_graph(ch: &mut Channel, package: &str, problems: &mut Vec<Problem>) {
        let src = ch.source.clone();
        let n = ch.entries.len();
        let mut incoming = vec![false; n];
        for e in &ch.entries {
            for target in e.replaces.iter().chain(e.skips.iter()) {
                if let Some(&i) = ch.entry_index.get(target) {
                    incoming[i] = true;
                }
            }
        }
        let heads: Vec<usize> = (0..n).filter(|&i| !incoming[i]).collect();
        match heads.as_slice() {
            [h] => ch.head = Some(*h),
            [] => problems.push(
                Problem::new(
                    "channel has no head: every entry is replaced or skipped by another (a cycle)",
                )
                .code("NoHead")
                .file(src.as_deref())
                .package(package)
                .channel(&ch.name)
                .fix("break the cycle so exactly one entry is not replaced or skipped"),
            ),
            many => {
                let mut hs: Vec<&str> = many.iter().map(|&i| ch.entries[i].name.as_str()).collect();
                hs.sort();
                problems.push(
                    Problem::new(format!("channel has {} heads: {}", hs.len(), names(hs.iter().copied()))).code("MultipleHeads")
                        .file(src.as_deref())
                        .package(package)
                        .channel(&ch.name)
                        .fix("make all but the newest of them replaced or skipped by another entry, so exactly one head remains"),
                );
            }
        }

        // Cycles over replaces/skips edges between entries.
        let edges: Vec<Vec<usize>> = ch
            .entries
            .iter()
            .map(|e| {
                e.replaces
                    .iter()
                    .chain(e.skips.iter())
                    .filter_map(|t| ch.entry_index.get(t).copied())
                    .collect()
            })
            .collect();
        for cycle in find_cycles(&edges) {
            let mut path: Vec<&str> = cycle.iter().map(|&i| ch.entries[i].name.as_str()).collect();
            path.push(ch.entries[cycle[0]].name.as_str());
            problems.push(
                Problem::new(format!("upgrade graph has a cycle: {}", path.join(" -> ")))
                    .code("Cycle")
                    .file(src.as_deref())
                    .package(package)
                    .channel(&ch.name)
                    .fix("remove one replaces/skips edge of the cycle"),
            );
        }

        // Replaces chain from the head; stranded entries. We apply the set-based rule
        // of operator-registry's `validateReplacesChain` (follow `replaces` from the
        // head through every entry; an entry is stranded when it is neither on that
        // chain nor skipped by any entry). The newer graph-based variant stops at
        // skipped entries and rejects real published catalogs (e.g. clusterpulse
        // fast-v0 in the community v4.21 index), so we do not use it.
        if let Some(head) = ch.head {
            let mut on_chain = vec![false; n];
            let mut skipped = vec![false; n];
            for e in &ch.entries {
                for s in &e.skips {
                    if let Some(&j) = ch.entry_index.get(s) {
                        skipped[j] = true;
                    }
                }
            }
            let mut chain = Vec::new();
            let mut cur = Some(head);
            while let Some(i) = cur {
                if on_chain[i] {
                    break;
                }
                on_chain[i] = true;
                chain.push(i);
                cur = ch.entries[i]
                    .replaces
                    .as_ref()
                    .and_then(|r| ch.entry_index.get(r).copied());
            }
            let mut stranded: Vec<&str> = (0..n)
                .filter(|&i| !on_chain[i] && !skipped[i])
                .map(|i| ch.entries[i].name.as_str())
                .collect();
            if !stranded.is_empty() {
                stranded.sort();
                problems.push(
                    Problem::new(format!(
                        "stranded entries (neither on the replaces chain from head {:?} nor skipped by any entry): {}",
                        ch.entries[head].name,
                        names(stranded.iter().copied())
                    )).code("StrandedEntries")
                    .file(src.as_deref())
                    .package(package)
                    .channel(&ch.name)
                    .fix("make an entry on the chain replace each of them, or list them in some entry's skips, or remove them"),
                );
            }
            ch.replaces_chain = chain;
        }
    }

    /// Elementary cycles, one report per strongly connected component with a cycle
    /// (enough to point the user at it; bounded work).
    fn find_cycles(edges: &[Vec<usize>]) -> Vec<Vec<usize>> {
        // Iterative DFS with colours; record the cycle found through each back edge,
        // skipping cycles whose node set was already reported.
        let n = edges.len();
        let mut colour = vec![0u8; n];
        let mut reported: HashSet<Vec<usize>> = HashSet::new();
        let mut cycles = Vec::new();
        for start in 0..n {
            if colour[start] != 0 {
                continue;
            }
            let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
            let mut path: Vec<usize> = vec![start];
            colour[start] = 1;
            while let Some(&mut (node, ref mut next)) = stack.last_mut() {
                if *next < edges[node].len() {
                    let to = edges[node][*next];
                    *next += 1;
                    match colour[to] {
                        0 => {
                            colour[to] = 1;
                            stack.push((to, 0));
                            path.push(to);
                        }
                        1 => {
                            if let Some(pos) = path.iter().position(|&p| p == to) {
                                let cycle = path[pos..].to_vec();
                                let mut key = cycle.clone();
                                key.sort_unstable();
                                if reported.insert(key) {
                                    cycles.push(cycle);
                                }
                            }
                        }
                        _ => {}
                    }
                } else {
                    colour[node] = 2;
                    stack.pop();
                    path.pop();
                }
            }
        }
        cycles
    }

    pub(crate) fn is_csv(v: &Value) -> bool {
        v.get("kind").and_then(Value::as_str) == Some("ClusterServiceVersion")
    }

    fn dns1123_label_error(name: &str) -> Option<String> {
        if name.len() > 63 {
            return Some(format!("{} characters, at most 63 allowed", name.len()));
        }
        let ok_chars = name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        let ok_ends = name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric())
            && name
                .bytes()
                .last()
                .is_some_and(|b| b.is_ascii_alphanumeric());
        if ok_chars && ok_ends {
            None
        } else {
            Some(format!(
                "{name:?} must consist of lowercase alphanumerics or '-' and start and end with an alphanumeric"
            ))
        }
    }

    /// A light docker-reference check: what opm's parser would certainly reject.
    fn image_ref_error(image: &str) -> Option<&'static str> {
        if image.is_empty() {
            return None;
        }
        if image.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Some("it contains whitespace");
        }
        let (name, _digest) = image.split_once('@').unwrap_or((image, ""));
        if name.is_empty() {
            return Some("the repository name is empty");
        }
        // The repository path (everything after the host) must be lowercase.
        let path = match name.split_once('/') {
            Some((host, rest)) if host.contains(['.', ':']) || host == "localhost" => rest,
            _ => name,
        };
        let repo = path
            .rsplit_once(':')
            .map_or(path, |(r, tag)| if tag.contains('/') { path } else { r });
        if repo.chars().any(|c| c.is_ascii_uppercase()) {
            return Some("repository names must be lowercase");
        }
        None
    }
}

pub(crate) use build::is_csv as is_csv_object;
pub(crate) use build::{assemble as assemble_prepared, prepare as prepare_document};

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn docs(values: Vec<Value>) -> Vec<Document> {
        values
            .into_iter()
            .map(|value| Document {
                value,
                source: None,
            })
            .collect()
    }

    fn bundle(name: &str, version: &str) -> Value {
        json!({"schema": "olm.bundle", "package": "p", "name": name, "image": format!("quay.io/x/p:{version}"),
               "properties": [{"type": "olm.package", "value": {"packageName": "p", "version": version}},
                              {"type": "olm.gvk", "value": {"group": "x.io", "version": "v1", "kind": "X"}}]})
    }

    #[test]
    fn large_blobs_are_held_compressed_and_read_back_whole() {
        let description = "An operator that manages etcd clusters. ".repeat(100);
        let mut big = bundle("p.v1.0.0", "1.0.0");
        big["properties"].as_array_mut().unwrap().push(json!({"type": "olm.csv.metadata",
            "value": {"description": description, "displayName": "P"}}));
        let (cat, problems) = Catalog::build(docs(vec![
            json!({"schema": "olm.package", "name": "p", "defaultChannel": "stable"}),
            json!({"schema": "olm.channel", "package": "p", "name": "stable", "entries": [{"name": "p.v1.0.0"}]}),
            big.clone(),
        ]));
        assert!(problems.is_empty(), "{problems:?}");
        let meta = cat.metas(MetaFilter { schema: Some(SCHEMA_BUNDLE), ..Default::default() }).next().unwrap();
        assert!(meta.blob.is_compressed());
        assert!(meta.blob.stored_len() * 4 < meta.blob.len(), "{:?}", meta.blob);
        // The text read back is the canonical JSON of the document, byte for byte.
        let mut canonical = to_canonical_string(&big);
        canonical.push('\n');
        assert_eq!(meta.blob.text(), canonical);
        assert_eq!(meta.blob.len(), canonical.len());
        // The CSV metadata shares the compressed blob; small values are copies.
        let b = cat.bundle("p", "p.v1.0.0").unwrap();
        assert_eq!(b.csv_metadata().unwrap()["description"], description.as_str());
        let gvk = b.properties.iter().find(|p| p.type_name == "olm.gvk").unwrap();
        assert!(matches!(gvk.value_json.0, JsonTextRepr::Owned(_)));
        assert_eq!(gvk.value_json.text(), r#"{"group":"x.io","kind":"X","version":"v1"}"#);
        // Short documents stay as they are.
        let package = cat.metas(MetaFilter { schema: Some(SCHEMA_PACKAGE), ..Default::default() }).next().unwrap();
        assert!(!package.blob.is_compressed());
        // Text that does not compress is not held compressed either.
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let noise: String = (0..4000)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                char::from(b'!' + (state % 90) as u8)
            })
            .collect();
        assert!(!Blob::new(&noise).is_compressed());
        assert_eq!(Blob::new(&noise).text(), noise);
    }

    #[test]
    fn builds_indexes_and_head() {
        let (cat, problems) = Catalog::build(docs(vec![
            json!({"schema": "olm.package", "name": "p", "defaultChannel": "stable"}),
            json!({"schema": "olm.channel", "package": "p", "name": "stable", "entries": [
                {"name": "p.v1.0.0"}, {"name": "p.v1.1.0", "replaces": "p.v1.0.0"}, {"name": "p.v2.0.0", "replaces": "p.v1.1.0", "skipRange": ">=1.0.0 <2.0.0"}]}),
            bundle("p.v1.0.0", "1.0.0"),
            bundle("p.v1.1.0", "1.1.0"),
            bundle("p.v2.0.0", "2.0.0"),
            json!({"schema": "my.custom", "package": "p", "name": "c", "z": 1, "a": 2}),
        ]));
        assert!(problems.is_empty(), "{problems:?}");
        let ch = cat.channel("p", "stable").unwrap();
        assert_eq!(ch.head().unwrap().name, "p.v2.0.0");
        let chain: Vec<&str> = ch.replaces_chain().map(|e| e.name.as_str()).collect();
        assert_eq!(chain, ["p.v2.0.0", "p.v1.1.0", "p.v1.0.0"]);
        let succ: Vec<&str> = ch
            .successors("p.v1.0.0", Some(&Version::new(1, 0, 0)))
            .iter()
            .map(|e| e.name.as_str())
            .collect();
        assert_eq!(succ, ["p.v1.1.0", "p.v2.0.0"]);
        let gvk = Gvk {
            group: "x.io".into(),
            version: "v1".into(),
            kind: "X".into(),
        };
        assert_eq!(cat.bundles_providing(&gvk).count(), 3);
        assert_eq!(cat.counts(), (1, 1, 3));
        let schemas: Vec<&str> = cat.all_metas().iter().map(|m| m.schema.as_str()).collect();
        assert_eq!(
            schemas,
            [
                "olm.package",
                "olm.channel",
                "olm.bundle",
                "olm.bundle",
                "olm.bundle",
                "my.custom"
            ]
        );
        let custom = cat
            .metas(MetaFilter {
                schema: Some("my.custom"),
                ..Default::default()
            })
            .next()
            .unwrap();
        assert_eq!(
            &*custom.blob.text(),
            "{\"a\":2,\"name\":\"c\",\"package\":\"p\",\"schema\":\"my.custom\",\"z\":1}\n"
        );
        assert_eq!(cat.bundle("p", "p.v1.1.0").unwrap().channels, ["stable"]);
    }

    #[test]
    fn reports_all_problems() {
        let (_, problems) = Catalog::build(docs(vec![
            json!({"schema": "olm.package", "name": "p", "defaultChannel": "missing"}),
            json!({"schema": "olm.channel", "package": "p", "name": "a", "entries": [
                {"name": "p.v1.0.0"}, {"name": "p.v9.0.0"}, {"name": "p.v1.1.0", "skipRange": "not a range"}]}),
            bundle("p.v1.0.0", "1.0.0"),
            bundle("p.v1.1.0", "1.1.0"),
            bundle("p.v1.2.0", "1.1.0"),
            json!({"package": "p", "name": "no-schema"}),
        ]));
        let text: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
        let all = text.join("\n");
        assert!(
            all.contains("default channel \"missing\" does not exist"),
            "{all}"
        );
        assert!(
            all.contains("channel entry \"p.v9.0.0\" has no olm.bundle"),
            "{all}"
        );
        assert!(all.contains("skipRange does not parse"), "{all}");
        assert!(all.contains("heads"), "{all}");
        assert!(
            all.contains("bundle \"p.v1.2.0\": bundle is not in any channel"),
            "{all}"
        );
        assert!(all.contains("share version 1.1.0"), "{all}");
        assert!(all.contains("no \"schema\""), "{all}");
    }

    #[test]
    fn cycles_and_stranded() {
        let (_, problems) = Catalog::build(docs(vec![
            json!({"schema": "olm.package", "name": "p", "defaultChannel": "a"}),
            json!({"schema": "olm.channel", "package": "p", "name": "a", "entries": [
                {"name": "p.v3.0.0", "replaces": "p.v2.0.0"},
                {"name": "p.v2.0.0", "replaces": "p.v1.0.0"},
                {"name": "p.v1.0.0", "replaces": "p.v2.0.0"},
                {"name": "p.v0.5.0"}]}),
            bundle("p.v3.0.0", "3.0.0"),
            bundle("p.v2.0.0", "2.0.0"),
            bundle("p.v1.0.0", "1.0.0"),
            bundle("p.v0.5.0", "0.5.0"),
        ]));
        let all = problems
            .iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join("\n");
        assert!(
            all.contains("cycle: p.v2.0.0 -> p.v1.0.0 -> p.v2.0.0"),
            "{all}"
        );
        assert!(all.contains("2 heads"), "{all}");
    }

    #[test]
    fn skipped_entries_are_not_stranded() {
        let (cat, problems) = Catalog::build(docs(vec![
            json!({"schema": "olm.package", "name": "p", "defaultChannel": "a"}),
            json!({"schema": "olm.channel", "package": "p", "name": "a", "entries": [
                {"name": "p.v2.0.0", "replaces": "p.v1.0.0", "skips": ["p.v1.1.0"]},
                {"name": "p.v1.1.0"}, {"name": "p.v1.0.0", "replaces": "p.v0.1.0"}]}),
            bundle("p.v2.0.0", "2.0.0"),
            bundle("p.v1.1.0", "1.1.0"),
            bundle("p.v1.0.0", "1.0.0"),
        ]));
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(
            cat.channel("p", "a").unwrap().head().unwrap().name,
            "p.v2.0.0"
        );
    }

    #[test]
    fn constraints_parse_recursively() {
        let p = Property::new(
            "olm.constraint",
            json!({"failureMessage": "need db", "any": {"constraints": [
            {"package": {"packageName": "a", "versionRange": ">=1.0.0"}},
            {"not": {"constraints": [{"gvk": {"group": "g", "version": "v1", "kind": "K"}}]}},
            {"cel": {"rule": "properties.exists(p, p.type == 'x')"}}]}}),
        )
        .unwrap();
        let PropertyKind::Constraint(c) = &p.kind else {
            panic!("not a constraint")
        };
        assert_eq!(c.failure_message.as_deref(), Some("need db"));
        let ConstraintKind::Any(list) = &c.kind else {
            panic!("not any")
        };
        assert_eq!(list.len(), 3);
        assert!(
            matches!(&list[1].kind, ConstraintKind::Not(inner) if matches!(inner[0].kind, ConstraintKind::Gvk(_)))
        );
        assert!(
            Property::new(
                "olm.constraint",
                json!({"gvk": {"group": "g", "version": "v", "kind": "k"}, "cel": {"rule": "x"}})
            )
            .is_err()
        );
        assert!(Property::new("olm.constraint", json!({"bogus": 1})).is_err());
        // unknown property types are kept
        let other = Property::new("olm.maxOpenShiftVersion", json!("4.8")).unwrap();
        assert_eq!(other.kind, PropertyKind::Other);
        assert_eq!(&*other.value_json.text(), "\"4.8\"");
    }

    #[test]
    fn metas_keep_load_order_and_filter_like_catalogd() {
        let (cat, problems) = Catalog::build(docs(vec![
            bundle("p.v1.0.0", "1.0.0"),
            json!({"schema": "olm.channel", "package": "p", "name": "stable", "entries": [{"name": "p.v1.0.0"}]}),
            json!({"schema": "olm.package", "name": "p", "defaultChannel": "stable"}),
            json!({"schema": "olm.deprecations", "package": "p", "entries": [
                {"reference": {"schema": "olm.package"}, "message": "p is end of life"},
                {"reference": {"schema": "olm.channel", "name": "stable"}, "message": "use fast"},
                {"reference": {"schema": "olm.bundle", "name": "p.v1.0.0"}, "message": "CVE-1"}]}),
        ]));
        assert!(problems.is_empty(), "{problems:?}");
        let load: Vec<&str> = cat.all_metas().iter().map(|m| m.schema.as_str()).collect();
        assert_eq!(
            load,
            [
                "olm.bundle",
                "olm.channel",
                "olm.package",
                "olm.deprecations"
            ]
        );
        let canonical: Vec<&str> = cat
            .canonical_metas()
            .iter()
            .map(|m| m.schema.as_str())
            .collect();
        assert_eq!(
            canonical,
            [
                "olm.package",
                "olm.channel",
                "olm.bundle",
                "olm.deprecations"
            ]
        );
        // `package` matches the blob's package field only: not the olm.package blob
        let by_pkg: Vec<&str> = cat
            .metas(MetaFilter {
                package: Some("p"),
                ..Default::default()
            })
            .map(|m| m.schema.as_str())
            .collect();
        assert_eq!(by_pkg, ["olm.bundle", "olm.channel", "olm.deprecations"]);
        let pkg_blob: Vec<&Meta> = cat
            .metas(MetaFilter {
                schema: Some("olm.package"),
                name: Some("p"),
                package: Some(""),
            })
            .collect();
        assert_eq!(pkg_blob.len(), 1);
        assert_eq!(
            cat.metas(MetaFilter {
                package: Some("nope"),
                ..Default::default()
            })
            .count(),
            0
        );
        // deprecations land on the objects
        let p = cat.package("p").unwrap();
        assert_eq!(p.deprecation.as_deref(), Some("p is end of life"));
        assert_eq!(
            p.channel("stable").unwrap().deprecation.as_deref(),
            Some("use fast")
        );
        assert_eq!(
            p.bundle("p.v1.0.0").unwrap().deprecation.as_deref(),
            Some("CVE-1")
        );
        assert_eq!(p.deprecations.len(), 3);
    }

    #[test]
    fn stranded_entries_are_reported() {
        let (_, problems) = Catalog::build(docs(vec![
            json!({"schema": "olm.package", "name": "p", "defaultChannel": "a"}),
            json!({"schema": "olm.channel", "package": "p", "name": "a", "entries": [
                {"name": "p.v3.0.0", "replaces": "p.v2.0.0", "skips": ["p.v1.0.0"]},
                {"name": "p.v2.0.0"},
                {"name": "p.v1.0.0", "replaces": "p.v0.5.0"},
                {"name": "p.v0.5.0"}]}),
            bundle("p.v3.0.0", "3.0.0"),
            bundle("p.v2.0.0", "2.0.0"),
            bundle("p.v1.0.0", "1.0.0"),
            bundle("p.v0.5.0", "0.5.0"),
        ]));
        let stranded: Vec<&Problem> = problems
            .iter()
            .filter(|p| p.code == "StrandedEntries")
            .collect();
        assert_eq!(stranded.len(), 1, "{problems:?}");
        assert!(
            stranded[0].message.contains("\"p.v0.5.0\""),
            "{}",
            stranded[0]
        );
        assert!(
            !stranded[0].message.contains("p.v1.0.0\","),
            "skipped entries are not stranded: {}",
            stranded[0]
        );
    }

    #[test]
    fn catalog_is_send_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Catalog>();
        assert_send_sync::<Arc<Catalog>>();
    }
}
