//! Wiring of the catalog-operator controllers (CatalogSource, Subscription, InstallPlan) into
//! the manager: their caches, the shared catalog content cache, and their tasks.

use std::sync::Arc;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::runtime::watcher;
use kube::{Api, Client};
use olm_api::v1::operator_group::OperatorGroup;
use olm_api::v1alpha1::catalog_source::CatalogSource;
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use olm_api::v1alpha1::install_plan::{InstallPlan, InstallPlanPhase};
use olm_api::v1alpha1::subscription::Subscription;

use olm_catalog_client::CatalogCache;
use olm_runtime::shutdown::Shutdown;
use olm_runtime::{Cache, Caches, ControllerContext, Leadership, Metrics};
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
    /// The Subscription cache, when the manager has one (shared with the CSV controller).
    pub subscriptions: Option<&'a Cache<Subscription>>,
    /// The InstallPlan cache, when the manager has one (shared with the Operator controller).
    pub plans: Option<&'a Cache<InstallPlan>>,
    /// The catalog-operator metrics.
    pub catalog_metrics: &'a crate::catalog_metrics::CatalogMetrics,
    /// One writer at a time per CRD (shared with the Operator controller).
    pub crd_writes: &'a crate::crd_writes::CrdWrites,
    /// The CRD cache, when the manager has one (shared with the CSV and Operator controllers).
    pub crds: Option<&'a Cache<CustomResourceDefinition>>,
    pub images: &'a Arc<olm_image::ImageClient>,
    /// The image of ConfigMap catalogs' registry pods (none without it).
    pub configmap_server_image: Option<&'a str>,
}

/// What the cache keeps of a Complete plan: its phase, conditions and message (what a
/// Subscription reports), not its steps or bundle lookups. Nothing reads those again once the
/// plan is Complete, and the steps (with their object manifests) are most of a plan's size;
/// one plan stays per install in every namespace.
pub fn trim_finished_plan(plan: &mut InstallPlan) {
    if let Some(status) = plan.status.as_mut()
        && status.phase == InstallPlanPhase::Complete
    {
        status.plan = None;
        status.bundle_lookups = None;
        status.catalog_sources = Vec::new();
    }
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
    let plans = match shared.plans {
        Some(plans) => plans.clone(),
        None => caches.watch_trimmed(Api::<InstallPlan>::all(client.clone()), watcher::Config::default(), trim_finished_plan),
    };
    let write_failures = crate::plan_write_failures::PlanWriteFailures::default();
    let context = |name: &'static str| (name, client.clone(), shared.metrics.clone(), shared.leadership.clone());
    if selection.catalogsource {
        let (name, client, metrics, leadership) = context(catalogsource::NAME);
        let state = catalogsource::CatalogSourceState {
            catalogs: catalogs.clone(),
            content: content.clone(),
            metrics: shared.catalog_metrics.clone(),
            images: shared.images.clone(),
            configmap_server_image: shared.configmap_server_image.map(str::to_owned),
        };
        let ctx = Arc::new(ControllerContext::new((crate::FIELD_MANAGER_PREFIX, name), client, metrics, leadership, state));
        tasks.push(tokio::spawn(catalogsource::run(ctx, shared.shutdown.signal())));
    }
    if selection.subscription {
        let (name, client, metrics, leadership) = context(subscription::NAME);
        let state = subscription::SubscriptionControllerState {
            subscriptions: match shared.subscriptions {
                Some(subscriptions) => subscriptions.clone(),
                None => caches.watch(Api::<Subscription>::all(client.clone()), watcher::Config::default()),
            },
            plans: plans.clone(),
            csvs: shared.csvs.clone(),
            catalogs: catalogs.clone(),
            groups: shared.groups.clone(),
            content: content.clone(),
            global_namespace: global_namespace(),
            locks: subscription::NamespaceLocks::default(),
            metrics: shared.catalog_metrics.clone(),
            write_failures: write_failures.clone(),
            pulls: Default::default(),
        };
        let ctx = Arc::new(ControllerContext::new((crate::FIELD_MANAGER_PREFIX, name), client, metrics, leadership, state));
        tasks.push(tokio::spawn(subscription::run(ctx, shared.shutdown.signal())));
    }
    if selection.installplan {
        let (name, client, metrics, leadership) = context(installplan::NAME);
        let state = installplan::InstallPlanState {
            plans: plans.clone(),
            groups: shared.groups.clone(),
            csvs: shared.csvs.clone(),
            crd_writes: shared.crd_writes.clone(),
            crds: shared.crds.cloned(),
            clients: crate::scoped_client::ScopedClients::new(client.clone()),
            metrics: shared.catalog_metrics.clone(),
            write_failures,
        };
        let ctx = Arc::new(ControllerContext::new((crate::FIELD_MANAGER_PREFIX, name), client.clone(), metrics, leadership, state));
        tasks.push(tokio::spawn(installplan::run(ctx, shared.shutdown.signal())));
    }
    tasks
}

#[cfg(test)]
mod tests {
    use super::*;
    use olm_api::v1alpha1::install_plan::InstallPlanStatus;

    fn plan(phase: InstallPlanPhase) -> InstallPlan {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
            "metadata": {"name": "install-1", "namespace": "ns"},
            "spec": {"approval": "Automatic", "approved": true, "clusterServiceVersionNames": ["etcdoperator.v0.9.4"]},
            "status": {"phase": phase.as_str(), "catalogSources": [], "plan": [{
                "resolving": "etcdoperator.v0.9.4", "status": "Created",
                "resource": {"group": "operators.coreos.com", "version": "v1alpha1", "kind": "ClusterServiceVersion",
                             "name": "etcdoperator.v0.9.4", "sourceName": "community", "sourceNamespace": "olm",
                             "manifest": "{\"kind\":\"ClusterServiceVersion\"}"}
            }]}
        }))
        .expect("a valid InstallPlan")
    }

    fn manifests(plan: &InstallPlan) -> Vec<Option<String>> {
        let status: Option<&InstallPlanStatus> = plan.status.as_ref();
        status.and_then(|s| s.plan.as_ref()).into_iter().flatten().map(|s| s.resource.manifest.clone()).collect()
    }

    #[test]
    fn only_a_complete_plan_loses_its_steps() {
        let mut complete = plan(InstallPlanPhase::Complete);
        trim_finished_plan(&mut complete);
        assert_eq!(manifests(&complete), Vec::<Option<String>>::new());
        assert_eq!(complete.status.as_ref().map(|s| &s.phase), Some(&InstallPlanPhase::Complete), "the phase stays");

        let mut installing = plan(InstallPlanPhase::Installing);
        trim_finished_plan(&mut installing);
        assert_eq!(manifests(&installing), [Some("{\"kind\":\"ClusterServiceVersion\"}".to_owned())]);
    }
}
