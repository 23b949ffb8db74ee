//! A tree of bundle directories → packages, channels and bundles (replaces or semver mode).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::error::{CatalogError, Problem};
use crate::load::parse_file;
use crate::parallel::parallel_map;
use crate::model::Document;
use crate::walk::{EntryKind, Walker};

use super::*;

/// Find bundle roots below `root` (not descending into bundles), by the rules of
/// [`crate::walk`]: links to directories are not followed.
pub fn find_bundle_dirs(root: &Path) -> Vec<PathBuf> {
    fn rec(walker: &Walker, dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
        if is_bundle_dir(dir) {
            out.push(dir.to_path_buf());
            return;
        }
        if depth >= MAX_BUNDLE_SEARCH_DEPTH {
            return;
        }
        for sub in walker.visible_subdirs(dir) {
            rec(walker, &sub, depth + 1, out);
        }
    }
    let mut out = Vec::new();
    if let Ok(walker) = Walker::new(root) {
        rec(&walker, root, 0, &mut out);
    }
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
        // Only a regular file inside the catalog (never a link out of it, never a FIFO).
        let listed = Walker::new(root).and_then(|w| w.list(d)).unwrap_or_default();
        if listed.iter().any(|e| e.name == "ci.yaml" && matches!(e.kind, EntryKind::File { .. })) {
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
    // In a tree of bundles, one that cannot be read is left out and the rest rendered (with a
    // warning: validation still fails on it); a lone bundle that cannot be read is an error.
    let leave_out = dirs.len() > 1;
    for (dir, r) in dirs.iter().zip(results) {
        // In a catalog, a bundle is listed by its channels: one without any cannot be.
        let r = r.and_then(|b| if b.channels.is_empty() { Err(bundle::no_channels(dir)) } else { Ok(b) });
        match r {
            Ok(b) => by_package.entry(b.package.clone()).or_default().push(b),
            Err(e) => problems.extend(e.problems().into_iter().map(|mut p| {
                p.file.get_or_insert_with(|| dir.clone());
                if leave_out {
                    p.message = format!("{}; the bundle directory {} is left out", p.message, dir.display());
                    p = p.warning();
                }
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
                    upgrade_closure(&bundles, &by_name, &members, false)
                        .into_iter()
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

pub(super) fn entry_json(b: &RenderedBundle, replaces: Option<&str>) -> Value {
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

pub(super) fn package_json(package: &str, default_channel: &str, head_csv: Option<&Value>) -> Value {
    let mut p = Map::new();
    p.insert("schema".into(), Value::String("olm.package".into()));
    p.insert("name".into(), Value::String(package.to_string()));
    p.insert(
        "defaultChannel".into(),
        Value::String(default_channel.to_string()),
    );
    if let Some(csv) = head_csv {
        if let Some(icon) = csv.pointer("/spec/icon/0") {
            let data = super::clean_icon_data(
                icon.get("base64data").and_then(Value::as_str).unwrap_or_default(),
                package,
            );
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
