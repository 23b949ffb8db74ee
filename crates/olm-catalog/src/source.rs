//! Format detection, loading any catalog source, validation and FBC output.
//!
//! Detection of a directory (first match wins):
//! 1. a regular file → File-Based Catalog file;
//! 2. a directory with `manifests/` and `metadata/` → a single bundle;
//! 3. a directory holding a package manifest file (named `package.yaml`,
//!    `*.package.yaml`, `*.package.yml` or `*.package.json`) → one legacy package;
//! 4. a directory whose subdirectories hold legacy packages and/or bundle
//!    directories (up to four levels down) → package manifests / bundle
//!    directories (mixed trees, like the old community-operators repo, work);
//! 5. anything else → File-Based Catalog.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::{CatalogError, Problem};
use crate::load::{load_fbc_documents, parse_manifest_text};
use crate::model::{Catalog, Document, Meta};
use crate::render::{self, RenderOptions, find_bundle_dirs, is_bundle_dir};
use crate::walk::{EntryKind, Walker};

/// The on-disk format of a catalog source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceFormat {
    Fbc,
    /// A single registry+v1 bundle directory.
    Bundle,
    /// Directories of bundles (community-operators layout).
    BundleDirectories,
    /// Legacy package manifests.
    PackageManifests,
    /// Both legacy packages and bundle directories below one root.
    Mixed,
    /// A legacy ConfigMap catalog's keys as files (`packages`, `clusterServiceVersions`,
    /// `customResourceDefinitions`): the ConfigMap mounted as a volume.
    ConfigMap,
}

impl SourceFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            SourceFormat::Fbc => "file-based catalog",
            SourceFormat::Bundle => "bundle directory",
            SourceFormat::BundleDirectories => "bundle directories",
            SourceFormat::PackageManifests => "package manifests",
            SourceFormat::Mixed => "package manifests and bundle directories",
            SourceFormat::ConfigMap => "ConfigMap catalog",
        }
    }
}

fn is_package_manifest_name(p: &Path) -> bool {
    let Some(name) = p.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    matches!(name, "package.yaml" | "package.yml")
        || name.ends_with(".package.yaml")
        || name.ends_with(".package.yml")
        || name.ends_with(".package.json")
}

fn has_package_manifest_file(dir: &Path) -> bool {
    let listed = Walker::new(dir).and_then(|w| w.list(dir)).unwrap_or_default();
    listed
        .iter()
        .any(|e| matches!(e.kind, EntryKind::File { .. }) && is_package_manifest_name(&e.path))
}

/// The subdirectories of `dir` (links to directories are not followed, see [`crate::walk`]).
fn subdirs(dir: &Path) -> Result<Vec<PathBuf>, CatalogError> {
    Ok(Walker::new(dir)?.visible_subdirs(dir))
}

/// Detect the format of `path` (see module docs).
pub fn detect_format(path: &Path) -> Result<SourceFormat, CatalogError> {
    let md = fs::metadata(path).map_err(|source| CatalogError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    if !md.is_dir() {
        return Ok(SourceFormat::Fbc);
    }
    if is_bundle_dir(path) {
        return Ok(SourceFormat::Bundle);
    }
    if is_configmap_dir(path) {
        return Ok(SourceFormat::ConfigMap);
    }
    if has_package_manifest_file(path) {
        return Ok(SourceFormat::PackageManifests);
    }
    let legacy: Vec<PathBuf> = subdirs(path)?
        .into_iter()
        .filter(|d| has_package_manifest_file(d))
        .collect();
    let bundles = bundle_dirs_outside(path, &legacy);
    Ok(match (legacy.is_empty(), bundles.is_empty()) {
        (true, true) => SourceFormat::Fbc,
        (false, true) => SourceFormat::PackageManifests,
        (true, false) => SourceFormat::BundleDirectories,
        (false, false) => SourceFormat::Mixed,
    })
}

/// A ConfigMap catalog mounted as a volume: its `packages` key is a file (the kubelet makes
/// each key a link into a hidden `..data` directory, so links are followed here).
fn is_configmap_dir(dir: &Path) -> bool {
    dir.join(crate::configmap::PACKAGES_KEY).is_file()
}

/// The documents of a ConfigMap catalog directory: each key's file, as the ConfigMap's data.
fn configmap_documents(dir: &Path) -> Result<Vec<Document>, CatalogError> {
    let mut data = std::collections::BTreeMap::new();
    for key in [crate::configmap::PACKAGES_KEY, crate::configmap::CSVS_KEY, crate::configmap::CRDS_KEY] {
        let file = dir.join(key);
        if file.is_file() {
            data.insert(key.to_owned(), crate::load::read_text(&file)?);
        }
    }
    crate::configmap::documents(&data).map_err(|message| CatalogError::Parse { path: dir.to_path_buf(), message })
}

fn bundle_dirs_outside(root: &Path, excluded: &[PathBuf]) -> Vec<PathBuf> {
    find_bundle_dirs(root)
        .into_iter()
        .filter(|d| !excluded.iter().any(|e| d.starts_with(e)))
        .collect()
}

/// Load the FBC documents of any source, with every problem met on the way.
/// A single bundle directory becomes a complete one-bundle package (channels from
/// its annotations) so that it is a catalog on its own.
pub fn load_documents(
    path: &Path,
    opts: &RenderOptions,
) -> Result<(SourceFormat, Vec<Document>, Vec<Problem>), CatalogError> {
    let format = detect_format(path)?;
    let (docs, problems) = match format {
        SourceFormat::Fbc => load_fbc_documents(path)?,
        SourceFormat::Bundle => render::render_bundle_dirs(path, &[path.to_path_buf()], opts),
        SourceFormat::BundleDirectories => render::render_bundle_catalog(path, opts)?,
        SourceFormat::PackageManifests => render::render_package_manifests(path, opts)?,
        SourceFormat::ConfigMap => (configmap_documents(path)?, Vec::new()),
        SourceFormat::Mixed => {
            let legacy: Vec<PathBuf> = subdirs(path)?
                .into_iter()
                .filter(|d| has_package_manifest_file(d))
                .collect();
            let (mut docs, mut problems) = (Vec::new(), Vec::new());
            for d in &legacy {
                match render::render_package_manifest_dir(d, opts) {
                    Ok((mut ds, mut ps)) => {
                        docs.append(&mut ds);
                        problems.append(&mut ps);
                    }
                    Err(e) => problems.extend(e.problems()),
                }
            }
            let (mut ds, mut ps) =
                render::render_bundle_dirs(path, &bundle_dirs_outside(path, &legacy), opts);
            docs.append(&mut ds);
            problems.append(&mut ps);
            (docs, problems)
        }
    };
    Ok((format, docs, problems))
}

/// Documents for `olm catalog render`: like [`load_documents`], except that a
/// single bundle directory yields only its `olm.bundle` (as `opm render` does).
pub fn render_documents(
    path: &Path,
    opts: &RenderOptions,
) -> Result<(SourceFormat, Vec<Document>, Vec<Problem>), CatalogError> {
    if fs::metadata(path).map(|m| m.is_dir()).unwrap_or(false) && is_bundle_dir(path) {
        let b = render::render_bundle_dir(path, opts)?;
        let doc = Document {
            value: b.document,
            source: Some(std::sync::Arc::from(path)),
        };
        return Ok((SourceFormat::Bundle, vec![doc], Vec::new()));
    }
    load_documents(path, opts)
}

/// Load any source leniently: the catalog plus every problem (load and validation).
pub fn load_catalog_lenient(
    path: &Path,
    opts: &RenderOptions,
) -> Result<(SourceFormat, Catalog, Vec<Problem>), CatalogError> {
    if detect_format(path)? == SourceFormat::Fbc {
        // Streaming path: one file's JSON trees per thread at a time.
        let (catalog, problems) = crate::load::load_fbc(path)?;
        return Ok((SourceFormat::Fbc, catalog, problems));
    }
    let (format, docs, mut problems) = load_documents(path, opts)?;
    let (catalog, mut more) = Catalog::build(docs);
    problems.append(&mut more);
    if format == SourceFormat::ConfigMap {
        // Held to what upstream's ConfigMap registry checks, as the CatalogSource controller does.
        problems.retain(|p| !crate::configmap::TOLERATED.contains(&p.code));
    }
    Ok((format, catalog, problems))
}

/// Load any source strictly (full bundle objects): any problem is an error.
pub fn load_catalog(path: &Path) -> Result<Catalog, CatalogError> {
    let (_, catalog, problems) = load_catalog_lenient(path, &RenderOptions::default())?;
    if problems.is_empty() {
        Ok(catalog)
    } else {
        Err(CatalogError::Invalid(problems))
    }
}

/// Result of validating a catalog source.
#[derive(Debug)]
pub struct ValidationReport {
    pub format: SourceFormat,
    pub packages: usize,
    pub channels: usize,
    pub bundles: usize,
    pub problems: Vec<Problem>,
}

impl ValidationReport {
    pub fn passed(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Validate any catalog source with opm's rules, collecting every problem.
pub fn validate(path: &Path) -> Result<ValidationReport, CatalogError> {
    // Bundle objects are not needed to validate; csv metadata keeps memory low.
    let opts = RenderOptions {
        objects: render::ObjectMode::CsvMetadata,
        image: None,
    };
    let (format, catalog, mut problems) = load_catalog_lenient(path, &opts)?;
    if format != SourceFormat::Fbc {
        // Local bundle directories have no image reference; that is not their fault.
        problems.retain(|p| p.code != "MissingImage");
    }
    let (packages, channels, bundles) = catalog.counts();
    Ok(ValidationReport {
        format,
        packages,
        channels,
        bundles,
        problems,
    })
}

/// FBC output encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    /// Each blob as a `---`-prefixed YAML document, keys sorted.
    Yaml,
    /// Each blob as JSON indented by 4 spaces, keys sorted (like `opm render -o json`).
    Json,
}

/// Write blobs in the given order.
pub fn write_metas<'a, W: Write>(
    out: &mut W,
    metas: impl IntoIterator<Item = &'a Meta>,
    format: OutputFormat,
) -> std::io::Result<()> {
    for meta in metas {
        let value: Value = serde_json::from_str(&meta.blob.text()).map_err(std::io::Error::other)?;
        match format {
            OutputFormat::Json => {
                let mut ser = serde_json::Serializer::with_formatter(
                    &mut *out,
                    serde_json::ser::PrettyFormatter::with_indent(b"    "),
                );
                serde::Serialize::serialize(&value, &mut ser).map_err(std::io::Error::other)?;
                out.write_all(b"\n")?;
            }
            OutputFormat::Yaml => {
                let text = serde_saphyr::to_string(&value).map_err(std::io::Error::other)?;
                out.write_all(b"---\n")?;
                out.write_all(text.as_bytes())?;
                if !text.ends_with('\n') {
                    out.write_all(b"\n")?;
                }
            }
        }
    }
    Ok(())
}

/// Render documents to text in canonical order (via a lenient catalog build, so
/// invalid blobs are still written; their problems are returned).
pub fn render_to_string(
    documents: Vec<Document>,
    format: OutputFormat,
) -> Result<(String, Vec<Problem>), CatalogError> {
    let (catalog, problems) = Catalog::build(documents);
    let mut buf = Vec::new();
    write_metas(&mut buf, catalog.canonical_metas(), format).map_err(|e| CatalogError::Parse {
        path: PathBuf::from("<output>"),
        message: format!("cannot encode output: {e}"),
    })?;
    let text = String::from_utf8(buf).map_err(|_| CatalogError::Parse {
        path: PathBuf::from("<output>"),
        message: "output is not UTF-8".into(),
    })?;
    // Guard: what we write must read back to the same blobs.
    let reread = parse_manifest_text(&text).map_err(|e| CatalogError::Parse {
        path: PathBuf::from("<output>"),
        message: format!("rendered output does not parse back: {e}"),
    })?;
    if reread.len() != catalog.all_metas().len() {
        return Err(CatalogError::Parse {
            path: PathBuf::from("<output>"),
            message: "rendered output does not parse back to the same number of blobs".into(),
        });
    }
    Ok((text, problems))
}
