//! The legacy ConfigMap catalog (`sourceType: configmap`): keys `packages`,
//! `clusterServiceVersions` and `customResourceDefinitions`, each a YAML list. Turned into FBC
//! documents: each channel holds what its `currentCSV` reaches by `spec.replaces` and
//! `spec.skips`; each CSV becomes a bundle carrying its owned CRDs. The same keys as files of a
//! directory (a ConfigMap mounted as a volume) are a catalog source too
//! ([`crate::source::SourceFormat::ConfigMap`]): what a ConfigMap catalog's registry pod serves.

use std::collections::{BTreeMap, HashMap};

use base64::Engine as _;
use serde_json::{Value, json};


/// Upstream's keys.
pub const PACKAGES_KEY: &str = "packages";
/// Upstream's keys.
pub const CSVS_KEY: &str = "clusterServiceVersions";
/// Upstream's keys.
pub const CRDS_KEY: &str = "customResourceDefinitions";

fn list(data: &BTreeMap<String, String>, key: &str) -> Result<Vec<Value>, String> {
    let Some(text) = data.get(key) else {
        return Ok(Vec::new());
    };
    let docs = crate::load::parse_manifest_text(text).map_err(|err| format!("data.{key}: {err}"))?;
    let mut out = Vec::new();
    for doc in docs {
        match doc {
            Value::Array(items) => out.extend(items),
            Value::Null => {}
            other => out.push(other),
        }
    }
    Ok(out)
}

fn encode(value: &Value) -> Value {
    json!({"data": base64::engine::general_purpose::STANDARD.encode(value.to_string())})
}

fn gvk_of(desc: &Value) -> Option<Value> {
    let name = desc.get("name")?.as_str()?;
    let (_, group) = name.split_once('.')?;
    Some(json!({"group": group, "version": desc.get("version")?.as_str()?, "kind": desc.get("kind")?.as_str()?}))
}

/// The FBC documents of a legacy ConfigMap catalog. Errors name the key and the object.
pub fn documents(data: &BTreeMap<String, String>) -> Result<Vec<crate::Document>, String> {
    let packages = list(data, PACKAGES_KEY)?;
    if packages.is_empty() {
        return Err(format!("data.{PACKAGES_KEY} is missing or lists no package"));
    }
    let csvs = list(data, CSVS_KEY)?;
    let crds = list(data, CRDS_KEY)?;
    let mut csv_by_name: HashMap<String, &Value> = HashMap::new();
    for (i, csv) in csvs.iter().enumerate() {
        let name = csv
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("data.{CSVS_KEY}[{i}] has no metadata.name"))?;
        csv_by_name.insert(name.to_owned(), csv);
    }
    let crd_by_name: HashMap<&str, &Value> = crds
        .iter()
        .filter_map(|crd| Some((crd.pointer("/metadata/name")?.as_str()?, crd)))
        .collect();

    // A package listed twice is the last entry, as upstream's loader replaces a package it
    // loads again (its e2e suite lists one entry per version and counts on the newest).
    let mut last_entry: HashMap<&str, usize> = HashMap::new();
    for (i, package) in packages.iter().enumerate() {
        let name = package
            .get("packageName")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("data.{PACKAGES_KEY}[{i}] has no packageName"))?;
        last_entry.insert(name, i);
    }
    let mut docs = Vec::new();
    for (i, package) in packages.iter().enumerate() {
        let name = package.get("packageName").and_then(Value::as_str).unwrap_or_default();
        if last_entry.get(name) != Some(&i) {
            continue;
        }
        let channels = package.get("channels").and_then(Value::as_array).cloned().unwrap_or_default();
        // As upstream's loader (`PackageChannel.IsDefaultChannel`): a package's only channel is
        // its default, whatever `defaultChannel` names.
        let only = match channels.as_slice() {
            [only] => only.get("name").and_then(Value::as_str),
            _ => None,
        };
        let default_channel = only
            .or_else(|| package.get("defaultChannel").and_then(Value::as_str))
            .or_else(|| channels.first().and_then(|c| c.get("name")).and_then(Value::as_str))
            .unwrap_or_default();
        docs.push(json!({"schema": "olm.package", "name": name, "defaultChannel": default_channel}));
        let mut members: BTreeMap<String, &Value> = BTreeMap::new();
        for channel in &channels {
            let channel_name = channel.get("name").and_then(Value::as_str).unwrap_or_default();
            // The channel holds what its head reaches by `replaces` and by `skips`, as
            // upstream's loader does: a CSV that is only skipped is still a channel member,
            // so a Subscription can start at it.
            let head = channel.get("currentCSV").and_then(Value::as_str).map(str::to_owned);
            let mut queue: std::collections::VecDeque<String> = head.clone().into_iter().collect();
            let mut seen: std::collections::BTreeSet<String> = queue.iter().cloned().collect();
            let mut entries = Vec::new();
            while let Some(csv_name) = queue.pop_front() {
                let Some(csv) = csv_by_name.get(&csv_name) else {
                    if Some(&csv_name) == head.as_ref() {
                        return Err(format!(
                            "package {name} channel {channel_name}: currentCSV {csv_name} is not in data.{CSVS_KEY}"
                        ));
                    }
                    continue;
                };
                members.insert(csv_name.clone(), csv);
                let mut entry = json!({"name": csv_name});
                let replaces = csv.pointer("/spec/replaces").and_then(Value::as_str).filter(|r| !r.is_empty());
                if let Some(r) = replaces {
                    entry["replaces"] = json!(r);
                }
                let skips: Vec<&str> = csv.pointer("/spec/skips").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
                if !skips.is_empty() {
                    entry["skips"] = json!(skips);
                }
                if let Some(range) = csv.pointer("/metadata/annotations/olm.skipRange").and_then(Value::as_str) {
                    entry["skipRange"] = json!(range);
                }
                entries.push(entry);
                for next in replaces.into_iter().chain(skips) {
                    if csv_by_name.contains_key(next) && seen.insert(next.to_owned()) {
                        queue.push_back(next.to_owned());
                    }
                }
            }
            docs.push(json!({"schema": "olm.channel", "package": name, "name": channel_name, "entries": entries}));
        }
        for (csv_name, csv) in members {
            let version = csv.pointer("/spec/version").and_then(Value::as_str).unwrap_or("0.0.0");
            let mut properties = vec![json!({"type": "olm.package", "value": {"packageName": name, "version": version}})];
            let mut objects = vec![encode(csv)];
            for desc in csv
                .pointer("/spec/customresourcedefinitions/owned")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(g) = gvk_of(desc) {
                    properties.push(json!({"type": "olm.gvk", "value": g}));
                }
                if let Some(crd) = desc.get("name").and_then(Value::as_str).and_then(|n| crd_by_name.get(n)) {
                    let encoded = encode(crd);
                    if !objects.contains(&encoded) {
                        objects.push(encoded);
                    }
                }
            }
            for desc in csv
                .pointer("/spec/customresourcedefinitions/required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(g) = gvk_of(desc) {
                    properties.push(json!({"type": "olm.gvk.required", "value": g}));
                }
            }
            for object in objects {
                properties.push(json!({"type": "olm.bundle.object", "value": object}));
            }
            docs.push(json!({"schema": "olm.bundle", "name": csv_name, "package": name, "image": "", "properties": properties}));
        }
    }
    Ok(docs
        .into_iter()
        .map(|value| crate::Document { value, source: None })
        .collect())
}

/// What upstream's ConfigMap registry serves although opm refuses it in a file-based catalog:
/// package names that are not DNS-1123 labels (`PackageDependent`), and bundles of a package
/// that share a version. Upstream's own e2e suite builds such catalogs.
pub const TOLERATED: &[&str] = &["InvalidPackageName", "DuplicateVersion"];

#[cfg(test)]
mod tests {
    use crate::source::{SourceFormat, load_catalog_lenient};

    const PACKAGES: &str = "- packageName: Demo\n  channels:\n  - name: stable\n    currentCSV: demo.v2\n";
    const CSVS: &str = r#"
- apiVersion: operators.coreos.com/v1alpha1
  kind: ClusterServiceVersion
  metadata: {name: demo.v1}
  spec: {version: 1.0.0}
- apiVersion: operators.coreos.com/v1alpha1
  kind: ClusterServiceVersion
  metadata: {name: demo.v2}
  spec: {version: 2.0.0, replaces: demo.v1}
"#;

    /// A ConfigMap as the kubelet mounts it: each key a link into `..data`.
    fn mounted(packages: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("..2026_12_07_00_00_00.1");
        std::fs::create_dir(&data).expect("data dir");
        std::fs::write(data.join(super::PACKAGES_KEY), packages).expect("write");
        std::fs::write(data.join(super::CSVS_KEY), CSVS).expect("write");
        std::os::unix::fs::symlink(&data, dir.path().join("..data")).expect("link");
        for key in [super::PACKAGES_KEY, super::CSVS_KEY] {
            std::os::unix::fs::symlink(format!("..data/{key}"), dir.path().join(key)).expect("link");
        }
        dir
    }

    #[test]
    fn a_mounted_configmap_is_a_catalog_with_upstreams_legacy_leniency() {
        let dir = mounted(PACKAGES);
        let (format, catalog, problems) = load_catalog_lenient(dir.path(), &Default::default()).expect("loads");
        assert_eq!(format, SourceFormat::ConfigMap);
        // `Demo` is no DNS-1123 label: opm refuses it, upstream's ConfigMap registry serves it.
        assert!(problems.is_empty(), "{problems:?}");
        let package = catalog.package("Demo").expect("the package");
        assert_eq!(package.default_channel, "stable", "a package's only channel is its default");
        assert_eq!(package.bundles().len(), 2);
    }

    #[test]
    fn a_package_listed_twice_is_its_last_entry_as_upstreams_loader_replaces_it() {
        let twice = format!("{PACKAGES}- packageName: Demo\n  channels:\n  - name: fast\n    currentCSV: demo.v1\n");
        let mut data = std::collections::BTreeMap::new();
        data.insert(super::PACKAGES_KEY.to_owned(), twice);
        data.insert(super::CSVS_KEY.to_owned(), CSVS.to_owned());
        let docs = super::documents(&data).expect("documents");
        let (catalog, problems) = crate::Catalog::build(docs);
        assert!(problems.iter().all(|p| super::TOLERATED.contains(&p.code)), "{problems:?}");
        let package = catalog.package("Demo").expect("the package");
        assert_eq!(package.default_channel, "fast");
        assert!(package.channel("stable").is_none(), "the first entry is replaced");
    }

    #[test]
    fn a_broken_configmap_directory_names_the_directory_and_the_key() {
        let dir = mounted("- channels: []\n");
        let err = load_catalog_lenient(dir.path(), &Default::default()).expect_err("no package name");
        let text = err.to_string();
        assert!(text.contains(&dir.path().display().to_string()) && text.contains("data.packages[0] has no packageName"), "{text}");
    }
}
