//! The Subscription controller's context: the caches it reads and what it shares with the rest
//! of the process, imported by `observe`, `act` and `reconcile`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use olm_api::v1::operator_group::OperatorGroup;
use olm_api::v1alpha1::catalog_source::CatalogSource;
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use olm_api::v1alpha1::install_plan::InstallPlan;
use olm_api::v1alpha1::subscription::Subscription;
use olm_catalog_client::CatalogCache;
use olm_runtime::Cache;

use crate::plan_write_failures::PlanWriteFailures;

/// One async lock per namespace, so two reconciles never plan for the same namespace at once.
#[derive(Clone, Default)]
pub struct NamespaceLocks(Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>);

impl NamespaceLocks {
    pub(super) fn get(&self, namespace: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.0.lock().unwrap_or_else(|p| p.into_inner());
        locks.entry(namespace.to_owned()).or_default().clone()
    }
}

/// What the Subscription controller reads.
#[derive(Clone)]
pub struct SubscriptionControllerState {
    /// Every Subscription.
    pub subscriptions: Cache<Subscription>,
    /// Every InstallPlan.
    pub plans: Cache<InstallPlan>,
    /// Every ClusterServiceVersion.
    pub csvs: Cache<ClusterServiceVersion>,
    /// Every CatalogSource.
    pub catalogs: Cache<CatalogSource>,
    /// Every OperatorGroup.
    pub groups: Cache<OperatorGroup>,
    /// Catalog content, filled by the CatalogSource controller.
    pub content: CatalogCache,
    /// The namespace whose catalogs every namespace sees (`olm` upstream).
    pub global_namespace: String,
    /// Per-namespace planning locks.
    pub locks: NamespaceLocks,
    /// The catalog-operator metrics.
    pub metrics: crate::catalog_metrics::CatalogMetrics,
    /// InstallPlans whose status the InstallPlan controller could not write.
    pub write_failures: PlanWriteFailures,
    /// Bundle images being pulled for plans.
    pub pulls: super::pulls::BundlePulls,
}
