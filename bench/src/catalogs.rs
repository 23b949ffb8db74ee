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
