//! Wiring of the catalog-operator controllers (CatalogSource, Subscription, InstallPlan) into
//! the manager: their caches, the shared catalog content cache, and their tasks.

use std::sync::Arc;

use kube::runtime::watcher;
use kube::{Api, Client};
use olm_api::v1::operator_group::OperatorGroup;
use olm_api::v1alpha1::catalog_source::CatalogSource;
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use olm_api::v1alpha1::install_plan::InstallPlan;
use olm_api::v1alpha1::subscription::Subscription;

use super::cache::CatalogCache;
use crate::runtime::shutdown::Shutdown;
use crate::runtime::{Cache, Caches, ControllerContext, Leadership, Metrics};
use crate::{catalogsource, installplan, subscription};

/// The namespace whose CatalogSources every namespace sees, unless
/// `OLM_GLOBAL_CATALOG_NAMESPACE` says otherwise (upstream's `--namespace` of the
/// catalog-operator, `olm` by default).
pub fn global_namespace() -> String {
    std::env::var("OLM_GLOBAL_CATALOG_NAMESPACE")
        .ok()
        .filter(|ns| !ns.trim().is_empty())
        .unwrap_or_else(|| "olm".to_owned())
}

/// Which catalog-operator controllers to run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Selection {
    /// The CatalogSource controller.
    pub catalogsource: bool,
    /// The Subscription controller.
    pub subscription: bool,
    /// The InstallPlan controller.
    pub installplan: bool,
}

/// What `start` needs from the manager.
pub struct Shared<'a> {
    /// The client.
    pub client: &'a Client,
    /// Process metrics.
    pub metrics: &'a Arc<Metrics>,
    /// Leadership.
    pub leadership: &'a Leadership,
    /// Shutdown signal.
    pub shutdown: &'a Shutdown,
    /// The CSV cache (shared with the CSV controller).
    pub csvs: &'a Cache<ClusterServiceVersion>,
    /// The OperatorGroup cache.
    pub groups: &'a Cache<OperatorGroup>,
}

/// Register the caches and start the selected controllers (call before `caches.start()`).
pub fn start(caches: &mut Caches, shared: Shared<'_>, selection: Selection) -> Vec<tokio::task::JoinHandle<()>> {
    let mut tasks = Vec::new();
    if selection == Selection::default() {
        return tasks;
    }
    let client = shared.client.clone();
    let content = CatalogCache::default();
    let catalogs = caches.watch(Api::<CatalogSource>::all(client.clone()), watcher::Config::default());
    let plans = caches.watch(Api::<InstallPlan>::all(client.clone()), watcher::Config::default());
    let context = |name: &'static str| (name, client.clone(), shared.metrics.clone(), shared.leadership.clone());
    if selection.catalogsource {
        let (name, client, metrics, leadership) = context(catalogsource::NAME);
        let state = catalogsource::CatalogSourceState {
            catalogs: catalogs.clone(),
            content: content.clone(),
        };
        let ctx = Arc::new(ControllerContext::new(name, client, metrics, leadership, state));
        tasks.push(tokio::spawn(catalogsource::run(ctx, shared.shutdown.signal())));
    }
    if selection.subscription {
        let (name, client, metrics, leadership) = context(subscription::NAME);
        let state = subscription::SubscriptionControllerState {
            subscriptions: caches.watch(Api::<Subscription>::all(client.clone()), watcher::Config::default()),
            plans: plans.clone(),
            csvs: shared.csvs.clone(),
            catalogs: catalogs.clone(),
            groups: shared.groups.clone(),
            content: content.clone(),
            global_namespace: global_namespace(),
            locks: subscription::NamespaceLocks::default(),
        };
        let ctx = Arc::new(ControllerContext::new(name, client, metrics, leadership, state));
        tasks.push(tokio::spawn(subscription::run(ctx, shared.shutdown.signal())));
    }
    if selection.installplan {
        let (name, client, metrics, leadership) = context(installplan::NAME);
        let state = installplan::InstallPlanState {
            plans: plans.clone(),
            groups: shared.groups.clone(),
            clients: crate::scoped_client::ScopedClients::new(client.clone()),
        };
        let ctx = Arc::new(ControllerContext::new(name, client.clone(), metrics, leadership, state));
        tasks.push(tokio::spawn(installplan::run(ctx, shared.shutdown.signal())));
    }
    tasks
}
