//! Observe → decide → act for ClusterCatalogs: read what this process holds, [`decide::plan`],
//! pull (the one slow step, outside any lock), publish or withdraw the content,
//! [`decide::status`] and one status write. Every replica pulls and serves (the Service reaches
//! any of them); only the leader writes the status and Events.

use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::controller::{Action, Controller};
use olm_api::olmv1::ClusterCatalog;
use olm_catalog_client::{ClientError, ImageAccess, ImageFetch};
use olm_resolver::CatalogKey;
use olm_runtime::controller::action_for;
use olm_runtime::{ControllerContext, EventNote, Result, error_policy, guarded};
use tracing::instrument;

use super::decide::{self, Plan};
use super::{ClusterCatalogState, Failure, Held, Memory};

/// The leader's pass: serve, then write the status.
async fn reconcile(catalog: Arc<ClusterCatalog>, ctx: Arc<ControllerContext<ClusterCatalogState>>) -> Result<Action> {
    pass(catalog, ctx, true).await
}

#[instrument(skip_all, fields(kind = "ClusterCatalog", name = %catalog.name_any(), lead))]
async fn pass(catalog: Arc<ClusterCatalog>, ctx: Arc<ControllerContext<ClusterCatalogState>>, lead: bool) -> Result<Action> {
    let state = &ctx.state;
    let name = catalog.name_any();
    let memory = remembered(state, &name);
    let now = Timestamp::now();

    let memory = match decide::plan(&catalog, &memory, now) {
        Plan::Withdraw => {
            if memory.held.is_some() {
                state.publisher.withdraw(&name);
                tracing::info!(catalog = %name, "availabilityMode Unavailable: content no longer served");
            }
            forget(state, &name);
            Memory::default()
        }
        Plan::Wait => memory,
        Plan::Pull { image, known } => {
            let pulled = pull(state, &name, &image, known.as_deref()).await;
            remember(state, &name, pulled, &image, lead.then_some(ctx.as_ref()), &catalog).await
        }
    };

    let (status, requeue) = decide::status(&catalog, &memory, &state.base_url, Timestamp::now());
    if lead {
        ctx.status.apply_cluster(catalog.as_ref(), &status).await?;
    }
    Ok(action_for(requeue))
}

/// What a pull gave.
enum Pulled {
    New { content: olm_catalog_client::CatalogContent, took: std::time::Duration },
    Unchanged,
    Failed { message: String, blocked: bool, category: &'static str },
}

async fn pull(state: &ClusterCatalogState, name: &str, image: &str, known: Option<&str>) -> Pulled {
    // Cluster-scoped: no namespace, no pull secret of its own; the registry settings and node
    // credentials of the image client apply.
    let access = ImageAccess { client: state.images.clone(), creds: Default::default() };
    let key = CatalogKey::new(name, "");
    let started = Instant::now();
    // What opm's v0 model refuses and OLM v1 does without, as catalogd serves it: a package
    // without `defaultChannel` (v1 chooses among all channels when none is asked for), a
    // channel with several heads or entries off the replaces chain (v1 upgrades by version
    // and by each entry's edges, never "to the head"). Upstream's own e2e catalogs have both.
    match olm_catalog_client::fetch_image(&access, image, key, 0, known, &["MissingDefaultChannel", "MultipleHeads", "StrandedEntries"]).await {
        Ok(ImageFetch::Content(content)) => Pulled::New { content, took: started.elapsed() },
        Ok(ImageFetch::Unchanged { .. }) => Pulled::Unchanged,
        // Content at a digest never changes: only a new spec helps. A tag may be pushed or
        // fixed: tried again, more slowly each time (upstream says Retrying for both).
        Err(err) => Pulled::Failed { message: failure_message(image, &err), blocked: !err.retryable() && image.contains('@'), category: err.category() },
    }
}

/// The user's words for a failed pull: the image, what went wrong, and what to change.
fn failure_message(image: &str, err: &ClientError) -> String {
    match err {
        ClientError::Image { source, .. } => format!("source catalog content: {source}"),
        ClientError::Invalid { message, .. } => {
            format!("source catalog content: {image} is not a valid File-Based Catalog: {message}; fix the catalog and push it again, or point spec.source.image.ref at another image")
        }
        other => format!("source catalog content of {image}: {other}"),
    }
}

/// Record what the pull gave (and publish new content), returning what is now held.
async fn remember(
    state: &ClusterCatalogState,
    name: &str,
    pulled: Pulled,
    image: &str,
    events: Option<&ControllerContext<ClusterCatalogState>>,
    catalog: &ClusterCatalog,
) -> Memory {
    let now = Timestamp::now();
    let reference = kube::Resource::object_ref(catalog, &());
    let mut note = None;
    let memory = {
        let Ok(mut held) = state.held.lock() else { return Memory::default() };
        let memory = held.entry(name.to_owned()).or_default();
        match pulled {
            Pulled::New { content, took } => {
                let digest = content.image_digest.clone().unwrap_or_default();
                let resolved = olm_image::pinned(image, &digest).unwrap_or_else(|_| image.to_owned());
                let (packages, bundles) = content.counts();
                tracing::info!(catalog = %name, %resolved, packages, bundles, millis = took.as_millis() as u64, "catalog unpacked");
                state.publisher.publish(name, &content.catalog);
                note = Some(EventNote::normal("Unpacked", "Unpack", format!("serving {packages} packages, {bundles} bundles from {resolved}")));
                memory.held = Some(Held { image: image.to_owned(), resolved, digest, unpacked_at: now, polled_at: now, content: Arc::new(content) });
                memory.failure = None;
            }
            Pulled::Unchanged => {
                if let Some(held) = memory.held.as_mut() {
                    held.polled_at = now;
                }
                memory.failure = None;
            }
            Pulled::Failed { message, blocked, category } => {
                tracing::warn!(catalog = %name, error.category = category, "cannot unpack catalog: {message}");
                let attempts = memory.failure.as_ref().filter(|f| f.image == image).map_or(0, |f| f.attempts) + 1;
                if attempts == 1 {
                    note = Some(EventNote::warning(category, "Unpack", message.clone()));
                }
                memory.failure = Some(Failure { image: image.to_owned(), message, blocked, at: now, attempts });
            }
        }
        memory.clone()
    };
    if let (Some(note), Some(ctx)) = (note, events) {
        ctx.events.publish(&reference, &note).await;
    }
    memory
}

fn remembered(state: &ClusterCatalogState, name: &str) -> Memory {
    state.held.lock().ok().and_then(|held| held.get(name).cloned()).unwrap_or_default()
}

fn forget(state: &ClusterCatalogState, name: &str) {
    if let Ok(mut held) = state.held.lock() {
        held.remove(name);
    }
}

/// Build the controller (subscribes now; call before the caches start) and run it until
/// `shutdown` resolves.
pub fn run(
    ctx: Arc<ControllerContext<ClusterCatalogState>>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let state = ctx.state.clone();
    let store = state.catalogs.store().clone();
    let (held, publisher) = (state.held.clone(), state.publisher.clone());
    // A deleted ClusterCatalog: stop serving it and forget it (no finalizer: nothing outlives
    // OLM but memory, which goes with it).
    let deletions = state.catalogs.deleted(move |catalog: &ClusterCatalog| {
        let name = catalog.name_any();
        if held.lock().ok().and_then(|mut h| h.remove(&name)).is_some() {
            publisher.withdraw(&name);
            tracing::info!(catalog = %name, "ClusterCatalog deleted; its content is no longer served");
        }
    });
    let controller = Controller::for_shared_stream(state.catalogs.subscribe(), store)
        .with_config(olm_runtime::controller::controller_config())
        .reconcile_on(deletions)
        .reconcile_all_on(ctx.leadership.gained())
        .graceful_shutdown_on(shutdown);
    async move {
        state.catalogs.synced().await;
        controller
            .run(
                |catalog, ctx| async move {
                    if ctx.leadership.is_leader() { guarded(catalog, ctx, reconcile).await } else { pass(catalog, ctx, false).await }
                },
                error_policy,
                ctx,
            )
            .for_each(|_| futures::future::ready(()))
            .await;
    }
}
