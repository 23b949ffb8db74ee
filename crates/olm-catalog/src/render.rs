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

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine as _;
use serde_json::{Map, Value, json};

use crate::canonical::to_canonical_string;
use crate::error::{CatalogError, Problem};
use crate::load::parse_file;
use crate::parallel::parallel_map;
use crate::model::{Document, get_ci, is_csv_object};
use crate::version::Version;

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

/// Whether `dir` is a bundle directory (has `manifests/` and `metadata/`).
pub fn is_bundle_dir(dir: &Path) -> bool {
    dir.join("manifests").is_dir() && dir.join("metadata").is_dir()
}

fn files_in(dir: &Path) -> Result<Vec<PathBuf>, CatalogError> {
    let rd = fs::read_dir(dir).map_err(|source| CatalogError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut files: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_file()
                && !p
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with('.'))
        })
        .collect();
    files.sort();
    Ok(files)
}

fn parse_err(path: &Path, message: impl Into<String>) -> CatalogError {
    CatalogError::Parse {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// Render one bundle directory. `package_override` names the package when the
/// directory has no annotations (legacy package manifests).
pub fn render_bundle_dir(dir: &Path, opts: &RenderOptions) -> Result<RenderedBundle, CatalogError> {
    let manifests_dir = dir.join("manifests");
    let metadata_dir = dir.join("metadata");
    let mut annotations: Option<Map<String, Value>> = None;
    let mut dependencies: Option<Vec<Value>> = None;
    let mut extra_properties: Option<Vec<Value>> = None;
    for file in files_in(&metadata_dir)? {
        let Some(doc) = parse_file(&file)?.into_iter().next() else {
            continue;
        };
        if annotations.is_none()
            && let Some(Value::Object(a)) = doc.get("annotations")
            && !a.is_empty()
        {
            annotations = Some(a.clone());
        }
        if dependencies.is_none()
            && let Some(Value::Array(d)) = doc.get("dependencies")
            && !d.is_empty()
        {
            dependencies = Some(d.clone());
        }
        if extra_properties.is_none()
            && let Some(Value::Array(p)) = doc.get("properties")
            && !p.is_empty()
        {
            extra_properties = Some(p.clone());
        }
    }
    let Some(annotations) = annotations else {
        return Err(parse_err(
            &metadata_dir,
            "no annotations file: add metadata/annotations.yaml with an `annotations:` map",
        ));
    };
    let annotation = |key: &str| {
        annotations
            .get(key)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let Some(package) = annotation(ANNOTATION_PACKAGE) else {
        return Err(parse_err(
            &metadata_dir,
            format!("annotation {ANNOTATION_PACKAGE} is missing; set it to the package name"),
        ));
    };
    if let Some(mt) = annotation(ANNOTATION_MEDIATYPE)
        && mt != "registry+v1"
    {
        return Err(parse_err(
            &metadata_dir,
            format!(
                "bundle media type {mt:?} is not supported; only registry+v1 bundles can be rendered"
            ),
        ));
    }
    let channels: Vec<String> = annotation(ANNOTATION_CHANNELS)
        .map(|c| {
            c.split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect()
        })
        .unwrap_or_default();
    if channels.is_empty() {
        return Err(parse_err(
            &metadata_dir,
            format!(
                "annotation {ANNOTATION_CHANNELS} is missing or empty; list the bundle's channels"
            ),
        ));
    }
    let default_channel = annotation(ANNOTATION_DEFAULT_CHANNEL);

    let mut objects = Vec::new();
    for file in files_in(&manifests_dir)? {
        objects.extend(parse_file(&file)?);
    }
    render_objects(
        dir,
        &package,
        objects,
        dependencies.unwrap_or_default(),
        extra_properties.unwrap_or_default(),
        channels,
        default_channel,
        opts,
    )
}

/// Render a legacy version directory (flat manifests, no metadata).
fn render_legacy_version_dir(
    dir: &Path,
    package: &str,
    opts: &RenderOptions,
) -> Result<RenderedBundle, CatalogError> {
    let mut objects = Vec::new();
    for file in files_in(dir)? {
        objects.extend(parse_file(&file)?);
    }
    render_objects(
        dir,
        package,
        objects,
        Vec::new(),
        Vec::new(),
        Vec::new(),
        None,
        opts,
    )
}

#[allow(clippy::too_many_arguments)]
fn render_objects(
    dir: &Path,
    package: &str,
    objects: Vec<Value>,
    dependencies: Vec<Value>,
    extra_properties: Vec<Value>,
    channels: Vec<String>,
    default_channel: Option<String>,
    opts: &RenderOptions,
) -> Result<RenderedBundle, CatalogError> {
    let csvs: Vec<&Value> = objects.iter().filter(|o| is_csv_object(o)).collect();
    let csv = match csvs.as_slice() {
        [one] => (*one).clone(),
        [] => {
            return Err(parse_err(
                dir,
                "bundle has no ClusterServiceVersion; add the CSV manifest",
            ));
        }
        _ => {
            return Err(parse_err(
                dir,
                format!(
                    "bundle has {} ClusterServiceVersions; keep exactly one",
                    csvs.len()
                ),
            ));
        }
    };
    let name = csv
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if name.is_empty() {
        return Err(parse_err(dir, "the CSV has no metadata.name"));
    }
    let version_text = csv
        .pointer("/spec/version")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let version = Version::parse(&version_text).map_err(|e| {
        parse_err(
            dir,
            format!("CSV {name}: spec.version {version_text:?} is not valid semver ({e})"),
        )
    })?;
    let release = match csv.pointer("/spec/release") {
        Some(Value::String(s)) if !s.is_empty() => Some(Value::String(s.clone())),
        Some(Value::Number(n)) => Some(Value::String(n.to_string())),
        _ => None,
    };
    let annotations = csv
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let replaces = csv
        .pointer("/spec/replaces")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    let skips: Vec<String> = csv
        .pointer("/spec/skips")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let skip_range = annotations
        .get("olm.skipRange")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string);

    let mut props: Vec<Value> = Vec::new();
    let mut pkg_value = json!({"packageName": package, "version": version_text});
    if let (Some(r), Value::Object(m)) = (release, &mut pkg_value) {
        m.insert("release".into(), r);
    }
    props.push(json!({"type": "olm.package", "value": pkg_value}));

    for obj in &objects {
        if obj.get("kind").and_then(Value::as_str) != Some("CustomResourceDefinition") {
            continue;
        }
        let group = obj
            .pointer("/spec/group")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let kind = obj
            .pointer("/spec/names/kind")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let mut versions: Vec<&str> = Vec::new();
        if let Some(v) = obj.pointer("/spec/version").and_then(Value::as_str) {
            versions.push(v);
        }
        if let Some(vs) = obj.pointer("/spec/versions").and_then(Value::as_array) {
            versions.extend(
                vs.iter()
                    .filter_map(|v| v.get("name").and_then(Value::as_str)),
            );
        }
        for v in versions {
            props.push(
                json!({"type": "olm.gvk", "value": {"group": group, "kind": kind, "version": v}}),
            );
        }
    }
    for api in csv
        .pointer("/spec/apiservicedefinitions/owned")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        props.push(json!({"type": "olm.gvk", "value": gvk_of(api, false)}));
    }
    for crd in csv
        .pointer("/spec/customresourcedefinitions/required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        props.push(json!({"type": "olm.gvk.required", "value": gvk_of(crd, true)}));
    }
    for api in csv
        .pointer("/spec/apiservicedefinitions/required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        props.push(json!({"type": "olm.gvk.required", "value": gvk_of(api, false)}));
    }
    for dep in dependencies {
        let t = dep.get("type").and_then(Value::as_str).unwrap_or_default();
        let v = dep.get("value").cloned().unwrap_or(Value::Null);
        match t {
            "olm.gvk" => props.push(json!({"type": "olm.gvk.required", "value": v})),
            "olm.package" => {
                let package_name = v.get("packageName").cloned().unwrap_or(Value::Null);
                let range = v.get("version").cloned().unwrap_or(Value::Null);
                props.push(json!({"type": "olm.package.required", "value": {"packageName": package_name, "versionRange": range}}));
            }
            "" => return Err(parse_err(&dir.join("metadata"), "a dependency has no type")),
            other => props.push(json!({"type": other, "value": v})),
        }
    }
    props.extend(extra_properties);
    if let Some(text) = annotations.get("olm.properties").and_then(Value::as_str) {
        match serde_json::from_str::<Value>(text) {
            Ok(Value::Array(list)) => props.extend(list),
            _ => {
                return Err(parse_err(
                    dir,
                    format!(
                        "CSV {name}: annotation olm.properties is not a JSON list of properties"
                    ),
                ));
            }
        }
    }
    // De-duplicate and sort by (type, value bytes), as opm does.
    let mut keyed: BTreeMap<(String, String), Value> = BTreeMap::new();
    for p in props {
        let t = p
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let v = to_canonical_string(p.get("value").unwrap_or(&Value::Null));
        keyed.entry((t, v)).or_insert(p);
    }
    let mut properties: Vec<Value> = keyed.into_values().collect();
    match opts.objects {
        ObjectMode::BundleObjects => {
            for obj in &objects {
                let data =
                    base64::engine::general_purpose::STANDARD.encode(to_canonical_string(obj));
                properties.push(json!({"type": "olm.bundle.object", "value": {"data": data}}));
            }
        }
        ObjectMode::CsvMetadata => {
            properties.push(json!({"type": "olm.csv.metadata", "value": csv_metadata(&csv)}))
        }
    }

    let image = opts.image.clone().unwrap_or_default();
    let related_images = related_images(&csv, &image);
    let mut doc = Map::new();
    doc.insert("schema".into(), Value::String("olm.bundle".into()));
    doc.insert("name".into(), Value::String(name.clone()));
    doc.insert("package".into(), Value::String(package.to_string()));
    doc.insert("image".into(), Value::String(image));
    doc.insert("properties".into(), Value::Array(properties));
    if !related_images.is_empty() {
        doc.insert("relatedImages".into(), Value::Array(related_images));
    }
    Ok(RenderedBundle {
        document: Value::Object(doc),
        name,
        package: package.to_string(),
        version,
        channels,
        default_channel,
        replaces,
        skips,
        skip_range,
        csv,
        dir: dir.to_path_buf(),
    })
}

fn gvk_of(def: &Value, group_from_name: bool) -> Value {
    let s = |k: &str| {
        def.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let group = if group_from_name {
        s("name")
            .split_once('.')
            .map(|(_, g)| g.to_string())
            .unwrap_or_default()
    } else {
        s("group")
    };
    json!({"group": group, "kind": s("kind"), "version": s("version")})
}

/// `olm.csv.metadata` value built from a CSV (empty fields omitted).
pub fn csv_metadata(csv: &Value) -> Value {
    let mut m = Map::new();
    let mut put = |key: &str, v: Option<&Value>| {
        if let Some(v) = v {
            let empty = match v {
                Value::Null => true,
                Value::String(s) => s.is_empty(),
                Value::Array(a) => a.is_empty(),
                Value::Object(o) => o.is_empty(),
                _ => false,
            };
            if !empty {
                m.insert(key.to_string(), v.clone());
            }
        }
    };
    put("annotations", csv.pointer("/metadata/annotations"));
    put(
        "apiServiceDefinitions",
        csv.pointer("/spec/apiservicedefinitions"),
    );
    put(
        "crdDescriptions",
        csv.pointer("/spec/customresourcedefinitions"),
    );
    put("description", csv.pointer("/spec/description"));
    put("displayName", csv.pointer("/spec/displayName"));
    put("installModes", csv.pointer("/spec/installModes"));
    put("keywords", csv.pointer("/spec/keywords"));
    put("labels", csv.pointer("/metadata/labels"));
    put("links", csv.pointer("/spec/links"));
    put("maintainers", csv.pointer("/spec/maintainers"));
    put("maturity", csv.pointer("/spec/maturity"));
    put("minKubeVersion", csv.pointer("/spec/minKubeVersion"));
    put("nativeAPIs", csv.pointer("/spec/nativeAPIs"));
    put("provider", csv.pointer("/spec/provider"));
    Value::Object(m)
}

fn related_images(csv: &Value, bundle_image: &str) -> Vec<Value> {
    let mut by_image: BTreeMap<String, String> = BTreeMap::new();
    for ri in csv
        .pointer("/spec/relatedImages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let image = ri.get("image").and_then(Value::as_str).unwrap_or_default();
        if image.is_empty() {
            continue;
        }
        let name = ri.get("name").and_then(Value::as_str).unwrap_or_default();
        by_image
            .entry(image.to_string())
            .or_insert_with(|| name.to_string());
    }
    if !bundle_image.is_empty() {
        by_image.entry(bundle_image.to_string()).or_default();
    }
    for dep in csv
        .pointer("/spec/install/spec/deployments")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        for key in ["containers", "initContainers"] {
            let path = format!("/spec/template/spec/{key}");
            for c in dep
                .pointer(&path)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(image) = c
                    .get("image")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                {
                    by_image.entry(image.to_string()).or_default();
                }
            }
        }
    }
    by_image
        .into_iter()
        .map(|(image, name)| json!({"name": name, "image": image}))
        .collect()
}

// ---- catalogs of bundle directories ---------------------------------------------

/// Find bundle roots below `root` (not descending into bundles).
pub fn find_bundle_dirs(root: &Path) -> Vec<PathBuf> {
    fn rec(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
        if is_bundle_dir(dir) {
            out.push(dir.to_path_buf());
            return;
        }
        if depth >= MAX_BUNDLE_SEARCH_DEPTH {
            return;
        }
        let Ok(rd) = fs::read_dir(dir) else { return };
        let mut subdirs: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_dir())
            .collect();
        subdirs.sort();
        for d in subdirs {
            if d.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('.'))
            {
                continue;
            }
            rec(&d, depth + 1, out);
        }
    }
    let mut out = Vec::new();
    rec(root, 0, &mut out);
    out
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GraphMode {
    Replaces,
    Semver,
}

/// `updateGraph` from the nearest `ci.yaml` at or above `dir` (up to `root`).
fn update_graph_setting(dir: &Path, root: &Path) -> Option<GraphMode> {
    let mut cur = Some(dir);
    while let Some(d) = cur {
        let ci = d.join("ci.yaml");
        if ci.is_file() {
            let doc = parse_file(&ci).ok()?.into_iter().next()?;
            let fbc_mode = doc.pointer("/fbc/enabled").and_then(Value::as_bool) == Some(true);
            let Some(v) = doc
                .get("updateGraph")
                .and_then(Value::as_str)
                .map(|v| v.trim().to_string())
            else {
                // FBC-mode packages keep their real graph in catalog templates; from
                // the bundle directories alone, semver order is the best we can do.
                return fbc_mode.then_some(GraphMode::Semver);
            };
            return if v.starts_with("semver") {
                Some(GraphMode::Semver)
            } else if v.starts_with("replaces") {
                Some(GraphMode::Replaces)
            } else {
                None
            };
        }
        if d == root {
            break;
        }
        cur = d.parent();
    }
    None
}

/// Render a directory of bundle directories (one or many packages) to FBC documents.
pub fn render_bundle_catalog(
    root: &Path,
    opts: &RenderOptions,
) -> Result<(Vec<Document>, Vec<Problem>), CatalogError> {
    let dirs = find_bundle_dirs(root);
    if dirs.is_empty() {
        return Err(CatalogError::UnknownFormat {
            path: root.to_path_buf(),
            message: "no bundle directories (manifests/ + metadata/) found".into(),
        });
    }
    Ok(render_bundle_dirs(root, &dirs, opts))
}

/// Render the given bundle directories (grouped into packages by annotation);
/// `root` bounds the search for `ci.yaml`.
pub fn render_bundle_dirs(
    root: &Path,
    dirs: &[PathBuf],
    opts: &RenderOptions,
) -> (Vec<Document>, Vec<Problem>) {
    let results = parallel_map(dirs, |d| render_bundle_dir(d, opts));
    let mut problems = Vec::new();
    let mut by_package: BTreeMap<String, Vec<RenderedBundle>> = BTreeMap::new();
    for (dir, r) in dirs.iter().zip(results) {
        match r {
            Ok(b) => by_package.entry(b.package.clone()).or_default().push(b),
            Err(e) => problems.extend(e.problems().into_iter().map(|mut p| {
                p.file.get_or_insert_with(|| dir.clone());
                p
            })),
        }
    }
    let mut documents = Vec::new();
    for (package, bundles) in by_package {
        let mode = bundles
            .iter()
            .find_map(|b| update_graph_setting(&b.dir, root))
            .unwrap_or(if bundles.iter().any(|b| b.replaces.is_some()) {
                GraphMode::Replaces
            } else {
                GraphMode::Semver
            });
        let source: Option<Arc<Path>> = bundles.first().and_then(|b| b.dir.parent()).map(Arc::from);
        let mut channels: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (i, b) in bundles.iter().enumerate() {
            for c in &b.channels {
                channels.entry(c.clone()).or_default().push(i);
            }
        }
        let by_name: HashMap<&str, usize> = bundles
            .iter()
            .enumerate()
            .map(|(i, b)| (b.name.as_str(), i))
            .collect();
        let mut channel_docs = Vec::new();
        for (channel, mut members) in channels {
            let entries: Vec<Value> = match mode {
                GraphMode::Replaces => {
                    // Pull in bundles reachable by replaces, like the registry builders.
                    let mut set: BTreeSet<usize> = members.iter().copied().collect();
                    let mut stack = members.clone();
                    while let Some(i) = stack.pop() {
                        if let Some(&j) =
                            bundles[i].replaces.as_deref().and_then(|r| by_name.get(r))
                            && set.insert(j)
                        {
                            stack.push(j);
                        }
                    }
                    set.into_iter()
                        .map(|i| entry_json(&bundles[i], bundles[i].replaces.as_deref()))
                        .collect()
                }
                GraphMode::Semver => {
                    members.sort_by(|&a, &b| {
                        bundles[a]
                            .version
                            .cmp_precedence(&bundles[b].version)
                            .then_with(|| bundles[a].name.cmp(&bundles[b].name))
                    });
                    let mut out = Vec::new();
                    for (k, &i) in members.iter().enumerate() {
                        let prev = if k > 0 {
                            Some(bundles[members[k - 1]].name.as_str())
                        } else {
                            None
                        };
                        out.push(entry_json(&bundles[i], prev));
                    }
                    out
                }
            };
            channel_docs.push(json!({"schema": "olm.channel", "package": package, "name": channel, "entries": entries}));
        }
        let newest_first = {
            let mut idx: Vec<usize> = (0..bundles.len()).collect();
            idx.sort_by(|&a, &b| bundles[b].version.cmp_precedence(&bundles[a].version));
            idx
        };
        let default_channel = newest_first
            .iter()
            .find_map(|&i| bundles[i].default_channel.clone())
            .or_else(|| {
                if channel_docs.len() == 1 {
                    channel_docs[0]["name"].as_str().map(str::to_string)
                } else {
                    None
                }
            })
            .or_else(|| {
                newest_first
                    .first()
                    .and_then(|&i| bundles[i].channels.first().cloned())
            })
            .unwrap_or_default();
        let head_csv = newest_first
            .iter()
            .map(|&i| &bundles[i])
            .find(|b| b.channels.contains(&default_channel))
            .map(|b| &b.csv);
        documents.push(Document {
            value: package_json(&package, &default_channel, head_csv),
            source: source.clone(),
        });
        documents.extend(channel_docs.into_iter().map(|value| Document {
            value,
            source: source.clone(),
        }));
        for b in bundles {
            let src: Arc<Path> = Arc::from(b.dir.as_path());
            documents.push(Document {
                value: b.document,
                source: Some(src),
            });
        }
    }
    (documents, problems)
}

fn entry_json(b: &RenderedBundle, replaces: Option<&str>) -> Value {
    let mut e = Map::new();
    e.insert("name".into(), Value::String(b.name.clone()));
    if let Some(r) = replaces {
        e.insert("replaces".into(), Value::String(r.to_string()));
    }
    if !b.skips.is_empty() {
        e.insert("skips".into(), json!(b.skips));
    }
    if let Some(sr) = &b.skip_range {
        e.insert("skipRange".into(), Value::String(sr.clone()));
    }
    Value::Object(e)
}

fn package_json(package: &str, default_channel: &str, head_csv: Option<&Value>) -> Value {
    let mut p = Map::new();
    p.insert("schema".into(), Value::String("olm.package".into()));
    p.insert("name".into(), Value::String(package.to_string()));
    p.insert(
        "defaultChannel".into(),
        Value::String(default_channel.to_string()),
    );
    if let Some(csv) = head_csv {
        if let Some(icon) = csv.pointer("/spec/icon/0") {
            let data = icon
                .get("base64data")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let media = icon
                .get("mediatype")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if !data.is_empty() {
                p.insert(
                    "icon".into(),
                    json!({"base64data": data, "mediatype": media}),
                );
            }
        }
        if let Some(d) = csv
            .pointer("/spec/description")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            p.insert("description".into(), Value::String(d.to_string()));
        }
    }
    Value::Object(p)
}

// ---- legacy package manifests ---------------------------------------------------

/// A decoded package manifest (`<pkg>.package.yaml`).
#[derive(Debug, Clone)]
pub struct PackageManifest {
    pub package_name: String,
    /// (channel name, currentCSV)
    pub channels: Vec<(String, String)>,
    pub default_channel: String,
    pub file: PathBuf,
}

fn as_package_manifest(doc: &Value, file: &Path) -> Option<Result<PackageManifest, CatalogError>> {
    let obj = doc.as_object()?;
    let package_name = get_ci(obj, "packageName")?.as_str()?.to_string();
    let Some(Value::Array(chs)) = get_ci(obj, "channels") else {
        return Some(Err(parse_err(
            file,
            "package manifest has no channels list",
        )));
    };
    let mut channels = Vec::new();
    for c in chs {
        let name = c.get("name").and_then(Value::as_str).unwrap_or_default();
        let current = c
            .get("currentCSV")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if name.is_empty() || current.is_empty() {
            return Some(Err(parse_err(
                file,
                "every channel needs a name and a currentCSV",
            )));
        }
        channels.push((name.to_string(), current.to_string()));
    }
    if channels.is_empty() {
        return Some(Err(parse_err(
            file,
            "package manifest has no channels; add at least one {name, currentCSV}",
        )));
    }
    let mut default_channel = get_ci(obj, "defaultChannel")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if default_channel.is_empty() && channels.len() == 1 {
        default_channel = channels[0].0.clone();
    }
    Some(Ok(PackageManifest {
        package_name,
        channels,
        default_channel,
        file: file.to_path_buf(),
    }))
}

/// Find the package manifest among the files directly inside `dir`.
pub fn find_package_manifest(dir: &Path) -> Result<Option<PackageManifest>, CatalogError> {
    let mut found: Option<PackageManifest> = None;
    for file in files_in(dir)? {
        let docs = match parse_file(&file) {
            Ok(d) => d,
            Err(CatalogError::Parse { .. }) if !is_yaml_name(&file) => continue,
            Err(e) => return Err(e),
        };
        let Some(first) = docs.first() else { continue };
        if let Some(pm) = as_package_manifest(first, &file) {
            let pm = pm?;
            if let Some(prev) = &found {
                return Err(parse_err(
                    dir,
                    format!(
                        "two package manifests: {} and {}; keep one",
                        prev.file.display(),
                        pm.file.display()
                    ),
                ));
            }
            found = Some(pm);
        }
    }
    Ok(found)
}

fn is_yaml_name(p: &Path) -> bool {
    matches!(
        p.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml" | "json")
    )
}

/// Render one legacy package-manifest package directory.
pub fn render_package_manifest_dir(
    dir: &Path,
    opts: &RenderOptions,
) -> Result<(Vec<Document>, Vec<Problem>), CatalogError> {
    let Some(pm) = find_package_manifest(dir)? else {
        return Err(CatalogError::UnknownFormat {
            path: dir.to_path_buf(),
            message: "no package manifest (a file with packageName and channels) found".into(),
        });
    };
    let mut problems = Vec::new();
    // Version directories: any directory below `dir` holding a CSV file.
    let mut version_dirs = Vec::new();
    fn rec(d: &Path, depth: usize, out: &mut Vec<PathBuf>) {
        let Ok(rd) = fs::read_dir(d) else { return };
        let mut subdirs: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_dir())
            .collect();
        subdirs.sort();
        for s in subdirs {
            if s.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('.'))
            {
                continue;
            }
            out.push(s.clone());
            if depth < 3 {
                rec(&s, depth + 1, out);
            }
        }
    }
    rec(dir, 0, &mut version_dirs);
    let mut bundles: Vec<RenderedBundle> = Vec::new();
    for vd in version_dirs {
        let has_csv = files_in(&vd)?
            .iter()
            .any(|f| parse_file(f).is_ok_and(|docs| docs.first().is_some_and(is_csv_object)));
        if !has_csv {
            continue;
        }
        match render_legacy_version_dir(&vd, &pm.package_name, opts) {
            Ok(b) => bundles.push(b),
            Err(e) => problems.extend(e.problems()),
        }
    }
    let by_name: HashMap<&str, usize> = bundles
        .iter()
        .enumerate()
        .map(|(i, b)| (b.name.as_str(), i))
        .collect();
    let source: Option<Arc<Path>> = Some(Arc::from(pm.file.as_path()));
    let mut documents = Vec::new();
    let mut channel_docs = Vec::new();
    let mut in_any = vec![false; bundles.len()];
    let mut head_of_default = None;
    for (channel, current) in &pm.channels {
        let Some(&head) = by_name.get(current.as_str()) else {
            problems.push(
                Problem::new(format!(
                    "currentCSV {current:?} is not the name of any CSV in the package"
                ))
                .file(Some(&pm.file))
                .package(&pm.package_name)
                .channel(channel)
                .fix("set currentCSV to the metadata.name of the channel's newest CSV"),
            );
            continue;
        };
        if channel == &pm.default_channel {
            head_of_default = Some(head);
        }
        let mut members = BTreeSet::new();
        let mut stack = vec![head];
        while let Some(i) = stack.pop() {
            if !members.insert(i) {
                continue;
            }
            for t in bundles[i].replaces.iter().chain(bundles[i].skips.iter()) {
                if let Some(&j) = by_name.get(t.as_str()) {
                    stack.push(j);
                }
            }
        }
        let entries: Vec<Value> = members
            .iter()
            .map(|&i| {
                in_any[i] = true;
                entry_json(&bundles[i], bundles[i].replaces.as_deref())
            })
            .collect();
        channel_docs.push(json!({"schema": "olm.channel", "package": pm.package_name, "name": channel, "entries": entries}));
    }
    for (i, b) in bundles.iter().enumerate() {
        if !in_any[i] {
            problems.push(
                Problem::new("CSV is not reachable from any channel's currentCSV by replaces/skips; it is left out")
                    .file(Some(&b.dir))
                    .package(&pm.package_name)
                    .bundle(&b.name)
                    .fix("make a newer CSV replace or skip it, or delete the directory"),
            );
        }
    }
    documents.push(Document {
        value: package_json(
            &pm.package_name,
            &pm.default_channel,
            head_of_default.map(|i| &bundles[i].csv),
        ),
        source: source.clone(),
    });
    documents.extend(channel_docs.into_iter().map(|value| Document {
        value,
        source: source.clone(),
    }));
    for (i, b) in bundles.into_iter().enumerate() {
        if in_any[i] {
            let src: Arc<Path> = Arc::from(b.dir.as_path());
            documents.push(Document {
                value: b.document,
                source: Some(src),
            });
        }
    }
    Ok((documents, problems))
}

/// Render a directory of legacy packages (or a single package directory).
pub fn render_package_manifests(
    root: &Path,
    opts: &RenderOptions,
) -> Result<(Vec<Document>, Vec<Problem>), CatalogError> {
    if find_package_manifest(root)?.is_some() {
        return render_package_manifest_dir(root, opts);
    }
    let rd = fs::read_dir(root).map_err(|source| CatalogError::Io {
        path: root.to_path_buf(),
        source,
    })?;
    let mut dirs: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    let mut documents = Vec::new();
    let mut problems = Vec::new();
    for d in dirs {
        match find_package_manifest(&d) {
            Ok(Some(_)) => match render_package_manifest_dir(&d, opts) {
                Ok((mut docs, mut ps)) => {
                    documents.append(&mut docs);
                    problems.append(&mut ps);
                }
                Err(e) => problems.extend(e.problems()),
            },
            Ok(None) => {}
            Err(e) => problems.extend(e.problems()),
        }
    }
    Ok((documents, problems))
}
