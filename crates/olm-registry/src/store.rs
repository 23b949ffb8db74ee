//! Catalog snapshots and the set of served catalogs.
//!
//! Each served catalog holds its current snapshot behind an [`ArcSwapOption`]: readers
//! take a cheap `Arc` of the snapshot and keep using it for the whole request, and a
//! reload replaces it atomically, so a request never sees half of an edit.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use arc_swap::{ArcSwap, ArcSwapOption};
use olm_catalog::{Blob, Bundle, Catalog, Package};
use sha2::{Digest, Sha256};

use olm_registry_api::convert::BundleContent;
use crate::metrics::Metrics;

/// An immutable, indexed catalog plus what the server derives from it once.
#[derive(Debug)]
pub struct CatalogSnapshot {
    pub catalog: Catalog,
    /// Hex SHA-256 over every canonical blob, in order: changes exactly when the served
    /// content changes (used for ETags and to skip no-op reloads).
    pub content_hash: String,
    /// When this snapshot was built.
    pub loaded_at: SystemTime,
    /// How long reading, parsing and indexing took.
    pub load_duration: Duration,
    /// Total size of the JSON-lines document (`/api/v1/all`).
    pub all_len: u64,
    /// Rendered JSON answers of this snapshot by request URI (bounded; see [`ResponseCache`]).
    pub responses: ResponseCache,
    /// gRPC `csvJson`/`object` of bundles, built on first request (bounded; see [`BundleContentCache`]).
    pub bundle_contents: BundleContentCache,
    /// Packages not served because of their problems (`olm catalog validate` lists them too).
    pub left_out: Vec<olm_catalog::LeftOut>,
    /// Problems that belong to no package; the catalog is served anyway.
    pub unattributed: Vec<String>,
}

/// Rendered response bodies of one snapshot. Views such as the package list read every
/// package's CSV metadata; rendering them once per snapshot keeps repeated requests at
/// the cost of a copy. Large answers (a package whose channel heads carry megabytes of
/// CRD descriptions) are the most expensive to render, so they are kept too, up to a
/// per-entry and a total bound; when full, new answers are simply not cached. Nothing is
/// kept before the first request, and a new snapshot starts with an empty cache.
#[derive(Debug)]
pub struct ResponseCache {
    entries: Mutex<(HashMap<String, bytes::Bytes>, usize)>,
    max_total: usize,
}

impl Default for ResponseCache {
    fn default() -> Self {
        ResponseCache::with_limit(Self::MAX_TOTAL_BYTES)
    }
}

impl ResponseCache {
    /// Largest body kept.
    pub const MAX_ENTRY_BYTES: usize = 8 * 1024 * 1024;
    /// Total bytes kept per snapshot, at least (see [`ResponseCache::for_catalog_of`]).
    pub const MAX_TOTAL_BYTES: usize = 32 * 1024 * 1024;

    /// A cache keeping at most `max_total` bytes of bodies.
    pub fn with_limit(max_total: usize) -> ResponseCache {
        ResponseCache { entries: Mutex::default(), max_total }
    }

    /// The cache of a snapshot whose blobs total `catalog_bytes`: [`Self::MAX_TOTAL_BYTES`],
    /// or half the catalog's size for big catalogs (their package views are big too),
    /// so what answers may add to the resident set stays in proportion to the catalog.
    pub fn for_catalog_of(catalog_bytes: u64) -> ResponseCache {
        let half = usize::try_from(catalog_bytes / 2).unwrap_or(usize::MAX);
        ResponseCache::with_limit(half.max(Self::MAX_TOTAL_BYTES))
    }

    /// Most bytes of bodies kept.
    pub fn limit(&self) -> usize {
        self.max_total
    }

    pub fn get(&self, key: &str) -> Option<bytes::Bytes> {
        self.entries.lock().ok().and_then(|e| e.0.get(key).cloned())
    }

    pub fn put(&self, key: &str, body: bytes::Bytes) {
        if body.len() > Self::MAX_ENTRY_BYTES {
            return;
        }
        if let Ok(mut e) = self.entries.lock()
            && e.1 + body.len() <= self.max_total && !e.0.contains_key(key) {
                e.1 += body.len();
                e.0.insert(key.to_string(), body);
            }
    }
}

/// `csvJson` and `object` of the bundles gRPC clients asked for. Bundles of catalogs that
/// carry `olm.csv.metadata` instead of the CSV get a synthesized CSV, which takes about a
/// millisecond to build; GetBundleForChannel asks for the same channel heads over and
/// over, so each is built once per snapshot. Built on first use (nothing is spent at
/// load) and bounded in total size; past the bound, contents are built per request.
/// Held LZ4-compressed (a decompression costs microseconds, a build a millisecond), and a
/// bundle whose only object is its CSV holds the text once: so the channel heads of even
/// a large catalog fit within the bound.
#[derive(Debug, Default)]
pub struct BundleContentCache {
    /// By (package, bundle) name; plus the total bytes held.
    entries: Mutex<(HashMap<BundleKey, Arc<HeldContent>>, usize)>,
}

type BundleKey = (String, String);

/// A [`BundleContent`] as the cache holds it.
#[derive(Debug)]
struct HeldContent {
    csv_json: Blob,
    /// None when the objects are exactly `[csv_json]`.
    objects: Option<Vec<Blob>>,
}

impl HeldContent {
    fn hold(content: &BundleContent) -> HeldContent {
        let csv_json = Blob::new(&content.csv_json);
        let objects = if content.objects.len() == 1 && content.objects[0] == content.csv_json {
            None
        } else {
            Some(content.objects.iter().map(|o| Blob::new(o)).collect())
        };
        HeldContent { csv_json, objects }
    }

    fn stored_len(&self) -> usize {
        self.csv_json.stored_len() + self.objects.iter().flatten().map(Blob::stored_len).sum::<usize>()
    }

    fn content(&self) -> BundleContent {
        let csv_json = self.csv_json.text().into_owned();
        let objects = match &self.objects {
            None => vec![csv_json.clone()],
            Some(objects) => objects.iter().map(|o| o.text().into_owned()).collect(),
        };
        BundleContent { csv_json, objects }
    }
}

impl BundleContentCache {
    /// Total bytes kept per snapshot (compressed).
    pub const MAX_TOTAL_BYTES: usize = 32 * 1024 * 1024;

    /// The content of `bundle` of `package`, from the cache or built now (and kept
    /// while the bound allows).
    pub fn get_or_build(&self, package: &Package, bundle: &Bundle) -> Arc<BundleContent> {
        let cached = self.entries.lock().ok().and_then(|e| {
            e.0.get(&(package.name.clone(), bundle.name.clone())).cloned()
        });
        if let Some(held) = cached {
            return Arc::new(held.content());
        }
        // Built outside the lock: two first requests may both build it, which is
        // cheaper than making every other request wait.
        let content = Arc::new(BundleContent::build(package, bundle));
        let held = HeldContent::hold(&content);
        if let Ok(mut e) = self.entries.lock() {
            let size = held.stored_len();
            let key = (package.name.clone(), bundle.name.clone());
            if e.0.contains_key(&key) {
                return content;
            }
            if e.1 + size <= Self::MAX_TOTAL_BYTES {
                e.1 += size;
                e.0.insert(key, Arc::new(held));
            }
        }
        content
    }

    /// Number of bundles cached.
    pub fn len(&self) -> usize {
        self.entries.lock().map(|e| e.0.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held (compressed).
    pub fn held_bytes(&self) -> usize {
        self.entries.lock().map(|e| e.1).unwrap_or(0)
    }
}

impl CatalogSnapshot {
    /// Index a catalog that was already loaded and validated.
    pub fn new(catalog: Catalog, load_duration: Duration) -> CatalogSnapshot {
        let mut hasher = Sha256::new();
        let mut all_len = 0u64;
        for meta in catalog.all_metas() {
            hasher.update(meta.blob.text().as_bytes());
            all_len += meta.blob.len() as u64;
        }
        CatalogSnapshot {
            catalog,
            content_hash: hex::encode(hasher.finalize()),
            loaded_at: SystemTime::now(),
            load_duration,
            all_len,
            responses: ResponseCache::for_catalog_of(all_len),
            bundle_contents: BundleContentCache::default(),
            left_out: Vec::new(),
            unattributed: Vec::new(),
        }
    }
}

/// Read, parse, index and validate the catalog in `dir`. Strict like `opm serve`:
/// any validation problem rejects the whole directory, and the message lists them.
pub fn load_snapshot(dir: &Path) -> Result<CatalogSnapshot, String> {
    let started = Instant::now();
    let (catalog, problems) = crate::loader::load_catalog_dir(dir)?;
    // One bad package hurts only itself: served without it, its problems reported.
    let isolated = catalog.isolate(problems);
    let problems: Vec<olm_catalog::Problem> = isolated
        .left_out
        .iter()
        .flat_map(|l| l.problems.iter().cloned())
        .chain(isolated.unattributed.iter().cloned())
        .collect();
    if isolated.catalog.packages().is_empty() && !problems.is_empty() {
        let shown: Vec<String> = problems.iter().take(20).map(|p| format!("  - {p}")).collect();
        let more = if problems.len() > shown.len() {
            format!("\n  … and {} more", problems.len() - shown.len())
        } else {
            String::new()
        };
        return Err(format!(
            "{} problem(s); fix them (`olm catalog validate {}` lists them all):\n{}{more}",
            problems.len(),
            dir.display(),
            shown.join("\n")
        ));
    }
    for left_out in &isolated.left_out {
        let why: Vec<String> = left_out.problems.iter().map(ToString::to_string).collect();
        tracing::warn!(catalog = %dir.display(), package = %left_out.package, "package left out: {}", why.join("; "));
    }
    let mut snapshot = CatalogSnapshot::new(isolated.catalog, started.elapsed());
    snapshot.left_out = isolated.left_out;
    snapshot.unattributed = isolated.unattributed.iter().map(ToString::to_string).collect();
    Ok(snapshot)
}

/// Outcome of the last reload attempts of one catalog.
#[derive(Debug, Clone, Default)]
pub struct ReloadStatus {
    /// Error of the last attempt, when it failed (cleared by a later success).
    pub last_error: Option<String>,
    pub last_error_at: Option<SystemTime>,
    pub last_success_at: Option<SystemTime>,
    /// Successful loads that changed the served content.
    pub swaps: u64,
    /// Failed load attempts.
    pub errors: u64,
}

/// One catalog the server serves: its name, where its content comes from and its current
/// snapshot.
#[derive(Debug)]
pub struct ServedCatalog {
    pub name: String,
    /// The directory it is loaded (and reloaded) from; `None` for content a controller puts in
    /// ([`CatalogSet::publish`]: a ClusterCatalog's unpacked image).
    pub dir: Option<PathBuf>,
    current: ArcSwapOption<CatalogSnapshot>,
    status: Mutex<ReloadStatus>,
    metrics: Arc<Metrics>,
}

impl ServedCatalog {
    pub fn new(name: String, dir: Option<PathBuf>, metrics: Arc<Metrics>) -> ServedCatalog {
        ServedCatalog { name, dir, current: ArcSwapOption::empty(), status: Mutex::new(ReloadStatus::default()), metrics }
    }

    /// Where the content comes from, for messages: its directory, or "published content".
    pub fn origin(&self) -> String {
        self.dir.as_ref().map_or_else(|| "published content".to_owned(), |dir| dir.display().to_string())
    }

    /// The snapshot being served, if one has loaded.
    pub fn snapshot(&self) -> Option<Arc<CatalogSnapshot>> {
        self.current.load_full()
    }

    pub fn status(&self) -> ReloadStatus {
        self.status.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Load the directory now; on success swap the snapshot in (unless the content is
    /// unchanged), on failure keep the old one and record the error.
    /// Blocking: call it from a blocking thread.
    pub fn reload(&self) -> Result<bool, String> {
        let Some(dir) = &self.dir else {
            return Err(format!("catalog {} has no directory to reload from", self.name));
        };
        match load_snapshot(dir) {
            Ok(snapshot) => Ok(self.install(snapshot)),
            Err(message) => {
                self.record_error(message.clone());
                Err(message)
            }
        }
    }

    /// Serve `snapshot` from now on. Returns false when it equals the current content.
    pub fn install(&self, snapshot: CatalogSnapshot) -> bool {
        let now = SystemTime::now();
        let changed = self.current.load().as_ref().is_none_or(|old| old.content_hash != snapshot.content_hash);
        let (packages, channels, bundles) = snapshot.catalog.counts();
        let left_out = snapshot.left_out.len();
        if changed {
            // The counts first: whoever sees the new snapshot sees its counts too.
            self.metrics.set_snapshot_counts(&self.name, packages, channels, bundles, left_out);
            self.current.store(Some(Arc::new(snapshot)));
        }
        self.metrics.record_reload_success(&self.name, now);
        if let Ok(mut status) = self.status.lock() {
            status.last_error = None;
            status.last_error_at = None;
            status.last_success_at = Some(now);
            if changed {
                status.swaps += 1;
            }
        }
        changed
    }

    fn record_error(&self, message: String) {
        self.metrics.record_reload_error(&self.name);
        if let Ok(mut status) = self.status.lock() {
            status.last_error = Some(message);
            status.last_error_at = Some(SystemTime::now());
            status.errors += 1;
        }
    }
}

/// Every catalog served by one server, by name: the directories it was started with, and
/// the catalogs controllers publish and withdraw while it runs.
#[derive(Debug, Clone)]
pub struct CatalogSet {
    catalogs: Arc<ArcSwap<BTreeMap<String, Arc<ServedCatalog>>>>,
    pub metrics: Arc<Metrics>,
}

impl CatalogSet {
    pub fn new(sources: &[(String, PathBuf)], metrics: Arc<Metrics>) -> CatalogSet {
        let catalogs = sources
            .iter()
            .map(|(name, dir)| (name.clone(), Arc::new(ServedCatalog::new(name.clone(), Some(dir.clone()), metrics.clone()))))
            .collect();
        CatalogSet { catalogs: Arc::new(ArcSwap::from_pointee(catalogs)), metrics }
    }

    pub fn get(&self, name: &str) -> Option<Arc<ServedCatalog>> {
        self.catalogs.load().get(name).cloned()
    }

    /// The catalogs served now, by name.
    pub fn iter(&self) -> impl Iterator<Item = Arc<ServedCatalog>> {
        self.catalogs.load_full().values().cloned().collect::<Vec<_>>().into_iter()
    }

    pub fn names(&self) -> Vec<String> {
        self.catalogs.load().keys().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.catalogs.load().len()
    }

    pub fn is_empty(&self) -> bool {
        self.catalogs.load().is_empty()
    }

    /// Ready when every catalog has a snapshot to serve.
    pub fn all_loaded(&self) -> bool {
        self.catalogs.load().values().all(|c| c.snapshot().is_some())
    }

    /// Serve `catalog` under `name` from now on (replacing what was served under that name);
    /// returns false when the content is what is already served.
    pub fn publish(&self, name: &str, catalog: Catalog, load_duration: Duration) -> bool {
        let served = match self.get(name) {
            Some(served) => served,
            None => {
                let served = Arc::new(ServedCatalog::new(name.to_owned(), None, self.metrics.clone()));
                self.catalogs.rcu(|current| {
                    let mut next = BTreeMap::clone(current);
                    next.entry(name.to_owned()).or_insert_with(|| served.clone());
                    next
                });
                self.get(name).unwrap_or(served)
            }
        };
        served.install(CatalogSnapshot::new(catalog, load_duration))
    }

    /// Stop serving `name` (a deleted or unavailable ClusterCatalog): its URLs answer 404.
    /// Returns whether it was served.
    pub fn withdraw(&self, name: &str) -> bool {
        let mut removed = false;
        self.catalogs.rcu(|current| {
            let mut next = BTreeMap::clone(current);
            removed = next.remove(name).is_some();
            next
        });
        removed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use olm_registry_api::convert;

    fn demo_catalog() -> Catalog {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/catalog");
        let (catalog, problems) = crate::loader::load_catalog_dir(&dir).unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        catalog
    }

    #[test]
    fn cached_bundle_content_equals_the_uncached_conversion() {
        let catalog = demo_catalog();
        let cache = BundleContentCache::default();
        let mut synthesized = 0;
        let mut text_bytes = 0;
        for pkg in catalog.packages() {
            for bundle in pkg.bundles() {
                let first = cache.get_or_build(pkg, bundle);
                text_bytes += first.text_len();
                let held = cache.len();
                let second = cache.get_or_build(pkg, bundle);
                // The second call answers from the cache (nothing new is held) with the same content.
                assert_eq!(cache.len(), held, "{} rebuilt", bundle.name);
                assert_eq!(first, second, "{}", bundle.name);
                let (csv_json, objects) = convert::csv_json_and_objects(pkg, bundle);
                assert_eq!(first.csv_json, csv_json, "{}", bundle.name);
                assert_eq!(first.objects, objects, "{}", bundle.name);
                for channel in pkg.channels().iter().filter(|c| c.entry(&bundle.name).is_some()) {
                    let entry = channel.entry(&bundle.name);
                    assert_eq!(
                        convert::api_bundle_from(&channel.name, entry, bundle, &first),
                        convert::api_bundle(pkg, &channel.name, entry, bundle),
                        "{} in {}",
                        bundle.name,
                        channel.name
                    );
                }
                if bundle.csv().is_none() && !first.csv_json.is_empty() {
                    synthesized += 1;
                    // opm leaves an unset creation time out of the synthesized CSV.
                    assert!(!first.csv_json.contains("creationTimestamp"), "{}", first.csv_json);
                    let csv: serde_json::Value = serde_json::from_str(&first.csv_json).unwrap();
                    assert_eq!(csv["kind"], "ClusterServiceVersion");
                    assert_eq!(csv["metadata"]["name"], bundle.name.as_str());
                    assert_eq!(first.objects, vec![first.csv_json.clone()]);
                }
            }
        }
        assert!(synthesized >= 3, "the demo catalog has csv.metadata bundles");
        assert_eq!(cache.len(), catalog.bundles().count());
        // Synthesized CSVs are held once, not once more as the only object.
        assert!(cache.held_bytes() < text_bytes, "{} held for {text_bytes} of text", cache.held_bytes());
    }

    #[test]
    fn bundle_content_cache_stops_growing_at_its_bound() {
        let catalog = demo_catalog();
        let pkg = catalog.package("demo").unwrap();
        let bundle = pkg.bundles().iter().find(|b| b.csv().is_none()).unwrap();
        let cache = BundleContentCache::default();
        // Pretend the cache is nearly full: the next content does not fit.
        if let Ok(mut e) = cache.entries.lock() {
            e.1 = BundleContentCache::MAX_TOTAL_BYTES - 1;
        }
        let first = cache.get_or_build(pkg, bundle);
        let second = cache.get_or_build(pkg, bundle);
        assert!(cache.is_empty());
        assert_eq!(first, second);
    }

    #[test]
    fn response_cache_keeps_large_bodies_within_its_bounds() {
        let cache = ResponseCache::default();
        let large = bytes::Bytes::from(vec![b'x'; 1024 * 1024]);
        cache.put("/large", large.clone());
        assert_eq!(cache.get("/large"), Some(large));
        let too_large = bytes::Bytes::from(vec![b'x'; ResponseCache::MAX_ENTRY_BYTES + 1]);
        cache.put("/too-large", too_large);
        assert_eq!(cache.get("/too-large"), None);

        // Full: further answers are not kept, those kept stay.
        let small = ResponseCache::with_limit(1024 * 1024 + 10);
        small.put("/a", bytes::Bytes::from(vec![b'a'; 1024 * 1024]));
        small.put("/b", bytes::Bytes::from(vec![b'b'; 11]));
        assert!(small.get("/a").is_some());
        assert_eq!(small.get("/b"), None);

        assert_eq!(ResponseCache::for_catalog_of(1024).limit(), ResponseCache::MAX_TOTAL_BYTES);
        assert_eq!(ResponseCache::for_catalog_of(200 * 1024 * 1024).limit(), 100 * 1024 * 1024);
    }
}
