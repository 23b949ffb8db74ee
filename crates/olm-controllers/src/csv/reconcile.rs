//! Observe → decide → act for ClusterServiceVersions: the driver (`reconcile`) and the
//! controller's wiring (`run`). Observing is in `observe`, deciding in `decide`, acting in
//! `act`, and the watch mappers in `watch`.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::core::v1::{Namespace, ObjectReference};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::runtime::controller::{Action, Controller};
use kube::{Resource, ResourceExt};
use olm_api::keys;
use olm_api::v1::olm_config::OLMConfig;
use olm_api::v1alpha1::cluster_service_version::{ClusterServiceVersion, CsvPhase, CsvReason};
use tracing::instrument;

use super::act::{act, act_copies, apply_api_roles, delete_cluster_rbac_of_deleted_csvs};
use super::decide::{CsvDecision, Observed, OwnedRbac, decide, decide_copy, set_phase};
use super::observe::{observe, owned_rbac};
use super::state::CsvState;
use super::watch;
use olm_runtime::controller::action_for;
use olm_runtime::{ControllerContext, Result, error_policy, guarded};

/// Controller name: metric label, field manager `olm/csv`.
pub const NAME: &str = "csv";

/// The label selector of the Deployment and webhook configuration caches (what OLM generated
/// for a CSV).
pub fn deployment_selector() -> String {
    format!("{}=ClusterServiceVersion", keys::OWNER_KIND_LABEL)
}

/// What the watch cache keeps of a CRD: what `crd_state` and the provided-API roles read
/// (names, versions served, conversion, conditions, uid), without the schemas, printer columns
/// and subresources, which make OLM's own CRDs alone megabytes.
pub fn trim_cached_crd(crd: &mut CustomResourceDefinition) {
    // One per install of a shared CRD, read live by the plan that writes it (`installplan::alongside`).
    if let Some(annotations) = crd.metadata.annotations.as_mut() {
        annotations.retain(|key, _| !key.starts_with(keys::INSTALLED_ALONGSIDE_ANNOTATION_PREFIX));
    }
    for version in &mut crd.spec.versions {
        version.schema = None;
        version.additional_printer_columns = None;
        version.subresources = None;
        version.selectable_fields = None;
    }
}

fn object_reference(csv: &ClusterServiceVersion) -> ObjectReference {
    csv.object_ref(&())
}

#[instrument(skip_all, fields(kind = "ClusterServiceVersion", namespace = %csv.namespace().unwrap_or_default(), name = %csv.name_any()))]
async fn reconcile(csv: Arc<ClusterServiceVersion>, ctx: Arc<ControllerContext<CsvState>>) -> Result<Action> {
    let state = &ctx.state;
    let namespace = csv.namespace().unwrap_or_default();
    let name = csv.name_any();
    ctx.state.metrics.csv_count.set(i64::try_from(state.csvs.store().len()).unwrap_or(i64::MAX));

    if csv.is_copied() {
        let origin = csv.labels().get(keys::COPIED_FROM_LABEL).cloned().unwrap_or_default();
        let original = state.csvs.get(Some(&origin), &name).filter(|original| !original.is_copied());
        let explicit_targets = original
            .as_ref()
            .and_then(|o| o.annotations().get(keys::TARGET_NAMESPACES_ANNOTATION).cloned())
            .is_some_and(|t| !t.is_empty());
        let rbac = match &original {
            Some(original) if explicit_targets => owned_rbac(&ctx.client, original).await?,
            _ => OwnedRbac::default(),
        };
        let decision = decide_copy(&csv, original.as_deref(), &rbac);
        act(&ctx, &csv, &decision).await?;
        return Ok(action_for(decision.requeue_after));
    }

    let replaced_by_peer = state
        .csvs
        .list_in(&namespace)
        .iter()
        .any(|c| !c.is_copied() && c.spec.replaces.as_deref() == Some(name.as_str()));
    if let Some(decision) = super::decide::decide_deletion(&csv, replaced_by_peer) {
        // Nothing else to observe on the way out.
        act(&ctx, &csv, &decision).await?;
        return Ok(action_for(decision.requeue_after));
    }

    if super::decide::migrating(&csv) {
        // Its objects are being adopted by an OLM v1 ClusterExtension: repairing them would
        // take them back.
        return Ok(Action::await_change());
    }

    // Observe.
    let started = std::time::Instant::now();
    let observation = observe(&ctx, &csv).await?;
    let now = observation.now;

    // Decide.
    let mut decision = {
        let observed = observation.observed();
        remember_verified_specs(state, &observed, &observation.read_whole);
        decide(&observed, now)
    };
    let observed_in = started.elapsed();

    // Act.
    let acted = act(&ctx, &csv, &decision).await;
    tracing::debug!(
        observe_ms = observed_in.as_secs_f64() * 1e3,
        act_ms = (started.elapsed() - observed_in).as_secs_f64() * 1e3,
        // Counted by name: an all-namespaces operator's pass can hold 10,000 copy actions.
        actions = ?decision.actions.iter().fold(std::collections::BTreeMap::<&str, usize>::new(), |mut counts, a| {
            *counts.entry(a.name()).or_default() += 1;
            counts
        }),
        "pass timing"
    );
    if let Err(err) = acted {
        if err.retryable() {
            return Err(err);
        }
        // The API server refused what the CSV asks for (invalid Deployment, forbidden, ...):
        // say so in the status instead of retrying the same request.
        let previous = csv.status.clone().unwrap_or_default();
        let status = set_phase(
            &previous,
            CsvPhase::Failed,
            CsvReason::InstallComponentFailed,
            format!("install strategy failed: {err}"),
            now,
        );
        decision = CsvDecision::status(status).event(olm_runtime::EventNote::warning(
            CsvReason::InstallComponentFailed.as_str(),
            "Install",
            format!("install strategy failed: {err}"),
        ));
        // RBAC is not watched: a permission granted to the installing ServiceAccount is only
        // noticed by looking again, as soon as the Failed pass would reinstall.
        let forbidden = err.category() == "ApiForbidden";
        decision.requeue_after = Some(if forbidden { super::decide::REINSTALL_PAUSE } else { super::decide::REQUEUE_RESYNC });
    }
    if let Some(status) = &decision.status {
        let previous_phase = csv.phase().cloned();
        ctx.status.apply(csv.as_ref(), status).await?;
        if status.phase == Some(CsvPhase::Replacing) && previous_phase != Some(CsvPhase::Replacing) {
            ctx.state.metrics.csv_upgrade_count.inc();
        }
        ctx.state.metrics.observe_csv(
            &namespace,
            &name,
            csv.spec.version.as_deref().unwrap_or_default(),
            status.phase.as_ref().map(|p| p.as_str()).unwrap_or_default(),
            status.reason.as_ref().map(|r| r.as_str()).unwrap_or_default(),
        );
        if let Some(phase) = &status.phase
            && csv.phase() != Some(phase)
        {
            tracing::info!(
                phase = phase.as_str(),
                reason = status.reason.as_ref().map(|r| r.as_str()).unwrap_or_default(),
                message = status.message.as_deref().unwrap_or_default(),
                "phase transition"
            );
        }
    }
    let reference = object_reference(&csv);
    for note in &decision.events {
        ctx.events.publish(&reference, note).await;
    }
    act_copies(&ctx, &csv, &decision).await;
    apply_api_roles(&ctx, &csv, &decision).await?;
    Ok(action_for(decision.requeue_after))
}

/// Remember the Deployments just read whole whose spec holds what the CSV wants, so that later
/// reconciles take them from the cache (drift is still told by their generation).
fn remember_verified_specs(state: &CsvState, observed: &Observed<'_>, read_whole: &[String]) {
    if read_whole.is_empty() {
        return;
    }
    for want in observed.desired_deployments() {
        let name = want.name_any();
        if !read_whole.contains(&name) {
            continue;
        }
        if let Some(actual) = observed.deployments.get(&name)
            && super::deployment::check_drift(want, Some(actual)).is_ok()
        {
            state.verified_specs.remember(actual);
        }
    }
    let cached = state.deployments.list();
    state.verified_specs.prune(2 * cached.len() + 64, |uid| {
        cached
            .iter()
            .any(|d| d.metadata.uid.as_deref() == Some(uid))
    });
}

/// Build the CSV controller; it subscribes to the caches now (call this before the caches
/// start) and runs, once every cache it reads has synced, until `shutdown` resolves.
pub fn run(
    ctx: Arc<ControllerContext<CsvState>>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let state = ctx.state.clone();
    let store = state.csvs.store().clone();

    let all_namespace_csvs = watch::all_namespace_csvs(state.csvs.clone());
    let for_config = all_namespace_csvs.clone();
    // An OperatorCondition's Role and RoleBinding lead back to the CSV of the same name.
    let by_condition_role = |role: Arc<Role>| watch::condition_owner(role.as_ref());
    let by_condition_binding = |binding: Arc<RoleBinding>| watch::condition_owner(binding.as_ref());
    let by_validating = |config: Arc<ValidatingWebhookConfiguration>| watch::by_owner_labels(config.labels());
    let by_mutating = |config: Arc<MutatingWebhookConfiguration>| watch::by_owner_labels(config.labels());
    let controller = Controller::for_shared_stream(state.csvs.subscribe(), store.clone())
        .with_config(olm_runtime::controller::controller_config())
        .watches_shared_stream(state.api_services.subscribe(), watch::by_api_service(state.csvs.clone()))
        .watches_shared_stream(state.validating_webhooks.subscribe(), by_validating)
        .watches_shared_stream(state.mutating_webhooks.subscribe(), by_mutating)
        .watches_shared_stream(state.managed_roles.subscribe(), by_condition_role)
        .watches_shared_stream(state.managed_role_bindings.subscribe(), by_condition_binding)
        .watches_shared_stream(state.subscriptions.subscribe(), watch::by_subscription(state.csvs.clone()))
        .watches_shared_stream(state.operator_conditions.subscribe(), watch::by_condition(state.csvs.clone()))
        .watches_shared_stream(state.csvs.subscribe(), watch::related(state.csvs.clone(), ctx.state.metrics.clone()))
        .owns_shared_stream(state.deployments.subscribe())
        .watches_shared_stream(state.groups.subscribe(), watch::by_group(state.csvs.clone()))
        // Only what a CSV reads of a CRD wakes its CSVs: every install of a shared CRD writes its
        // annotations and labels (installed-alongside, the Operator's), which would otherwise
        // wake every CSV of that operator in the cluster for each install.
        .watches_shared_stream(state.crds.subscribe_changes(super::observe::crd_view), watch::by_crd(state.csvs.clone()))
        .watches_shared_stream(state.service_accounts.subscribe(), watch::by_service_account(state.csvs.clone()))
        .watches_shared_stream(state.serving_secrets.subscribe(), |secret| watch::by_owner_labels(secret.labels()))
        .watches_shared_stream(state.namespaces.subscribe(), move |_ns: Arc<Namespace>| all_namespace_csvs())
        .watches_shared_stream(state.olm_configs.subscribe(), move |_c: Arc<OLMConfig>| for_config())
        .reconcile_all_on(ctx.leadership.gained())
        .graceful_shutdown_on(shutdown);
    let cleanup = delete_cluster_rbac_of_deleted_csvs(ctx.clone());
    let orphans = super::orphans::delete_cluster_rbac_of_deleted_namespaces(ctx.clone());
    async move {
        state.csvs.synced().await;
        state.groups.synced().await;
        state.crds.synced().await;
        state.service_accounts.synced().await;
        state.deployments.synced().await;
        state.namespaces.synced().await;
        state.olm_configs.synced().await;
        state.cluster_roles.synced().await;
        state.operator_conditions.synced().await;
        state.subscriptions.synced().await;
        state.api_services.synced().await;
        state.serving_secrets.synced().await;
        state.validating_webhooks.synced().await;
        state.mutating_webhooks.synced().await;
        state.managed_roles.synced().await;
        state.managed_role_bindings.synced().await;
        let controller = controller
            .run(|csv, ctx| guarded(csv, ctx, reconcile), error_policy, ctx)
            .for_each(|_| futures::future::ready(()));
        // The cleanup loops only end with the caches; the controller ends on shutdown.
        tokio::select! {
            _ = controller => {}
            _ = cleanup => {}
            _ = orphans => {}
        }
    }
}
