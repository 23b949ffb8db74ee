//! The Operator controller (`operators.coreos.com/v1` Operator, cluster-scoped), as upstream's:
//! an Operator `<package>.<namespace>` gathers every object labelled
//! `operators.coreos.com/<package>.<namespace>` — its Subscription, InstallPlans, CSV, CRDs,
//! ServiceAccounts, RBAC, Deployments, and anything a user labels so — and lists them with
//! their conditions in `status.components`, so that `kubectl get operators` shows what is
//! installed and `kubectl get operator X -o yaml` what belongs to it.
//!
//! Objects get the label where they are made: InstallPlan steps label every object of a bundle
//! (`plan_steps`; a shared CRD keeps the labels of every install, see `installplan::shared_crd`),
//! the Subscription controller its InstallPlans, and the CSV controller what it creates for a
//! labelled CSV. This controller labels what a user made: the Subscription, and the CSV it
//! installed when that CSV has no label (an install made before OLM labelled); and, as
//! upstream's adoption does, the CRDs the Operator's CSVs own when they lack the label (CRDs
//! installed otherwise), listing them by ownership meanwhile. An Operator is created when something is labelled for it; deleted while
//! components remain, it comes back (upstream's behaviour); deleted once none remain, it
//! stays deleted.

mod backlog;
pub mod components;
pub mod pacing;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt as _, StreamExt as _};
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};
use olm_api::keys;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use olm_api::v1::operator::{Operator, OperatorSpec, OperatorStatus, RichReference};
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use olm_api::v1alpha1::subscription::Subscription;
use serde_json::json;
use tracing::instrument;

use olm_runtime::{Cache, ControllerContext, Error, Result, error_policy, guarded};

use components::{ComponentSource, desired_status, owned_crd_refs};

/// Controller name: metric label, field manager `olm/operator`.
pub const NAME: &str = "operator";

/// How often every labelled object is checked for a missing Operator or label (what a failed
/// create or patch left behind is retried then).
const SWEEP: Duration = Duration::from_secs(60);

/// The annotation the Operator cache keeps in place of an Operator's status: a digest of it.
/// Only in the cache; never written.
const CACHED_STATUS_DIGEST: &str = "olm.rs/cached-status-digest";

/// What the Operator cache keeps of an Operator: everything but its status, which lists every
/// component with its conditions (the most of an Operator, several KiB per install at 1,000
/// namespaces) and is read only to tell whether the status changed; its digest instead.
pub fn trim_cached_operator(operator: &mut Operator) {
    let digest = status_digest(operator.status.take().as_ref());
    operator.annotations_mut().insert(CACHED_STATUS_DIGEST.into(), digest);
}

/// A digest of a status as status writes compare them: timestamps and nulls left out, no
/// status the same as an empty one.
fn status_digest(status: Option<&OperatorStatus>) -> String {
    let value = status.map_or_else(|| json!({}), |s| serde_json::to_value(s).unwrap_or_default());
    format!("{:016x}", olm_runtime::cache::digest(olm_runtime::status::without_timestamps(&value).to_string()))
}

/// The digest of the status an Operator of the cache has (an untrimmed one's, computed).
fn observed_status_digest(operator: &Operator) -> String {
    match operator.annotations().get(CACHED_STATUS_DIGEST) {
        Some(digest) => digest.clone(),
        None => status_digest(operator.status.as_ref()),
    }
}

/// The caches the Operator controller reads.
#[derive(Clone)]
pub struct OperatorState {
    /// Every Operator.
    pub operators: Cache<Operator>,
    /// Where components are found, one source per kind.
    pub sources: Arc<Vec<Box<dyn ComponentSource>>>,
    /// Every Subscription (labelled for its Operator here).
    pub subscriptions: Cache<Subscription>,
    /// Every CSV (the installed CSV of a Subscription is labelled when it has no label; the
    /// CRDs labelled CSVs own are components).
    pub csvs: Cache<ClusterServiceVersion>,
    /// Every CRD (trimmed).
    pub crds: Cache<CustomResourceDefinition>,
    /// The labels this controller added lately.
    pub labelled: Labelled,
    /// One writer at a time per CRD (shared with the InstallPlan controller).
    pub crd_writes: crate::crd_writes::CrdWrites,
    /// When Operators' statuses were written: while many are, each waits its turn.
    pub pacing: pacing::Pacing,
}

/// How long a label this controller added is taken as there while the watch cache may not
/// show it yet.
const LABEL_SETTLES: Duration = Duration::from_secs(30);

/// The labels this controller added in the last [`LABEL_SETTLES`], by object and label: the
/// events of a new Subscription (and the reconciles of a new Operator) come faster than its
/// label reaches the cache, and each would label it again (4.5 patches per install, each a
/// write that wakes every watcher of the kind; for a shared CRD an object as large as the
/// installs of its operator). A label removed since is added again once this has passed, by the
/// next event or the sweep.
#[derive(Clone, Default)]
pub struct Labelled(Arc<std::sync::Mutex<std::collections::HashMap<(String, String), std::time::Instant>>>);

impl Labelled {
    /// Whether `label` on `object` (`Kind namespace/name`) was added lately; if not, it is
    /// recorded as added `now` (the caller adds it).
    pub fn lately_or_now(&self, object: &str, label: &str, now: std::time::Instant) -> bool {
        let mut added = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        added.retain(|_, at| now.duration_since(*at) < LABEL_SETTLES);
        let key = (object.to_owned(), label.to_owned());
        if added.contains_key(&key) {
            return true;
        }
        added.insert(key, now);
        false
    }

    /// Forget `label` on `object`: adding it failed (the next event or sweep tries again).
    pub fn failed(&self, object: &str, label: &str) {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).remove(&(object.to_owned(), label.to_owned()));
    }
}

impl OperatorState {
    fn has_components(&self, label: &str) -> bool {
        self.sources.iter().any(|source| source.has(label))
    }
}

#[instrument(skip_all, fields(kind = "Operator", namespace = "", name = %operator.name_any()))]
async fn reconcile(operator: Arc<Operator>, ctx: Arc<ControllerContext<OperatorState>>) -> Result<Action> {
    if operator.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let Some(label) = keys::operator_component_label(&operator.name_any()) else {
        return Ok(Action::await_change());
    };
    let state = &ctx.state;
    let labels_failed = adopt_owned_crds(&ctx, &label).await;
    let mut refs: Vec<RichReference> = state.sources.iter().flat_map(|source| source.refs(&label)).collect();
    for crd in owned_crd_refs(&components::labelled(&state.csvs, &label), &state.crds, &label) {
        // A CRD a user labelled as well is listed once.
        if !refs.iter().any(|r| r.object == crd.object) {
            refs.push(crd);
        }
    }
    let status = desired_status(&label, refs);
    if observed_status_digest(&operator) != status_digest(Some(&status)) {
        let name = operator.name_any();
        if let Some(wait) = state.pacing.wait(&name, std::time::Instant::now()) {
            // The pass after the wait writes what has changed by then.
            return Ok(Action::requeue(wait));
        }
        ctx.status.apply_cluster(operator.as_ref(), &status).await?;
        state.pacing.wrote(&name, std::time::Instant::now());
    }
    Ok(if labels_failed { Action::requeue(SWEEP) } else { Action::await_change() })
}

/// Create the Operator `name` when something is labelled for it and it does not exist.
async fn ensure_operator(ctx: &ControllerContext<OperatorState>, name: &str) {
    let state = &ctx.state;
    if state.operators.get(None, name).is_some() {
        return;
    }
    let Some(label) = keys::operator_component_label(name) else {
        return;
    };
    if !state.has_components(&label) {
        return;
    }
    let params = PostParams {
        field_manager: Some(ctx.field_manager()),
        ..Default::default()
    };
    match Api::<Operator>::all(ctx.client.clone()).create(&params, &Operator::new(name, OperatorSpec {})).await {
        Ok(_) => tracing::info!(operator = name, "created the Operator of labelled components"),
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        // A hand-made label whose name is no valid object name: nothing to create, ever.
        Err(kube::Error::Api(status)) if status.code == 422 => {
            tracing::debug!(operator = name, reason = %status.message, "labelled components name no valid Operator");
        }
        Err(err) => tracing::warn!(operator = name, error = %Error::api(format!("create the Operator {name}"), err), "retried within a minute"),
    }
}

/// Label `obj` (a Subscription, or the CSV it installed) for the Operator `label` names.
async fn adopt<K>(ctx: &ControllerContext<OperatorState>, obj: &K, label: &str)
where
    K: kube::Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    if obj.labels().contains_key(label) || obj.meta().deletion_timestamp.is_some() {
        return;
    }
    let namespace = obj.namespace().unwrap_or_default();
    let object = format!("{} {namespace}/{}", K::kind(&()), obj.name_any());
    if ctx.state.labelled.lately_or_now(&object, label, std::time::Instant::now()) {
        return;
    }
    let patch = json!({"metadata": {"labels": {label: ""}}});
    let params = PatchParams {
        field_manager: Some(ctx.field_manager()),
        ..Default::default()
    };
    if let Err(err) = Api::<K>::namespaced(ctx.client.clone(), &namespace).patch(&obj.name_any(), &params, &Patch::Merge(&patch)).await {
        ctx.state.labelled.failed(&object, label);
        tracing::warn!(error = %Error::api(format!("label {object} for its Operator"), err), "retried within a minute");
    }
}

/// Label the CRDs the Operator's CSVs own, as upstream's adoption does, with a merge patch (so
/// that the label of every operator installed with a shared CRD stays): `kubectl operator
/// uninstall --delete-all` deletes the CRDs it finds among the Operator's components after the
/// CSV is gone. Only a CRD without the label is written: a plan's CRD step applies the label
/// itself, so this writes CRDs installed otherwise (by hand, by another OLM, before the
/// Subscription was labelled). True when labelling one failed.
async fn adopt_owned_crds(ctx: &ControllerContext<OperatorState>, label: &str) -> bool {
    let state = &ctx.state;
    let names: BTreeSet<String> = components::labelled(&state.csvs, label)
        .iter()
        // A CSV being migrated hands its CRDs to an OLM v1 ClusterExtension, which removes the label.
        .filter(|csv| !csv.is_copied() && !csv.annotations().contains_key(keys::MIGRATING_TO_ANNOTATION))
        .flat_map(|csv| csv.spec.owned_crds().iter().map(|crd| crd.name.clone()).collect::<Vec<_>>())
        .collect();
    let mut failed = false;
    for name in names {
        let Some(crd) = state.crds.get(None, &name) else { continue };
        let object = format!("CustomResourceDefinition {name}");
        let now = std::time::Instant::now();
        if crd.labels().contains_key(label) || state.crd_writes.labelled_lately(&name, label, now) || state.labelled.lately_or_now(&object, label, now) {
            continue;
        }
        let patch = json!({"metadata": {"labels": {label: ""}}});
        let params = PatchParams {
            field_manager: Some(ctx.field_manager()),
            ..Default::default()
        };
        let _write = state.crd_writes.lock(&name).await;
        // A plan's write may have carried the label while this waited for it.
        if state.crd_writes.labelled_lately(&name, label, std::time::Instant::now()) {
            continue;
        }
        if let Err(err) = Api::<CustomResourceDefinition>::all(ctx.client.clone()).patch(&name, &params, &Patch::Merge(&patch)).await {
            state.labelled.failed(&object, label);
            failed = true;
            tracing::warn!(error = %Error::api(format!("label CustomResourceDefinition {name} for its Operator"), err), "retried within a minute");
        }
    }
    failed
}

/// Label a Subscription, and the CSV it installed when that has no label, for their Operator.
async fn adopt_subscription(ctx: &ControllerContext<OperatorState>, sub: &Subscription) {
    let namespace = sub.namespace().unwrap_or_default();
    if sub.annotations().contains_key(keys::MIGRATING_TO_ANNOTATION) {
        return;
    }
    let Some(label) = keys::operator_component_label(&keys::operator_name(&sub.spec.name, &namespace)) else {
        return;
    };
    adopt(ctx, sub, &label).await;
    let installed = sub.status.as_ref().and_then(|s| s.installed_csv.as_deref()).filter(|name| !name.is_empty());
    if let Some(csv) = installed.and_then(|name| ctx.state.csvs.get(Some(&namespace), name))
        && !csv.is_copied()
        && keys::component_of(csv.labels().keys()).next().is_none()
    {
        adopt(ctx, csv.as_ref(), &label).await;
    }
}

/// What changes on the cluster asks of the Operators besides their status: an Operator for
/// newly labelled components (or one deleted while components remain), a label on every
/// Subscription. Runs while leading; a sweep every [`SWEEP`] retries what failed. The changes
/// are read into a [`backlog::Backlog`] as they come, while its writes go one at a time.
async fn keep_operators(
    ctx: Arc<ControllerContext<OperatorState>>,
    names: impl futures::Stream<Item = String> + Unpin,
    subscriptions: impl futures::Stream<Item = Arc<Subscription>> + Unpin,
    shutdown: impl std::future::Future<Output = ()>,
) {
    use backlog::Work;
    let state = ctx.state.clone();
    for source in state.sources.iter() {
        source.synced().await;
    }
    state.operators.synced().await;
    state.subscriptions.synced().await;
    let backlog = backlog::Backlog::default();
    let changes = futures::stream::select(
        futures::stream::select(
            names.map(Work::Operator),
            subscriptions.map(|sub| Work::Subscription(sub.namespace().unwrap_or_default(), sub.name_any())),
        ),
        ticks(SWEEP).map(|()| Work::Sweep),
    )
    .take_until(shutdown);
    let intake = async {
        changes.for_each(|work| futures::future::ready(backlog.add(work))).await;
        backlog.close();
    };
    let worker = async {
        while let Some(work) = backlog.next().await {
            if !ctx.leadership.is_leader() {
                continue;
            }
            match work {
                Work::Operator(name) => ensure_operator(&ctx, &name).await,
                Work::Subscription(namespace, name) => {
                    if let Some(sub) = state.subscriptions.get(Some(&namespace), &name) {
                        adopt_subscription(&ctx, &sub).await;
                    }
                }
                Work::Sweep => {
                    let names: BTreeSet<String> = state.sources.iter().flat_map(|source| source.operators()).collect();
                    for name in names {
                        ensure_operator(&ctx, &name).await;
                    }
                    for sub in state.subscriptions.list() {
                        adopt_subscription(&ctx, &sub).await;
                    }
                }
            }
        }
    };
    futures::join!(intake, worker);
}

/// A tick every `period`, the first one a period from now.
fn ticks(period: Duration) -> impl futures::Stream<Item = ()> {
    futures::stream::unfold(None, move |interval: Option<tokio::time::Interval>| async move {
        let mut interval = interval.unwrap_or_else(|| tokio::time::interval_at(tokio::time::Instant::now() + period, period));
        interval.tick().await;
        Some(((), Some(interval)))
    })
}

/// Build the Operator controller; it subscribes to the caches now (call this before the caches
/// start) and runs, once every cache it reads has synced, until `shutdown` resolves.
pub fn run(
    ctx: Arc<ControllerContext<OperatorState>>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let shutdown = shutdown.shared();
    let state = ctx.state.clone();
    // One stream of changed Operators per source, read by both the status reconciles and the
    // keeper (each kept its own memory of every component before).
    let (to_controller, changed) = futures::channel::mpsc::unbounded::<String>();
    let (to_keeper, changed_for_keeper) = futures::channel::mpsc::unbounded::<String>();
    let forward = futures::stream::select_all(state.sources.iter().map(|source| source.changes()))
        .take_until(shutdown.clone())
        .for_each(move |name| {
            let _ = to_controller.unbounded_send(name.clone());
            let _ = to_keeper.unbounded_send(name);
            futures::future::ready(())
        });
    let controller = Controller::for_shared_stream(state.operators.subscribe(), state.operators.store().clone())
        // No debounce: tools read the components right after an install (`kubectl operator
        // list-operands` reads the CSV from here once it has Succeeded); a reconcile writes
        // only when the status changed.
        .with_config(olm_runtime::controller::controller_config())
        .reconcile_on(changed.map(|name| ObjectRef::<Operator>::new(&name)))
        .reconcile_all_on(ctx.leadership.gained())
        .graceful_shutdown_on(shutdown.clone());
    // Subscribed now, before the caches start, so that the first list is seen too.
    let names = futures::stream::select(changed_for_keeper, state.operators.subscribe().map(|op| op.name_any()));
    let keeper = keep_operators(ctx.clone(), names, state.subscriptions.subscribe().boxed(), shutdown);
    async move {
        state.operators.synced().await;
        for source in state.sources.iter() {
            source.synced().await;
        }
        let statuses = controller
            .run(|operator, ctx| guarded(operator, ctx, reconcile), error_policy, ctx)
            .for_each(|_| futures::future::ready(()));
        futures::join!(statuses, keeper, forward);
    }
}

#[cfg(test)]
mod tests;
