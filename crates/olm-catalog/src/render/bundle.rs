//! One bundle directory (or legacy version directory) → its `olm.bundle`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde_json::{Map, Value, json};

use crate::canonical::to_canonical_string;
use crate::error::CatalogError;
use crate::load::parse_file;
use crate::model::is_csv_object;
use crate::version::Version;
use crate::walk::Walker;

use super::*;

/// Whether `dir` is a bundle directory (has `manifests/` and `metadata/`).
pub fn is_bundle_dir(dir: &Path) -> bool {
    dir.join("manifests").is_dir() && dir.join("metadata").is_dir()
}

/// The files of one directory of a bundle, legacy version or legacy package, by the rules of
/// [`crate::walk`], confined to that directory: such a directory is a unit of its own (a
/// bundle becomes one image), so its files may link only within it.
pub(super) fn files_in(dir: &Path) -> Result<Vec<PathBuf>, CatalogError> {
    Walker::new(dir)?.visible_files(dir)
}

/// The problem of a bundle that names no channel, where a catalog is built from bundles.
pub(super) fn no_channels(dir: &Path) -> CatalogError {
    parse_err(
        &dir.join("metadata"),
        format!("annotation {ANNOTATION_CHANNELS} is missing or empty; list the bundle's channels"),
    )
}

pub(super) fn parse_err(path: &Path, message: impl Into<String>) -> CatalogError {
    CatalogError::Parse {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// The Kubernetes objects of one manifest file; a document that is not an object is named
/// (a bundle whose CSV file holds a list would otherwise be "a bundle without a CSV").
fn manifest_objects(file: &Path) -> Result<Vec<Value>, CatalogError> {
    let documents = parse_file(file)?;
    if let Some((i, doc)) = documents.iter().enumerate().find(|(_, d)| !d.is_object()) {
        return Err(parse_err(
            file,
            format!(
                "document {} is {}, not a Kubernetes object; each manifest document must be a mapping with apiVersion and kind",
                i + 1,
                crate::model::json_kind(doc)
            ),
        ));
    }
    Ok(documents)
}

/// Render one bundle directory. `package_override` names the package when the
/// directory has no annotations (legacy package manifests).
pub fn render_bundle_dir(dir: &Path, opts: &RenderOptions) -> Result<RenderedBundle, CatalogError> {
    let manifests_dir = dir.join("manifests");
    let metadata_dir = dir.join("metadata");
    // Confined to the bundle: `manifests` or `metadata` linking out of it is refused.
    let walker = Walker::new(dir)?;
    let mut annotations: Option<Map<String, Value>> = None;
    let mut dependencies: Option<Vec<Value>> = None;
    let mut extra_properties: Option<Vec<Value>> = None;
    for file in walker.visible_files(&metadata_dir)? {
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
    // Installing a bundle needs no channel (upstream's own OLM v1 e2e bundles name none, and
    // `opm render` of one bundle yields only its olm.bundle); a catalog built from a tree of
    // bundles does, and `render_bundle_dirs` says so.
    let default_channel = annotation(ANNOTATION_DEFAULT_CHANNEL);

    let mut objects = Vec::new();
    for file in walker.visible_files(&manifests_dir)? {
        objects.extend(manifest_objects(&file)?);
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
pub(super) fn render_legacy_version_dir(
    dir: &Path,
    package: &str,
    opts: &RenderOptions,
) -> Result<RenderedBundle, CatalogError> {
    let mut objects = Vec::new();
    for file in files_in(dir)? {
        objects.extend(manifest_objects(&file)?);
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
