//! ConfigMap catalogs (`sourceType: configmap`) read by the CatalogSource controller: the
//! conversion to FBC documents is olm-catalog's ([`olm_catalog::configmap`]).

use std::collections::{BTreeMap, HashMap};

use olm_resolver::CatalogKey;

use super::CatalogContent;
pub use olm_catalog::configmap::{CRDS_KEY, CSVS_KEY, PACKAGES_KEY, TOLERATED, documents};

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
