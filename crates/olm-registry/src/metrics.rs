//! Prometheus metrics of the catalog server (`/metrics`).

use std::sync::atomic::AtomicU64;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HttpLabels {
    pub route: String,
    pub method: String,
    pub code: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    pub route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GrpcLabels {
    pub catalog: String,
    pub method: String,
    pub code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CatalogLabels {
    pub catalog: String,
}

/// Every metric the server exports, registered once in `registry`.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    pub http_requests: Family<HttpLabels, Counter>,
    pub http_duration: Family<RouteLabels, Histogram>,
    pub grpc_requests: Family<GrpcLabels, Counter>,
    pub packages: Family<CatalogLabels, Gauge>,
    pub channels: Family<CatalogLabels, Gauge>,
    pub bundles: Family<CatalogLabels, Gauge>,
    pub left_out: Family<CatalogLabels, Gauge>,
    pub reload_errors: Family<CatalogLabels, Counter>,
    pub last_reload: Family<CatalogLabels, Gauge<f64, AtomicU64>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("olm_registry");
        let http_requests = Family::<HttpLabels, Counter>::default();
        registry.register("http_requests", "HTTP requests by route, method and status code", http_requests.clone());
        let http_duration = Family::<RouteLabels, Histogram>::new_with_constructor(|| {
            Histogram::new([0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0])
        });
        registry.register("http_request_duration_seconds", "Time to produce HTTP response headers, by route", http_duration.clone());
        let grpc_requests = Family::<GrpcLabels, Counter>::default();
        registry.register("grpc_requests", "gRPC Registry calls by catalog, method and status code", grpc_requests.clone());
        let packages = Family::<CatalogLabels, Gauge>::default();
        registry.register("catalog_packages", "Packages in the served snapshot", packages.clone());
        let channels = Family::<CatalogLabels, Gauge>::default();
        registry.register("catalog_channels", "Channels in the served snapshot", channels.clone());
        let bundles = Family::<CatalogLabels, Gauge>::default();
        registry.register("catalog_bundles", "Bundles in the served snapshot", bundles.clone());
        let left_out = Family::<CatalogLabels, Gauge>::default();
        registry.register(
            "catalog_left_out_packages",
            "Packages left out of the served snapshot for their problems (named in /readyz leftOutPackages)",
            left_out.clone(),
        );
        let reload_errors = Family::<CatalogLabels, Counter>::default();
        registry.register("catalog_reload_errors", "Failed catalog loads (the last good snapshot keeps serving)", reload_errors.clone());
        let last_reload = Family::<CatalogLabels, Gauge<f64, AtomicU64>>::default();
        registry.register(
            "catalog_last_successful_reload_timestamp_seconds",
            "Unix time of the last successful catalog load",
            last_reload.clone(),
        );
        Metrics {
            registry,
            http_requests,
            http_duration,
            grpc_requests,
            packages,
            channels,
            bundles,
            left_out,
            reload_errors,
            last_reload,
        }
    }

    /// Text exposition format (OpenMetrics).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }

    pub fn observe_http(&self, route: &str, method: &str, code: u16, elapsed: Duration) {
        self.http_requests.get_or_create(&HttpLabels { route: route.to_string(), method: method.to_string(), code }).inc();
        self.http_duration.get_or_create(&RouteLabels { route: route.to_string() }).observe(elapsed.as_secs_f64());
    }

    pub fn observe_grpc(&self, catalog: &str, method: &str, code: tonic::Code) {
        self.grpc_requests
            .get_or_create(&GrpcLabels { catalog: catalog.to_string(), method: method.to_string(), code: format!("{code:?}") })
            .inc();
    }

    pub fn set_snapshot_counts(&self, catalog: &str, packages: usize, channels: usize, bundles: usize, left_out: usize) {
        let labels = CatalogLabels { catalog: catalog.to_string() };
        self.left_out.get_or_create(&labels).set(left_out as i64);
        self.packages.get_or_create(&labels).set(packages as i64);
        self.channels.get_or_create(&labels).set(channels as i64);
        self.bundles.get_or_create(&labels).set(bundles as i64);
    }

    pub fn record_reload_success(&self, catalog: &str, at: SystemTime) {
        let secs = at.duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0);
        self.last_reload.get_or_create(&CatalogLabels { catalog: catalog.to_string() }).set(secs);
    }

    pub fn record_reload_error(&self, catalog: &str) {
        self.reload_errors.get_or_create(&CatalogLabels { catalog: catalog.to_string() }).inc();
    }
}
