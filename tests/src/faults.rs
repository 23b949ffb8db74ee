//! Faults between OLM's controllers and the API server, injected in the client the controllers
//! use (a tower layer under kube's client): what a real API server answers under contention
//! and churn — 409 Conflict on a status write, a watch that expired (an `ERROR` event with code
//! 410, after which a watcher must list again) — and a request held on its way, so a test can
//! crash the controllers or the API server at a chosen step. It also records every write the
//! controllers send, so a test can count them.
//!
//! [`ScopedManager`] runs the controllers with such a client on a runtime of their own, and
//! stops them abruptly (every task dropped mid-flight, as a crash would) when dropped.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use anyhow::Context as _;
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use kube::Client;
use kube::client::{Body, ClientBuilder, DynBody};
use olm_controllers::manager::{Manager, ManagerConfig};
use olm_runtime::requests::RequestKind;
use tokio::sync::watch;
use tower::{BoxError, Layer, Service};

/// A request as the injector classifies it (verb and resource as the audit log names them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub method: Method,
    pub kind: RequestKind,
    pub path: String,
}

impl Call {
    fn of(request: &Request<Body>) -> Call {
        let kind = RequestKind::of(request.method(), request.uri().path(), request.uri().query());
        Call { method: request.method().clone(), kind, path: request.uri().path().to_owned() }
    }

    /// The resource's plural (`subscriptions`).
    pub fn resource(&self) -> &str {
        &self.kind.resource
    }

    pub fn is_write(&self) -> bool {
        self.kind.is_write()
    }

    pub fn is_status_write(&self) -> bool {
        self.is_write() && self.kind.subresource.as_deref() == Some("status")
    }

    pub fn is_watch(&self) -> bool {
        self.kind.verb == "watch"
    }
}

/// A request parked by [`Faults::hold`]: `reached` tells the test it arrived; it goes on when
/// the test calls [`Faults::release`] (or never, when the controllers are stopped first).
struct Hold {
    matches: Box<dyn Fn(&Call) -> bool + Send>,
    reached: Option<tokio::sync::oneshot::Sender<Call>>,
}

#[derive(Default)]
struct State {
    /// Status writes of a kind not in `conflicts` yet get a 409 (`conflict_on_status_writes`).
    conflict_every_kind: bool,
    /// Plurals already answered with a 409, and how often.
    conflicts: BTreeMap<String, u32>,
    /// Watches of a kind not in `expired` yet get a 410 (`expire_watches`).
    expire_all: bool,
    expired: BTreeMap<String, u32>,
    hold: Option<Hold>,
    writes: Vec<Call>,
}

/// The fault injector shared by a test and the client layer it built.
#[derive(Clone)]
pub struct Faults {
    state: Arc<Mutex<State>>,
    released: watch::Sender<u64>,
}

impl Default for Faults {
    fn default() -> Self {
        Faults { state: Arc::default(), released: watch::channel(0).0 }
    }
}

impl Faults {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// From now on, the first status write of every resource kind is answered 409 Conflict
    /// (once per kind), as when another writer changed the object in between.
    pub fn conflict_on_status_writes(&self) {
        let mut state = self.state();
        state.conflict_every_kind = true;
        state.conflicts.clear();
    }

    /// Kinds whose status writes were answered 409.
    pub fn conflicts(&self) -> BTreeMap<String, u32> {
        self.state().conflicts.clone()
    }

    /// The next watch request of every kind gets an `ERROR` event with code 410 Expired
    /// (the resource version it resumes from is too old), once per kind from now on.
    pub fn expire_watches(&self) {
        let mut state = self.state();
        state.expire_all = true;
        state.expired.clear();
    }

    /// Kinds whose watch was expired.
    pub fn expired(&self) -> BTreeMap<String, u32> {
        self.state().expired.clone()
    }

    /// Park the first request that `matches`; the returned receiver gets it when it arrives.
    pub fn hold(&self, matches: impl Fn(&Call) -> bool + Send + 'static) -> tokio::sync::oneshot::Receiver<Call> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.state().hold = Some(Hold { matches: Box::new(matches), reached: Some(tx) });
        rx
    }

    /// Let every parked request go on.
    pub fn release(&self) {
        self.state().hold = None;
        self.released.send_modify(|generation| *generation += 1);
    }

    /// Every write sent so far (including injected and parked ones).
    pub fn writes(&self) -> Vec<Call> {
        self.state().writes.clone()
    }

    /// What to do with `call`: answer it here, park it, or send it on.
    fn decide(&self, call: &Call) -> Verdict {
        let mut state = self.state();
        if call.is_write() {
            state.writes.push(call.clone());
        }
        if call.is_status_write() && state.conflict_every_kind {
            if !state.conflicts.contains_key(call.resource()) {
                state.conflicts.insert(call.resource().to_owned(), 1);
                return Verdict::Answer(StatusCode::CONFLICT, conflict_body(call));
            }
        }
        if call.is_watch() && state.expire_all && !state.expired.contains_key(call.resource()) {
            state.expired.insert(call.resource().to_owned(), 1);
            return Verdict::Answer(StatusCode::OK, expired_watch_body());
        }
        if let Some(hold) = state.hold.as_mut()
            && let Some(reached) = hold.reached.take_if(|_| (hold.matches)(call))
        {
            let _ = reached.send(call.clone());
            return Verdict::Park(self.released.subscribe());
        }
        Verdict::Forward
    }
}

enum Verdict {
    Forward,
    Answer(StatusCode, String),
    Park(watch::Receiver<u64>),
}

/// What the API server answers when a write's precondition (resourceVersion) no longer holds.
fn conflict_body(call: &Call) -> String {
    serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": format!("Operation cannot be fulfilled on {}: the object has been modified; please apply your changes to the latest version and try again", call.resource()),
        "reason": "Conflict", "code": 409
    })
    .to_string()
}

/// What a watch resuming from a compacted resource version receives.
fn expired_watch_body() -> String {
    let status = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "too old resource version: 1 (2)", "reason": "Expired", "code": 410
    });
    format!("{}\n", serde_json::json!({"type": "ERROR", "object": status}))
}

impl<S> Layer<S> for Faults {
    type Service = FaultService<S>;
    fn layer(&self, inner: S) -> FaultService<S> {
        FaultService { inner, faults: self.clone() }
    }
}

pub struct FaultService<S> {
    inner: S,
    faults: Faults,
}

type ResponseFuture = Pin<Box<dyn Future<Output = Result<Response<Box<DynBody>>, BoxError>> + Send>>;

impl<S> Service<Request<Body>> for FaultService<S>
where
    S: Service<Request<Body>, Response = Response<Box<DynBody>>, Error = BoxError>,
    S::Future: Send + 'static,
{
    type Response = Response<Box<DynBody>>;
    type Error = BoxError;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> ResponseFuture {
        let call = Call::of(&request);
        match self.faults.decide(&call) {
            Verdict::Answer(status, body) => Box::pin(async move {
                let body: Box<DynBody> = Box::new(Full::new(Bytes::from(body)).map_err(|never| match never {}));
                let response = Response::builder().status(status).header("content-type", "application/json").body(body)?;
                Ok(response)
            }),
            Verdict::Park(mut released) => {
                // Futures of the inner stack send nothing until polled.
                let forward = self.inner.call(request);
                Box::pin(async move {
                    let _ = released.changed().await;
                    forward.await
                })
            }
            Verdict::Forward => Box::pin(self.inner.call(request)),
        }
    }
}

/// The controllers (every one, no leader election) on a runtime thread of their own, with a
/// client that goes through `faults`. Dropping it stops them at once: the runtime is shut
/// down with its tasks wherever they are, as when `olm run` is killed.
pub struct ScopedManager {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// The admin server (`/metrics`), when asked for.
    pub admin_addr: Option<std::net::SocketAddr>,
}

impl ScopedManager {
    pub async fn start(kubeconfig: std::path::PathBuf, faults: Option<Faults>) -> anyhow::Result<ScopedManager> {
        Self::start_with(kubeconfig, faults, false).await
    }

    /// [`ScopedManager::start`], with the admin server on a loopback port when `admin`.
    pub async fn start_with(kubeconfig: std::path::PathBuf, faults: Option<Faults>, admin: bool) -> anyhow::Result<ScopedManager> {
        Self::start_all(kubeconfig, faults, admin, false).await
    }

    /// Every controller, OLM v1's too (`v1`: with their ClusterCatalog content server on a
    /// loopback port).
    pub async fn start_all(kubeconfig: std::path::PathBuf, faults: Option<Faults>, admin: bool, v1: bool) -> anyhow::Result<ScopedManager> {
        let (started_tx, started_rx) = tokio::sync::oneshot::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
                Ok(runtime) => runtime,
                Err(err) => {
                    let _ = started_tx.send(Err(anyhow::anyhow!("runtime: {err}")));
                    return;
                }
            };
            runtime.block_on(async move {
                let started = async {
                    let config = kube::Config::from_custom_kubeconfig(
                        kube::config::Kubeconfig::read_from(&kubeconfig)?,
                        &kube::config::KubeConfigOptions::default(),
                    )
                    .await?;
                    // The client's buffer task lives on this runtime, so it is built here.
                    let builder = ClientBuilder::try_from(config)?;
                    let client: Client = match faults {
                        Some(faults) => builder.with_layer(&faults).build(),
                        None => builder.build(),
                    };
                    let images = crate::image_client()?;
                    let mut extra: Vec<std::sync::Arc<dyn olm_runtime::ControllerSet>> = Vec::new();
                    let mut catalog_server = None;
                    if v1 {
                        let (server, publisher) = olm_controllers_v1::serve_catalogs("127.0.0.1:0".parse()?).await?;
                        let base_url = format!("http://{}", server.http_addr.context("the content server's address")?);
                        extra.push(std::sync::Arc::new(olm_controllers_v1::V1Controllers { images: images.clone(), publisher, base_url, namespace: olm_controllers::catalog_operator::global_namespace() }));
                        catalog_server = Some(server);
                    }
                    let config = ManagerConfig {
                        cache_thread_init: None,
                        images,
                        extra,
                        configmap_server_image: None,
                        controllers: Vec::new(),
                        admin_addr: if admin { Some("127.0.0.1:0".parse()?) } else { None },
                        leader_election: None,
                    };
                    anyhow::Ok((Manager::start(client, config).await?, catalog_server))
                }
                .await;
                match started {
                    Ok((manager, catalog_server)) => {
                        let _ = started_tx.send(Ok(manager.admin_addr()));
                        let _ = stop_rx.await;
                        drop(manager);
                        if let Some(server) = catalog_server {
                            server.shutdown();
                        }
                    }
                    Err(err) => {
                        let _ = started_tx.send(Err(err));
                    }
                }
            });
            runtime.shutdown_timeout(Duration::from_secs(5));
        });
        let admin_addr = started_rx.await.context("the manager thread ended before it started")??;
        Ok(ScopedManager { stop: Some(stop_tx), thread: Some(thread), admin_addr })
    }
}

impl Drop for ScopedManager {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_expired_watch_is_one_error_event_with_code_410() {
        let line = expired_watch_body();
        let event: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
        assert_eq!(event["type"], "ERROR");
        assert_eq!(event["object"]["code"], 410);
    }
}
