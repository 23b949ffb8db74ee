//! Wires the runtime and the selected controllers together: caches, leader election, the admin
//! server and graceful shutdown. `olm run` and the integration tests both use this.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::runtime::watcher;
use kube::{Api, Client};
use olm_api::v1::olm_config::OLMConfig;
use olm_api::v1::operator_group::OperatorGroup;
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;

use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::core::PartialObjectMeta;
use olm_api::v1alpha1::install_plan::InstallPlan;
use olm_api::v1alpha1::subscription::Subscription;
use olm_runtime::leader::{self, LeaderElectionConfig, Leadership};
use olm_runtime::Cache;
use crate::operator::components::ComponentSource;
use olm_runtime::shutdown::Shutdown;
use olm_runtime::{Caches, ControllerContext, Metrics, Readiness, admin};
use crate::{csv, operatorgroup};

/// The controllers `olm run` can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ControllerKind {
    /// ClusterServiceVersion controller.
    Csv,
    /// OperatorGroup controller.
    OperatorGroup,
    /// CatalogSource controller (catalog-operator).
    CatalogSource,
    /// Subscription controller (catalog-operator).
    Subscription,
    /// InstallPlan controller (catalog-operator).
    InstallPlan,
    /// Operator controller (`operators.coreos.com/v1` Operator: an installed operator's components).
    Operator,
}

impl ControllerKind {
    /// Every controller, in start order.
    pub const ALL: [ControllerKind; 6] = [
        ControllerKind::OperatorGroup,
        ControllerKind::Csv,
        ControllerKind::CatalogSource,
        ControllerKind::Subscription,
        ControllerKind::InstallPlan,
        ControllerKind::Operator,
    ];

    /// The name used on the command line and in metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            ControllerKind::Csv => csv::NAME,
            ControllerKind::OperatorGroup => operatorgroup::NAME,
            ControllerKind::CatalogSource => crate::catalogsource::NAME,
            ControllerKind::Subscription => crate::subscription::NAME,
            ControllerKind::InstallPlan => crate::installplan::NAME,
            ControllerKind::Operator => crate::operator::NAME,
        }
    }
}

impl std::str::FromStr for ControllerKind {
    type Err = ManagerError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|kind| kind.as_str() == s.trim())
            .ok_or_else(|| ManagerError::UnknownController {
                name: s.to_owned(),
                known: Self::ALL.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(", "),
            })
    }
}

/// Why the controllers could not start.
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    /// `--controllers` named something that does not exist.
    #[error("unknown controller {name:?}; known controllers: {known}")]
    UnknownController {
        /// What was asked for.
        name: String,
        /// What exists.
        known: String,
    },
    /// The admin server could not listen.
    #[error("cannot listen on {addr} for /metrics, /healthz and /readyz: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
}

impl ManagerError {
    /// PascalCase category.
    pub fn category(&self) -> &'static str {
        match self {
            ManagerError::UnknownController { .. } => "UnknownController",
            ManagerError::Bind { .. } => "AdminBindFailed",
        }
    }

    /// Whether retrying may help.
    pub fn retryable(&self) -> bool {
        matches!(self, ManagerError::Bind { .. })
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct ManagerConfig {
    /// The controllers to run (empty = all).
    pub controllers: Vec<ControllerKind>,
    /// Where to serve `/metrics`, `/healthz`, `/readyz` (None = no admin server).
    pub admin_addr: Option<SocketAddr>,
    /// Lease-based leader election (None = always lead).
    pub leader_election: Option<LeaderElectionConfig>,
    /// Run the watch caches on a thread of their own, started with this function (None = on
    /// the caller's runtime). The binary binds that thread to an allocator arena of its own,
    /// so the objects the caches keep for long are not scattered among the short-lived
    /// allocations of reconciles (which would keep pages resident after a burst).
    pub cache_thread_init: Option<fn()>,
    /// Pulls catalog and bundle images (its cache and registry settings are the caller's).
    pub images: Arc<olm_image::ImageClient>,
    /// Controllers of other crates to run beside these, on the same caches, leader and
    /// shutdown (OLM v1's: `olm-controllers-v1`).
    pub extra: Vec<Arc<dyn olm_runtime::ControllerSet>>,
    /// The image of ConfigMap catalogs' registry pods, as upstream's `-configmapServerImage`
    /// (an olm image: the pod runs `olm catalog serve`); None: no such pods.
    pub configmap_server_image: Option<String>,
}

/// Running controllers; `stop` shuts them down gracefully.
pub struct Manager {
    shutdown: Shutdown,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    admin_addr: Option<SocketAddr>,
    metrics: Arc<Metrics>,
    readiness: Readiness,
    leadership: Leadership,
    caches: Caches,
}

impl Manager {
    /// Start the configured controllers against `client`.
    pub async fn start(client: Client, config: ManagerConfig) -> Result<Manager, ManagerError> {
        let kinds = if config.controllers.is_empty() {
            ControllerKind::ALL.to_vec()
        } else {
            config.controllers.clone()
        };
        let shutdown = Shutdown::default();
        let mut metrics = Metrics::new("olm_controller");
        let csv_metrics = csv::metrics::CsvMetrics::register(metrics.registry_mut());
        let catalog_metrics = crate::catalog_metrics::CatalogMetrics::register(metrics.registry_mut());
        let metrics = Arc::new(metrics);
        let readiness = Readiness::default();
        let mut caches = Caches::new(readiness.clone());
        if let Some(init) = config.cache_thread_init {
            caches = caches.on_own_thread(init);
        }
        let mut tasks = Vec::new();

        let (leadership, leader_task) = match config.leader_election.clone() {
            Some(election) => {
                let (leadership, task) = leader::start(client.clone(), election, shutdown.signal());
                (leadership, Some(task))
            }
            None => (Leadership::always(), None),
        };

        let csvs = caches.watch_trimmed(
            Api::<ClusterServiceVersion>::all(client.clone()),
            watcher::Config::default(),
            csv::decide::trim_cached_csv,
        );
        let groups = caches.watch(Api::<OperatorGroup>::all(client.clone()), watcher::Config::default());
        let namespaces = caches.watch(Api::<Namespace>::all(client.clone()), watcher::Config::default());
        let service_accounts = caches.watch(Api::<ServiceAccount>::all(client.clone()), watcher::Config::default());
        let cluster_roles = caches.watch_trimmed(
            Api::<ClusterRole>::all(client.clone()),
            watcher::Config::default().labels(&format!("{}=true", olm_api::keys::MANAGED_LABEL)),
            crate::rbac::trim_cached_cluster_role,
        );
        // The CSV and OperatorGroup controllers read the roles of one owner per pass.
        cluster_roles.index_by(crate::metadata::owner_index_keys::<ClusterRole>);
        // Every controller reads the CSVs and groups of one namespace per pass; the CSV and
        // OLMConfig controllers read an original's copies, or the originals (csv_index).
        crate::csv_index::index(&csvs);
        groups.index_namespaces();

        let runs = |kind: ControllerKind| kinds.contains(&kind);
        let crd_writes = crate::crd_writes::CrdWrites::default();
        // One Subscription cache for the CSV controller (spec.config), the Subscription
        // controller and the Operator controller.
        let subscriptions = (runs(ControllerKind::Csv) || runs(ControllerKind::Subscription) || runs(ControllerKind::Operator))
            .then(|| caches.watch(Api::<olm_api::v1alpha1::subscription::Subscription>::all(client.clone()), watcher::Config::default()));
        if let Some(subscriptions) = &subscriptions {
            subscriptions.index_namespaces();
        }
        // One InstallPlan cache for the catalog operator's controllers and the Operator controller.
        let plans = (runs(ControllerKind::Subscription) || runs(ControllerKind::InstallPlan) || runs(ControllerKind::CatalogSource) || runs(ControllerKind::Operator))
            .then(|| {
                caches.watch_trimmed(
                    Api::<olm_api::v1alpha1::install_plan::InstallPlan>::all(client.clone()),
                    watcher::Config::default(),
                    crate::catalog_operator::trim_finished_plan,
                )
            });
        if let Some(plans) = &plans {
            plans.index_namespaces();
        }
        // What the CSV controller reads and the Operator controller lists components from.
        let csv_caches = (runs(ControllerKind::Csv) || runs(ControllerKind::Operator)).then(|| CsvCaches::watch(&mut caches, &client));

        if kinds.contains(&ControllerKind::OperatorGroup) {
            let state = operatorgroup::OgState {
                groups: groups.clone(),
                csvs: csvs.clone(),
                namespaces: namespaces.clone(),
                cluster_roles: cluster_roles.clone(),
                service_accounts: service_accounts.clone(),
            };
            let ctx = Arc::new(ControllerContext::new(
                (crate::FIELD_MANAGER_PREFIX, operatorgroup::NAME),
                client.clone(),
                metrics.clone(),
                leadership.clone(),
                state,
            ));
            tasks.push(tokio::spawn(operatorgroup::run(ctx, shutdown.signal())));
        }
        if let (true, Some(shared)) = (runs(ControllerKind::Csv), &csv_caches) {
            let olm_configs = caches.watch(Api::<OLMConfig>::all(client.clone()), watcher::Config::default());
            // The OLMConfig status reports on the copies the CSV controller makes, so it runs with it.
            let olm_config_state = crate::olmconfig::OlmConfigState {
                olm_configs: olm_configs.clone(),
                csvs: csvs.clone(),
                namespaces: namespaces.clone(),
                pace: Default::default(),
            };
            let olm_config_ctx = Arc::new(ControllerContext::new(
                (crate::FIELD_MANAGER_PREFIX, crate::olmconfig::NAME),
                client.clone(),
                metrics.clone(),
                leadership.clone(),
                olm_config_state,
            ));
            tasks.push(tokio::spawn(crate::olmconfig::run(olm_config_ctx, shutdown.signal())));
            let state = csv::CsvState {
                csvs: csvs.clone(),
                groups: groups.clone(),
                crds: shared.crds.clone(),
                service_accounts: service_accounts.clone(),
                deployments: shared.deployments.clone(),
                verified_specs: csv::deployment::VerifiedSpecs::default(),
                namespaces: namespaces.clone(),
                cluster_roles: cluster_roles.clone(),
                olm_configs: olm_configs.clone(),
                operator_conditions: shared.operator_conditions.clone(),
                subscriptions: match &subscriptions {
                    Some(subscriptions) => subscriptions.clone(),
                    None => caches.watch(
                        Api::<olm_api::v1alpha1::subscription::Subscription>::all(client.clone()),
                        watcher::Config::default(),
                    ),
                },
                api_services: shared.api_services.clone(),
                validating_webhooks: caches.watch(
                    Api::<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration>::all(client.clone()),
                    watcher::Config::default().labels(&csv::reconcile::deployment_selector()),
                ),
                mutating_webhooks: caches.watch(
                    Api::<k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration>::all(client.clone()),
                    watcher::Config::default().labels(&csv::reconcile::deployment_selector()),
                ),
                serving_secrets: caches.watch_trimmed(
                    Api::<PartialObjectMeta<k8s_openapi::api::core::v1::Secret>>::all(client.clone()),
                    watcher::Config::default().labels(&csv::reconcile::deployment_selector()),
                    |secret| {
                        secret.metadata.annotations = None;
                        secret.metadata.managed_fields = None;
                    },
                ),
                managed_roles: caches.watch(
                    Api::<k8s_openapi::api::rbac::v1::Role>::all(client.clone()),
                    watcher::Config::default().labels(&format!("{}=true", olm_api::keys::MANAGED_LABEL)),
                ),
                managed_role_bindings: caches.watch(
                    Api::<k8s_openapi::api::rbac::v1::RoleBinding>::all(client.clone()),
                    watcher::Config::default().labels(&format!("{}=true", olm_api::keys::MANAGED_LABEL)),
                ),
                metrics: csv_metrics.clone(),
            };
            let ctx = Arc::new(ControllerContext::new((crate::FIELD_MANAGER_PREFIX, csv::NAME), client.clone(), metrics.clone(), leadership.clone(), state));
            tasks.push(tokio::spawn(csv::run(ctx, shutdown.signal())));
        }
        if let (true, Some(shared), Some(subscriptions), Some(plans)) = (runs(ControllerKind::Operator), &csv_caches, &subscriptions, &plans) {
            let state = crate::operator::OperatorState {
                operators: caches.watch_trimmed(
                    Api::<olm_api::v1::operator::Operator>::all(client.clone()),
                    watcher::Config::default(),
                    crate::operator::trim_cached_operator,
                ),
                sources: Arc::new(component_sources(&mut caches, &client, ComponentCaches {
                    namespaces: &namespaces,
                    service_accounts: &service_accounts,
                    csvs: &csvs,
                    subscriptions,
                    plans,
                    shared,
                })),
                subscriptions: subscriptions.clone(),
                csvs: csvs.clone(),
                crds: shared.crds.clone(),
                labelled: Default::default(),
                crd_writes: crd_writes.clone(),
                pacing: Default::default(),
            };
            let ctx = Arc::new(ControllerContext::new(
                (crate::FIELD_MANAGER_PREFIX, crate::operator::NAME),
                client.clone(),
                metrics.clone(),
                leadership.clone(),
                state,
            ));
            tasks.push(tokio::spawn(crate::operator::run(ctx, shutdown.signal())));
        }
        tasks.extend(crate::catalog_operator::start(
            &mut caches,
            crate::catalog_operator::Shared {
                client: &client,
                metrics: &metrics,
                catalog_metrics: &catalog_metrics,
                leadership: &leadership,
                shutdown: &shutdown,
                csvs: &csvs,
                groups: &groups,
                subscriptions: subscriptions.as_ref(),
                plans: plans.as_ref(),
                images: &config.images,
                configmap_server_image: config.configmap_server_image.as_deref(),
                crd_writes: &crd_writes,
                crds: csv_caches.as_ref().map(|shared| &shared.crds),
            },
            crate::catalog_operator::Selection {
                catalogsource: kinds.contains(&ControllerKind::CatalogSource),
                subscription: kinds.contains(&ControllerKind::Subscription),
                installplan: kinds.contains(&ControllerKind::InstallPlan),
            },
        ));
        for set in &config.extra {
            tasks.extend(set.start(olm_runtime::Wiring {
                client: &client,
                caches: &mut caches,
                metrics: &metrics,
                leadership: &leadership,
                shutdown: &shutdown,
            }));
        }
        caches.start().await;

        let admin_addr = match config.admin_addr {
            Some(addr) => {
                let (bound, task) = admin::serve(addr, metrics.clone(), readiness.clone(), shutdown.signal())
                    .await
                    .map_err(|source| ManagerError::Bind { addr, source })?;
                tasks.push(task);
                Some(bound)
            }
            None => None,
        };
        if let Some(task) = leader_task {
            tasks.push(task);
        }
        tracing::info!(
            controllers = ?kinds.iter().map(|k| k.as_str()).chain(config.extra.iter().flat_map(|set| set.names())).collect::<Vec<_>>(),
            admin = ?admin_addr,
            "controllers started"
        );
        Ok(Manager {
            shutdown,
            tasks,
            admin_addr,
            metrics,
            readiness,
            leadership,
            caches,
        })
    }

    /// The bound admin address, when the admin server runs.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin_addr
    }

    /// The process metrics.
    pub fn metrics(&self) -> Arc<Metrics> {
        self.metrics.clone()
    }

    /// Whether every cache finished its initial list.
    pub fn is_ready(&self) -> bool {
        self.readiness.is_ready()
    }

    /// Whether this replica currently leads.
    pub fn is_leader(&self) -> bool {
        self.leadership.is_leader()
    }

    /// Stop gracefully: controllers finish their running reconciles, the lease is released.
    /// Tasks still running after `grace` are aborted.
    pub async fn stop(self, grace: Duration) {
        self.shutdown.trigger();
        let Manager { tasks, caches, .. } = self;
        for task in tasks {
            let abort = task.abort_handle();
            if tokio::time::timeout(grace, task).await.is_err() {
                abort.abort();
            }
        }
        drop(caches);
        tracing::info!("controllers stopped");
    }
}

/// The caches the CSV controller reads that the Operator controller lists components from too.
struct CsvCaches {
    crds: Cache<CustomResourceDefinition>,
    deployments: Cache<Deployment>,
    operator_conditions: Cache<olm_api::v2::OperatorCondition>,
    api_services: Cache<APIService>,
}

impl CsvCaches {
    fn watch(caches: &mut Caches, client: &Client) -> Self {
        let watched = CsvCaches {
            crds: caches.watch_trimmed(
                Api::<CustomResourceDefinition>::all(client.clone()),
                watcher::Config::default(),
                csv::reconcile::trim_cached_crd,
            ),
            deployments: caches.watch_trimmed(
                Api::<Deployment>::all(client.clone()),
                watcher::Config::default().labels(&csv::reconcile::deployment_selector()),
                csv::deployment::trim_cached_deployment,
            ),
            operator_conditions: caches.watch(Api::<olm_api::v2::OperatorCondition>::all(client.clone()), watcher::Config::default()),
            api_services: caches.watch(Api::<APIService>::all(client.clone()), watcher::Config::default()),
        };
        // A CSV's pass reads its namespace's Deployments.
        watched.deployments.index_namespaces();
        watched
    }
}

/// The process's caches an Operator's components are listed from.
struct ComponentCaches<'a> {
    namespaces: &'a Cache<Namespace>,
    service_accounts: &'a Cache<ServiceAccount>,
    csvs: &'a Cache<ClusterServiceVersion>,
    subscriptions: &'a Cache<Subscription>,
    plans: &'a Cache<InstallPlan>,
    shared: &'a CsvCaches,
}

/// Where the Operator controller finds components: upstream's kinds. Kinds OLM already caches
/// whole are read from those caches (with their conditions); the others are watched for
/// their metadata only, which is all a component reference needs.
fn component_sources(caches: &mut Caches, client: &Client, from: ComponentCaches<'_>) -> Vec<Box<dyn ComponentSource>> {
    use crate::operator::components::{Source, conditions_from, csv_conditions};
    fn metadata<K>(caches: &mut Caches, client: &Client) -> Box<dyn ComponentSource>
    where
        K: kube::Resource<DynamicType = ()> + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
    {
        // Only the metadata, and of that only what a reference reads: the name, and the
        // component labels. Most of these objects are no component of any Operator (every
        // namespace's kube-root-ca.crt, the OperatorGroups' ClusterRoles): of those only the
        // name is kept, which is what tells that an object went or lost its labels.
        let cache = caches.watch_trimmed(Api::<PartialObjectMeta<K>>::all(client.clone()), watcher::Config::default(), |obj| {
            let labels = obj.metadata.labels.take().and_then(|mut labels| {
                labels.retain(|key, _| olm_api::keys::component_of([key]).next().is_some());
                (!labels.is_empty()).then_some(labels)
            });
            obj.metadata = kube::api::ObjectMeta {
                name: obj.metadata.name.take(),
                namespace: obj.metadata.namespace.take(),
                labels,
                ..Default::default()
            };
            obj.types = None;
        });
        Box::new(Source::new(cache))
    }
    vec![
        Box::new(Source::with_conditions(from.namespaces.clone(), |ns| {
            conditions_from(ns.status.as_ref().and_then(|s| s.conditions.as_ref()))
        })),
        Box::new(Source::new(from.service_accounts.clone())),
        Box::new(Source::with_conditions(from.csvs.clone(), csv_conditions).skipping(ClusterServiceVersion::is_copied)),
        Box::new(Source::with_conditions(from.subscriptions.clone(), |sub| {
            conditions_from(sub.status.as_ref().map(|s| &s.conditions))
        })),
        Box::new(Source::with_conditions(from.plans.clone(), |plan| {
            conditions_from(plan.status.as_ref().and_then(|s| s.conditions.as_ref()))
        })),
        Box::new(Source::with_conditions(from.shared.operator_conditions.clone(), |condition| {
            conditions_from(condition.status.as_ref().map(|s| &s.conditions))
        })),
        Box::new(Source::with_conditions(from.shared.crds.clone(), |crd| {
            conditions_from(crd.status.as_ref().and_then(|s| s.conditions.as_ref()))
        })),
        Box::new(Source::with_conditions(from.shared.api_services.clone(), |api| {
            conditions_from(api.status.as_ref().and_then(|s| s.conditions.as_ref()))
        })),
        Box::new(Source::with_conditions(from.shared.deployments.clone(), |deployment| {
            conditions_from(deployment.status.as_ref().and_then(|s| s.conditions.as_ref()))
        })),
        metadata::<k8s_openapi::api::core::v1::Service>(caches, client),
        metadata::<k8s_openapi::api::core::v1::ConfigMap>(caches, client),
        metadata::<k8s_openapi::api::core::v1::Secret>(caches, client),
        metadata::<k8s_openapi::api::rbac::v1::Role>(caches, client),
        metadata::<k8s_openapi::api::rbac::v1::RoleBinding>(caches, client),
        metadata::<ClusterRole>(caches, client),
        metadata::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>(caches, client),
    ]
}
