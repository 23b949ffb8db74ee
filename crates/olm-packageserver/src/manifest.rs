//! Catalog model → PackageManifest objects, following upstream packageserver's rules: one object
//! per package of a catalog, channels sorted by name, entries newest first without bundles that
//! carry `olm.deprecated`, labels from the CatalogSource, the provider and the default head CSV.
//! Icons are kept aside: they are served only for one package (`?icon` / the icon subresource).

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use olm_api::packages::v1::{
    ChannelEntry, CsvDescription, Deprecation, InstallPermissions, PackageChannel, PackageIcon, PackageManifest, PackageManifestStatus, RequiredPackage,
};
use olm_api::v1alpha1::GroupVersionKind;
use olm_catalog::{Catalog, Package};
use olm_registry_api::convert;
use serde_json::Value;

/// What a PackageManifest takes from its CatalogSource.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CatalogInfo {
    /// CatalogSource name.
    pub name: String,
    /// CatalogSource namespace.
    pub namespace: String,
    /// `spec.displayName`.
    pub display_name: String,
    /// `spec.publisher`.
    pub publisher: String,
    /// The CatalogSource's labels (copied to every package).
    pub labels: BTreeMap<String, String>,
    /// The CatalogSource's creationTimestamp (every package gets it).
    pub created: Option<Time>,
}

/// One package of one catalog, ready to serve.
#[derive(Clone, Debug, PartialEq)]
pub struct Served {
    /// The object without icons.
    pub manifest: PackageManifest,
    /// The icon of each channel head, by channel name (added back for a single-package GET).
    pub icons: BTreeMap<String, Vec<PackageIcon>>,
}

impl Served {
    /// The object with the channel heads' icons, as a GET of one package with icons shows it.
    pub fn with_icons(&self) -> PackageManifest {
        let mut manifest = self.manifest.clone();
        for channel in &mut manifest.status.channels {
            if let Some(icons) = self.icons.get(&channel.name) {
                channel.current_csv_desc.icon = icons.clone();
            }
        }
        manifest
    }

    /// The first icon of the default channel's head: (bytes as base64, media type).
    pub fn default_icon(&self) -> Option<&PackageIcon> {
        let default = &self.manifest.status.default_channel;
        self.icons.get(default).and_then(|icons| icons.first()).filter(|i| !i.base64_data.is_empty())
    }

    /// `"<package>.<channel>.<currentCSV>"`, the icon's ETag as upstream.
    pub fn icon_etag(&self) -> String {
        let status = &self.manifest.status;
        let head = status
            .channels
            .iter()
            .find(|c| c.name == status.default_channel)
            .map(|c| c.current_csv.as_str())
            .unwrap_or_default();
        format!("\"{}.{}.{}\"", status.package_name, status.default_channel, head)
    }
}

/// Every package of `catalog` as served for the CatalogSource `info`, and the problems that
/// made a channel or package be left out (upstream drops them silently; we log them).
/// `head_csvs` holds CSVs (by bundle name) fetched separately for heads whose listing carried
/// none (gRPC ListBundles leaves them out for bundles with an image).
pub fn build(info: &CatalogInfo, catalog: &Catalog, head_csvs: &HashMap<String, Value>) -> (Vec<Served>, Vec<String>) {
    let mut served = Vec::with_capacity(catalog.packages().len());
    let mut problems = Vec::new();
    for package in catalog.packages() {
        match build_package(info, package, head_csvs, &mut problems) {
            Some(s) => served.push(s),
            None => problems.push(format!("package {}: no channel with a readable head CSV; left out", package.name)),
        }
    }
    served.sort_by(|a, b| a.manifest.metadata.name.cmp(&b.manifest.metadata.name));
    (served, problems)
}

/// The heads (bundle names) whose CSV is not in the catalog model itself.
pub fn heads_without_csv(catalog: &Catalog) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for package in catalog.packages() {
        for channel in package.channels() {
            if let Some(head) = channel.head()
                && package.bundle(&head.name).is_some_and(|b| convert::bundle_csv(package, b).is_none())
            {
                out.push((package.name.clone(), channel.name.clone(), head.name.clone()));
            }
        }
    }
    out
}

/// What `csv`'s install grants; None when the catalog has no install strategy for it (only its
/// metadata) or the strategy's permissions cannot be read.
fn install_permissions(csv: &Value) -> Option<InstallPermissions> {
    let spec = csv.pointer("/spec/install/spec")?;
    let read = |field: &str| match spec.get(field) {
        None | Some(Value::Null) => Some(Vec::new()),
        Some(list) => serde_json::from_value(list.clone()).ok(),
    };
    Some(InstallPermissions { permissions: read("permissions")?, cluster_permissions: read("clusterPermissions")? })
}

fn build_package(info: &CatalogInfo, package: &Package, head_csvs: &HashMap<String, Value>, problems: &mut Vec<String>) -> Option<Served> {
    let mut channels: Vec<(PackageChannel, Vec<PackageIcon>, Value)> = Vec::new();
    let mut sorted: Vec<_> = package.channels().iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    for channel in sorted {
        let Some(head) = channel.head() else {
            problems.push(format!("package {} channel {}: no head; channel left out", package.name, channel.name));
            continue;
        };
        let Some(bundle) = package.bundle(&head.name) else {
            problems.push(format!("package {} channel {}: head {} is not a bundle of the package", package.name, channel.name, head.name));
            continue;
        };
        // A CSV made up from `olm.csv.metadata` has a stub install: its permissions are unknown.
        let Some((csv, synthesized)) = convert::bundle_csv(package, bundle).or_else(|| head_csvs.get(&head.name).cloned().map(|csv| (csv, false))) else {
            problems.push(format!("package {} channel {}: head {} has no CSV", package.name, channel.name, head.name));
            continue;
        };
        let description_json = convert::csv_description(&csv, true);
        let mut description: CsvDescription = match serde_json::from_value(description_json) {
            Ok(d) => d,
            Err(err) => {
                problems.push(format!(
                    "package {} channel {}: CSV {} cannot be described ({err}); channel left out",
                    package.name, channel.name, head.name
                ));
                continue;
            }
        };
        description.install_permissions = if synthesized { None } else { install_permissions(&csv) };
        description.required_packages =
            bundle.required_packages().map(|r| RequiredPackage { package_name: r.package_name.clone(), version_range: r.version_range.clone() }).collect();
        description.required_apis =
            bundle.required_gvks().map(|g| GroupVersionKind { group: g.group.clone(), version: g.version.clone(), kind: g.kind.clone() }).collect();
        let icons = std::mem::take(&mut description.icon);
        let mut entries: Vec<(&olm_catalog::Bundle, ChannelEntry)> = channel
            .entries()
            .iter()
            .filter_map(|e| package.bundle(&e.name))
            .filter(|b| !b.has_deprecated_property())
            .map(|b| {
                let entry = ChannelEntry {
                    name: b.name.clone(),
                    version: convert::bundle_version(b),
                    deprecation: b.deprecation.clone().map(|message| Deprecation { message }),
                };
                (b, entry)
            })
            .collect();
        entries.sort_by(|a, b| b.0.cmp_version(a.0));
        let csv_labels = csv.pointer("/metadata/labels").cloned().unwrap_or(Value::Null);
        channels.push((
            PackageChannel {
                name: channel.name.clone(),
                current_csv: head.name.clone(),
                current_csv_desc: description,
                deprecation: channel.deprecation.clone().map(|message| Deprecation { message }),
                entries: entries.into_iter().map(|(_, e)| e).collect(),
            },
            icons,
            csv_labels,
        ));
    }
    if channels.is_empty() {
        return None;
    }
    // The default channel, or the first remaining one when the default was left out.
    let default_index = channels.iter().position(|(c, _, _)| c.name == package.default_channel).unwrap_or(0);
    let default_channel = channels[default_index].0.name.clone();
    let provider = channels[default_index].0.current_csv_desc.provider.clone();
    let head_labels = channels[default_index].2.clone();

    let mut labels = info.labels.clone();
    labels.insert("catalog".into(), info.name.clone());
    labels.insert("catalog-namespace".into(), info.namespace.clone());
    labels.insert("provider".into(), provider.name.clone().unwrap_or_default());
    labels.insert("provider-url".into(), provider.url.clone().unwrap_or_default());
    if let Value::Object(map) = head_labels {
        for (key, value) in map {
            if let Value::String(value) = value {
                labels.insert(key, value);
            }
        }
    }
    if !labels.keys().any(|k| k.starts_with("operatorframework.io/os")) {
        labels.insert("operatorframework.io/os.linux".into(), "supported".into());
    }
    if !labels.keys().any(|k| k.starts_with("operatorframework.io/arch")) {
        labels.insert("operatorframework.io/arch.amd64".into(), "supported".into());
    }

    let mut icons = BTreeMap::new();
    let mut out_channels = Vec::with_capacity(channels.len());
    for (channel, channel_icons, _) in channels {
        icons.insert(channel.name.clone(), channel_icons);
        out_channels.push(channel);
    }
    let metadata = ObjectMeta {
        name: Some(package.name.clone()),
        namespace: Some(info.namespace.clone()),
        labels: Some(labels),
        creation_timestamp: info.created.clone(),
        ..ObjectMeta::default()
    };
    let status = PackageManifestStatus {
        catalog_source: info.name.clone(),
        catalog_source_display_name: info.display_name.clone(),
        catalog_source_publisher: info.publisher.clone(),
        catalog_source_namespace: info.namespace.clone(),
        provider,
        package_name: package.name.clone(),
        deprecation: package.deprecation.clone().map(|message| Deprecation { message }),
        channels: out_channels,
        default_channel,
    };
    Some(Served { manifest: PackageManifest::new(metadata, status), icons })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn etcd() -> Catalog {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/etcd");
        let (catalog, problems) = olm_catalog::load::load_fbc(&dir).expect("fixture loads");
        assert!(problems.is_empty(), "{problems:?}");
        catalog
    }

    fn info() -> CatalogInfo {
        CatalogInfo {
            name: "community".into(),
            namespace: "olm".into(),
            display_name: "Community Operators".into(),
            publisher: "OLM".into(),
            labels: BTreeMap::from([("team".into(), "a".into())]),
            created: None,
        }
    }

    #[test]
    fn etcd_package_has_upstream_shape() {
        let (served, problems) = build(&info(), &etcd(), &HashMap::new());
        assert!(problems.is_empty(), "{problems:?}");
        let etcd = served.iter().find(|s| s.manifest.metadata.name.as_deref() == Some("etcd")).expect("etcd served");
        let status = &etcd.manifest.status;
        assert_eq!(status.default_channel, "singlenamespace-alpha");
        assert_eq!(status.catalog_source, "community");
        assert_eq!(status.catalog_source_display_name, "Community Operators");
        assert_eq!(status.catalog_source_namespace, "olm");
        assert_eq!(status.package_name, "etcd");
        let names: Vec<&str> = status.channels.iter().map(|c| c.name.as_str()).collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted, "channels sorted by name");
        let alpha = status.channels.iter().find(|c| c.name == "singlenamespace-alpha").expect("default channel");
        assert_eq!(alpha.current_csv, alpha.entries[0].name, "the head is the newest entry");
        let install = alpha.current_csv_desc.install_permissions.as_ref().expect("the head's install permissions");
        let etcd_operator = install.permissions.iter().find(|p| p.service_account_name == "etcd-operator").expect("etcd-operator's permissions");
        let rules = serde_json::to_string(&etcd_operator.rules).expect("json");
        assert!(rules.contains("etcdclusters"), "{rules}");
        assert!(alpha.current_csv_desc.icon.is_empty(), "icons are stripped from the served object");
        assert!(etcd.default_icon().is_some(), "the icon is kept aside");
        assert!(!etcd.with_icons().status.channels.iter().all(|c| c.current_csv_desc.icon.is_empty()));
        let labels = etcd.manifest.metadata.labels.as_ref().expect("labels");
        assert_eq!(labels["catalog"], "community");
        assert_eq!(labels["catalog-namespace"], "olm");
        assert_eq!(labels["team"], "a");
        assert_eq!(labels["provider"], status.provider.name.clone().unwrap_or_default());
        assert!(labels.keys().any(|k| k.starts_with("operatorframework.io/os.")));
        assert!(labels.keys().any(|k| k.starts_with("operatorframework.io/arch.")));
        assert_eq!(etcd.icon_etag(), format!("\"etcd.singlenamespace-alpha.{}\"", alpha.current_csv));
    }

    #[test]
    fn a_head_known_only_by_its_metadata_has_unknown_install_permissions_and_its_dependencies() {
        let documents = [
            serde_json::json!({"schema": "olm.package", "name": "meta", "defaultChannel": "stable"}),
            serde_json::json!({"schema": "olm.channel", "package": "meta", "name": "stable", "entries": [{"name": "meta.v1.0.0"}]}),
            serde_json::json!({"schema": "olm.bundle", "package": "meta", "name": "meta.v1.0.0", "image": "example.com/meta-bundle:v1.0.0",
                "properties": [{"type": "olm.package", "value": {"packageName": "meta", "version": "1.0.0"}}, {"type": "olm.csv.metadata", "value": {"displayName": "Meta"}},
                    {"type": "olm.package.required", "value": {"packageName": "etcd", "versionRange": ">=0.9.0"}},
                    {"type": "olm.gvk.required", "value": {"group": "etcd.database.coreos.com", "version": "v1beta2", "kind": "EtcdCluster"}}]}),
        ];
        let documents = documents.into_iter().map(|value| olm_catalog::model::Document { value, source: None }).collect();
        let catalog = Catalog::from_documents(documents).expect("a catalog");
        let (served, problems) = build(&info(), &catalog, &HashMap::new());
        assert!(problems.is_empty(), "{problems:?}");
        let desc = &served[0].manifest.status.channels[0].current_csv_desc;
        assert_eq!(desc.display_name, "Meta");
        assert_eq!(desc.install_permissions, None, "its install is unknown, not empty");
        assert_eq!(desc.required_packages, [RequiredPackage { package_name: "etcd".into(), version_range: ">=0.9.0".into() }]);
        assert_eq!(desc.required_apis, [GroupVersionKind { group: "etcd.database.coreos.com".into(), version: "v1beta2".into(), kind: "EtcdCluster".into() }]);
    }

    #[test]
    fn entries_are_newest_first() {
        let (served, _) = build(&info(), &etcd(), &HashMap::new());
        for s in &served {
            for channel in &s.manifest.status.channels {
                let versions: Vec<semver::Version> =
                    channel.entries.iter().filter_map(|e| semver::Version::parse(&e.version).ok()).collect();
                assert!(versions.windows(2).all(|w| w[0] >= w[1]), "{}: {versions:?}", channel.name);
            }
        }
    }
}
