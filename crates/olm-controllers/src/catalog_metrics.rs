//! The catalog-operator metrics, with upstream's names: `catalog_source_count`,
//! `catalogsource_ready`, `subscription_count`, `subscription_sync_total`, `install_plan_count`,
//! `installplan_warnings_total` (counted in the client: `olm_runtime::warnings`), and
//! `olm_resolution_duration_seconds` (a histogram here; upstream's is a summary).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels of `catalogsource_ready`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CatalogLabels {
    /// Catalog namespace.
    pub namespace: String,
    /// Catalog name.
    pub name: String,
}

/// Labels of `subscription_sync_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SubscriptionSyncLabels {
    /// Subscription name.
    pub name: String,
    /// `status.installedCSV`.
    pub installed: String,
    /// `spec.channel`.
    pub channel: String,
    /// `spec.name`.
    pub package: String,
    /// `spec.installPlanApproval`.
    pub approval: String,
}

/// Labels of `olm_resolution_duration_seconds`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// `succeeded` or `failed`.
    pub outcome: String,
}

/// The catalog-operator metrics.
#[derive(Clone)]
pub struct CatalogMetrics {
    /// `catalog_source_count`.
    pub catalog_source_count: Gauge,
    ready: Family<CatalogLabels, Gauge>,
    /// `subscription_count`.
    pub subscription_count: Gauge,
    sync: Family<SubscriptionSyncLabels, Counter>,
    /// `install_plan_count`.
    pub install_plan_count: Gauge,
    /// `installplan_warnings_total`: the API server's warnings to the InstallPlan controller's
    /// requests (counted in the client, `olm_runtime::warnings`).
    warnings: Counter,
    resolution: Family<OutcomeLabels, Histogram>,
}

impl std::fmt::Debug for CatalogMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CatalogMetrics").finish_non_exhaustive()
    }
}

impl CatalogMetrics {
    /// Create the metrics and register them (unprefixed, as upstream) in `registry`.
    pub fn register(registry: &mut Registry) -> CatalogMetrics {
        let metrics = CatalogMetrics {
            catalog_source_count: Gauge::default(),
            ready: Family::default(),
            subscription_count: Gauge::default(),
            sync: Family::default(),
            install_plan_count: Gauge::default(),
            warnings: olm_runtime::warnings::warnings_of(&format!("{}/{}", crate::FIELD_MANAGER_PREFIX, crate::installplan::NAME)),
            resolution: Family::new_with_constructor(|| Histogram::new(exponential_buckets(0.0005, 2.0, 16))),
        };
        registry.register(
            "catalog_source_count",
            "Number of catalog sources",
            metrics.catalog_source_count.clone(),
        );
        registry.register(
            "catalogsource_ready",
            "State of a CatalogSource: 1 when its content can be read",
            metrics.ready.clone(),
        );
        registry.register("subscription_count", "Number of Subscriptions", metrics.subscription_count.clone());
        registry.register("subscription_sync", "Monotonic count of Subscription syncs", metrics.sync.clone());
        registry.register("install_plan_count", "Number of InstallPlans", metrics.install_plan_count.clone());
        registry.register(
            "installplan_warnings",
            "Warnings the API server returned while applying InstallPlan steps",
            metrics.warnings.clone(),
        );
        registry.register(
            "olm_resolution_duration_seconds",
            "Time spent resolving a namespace",
            metrics.resolution.clone(),
        );
        metrics
    }

    /// Set `catalogsource_ready` of one catalog.
    pub fn set_ready(&self, namespace: &str, name: &str, ready: bool) {
        self.ready
            .get_or_create(&CatalogLabels {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            })
            .set(i64::from(ready));
    }

    /// Drop the series of a deleted catalog.
    pub fn forget_catalog(&self, namespace: &str, name: &str) {
        self.ready.remove(&CatalogLabels {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        });
    }

    /// Count one Subscription sync.
    pub fn subscription_synced(&self, labels: SubscriptionSyncLabels) {
        self.sync.get_or_create(&labels).inc();
    }

    /// Record how long one resolution took.
    pub fn resolution(&self, succeeded: bool, seconds: f64) {
        let outcome = if succeeded { "succeeded" } else { "failed" };
        self.resolution
            .get_or_create(&OutcomeLabels {
                outcome: outcome.to_owned(),
            })
            .observe(seconds);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_names_are_exported() {
        let mut registry = Registry::default();
        let metrics = CatalogMetrics::register(&mut registry);
        metrics.catalog_source_count.set(2);
        metrics.set_ready("olm", "community", true);
        metrics.subscription_synced(SubscriptionSyncLabels {
            name: "etcd".into(),
            installed: "etcdoperator.v0.9.4".into(),
            channel: "singlenamespace-alpha".into(),
            package: "etcd".into(),
            approval: "Automatic".into(),
        });
        olm_runtime::warnings::warnings_of("olm/installplan").inc_by(2);
        metrics.resolution(true, 0.01);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        assert!(text.contains("\ncatalog_source_count 2\n"), "{text}");
        assert!(
            text.contains(r#"catalogsource_ready{namespace="olm",name="community"} 1"#),
            "{text}"
        );
        assert!(text.contains(r#"subscription_sync_total{name="etcd",installed="etcdoperator.v0.9.4",channel="singlenamespace-alpha",package="etcd",approval="Automatic"} 1"#), "{text}");
        let warnings = text.lines().find_map(|l| l.strip_prefix("installplan_warnings_total ")).and_then(|v| v.parse::<u64>().ok());
        assert!(warnings.is_some_and(|w| w >= 2), "{text}");
        assert!(
            text.contains(r#"olm_resolution_duration_seconds_count{outcome="succeeded"} 1"#),
            "{text}"
        );
    }
}
