//! The CSV controller's metrics, with upstream OLM's exact names (no prefix): `csv_count`,
//! `csv_succeeded`, `csv_abnormal`, `csv_upgrade_count`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

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

/// The CSV metrics; clones share the same series.
#[derive(Clone)]
pub struct CsvMetrics {
    /// `csv_count`: number of ClusterServiceVersions seen by the CSV controller.
    pub csv_count: Gauge,
    /// `csv_upgrade_count`: CSVs that entered `Replacing`. Upstream exposes it under exactly this
    /// name, so it is a monotonically increasing gauge (a prometheus-client counter would be
    /// exported as `csv_upgrade_count_total`).
    pub csv_upgrade_count: Gauge,
    csv_succeeded: Family<CsvLabels, Gauge>,
    csv_abnormal: Family<CsvAbnormalLabels, Gauge>,
    // The abnormal series currently exported per CSV, so a transition deletes the old one.
    abnormal_by_csv: Arc<Mutex<HashMap<(String, String), CsvAbnormalLabels>>>,
}

impl std::fmt::Debug for CsvMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CsvMetrics").finish_non_exhaustive()
    }
}

impl CsvMetrics {
    /// Create the metrics and register them (unprefixed, as upstream) in `registry`.
    pub fn register(registry: &mut Registry) -> CsvMetrics {
        let metrics = CsvMetrics {
            csv_count: Gauge::default(),
            csv_upgrade_count: Gauge::default(),
            csv_succeeded: Family::default(),
            csv_abnormal: Family::default(),
            abnormal_by_csv: Arc::default(),
        };
        registry.register("csv_count", "Number of CSVs successfully registered", metrics.csv_count.clone());
        registry.register(
            "csv_upgrade_count",
            "Monotonic count of CSV upgrades (CSVs that entered Replacing)",
            metrics.csv_upgrade_count.clone(),
        );
        registry.register(
            "csv_succeeded",
            "Successful CSV install: 1 when Succeeded, 0 otherwise",
            metrics.csv_succeeded.clone(),
        );
        registry.register(
            "csv_abnormal",
            "CSV is not Succeeded: the series names its phase and reason",
            metrics.csv_abnormal.clone(),
        );
        metrics
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_abnormal_keeps_only_the_current_phase() {
        let mut metrics = olm_runtime::Metrics::new("olm_controller");
        let csv = CsvMetrics::register(metrics.registry_mut());
        csv.observe_csv("ns", "etcd.v1", "1.0.0", "Pending", "RequirementsNotMet");
        csv.observe_csv("ns", "etcd.v1", "1.0.0", "Installing", "InstallWaiting");
        let text = metrics.encode();
        assert!(text.contains(r#"csv_abnormal{namespace="ns",name="etcd.v1",version="1.0.0",phase="Installing",reason="InstallWaiting"} 1"#), "{text}");
        assert!(!text.contains("RequirementsNotMet"), "{text}");
        assert!(text.contains(r#"csv_succeeded{namespace="ns",name="etcd.v1",version="1.0.0"} 0"#), "{text}");
        csv.observe_csv("ns", "etcd.v1", "1.0.0", "Succeeded", "InstallSucceeded");
        let text = metrics.encode();
        assert!(!text.contains("csv_abnormal{"), "{text}");
        assert!(text.contains(r#"csv_succeeded{namespace="ns",name="etcd.v1",version="1.0.0"} 1"#), "{text}");
        csv.csv_upgrade_count.inc();
        assert!(metrics.encode().contains("\ncsv_upgrade_count 1\n"));
    }
}
