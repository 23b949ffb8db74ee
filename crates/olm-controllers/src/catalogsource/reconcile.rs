//! Observe → decide → act for CatalogSources: read the content into the shared cache when due
//! (`olm_catalog_client::read`, the package server's reader too: a catalog image is pulled and
//! loaded here, polled by digest), write the status.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::controller::{Action, Controller};
use kube::{Api, Resource, ResourceExt};
use olm_api::v1alpha1::catalog_source::CatalogSource;
use olm_catalog_client::location::{self, Location};
use olm_catalog_client::{CatalogState, ClientError, ConnectionState, ImageAccess, Read};
use olm_resolver::CatalogKey;
use tracing::instrument;

use super::decide::{self, StatusInputs};
pub use super::state::CatalogSourceState;
use olm_runtime::{ControllerContext, Error, EventNote, Result, error_policy, guarded};

/// Controller name: metric label, field manager `olm/catalogsource`.
pub const NAME: &str = "catalogsource";

#[instrument(skip_all, fields(kind = "CatalogSource", namespace = %catalog.namespace().unwrap_or_default(), name = %catalog.name_any()))]
async fn reconcile(catalog: Arc<CatalogSource>, ctx: Arc<ControllerContext<CatalogSourceState>>) -> Result<Action> {
    let state = &ctx.state;
    let key = location::key(&catalog);
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
    let location = match Location::of(&catalog) {
        Ok(location) => location,
        Err(message) => {
            inputs.spec_error = Some(message);
            state.content.remove(&key);
            ctx.status.apply(catalog.as_ref(), &decide::status(&catalog, &inputs, now)).await?;
            return Ok(Action::await_change());
        }
    };
    let previous = state.content.get(&key);

    // Observe the source and work out what identifies its content.
    let secrets = olm_catalog_client::pull_secrets(&ctx.client, &catalog)
        .await
        .map_err(|(what, err)| Error::api(what, err))?;
    let secret_versions = secrets.versions;
    inputs.secret_problems = secrets.problems;
    let access = ImageAccess { client: state.images.clone(), creds: secrets.creds };
    let mut configmap_data = None;
    let fingerprint = match &location {
        Location::Grpc(address) | Location::Http(address) => {
            inputs.address = Some(address.clone());
            format!("address={address}|secrets={secret_versions}")
        }
        Location::Image(image) => {
            inputs.polls = catalog.spec.update_strategy.as_ref().is_some_and(|u| u.registry_poll.is_some());
            inputs.address = Some(image.clone());
            format!("image={image}|secrets={secret_versions}")
        }
        Location::ConfigMap(name) => {
            let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &namespace);
            match api
                .get_opt(name)
                .await
                .map_err(|err| Error::api(format!("get ConfigMap {namespace}/{name}"), err))?
            {
                Some(cm) => {
                    let cm = ensure_owned(&api, cm, &catalog).await?;
                    let version = cm.resource_version().unwrap_or_default();
                    if let Some(image) = &state.configmap_server_image {
                        let served = (name.clone(), version.clone());
                        inputs.registry_pod = Some(super::registry_pod::ensure(&ctx, &catalog, served, image).await);
                    }
                    inputs.configmap = Some((name.clone(), cm.uid().unwrap_or_default(), version.clone()));
                    configmap_data = Some(cm.data.unwrap_or_default());
                    format!("configmap={name}@{version}")
                }
                None => {
                    let missing = ClientError::ConfigMapMissing { namespace: namespace.clone(), name: name.clone() };
                    inputs.configmap_error = Some(missing.to_string());
                    format!("configmap={name}@missing")
                }
            }
        }
    };

    let wait = decide::next_fetch(previous.as_ref(), &fingerprint, interval, now);
    let put_off = if wait.is_zero() {
        decide::configmap_read_delay(&catalog, &inputs, previous.as_ref(), &fingerprint, now)
    } else {
        None
    };
    let mut current = previous.clone();
    if wait.is_zero() && put_off.is_none() {
        let loaded = previous
            .as_ref()
            .filter(|p| p.fingerprint == fingerprint)
            .and_then(|p| p.content.clone());
        let result = olm_catalog_client::read(&catalog, &location, &access, configmap_data.as_ref(), loaded.as_ref())
            .await
            .map_err(|err| (err.to_string(), err.category()));
        let finished = Timestamp::now();
        let unchanged = matches!(result, Ok(Read::Unchanged(_)));
        let next = match result {
            Ok(read) => {
                let content = match read {
                    Read::Unchanged(content) => content,
                    Read::New(content) => {
                        let (packages, bundles) = content.counts();
                        tracing::info!(catalog = %key, packages, bundles, digest = ?content.image_digest, "catalog content read");
                        Arc::new(*content)
                    }
                };
                CatalogState {
                    connection: ConnectionState::Ready,
                    content: Some(content),
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
                failed_state(previous.as_ref(), &fingerprint, message, category, finished)
            }
        };
        record(&ctx, &key, &catalog, &inputs, previous.as_ref(), &next, unchanged).await;
        current = Some(next);
    } else if location.is_server()
        && let Some(ready) = previous.as_ref().filter(|p| p.healthy() && p.fingerprint == fingerprint)
    {
        // Between two reads (15 min apart by default), a connection says whether the server
        // still answers: a server that died is said within LIVENESS_RECHECK, and its
        // Subscriptions learn it, instead of at the next read.
        if let Err(err) = olm_catalog_client::probe(&location).await {
            tracing::warn!(catalog = %key, error.category = err.category(), "catalog server stopped answering: {err}");
            let next = failed_state(Some(ready), &fingerprint, err.to_string(), err.category(), Timestamp::now());
            record(&ctx, &key, &catalog, &inputs, previous.as_ref(), &next, false).await;
            current = Some(next);
        }
    }
    inputs.state = current.clone();
    observe_counts(&ctx);
    ctx.state.metrics
        .set_ready(&namespace, &key.name, current.as_ref().is_some_and(CatalogState::healthy));
    ctx.status.apply(catalog.as_ref(), &decide::status(&catalog, &inputs, now)).await?;

    let mut requeue = decide::next_fetch(current.as_ref(), &fingerprint, interval, Timestamp::now()).min(decide::SECRETS_RECHECK);
    if location.is_server() {
        requeue = requeue.min(decide::LIVENESS_RECHECK);
    }
    if inputs.configmap_error.is_some() {
        // Nothing to read until the ConfigMap appears: look again later, not at once.
        requeue = decide::CONFIGMAP_RECHECK;
    } else if matches!(location, Location::ConfigMap(_)) {
        requeue = requeue.min(decide::CONFIGMAP_RECHECK);
    }
    if let Some(delay) = put_off {
        requeue = requeue.min(delay);
    }
    Ok(Action::requeue(requeue.max(Duration::from_millis(200))))
}

/// The ConfigMap of a ConfigMap catalog, owned by its CatalogSource (not a controller,
/// never blocking deletion), as upstream makes it: deleting the CatalogSource deletes the
/// ConfigMap with it. One merge patch the first time, guarded by the resourceVersion read (a
/// concurrent change makes it fail and the reconcile retries).
async fn ensure_owned(api: &Api<ConfigMap>, cm: ConfigMap, catalog: &CatalogSource) -> Result<ConfigMap> {
    let mut owners = cm.metadata.owner_references.clone().unwrap_or_default();
    let Some(owner) = catalog.owner_ref(&()).filter(|o| !owners.iter().any(|existing| existing.uid == o.uid)) else {
        return Ok(cm);
    };
    owners.push(k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
        controller: Some(false),
        block_owner_deletion: Some(false),
        ..owner
    });
    let name = cm.name_any();
    let patch = serde_json::json!({"metadata": {"resourceVersion": cm.resource_version(), "ownerReferences": owners}});
    api.patch(&name, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch))
        .await
        .map_err(|err| Error::api(format!("make CatalogSource {} the owner of ConfigMap {}/{name}", catalog.name_any(), catalog.namespace().unwrap_or_default()), err))
}

/// The state after a failed read or probe: the last good content kept when only the
/// connection failed (a changed source makes the old content meaningless).
fn failed_state(previous: Option<&CatalogState>, fingerprint: &str, message: String, category: &'static str, at: Timestamp) -> CatalogState {
    let failures = previous.filter(|p| !p.healthy()).map_or(0, |p| p.failures) + 1;
    CatalogState {
        connection: ConnectionState::TransientFailure,
        content: previous.filter(|p| p.fingerprint == fingerprint).and_then(|p| p.content.clone()),
        last_error: Some(message),
        last_error_category: Some(category),
        last_connect: previous.and_then(|p| p.last_connect),
        last_attempt: Some(at),
        failures,
        fingerprint: fingerprint.to_owned(),
    }
}

/// Puts `next` in the content cache (waking the Subscriptions that read it, unless a poll
/// found the same content) with an Event when the catalog became ready or unhealthy.
async fn record(
    ctx: &ControllerContext<CatalogSourceState>,
    key: &CatalogKey,
    catalog: &CatalogSource,
    inputs: &StatusInputs,
    previous: Option<&CatalogState>,
    next: &CatalogState,
    unchanged: bool,
) {
    // What the status already says counts too: a restarted process reads every catalog
    // again, and a catalog READY before the restart has not become ready.
    let said = catalog.status.as_ref().and_then(|s| s.connection_state.as_ref()).map(|c| c.last_observed_state.as_str());
    let became_ready = next.healthy() && !previous.is_some_and(CatalogState::healthy) && said != Some(ConnectionState::Ready.as_str());
    let became_unhealthy = !next.healthy()
        && previous.is_none_or(CatalogState::healthy)
        && !(previous.is_none() && said == Some(next.connection.as_str()));
    let reference = catalog.object_ref(&());
    if became_ready {
        let from = inputs.address.clone().unwrap_or_else(|| "its ConfigMap".into());
        let note = EventNote::normal("CatalogSourceReady", "Connect", format!("catalog content read from {from}"));
        ctx.events.publish(&reference, &note).await;
    } else if became_unhealthy {
        let reason = next.last_error_category.unwrap_or("CatalogUnreachable");
        let note = EventNote::warning(reason, "Connect", next.last_error.clone().unwrap_or_default());
        ctx.events.publish(&reference, &note).await;
    }
    // A poll that found the same image changes nothing the Subscriptions read.
    if unchanged && !became_ready {
        ctx.state.content.set_quietly(key.clone(), next.clone());
    } else {
        ctx.state.content.set(key.clone(), next.clone());
    }
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
    let cache = state.content.clone();
    let metrics = ctx.state.metrics.clone();
    // A deleted CatalogSource: drop its content.
    let deletions = state.catalogs.deleted(move |catalog: &CatalogSource| {
        let key = location::key(catalog);
        cache.remove(&key);
        metrics.forget_catalog(&key.namespace, &key.name);
        tracing::info!(catalog = %key, "CatalogSource deleted; its content is dropped");
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
