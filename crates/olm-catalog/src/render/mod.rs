//! Rendering bundle directories and legacy package manifests to FBC documents.
//!
//! # Bundle directories (registry+v1)
//! A directory holding both `manifests/` and `metadata/` is a bundle. It becomes
//! one `olm.bundle` exactly as `opm render` builds it (see the research notes §1.11):
//! `olm.package`, one `olm.gvk` per CRD version and owned APIService,
//! `olm.gvk.required` per required CRD/APIService, `metadata/dependencies.yaml`
//! converted (`olm.gvk` → `olm.gvk.required`, `olm.package` → `olm.package.required`,
//! others copied), `metadata/properties.yaml` and the CSV annotation
//! `olm.properties` copied; then either one `olm.bundle.object` per manifest
//! ([`ObjectMode::BundleObjects`], opm's default) or one `olm.csv.metadata`
//! ([`ObjectMode::CsvMetadata`], opm's `bundle-object-to-csv-metadata` migration).
//! Like opm, every file of `metadata/` is tried as annotations, dependencies and
//! properties, so file names do not matter.
//!
//! # Catalogs of bundle directories (community-operators layout)
//! Bundle roots are found up to four levels below the root (so `<pkg>/<ver>/` and
//! `<pkg>/<ver>/bundle/` both work); other directories (`catalog-templates/` …)
//! and files (`ci.yaml`, `release-config.yaml` …) are ignored. Bundles are grouped
//! by their package annotation. Channel entries:
//! * **replaces mode** (the package's `ci.yaml` says `updateGraph: replaces-mode`,
//!   or there is no such setting and some CSV of the package has `spec.replaces`):
//!   each channel holds the bundles whose annotation lists it, plus every bundle
//!   reachable from those by `spec.replaces` (the registry builders did the same);
//!   entries carry the CSV's `replaces`, `skips` and `olm.skipRange`.
//! * **semver mode** (`updateGraph: semver-mode`; or `fbc.enabled: true` without
//!   `updateGraph`, since such packages keep their real graph in FBC templates; or
//!   no setting at all and no CSV has `spec.replaces`): the channel's bundles are sorted by version and each
//!   replaces the next lower one, as the community pipeline's semver mode does;
//!   the CSV's `skips` and `olm.skipRange` are kept, `spec.replaces` is not used.
//!
//! The default channel is the `channel.default.v1` annotation of the newest
//! bundle (by version) that has one; if none has one, the package's only channel,
//! else the first channel of the newest bundle.
//!
//! # Legacy package manifests
//! A package directory holds a package manifest (any file whose first document has
//! `packageName` and `channels`) and version directories (any directory holding a
//! CSV). Channel membership is derived by walking `spec.replaces` and `spec.skips`
//! transitively from each channel's `currentCSV`.

mod bundle;
mod bundle_catalog;
mod package_manifest;

use std::path::PathBuf;

use serde_json::Value;

use crate::version::Version;

pub use bundle::{csv_metadata, is_bundle_dir, render_bundle_dir};
use bundle::{files_in, parse_err, render_legacy_version_dir};
use bundle_catalog::{entry_json, package_json};
pub use bundle_catalog::{find_bundle_dirs, render_bundle_catalog, render_bundle_dirs};
pub use package_manifest::{PackageManifest, find_package_manifest, render_package_manifest_dir, render_package_manifests};

const ANNOTATION_PACKAGE: &str = "operators.operatorframework.io.bundle.package.v1";
const ANNOTATION_CHANNELS: &str = "operators.operatorframework.io.bundle.channels.v1";
const ANNOTATION_DEFAULT_CHANNEL: &str = "operators.operatorframework.io.bundle.channel.default.v1";
const ANNOTATION_MEDIATYPE: &str = "operators.operatorframework.io.bundle.mediatype.v1";
const MAX_BUNDLE_SEARCH_DEPTH: usize = 4;

/// How a bundle's manifests are carried in its `olm.bundle`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ObjectMode {
    /// One `olm.bundle.object` per manifest (full objects; needed to install from the catalog).
    #[default]
    BundleObjects,
    /// A single `olm.csv.metadata` built from the CSV (small; no manifests).
    CsvMetadata,
}

/// Options of the renderers.
#[derive(Debug, Clone, Default)]
pub struct RenderOptions {
    pub objects: ObjectMode,
    /// Bundle image reference to record (empty for local directories).
    pub image: Option<String>,
}

/// A rendered bundle with the facts needed to place it in channels.
#[derive(Debug, Clone)]
pub struct RenderedBundle {
    /// The `olm.bundle` document.
    pub document: Value,
    pub name: String,
    pub package: String,
    pub version: Version,
    pub channels: Vec<String>,
    pub default_channel: Option<String>,
    pub replaces: Option<String>,
    pub skips: Vec<String>,
    pub skip_range: Option<String>,
    /// The CSV (for package icon/description).
    pub csv: Value,
    pub dir: PathBuf,
}

/// The bundles reachable from `starts` (included) over `replaces` edges, and `skips` edges
/// too when `with_skips`: what a channel holds when it is rendered from its head or members.
fn upgrade_closure(
    bundles: &[RenderedBundle],
    by_name: &std::collections::HashMap<&str, usize>,
    starts: &[usize],
    with_skips: bool,
) -> std::collections::BTreeSet<usize> {
    let mut graph = petgraph::graph::DiGraph::<(), (), u32>::with_capacity(bundles.len(), bundles.len());
    for _ in bundles {
        graph.add_node(());
    }
    for (i, bundle) in bundles.iter().enumerate() {
        let skips = bundle.skips.iter().filter(|_| with_skips);
        for target in bundle.replaces.iter().chain(skips) {
            if let Some(&j) = by_name.get(target.as_str()) {
                graph.add_edge(petgraph::graph::NodeIndex::new(i), petgraph::graph::NodeIndex::new(j), ());
            }
        }
    }
    let mut members = std::collections::BTreeSet::new();
    let mut dfs = petgraph::visit::Dfs::empty(&graph);
    for &start in starts {
        dfs.move_to(petgraph::graph::NodeIndex::new(start));
        while let Some(node) = dfs.next(&graph) {
            members.insert(node.index());
        }
    }
    members
}

/// A CSV icon's base64 data as a catalog can serve it: whitespace (line breaks, a trailing
/// space) removed, which is unambiguous; empty when it is still not base64 (the icon is
/// dropped with a warning rather than the package refused).
pub(crate) fn clean_icon_data(data: &str, package: &str) -> String {
    use base64::Engine as _;
    let cleaned: String = data.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    if base64::engine::general_purpose::STANDARD.decode(cleaned.as_bytes()).is_ok() {
        cleaned
    } else {
        tracing::warn!(package, "the icon of the head CSV is not valid base64 even without whitespace: left out of the package");
        String::new()
    }
}

