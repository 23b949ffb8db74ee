//! The benchmark's input catalogs: the real community FBC and a synthetic one ten times its
//! size, made of independent copies of every package.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde_json::Value;

pub const DEFAULT_REAL_FBC: &str = "/work/shared/real-catalogs/community-operators-prod-fbc-v4.21/catalog";

pub struct BenchCatalog {
    pub label: String,
    pub dir: PathBuf,
    pub packages: usize,
    pub bundles: usize,
}

/// Count packages and bundles of an FBC directory.
pub fn describe(label: &str, dir: &Path) -> anyhow::Result<BenchCatalog> {
    let (documents, problems) = olm_catalog::load::load_fbc_documents(dir)
        .with_context(|| format!("loading the FBC at {}", dir.display()))?;
    if !problems.is_empty() {
        bail!("{} has load problems: {:?}", dir.display(), problems);
    }
    let count = |schema: &str| documents.iter().filter(|d| d.value.get("schema").and_then(Value::as_str) == Some(schema)).count();
    Ok(BenchCatalog { label: label.to_string(), dir: dir.to_path_buf(), packages: count("olm.package"), bundles: count("olm.bundle") })
}

/// Write `copies` copies of every package of `src` into `dst` (one directory per copy).
///
/// Each copy is made independent of the others so that Subscriptions to several copies can
/// be resolved together: package names, bundle names (and every replaces/skips/deprecation
/// reference to them) get a `-cN` suffix, and the API groups of `olm.gvk` and
/// `olm.gvk.required` get a `cN.` prefix, so no two copies provide the same API. Package
/// dependencies (`olm.package.required`) point at the same copy of the required package.
pub fn make_synthetic(src: &Path, dst: &Path, copies: usize) -> anyhow::Result<()> {
    let (documents, problems) =
        olm_catalog::load::load_fbc_documents(src).with_context(|| format!("loading the FBC at {}", src.display()))?;
    if !problems.is_empty() {
        bail!("{} has load problems: {:?}", src.display(), problems);
    }
    let package_names: BTreeSet<String> = documents
        .iter()
        .filter(|d| d.value.get("schema").and_then(Value::as_str) == Some("olm.package"))
        .filter_map(|d| d.value.get("name").and_then(Value::as_str).map(str::to_string))
        .collect();
    let mut by_package: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for doc in &documents {
        let schema = doc.value.get("schema").and_then(Value::as_str).unwrap_or("");
        let key = if schema == "olm.package" { "name" } else { "package" };
        let package = doc.value.get(key).and_then(Value::as_str).unwrap_or("").to_string();
        by_package.entry(package).or_default().push(&doc.value);
    }
    if dst.exists() {
        std::fs::remove_dir_all(dst).with_context(|| format!("removing the old {}", dst.display()))?;
    }
    for copy in 0..copies {
        let suffix = format!("-c{copy}");
        let group_prefix = format!("c{copy}.");
        for (package, docs) in &by_package {
            let out_dir = dst.join(format!("{package}{suffix}"));
            std::fs::create_dir_all(&out_dir)?;
            let mut text = String::new();
            for doc in docs {
                let mut doc = (*doc).clone();
                rename(&mut doc, &suffix, &group_prefix, &package_names);
                text.push_str(&serde_json::to_string(&doc)?);
                text.push('\n');
            }
            std::fs::write(out_dir.join("catalog.json"), text)?;
        }
    }
    Ok(())
}

fn suffixed(v: &mut Value, suffix: &str) {
    if let Value::String(s) = v {
        if !s.is_empty() {
            s.push_str(suffix);
        }
    }
}

fn rename(doc: &mut Value, suffix: &str, group_prefix: &str, packages: &BTreeSet<String>) {
    let schema = doc.get("schema").and_then(Value::as_str).unwrap_or("").to_string();
    let Some(obj) = doc.as_object_mut() else { return };
    match schema.as_str() {
        "olm.package" => {
            if let Some(n) = obj.get_mut("name") {
                suffixed(n, suffix);
            }
        }
        "olm.channel" => {
            if let Some(Value::Array(entries)) = obj.get_mut("entries") {
                for e in entries {
                    for field in ["name", "replaces"] {
                        if let Some(v) = e.get_mut(field) {
                            suffixed(v, suffix);
                        }
                    }
                    if let Some(Value::Array(skips)) = e.get_mut("skips") {
                        skips.iter_mut().for_each(|s| suffixed(s, suffix));
                    }
                }
            }
        }
        "olm.bundle" => {
            if let Some(n) = obj.get_mut("name") {
                suffixed(n, suffix);
            }
            if let Some(Value::Array(props)) = obj.get_mut("properties") {
                for p in props {
                    let kind = p.get("type").and_then(Value::as_str).unwrap_or("").to_string();
                    let Some(value) = p.get_mut("value").and_then(Value::as_object_mut) else { continue };
                    match kind.as_str() {
                        "olm.package" => {
                            if let Some(n) = value.get_mut("packageName") {
                                suffixed(n, suffix);
                            }
                        }
                        "olm.package.required" => {
                            let known = value.get("packageName").and_then(Value::as_str).is_some_and(|n| packages.contains(n));
                            if known {
                                if let Some(n) = value.get_mut("packageName") {
                                    suffixed(n, suffix);
                                }
                            }
                        }
                        "olm.gvk" | "olm.gvk.required" => {
                            if let Some(Value::String(g)) = value.get_mut("group") {
                                *g = format!("{group_prefix}{g}");
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        "olm.deprecations" => {
            if let Some(Value::Array(entries)) = obj.get_mut("entries") {
                for e in entries {
                    let is_bundle = e.pointer("/reference/schema").and_then(Value::as_str) == Some("olm.bundle");
                    if is_bundle {
                        if let Some(n) = e.pointer_mut("/reference/name") {
                            suffixed(n, suffix);
                        }
                    }
                }
            }
        }
        _ => {}
    }
    if schema != "olm.package" {
        if let Some(p) = obj.get_mut("package") {
            suffixed(p, suffix);
        }
    }
}

/// The second, image-less package of the end-to-end catalog: the AllNamespaces operator of the
/// scale run. Derived from etcd's cluster-wide channel head, renamed so that it provides its own
/// API group (upstream refuses two operators providing the same API where their namespaces
/// overlap, and the AllNamespaces one overlaps every namespace).
pub struct GlobalPackage {
    pub package: String,
    pub channel: String,
    pub csv_name: String,
    pub group: String,
    /// CSV name of the per-namespace package's head in `per_namespace_channel`.
    pub per_namespace_csv: String,
}

pub const E2E_PACKAGE: &str = "etcd";
pub const E2E_CHANNEL: &str = "singlenamespace-alpha";
const SOURCE_GLOBAL_CHANNEL: &str = "clusterwide-alpha";
const SOURCE_GROUP: &str = "etcd.database.coreos.com";
const GLOBAL_PACKAGE: &str = "etcd-global";
const GLOBAL_CHANNEL: &str = "stable";
const GLOBAL_GROUP: &str = "etcdglobal.bench.example.com";

/// Head of a channel: the entry no other entry of the channel replaces or skips.
pub(crate) fn channel_head(documents: &[olm_catalog::model::Document], package: &str, channel: &str) -> anyhow::Result<String> {
    let doc = documents
        .iter()
        .map(|d| &d.value)
        .find(|v| {
            v.get("schema").and_then(Value::as_str) == Some("olm.channel")
                && v.get("package").and_then(Value::as_str) == Some(package)
                && v.get("name").and_then(Value::as_str) == Some(channel)
        })
        .with_context(|| format!("the catalog has no channel {channel} of package {package}"))?;
    let entries = doc.get("entries").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let mut superseded = BTreeSet::new();
    for e in entries {
        if let Some(r) = e.get("replaces").and_then(Value::as_str) {
            superseded.insert(r.to_string());
        }
        for s in e.get("skips").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default() {
            if let Some(s) = s.as_str() {
                superseded.insert(s.to_string());
            }
        }
    }
    let heads: Vec<&str> =
        entries.iter().filter_map(|e| e.get("name").and_then(Value::as_str)).filter(|n| !superseded.contains(*n)).collect();
    match heads.as_slice() {
        [one] => Ok((*one).to_string()),
        _ => bail!("channel {channel} of package {package} has {} heads ({heads:?}); expected one", heads.len()),
    }
}

/// Replace the API group everywhere in a JSON value (CRD names and groups, owned-CRD
/// descriptors, RBAC rules, examples) by going through its text.
fn regroup(v: &Value) -> anyhow::Result<Value> {
    let text = serde_json::to_string(v)?.replace(SOURCE_GROUP, GLOBAL_GROUP);
    Ok(serde_json::from_str(&text)?)
}

/// Write the end-to-end catalog into `dst`: every document of `community` (the repository's
/// catalogs/community, whose bundles carry their manifests and no image) unchanged, plus the
/// `etcd-global` package: one channel with one bundle, etcd's cluster-wide head with package,
/// CSV name and API group renamed and no upgrade edges.
pub fn make_e2e_catalog(community: &Path, dst: &Path) -> anyhow::Result<GlobalPackage> {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    let (documents, problems) = olm_catalog::load::load_fbc_documents(community)
        .with_context(|| format!("loading the FBC at {}", community.display()))?;
    if !problems.is_empty() {
        bail!("{} has load problems: {:?}", community.display(), problems);
    }
    let per_namespace_csv = channel_head(&documents, E2E_PACKAGE, E2E_CHANNEL)?;
    let source = channel_head(&documents, E2E_PACKAGE, SOURCE_GLOBAL_CHANNEL)?;
    let bundle = documents
        .iter()
        .map(|d| &d.value)
        .find(|v| v.get("schema").and_then(Value::as_str) == Some("olm.bundle") && v.get("name").and_then(Value::as_str) == Some(&source))
        .with_context(|| format!("the catalog has no bundle {source}"))?;
    let version = bundle
        .get("properties")
        .and_then(Value::as_array)
        .and_then(|ps| ps.iter().find(|p| p.get("type").and_then(Value::as_str) == Some("olm.package")))
        .and_then(|p| p.pointer("/value/version"))
        .and_then(Value::as_str)
        .with_context(|| format!("bundle {source} has no olm.package property"))?;
    // Plain semver for the copy: the source's version carries a "-clusterwide" pre-release tag.
    let version = version.split('-').next().unwrap_or(version).to_string();
    let csv_name = format!("etcdglobal.v{version}");

    let mut properties = Vec::new();
    let mut saw_csv = false;
    for p in bundle.get("properties").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default() {
        match p.get("type").and_then(Value::as_str) {
            Some("olm.package") => properties.push(serde_json::json!({
                "type": "olm.package", "value": {"packageName": GLOBAL_PACKAGE, "version": version}
            })),
            Some("olm.bundle.object") => {
                let data = p.pointer("/value/data").and_then(Value::as_str).context("olm.bundle.object without data")?;
                let bytes = b64.decode(data).with_context(|| format!("bundle {source}: olm.bundle.object is not base64"))?;
                let object: Value = serde_json::from_slice(&bytes).with_context(|| format!("bundle {source}: object is not JSON"))?;
                let mut object = regroup(&object)?;
                if object.get("kind").and_then(Value::as_str) == Some("ClusterServiceVersion") {
                    saw_csv = true;
                    object["metadata"]["name"] = Value::String(csv_name.clone());
                    if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
                        spec.remove("replaces");
                        spec.remove("skips");
                        spec.insert("version".into(), Value::String(version.clone()));
                    }
                    if let Some(ann) = object.pointer_mut("/metadata/annotations").and_then(Value::as_object_mut) {
                        ann.remove("olm.skipRange");
                    }
                }
                properties.push(serde_json::json!({
                    "type": "olm.bundle.object", "value": {"data": b64.encode(serde_json::to_vec(&object)?)}
                }));
            }
            _ => properties.push(regroup(p)?),
        }
    }
    if !saw_csv {
        bail!("bundle {source} carries no ClusterServiceVersion object: cannot derive the AllNamespaces package");
    }
    let mut new_bundle = bundle.clone();
    new_bundle["name"] = Value::String(csv_name.clone());
    new_bundle["package"] = Value::String(GLOBAL_PACKAGE.into());
    new_bundle["properties"] = Value::Array(properties);

    if dst.exists() {
        std::fs::remove_dir_all(dst).with_context(|| format!("removing the old {}", dst.display()))?;
    }
    let community_out = dst.join(E2E_PACKAGE);
    std::fs::create_dir_all(&community_out)?;
    let mut text = String::new();
    for d in &documents {
        text.push_str(&serde_json::to_string(&d.value)?);
        text.push('\n');
    }
    std::fs::write(community_out.join("catalog.json"), text)?;
    let global_out = dst.join(GLOBAL_PACKAGE);
    std::fs::create_dir_all(&global_out)?;
    let docs = [
        serde_json::json!({"schema": "olm.package", "name": GLOBAL_PACKAGE, "defaultChannel": GLOBAL_CHANNEL}),
        serde_json::json!({"schema": "olm.channel", "package": GLOBAL_PACKAGE, "name": GLOBAL_CHANNEL, "entries": [{"name": csv_name}]}),
        new_bundle,
    ];
    let mut text = String::new();
    for d in &docs {
        text.push_str(&serde_json::to_string(d)?);
        text.push('\n');
    }
    std::fs::write(global_out.join("catalog.json"), text)?;
    Ok(GlobalPackage {
        package: GLOBAL_PACKAGE.into(),
        channel: GLOBAL_CHANNEL.into(),
        csv_name,
        group: GLOBAL_GROUP.into(),
        per_namespace_csv,
    })
}
