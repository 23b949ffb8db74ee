//! Observe → decide → act for Subscriptions. Each reconcile resolves the Subscription's whole
//! namespace (every Subscription and installed operator constrains the others) under a
//! per-namespace lock, but acts only for the Subscription at hand: its own InstallPlan, its
//! own conditions. [`observe`](super::observe) gathers the facts; then a [`Pass`] takes its
//! steps in order — the rollback ([`rollback`](super::rollback)), resolution
//! ([`resolution`](super::resolution)), the InstallPlan ([`act`](super::act)) — and ends in the
//! one status write ([`decide::status`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use olm_api::v1::operator_group::OperatorGroup;
use olm_api::v1alpha1::catalog_source::CatalogSource;
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use olm_api::v1alpha1::install_plan::InstallPlan;
use olm_api::v1alpha1::subscription::{Subscription, reasons};
use olm_resolver::{CatalogKey, Selected};
use olm_runtime::controller::action_for;
use olm_runtime::{ControllerContext, Result, error_policy, guarded};
use tracing::instrument;

use super::decide::{self, Observed, PlanView, Resolved, RolledBackNote};
use super::pulls::ContentError;
use super::resolution::{self, Intent, ResolutionDecision};
use super::state::SubscriptionControllerState;
use super::{act, observe, rollback};
use crate::catalog_metrics::SubscriptionSyncLabels;
use crate::plan_write_failures::{PlanKey, WriteFailure};

/// Controller name: metric label, field manager `olm/subscription`.
pub const NAME: &str = "subscription";

/// How soon to try again when fetching bundle content failed.
const CONTENT_RETRY: Duration = Duration::from_secs(10);
/// When a Subscription waiting for a bundle pull looks again, should no word of its end come.
const PENDING_RECHECK: Duration = Duration::from_secs(15);

#[instrument(skip_all, fields(kind = "Subscription", namespace = %cached.namespace().unwrap_or_default(), name = %cached.name_any()))]
async fn reconcile(cached: Arc<Subscription>, ctx: Arc<ControllerContext<SubscriptionControllerState>>) -> Result<Action> {
    let state = &ctx.state;
    let namespace = cached.namespace().unwrap_or_default();
    if cached.annotations().contains_key(olm_api::keys::MIGRATING_TO_ANNOTATION) {
        // `olm migrate` is handing its operator to an OLM v1 ClusterExtension: no upgrade, no
        // status change, until the migration deletes it.
        return Ok(Action::await_change());
    }
    let lock = state.locks.get(&namespace);
    let _guard = lock.lock().await;
    state
        .metrics
        .subscription_count
        .set(i64::try_from(state.subscriptions.store().len()).unwrap_or(i64::MAX));

    // Observe, then the steps in order over one pass; the last is the one status write.
    let Some(facts) = observe::observe(&ctx, &cached).await? else {
        return Ok(Action::await_change());
    };
    let mut pass = Pass::new(&ctx, facts);
    pass.roll_back().await?;
    pass.resolve().await;
    pass.create_plan().await?;
    pass.write_status().await
}

/// One reconcile of one Subscription, as its steps fill it in (operator-controller's
/// `ReconcileSteps`): what was observed, what the rollback and resolution decided, what the
/// plan step did; [`Pass::write_status`] turns it into the one status write.
struct Pass<'a> {
    ctx: &'a ControllerContext<SubscriptionControllerState>,
    facts: observe::Facts,
    now: Timestamp,
    /// [`Pass::roll_back`]'s decision.
    rollback: rollback::Decision,
    /// [`Pass::resolve`]'s decision.
    decision: ResolutionDecision,
    /// [`Pass::create_plan`]'s outcome, and when to look again.
    resolved: Resolved,
    requeue: Option<Duration>,
    /// An installed CSV the Subscription takes over (until a plan of its own is made).
    adopted: Option<String>,
    /// A write the API server refused: said in the status, then returned for the error policy.
    write_failed: Option<olm_runtime::Error>,
}

impl<'a> Pass<'a> {
    fn new(ctx: &'a ControllerContext<SubscriptionControllerState>, facts: observe::Facts) -> Pass<'a> {
        let rollback = rollback::decide(&facts.sub, &facts.csvs);
        Pass {
            ctx,
            facts,
            now: Timestamp::now(),
            rollback,
            decision: ResolutionDecision::of(Intent::Wait),
            resolved: Resolved::Skipped,
            requeue: None,
            adopted: None,
            write_failed: None,
        }
    }

    /// A rollback first (opt-in, see `rollback`): its Event, and the annotation that marks it,
    /// which the plan made below reads (its name, its approval).
    async fn roll_back(&mut self) -> Result<()> {
        if let Some(event) = &self.rollback.event {
            self.ctx.events.publish(&self.facts.sub.object_ref(&()), event).await;
        }
        if let Some(from) = &self.rollback.mark {
            act::mark_rolled_back(self.ctx, &self.facts.sub, from).await?;
            self.facts.sub.annotations_mut().insert(olm_api::keys::ROLLED_BACK_FROM_ANNOTATION.into(), from.clone());
        }
        Ok(())
    }

    /// What resolution gives this Subscription (or the rollback's reinstall).
    async fn resolve(&mut self) {
        let started = Instant::now();
        self.decision = match &self.rollback.step {
            rollback::Step::None => resolution::decide(&self.facts, self.rollback.rejected.as_deref()),
            rollback::Step::Reinstall { from, to } => ResolutionDecision::of(resolution::rollback_intent(&self.facts, from, to)),
            rollback::Step::Impossible(message) => {
                ResolutionDecision::of(Intent::Fail { reason: resolution::ROLLBACK_IMPOSSIBLE, message: message.clone(), requeue: None })
            }
        };
        if let Some(succeeded) = self.decision.resolver_ran {
            self.ctx.state.metrics.resolution(succeeded, started.elapsed().as_secs_f64());
        }
        if let Some(event) = &self.decision.event {
            self.ctx.events.publish(&self.facts.sub.object_ref(&()), event).await;
        }
        self.adopted = self.decision.adopted.clone();
    }

    /// The InstallPlan, when there is one to create; what came of it.
    async fn create_plan(&mut self) -> Result<()> {
        let (resolved, requeue) = match &self.decision.intent {
            Intent::Wait => (Resolved::Skipped, None),
            Intent::Fail { reason, message, requeue } => (Resolved::Failed { reason, message: message.clone() }, *requeue),
            Intent::UpToDate | Intent::Rejected(_) => (Resolved::UpToDate, None),
            Intent::Install { bundles, current_csv } => {
                let current_csv = current_csv.clone();
                let bundles: Vec<&Selected> = bundles.iter().collect();
                match act::create_plan(self.ctx, &self.facts, &bundles, self.now).await {
                    Err(err) if err.refused_write().is_some() => {
                        // Said on the Subscription, then returned: the error policy backs off and
                        // puts the Event on the object whose write failed.
                        let resolved = Resolved::WriteFailed { reason: err.category(), message: WriteFailure::of(&err).message };
                        self.write_failed = Some(err);
                        (resolved, None)
                    }
                    Err(err) => return Err(err),
                    Ok(Ok(plan)) => {
                        self.adopted = None;
                        let namespace = self.facts.sub.namespace().unwrap_or_default();
                        act::collect_old_plans(self.ctx, &namespace, &self.facts.subs).await;
                        (Resolved::NewPlan { plan, current_csv }, None)
                    }
                    Ok(Err(act::NotReady { error, lookup_plan })) => not_ready(error, lookup_plan, &self.facts.unpack),
                }
            }
        };
        (self.resolved, self.requeue) = (resolved, requeue);
        Ok(())
    }

    /// The one status write, from what was observed (moved, no longer needed) and what the
    /// steps did.
    async fn write_status(self) -> Result<Action> {
        let Pass { ctx, facts, rollback, decision, resolved, requeue, adopted, write_failed, now } = self;
        let observe::Facts { sub, catalogs, contents, plan, plan_missing, current, group_modes, .. } = facts;
        let installed = adopted.clone().or_else(|| current.as_ref().map(|c| c.name.clone()));
        let deprecations = resolution::deprecations(contents.get(&decide::target(&sub)), &sub, installed.as_deref());
        let behind = match (&resolved, &installed, &decision.intent) {
            (Resolved::UpToDate, _, Intent::Rejected(csv)) => Some(rollback::rejected_note(csv)),
            (Resolved::UpToDate, Some(installed), _) => {
                resolution::behind_head(contents.get(&decide::target(&sub)), contents.values(), &sub, installed, group_modes.as_ref())
            }
            _ => None,
        };
        let rolled_back = match (rollback.condition, &rollback.rejected, &resolved) {
            (Some((reason, message)), _, _) => RolledBackNote::Set(reason, message),
            // An upgrade past the version rolled back: the rollback is history.
            (None, None, _) | (None, _, Resolved::NewPlan { .. }) => RolledBackNote::Clear,
            (None, Some(_), _) => RolledBackNote::Keep,
        };
        let observed = Observed { sub: &sub, catalogs, plan, plan_missing, current, adopted, resolved, deprecations, behind, rolled_back };
        let desired = decide::status(&observed, now);
        ctx.status.apply(&sub, &desired).await?;
        ctx.state.metrics.subscription_synced(SubscriptionSyncLabels {
            name: sub.name_any(),
            installed: desired.installed_csv.clone().unwrap_or_default(),
            channel: sub.spec.channel.clone().unwrap_or_default(),
            package: sub.spec.name.clone(),
            approval: sub.spec.approval().as_str().to_owned(),
        });
        if let Some(err) = write_failed {
            return Err(err);
        }
        Ok(action_for(requeue))
    }
}

/// What a bundle's content not being ready yet makes of the plan step, and when to look again.
fn not_ready(error: ContentError, lookup_plan: Option<PlanView>, unpack: &observe::UnpackSettings) -> (Resolved, Option<Duration>) {
    match error {
        ContentError::Unpack(message) => (Resolved::UnpackFailed { message, plan: lookup_plan }, Some(unpack.retry())),
        // Woken when the pull ends; the requeue is a safety net.
        ContentError::Pending(message) => (Resolved::Unpacking { message, plan: lookup_plan }, Some(PENDING_RECHECK)),
        ContentError::RollbackRefused(message) => (Resolved::Failed { reason: resolution::ROLLBACK_IMPOSSIBLE, message }, None),
        ContentError::Other(message) => (Resolved::Failed { reason: reasons::ERROR_PREVENTED_RESOLUTION, message }, Some(CONTENT_RETRY)),
    }
}

/// What the Subscription controller reads of a CatalogSource object: its identity, spec and
/// deletion. Not its status (connection state, poll times, which move with every registry
/// poll): a catalog's health and content come from the catalog cache, which wakes the
/// Subscriptions itself when they change.
fn catalog_change(catalog: &CatalogSource) -> (Option<String>, Option<i64>, bool) {
    (catalog.uid(), catalog.meta().generation, catalog.meta().deletion_timestamp.is_some())
}

fn subs_in(store: &Store<Subscription>, namespace: Option<&str>) -> Vec<ObjectRef<Subscription>> {
    store
        .state()
        .iter()
        .filter(|s| namespace.is_none_or(|ns| s.namespace().as_deref() == Some(ns)))
        .map(|s| ObjectRef::from_obj(s.as_ref()))
        .collect()
}

/// Build the Subscription controller (subscribes now; call before the caches start) and run it
/// until `shutdown` resolves.
pub fn run(
    ctx: Arc<ControllerContext<SubscriptionControllerState>>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let state = ctx.state.clone();
    let store = state.subscriptions.store().clone();
    let global = state.global_namespace.clone();
    let (s1, s2, s3, s4) = (store.clone(), store.clone(), store.clone(), store.clone());
    let (g1, g2) = (global.clone(), global.clone());
    let catalog_changes = state.content.subscribe().flat_map(move |key: CatalogKey| {
        let scope = (key.namespace != g1).then_some(key.namespace.clone());
        futures::stream::iter(subs_in(&s4, scope.as_deref()))
    });
    // A plan whose status write was refused, or went through again: its Subscriptions say so.
    let plans = state.plans.clone();
    let write_changes = state.write_failures.subscribe().flat_map(move |(namespace, name): PlanKey| {
        let owners: Vec<ObjectRef<Subscription>> = plans
            .get(Some(&namespace), &name)
            .map(|plan| {
                plan.owner_references()
                    .iter()
                    .filter(|o| o.kind == "Subscription")
                    .map(|o| ObjectRef::new(&o.name).within(&namespace))
                    .collect()
            })
            .unwrap_or_default();
        futures::stream::iter(owners)
    });
    // A bundle pull ended: the Subscriptions waiting for it take its outcome.
    let pulled = state.pulls.subscribe().map(|(namespace, name)| ObjectRef::new(&name).within(&namespace));
    let controller = Controller::for_shared_stream(state.subscriptions.subscribe(), store)
        .with_config(olm_runtime::controller::controller_config())
        .watches_shared_stream(state.plans.subscribe(), move |plan: Arc<InstallPlan>| {
            let namespace = plan.namespace().unwrap_or_default();
            plan.owner_references()
                .iter()
                .filter(|o| o.kind == "Subscription")
                .map(|o| ObjectRef::new(&o.name).within(&namespace))
                .collect::<Vec<_>>()
        })
        // Copied CSVs are not installs of this namespace (resolution ignores them): an
        // all-namespaces operator's copies would otherwise wake every Subscription everywhere.
        .watches_shared_stream(state.csvs.subscribe_changes(crate::metadata::csv_change), move |csv: Arc<ClusterServiceVersion>| {
            if csv.is_copied() {
                return Vec::new();
            }
            subs_in(&s1, csv.namespace().as_deref())
        })
        .watches_shared_stream(state.catalogs.subscribe_changes(catalog_change), move |catalog: Arc<CatalogSource>| {
            let namespace = catalog.namespace().unwrap_or_default();
            let scope = (namespace != g2).then_some(namespace);
            subs_in(&s2, scope.as_deref())
        })
        .watches_shared_stream(state.groups.subscribe(), move |group: Arc<OperatorGroup>| {
            subs_in(&s3, group.namespace().as_deref())
        })
        .reconcile_on(catalog_changes)
        .reconcile_on(write_changes)
        .reconcile_on(pulled)
        .reconcile_all_on(ctx.leadership.gained())
        .graceful_shutdown_on(shutdown);
    async move {
        state.subscriptions.synced().await;
        state.plans.synced().await;
        state.csvs.synced().await;
        state.catalogs.synced().await;
        state.groups.synced().await;
        controller
            .run(|sub, ctx| guarded(sub, ctx, reconcile), error_policy, ctx)
            .for_each(|_| futures::future::ready(()))
            .await;
    }
}

