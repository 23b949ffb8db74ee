//! Model → wire shapes: operator-registry `api.Bundle` and the CSV views built from a bundle.
//!
//! The rules follow operator-registry's FBC-to-API conversion so that upstream clients
//! see the same answers as from `opm serve`: the CSV comes from the inlined objects,
//! or is synthesized from `olm.csv.metadata`; `olm.bundle.object` and
//! `olm.csv.metadata` are left out of `properties`; required GVKs and packages become
//! `dependencies`.

use olm_catalog::{Bundle, ChannelEntry, Package, PropertyKind};
use serde_json::{Map, Value, json};

use crate::pb;

/// The `olm.package` version string exactly as the catalog wrote it.
pub fn bundle_version(bundle: &Bundle) -> String {
    bundle
        .properties
        .iter()
        .find_map(|p| match &p.kind {
            PropertyKind::Package(pp) => Some(pp.version.clone()),
            _ => None,
        })
        .unwrap_or_else(|| bundle.version.to_string())
}

/// The bundle as a member of one channel, the way operator-registry serves it, with its
/// CSV and objects. `replaces`/`skips` are filled; GetBundle-style calls clear them with
/// [`trim`].
pub fn api_bundle(package: &Package, channel_name: &str, entry: Option<&ChannelEntry>, bundle: &Bundle) -> pb::Bundle {
    let (csv_json, object) = csv_json_and_objects(package, bundle);
    api_bundle_with(channel_name, entry, bundle, csv_json, object)
}

/// The bundle as ListBundles lists it: csvJson and object only when the bundle has no image
/// (clients fetch the content from the image instead), taken from `content` then.
pub fn listed_bundle(
    channel_name: &str,
    entry: Option<&ChannelEntry>,
    bundle: &Bundle,
    content: impl FnOnce() -> std::sync::Arc<BundleContent>,
) -> pb::Bundle {
    if bundle.image.is_empty() {
        api_bundle_from(channel_name, entry, bundle, &content())
    } else {
        api_bundle_with(channel_name, entry, bundle, String::new(), Vec::new())
    }
}

/// Like [`api_bundle`], taking `csvJson` and `object` from a [`BundleContent`] built
/// earlier (see `store::BundleContentCache`), so the CSV of a bundle is built once per
/// snapshot instead of once per request.
pub fn api_bundle_from(channel_name: &str, entry: Option<&ChannelEntry>, bundle: &Bundle, content: &BundleContent) -> pb::Bundle {
    api_bundle_with(channel_name, entry, bundle, content.csv_json.clone(), content.objects.clone())
}

fn api_bundle_with(channel_name: &str, entry: Option<&ChannelEntry>, bundle: &Bundle, csv_json: String, object: Vec<String>) -> pb::Bundle {
    let gvk = |g: &olm_catalog::Gvk| pb::GroupVersionKind {
        group: g.group.clone(),
        version: g.version.clone(),
        kind: g.kind.clone(),
        plural: String::new(),
    };
    let mut dependencies = Vec::new();
    let mut properties = Vec::new();
    for p in &bundle.properties {
        match &p.kind {
            PropertyKind::GvkRequired(_) => {
                dependencies.push(pb::Dependency { r#type: "olm.gvk".into(), value: p.value_json.to_string() })
            }
            PropertyKind::PackageRequired(r) => {
                // Upstream re-encodes the requirement as an `olm.package` value whose
                // `version` holds the range.
                let value = json!({"packageName": r.package_name, "version": r.version_range});
                dependencies.push(pb::Dependency { r#type: "olm.package".into(), value: value.to_string() })
            }
            _ => {}
        }
        if !matches!(p.kind, PropertyKind::BundleObject | PropertyKind::CsvMetadata) {
            properties.push(pb::Property { r#type: p.type_name.clone(), value: p.value_json.to_string() });
        }
    }
    pb::Bundle {
        csv_name: bundle.name.clone(),
        package_name: bundle.package.clone(),
        channel_name: channel_name.to_string(),
        csv_json,
        object,
        bundle_path: bundle.image.clone(),
        provided_apis: bundle.provided_gvks().map(gvk).collect(),
        required_apis: bundle.required_gvks().map(gvk).collect(),
        version: bundle_version(bundle),
        skip_range: entry.and_then(|e| e.skip_range.clone()).unwrap_or_default(),
        dependencies,
        properties,
        replaces: entry.and_then(|e| e.replaces.clone()).unwrap_or_default(),
        skips: entry.map(|e| e.skips.clone()).unwrap_or_default(),
        deprecation: bundle.deprecation.as_ref().map(|m| pb::Deprecation { message: m.clone() }),
    }
}

/// GetBundle, GetBundleForChannel, GetBundleThatReplaces and GetDefaultBundleThatProvides
/// answer without the upgrade edges.
pub fn trim(mut bundle: pb::Bundle) -> pb::Bundle {
    bundle.replaces.clear();
    bundle.skips.clear();
    bundle
}

/// `csvJson` and `object` of a bundle as gRPC carries them (JSON text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleContent {
    pub csv_json: String,
    pub objects: Vec<String>,
}

impl BundleContent {
    /// Build the content of `bundle` (synthesizing the CSV when the catalog has none inline).
    pub fn build(package: &Package, bundle: &Bundle) -> BundleContent {
        let (csv_json, objects) = csv_json_and_objects(package, bundle);
        BundleContent { csv_json, objects }
    }

    /// Bytes of text held (for cache bounds).
    pub fn text_len(&self) -> usize {
        self.csv_json.len() + self.objects.iter().map(String::len).sum::<usize>()
    }
}

/// `csvJson` and `object` of a bundle.
pub fn csv_json_and_objects(package: &Package, bundle: &Bundle) -> (String, Vec<String>) {
    let decoded = bundle.objects();
    let mut objects: Vec<String> = decoded.iter().map(|o| o.to_string()).collect();
    if let Some(csv) = decoded.iter().find(|o| olm_catalog::is_csv_object(o)) {
        return (csv.to_string(), objects);
    }
    match synthesized_csv(package, bundle) {
        Some(csv) => {
            let text = csv.to_string();
            if objects.is_empty() {
                objects.push(text.clone());
            }
            (text, objects)
        }
        None => (String::new(), objects),
    }
}

/// The CSV of a bundle: the inlined one, else one synthesized from `olm.csv.metadata`.
/// The flag says whether it was synthesized.
pub fn bundle_csv(package: &Package, bundle: &Bundle) -> Option<(Value, bool)> {
    if let Some(csv) = bundle.csv() {
        return Some((csv, false));
    }
    synthesized_csv(package, bundle).map(|v| (v, true))
}

/// A ClusterServiceVersion built from the single `olm.csv.metadata` property, shaped like
/// the one operator-registry generates (field order of the Go type, its empty defaults,
/// the package icon, a stub `deployment` install strategy).
pub fn synthesized_csv(package: &Package, bundle: &Bundle) -> Option<Value> {
    let mut metadata_props = bundle.properties.iter().filter(|p| p.kind == PropertyKind::CsvMetadata);
    let meta = match (metadata_props.next(), metadata_props.next()) {
        (Some(p), None) => p.value(),
        _ => return None,
    };
    let field = |key: &str| -> Option<Value> {
        meta.get(key).filter(|v| !is_empty_json(v)).cloned()
    };

    let mut metadata = Map::new();
    metadata.insert("name".into(), Value::String(bundle.name.clone()));
    if let Some(v) = field("labels") {
        metadata.insert("labels".into(), v);
    }
    if let Some(v) = field("annotations") {
        metadata.insert("annotations".into(), v);
    }

    let mut spec = Map::new();
    spec.insert("install".into(), json!({"strategy": "deployment", "spec": {"deployments": null}}));
    spec.insert("version".into(), Value::String(bundle.version.to_string()));
    if let Some(v) = field("maturity") {
        spec.insert("maturity".into(), v);
    }
    spec.insert("customresourcedefinitions".into(), field("crdDescriptions").unwrap_or_else(|| json!({})));
    spec.insert("apiservicedefinitions".into(), field("apiServiceDefinitions").unwrap_or_else(|| json!({})));
    if let Some(v) = field("nativeAPIs") {
        spec.insert("nativeAPIs".into(), v);
    }
    if let Some(v) = field("minKubeVersion") {
        spec.insert("minKubeVersion".into(), v);
    }
    spec.insert("displayName".into(), field("displayName").unwrap_or_else(|| Value::String(String::new())));
    let description = field("description")
        .or_else(|| package.description.clone().filter(|d| !d.is_empty()).map(Value::String));
    if let Some(v) = description {
        spec.insert("description".into(), v);
    }
    for key in ["keywords", "maintainers"] {
        if let Some(v) = field(key) {
            spec.insert(key.into(), v);
        }
    }
    spec.insert("provider".into(), field("provider").unwrap_or_else(|| json!({})));
    if let Some(v) = field("links") {
        spec.insert("links".into(), v);
    }
    if let Some(icon) = &package.icon {
        spec.insert("icon".into(), json!([{"base64data": icon.base64data, "mediatype": icon.mediatype}]));
    }
    if let Some(v) = field("installModes") {
        spec.insert("installModes".into(), v);
    }
    spec.insert("cleanup".into(), json!({"enabled": false}));
    if !bundle.related_images.is_empty() {
        let images: Vec<Value> =
            bundle.related_images.iter().map(|r| json!({"name": r.name, "image": r.image})).collect();
        spec.insert("relatedImages".into(), Value::Array(images));
    }

    Some(json!({
        "kind": "ClusterServiceVersion",
        "apiVersion": "operators.coreos.com/v1alpha1",
        "metadata": Value::Object(metadata),
        "spec": Value::Object(spec),
        "status": {"cleanup": {}},
    }))
}

fn is_empty_json(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// The "CSV description" of packageserver's PackageManifest channels, read from a CSV.
pub fn csv_description(csv: &Value, include_icon: bool) -> Value {
    let spec = csv.get("spec").cloned().unwrap_or(Value::Null);
    let get = |v: &Value, key: &str| v.get(key).filter(|x| !x.is_null()).cloned();
    let mut out = Map::new();
    out.insert("displayName".into(), get(&spec, "displayName").unwrap_or_else(|| Value::String(String::new())));
    if include_icon {
        out.insert("icon".into(), get(&spec, "icon").unwrap_or_else(|| json!([])));
    }
    out.insert("version".into(), get(&spec, "version").unwrap_or_else(|| Value::String(String::new())));
    out.insert("provider".into(), get(&spec, "provider").unwrap_or_else(|| json!({})));
    if let Some(a) = csv.get("metadata").and_then(|m| get(m, "annotations")) {
        out.insert("annotations".into(), a);
    }
    for (key, from) in [
        ("keywords", "keywords"),
        ("links", "links"),
        ("maintainers", "maintainers"),
        ("maturity", "maturity"),
        ("description", "description"),
        ("installModes", "installModes"),
        ("customresourcedefinitions", "customresourcedefinitions"),
        ("apiservicedefinitions", "apiservicedefinitions"),
        ("nativeApis", "nativeAPIs"),
        ("minKubeVersion", "minKubeVersion"),
    ] {
        if let Some(v) = get(&spec, from) {
            out.insert(key.into(), v);
        }
    }
    let related = related_images(csv);
    if !related.is_empty() {
        out.insert("relatedImages".into(), Value::Array(related.into_iter().map(Value::String).collect()));
    }
    Value::Object(out)
}

/// Images a CSV refers to: `spec.relatedImages` plus every deployment container image,
/// de-duplicated and sorted.
fn related_images(csv: &Value) -> Vec<String> {
    let mut images = std::collections::BTreeSet::new();
    if let Some(list) = csv.pointer("/spec/relatedImages").and_then(Value::as_array) {
        images.extend(list.iter().filter_map(|r| r.get("image")).filter_map(Value::as_str).map(str::to_string));
    }
    if let Some(deployments) = csv.pointer("/spec/install/spec/deployments").and_then(Value::as_array) {
        for d in deployments {
            for key in ["containers", "initContainers"] {
                if let Some(containers) = d.pointer(&format!("/spec/template/spec/{key}")).and_then(Value::as_array) {
                    images.extend(containers.iter().filter_map(|c| c.get("image")).filter_map(Value::as_str).map(str::to_string));
                }
            }
        }
    }
    images.into_iter().filter(|s| !s.is_empty()).collect()
}
