//! Observe → decide → act for CatalogSources: read the content into the shared cache when due,
//! run the registry Pod and Service for image catalogs, write the status.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};
use olm_api::keys;
use olm_api::v1alpha1::catalog_source::CatalogSource;
use olm_resolver::CatalogKey;
use serde_json::json;
use tracing::instrument;

use olm_catalog_client::location::{self, Location, REGISTRY_PORT, Source};
use olm_catalog_client::{CatalogCache, CatalogState, ConnectionState, configmap};

use super::decide::{self, StatusInputs};
use olm_runtime::{Cache, ControllerContext, Error, EventNote, Result, error_policy, guarded};

/// Controller name: metric label, field manager `olm/catalogsource`.
pub const NAME: &str = "catalogsource";

/// What the CatalogSource controller reads and fills.
#[derive(Clone)]
pub struct CatalogSourceState {
    /// Every CatalogSource.
    pub catalogs: Cache<CatalogSource>,
    /// The content cache shared with the Subscription and InstallPlan controllers.
    pub content: CatalogCache,
    /// The catalog-operator metrics.
    pub metrics: crate::catalog_metrics::CatalogMetrics,
}

fn key_of(catalog: &CatalogSource) -> CatalogKey {
    CatalogKey::new(catalog.name_any(), catalog.namespace().unwrap_or_default())
}

fn priority_of(catalog: &CatalogSource) -> i32 {
    catalog
        .spec
        .priority
        .map(|p| i32::try_from(p).unwrap_or(if p < 0 { i32::MIN } else { i32::MAX }))
        .unwrap_or(0)
}

/// Server-side apply `object` with the controller's field manager.
async fn apply<K>(api: &Api<K>, name: &str, manager: &str, object: &serde_json::Value) -> Result<K>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(name, &PatchParams::apply(manager).force(), &Patch::Apply(object))
        .await
        .map_err(|err| Error::api(format!("apply {} {name}", K::kind(&())), err))
}

/// The ServiceAccount, Service and Pod of an image catalog. Returns the Service's name and
/// creation time.
async fn ensure_registry(
    ctx: &ControllerContext<CatalogSourceState>,
    catalog: &CatalogSource,
    image: &str,
    service: &str,
) -> Result<Option<Time>> {
    let namespace = catalog.namespace().unwrap_or_default();
    let name = catalog.name_any();
    let manager = ctx.field_manager();
    let owner = json!([{
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource", "name": name,
        "uid": catalog.uid().unwrap_or_default(), "controller": false, "blockOwnerDeletion": false,
    }]);
    let sa_api: Api<ServiceAccount> = Api::namespaced(ctx.client.clone(), &namespace);
    let pull_secrets: Vec<_> = catalog.spec.secrets.iter().flatten().map(|s| json!({"name": s})).collect();
    apply(
        &sa_api,
        &name,
        &manager,
        &json!({
            "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": namespace, "ownerReferences": owner},
            "imagePullSecrets": pull_secrets,
        }),
    )
    .await?;
    let svc_api: Api<Service> = Api::namespaced(ctx.client.clone(), &namespace);
    let applied = apply(
        &svc_api,
        service,
        &manager,
        &json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": service, "namespace": namespace, "ownerReferences": owner,
                         "labels": {keys::CATALOG_SOURCE_LABEL: name}},
            "spec": {"ports": [{"name": "grpc", "port": REGISTRY_PORT, "targetPort": REGISTRY_PORT, "protocol": "TCP"}],
                     "selector": {keys::CATALOG_SOURCE_LABEL: name}},
        }),
    )
    .await?;
    let pod_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
    let pod_name = format!("{service}-registry");
    // The pod spec is immutable: an image change replaces the pod.
    match pod_api
        .get_opt(&pod_name)
        .await
        .map_err(|err| Error::api(format!("get Pod {namespace}/{pod_name}"), err))?
    {
        Some(pod) => {
            let current = pod.spec.as_ref().and_then(|s| s.containers.first()).and_then(|c| c.image.clone());
            if current.as_deref() != Some(image) {
                pod_api
                    .delete(&pod_name, &DeleteParams::default())
                    .await
                    .map_err(|err| Error::api(format!("delete Pod {namespace}/{pod_name}"), err))?;
            }
        }
        None => {
            let probe = json!({"grpc": {"port": REGISTRY_PORT}, "periodSeconds": 10, "timeoutSeconds": 5});
            let config = catalog.spec.grpc_pod_config.clone().unwrap_or_default();
            apply(&pod_api, &pod_name, &manager, &json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": pod_name, "namespace": namespace, "ownerReferences": owner,
                             "labels": {keys::CATALOG_SOURCE_LABEL: name}},
                "spec": {
                    "serviceAccountName": name,
                    "nodeSelector": config.node_selector.unwrap_or_else(|| BTreeMap::from([("kubernetes.io/os".to_owned(), "linux".to_owned())])),
                    "tolerations": config.tolerations,
                    "affinity": config.affinity,
                    "priorityClassName": config.priority_class_name,
                    "containers": [{
                        "name": "registry-server", "image": image,
                        "ports": [{"name": "grpc", "containerPort": REGISTRY_PORT}],
                        "readinessProbe": probe, "livenessProbe": probe,
                        "startupProbe": {"grpc": {"port": REGISTRY_PORT}, "failureThreshold": 10, "periodSeconds": 10},
                        "resources": {"requests": {"cpu": "10m", "memory": "50Mi"}},
                    }],
                },
            }))
            .await?;
        }
    }
    Ok(applied.metadata.creation_timestamp)
}

#[instrument(skip_all, fields(kind = "CatalogSource", namespace = %catalog.namespace().unwrap_or_default(), name = %catalog.name_any()))]
async fn reconcile(catalog: Arc<CatalogSource>, ctx: Arc<ControllerContext<CatalogSourceState>>) -> Result<Action> {
    let state = &ctx.state;
    let key = key_of(&catalog);
    let namespace = key.namespace.clone();
    let now = Timestamp::now();
    observe_counts(&ctx);
    if catalog.meta().deletion_timestamp.is_some() {
        state.content.remove(&key);
        return Ok(Action::await_change());
    }
    let mut inputs = StatusInputs::default();
    let (interval, interval_error) = location::poll_interval(&catalog);
    inputs.interval_error = interval_error;
    let source = match location::source(&catalog) {
        Ok(source) => source,
        Err(message) => {
            inputs.spec_error = Some(message);
            state.content.remove(&key);
            ctx.status.apply(catalog.as_ref(), &decide::status(&catalog, &inputs, now)).await?;
            return Ok(Action::await_change());
        }
    };
    let previous = state.content.get(&key);

    // Observe the source and work out what identifies its content.
    let mut configmap_data = None;
    let remote = match location::location(&catalog, &source) {
        Location::Remote(remote) => Some(remote),
        Location::ConfigMap(_) => None,
    };
    let (location, fingerprint) = match &source {
        Source::Address(address) => {
            inputs.address = Some(address.clone());
            (remote, format!("address={address}"))
        }
        Source::Image { image, service } => {
            let created = ensure_registry(&ctx, &catalog, image, service).await?;
            inputs.registry_service = Some((service.clone(), created));
            inputs.polls = catalog.spec.update_strategy.as_ref().is_some_and(|u| u.registry_poll.is_some());
            inputs.address = remote.as_ref().map(|remote| remote.address().to_owned());
            (remote, format!("image={image}"))
        }
        Source::ConfigMap(name) => {
            let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &namespace);
            match api
                .get_opt(name)
                .await
                .map_err(|err| Error::api(format!("get ConfigMap {namespace}/{name}"), err))?
            {
                Some(cm) => {
                    let version = cm.resource_version().unwrap_or_default();
                    inputs.configmap = Some((name.clone(), cm.uid().unwrap_or_default(), version.clone()));
                    configmap_data = Some(cm.data.unwrap_or_default());
                    (None, format!("configmap={name}@{version}"))
                }
                None => {
                    inputs.configmap_error = Some(format!("ConfigMap {namespace}/{name} (spec.configMap) does not exist"));
                    (None, format!("configmap={name}@missing"))
                }
            }
        }
    };

    let wait = decide::next_fetch(previous.as_ref(), &fingerprint, interval, now);
    let mut current = previous.clone();
    if wait.is_zero() {
        let result = match (&location, &configmap_data) {
            (Some(location), _) => olm_catalog_client::fetch(location, key.clone(), priority_of(&catalog))
                .await
                .map_err(|err| (err.to_string(), err.category())),
            (None, Some(data)) => configmap::content(key.clone(), priority_of(&catalog), data).map_err(|message| {
                (
                    format!(
                        "ConfigMap {namespace}/{}: {message}",
                        catalog.spec.config_map.clone().unwrap_or_default()
                    ),
                    "InvalidCatalogContent",
                )
            }),
            (None, None) => Err((
                inputs
                    .configmap_error
                    .clone()
                    .unwrap_or_else(|| "the spec names no source".to_owned()),
                "ConfigMapError",
            )),
        };
        let finished = Timestamp::now();
        let next = match result {
            Ok(content) => {
                let (packages, bundles) = content.counts();
                tracing::info!(catalog = %key, packages, bundles, "catalog content read");
                CatalogState {
                    connection: ConnectionState::Ready,
                    content: Some(Arc::new(content)),
                    last_error: None,
                    last_error_category: None,
                    last_connect: Some(finished),
                    last_attempt: Some(finished),
                    failures: 0,
                    fingerprint: fingerprint.clone(),
                }
            }
            Err((message, category)) => {
                tracing::warn!(catalog = %key, error.category = category, "cannot read catalog: {message}");
                let failures = previous.as_ref().filter(|p| !p.healthy()).map_or(0, |p| p.failures) + 1;
                CatalogState {
                    connection: ConnectionState::TransientFailure,
                    // Keep the last good content when only the connection failed; a changed
                    // source makes the old content meaningless.
                    content: previous
                        .as_ref()
                        .filter(|p| p.fingerprint == fingerprint)
                        .and_then(|p| p.content.clone()),
                    last_error: Some(message),
                    last_error_category: Some(category),
                    last_connect: previous.as_ref().and_then(|p| p.last_connect),
                    last_attempt: Some(finished),
                    failures,
                    fingerprint: fingerprint.clone(),
                }
            }
        };
        let became_ready = next.healthy() && !previous.as_ref().is_some_and(CatalogState::healthy);
        let became_unhealthy = !next.healthy() && previous.as_ref().is_none_or(CatalogState::healthy);
        let reference = catalog.object_ref(&());
        if became_ready {
            ctx.events
                .publish(
                    &reference,
                    &EventNote::normal(
                        "CatalogSourceReady",
                        "Connect",
                        format!(
                            "catalog content read from {}",
                            inputs.address.clone().unwrap_or_else(|| "its ConfigMap".into())
                        ),
                    ),
                )
                .await;
        } else if became_unhealthy {
            ctx.events
                .publish(
                    &reference,
                    &EventNote::warning(
                        next.last_error_category.unwrap_or("CatalogUnreachable"),
                        "Connect",
                        next.last_error.clone().unwrap_or_default(),
                    ),
                )
                .await;
        }
        state.content.set(key.clone(), next.clone());
        current = Some(next);
    }
    inputs.state = current.clone();
    observe_counts(&ctx);
    ctx.state.metrics
        .set_ready(&namespace, &key.name, current.as_ref().is_some_and(CatalogState::healthy));
    ctx.status.apply(catalog.as_ref(), &decide::status(&catalog, &inputs, now)).await?;

    let mut requeue = decide::next_fetch(current.as_ref(), &fingerprint, interval, Timestamp::now());
    if inputs.configmap_error.is_some() {
        // Nothing to read until the ConfigMap appears: look again later, not at once.
        requeue = decide::CONFIGMAP_RECHECK;
    } else if matches!(source, Source::ConfigMap(_)) {
        requeue = requeue.min(decide::CONFIGMAP_RECHECK);
    }
    Ok(Action::requeue(requeue.max(Duration::from_millis(200))))
}

fn observe_counts(ctx: &ControllerContext<CatalogSourceState>) {
    let count = ctx.state.catalogs.store().len();
    ctx.state.metrics
        .catalog_source_count
        .set(i64::try_from(count).unwrap_or(i64::MAX));
}

/// Build the CatalogSource controller (subscribes now; call before the caches start) and run it
/// until `shutdown` resolves.
pub fn run(
    ctx: Arc<ControllerContext<CatalogSourceState>>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let state = ctx.state.clone();
    let store = state.catalogs.store().clone();
    let deletions_store = store.clone();
    let cache = state.content.clone();
    let metrics = ctx.state.metrics.clone();
    // A deleted CatalogSource leaves the store: drop its content.
    let deletions = state.catalogs.subscribe().filter_map(move |catalog: Arc<CatalogSource>| {
        let key = key_of(&catalog);
        if deletions_store.get(&ObjectRef::from_obj(catalog.as_ref())).is_none() {
            cache.remove(&key);
            metrics.forget_catalog(&key.namespace, &key.name);
            tracing::info!(catalog = %key, "CatalogSource deleted; its content is dropped");
        }
        futures::future::ready(None::<ObjectRef<CatalogSource>>)
    });
    let controller = Controller::for_shared_stream(state.catalogs.subscribe(), store)
        .with_config(olm_runtime::controller::controller_config())
        .reconcile_on(deletions)
        .reconcile_all_on(ctx.leadership.gained())
        .graceful_shutdown_on(shutdown);
    async move {
        state.catalogs.synced().await;
        controller
            .run(|catalog, ctx| guarded(catalog, ctx, reconcile), error_policy, ctx)
            .for_each(|_| futures::future::ready(()))
            .await;
    }
}

/// Whether a CatalogSource change matters to resolution in `namespace` (its own namespace,
/// or the global catalog namespace).
pub fn visible_from(catalog_namespace: &str, namespace: &str, global_namespace: &str) -> bool {
    catalog_namespace == namespace || catalog_namespace == global_namespace
}
