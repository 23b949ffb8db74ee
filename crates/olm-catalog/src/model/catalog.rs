//! Packages, channels, bundles and the indexed catalog.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use super::blob::JsonText;
use super::json::is_csv;
use super::meta::{Meta, meta_sort_key};
use super::property::{Constraint, Gvk, PackageRequired, Property, PropertyKind};
use crate::graph::{ChannelGraph, EdgeKind, UpgradeEdges};
use crate::text::bundle_object_docs;
use crate::version::{Version, VersionRange};

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
    pub(super) channels: Vec<Channel>,
    pub(super) channel_index: HashMap<String, usize>,
    pub(super) bundles: Vec<Bundle>,
    pub(super) bundle_index: HashMap<String, usize>,
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

impl UpgradeEdges for ChannelEntry {
    fn name(&self) -> &str {
        &self.name
    }
    fn replaces(&self) -> Option<&str> {
        self.replaces.as_deref()
    }
    fn skips(&self) -> &[String] {
        &self.skips
    }
    fn skip_range(&self) -> Option<&VersionRange> {
        self.skip_range_parsed.as_ref()
    }
}

/// A channel (`olm.channel`) with its upgrade graph.
#[derive(Debug, Clone)]
pub struct Channel {
    pub name: String,
    pub package: String,
    pub deprecation: Option<String>,
    pub properties: Vec<Property>,
    pub source: Option<Arc<Path>>,
    pub(super) entries: Vec<ChannelEntry>,
    /// Built when the catalog is assembled (skipRange edges need the bundles' versions).
    pub(super) graph: ChannelGraph,
}

impl Channel {
    /// Entries in the order they were written.
    pub fn entries(&self) -> &[ChannelEntry] {
        &self.entries
    }
    pub fn entry(&self, name: &str) -> Option<&ChannelEntry> {
        self.graph.entry(name).map(|i| &self.entries[i])
    }
    /// The upgrade graph; its entry numbers index [`Channel::entries`].
    pub fn graph(&self) -> &ChannelGraph {
        &self.graph
    }
    /// The unique entry nothing replaces or skips (None if the channel has no
    /// unique head, which validation reports).
    pub fn head(&self) -> Option<&ChannelEntry> {
        self.graph.head().map(|i| &self.entries[i])
    }
    /// Entries from the head following `replaces` (newest first), stopping at a
    /// missing target or a cycle.
    pub fn replaces_chain(&self) -> impl Iterator<Item = &ChannelEntry> {
        self.graph.replaces_chain().map(|i| &self.entries[i])
    }
    /// Entries that upgrade from bundle `name` at `version` in this channel.
    pub fn successors(&self, name: &str, version: Option<&Version>) -> Vec<&ChannelEntry> {
        self.graph
            .successors(|i| &self.entries[i], name, version)
            .into_iter()
            .map(|i| &self.entries[i])
            .collect()
    }
    /// The shortest upgrade path from bundle `name` at `version` (listed in the
    /// channel or not) to the head: each entry on the way and the kind of edge by which
    /// it upgrades from the one before. Empty at the head; `None` without a unique
    /// head or a path to it.
    pub fn path_to_head(&self, name: &str, version: Option<&Version>) -> Option<Vec<(&ChannelEntry, EdgeKind)>> {
        let path = self.graph.path_to_head(|i| &self.entries[i], name, version)?;
        Some(path.into_iter().map(|(i, kind)| (&self.entries[i], kind)).collect())
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
    /// Channels of the package that list this bundle, sorted.
    pub channels: Vec<String>,
    pub deprecation: Option<String>,
    pub source: Option<Arc<Path>>,
    /// Which of `properties` is the `olm.bundle.object` holding the CSV.
    pub(super) csv_property: Option<usize>,
    /// [`Bundle::supported_install_modes`], read at load, where the CSV is decoded anyway.
    pub(super) install_modes: Option<Vec<String>>,
}

impl Bundle {
    /// Manifests inlined with `olm.bundle.object` (or read from a bundle directory), in
    /// order; the CSV is one of them. Decoded on each call: the catalog holds them only as
    /// the (compressed) text it read, a fraction of their parsed size.
    pub fn objects(&self) -> Vec<Value> {
        let values = self.properties.iter().filter(|p| p.kind == PropertyKind::BundleObject).map(|p| &p.value_json);
        JsonText::texts_of(values).iter().flat_map(|text| bundle_object(text)).collect()
    }

    /// Whether the bundle inlines any manifest (`olm.bundle.object`).
    pub fn has_objects(&self) -> bool {
        self.properties.iter().any(|p| p.kind == PropertyKind::BundleObject)
    }

    /// The ClusterServiceVersion object, when the catalog inlines it (decoded on each call).
    pub fn csv(&self) -> Option<Value> {
        let property = self.properties.get(self.csv_property?)?;
        bundle_object(&property.value_json.text()).into_iter().find(is_csv)
    }
    /// Value of the `olm.csv.metadata` property, when present.
    pub fn csv_metadata(&self) -> Option<Value> {
        self.properties
            .iter()
            .find(|p| p.kind == PropertyKind::CsvMetadata)
            .map(Property::value)
    }
    /// The install modes the bundle's CSV supports (`spec.installModes` entries with
    /// `supported: true`, e.g. `OwnNamespace`), from the inlined CSV or `olm.csv.metadata`;
    /// `None` when the catalog carries neither.
    pub fn supported_install_modes(&self) -> Option<&[String]> {
        self.install_modes.as_deref()
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
            PropertyKind::PackageRequired(r) => Some(r.as_ref()),
            _ => None,
        })
    }
    /// Generic constraints (`olm.constraint`).
    pub fn constraints(&self) -> impl Iterator<Item = &Constraint> {
        self.properties.iter().filter_map(|p| match &p.kind {
            PropertyKind::Constraint(c) => Some(c.as_ref()),
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
pub(super) struct BundleAddr {
    pub(super) package: u32,
    pub(super) bundle: u32,
}

/// An immutable, indexed catalog snapshot.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    pub(super) packages: Vec<Package>,
    pub(super) package_index: HashMap<String, usize>,
    pub(super) metas: Vec<Meta>,
    pub(super) metas_by_package: HashMap<String, Vec<u32>>,
    pub(super) bundles_by_name: HashMap<String, Vec<BundleAddr>>,
    pub(super) providers: HashMap<Gvk, Vec<BundleAddr>>,
}

/// Filter for [`Catalog::metas`]; empty fields match everything.
#[derive(Debug, Clone, Default)]
pub struct MetaFilter<'a> {
    pub schema: Option<&'a str>,
    pub package: Option<&'a str>,
    pub name: Option<&'a str>,
}

impl Catalog {
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
        out.sort_by(|a, b| meta_sort_key(a).cmp(&meta_sort_key(b)));
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

/// The manifests of one `olm.bundle.object` value, given as its JSON text. The load checked
/// that every value decodes, so a failure here (none expected) yields no manifest.
fn bundle_object(value_text: &str) -> Vec<Value> {
    let value: Value = serde_json::from_str(value_text).unwrap_or(Value::Null);
    let data = value.get("data").and_then(Value::as_str).unwrap_or_default();
    bundle_object_docs(data).unwrap_or_default()
}
