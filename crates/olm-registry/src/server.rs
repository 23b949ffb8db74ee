//! Starting, running and stopping the catalog server.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinHandle;
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

use crate::error::RegistryError;
use crate::grpc::{ExperimentalService, RegistryService};
use crate::http::{HttpLimits, router};
use crate::metrics::Metrics;
use olm_registry_api::pb;
use crate::reload;
use crate::store::{CatalogSet, ServedCatalog};

/// Bounds of the gRPC servers.
#[derive(Debug, Clone)]
pub struct GrpcLimits {
    /// Deadline for any single call (also capped by the client's own deadline).
    pub request_timeout: Duration,
    /// Largest request message accepted.
    pub max_decoding_message_size: usize,
    /// Largest response message sent (one bundle with all its manifests).
    pub max_encoding_message_size: usize,
    /// Concurrent calls per HTTP/2 connection.
    pub max_concurrent_streams: u32,
    /// Open connections per catalog; more are closed at once.
    pub max_connections: usize,
    /// How long a new connection may stay silent before its HTTP/2 preface.
    pub first_bytes_timeout: Duration,
}

impl Default for GrpcLimits {
    fn default() -> Self {
        GrpcLimits {
            request_timeout: Duration::from_secs(60),
            max_decoding_message_size: 1024 * 1024,
            max_encoding_message_size: 64 * 1024 * 1024,
            max_concurrent_streams: 256,
            max_connections: 1024,
            first_bytes_timeout: Duration::from_secs(10),
        }
    }
}

/// Everything `olm catalog serve` needs.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Catalog name → directory. Names are unique.
    pub catalogs: Vec<(String, PathBuf)>,
    /// Where to serve HTTP (all catalogs); None: no HTTP server.
    pub http_addr: Option<SocketAddr>,
    /// Catalog name → where to serve its gRPC Registry API (one server per catalog,
    /// as operator-registry does).
    pub grpc_addrs: Vec<(String, SocketAddr)>,
    /// How often to look for catalog edits; None: never reload.
    pub reload_interval: Option<Duration>,
    pub http_limits: HttpLimits,
    pub grpc_limits: GrpcLimits,
    /// Slowest time the HTTP server waits for a new request's headers.
    pub header_read_timeout: Duration,
    /// Most simultaneous HTTP connections; more are closed at once.
    pub max_http_connections: usize,
    /// Time in-flight requests get to finish after a shutdown signal.
    pub shutdown_grace: Duration,
    /// Serve catalogs a controller publishes while the server runs ([`CatalogSet::publish`]:
    /// ClusterCatalogs); then no directory is needed.
    pub published: bool,
}

impl ServeConfig {
    pub fn new(catalogs: Vec<(String, PathBuf)>) -> ServeConfig {
        ServeConfig {
            catalogs,
            http_addr: None,
            grpc_addrs: Vec::new(),
            reload_interval: Some(Duration::from_secs(5)),
            http_limits: HttpLimits::default(),
            grpc_limits: GrpcLimits::default(),
            header_read_timeout: Duration::from_secs(10),
            max_http_connections: 1024,
            shutdown_grace: Duration::from_secs(10),
            published: false,
        }
    }

    fn check(&self) -> Result<(), RegistryError> {
        if self.catalogs.is_empty() && !self.published {
            return Err(RegistryError::Config("no catalog to serve; pass --catalog NAME=DIR".into()));
        }
        let mut names = std::collections::BTreeSet::new();
        for (name, _) in &self.catalogs {
            if !names.insert(name.as_str()) {
                return Err(RegistryError::Config(format!("catalog {name:?} is given twice; catalog names must be unique")));
            }
        }
        let mut grpc_names = std::collections::BTreeSet::new();
        for (name, addr) in &self.grpc_addrs {
            if !names.contains(name.as_str()) {
                return Err(RegistryError::Config(format!(
                    "gRPC address {addr} is for catalog {name:?}, which is not served; served catalogs: {}",
                    names.iter().copied().collect::<Vec<_>>().join(", ")
                )));
            }
            if !grpc_names.insert(name.as_str()) {
                return Err(RegistryError::Config(format!("catalog {name:?} has two gRPC addresses; give one")));
            }
        }
        if self.http_addr.is_none() && self.grpc_addrs.is_empty() {
            return Err(RegistryError::Config("nothing to serve: give an HTTP address, a gRPC address, or both".into()));
        }
        Ok(())
    }
}

/// A started server: its bound addresses and a handle to stop it.
pub struct RunningServer {
    pub http_addr: Option<SocketAddr>,
    /// Catalog name → bound gRPC address.
    pub grpc_addrs: BTreeMap<String, SocketAddr>,
    pub catalogs: CatalogSet,
    shutdown: watch::Sender<bool>,
    tasks: Vec<(String, JoinHandle<Result<(), RegistryError>>)>,
}

impl RunningServer {
    /// Ask every part of the server to stop (in-flight requests may finish).
    pub fn shutdown(&self) {
        let _ = self.shutdown.send(true);
    }

    /// Wait until every server task has ended; the first failure is returned.
    pub async fn wait(self) -> Result<(), RegistryError> {
        let mut first_error = None;
        for (what, task) in self.tasks {
            let outcome = match task.await {
                Ok(r) => r,
                Err(e) => Err(RegistryError::Serve { what, message: e.to_string() }),
            };
            if let Err(e) = outcome {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// Service names the health service reports; "Registry" is what operator-registry's
/// client checks, "" is what kubelet gRPC probes check.
const HEALTH_NAMES: [&str; 3] = ["", "Registry", "api.Registry"];

async fn set_health(reporter: &HealthReporter, serving: bool) {
    let status = if serving { ServingStatus::Serving } else { ServingStatus::NotServing };
    for name in HEALTH_NAMES {
        reporter.set_service_status(name, status).await;
    }
}

/// Load every catalog, bind every address and start serving. Returns once the servers
/// accept connections. A catalog that fails its first load is served as "not ready"
/// (HTTP 503, gRPC UNAVAILABLE/NOT_SERVING) until an edit makes it valid.
pub async fn start(config: ServeConfig) -> Result<RunningServer, RegistryError> {
    config.check()?;
    let metrics = Arc::new(Metrics::new());
    let catalogs = CatalogSet::new(&config.catalogs, metrics.clone());

    let mut fingerprints = Vec::new();
    for catalog in catalogs.iter() {
        let served = catalog.clone();
        let fingerprint_and_load = move || {
            let fp = served.dir.as_deref().map_or(0, reload::fingerprint);
            (fp, served.reload())
        };
        let (fp, result) = tokio::task::spawn_blocking(fingerprint_and_load)
            .await
            .map_err(|e| RegistryError::Serve { what: "catalog load".into(), message: e.to_string() })?;
        match result {
            Ok(_) => {
                if let Some(s) = catalog.snapshot() {
                    let (p, c, b) = s.catalog.counts();
                    tracing::info!(catalog = %catalog.name, dir = %catalog.origin(), packages = p, channels = c, bundles = b,
                        millis = s.load_duration.as_millis() as u64, "catalog loaded");
                }
            }
            Err(message) => tracing::error!(
                catalog = %catalog.name, dir = %catalog.origin(), category = "InvalidCatalog",
                "catalog failed to load; it is not ready until its files are fixed: {message}"
            ),
        }
        fingerprints.push((catalog.clone(), fp));
    }

    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let mut tasks = Vec::new();

    // Bind everything first, so a busy port fails the start instead of a background task.
    let http = match config.http_addr {
        Some(addr) => {
            let listener = TcpListener::bind(addr)
                .await
                .map_err(|source| RegistryError::Bind { what: "HTTP".into(), addr: addr.to_string(), source })?;
            Some(listener)
        }
        None => None,
    };
    let mut grpc_listeners = Vec::new();
    for (name, addr) in &config.grpc_addrs {
        let listener = TcpListener::bind(addr).await.map_err(|source| RegistryError::Bind {
            what: format!("gRPC of catalog {name:?}"),
            addr: addr.to_string(),
            source,
        })?;
        grpc_listeners.push((name.clone(), listener));
    }

    let http_addr = match http {
        Some(listener) => {
            let addr = listener.local_addr().ok();
            let app = router(catalogs.clone(), &config.http_limits);
            let task = tokio::spawn(serve_http(
                listener,
                app,
                shutdown_rx.clone(),
                config.header_read_timeout,
                config.max_http_connections,
                config.shutdown_grace,
            ));
            tasks.push(("HTTP".to_string(), task));
            addr
        }
        None => None,
    };

    let mut grpc_addrs = BTreeMap::new();
    let mut reporters: Vec<(Arc<ServedCatalog>, HealthReporter)> = Vec::new();
    for (name, listener) in grpc_listeners {
        let Some(catalog) = catalogs.get(&name) else { continue };
        if let Ok(addr) = listener.local_addr() {
            grpc_addrs.insert(name.clone(), addr);
        }
        let (reporter, health) = tonic_health::server::health_reporter();
        set_health(&reporter, catalog.snapshot().is_some()).await;
        reporters.push((catalog.clone(), reporter));
        let limits = &config.grpc_limits;
        let registry = pb::registry_server::RegistryServer::new(RegistryService::new(catalog.clone(), metrics.clone()))
            .max_decoding_message_size(limits.max_decoding_message_size)
            .max_encoding_message_size(limits.max_encoding_message_size);
        let experimental = pb::experimental_registry_server::ExperimentalRegistryServer::new(ExperimentalService::new(catalog.clone()))
            .max_decoding_message_size(limits.max_decoding_message_size)
            .max_encoding_message_size(limits.max_encoding_message_size);
        let reflection = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .build_v1()
            .map_err(|e| RegistryError::Serve { what: "gRPC reflection".into(), message: e.to_string() })?;
        let reflection_alpha = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .build_v1alpha()
            .map_err(|e| RegistryError::Serve { what: "gRPC reflection".into(), message: e.to_string() })?;
        let mut stop = shutdown_rx.clone();
        let router = tonic::transport::Server::builder()
            .timeout(limits.request_timeout)
            .max_concurrent_streams(limits.max_concurrent_streams)
            .http2_keepalive_interval(Some(Duration::from_secs(60)))
            .http2_keepalive_timeout(Some(Duration::from_secs(20)))
            .tcp_nodelay(true)
            .add_service(health)
            .add_service(registry)
            .add_service(experimental)
            .add_service(reflection)
            .add_service(reflection_alpha);
        let (max_connections, first_bytes_timeout) = (limits.max_connections, limits.first_bytes_timeout);
        let what = format!("gRPC of catalog {name:?}");
        let task_what = what.clone();
        let task = tokio::spawn(async move {
            let incoming = crate::grpc_incoming::incoming(listener, max_connections, first_bytes_timeout);
            router
                .serve_with_incoming_shutdown(incoming, async move {
                    let _ = stop.changed().await;
                })
                .await
                .map_err(|e| RegistryError::Serve { what: task_what, message: e.to_string() })
        });
        tasks.push((what, task));
    }

    if let Some(interval) = config.reload_interval {
        let reporters = Arc::new(reporters);
        let after_load: reload::AfterLoad = Arc::new(move |catalog: &ServedCatalog| {
            for (c, reporter) in reporters.iter() {
                if c.name == catalog.name {
                    let reporter = reporter.clone();
                    let serving = c.snapshot().is_some();
                    tokio::spawn(async move { set_health(&reporter, serving).await });
                }
            }
        });
        let task = tokio::spawn(async move {
            reload::poll_loop(fingerprints, interval, shutdown_rx, after_load).await;
            Ok(())
        });
        tasks.push(("reload".to_string(), task));
    }

    Ok(RunningServer { http_addr, grpc_addrs, catalogs, shutdown: shutdown_tx, tasks })
}

async fn serve_http(
    listener: TcpListener,
    app: axum::Router,
    mut shutdown: watch::Receiver<bool>,
    header_read_timeout: Duration,
    max_connections: usize,
    grace: Duration,
) -> Result<(), RegistryError> {
    let graceful = GracefulShutdown::new();
    let slots = Arc::new(Semaphore::new(max_connections.max(1)));
    loop {
        tokio::select! {
            _ = shutdown.changed() => break,
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(c) => c,
                    Err(e) => {
                        // Usually out of file descriptors: back off instead of spinning.
                        tracing::warn!("accepting an HTTP connection failed: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let Ok(slot) = slots.clone().try_acquire_owned() else {
                    tracing::warn!(%peer, "too many HTTP connections ({max_connections}); closing this one");
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let mut builder = auto::Builder::new(TokioExecutor::new());
                builder.http1().timer(TokioTimer::new()).header_read_timeout(header_read_timeout);
                builder.http2().timer(TokioTimer::new()).keep_alive_interval(Some(Duration::from_secs(60)));
                let connection = builder
                    .serve_connection_with_upgrades(TokioIo::new(stream), TowerToHyperService::new(app.clone()))
                    .into_owned();
                let watched = graceful.watch(connection);
                tokio::spawn(async move {
                    if let Err(e) = watched.await {
                        tracing::debug!(%peer, "HTTP connection ended with an error: {e}");
                    }
                    drop(slot);
                });
            }
        }
    }
    drop(listener);
    tokio::select! {
        _ = graceful.shutdown() => {}
        _ = tokio::time::sleep(grace) => tracing::warn!("HTTP connections still open after {grace:?}; closing them"),
    }
    Ok(())
}
