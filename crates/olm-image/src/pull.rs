//! Pulling an image into the cache: the manifest (from an index, linux/amd64 or else the
//! first entry — bundles and catalogs are content, not binaries), the config's labels, and
//! every layer, each checked against its descriptor's size and the limits before a byte is
//! read, and against its digest after (oci-client verifies it). Concurrent pulls of one image
//! wait for each other; transient failures are retried a few times within the timeout.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::manifest::{ImageIndexEntry, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use tokio::io::AsyncWrite;

use crate::auth::Credentials;
use crate::hosts::RegistryConfig;
use crate::store::{BlobStore, ImageRecord};
use crate::unpack::{LayerFile, UnpackLimits, UnpackStats};
use crate::ImageError;

/// Bounds of what one image may cost.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Layers per image.
    pub max_layers: usize,
    /// Bytes of one layer as stored (compressed).
    pub max_layer_bytes: u64,
    /// Bytes of all layers as stored.
    pub max_image_bytes: u64,
    /// Bytes of the config blob.
    pub max_config_bytes: u64,
    /// Unpacking bounds.
    pub unpack: UnpackLimits,
    /// The whole pull, retries included.
    pub timeout: Duration,
    /// The cache's total size.
    pub cache_bytes: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_layers: 128,
            max_layer_bytes: 512 << 20,
            max_image_bytes: 1 << 30,
            max_config_bytes: 1 << 20,
            unpack: UnpackLimits { max_entries: 500_000, max_bytes: 2 << 30 },
            timeout: Duration::from_secs(300),
            cache_bytes: 4 << 30,
        }
    }
}

/// A pulled image: its layers are in the cache.
#[derive(Clone, Debug)]
pub struct PulledImage {
    /// The reference pulled.
    pub image: String,
    /// The image manifest's digest.
    pub digest: String,
    /// The config's labels.
    pub labels: BTreeMap<String, String>,
    /// The layer blobs, in order.
    pub layers: Vec<LayerFile>,
}

/// Pulls (and pushes) images through one cache.
pub struct ImageClient {
    config: RegistryConfig,
    /// Credentials of OLM itself (a node's or cluster's global pull secret): used for a
    /// registry that the caller's credentials do not name.
    node_creds: Credentials,
    store: BlobStore,
    limits: Limits,
    clients: Mutex<HashMap<String, Arc<Client>>>,
    in_flight: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Serve a digest found in the cache without asking its registry (see [`ImageClient::pull`]).
    trust_cache: bool,
}

impl std::fmt::Debug for ImageClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImageClient").field("cache", &self.store.root()).finish_non_exhaustive()
    }
}

const ATTEMPTS: u32 = 3;

impl ImageClient {
    /// A client caching under `cache_dir`.
    pub fn new(cache_dir: &Path, config: RegistryConfig, limits: Limits) -> Result<ImageClient, ImageError> {
        // reqwest is built without a crypto provider: use the process's (ring, as kube).
        let _ = rustls::crypto::ring::default_provider().install_default();
        Ok(ImageClient {
            config,
            node_creds: Credentials::anonymous(),
            store: BlobStore::open(cache_dir, limits.cache_bytes)?,
            limits,
            clients: Mutex::default(),
            in_flight: Mutex::default(),
            trust_cache: false,
        })
    }

    /// Serve a digest the cache holds without asking the registry first: for a disconnected
    /// cluster whose registries are out of reach once its images are cached. It gives up the
    /// check that the repository a catalog names, with that catalog's credentials, serves the
    /// image (see [`ImageClient::pull`]).
    pub fn trusting_cache(mut self, trust: bool) -> ImageClient {
        self.trust_cache = trust;
        self
    }

    /// Use `creds` for every registry that the credentials given with a pull do not name, as
    /// the kubelet falls back to the node's own credentials after a pod's pull secrets.
    pub fn with_node_credentials(mut self, creds: Credentials) -> ImageClient {
        self.node_creds = creds;
        self
    }

    /// What to send to `registry`: the caller's credentials for it, else the node's.
    pub(crate) fn auth_for(&self, creds: &Credentials, registry: &str) -> RegistryAuth {
        match creds.for_registry(registry) {
            RegistryAuth::Anonymous => self.node_creds.for_registry(registry),
            auth => auth,
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// One client per registry host and credentials: its protocol and CA are the host's, and
    /// its tokens are those of these credentials (oci-client keeps the first credentials a
    /// client used for a registry, so two catalogs with different pull secrets for one
    /// registry must not share one).
    pub(crate) fn client(&self, registry: &str, auth: &RegistryAuth) -> Arc<Client> {
        let secret = match auth {
            RegistryAuth::Basic(user, password) => format!("basic:{user}:{password}"),
            RegistryAuth::Bearer(token) => format!("bearer:{token}"),
            RegistryAuth::Anonymous => String::new(),
        };
        // The key must tell credentials apart without holding them.
        let identity = {
            use sha2::Digest as _;
            hex::encode(sha2::Sha256::digest(secret))
        };
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        clients
            .entry(format!("{registry}|{identity}"))
            .or_insert_with(|| {
                let host = self.config.host(registry);
                Arc::new(Client::new(ClientConfig {
                    protocol: if host.plain_http { ClientProtocol::Http } else { ClientProtocol::Https },
                    accept_invalid_certificates: host.insecure_skip_verify,
                    extra_root_certificates: host
                        .ca_pem
                        .iter()
                        .map(|pem| Certificate { encoding: CertificateEncoding::Pem, data: pem.clone() })
                        .collect(),
                    platform_resolver: Some(Box::new(content_platform)),
                    connect_timeout: Some(Duration::from_secs(10)),
                    read_timeout: Some(Duration::from_secs(60)),
                    user_agent: concat!("olm-rs/", env!("CARGO_PKG_VERSION")),
                    ..ClientConfig::default()
                }))
            })
            .clone()
    }

    /// The digest `image` names now (one HEAD request): what a registry poll compares.
    pub async fn digest_of(&self, image: &str, creds: &Credentials) -> Result<String, ImageError> {
        let reference = parse(image)?;
        let registry = reference.resolve_registry().to_owned();
        let auth = self.auth_for(creds, &registry);
        let client = self.client(&registry, &auth);
        let work = async {
            retry(|| async {
                client
                    .fetch_manifest_digest(&reference, &auth)
                    .await
                    .map_err(|err| ImageError::from_oci(image, &registry, err))
            })
            .await
        };
        self.timed(image, &registry, work).await
    }

    /// Pull `image` into the cache. A digest reference already there is fetched no more, but
    /// served only once its registry confirms (one HEAD request, with `creds`) that the
    /// repository it names holds that manifest: the cache is keyed by digest alone, and content
    /// one catalog pulled from a private repository must not install for another that names the
    /// digest under a repository that does not hold it, or without the credentials to read it
    /// (as the kubelet's "ensure secret pulled images"). A refusal is the error a pull would
    /// give, naming the image, the registry and its answer. [`ImageClient::trusting_cache`]
    /// skips the question.
    pub async fn pull(&self, image: &str, creds: &Credentials) -> Result<PulledImage, ImageError> {
        let reference = parse(image)?;
        let registry = reference.resolve_registry().to_owned();
        let lock = {
            let mut in_flight = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
            in_flight.entry(image.to_owned()).or_default().clone()
        };
        let _guard = lock.lock().await;
        if let Some(record) = reference.digest().and_then(|d| self.store.record(d)) {
            if !self.trust_cache {
                let served = self.digest_of(image, creds).await?;
                if Some(served.as_str()) != reference.digest() {
                    return Err(ImageError::Registry {
                        image: image.to_owned(),
                        registry,
                        message: format!("the registry answers digest {served} for this digest reference"),
                        retryable: false,
                    });
                }
            }
            return Ok(self.pulled(image, record));
        }
        let auth = self.auth_for(creds, &registry);
        let record = self
            .timed(image, &registry, retry(|| self.fetch(image, &reference, &registry, &auth)))
            .await?;
        let keep: Vec<String> = record.layers.iter().map(|l| l.0.clone()).collect();
        self.store.evict(&keep);
        Ok(self.pulled(image, record))
    }

    /// Unpack the `wanted` directories of a pulled image into `dest`.
    pub async fn unpack(&self, pulled: &PulledImage, wanted: &[&str], dest: &Path) -> Result<UnpackStats, ImageError> {
        let (image, layers, dest) = (pulled.image.clone(), pulled.layers.clone(), dest.to_owned());
        let wanted: Vec<String> = wanted.iter().map(|w| (*w).to_owned()).collect();
        let limits = self.limits.unpack;
        tokio::task::spawn_blocking(move || {
            let wanted: Vec<&str> = wanted.iter().map(String::as_str).collect();
            crate::unpack::unpack(&image, &layers, &wanted, &dest, limits)
        })
        .await
        .map_err(|err| ImageError::local("unpack task", err))?
    }

    /// A scratch directory inside the cache (removed when dropped).
    pub fn scratch(&self) -> Result<tempfile::TempDir, ImageError> {
        let dir = self.store.root().join("tmp");
        tempfile::TempDir::new_in(&dir).map_err(|err| ImageError::local(dir.display(), err))
    }

    fn pulled(&self, image: &str, record: ImageRecord) -> PulledImage {
        let layers = record
            .layers
            .iter()
            .filter_map(|(digest, _, _)| {
                Some(LayerFile { path: self.store.blob_path(digest).ok()?, digest: digest.clone() })
            })
            .collect();
        PulledImage { image: image.to_owned(), digest: record.digest, labels: record.labels, layers }
    }

    async fn timed<T>(&self, image: &str, registry: &str, work: impl Future<Output = Result<T, ImageError>>) -> Result<T, ImageError> {
        tokio::time::timeout(self.limits.timeout, work).await.unwrap_or_else(|_| {
            Err(ImageError::Timeout {
                image: image.to_owned(),
                registry: registry.to_owned(),
                seconds: self.limits.timeout.as_secs(),
            })
        })
    }

    async fn fetch(&self, image: &str, reference: &Reference, registry: &str, auth: &RegistryAuth) -> Result<ImageRecord, ImageError> {
        let oci = |err| ImageError::from_oci(image, registry, err);
        let client = self.client(registry, auth);
        let (manifest, digest, index_digest) = client
            .pull_image_manifest_and_list_digest(reference, auth)
            .await
            .map_err(oci)?;
        self.check_sizes(image, &manifest)?;
        let config = self.blob(image, registry, &client, reference, &manifest.config.digest, manifest.config.size, "config").await?;
        let labels = labels_of(&config).map_err(|message| ImageError::BadContent {
            image: image.to_owned(),
            message: format!("config {}: {message}", manifest.config.digest),
        })?;
        let mut layers = Vec::with_capacity(manifest.layers.len());
        for layer in &manifest.layers {
            if !self.store.has_blob(&layer.digest) {
                self.blob(image, registry, &client, reference, &layer.digest, layer.size, "layer").await?;
            }
            layers.push((layer.digest.clone(), layer.media_type.clone(), u64::try_from(layer.size).unwrap_or(0)));
        }
        let record = ImageRecord { digest, layers, labels };
        self.store.put_record(&record, index_digest.as_deref())?;
        Ok(record)
    }

    fn check_sizes(&self, image: &str, manifest: &OciImageManifest) -> Result<(), ImageError> {
        let too_large = |what: String, size: u64, limit: u64| ImageError::TooLarge { image: image.to_owned(), what, size, limit };
        if manifest.layers.len() > self.limits.max_layers {
            return Err(too_large("its number of layers".into(), manifest.layers.len() as u64, self.limits.max_layers as u64));
        }
        let mut total = 0u64;
        for layer in &manifest.layers {
            let size = u64::try_from(layer.size).unwrap_or(u64::MAX);
            if size > self.limits.max_layer_bytes {
                return Err(too_large(format!("layer {}", layer.digest), size, self.limits.max_layer_bytes));
            }
            total = total.saturating_add(size);
        }
        if total > self.limits.max_image_bytes {
            return Err(too_large("the sum of its layers".into(), total, self.limits.max_image_bytes));
        }
        let config = u64::try_from(manifest.config.size).unwrap_or(u64::MAX);
        if config > self.limits.max_config_bytes {
            return Err(too_large("its config".into(), config, self.limits.max_config_bytes));
        }
        Ok(())
    }

    /// Download one blob into the cache, never more than its descriptor's size.
    #[allow(clippy::too_many_arguments)]
    async fn blob(
        &self,
        image: &str,
        registry: &str,
        client: &Client,
        reference: &Reference,
        digest: &str,
        size: i64,
        what: &str,
    ) -> Result<Vec<u8>, ImageError> {
        crate::store::hex_of(digest).map_err(|message| ImageError::BadContent { image: image.to_owned(), message })?;
        let temp = self.store.temp_file()?;
        let file = temp.reopen().map_err(|err| ImageError::local(temp.path().display(), err))?;
        let size = u64::try_from(size).unwrap_or(0);
        let mut out = Bounded { inner: tokio::fs::File::from_std(file), written: 0, limit: size };
        let descriptor = oci_client::manifest::OciDescriptor { digest: digest.to_owned(), size: size as i64, ..Default::default() };
        match client.pull_blob(reference, &descriptor, &mut out).await {
            Ok(()) => {}
            Err(oci_client::errors::OciDistributionError::IoError(err)) if err.kind() == std::io::ErrorKind::FileTooLarge => {
                return Err(ImageError::TooLarge {
                    image: image.to_owned(),
                    what: format!("{what} {digest} as served (more than its manifest says)"),
                    size: out.written,
                    limit: size,
                });
            }
            Err(oci_client::errors::OciDistributionError::DigestError(err)) => {
                return Err(ImageError::DigestMismatch {
                    image: image.to_owned(),
                    registry: registry.to_owned(),
                    what: format!("{what} {digest}"),
                    message: err.to_string(),
                });
            }
            Err(err) => return Err(ImageError::from_oci(image, registry, err)),
        }
        let bytes = if what == "config" {
            std::fs::read(temp.path()).map_err(|err| ImageError::local(temp.path().display(), err))?
        } else {
            Vec::new()
        };
        self.store.commit_blob(digest, temp)?;
        Ok(bytes)
    }
}

/// `image` pinned to `digest`: the same registry and repository, by digest instead of tag
/// (`quay.io/org/catalog:latest` + `sha256:…` → `quay.io/org/catalog@sha256:…`).
pub fn pinned(image: &str, digest: &str) -> Result<String, ImageError> {
    let reference = parse(image)?;
    Ok(Reference::with_digest(reference.registry().to_owned(), reference.repository().to_owned(), digest.to_owned()).whole())
}

/// Parse a reference, naming it when it does not parse.
pub(crate) fn parse(image: &str) -> Result<Reference, ImageError> {
    image.trim().parse::<Reference>().map_err(|err| ImageError::InvalidReference {
        image: image.to_owned(),
        message: err.to_string(),
    })
}

/// The config's `config.Labels`.
fn labels_of(config: &[u8]) -> Result<BTreeMap<String, String>, String> {
    let value: serde_json::Value = serde_json::from_slice(config).map_err(|err| format!("not JSON: {err}"))?;
    let labels = value.get("config").and_then(|c| c.get("Labels")).and_then(|l| l.as_object());
    Ok(labels
        .map(|l| l.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect())
        .unwrap_or_default())
}

/// From an index, linux/amd64 when there is one, else the first manifest: bundle and catalog
/// content is the same on every platform.
fn content_platform(entries: &[ImageIndexEntry]) -> Option<String> {
    oci_client::client::linux_amd64_resolver(entries).or_else(|| entries.first().map(|e| e.digest.clone()))
}

/// Run `attempt` up to [`ATTEMPTS`] times while it fails with a retryable error.
async fn retry<T, F, Fut>(mut attempt: F) -> Result<T, ImageError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, ImageError>>,
{
    let mut delay = Duration::from_millis(250);
    let mut tries = 1;
    loop {
        match attempt().await {
            Err(err) if err.retryable() && tries < ATTEMPTS => {
                tracing::debug!(error = %err, tries, "retrying an image operation");
                tokio::time::sleep(delay).await;
                delay *= 4;
                tries += 1;
            }
            other => return other,
        }
    }
}

/// A writer that refuses to grow past `limit`.
struct Bounded<W> {
    inner: W,
    written: u64,
    limit: u64,
}

impl<W: AsyncWrite + Unpin> AsyncWrite for Bounded<W> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        if self.written + buf.len() as u64 > self.limit {
            self.written += buf.len() as u64;
            return Poll::Ready(Err(std::io::Error::new(std::io::ErrorKind::FileTooLarge, "more than the descriptor's size")));
        }
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = &poll {
            self.written += *n as u64;
        }
        poll
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::pinned;

    #[test]
    fn a_tag_is_replaced_by_the_digest_and_a_digest_by_the_new_one() {
        let digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        assert_eq!(pinned("quay.io/org/catalog:latest", digest).unwrap(), format!("quay.io/org/catalog@{digest}"));
        assert_eq!(pinned("127.0.0.1:5000/a/b/c:v1", digest).unwrap(), format!("127.0.0.1:5000/a/b/c@{digest}"));
        let old = "sha256:ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff";
        assert_eq!(pinned(&format!("quay.io/org/catalog@{old}"), digest).unwrap(), format!("quay.io/org/catalog@{digest}"));
        assert!(pinned("not a reference", digest).is_err());
    }
}
