//! Reading the content of a catalog from where a CatalogSource points, into one in-memory
//! form: an `olm_catalog::Catalog` (packages, channels, bundles) plus the resolver's
//! [`olm_resolver::IndexedCatalog`], and the bundle manifests when an InstallPlan needs them.
//!
//! Sources:
//! - operator-registry gRPC (`api.Registry`: ours or `opm serve`): ListPackages + GetPackage +
//!   ListBundles for the listing, GetBundle for a bundle's CSV and objects;
//! - our catalog server's HTTP API (`<url>/api/v1/all`, FBC): everything in one request;
//! - a legacy ConfigMap (`packages`, `clusterServiceVersions`, `customResourceDefinitions`).
//!
//! [`location`] says where a CatalogSource's content is ([`Location`]) and how often to read it
//! again; [`read()`] reads it from there, whatever the location, and [`probe`] asks a catalog
//! server whether it still answers; [`cache`] holds what was read, shared by the controllers
//! that use it. Used by the controllers (`olm-controllers`) and the package server
//! (`olm-packageserver`).

pub mod cache;
pub mod configmap;
mod grpc;
mod http;
pub mod image;
pub mod location;
mod read;

pub use cache::{CatalogCache, CatalogState, ConnectionState};
pub use image::{ImageAccess, ImageFetch, PullSecrets, credentials_from_secrets, fetch_image, pull_secrets};
pub use location::Location;
pub use read::{Read, probe, read};

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use olm_catalog::{Catalog, PropertyKind};
use olm_resolver::{CatalogKey, IndexedCatalog};
use serde_json::{Value, json};

/// How long a catalog server may send nothing while it is read (a call's answer, the next
/// bundle of a listing) before it counts as failing. There is no limit on a whole listing: a
/// big catalog (the whole community catalog is 1.5 GB of FBC) streams for as long as it keeps
/// sending, and a server that stops is caught within this.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(60);
/// How long connecting may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Why catalog content could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Nothing answered at the address.
    #[error("cannot connect to catalog {address}: {message}")]
    Connect {
        /// `host:port` or URL.
        address: String,
        /// What the transport said.
        message: String,
    },
    /// The server answered a call with an error.
    #[error("catalog {address}: {call} failed: {message}")]
    Call {
        /// `host:port` or URL.
        address: String,
        /// The RPC or HTTP path.
        call: String,
        /// The status and message.
        message: String,
        /// Whether asking again can help.
        retryable: bool,
    },
    /// The answer could not be used as a catalog.
    #[error("catalog {address} sent content that is not a usable catalog: {message}")]
    Invalid {
        /// Where it came from.
        address: String,
        /// What is wrong.
        message: String,
    },
    /// The catalog has no such bundle.
    #[error("bundle {bundle} of package {package} is not in catalog {catalog}")]
    BundleNotFound {
        /// The catalog.
        catalog: String,
        /// Package name.
        package: String,
        /// Bundle (CSV) name.
        bundle: String,
    },
    /// A bundle or catalog image could not be pulled or read.
    #[error("{what}: {source}")]
    Image {
        /// Which image, for what.
        what: String,
        /// Why.
        source: olm_image::ImageError,
    },
    /// The server sent nothing for `timeout`.
    #[error("catalog {address} did not answer within {}s", timeout.as_secs())]
    Timeout {
        /// Where.
        address: String,
        /// The limit.
        timeout: Duration,
    },
    /// The ConfigMap of a ConfigMap catalog does not exist.
    #[error("ConfigMap {namespace}/{name} (spec.configMap) does not exist")]
    ConfigMapMissing {
        /// The catalog's namespace.
        namespace: String,
        /// `spec.configMap`.
        name: String,
    },
    /// The ConfigMap of a ConfigMap catalog holds no usable catalog.
    #[error("ConfigMap {namespace}/{name}: {message}")]
    ConfigMapContent {
        /// The catalog's namespace.
        namespace: String,
        /// `spec.configMap`.
        name: String,
        /// What is wrong, naming the key.
        message: String,
    },
    /// The catalog image still has the digest of the content read before, and that content is
    /// no longer held.
    #[error("the catalog image's content was lost; reading it again")]
    ContentLost,
}

impl ClientError {
    /// PascalCase category (Event reason, metric label).
    pub fn category(&self) -> &'static str {
        match self {
            ClientError::Connect { .. } => "CatalogUnreachable",
            ClientError::Call { .. } => "CatalogCallFailed",
            ClientError::Invalid { .. } => "InvalidCatalogContent",
            ClientError::BundleNotFound { .. } => "BundleNotFound",
            ClientError::Timeout { .. } => "CatalogTimeout",
            ClientError::Image { source, .. } => source.category(),
            ClientError::ConfigMapMissing { .. } => "ConfigMapError",
            ClientError::ConfigMapContent { .. } => "InvalidCatalogContent",
            ClientError::ContentLost => "CatalogUnreachable",
        }
    }

    /// Whether trying again later can succeed without anybody changing anything.
    pub fn retryable(&self) -> bool {
        match self {
            ClientError::Connect { .. } | ClientError::Timeout { .. } | ClientError::ContentLost => true,
            ClientError::Call { retryable, .. } => *retryable,
            ClientError::Image { source, .. } => source.retryable(),
            // The catalog may be fixed or updated; the caller decides how slowly to retry.
            ClientError::Invalid { .. }
            | ClientError::BundleNotFound { .. }
            | ClientError::ConfigMapMissing { .. }
            | ClientError::ConfigMapContent { .. } => false,
        }
    }
}

/// Manifests that came with a listing: bundle name → (CSV JSON, every object as JSON).
pub type InlineManifests = HashMap<String, (String, Vec<String>)>;

/// The install modes of bundles whose catalog lists their CSV beside them (a catalog server's
/// `ListBundles`: `csvJson`) rather than in their properties: the resolver needs them to keep a
/// first install off a bundle the namespace's OperatorGroup cannot run (eclipse-che's head
/// needs a package the catalog lacks; the bundle below it supports no AllNamespaces).
fn install_modes_from_listed_csvs(entries: &mut [olm_resolver::model::Entry], inline: &InlineManifests) {
    // Only `spec.installModes` is decoded; the rest of each CSV is skipped over.
    #[derive(serde::Deserialize)]
    struct Csv {
        spec: Option<Spec>,
    }
    #[derive(serde::Deserialize)]
    struct Spec {
        #[serde(rename = "installModes")]
        install_modes: Option<Value>,
    }
    for entry in entries.iter_mut().filter(|e| e.install_modes.is_none()) {
        let Some((csv_json, _)) = inline.get(&entry.name) else { continue };
        let Ok(Csv { spec: Some(Spec { install_modes }) }) = serde_json::from_str::<Csv>(csv_json) else { continue };
        entry.install_modes = olm_catalog::supported_install_modes(install_modes.as_ref());
    }
}

/// The manifests of one bundle, as an InstallPlan needs them.
#[derive(Clone, Debug, PartialEq)]
pub struct BundleContent {
    /// CSV name.
    pub name: String,
    /// Package.
    pub package: String,
    /// The bundle image (`bundlePath`), empty when unknown.
    pub bundle_path: String,
    /// The CSV as JSON text.
    pub csv_json: String,
    /// Every manifest of the bundle as JSON text (the CSV included).
    pub objects: Vec<String>,
    /// `{"properties": [...]}` for the `operatorframework.io/properties` annotation.
    pub properties_annotation: String,
}

/// The content of one catalog, shared by the controllers.
#[derive(Debug)]
pub struct CatalogContent {
    /// Which CatalogSource.
    pub key: CatalogKey,
    /// `spec.priority`.
    pub priority: i32,
    /// Packages, channels and bundles.
    pub catalog: Catalog,
    /// The resolver's view, indexed once for every resolution against this content.
    pub indexed: Arc<IndexedCatalog>,
    /// The catalog server the content was read from, when it was read from one: a gRPC
    /// server sends the bundles whose manifests the listing did not carry (GetBundle).
    pub location: Option<Location>,
    /// Manifests that came with the listing (CSV JSON and objects), by bundle name.
    pub inline: InlineManifests,
    /// Problems found while building the catalog that did not stop it.
    pub problems: Vec<String>,
    /// How bundle images (and this catalog's image) are pulled, when the catalog may name
    /// bundles by image only.
    pub images: Option<ImageAccess>,
    /// The digest of the catalog image this content was read from.
    pub image_digest: Option<String>,
}

impl CatalogContent {
    /// Build the content from catalog documents.
    pub fn from_documents(
        key: CatalogKey,
        priority: i32,
        documents: Vec<olm_catalog::Document>,
        location: Option<Location>,
        inline: InlineManifests,
    ) -> Result<CatalogContent, String> {
        Self::from_documents_tolerating(key, priority, documents, location, inline, &[])
    }

    /// [`CatalogContent::from_documents`], with the problems whose codes are in `tolerated`
    /// not counted: a legacy catalog (a ConfigMap) is held to what upstream's legacy registry
    /// checks, not to opm's file-based catalog validation.
    pub fn from_documents_tolerating(
        key: CatalogKey,
        priority: i32,
        documents: Vec<olm_catalog::Document>,
        location: Option<Location>,
        inline: InlineManifests,
        tolerated: &[&str],
    ) -> Result<CatalogContent, String> {
        let (catalog, mut problems) = Catalog::build(documents);
        problems.retain(|p| !tolerated.contains(&p.code));
        if matches!(location, Some(Location::Grpc(_))) {
            // A catalog server's listing need not carry a bundle's manifests: GetBundle sends
            // them when a plan needs them (a catalog rendered from local bundle directories has
            // no images at all), so a bundle with neither image nor manifests here is no problem.
            problems.retain(|p| p.code != "MissingImage");
        }
        // One bad package hurts only itself: it is left out, and said so.
        let isolated = catalog.isolate(problems);
        let catalog = isolated.catalog;
        // Why each package was left out (its first problems): said on the CatalogSource, and to
        // a Subscription to it.
        let left_out: BTreeMap<String, String> = isolated
            .left_out
            .iter()
            .map(|l| (l.package.clone(), l.problems.iter().take(3).map(ToString::to_string).collect::<Vec<_>>().join("; ")))
            .collect();
        let mut problems: Vec<String> = left_out.iter().map(|(package, why)| left_out_problem(package, why)).collect();
        problems.extend(
            isolated.unattributed.iter().map(|p| if p.warning { format!("warning: {p}") } else { p.to_string() }),
        );
        if catalog.packages().is_empty() && !problems.is_empty() {
            return Err(problems.into_iter().take(5).collect::<Vec<_>>().join("; "));
        }
        let mut snapshot = olm_resolver::adapter::snapshot(&catalog, key.clone(), priority);
        snapshot.left_out = left_out;
        install_modes_from_listed_csvs(&mut snapshot.entries, &inline);
        let indexed = Arc::new(IndexedCatalog::new(snapshot));
        Ok(CatalogContent {
            key,
            priority,
            catalog,
            indexed,
            location,
            inline,
            problems,
            images: None,
            image_digest: None,
        })
    }

    /// Packages the catalog's server left out for their problems (package → why), as it says
    /// beside its listing: said like those left out here, unless the listing has them.
    pub fn add_left_out(&mut self, reported: BTreeMap<String, String>) {
        for (package, why) in reported {
            if self.catalog.package(&package).is_some() {
                continue;
            }
            self.problems.push(left_out_problem(&package, &why));
            if let Some(indexed) = Arc::get_mut(&mut self.indexed) {
                indexed.left_out.insert(package, why);
            }
        }
    }

    /// Number of packages and bundles.
    pub fn counts(&self) -> (usize, usize) {
        let bundles = self.catalog.packages().iter().map(|p| p.bundles().len()).sum();
        (self.catalog.packages().len(), bundles)
    }

    /// The manifests of `bundle` (of `package`, as listed in `channel`): from memory when the
    /// listing carried them, else from the catalog server. A pulled bundle image must hold the
    /// CSV of that name: OLM v0 tracks an install by it (`currentCSV`).
    pub async fn bundle(&self, package: &str, channel: &str, bundle: &str) -> Result<BundleContent, ClientError> {
        self.bundle_named(package, channel, bundle, true).await
    }

    /// [`CatalogContent::bundle`] for OLM v1, which tracks an install by the catalog's bundle
    /// name and reads nothing from the CSV's name: a bundle image whose CSV is named otherwise
    /// (upstream's own e2e catalogs name `test.1.2.0` a bundle whose CSV is `test.v1.2.0`) is
    /// that bundle.
    pub async fn extension_bundle(&self, package: &str, channel: &str, bundle: &str) -> Result<BundleContent, ClientError> {
        self.bundle_named(package, channel, bundle, false).await
    }

    async fn bundle_named(&self, package: &str, channel: &str, bundle: &str, same_csv_name: bool) -> Result<BundleContent, ClientError> {
        let not_found = || ClientError::BundleNotFound {
            catalog: self.key.to_string(),
            package: package.to_owned(),
            bundle: bundle.to_owned(),
        };
        let pkg = self.catalog.package(package).ok_or_else(not_found)?;
        let model = pkg.bundle(bundle).ok_or_else(not_found)?;
        let properties_annotation = properties_annotation(model);
        let (csv_json, objects) = if let Some((csv, objects)) = self.inline.get(bundle) {
            (csv.clone(), objects.clone())
        } else if model.csv().is_some() {
            // The catalog carries the manifests (`olm.bundle.object`).
            olm_registry_api::convert::csv_json_and_objects(pkg, model)
        } else {
            // A catalog server has the manifests when its catalog carries them (GetBundle);
            // when it names the bundle by image only, as published catalogs do, pull it.
            let fetched = match &self.location {
                Some(Location::Grpc(address)) => Some(grpc::get_bundle(address, package, channel, bundle).await?),
                _ => None,
            };
            match fetched {
                Some(fetched) if carries_manifests(&fetched) || self.images.is_none() || model.image.is_empty() => {
                    (fetched.csv_json, fetched.object)
                }
                _ => match self.images.as_ref().filter(|_| !model.image.is_empty()) {
                    Some(images) => self.pull_bundle(images, model, package, bundle, same_csv_name).await?,
                    None => olm_registry_api::convert::csv_json_and_objects(pkg, model),
                },
            }
        };
        if csv_json.is_empty() {
            return Err(ClientError::Invalid {
                address: self.key.to_string(),
                message: format!("bundle {bundle} of package {package} has no ClusterServiceVersion"),
            });
        }
        Ok(BundleContent {
            name: bundle.to_owned(),
            package: package.to_owned(),
            bundle_path: model.image.clone(),
            csv_json,
            objects,
            properties_annotation,
        })
    }
}

/// Whether a GetBundle answer carries the bundle's manifests rather than only its CSV. For a
/// bundle named by image with only `olm.csv.metadata` in the catalog, catalog servers (opm and
/// ours) answer with a CSV synthesized from that metadata as the one object: the CRDs and
/// everything else are in the image. Upstream unpacks the image whenever a bundle has one; we
/// use the server's answer when it holds more than the CSV, and pull otherwise.
fn carries_manifests(fetched: &olm_registry_api::pb::Bundle) -> bool {
    fetched.object.len() > 1
}

impl CatalogContent {
    /// The manifests of the bundle image `model` names.
    async fn pull_bundle(
        &self,
        images: &ImageAccess,
        model: &olm_catalog::Bundle,
        package: &str,
        bundle: &str,
        same_csv_name: bool,
    ) -> Result<(String, Vec<String>), ClientError> {
        let pulled = images.client.bundle(&model.image, &images.creds).await.map_err(|source| ClientError::Image {
            what: format!("bundle {bundle} of package {package} (catalog {})", self.key),
            source,
        })?;
        if same_csv_name && pulled.name != bundle {
            return Err(ClientError::Invalid {
                address: self.key.to_string(),
                message: format!(
                    "bundle image {} holds CSV {}, but the catalog lists it as bundle {bundle}: fix the catalog's image reference",
                    model.image, pulled.name
                ),
            });
        }
        Ok((pulled.csv_json, pulled.objects))
    }
}

/// The bundle's properties, without the manifests, as upstream writes them on the CSV.
fn properties_annotation(bundle: &olm_catalog::Bundle) -> String {
    let properties: Vec<Value> = bundle
        .properties
        .iter()
        .filter(|p| !matches!(p.kind, PropertyKind::BundleObject | PropertyKind::CsvMetadata))
        .map(|p| json!({"type": p.type_name, "value": p.value()}))
        .collect();
    json!({ "properties": properties }).to_string()
}

/// A catalog problem: `package` was left out, and why.
fn left_out_problem(package: &str, why: &str) -> String {
    format!("package {package} left out: {why}")
}

/// `work`, one answer of the catalog server at `address`, unless it takes [`FETCH_TIMEOUT`].
async fn answer<T>(address: &str, work: impl std::future::Future<Output = Result<T, ClientError>>) -> Result<T, ClientError> {
    answer_within(FETCH_TIMEOUT, address, work).await
}

/// [`answer`] with another limit (tests take seconds, not minutes).
async fn answer_within<T>(limit: Duration, address: &str, work: impl std::future::Future<Output = Result<T, ClientError>>) -> Result<T, ClientError> {
    match tokio::time::timeout(limit, work).await {
        Ok(result) => result,
        Err(_) => Err(ClientError::Timeout { address: address.to_owned(), timeout: limit }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_package_with_problems_is_left_out_and_said_so() {
        let docs: Vec<olm_catalog::Document> = [
            json!({"schema": "olm.package", "name": "good", "defaultChannel": "stable"}),
            json!({"schema": "olm.channel", "package": "good", "name": "stable", "entries": [{"name": "good.v1"}]}),
            json!({"schema": "olm.bundle", "name": "good.v1", "package": "good", "image": "r/good:1",
                   "properties": [{"type": "olm.package", "value": {"packageName": "good", "version": "1.0.0"}}]}),
            json!({"schema": "olm.package", "name": "bad", "defaultChannel": "missing"}),
        ]
        .into_iter()
        .map(|value| olm_catalog::Document { value, source: None })
        .collect();
        let content = CatalogContent::from_documents(CatalogKey::new("c", "olm"), 0, docs.clone(), None, HashMap::new()).expect("served");
        let names: Vec<&str> = content.catalog.packages().iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["good"]);
        assert!(content.problems[0].starts_with("package bad left out: "), "{:?}", content.problems);
        // What a catalog server says it left out is said the same way.
        let mut told = CatalogContent::from_documents(CatalogKey::new("c", "olm"), 0, docs, None, HashMap::new()).expect("served");
        told.add_left_out(BTreeMap::from([("server-side".to_owned(), "icon is not base64".to_owned()), ("good".to_owned(), "stale".to_owned())]));
        assert!(told.problems.contains(&"package server-side left out: icon is not base64".to_owned()), "{:?}", told.problems);
        assert!(!told.problems.iter().any(|p| p.contains("package good")), "a package in the listing is not left out");
        assert_eq!(told.indexed.left_out.get("server-side").map(String::as_str), Some("icon is not base64"));
        assert!(content.problems[0].contains("missing"), "{:?}", content.problems);
        // A Subscription to the left-out package is told why, not that it does not exist.
        let catalogs = olm_resolver::Catalogs::from_indexed(vec![content.indexed.clone()]);
        let mut request = olm_resolver::Request::new("olm");
        request.subscriptions.push(olm_resolver::Subscription::new("bad", CatalogKey::new("c", "olm")));
        let resolution = olm_resolver::resolve(&catalogs, &request);
        let message = &resolution.errors[0].message;
        assert!(message.contains("was left out of the catalog for its problems") && message.contains("missing"), "{message}");
    }

    #[test]
    fn a_grpc_listing_needs_no_image_or_manifests_for_a_bundle() {
        // What `olm catalog serve` lists for a catalog rendered from local bundle directories.
        let docs = || -> Vec<olm_catalog::Document> {
            [
                json!({"schema": "olm.package", "name": "local", "defaultChannel": "stable"}),
                json!({"schema": "olm.channel", "package": "local", "name": "stable", "entries": [{"name": "local.v1"}]}),
                json!({"schema": "olm.bundle", "name": "local.v1", "package": "local",
                       "properties": [{"type": "olm.package", "value": {"packageName": "local", "version": "1.0.0"}}]}),
            ]
            .into_iter()
            .map(|value| olm_catalog::Document { value, source: None })
            .collect()
        };
        let grpc = Location::Grpc("127.0.0.1:50051".into());
        let content = CatalogContent::from_documents(CatalogKey::new("c", "olm"), 0, docs(), Some(grpc), HashMap::new()).expect("served");
        assert_eq!(content.counts(), (1, 1));
        assert!(content.problems.is_empty(), "{:?}", content.problems);
        // Read from anywhere else, such a bundle could never be installed: its package is left out.
        let err = CatalogContent::from_documents(CatalogKey::new("c", "olm"), 0, docs(), None, HashMap::new()).map(|_| ()).unwrap_err();
        assert!(err.contains("package local left out") && err.contains("image"), "{err}");
    }

    #[test]
    fn a_first_install_from_a_grpc_listing_takes_no_bundle_the_group_cannot_run() {
        // eclipse-che's shape as a catalog server lists it: install modes only in the CSV
        // sent beside each bundle; the head needs a package the catalog lacks, the bundle it
        // replaces supports OwnNamespace only.
        let bundle = |name: &str, version: &str| {
            json!({"schema": "olm.bundle", "name": name, "package": "che", "image": format!("r/che:{version}"),
                   "properties": [{"type": "olm.package", "value": {"packageName": "che", "version": version}}]})
        };
        let mut head = bundle("che.v2", "2.0.0");
        head["properties"].as_array_mut().expect("list").push(json!({"type": "olm.package.required", "value": {"packageName": "dw", "versionRange": ">=0.1.0"}}));
        let docs: Vec<olm_catalog::Document> = [
            json!({"schema": "olm.package", "name": "che", "defaultChannel": "stable"}),
            json!({"schema": "olm.channel", "package": "che", "name": "stable", "entries": [{"name": "che.v1"}, {"name": "che.v2", "replaces": "che.v1"}]}),
            bundle("che.v1", "1.0.0"),
            head,
        ]
        .into_iter()
        .map(|value| olm_catalog::Document { value, source: None })
        .collect();
        let csv = |modes: Value| json!({"kind": "ClusterServiceVersion", "spec": {"installModes": modes}}).to_string();
        let inline: InlineManifests = HashMap::from([
            ("che.v1".to_owned(), (csv(json!([{"type": "OwnNamespace", "supported": true}, {"type": "AllNamespaces", "supported": false}])), vec![])),
            ("che.v2".to_owned(), (csv(json!([{"type": "AllNamespaces", "supported": true}])), vec![])),
        ]);
        let grpc = Location::Grpc("127.0.0.1:50051".into());
        let content = CatalogContent::from_documents(CatalogKey::new("c", "olm"), 0, docs, Some(grpc), inline).expect("served");
        let catalogs = olm_resolver::Catalogs::from_indexed(vec![content.indexed.clone()]);
        let mut request = olm_resolver::Request::new("team");
        request.install_modes = vec!["AllNamespaces".to_owned()];
        let mut sub = olm_resolver::Subscription::new("che", CatalogKey::new("c", "olm"));
        sub.channel = Some("stable".to_owned());
        request.subscriptions.push(sub);
        let resolution = olm_resolver::resolve(&catalogs, &request);
        assert!(resolution.bundles.is_empty(), "nothing is installed: {:?}", resolution.bundles);
        let message = &resolution.errors.first().expect("a resolution error").message;
        assert!(message.contains("dw"), "the error names the missing package: {message}");
    }

    #[test]
    fn what_olm_v1_does_without_can_be_tolerated() {
        // The shape of upstream's own OLM v1 e2e catalogs: no defaultChannel, two heads.
        let docs = || -> Vec<olm_catalog::Document> {
            let bundle = |v: &str| json!({"schema": "olm.bundle", "name": format!("t.{v}"), "package": "t", "image": format!("r/t:{v}"),
                "properties": [{"type": "olm.package", "value": {"packageName": "t", "version": v}}]});
            [
                json!({"schema": "olm.package", "name": "t"}),
                json!({"schema": "olm.channel", "package": "t", "name": "beta", "entries": [{"name": "t.1.0.0"}, {"name": "t.1.0.4"}, {"name": "t.1.2.0", "replaces": "t.1.0.0"}]}),
                bundle("1.0.0"), bundle("1.0.4"), bundle("1.2.0"),
            ]
            .into_iter()
            .map(|value| olm_catalog::Document { value, source: None })
            .collect()
        };
        let strict = CatalogContent::from_documents(CatalogKey::new("c", ""), 0, docs(), None, HashMap::new()).map(|_| ()).unwrap_err();
        assert!(strict.contains("defaultChannel") || strict.contains("heads"), "{strict}");
        let tolerated = ["MissingDefaultChannel", "MultipleHeads", "StrandedEntries"];
        let served = CatalogContent::from_documents_tolerating(CatalogKey::new("c", ""), 0, docs(), None, HashMap::new(), &tolerated).expect("served");
        assert_eq!(served.counts(), (1, 3));
    }
}
