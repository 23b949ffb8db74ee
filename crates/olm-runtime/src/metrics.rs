//! One prometheus-client `Registry` for the process, with the generic reconcile metrics per
//! controller (`<prefix>_reconcile_total`, `<prefix>_reconcile_failures_total`,
//! `<prefix>_reconcile_duration_seconds`). Controllers register their own metrics in
//! [`Metrics::registry_mut`] before the registry is shared.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabels {
    controller: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FailureLabels {
    controller: String,
    category: String,
}

/// The process's metric registry and the reconcile metrics every controller shares.
pub struct Metrics {
    registry: Registry,
    reconciles: Family<ControllerLabels, Counter>,
    failures: Family<FailureLabels, Counter>,
    duration: Family<ControllerLabels, Histogram>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// Create the registry with the reconcile metrics under `prefix` (e.g. `olm_controller`).
    pub fn new(prefix: &str) -> Self {
        let mut registry = Registry::default();
        let reconciles = Family::<ControllerLabels, Counter>::default();
        let failures = Family::<FailureLabels, Counter>::default();
        let duration = Family::<ControllerLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.001, 2.0, 14))
        });
        {
            let sub = registry.sub_registry_with_prefix(prefix);
            sub.register("reconcile", "Reconciles run, per controller", reconciles.clone());
            sub.register(
                "reconcile_failures",
                "Reconciles that returned an error, per controller and error category",
                failures.clone(),
            );
            sub.register(
                "reconcile_duration_seconds",
                "Time spent in one reconcile",
                duration.clone(),
            );
        }
        registry.register(
            "olm_api_requests",
            "Requests sent to the API server, per verb and resource (as the audit log names them)",
            crate::requests::api_requests().clone(),
        );
        registry.register(
            "olm_api_warnings",
            "Warnings the API server gave (Warning response headers), per field manager of the request",
            crate::warnings::api_warnings().clone(),
        );
        Self { registry, reconciles, failures, duration }
    }

    /// The registry, for controllers to register their own metrics in before it is shared.
    pub fn registry_mut(&mut self) -> &mut Registry {
        &mut self.registry
    }

    /// Count one reconcile of `controller` that took `elapsed`.
    pub fn observe_reconcile(&self, controller: &str, elapsed: Duration) {
        let labels = ControllerLabels {
            controller: controller.to_owned(),
        };
        self.reconciles.get_or_create(&labels).inc();
        self.duration.get_or_create(&labels).observe(elapsed.as_secs_f64());
    }

    /// Count one failed reconcile of `controller` with the error's category.
    pub fn observe_failure(&self, controller: &str, category: &str) {
        self.failures
            .get_or_create(&FailureLabels {
                controller: controller.to_owned(),
                category: category.to_owned(),
            })
            .inc();
    }

    /// The text exposition of every metric (what `/metrics` serves).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail; an error here would be a bug in a metric type.
        if let Err(err) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::error!(%err, "cannot encode metrics");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconcile_metrics_are_labelled_by_controller_and_category() {
        let metrics = Metrics::new("olm_controller");
        metrics.observe_reconcile("csv", Duration::from_millis(3));
        metrics.observe_failure("csv", "ApiConflict");
        let text = metrics.encode();
        assert!(text.contains(r#"olm_controller_reconcile_total{controller="csv"} 1"#), "{text}");
        assert!(text.contains(r#"olm_controller_reconcile_failures_total{controller="csv",category="ApiConflict"} 1"#), "{text}");
    }
}
