//! Act for one Subscription: create the InstallPlan resolution asked for (its bundles' content
//! read from their catalogs, then the plan and its status), and keep the namespace's plans
//! bounded.

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use olm_api::v1alpha1::install_plan::{InstallPlan, InstallPlanPhase, InstallPlanStatus};
use olm_api::v1alpha1::subscription::Subscription;
use olm_resolver::Selected;
use olm_runtime::{ControllerContext, Error, EventNote, Result};

use super::decide::PlanView;
use super::plan::{LookupState, NewPlan, PlanId};
use super::pulls::{ContentError, PullOutcome};
use crate::plan_content::ContentConfigMap;
use super::observe::{Facts, plan_view};
use super::state::SubscriptionControllerState;

/// Why no plan with steps could be made now, and the plan that says so while bundle images
/// are pulled or after a pull failed (upstream's InstallPlan with pending or failed bundle
/// lookups), when it could be written.
#[derive(Debug)]
pub struct NotReady {
    /// Why.
    pub error: ContentError,
    /// The plan showing the lookups.
    pub lookup_plan: Option<PlanView>,
}

impl From<ContentError> for NotReady {
    fn from(error: ContentError) -> NotReady {
        NotReady { error, lookup_plan: None }
    }
}

/// Read the bundles' manifests (pulling bundle images the catalog names), create the
/// InstallPlan and write its plan. Errors that come from catalog content are returned as
/// `Ok(Err(_))`; while an image is pulled, or after a pull failed, the plan is written without
/// steps, its bundle lookups saying why.
pub async fn create_plan(
    ctx: &ControllerContext<SubscriptionControllerState>,
    facts: &Facts,
    bundles: &[&Selected],
    now: Timestamp,
) -> Result<std::result::Result<PlanView, NotReady>> {
    let sub = &facts.sub;
    let namespace = sub.namespace().unwrap_or_default();
    // Every bundle's read starts now (a plan of several bundles pulls them side by side).
    let mut fetched = Vec::with_capacity(bundles.len());
    let mut states = Vec::with_capacity(bundles.len());
    let mut images = Vec::with_capacity(bundles.len());
    let (mut pending, mut failed) = (Vec::new(), Vec::new());
    let waiter = (namespace.clone(), sub.name_any());
    for bundle in bundles {
        let Some(content) = facts.contents.get(&bundle.catalog) else {
            return Ok(Err(ContentError::Other(format!(
                "catalog {} of bundle {} is not available",
                bundle.catalog, bundle.name
            ))
            .into()));
        };
        let image = super::pulls::catalog_image(content, bundle);
        match ctx.state.pulls.read(content, bundle, waiter.clone(), facts.unpack.timeout, facts.unpack.retry()).await {
            PullOutcome::Ready(content) => {
                fetched.push(content);
                states.push(LookupState::Read);
            }
            PullOutcome::Failed(ContentError::Unpack(message)) => {
                states.push(LookupState::Failed(message.clone()));
                failed.push(message);
            }
            PullOutcome::Failed(err) => return Ok(Err(err.into())),
            PullOutcome::Pending(message) => {
                states.push(LookupState::Pending(format!("pulling bundle image {image} from catalog {}", bundle.catalog)));
                pending.push(message);
            }
        }
        images.push(image);
    }
    if !failed.is_empty() || !pending.is_empty() {
        let error = if failed.is_empty() {
            ContentError::Pending(pending.join("; "))
        } else {
            ContentError::Unpack(failed.join("; "))
        };
        let (plan, status) = super::plan::lookup_plan(sub, bundles, &images, &states, &plan_id(facts, bundles), now);
        let lookup_plan = write_lookup_plan(ctx, facts, plan, status).await?;
        return Ok(Err(NotReady { error, lookup_plan }));
    }
    // A rollback is checked before its plan exists: its CRDs must keep what is stored now.
    if let Some(from) = super::rollback::rollback_from(sub, bundles) {
        let problems = rollback_crd_problems(ctx, &fetched).await?;
        if !problems.is_empty() {
            return Ok(Err(ContentError::RollbackRefused(format!(
                "cannot roll back from {from} to {}: {}; nothing was changed: remove the annotation {} to stay on {from}",
                bundles.iter().map(|b| b.name.as_str()).collect::<Vec<_>>().join(", "),
                problems.join("; "),
                olm_api::keys::ROLLED_BACK_FROM_ANNOTATION
            ))
            .into()));
        }
    }
    // A plan whose lookups were written first may have been approved meanwhile.
    let id = plan_id(facts, bundles);
    let approved_already = existing_plan(ctx, &namespace, &id.name).is_some_and(|p| p.spec.approved);
    let NewPlan { plan, status, content } =
        match super::plan::install_plan(sub, bundles, &fetched, &facts.subs, &id, approved_already, now) {
            Ok(built) => built,
            Err(message) => return Ok(Err(ContentError::Other(message).into())),
        };
    let approval = plan.spec.approval;
    let api: Api<InstallPlan> = Api::namespaced(ctx.client.clone(), &namespace);
    remove_stale_plan(ctx, &api, sub, &plan.name_any()).await?;
    let created = match api.create(&PostParams::default(), &plan).await {
        Ok(created) => created,
        // Another OLM replica (or a retry after a lost answer) made the same plan: use it.
        Err(err) if olm_runtime::error::api_status_code(&err) == Some(409) => {
            let existing_name = plan.metadata.name.clone().unwrap_or_default();
            let existing = api
                .get(&existing_name)
                .await
                .map_err(|err| Error::api(format!("get InstallPlan {namespace}/{existing_name}"), err))?;
            if existing.status.as_ref().is_some_and(|s| s.plan.is_some()) {
                tracing::info!(plan = %existing_name, "InstallPlan already exists; using it");
                return Ok(Ok(plan_view(&existing)));
            }
            existing
        }
        Err(err) => {
            // The plan does not exist: the Event goes on the Subscription it is for.
            return Err(Error::write(
                format!("create InstallPlan {namespace}/{} for Subscription {}", plan.name_any(), sub.name_any()),
                sub.object_ref(&()),
                err,
            ));
        }
    };
    // The content first, then the steps that reference it.
    let written = match write_content(ctx, &created, &content).await {
        Ok(()) => ctx.status.apply(&created, &status).await.map(|_| ()),
        Err(err) => Err(err),
    };
    if let Err(err) = written {
        // A plan without steps would be found again and never executed: remove it (its
        // content ConfigMaps go with it).
        let _ = api.delete(&created.name_any(), &DeleteParams::default()).await;
        return Err(err);
    }
    tracing::info!(plan = %created.name_any(), csvs = ?created.spec.cluster_service_version_names, approval = approval.as_str(), "InstallPlan created");
    ctx.events
        .publish(
            &sub.object_ref(&()),
            &EventNote::normal(
                "InstallPlanCreated",
                "Resolve",
                format!(
                    "InstallPlan {} installs {} ({}){}",
                    created.name_any(),
                    created.spec.cluster_service_version_names.join(", "),
                    approval.as_str(),
                    if created.spec.approved {
                        String::new()
                    } else {
                        format!(
                            "; approve it with kubectl patch installplan {} -n {} --type merge -p '{{\"spec\":{{\"approved\":true}}}}'",
                            created.name_any(),
                            created.namespace().unwrap_or_default()
                        )
                    }
                ),
            ),
        )
        .await;
    let mut view = plan_view(&created);
    view.phase = status.phase;
    Ok(Ok(view))
}

/// The plan to make for `bundles`: the referenced plan when it waits for these bundles' content
/// (its steps complete it), else [`plan_name`](super::plan::plan_name), another name than the
/// referenced plan's when a user deleted it.
fn plan_id(facts: &Facts, bundles: &[&Selected]) -> PlanId {
    let generation = facts.next_plan_generation;
    if let Some(waiting) = facts.plan.as_ref().filter(|p| p.awaits_content && same_bundles(&p.bundles, bundles)) {
        return PlanId { name: waiting.name.clone(), generation: waiting.generation.unwrap_or(generation) };
    }
    let referenced = facts.sub.status.as_ref().and_then(|s| s.install_plan_ref.as_ref()).and_then(|r| r.name.as_deref());
    let deleted = referenced.filter(|_| facts.plan_missing);
    PlanId { name: super::plan::plan_name(&facts.sub, bundles, deleted), generation }
}

fn same_bundles(names: &[String], bundles: &[&Selected]) -> bool {
    let mut names: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut wanted: Vec<&str> = bundles.iter().map(|b| b.name.as_str()).collect();
    names.sort_unstable();
    wanted.sort_unstable();
    names == wanted
}

/// What the CRDs of the bundles a rollback installs again would break: versions still stored
/// that they drop, and stored objects their schemas refuse.
async fn rollback_crd_problems(ctx: &ControllerContext<SubscriptionControllerState>, fetched: &[olm_catalog_client::BundleContent]) -> Result<Vec<String>> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
    let mut problems = Vec::new();
    for object in fetched.iter().flat_map(|b| &b.objects) {
        let Ok(desired) = serde_json::from_str::<serde_json::Value>(object) else { continue };
        if desired.get("kind").and_then(serde_json::Value::as_str) != Some("CustomResourceDefinition") {
            continue;
        }
        let name = desired.pointer("/metadata/name").and_then(serde_json::Value::as_str).unwrap_or_default().to_owned();
        let Some(existing) = crds.get_opt(&name).await.map_err(|err| Error::api(format!("get CustomResourceDefinition {name}"), err))? else {
            continue;
        };
        let existing = serde_json::to_value(&existing).unwrap_or_default();
        if let Err(why) = olm_install::crd_rules::stored_versions_kept(&existing, &desired) {
            problems.push(format!("its CustomResourceDefinition {name}: {why}"));
            continue;
        }
        if desired.pointer("/spec/conversion/strategy").and_then(serde_json::Value::as_str) == Some("Webhook") {
            continue;
        }
        match olm_install::crd_check::refused_objects(&ctx.client, &existing, &desired, 3).await {
            Ok(refused) => problems.extend(refused.into_iter().map(|r| {
                format!("its CustomResourceDefinition {name} refuses the existing {} at {}: {}", r.object, r.version, r.problems.join(", "))
            })),
            Err(failed) => return Err(Error::api(format!("list {} objects to check a rollback", failed.kind), failed.error)),
        }
    }
    Ok(problems)
}

/// A finished plan of the same name that the Subscription no longer references installed
/// these bundles before (a rollback went back past them, or its annotation was removed to
/// install them again): it is history, and in the way of the new plan. Plans being made by
/// another replica are not finished, and the referenced one is never removed.
async fn remove_stale_plan(
    ctx: &ControllerContext<SubscriptionControllerState>,
    api: &Api<InstallPlan>,
    sub: &Subscription,
    name: &str,
) -> Result<()> {
    let referenced = sub.status.as_ref().and_then(|s| s.install_plan_ref.as_ref()).and_then(|r| r.name.as_deref()) == Some(name);
    if referenced {
        return Ok(());
    }
    // The cache is enough (no request on the way of every install): a plan finished long ago.
    let namespace = sub.namespace().unwrap_or_default();
    let finished = existing_plan(ctx, &namespace, name)
        .and_then(|p| p.status.clone())
        .is_some_and(|s| matches!(s.phase, InstallPlanPhase::Complete | InstallPlanPhase::Failed));
    if finished {
        tracing::info!(plan = %name, "a finished InstallPlan of the same bundles is in the way; removing it");
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(err) if olm_runtime::error::is_not_found(&err) => {}
            Err(err) => return Err(Error::api(format!("delete the finished InstallPlan {name}"), err)),
        }
    }
    Ok(())
}

fn existing_plan(ctx: &ControllerContext<SubscriptionControllerState>, namespace: &str, name: &str) -> Option<Arc<InstallPlan>> {
    ctx.state.plans.get(Some(namespace), name)
}

/// Create the plan that shows its bundle lookups (or find it), and write their state. A plan
/// that already has its steps is left alone. Returns its view; `None` when the plan could not
/// be written (said in the log: the Subscription's condition says the same).
async fn write_lookup_plan(
    ctx: &ControllerContext<SubscriptionControllerState>,
    facts: &Facts,
    plan: InstallPlan,
    status: InstallPlanStatus,
) -> Result<Option<PlanView>> {
    let namespace = plan.namespace().unwrap_or_default();
    let name = plan.name_any();
    let api: Api<InstallPlan> = Api::namespaced(ctx.client.clone(), &namespace);
    let object = match existing_plan(ctx, &namespace, &name) {
        Some(existing) => (*existing).clone(),
        None => match api.create(&PostParams::default(), &plan).await {
            Ok(created) => created,
            Err(err) if olm_runtime::error::api_status_code(&err) == Some(409) => api
                .get(&name)
                .await
                .map_err(|err| Error::api(format!("get InstallPlan {namespace}/{name}"), err))?,
            Err(err) => {
                tracing::warn!(plan = %name, %err, "cannot create the InstallPlan that shows the bundle lookups");
                return Ok(None);
            }
        },
    };
    if object.status.as_ref().is_some_and(|s| s.plan.is_some()) {
        return Ok(Some(plan_view(&object)));
    }
    // Keep a phase the InstallPlan controller moved on (a Manual plan approved meanwhile).
    let mut status = status;
    if status.phase != InstallPlanPhase::Failed && object.status.as_ref().is_some_and(|s| s.phase == InstallPlanPhase::Installing) {
        status.phase = InstallPlanPhase::Installing;
    }
    if let Err(err) = ctx.status.apply(&object, &status).await {
        tracing::warn!(plan = %name, sub = %facts.sub.name_any(), "cannot write the bundle lookups of the InstallPlan: {err}");
        return Ok(None);
    }
    // The view of the plan as just written.
    let mut written = object;
    written.status = Some(status);
    Ok(Some(plan_view(&written)))
}

/// Write the ConfigMaps holding the plan's large step content, owned by the plan. Server-side
/// apply, so a retry (or a leftover of a deleted plan of the same name that garbage collection
/// has not removed yet) is taken over instead of failing as existing.
async fn write_content(
    ctx: &ControllerContext<SubscriptionControllerState>,
    plan: &InstallPlan,
    content: &[ContentConfigMap],
) -> Result<()> {
    let namespace = plan.namespace().unwrap_or_default();
    let plan_name = plan.name_any();
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &namespace);
    let params = PatchParams::apply(&ctx.field_manager()).force();
    for map in content {
        let object = crate::plan_content::config_map(map, &namespace, &plan_name, &plan.uid().unwrap_or_default());
        let patch = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": object.metadata, "binaryData": object.binary_data, "immutable": object.immutable});
        if let Err(err) = api.patch(&map.name, &params, &Patch::Apply(&patch)).await {
            return Err(Error::write(
                format!("create ConfigMap {namespace}/{} with step content of InstallPlan {plan_name}", map.name),
                plan.object_ref(&()),
                err,
            ));
        }
    }
    if !content.is_empty() {
        tracing::info!(plan = %plan_name, config_maps = content.len(), "large step content written to ConfigMaps");
    }
    Ok(())
}

/// Keep the namespace's InstallPlans bounded (best effort: a failed delete is retried with
/// the next plan).
pub async fn collect_old_plans(ctx: &ControllerContext<SubscriptionControllerState>, namespace: &str, subs: &[Arc<Subscription>]) {
    let plans: Vec<(String, i64, InstallPlanPhase)> = ctx
        .state
        .plans
        .list_in(namespace)
        .iter()
        .map(|p| {
            let phase = p.status.as_ref().map(|s| s.phase.clone()).unwrap_or(InstallPlanPhase::None);
            (p.name_any(), p.spec.generation.unwrap_or(0), phase)
        })
        .collect();
    let referenced: Vec<String> = subs
        .iter()
        .filter_map(|s| s.status.as_ref()?.install_plan_ref.as_ref()?.name.clone())
        .collect();
    let api: Api<InstallPlan> = Api::namespaced(ctx.client.clone(), namespace);
    for name in super::decide::plans_to_collect(&plans, &referenced) {
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => tracing::info!(plan = %name, "deleted an old InstallPlan"),
            Err(err) => tracing::warn!(plan = %name, %err, "cannot delete an old InstallPlan"),
        }
    }
}

/// Record on the Subscription that OLM rolls `from` back (the annotation is the rollback's
/// state, and a person removes it to let `from` in again).
pub async fn mark_rolled_back(ctx: &ControllerContext<SubscriptionControllerState>, sub: &Subscription, from: &str) -> Result<()> {
    let namespace = sub.namespace().unwrap_or_default();
    let api: Api<Subscription> = Api::namespaced(ctx.client.clone(), &namespace);
    let patch = serde_json::json!({"metadata": {"annotations": {olm_api::keys::ROLLED_BACK_FROM_ANNOTATION: from}}});
    api.patch(&sub.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|err| Error::write(format!("annotate Subscription {namespace}/{} as rolled back from {from}", sub.name_any()), sub.object_ref(&()), err))?;
    Ok(())
}
