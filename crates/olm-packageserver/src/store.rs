//! What the server answers from: the PackageManifests of every CatalogSource, kept per catalog
//! so a refresh replaces one catalog at once and a failing catalog never hides the others.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use olm_api::packages::v1::PackageManifest;

use crate::manifest::{CatalogInfo, Served};

/// One CatalogSource's packages and health.
#[derive(Clone, Debug)]
pub struct CatalogEntry {
    /// The CatalogSource.
    pub info: CatalogInfo,
    /// The packages last read successfully (kept while the catalog fails, and then flagged).
    pub packages: Arc<Vec<Served>>,
    /// Why the last read failed, when it did.
    pub error: Option<String>,
    /// When the packages were read.
    pub read_at: Option<SystemTime>,
}

/// One listed package: shared with the store (no copy of the large status), shown in
/// `namespace` (the catalog's own, or the listed namespace for a global catalog).
#[derive(Clone, Debug)]
pub struct Item {
    catalog: Arc<Vec<Served>>,
    index: usize,
    /// The namespace the object is shown in.
    pub namespace: String,
}

impl Item {
    /// The stored object (its `metadata.namespace` is the catalog's; use [`Item::namespace`]).
    pub fn stored(&self) -> &PackageManifest {
        &self.catalog[self.index].manifest
    }

    /// A copy of the object as shown (namespace rewritten).
    pub fn to_manifest(&self) -> PackageManifest {
        let mut manifest = self.stored().clone();
        manifest.metadata.namespace = Some(self.namespace.clone());
        manifest
    }
}

/// The visible result of a list: the objects and the warnings about catalogs that could not
/// be read (sent as `Warning` headers, which kubectl prints).
#[derive(Debug, Default)]
pub struct Listing {
    /// The objects, in name then catalog order.
    pub items: Vec<Item>,
    /// One line per catalog that is failing or not read yet.
    pub warnings: Vec<String>,
}

/// All catalogs' packages.
#[derive(Debug)]
pub struct Store {
    catalogs: RwLock<BTreeMap<(String, String), CatalogEntry>>,
    global_namespace: String,
    synced: std::sync::atomic::AtomicBool,
}

impl Store {
    /// An empty store; catalogs in `global_namespace` are visible from every namespace.
    pub fn new(global_namespace: impl Into<String>) -> Store {
        Store { catalogs: RwLock::default(), global_namespace: global_namespace.into(), synced: Default::default() }
    }

    /// The global catalog namespace.
    pub fn global_namespace(&self) -> &str {
        &self.global_namespace
    }

    /// Mark that the CatalogSources were listed once (readiness).
    pub fn mark_synced(&self) {
        self.synced.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether the CatalogSources were listed once.
    pub fn is_synced(&self) -> bool {
        self.synced.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<(String, String), CatalogEntry>> {
        // A panic while holding the lock leaves consistent data (every write is one insert).
        self.catalogs.write().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<(String, String), CatalogEntry>> {
        self.catalogs.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Replace a catalog's packages after a successful read.
    pub fn set_packages(&self, info: CatalogInfo, packages: Vec<Served>) {
        let key = (info.namespace.clone(), info.name.clone());
        let entry = CatalogEntry { info, packages: Arc::new(packages), error: None, read_at: Some(SystemTime::now()) };
        self.write().insert(key, entry);
    }

    /// Record a failed read; packages read before stay (flagged by a warning).
    pub fn set_error(&self, info: CatalogInfo, error: String) {
        let key = (info.namespace.clone(), info.name.clone());
        let mut catalogs = self.write();
        match catalogs.get_mut(&key) {
            Some(entry) => {
                entry.info = info;
                entry.error = Some(error);
            }
            None => {
                catalogs.insert(key, CatalogEntry { info, packages: Arc::default(), error: Some(error), read_at: None });
            }
        }
    }

    /// Register a catalog that was not read yet (its packages are missing until then).
    pub fn set_pending(&self, info: CatalogInfo) {
        let key = (info.namespace.clone(), info.name.clone());
        let mut catalogs = self.write();
        match catalogs.get_mut(&key) {
            Some(entry) => entry.info = info,
            None => {
                catalogs.insert(key, CatalogEntry { info, packages: Arc::default(), error: None, read_at: None });
            }
        }
    }

    /// Forget a deleted CatalogSource.
    pub fn remove(&self, namespace: &str, name: &str) {
        self.write().remove(&(namespace.to_owned(), name.to_owned()));
    }

    /// The keys of every catalog (namespace, name).
    pub fn keys(&self) -> Vec<(String, String)> {
        self.read().keys().cloned().collect()
    }

    /// A copy of one catalog's entry.
    pub fn entry(&self, namespace: &str, name: &str) -> Option<CatalogEntry> {
        self.read().get(&(namespace.to_owned(), name.to_owned())).cloned()
    }

    /// The catalogs visible from `namespace` (`None`: all), each with the namespace its
    /// packages are shown in.
    fn visible(&self, namespace: Option<&str>) -> Vec<(CatalogEntry, String)> {
        self.read()
            .values()
            .filter_map(|entry| {
                let own = entry.info.namespace.as_str();
                match namespace {
                    None => Some((entry.clone(), own.to_owned())),
                    Some(ns) if ns == own => Some((entry.clone(), own.to_owned())),
                    Some(ns) if own == self.global_namespace => Some((entry.clone(), ns.to_owned())),
                    Some(_) => None,
                }
            })
            .collect()
    }

    /// Run `keep` over the visible packages and collect the matching ones (icons stripped).
    pub fn list(&self, namespace: Option<&str>, mut keep: impl FnMut(&PackageManifest) -> bool) -> Listing {
        let mut listing = Listing::default();
        for (entry, shown_in) in self.visible(namespace) {
            if let Some(warning) = warning(&entry) {
                listing.warnings.push(warning);
            }
            for (index, served) in entry.packages.iter().enumerate() {
                if keep(&served.manifest) {
                    listing.items.push(Item { catalog: entry.packages.clone(), index, namespace: shown_in.clone() });
                }
            }
        }
        // Name, then catalog: a stable order that groups a package's catalogs.
        listing.items.sort_by(|a, b| {
            let (a, b) = (a.stored(), b.stored());
            (&a.metadata.name, &a.status.catalog_source_namespace, &a.status.catalog_source).cmp(&(
                &b.metadata.name,
                &b.status.catalog_source_namespace,
                &b.status.catalog_source,
            ))
        });
        listing
    }

    /// One package visible from `namespace`: the first catalog in the namespace itself, then
    /// the global ones (as upstream, the first match wins when several catalogs have it).
    pub fn get(&self, namespace: &str, name: &str) -> (Option<Served>, Vec<String>) {
        let mut warnings = Vec::new();
        let mut visible = self.visible(Some(namespace));
        visible.sort_by_key(|(entry, _)| entry.info.namespace != namespace);
        for (entry, shown_in) in visible {
            if let Some(served) = entry.packages.iter().find(|s| s.manifest.metadata.name.as_deref() == Some(name)) {
                let mut served = served.clone();
                served.manifest.metadata.namespace = Some(shown_in);
                return (Some(served), warnings);
            }
            if let Some(w) = warning(&entry) {
                warnings.push(w);
            }
        }
        (None, warnings)
    }
}

fn warning(entry: &CatalogEntry) -> Option<String> {
    let key = format!("{}/{}", entry.info.namespace, entry.info.name);
    match (&entry.error, entry.read_at) {
        (Some(error), None) => Some(format!("catalog {key} cannot be read, its packages are missing: {error}")),
        (Some(error), Some(_)) => {
            Some(format!("catalog {key} cannot be read, showing its packages from the last successful read: {error}"))
        }
        (None, None) => Some(format!("catalog {key} has not been read yet, its packages are missing")),
        (None, Some(_)) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use olm_api::packages::v1::PackageManifestStatus;

    fn served(name: &str, catalog: &str, ns: &str) -> Served {
        let status = PackageManifestStatus {
            catalog_source: catalog.into(),
            catalog_source_namespace: ns.into(),
            package_name: name.into(),
            ..Default::default()
        };
        let metadata = ObjectMeta { name: Some(name.into()), namespace: Some(ns.into()), ..Default::default() };
        Served { manifest: PackageManifest::new(metadata, status), icons: Default::default() }
    }

    fn info(name: &str, ns: &str) -> CatalogInfo {
        CatalogInfo { name: name.into(), namespace: ns.into(), ..Default::default() }
    }

    #[test]
    fn namespace_sees_own_and_global_catalogs_rewritten() {
        let store = Store::new("olm");
        store.set_packages(info("community", "olm"), vec![served("etcd", "community", "olm")]);
        store.set_packages(info("team", "team-a"), vec![served("mine", "team", "team-a")]);
        store.set_packages(info("other", "team-b"), vec![served("theirs", "other", "team-b")]);

        let a = store.list(Some("team-a"), |_| true);
        let names: Vec<_> = a.items.iter().map(|m| m.stored().metadata.name.clone().unwrap_or_default()).collect();
        assert_eq!(names, ["etcd", "mine"]);
        assert!(a.items.iter().all(|m| m.to_manifest().metadata.namespace.as_deref() == Some("team-a")));
        assert_eq!(a.items[0].stored().status.catalog_source_namespace, "olm", "status keeps the real namespace");

        let all = store.list(None, |_| true);
        assert_eq!(all.items.len(), 3);
        assert_eq!(all.items[0].namespace, "olm");

        let (got, _) = store.get("team-b", "etcd");
        assert_eq!(got.expect("global package visible").manifest.metadata.namespace.as_deref(), Some("team-b"));
        assert!(store.get("team-b", "mine").0.is_none());
    }

    #[test]
    fn failing_catalog_warns_and_keeps_last_content() {
        let store = Store::new("olm");
        store.set_packages(info("good", "olm"), vec![served("etcd", "good", "olm")]);
        store.set_error(info("broken", "olm"), "cannot connect".into());
        let listing = store.list(Some("olm"), |_| true);
        assert_eq!(listing.items.len(), 1);
        assert_eq!(listing.warnings.len(), 1);
        assert!(listing.warnings[0].contains("olm/broken"), "{:?}", listing.warnings);
        store.set_error(info("good", "olm"), "timeout".into());
        let listing = store.list(Some("olm"), |_| true);
        assert_eq!(listing.items.len(), 1, "stale content still served");
        assert!(listing.warnings.iter().any(|w| w.contains("last successful read")));
    }
}
