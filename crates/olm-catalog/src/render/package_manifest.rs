//! Legacy package-manifest directories → packages, channels and bundles.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};

use crate::error::{CatalogError, Problem};
use crate::load::parse_file;
use crate::model::{Document, get_ci, is_csv_object};
use crate::walk::Walker;

use super::*;

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
    if channels.len() == 1 {
        // As upstream's loader (`PackageChannel.IsDefaultChannel`): the only channel is the
        // default, whatever `defaultChannel` names.
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
    fn rec(walker: &Walker, d: &Path, depth: usize, out: &mut Vec<PathBuf>) {
        for s in walker.visible_subdirs(d) {
            out.push(s.clone());
            if depth < 3 {
                rec(walker, &s, depth + 1, out);
            }
        }
    }
    rec(&Walker::new(dir)?, dir, 0, &mut version_dirs);
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
        let members = upgrade_closure(&bundles, &by_name, &[head], true);
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
                    .fix("make a newer CSV replace or skip it, or delete the directory")
                    .code("UnreachableBundle")
                    .warning(),
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
    let dirs = Walker::new(root)?.visible_subdirs(root);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_only_channel_is_the_default_whatever_default_channel_names() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let manifest = |channels: &str| format!("packageName: demo\ndefaultChannel: stable\nchannels:\n{channels}");
        std::fs::write(dir.path().join("demo.package.yaml"), manifest("- name: myapp-stable\n  currentCSV: demo.v1\n")).expect("written");
        let found = find_package_manifest(dir.path()).expect("read").expect("a package manifest");
        assert_eq!(found.default_channel, "myapp-stable", "as upstream's loader");

        std::fs::write(
            dir.path().join("demo.package.yaml"),
            manifest("- name: alpha\n  currentCSV: demo.v2\n- name: beta\n  currentCSV: demo.v2\n"),
        )
        .expect("written");
        let found = find_package_manifest(dir.path()).expect("read").expect("a package manifest");
        assert_eq!(found.default_channel, "stable", "kept, and reported as missing by validation");
    }
}
