//! One prometheus-client `Registry` for the process: generic reconcile metrics per controller,
//! plus the upstream OLM metric names (`csv_count`, `csv_succeeded`, `csv_abnormal`,
//! `csv_upgrade_count`), which keep their exact upstream spelling (no prefix).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
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

/// Labels of `csv_succeeded`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CsvLabels {
    /// CSV namespace.
    pub namespace: String,
    /// CSV name.
    pub name: String,
    /// `spec.version`.
    pub version: String,
}

/// Labels of `csv_abnormal`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CsvAbnormalLabels {
    /// CSV namespace.
    pub namespace: String,
    /// CSV name.
    pub name: String,
    /// `spec.version`.
    pub version: String,
    /// `status.phase`.
    pub phase: String,
    /// `status.reason`.
    pub reason: String,
}

/// Every metric the controllers export.
pub struct Metrics {
    registry: Registry,
    reconciles: Family<ControllerLabels, Counter>,
    failures: Family<FailureLabels, Counter>,
    duration: Family<ControllerLabels, Histogram>,
    /// `csv_count`: number of ClusterServiceVersions seen by the CSV controller.
    pub csv_count: Gauge,
    /// `csv_upgrade_count`: CSVs that entered `Replacing`. Upstream exposes it under exactly this
    /// name, so it is a monotonically increasing gauge (a prometheus-client counter would be
    /// exported as `csv_upgrade_count_total`).
    pub csv_upgrade_count: Gauge,
    csv_succeeded: Family<CsvLabels, Gauge>,
    csv_abnormal: Family<CsvAbnormalLabels, Gauge>,
    // The abnormal series currently exported per CSV, so a transition deletes the old one.
    abnormal_by_csv: Mutex<HashMap<(String, String), CsvAbnormalLabels>>,
    /// The catalog-operator metrics (CatalogSource, Subscription, InstallPlan).
    pub catalog: crate::catalogsource::metrics::CatalogMetrics,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Create the registry and register every metric.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let reconciles = Family::<ControllerLabels, Counter>::default();
        let failures = Family::<FailureLabels, Counter>::default();
        let duration = Family::<ControllerLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.001, 2.0, 14))
        });
        {
            let sub = registry.sub_registry_with_prefix("olm_controller");
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
        let csv_count = Gauge::default();
        let csv_upgrade_count = Gauge::default();
        let csv_succeeded = Family::<CsvLabels, Gauge>::default();
        let csv_abnormal = Family::<CsvAbnormalLabels, Gauge>::default();
        registry.register("csv_count", "Number of CSVs successfully registered", csv_count.clone());
        registry.register(
            "csv_upgrade_count",
            "Monotonic count of CSV upgrades (CSVs that entered Replacing)",
            csv_upgrade_count.clone(),
        );
        registry.register(
            "csv_succeeded",
            "Successful CSV install: 1 when Succeeded, 0 otherwise",
            csv_succeeded.clone(),
        );
        registry.register(
            "csv_abnormal",
            "CSV is not Succeeded: the series names its phase and reason",
            csv_abnormal.clone(),
        );
        let catalog = crate::catalogsource::metrics::CatalogMetrics::register(&mut registry);
        Self {
            registry,
            catalog,
            reconciles,
            failures,
            duration,
            csv_count,
            csv_upgrade_count,
            csv_succeeded,
            csv_abnormal,
            abnormal_by_csv: Mutex::new(HashMap::new()),
        }
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

    /// Record the phase of a CSV: `csv_succeeded` is 1 or 0; `csv_abnormal` has exactly one series
    /// for a CSV that is not Succeeded, and none for one that is.
    pub fn observe_csv(&self, namespace: &str, name: &str, version: &str, phase: &str, reason: &str) {
        let succeeded = phase == "Succeeded";
        self.csv_succeeded
            .get_or_create(&CsvLabels {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                version: version.to_owned(),
            })
            .set(i64::from(succeeded));
        let key = (namespace.to_owned(), name.to_owned());
        let mut current = self.abnormal_by_csv.lock().unwrap_or_else(|p| p.into_inner());
        let wanted = (!succeeded).then(|| CsvAbnormalLabels {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            version: version.to_owned(),
            phase: phase.to_owned(),
            reason: reason.to_owned(),
        });
        if current.get(&key) == wanted.as_ref() {
            return;
        }
        if let Some(previous) = current.remove(&key) {
            self.csv_abnormal.remove(&previous);
        }
        if let Some(labels) = wanted {
            self.csv_abnormal.get_or_create(&labels).set(1);
            current.insert(key, labels);
        }
    }

    /// Forget every series of a CSV that no longer exists.
    pub fn forget_csv(&self, namespace: &str, name: &str, version: &str) {
        self.csv_succeeded.remove(&CsvLabels {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            version: version.to_owned(),
        });
        let mut current = self.abnormal_by_csv.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(previous) = current.remove(&(namespace.to_owned(), name.to_owned())) {
            self.csv_abnormal.remove(&previous);
        }
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
    fn csv_abnormal_keeps_only_the_current_phase() {
        let metrics = Metrics::new();
        metrics.observe_csv("ns", "etcd.v1", "1.0.0", "Pending", "RequirementsNotMet");
        metrics.observe_csv("ns", "etcd.v1", "1.0.0", "Installing", "InstallWaiting");
        let text = metrics.encode();
        assert!(text.contains(r#"csv_abnormal{namespace="ns",name="etcd.v1",version="1.0.0",phase="Installing",reason="InstallWaiting"} 1"#), "{text}");
        assert!(!text.contains("RequirementsNotMet"), "{text}");
        assert!(text.contains(r#"csv_succeeded{namespace="ns",name="etcd.v1",version="1.0.0"} 0"#), "{text}");
        metrics.observe_csv("ns", "etcd.v1", "1.0.0", "Succeeded", "InstallSucceeded");
        let text = metrics.encode();
        assert!(!text.contains("csv_abnormal{"), "{text}");
        assert!(text.contains(r#"csv_succeeded{namespace="ns",name="etcd.v1",version="1.0.0"} 1"#), "{text}");
        metrics.csv_upgrade_count.inc();
        assert!(metrics.encode().contains("\ncsv_upgrade_count 1\n"));
    }

    #[test]
    fn reconcile_metrics_are_labelled_by_controller_and_category() {
        let metrics = Metrics::new();
        metrics.observe_reconcile("csv", Duration::from_millis(3));
        metrics.observe_failure("csv", "ApiConflict");
        let text = metrics.encode();
        assert!(text.contains(r#"olm_controller_reconcile_total{controller="csv"} 1"#), "{text}");
        assert!(text.contains(r#"olm_controller_reconcile_failures_total{controller="csv",category="ApiConflict"} 1"#), "{text}");
    }
}
