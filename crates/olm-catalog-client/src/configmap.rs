//! The legacy ConfigMap catalog (`sourceType: configmap`): keys `packages`,
//! `clusterServiceVersions` and `customResourceDefinitions`, each a YAML list. Turned into FBC
//! documents: each channel holds what its `currentCSV` reaches by `spec.replaces` and `spec.skips`; each CSV becomes a
//! bundle carrying its owned CRDs.

use std::collections::{BTreeMap, HashMap};

use base64::Engine as _;
use olm_resolver::CatalogKey;
use serde_json::{Value, json};

use super::CatalogContent;

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
    let docs = olm_catalog::load::parse_manifest_text(text).map_err(|err| format!("data.{key}: {err}"))?;
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
pub fn documents(data: &BTreeMap<String, String>) -> Result<Vec<olm_catalog::Document>, String> {
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

    let mut docs = Vec::new();
    for (i, package) in packages.iter().enumerate() {
        let name = package
            .get("packageName")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("data.{PACKAGES_KEY}[{i}] has no packageName"))?;
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
        .map(|value| olm_catalog::Document { value, source: None })
        .collect())
}

/// What upstream's ConfigMap registry serves although opm refuses it in a file-based catalog:
/// package names that are not DNS-1123 labels (`PackageDependent`), and bundles of a package
/// that share a version. Upstream's own e2e suite builds such catalogs.
pub const TOLERATED: &[&str] = &["InvalidPackageName", "DuplicateVersion"];

/// The content of a ConfigMap catalog.
pub fn content(key: CatalogKey, priority: i32, data: &BTreeMap<String, String>) -> Result<CatalogContent, String> {
    let docs = documents(data)?;
    CatalogContent::from_documents_tolerating(key, priority, docs, None, HashMap::new(), TOLERATED)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data() -> BTreeMap<String, String> {
        let mut data = BTreeMap::new();
        data.insert(
            PACKAGES_KEY.into(),
            "- packageName: demo\n  defaultChannel: stable\n  channels:\n  - name: stable\n    currentCSV: demo.v2\n".into(),
        );
        data.insert(
            CSVS_KEY.into(),
            r#"
- apiVersion: operators.coreos.com/v1alpha1
  kind: ClusterServiceVersion
  metadata: {name: demo.v1}
  spec:
    version: 1.0.0
    customresourcedefinitions:
      owned: [{name: widgets.demo.io, version: v1, kind: Widget}]
- apiVersion: operators.coreos.com/v1alpha1
  kind: ClusterServiceVersion
  metadata: {name: demo.v2}
  spec:
    version: 2.0.0
    replaces: demo.v1
    customresourcedefinitions:
      owned: [{name: widgets.demo.io, version: v1, kind: Widget}]
"#
            .into(),
        );
        data.insert(
            CRDS_KEY.into(),
            "- apiVersion: apiextensions.k8s.io/v1\n  kind: CustomResourceDefinition\n  metadata: {name: widgets.demo.io}\n  spec: {group: demo.io}\n".into(),
        );
        data
    }

    #[test]
    fn what_upstreams_configmap_registry_serves_is_served() {
        let mut data = data();
        let packages = data.get(PACKAGES_KEY).cloned().unwrap_or_default().replace("packageName: demo", "packageName: PkgDemo");
        data.insert(PACKAGES_KEY.into(), packages);
        let csvs = data.get(CSVS_KEY).cloned().unwrap_or_default().replace("version: 2.0.0", "version: 1.0.0");
        data.insert(CSVS_KEY.into(), csvs);
        let content = content(CatalogKey::new("legacy", "ns"), 0, &data).expect("served");
        assert!(content.problems.is_empty(), "{:?}", content.problems);
        let package = content.catalog.package("PkgDemo").expect("the package is served");
        assert_eq!(package.bundles().len(), 2, "both bundles at 1.0.0");
        // The same documents as a file-based catalog are refused, as opm refuses them.
        let strict = CatalogContent::from_documents(CatalogKey::new("fbc", "ns"), 0, documents(&data).expect("documents"), None, HashMap::new());
        assert!(strict.is_err_and(|e| e.contains("DNS-1123") || e.contains("share version")));
    }

    #[test]
    fn a_configmap_catalog_becomes_packages_channels_and_bundles() {
        let content = content(CatalogKey::new("legacy", "ns"), 0, &data()).expect("valid");
        let package = content.catalog.package("demo").expect("package");
        assert_eq!(package.default_channel, "stable");
        let names: Vec<_> = package
            .channel("stable")
            .expect("channel")
            .entries()
            .iter()
            .map(|e| e.name.clone())
            .collect();
        assert_eq!(names, vec!["demo.v2", "demo.v1"]);
        let bundle = package.bundle("demo.v2").expect("bundle");
        assert_eq!(bundle.objects().len(), 2, "the CSV and its owned CRD");
        assert!(bundle.csv().is_some());
        assert_eq!(content.indexed.entries.len(), 2);
        assert!(content.indexed.entries.iter().any(|e| e.replaces.as_deref() == Some("demo.v1")));
    }

    #[test]
    fn a_csv_reached_only_by_skips_is_a_channel_member() {
        let mut data = data();
        let csvs = data[CSVS_KEY].replace("    replaces: demo.v1\n", "    replaces: demo.v1\n    skips: [demo.v1.5]\n")
            + "- apiVersion: operators.coreos.com/v1alpha1\n  kind: ClusterServiceVersion\n  metadata: {name: demo.v1.5}\n  spec: {version: 1.5.0, replaces: demo.v1}\n";
        data.insert(CSVS_KEY.into(), csvs);
        let content = content(CatalogKey::new("legacy", "ns"), 0, &data).expect("valid");
        let channel = content.catalog.channel("demo", "stable").expect("channel");
        let mut names: Vec<_> = channel.entries().iter().map(|e| e.name.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, ["demo.v1", "demo.v1.5", "demo.v2"], "demo.v1.5 is only skipped, and still a member");
        assert_eq!(channel.head().map(|h| h.name.as_str()), Some("demo.v2"));
    }

    #[test]
    fn a_package_with_one_channel_has_it_as_default_whatever_default_channel_names() {
        // Upstream's e2e suite writes such packages (defaultChannel "stable", one channel
        // "myapp-stable"), and upstream's registry serves them with that channel as default.
        let mut data = data();
        let packages = data[PACKAGES_KEY].replace("  - name: stable\n", "  - name: myapp-stable\n");
        data.insert(PACKAGES_KEY.into(), packages);
        let content = content(CatalogKey::new("legacy", "ns"), 0, &data).expect("served");
        let package = content.catalog.package("demo").expect("the package is served");
        assert_eq!(package.default_channel, "myapp-stable");
        assert_eq!(package.default_head().map(|h| h.name.as_str()), Some("demo.v2"));
    }

    #[test]
    fn a_channel_naming_a_missing_csv_is_an_error_that_names_it() {
        let mut data = data();
        data.insert(
            PACKAGES_KEY.into(),
            "- packageName: demo\n  channels:\n  - name: stable\n    currentCSV: demo.v9\n".into(),
        );
        let err = content(CatalogKey::new("legacy", "ns"), 0, &data).unwrap_err();
        assert!(err.contains("demo.v9") && err.contains("clusterServiceVersions"), "{err}");
    }
}
