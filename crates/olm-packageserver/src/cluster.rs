//! The Kubernetes side of the package server: reads every CatalogSource's content into the
//! [`Store`], authorizes requests with SubjectAccessReviews, reads the front-proxy CA from
//! `kube-system/extension-apiserver-authentication`, and obtains the serving certificate.
//!
//! The server writes nothing to the cluster except, in [`ServingSource::Secret`] mode, its
//! serving-certificate Secret (created once, atomically: every replica then uses the same one)
//! and the APIService's `caBundle` (the same value from every replica). Both writes are
//! idempotent, so several replicas need no leader election.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use k8s_openapi::ByteString;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use olm_api::packages::v1::{GROUP, PLURAL};
use olm_api::v1alpha1::catalog_source::CatalogSource;
use olm_catalog_client::location::{self, Location};
use olm_catalog_client::ImageAccess;
use olm_image::ImageClient;

use crate::error::Error;
use crate::http::{Attributes, Authentication, AuthorizeFuture, Authorizer, Identity};
use crate::manifest::{self, CatalogInfo};
use crate::serve::{HttpsServer, RequestHeaderConfig, ServingCert};
use crate::store::Store;

/// How often the known CatalogSources are checked for a content read that is due (new,
/// changed and deleted catalogs are taken at once: the CatalogSources are watched).
pub const CATALOG_RESYNC_INTERVAL: Duration = Duration::from_secs(5);
/// How often a healthy catalog's content is read again (catalog servers reload on edits).
pub const DEFAULT_REFRESH: Duration = Duration::from_secs(300);
/// Catalog reads at the same time.
const PARALLEL_READS: usize = 4;

/// Where the serving certificate comes from.
#[derive(Clone, Debug)]
pub enum ServingSource {
    /// PEM files (e.g. mounted from a Secret managed by cert-manager).
    Files {
        /// Certificate chain.
        cert: std::path::PathBuf,
        /// Private key.
        key: std::path::PathBuf,
    },
    /// A `kubernetes.io/tls` Secret holding `tls.crt`, `tls.key` and `ca.crt`, created with a
    /// self-signed CA when missing; the CA is then written to the APIService's `caBundle`.
    Secret {
        /// Secret namespace.
        namespace: String,
        /// Secret name.
        name: String,
        /// DNS names of the certificate (`<service>.<namespace>.svc`).
        dns_names: Vec<String>,
        /// The APIService whose caBundle to keep in sync, if any.
        apiservice: Option<String>,
    },
}

/// How requests are authorized.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Authorization {
    /// SubjectAccessReview per request (cached briefly), as upstream's delegated authorizer.
    SubjectAccessReview,
    /// Every authenticated request is allowed.
    AllowAuthenticated,
}

/// Everything [`run`] needs.
#[derive(Clone, Debug)]
pub struct Config {
    /// HTTPS listen address.
    pub bind: SocketAddr,
    /// The namespace whose catalogs every namespace sees.
    pub global_namespace: String,
    /// The serving certificate.
    pub serving: ServingSource,
    /// Authorization mode.
    pub authorization: Authorization,
    /// How often healthy catalogs are read again.
    pub refresh: Duration,
    /// Pulls catalog images (and bundle images for head CSVs a catalog does not carry).
    pub images: Arc<ImageClient>,
}

/// Read `kube-system/extension-apiserver-authentication` for the front-proxy CA and names.
pub async fn requestheader_config(client: &Client) -> Result<RequestHeaderConfig, Error> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    let cm = api
        .get("extension-apiserver-authentication")
        .await
        .map_err(|e| Error::kube("reading kube-system/extension-apiserver-authentication", &e))?;
    let data = cm.data.unwrap_or_default();
    let ca = data.get("requestheader-client-ca-file").cloned().unwrap_or_default();
    if ca.trim().is_empty() {
        return Err(Error::Config(
            "kube-system/extension-apiserver-authentication has no requestheader-client-ca-file: start kube-apiserver with --requestheader-client-ca-file (the aggregation layer) so it can proxy to the package server".into(),
        ));
    }
    let allowed_names: Vec<String> = data
        .get("requestheader-allowed-names")
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or_default();
    Ok(RequestHeaderConfig { client_ca_pem: ca, allowed_names })
}

/// Load or create the serving certificate.
pub async fn serving_cert(client: &Client, source: &ServingSource) -> Result<ServingCert, Error> {
    match source {
        ServingSource::Files { cert, key } => {
            let read = |p: &std::path::Path| {
                std::fs::read_to_string(p).map_err(|e| Error::Tls(format!("cannot read {}: {e}", p.display())))
            };
            Ok(ServingCert { cert_pem: read(cert)?, key_pem: read(key)? })
        }
        ServingSource::Secret { namespace, name, dns_names, apiservice } => {
            let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
            let what = format!("serving certificate Secret {namespace}/{name}");
            let existing = api.get_opt(name).await.map_err(|e| Error::kube(format!("reading {what}"), &e))?;
            let secret = match existing {
                Some(s) => s,
                None => {
                    let (ca, cert) = crate::serve::self_signed(dns_names)?;
                    let secret = Secret {
                        metadata: kube::api::ObjectMeta {
                            name: Some(name.clone()),
                            namespace: Some(namespace.clone()),
                            labels: Some(BTreeMap::from([("app.kubernetes.io/part-of".into(), "olm".into())])),
                            ..Default::default()
                        },
                        type_: Some("kubernetes.io/tls".into()),
                        data: Some(BTreeMap::from([
                            ("tls.crt".into(), ByteString(cert.cert_pem.into_bytes())),
                            ("tls.key".into(), ByteString(cert.key_pem.into_bytes())),
                            ("ca.crt".into(), ByteString(ca.into_bytes())),
                        ])),
                        ..Default::default()
                    };
                    match api.create(&PostParams::default(), &secret).await {
                        Ok(s) => s,
                        // Another replica won the race: use its certificate.
                        Err(kube::Error::Api(status)) if status.code == 409 => {
                            api.get(name).await.map_err(|e| Error::kube(format!("reading {what}"), &e))?
                        }
                        Err(e) => return Err(Error::kube(format!("creating {what}"), &e)),
                    }
                }
            };
            let data = secret.data.unwrap_or_default();
            let field = |key: &str| {
                data.get(key)
                    .map(|b| String::from_utf8_lossy(&b.0).into_owned())
                    .filter(|s| !s.trim().is_empty())
                    .ok_or_else(|| Error::Tls(format!("{what} has no {key}; delete it to have a new one generated")))
            };
            let cert = ServingCert { cert_pem: field("tls.crt")?, key_pem: field("tls.key")? };
            if let Some(apiservice) = apiservice {
                let ca = field("ca.crt")?;
                let api: Api<APIService> = Api::all(client.clone());
                let patch = serde_json::json!({"spec": {"caBundle": base64::engine::general_purpose::STANDARD.encode(ca)}});
                api.patch(apiservice, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(|e| Error::kube(format!("setting caBundle of APIService {apiservice}"), &e))?;
            }
            Ok(cert)
        }
    }
}

/// Asks kube-apiserver (SubjectAccessReview) and remembers answers for a few seconds.
pub struct SarAuthorizer {
    client: Client,
    cache: Mutex<HashMap<(Identity, Attributes), (bool, Instant)>>,
}

impl SarAuthorizer {
    /// A new authorizer.
    pub fn new(client: Client) -> SarAuthorizer {
        SarAuthorizer { client, cache: Mutex::default() }
    }

    async fn review(&self, identity: &Identity, attributes: &Attributes) -> Result<bool, String> {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(identity.user.clone()),
                groups: Some(identity.groups.clone()),
                extra: (!identity.extra.is_empty())
                    .then(|| identity.extra.iter().map(|(k, v)| (k.clone(), v.clone())).collect()),
                resource_attributes: Some(ResourceAttributes {
                    group: Some(GROUP.into()),
                    version: Some("v1".into()),
                    resource: Some(PLURAL.into()),
                    subresource: (!attributes.subresource.is_empty()).then(|| attributes.subresource.clone()),
                    verb: Some(attributes.verb.into()),
                    namespace: (!attributes.namespace.is_empty()).then(|| attributes.namespace.clone()),
                    name: (!attributes.name.is_empty()).then(|| attributes.name.clone()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let answer = api.create(&PostParams::default(), &review).await.map_err(|e| e.to_string())?;
        Ok(answer.status.is_some_and(|s| s.allowed && !s.denied.unwrap_or(false)))
    }
}

impl Authorizer for SarAuthorizer {
    fn authorize<'a>(&'a self, identity: &'a Identity, attributes: &'a Attributes) -> AuthorizeFuture<'a> {
        Box::pin(async move {
            let key = (identity.clone(), attributes.clone());
            let ttl = Duration::from_secs(10);
            if let Ok(cache) = self.cache.lock()
                && let Some((allowed, at)) = cache.get(&key)
                && at.elapsed() < ttl
            {
                return Ok(*allowed);
            }
            let allowed = self.review(identity, attributes).await?;
            if let Ok(mut cache) = self.cache.lock() {
                if cache.len() > 10_000 {
                    cache.retain(|_, (_, at)| at.elapsed() < ttl);
                }
                cache.insert(key, (allowed, Instant::now()));
            }
            Ok(allowed)
        })
    }
}

impl std::hash::Hash for Identity {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.user.hash(state);
        self.groups.hash(state);
        let mut extra: Vec<_> = self.extra.iter().collect();
        extra.sort();
        extra.hash(state);
    }
}

fn catalog_info(catalog: &CatalogSource) -> CatalogInfo {
    CatalogInfo {
        name: catalog.metadata.name.clone().unwrap_or_default(),
        namespace: catalog.metadata.namespace.clone().unwrap_or_default(),
        display_name: catalog.spec.display_name.clone().unwrap_or_default(),
        publisher: catalog.spec.publisher.clone().unwrap_or_default(),
        labels: catalog.metadata.labels.clone().unwrap_or_default(),
        created: catalog.metadata.creation_timestamp.clone(),
    }
}

/// Read one catalog into the store, with the CatalogSource controller's reader
/// (`olm_catalog_client::read`). What is the package server's own: the ConfigMap of a
/// ConfigMap catalog is read here, when the catalog is; a pull secret that cannot be read
/// means pulling anonymously, not failing, so the API keeps serving; no content is kept
/// between reads (each reads a catalog image again, through the image cache).
async fn read_catalog(client: &Client, store: &Store, images: &Arc<ImageClient>, catalog: &CatalogSource) {
    let info = catalog_info(catalog);
    let key = location::key(catalog);
    let started = Instant::now();
    let secrets = match olm_catalog_client::pull_secrets(client, catalog).await {
        Ok(secrets) => secrets,
        Err((what, err)) => {
            tracing::warn!(catalog = %key, error = %err, "{what}: pulling images anonymously");
            olm_catalog_client::PullSecrets::default()
        }
    };
    let access = ImageAccess { client: images.clone(), creds: secrets.creds };
    let content = match Location::of(catalog) {
        Err(message) => Err(message),
        Ok(location) => {
            let configmap = match &location {
                Location::ConfigMap(name) => {
                    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &info.namespace);
                    api.get(name)
                        .await
                        .map(|cm| Some(cm.data.unwrap_or_default()))
                        .map_err(|e| format!("cannot read ConfigMap {}/{name}: {e}", info.namespace))
                }
                _ => Ok(None),
            };
            match configmap {
                Err(message) => Err(message),
                Ok(data) => olm_catalog_client::read(catalog, &location, &access, data.as_ref(), None)
                    .await
                    .map(olm_catalog_client::Read::into_content)
                    .map_err(|e| e.to_string()),
            }
        }
    };
    match content {
        Ok(content) => {
            let head_csvs = head_csvs(&content).await;
            let (packages, problems) = manifest::build(&info, &content.catalog, &head_csvs);
            for problem in &problems {
                tracing::warn!(catalog = %format!("{}/{}", info.namespace, info.name), "{problem}");
            }
            tracing::info!(
                catalog = %format!("{}/{}", info.namespace, info.name),
                packages = packages.len(),
                ms = started.elapsed().as_millis() as u64,
                "catalog read"
            );
            store.set_packages(info, packages);
        }
        Err(message) => {
            tracing::warn!(catalog = %format!("{}/{}", info.namespace, info.name), error = %message, "catalog cannot be read");
            store.set_error(info, message);
        }
    }
}

/// CSVs of channel heads the listing did not carry, fetched one by one (GetBundle), as
/// upstream's GetBundleForChannel per channel. Failures leave the channel out (logged by build).
async fn head_csvs(content: &olm_catalog_client::CatalogContent) -> HashMap<String, serde_json::Value> {
    use futures::StreamExt as _;
    let missing = manifest::heads_without_csv(&content.catalog);
    futures::stream::iter(missing)
        .map(|(package, channel, bundle)| async move {
            let fetched = content.bundle(&package, &channel, &bundle).await;
            match fetched {
                Ok(b) => serde_json::from_str::<serde_json::Value>(&b.csv_json).ok().map(|csv| (bundle, csv)),
                Err(err) => {
                    tracing::debug!(%package, %channel, %bundle, error = %err, "cannot fetch head CSV");
                    None
                }
            }
        })
        .buffer_unordered(16)
        .filter_map(|x| async move { x })
        .collect()
        .await
}

#[derive(Default)]
struct Tracked {
    fingerprint: String,
    next_read: Option<Instant>,
    failures: u32,
    reading: bool,
}

fn fingerprint(catalog: &CatalogSource) -> String {
    format!(
        "{}|{:?}|{:?}",
        catalog.metadata.uid.clone().unwrap_or_default(),
        catalog.metadata.generation,
        catalog.status.as_ref().and_then(|s| s.config_map_reference.as_ref()).and_then(|c| c.resource_version.clone()),
    )
}

/// Keep the store in step with the cluster's CatalogSources until `shutdown` resolves.
pub async fn sync_catalogs(
    client: Client,
    store: Arc<Store>,
    images: Arc<ImageClient>,
    refresh: Duration,
    shutdown: impl std::future::Future<Output = ()>,
) {
    use futures::StreamExt as _;
    use kube::runtime::WatchStreamExt as _;
    let api: Api<CatalogSource> = Api::all(client.clone());
    let tracked: Arc<Mutex<HashMap<(String, String), Tracked>>> = Arc::default();
    let permits = Arc::new(tokio::sync::Semaphore::new(PARALLEL_READS));
    // Watched, as upstream's package server does: a catalog added or removed shows in the
    // PackageManifest API at once (`kubectl operator catalog add` then `list-available`).
    let (catalogs, writer) = kube::runtime::reflector::store::<CatalogSource>();
    let changed = Arc::new(tokio::sync::Notify::new());
    let watch = {
        let changed = changed.clone();
        kube::runtime::watcher(api, kube::runtime::watcher::Config::default())
            .default_backoff()
            .reflect(writer)
            .for_each(move |event| {
                match event {
                    Ok(kube::runtime::watcher::Event::Init | kube::runtime::watcher::Event::InitApply(_)) => {}
                    Ok(_) => changed.notify_one(),
                    Err(err) => tracing::warn!(error = %err, "watching CatalogSources failed; serving what is known, retrying"),
                }
                futures::future::ready(())
            })
    };
    let watch = tokio::spawn(watch);
    tokio::pin!(shutdown);
    tokio::select! {
        () = &mut shutdown => {
            watch.abort();
            return;
        }
        _ = catalogs.wait_until_ready() => {}
    }
    loop {
        let mut seen = std::collections::HashSet::new();
        for catalog in catalogs.state() {
            let info = catalog_info(&catalog);
            let key = (info.namespace.clone(), info.name.clone());
            seen.insert(key.clone());
            let print = fingerprint(&catalog);
            let due = {
                let Ok(mut tracked) = tracked.lock() else { break };
                let entry = tracked.entry(key.clone()).or_default();
                let changed = entry.fingerprint != print;
                let due = !entry.reading && (changed || entry.next_read.is_none_or(|t| Instant::now() >= t));
                if due {
                    entry.fingerprint = print;
                    entry.reading = true;
                }
                due
            };
            if store.entry(&key.0, &key.1).is_none() {
                store.set_pending(info);
            }
            if !due {
                continue;
            }
            let client = client.clone();
            let store = store.clone();
            let images = images.clone();
            let tracked = tracked.clone();
            let permits = permits.clone();
            tokio::spawn(async move {
                let _permit = permits.acquire_owned().await;
                read_catalog(&client, &store, &images, &catalog).await;
                let failed = store.entry(&key.0, &key.1).is_some_and(|e| e.error.is_some());
                let interval = location::poll_interval(&catalog).0.min(refresh);
                if let Ok(mut tracked) = tracked.lock()
                    && let Some(entry) = tracked.get_mut(&key)
                {
                    entry.reading = false;
                    entry.failures = if failed { entry.failures + 1 } else { 0 };
                    let wait = if failed { location::retry_delay(entry.failures) } else { interval };
                    entry.next_read = Some(Instant::now() + wait);
                }
            });
        }
        for (namespace, name) in store.keys() {
            if !seen.contains(&(namespace.clone(), name.clone())) {
                store.remove(&namespace, &name);
                if let Ok(mut tracked) = tracked.lock() {
                    tracked.remove(&(namespace, name));
                }
            }
        }
        store.mark_synced();
        tokio::select! {
            () = &mut shutdown => {
                watch.abort();
                return;
            }
            () = tokio::time::sleep(CATALOG_RESYNC_INTERVAL) => {}
            () = changed.notified() => {}
        }
    }
}

/// Run the package server until `shutdown` resolves.
pub async fn run(client: Client, config: Config, shutdown: impl std::future::Future<Output = ()> + Send + 'static) -> Result<(), Error> {
    let requestheader = requestheader_config(&client).await?;
    let serving = serving_cert(&client, &config.serving).await?;
    let store = Arc::new(Store::new(config.global_namespace.clone()));
    let authorizer: Arc<dyn Authorizer> = match config.authorization {
        Authorization::SubjectAccessReview => Arc::new(SarAuthorizer::new(client.clone())),
        Authorization::AllowAuthenticated => Arc::new(crate::http::AllowAll),
    };
    let router = crate::http::router(store.clone(), authorizer, Authentication::RequestHeader);
    let server = HttpsServer::bind(config.bind, &serving, Some(&requestheader)).await?;
    if let Some(addr) = server.local_addr() {
        tracing::info!(%addr, global_namespace = %config.global_namespace, "package server listening (HTTPS)");
    }
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut sync_stop = stop_rx.clone();
    let sync = tokio::spawn(sync_catalogs(client, store, config.images.clone(), config.refresh, async move {
        let _ = sync_stop.wait_for(|stop| *stop).await;
    }));
    let mut serve_stop = stop_rx;
    let serving_task = tokio::spawn(server.serve(router, async move {
        let _ = serve_stop.wait_for(|stop| *stop).await;
    }));
    shutdown.await;
    let _ = stop_tx.send(true);
    let _ = sync.await;
    let _ = serving_task.await;
    Ok(())
}
