//! The admin HTTP server: `/metrics`, `/healthz` (the process is alive) and `/readyz` (every
//! watch cache finished its initial list).

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use super::metrics::Metrics;

/// Tracks which watch caches have not finished their initial list yet.
#[derive(Clone, Debug, Default)]
pub struct Readiness {
    pending: Arc<Mutex<BTreeSet<String>>>,
}

impl Readiness {
    /// Register something that must sync before the process is ready.
    pub fn register(&self, name: impl Into<String>) {
        self.lock().insert(name.into());
    }

    /// Mark `name` as synced.
    pub fn mark_ready(&self, name: &str) {
        self.lock().remove(name);
    }

    /// Names still waiting for their initial sync, sorted.
    pub fn pending(&self) -> Vec<String> {
        self.lock().iter().cloned().collect()
    }

    /// True once everything registered has synced.
    pub fn is_ready(&self) -> bool {
        self.lock().is_empty()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[derive(Clone)]
struct AdminState {
    metrics: Arc<Metrics>,
    readiness: Readiness,
}

/// The admin routes, for serving or for tests.
pub fn router(metrics: Arc<Metrics>, readiness: Readiness) -> Router {
    Router::new()
        .route("/metrics", get(serve_metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(serve_ready))
        .with_state(AdminState { metrics, readiness })
}

async fn serve_metrics(State(state): State<AdminState>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")],
        state.metrics.encode(),
    )
}

async fn serve_ready(State(state): State<AdminState>) -> impl IntoResponse {
    let pending = state.readiness.pending();
    if pending.is_empty() {
        (StatusCode::OK, "ok\n".to_owned())
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("waiting for the initial list of: {}\n", pending.join(", ")),
        )
    }
}

/// Bind `addr` and serve the admin routes until `shutdown` resolves.
/// Returns the bound address (useful with port 0) and the server task.
pub async fn serve(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    readiness: Readiness,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let app = router(metrics, readiness);
    let task = tokio::spawn(async move {
        if let Err(err) = axum::serve(listener, app).with_graceful_shutdown(shutdown).await {
            tracing::error!(%err, "admin server failed");
        }
    });
    Ok((bound, task))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_only_after_every_registered_cache_synced() {
        let readiness = Readiness::default();
        readiness.register("ClusterServiceVersion");
        readiness.register("Deployment");
        assert!(!readiness.is_ready());
        readiness.mark_ready("Deployment");
        assert_eq!(readiness.pending(), vec!["ClusterServiceVersion".to_owned()]);
        readiness.mark_ready("ClusterServiceVersion");
        assert!(readiness.is_ready());
    }

    #[tokio::test]
    async fn endpoints_answer_over_http() {
        // A controller's own metric, registered before the registry is shared, is served too.
        let mut metrics = Metrics::new("olm_controller");
        let csv_count = prometheus_client::metrics::gauge::Gauge::<i64>::default();
        metrics.registry_mut().register("csv_count", "CSVs", csv_count);
        let metrics = Arc::new(metrics);
        let readiness = Readiness::default();
        readiness.register("OperatorGroup");
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let (addr, task) = serve(
            "127.0.0.1:0".parse().expect("literal address"),
            metrics,
            readiness.clone(),
            async move {
                let _ = stop_rx.await;
            },
        )
        .await
        .expect("bind a free port");
        let get = |path: &'static str| async move {
            let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            stream
                .write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").as_bytes())
                .await
                .expect("write");
            let mut out = String::new();
            stream.read_to_string(&mut out).await.expect("read");
            out
        };
        assert!(get("/healthz").await.starts_with("HTTP/1.1 200"));
        let not_ready = get("/readyz").await;
        assert!(not_ready.starts_with("HTTP/1.1 503"), "{not_ready}");
        assert!(not_ready.contains("OperatorGroup"));
        readiness.mark_ready("OperatorGroup");
        assert!(get("/readyz").await.starts_with("HTTP/1.1 200"));
        assert!(get("/metrics").await.contains("csv_count"));
        let _ = stop_tx.send(());
        task.await.expect("server task");
    }
}
