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
use super::plan::{LookupState, NewPlan};
use super::pulls::PullOutcome;
use crate::plan_content::ContentConfigMap;
use super::observe::{Facts, plan_view};
use super::reconcile::SubscriptionControllerState;

/// Why no plan could be made from the catalog content.
#[derive(Debug)]
pub enum ContentError {
    /// A bundle image could not be pulled or read.
    Unpack(String),
    /// A bundle image is still being pulled: what to say meanwhile.
    Pending(String),
    /// Anything else about the content.
    Other(String),
}

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
        match ctx.state.pulls.read(content, bundle, waiter.clone(), facts.unpack.timeout).await {
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
        let (plan, status) = super::plan::lookup_plan(sub, bundles, &images, &states, facts.next_plan_generation, now);
        let lookup_plan = write_lookup_plan(ctx, facts, plan, status).await?;
        return Ok(Err(NotReady { error, lookup_plan }));
    }
    // A plan whose lookups were written first may have been approved meanwhile.
    let approved_already = existing_plan(ctx, &namespace, &super::plan::plan_name(sub, bundles)).is_some_and(|p| p.spec.approved);
    let NewPlan { plan, status, content } =
        match super::plan::install_plan(sub, bundles, &fetched, &facts.subs, facts.next_plan_generation, approved_already, now) {
            Ok(built) => built,
            Err(message) => return Ok(Err(ContentError::Other(message).into())),
        };
    let approval = plan.spec.approval;
    let api: Api<InstallPlan> = Api::namespaced(ctx.client.clone(), &namespace);
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
                    "InstallPlan {} installs {} ({})",
                    created.name_any(),
                    created.spec.cluster_service_version_names.join(", "),
                    approval.as_str()
                ),
            ),
        )
        .await;
    let mut view = plan_view(&created);
    view.phase = status.phase;
    Ok(Ok(view))
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

/// Delete the CSV a rollback leaves (gone already is fine).
pub async fn delete_csv(ctx: &ControllerContext<SubscriptionControllerState>, namespace: &str, name: &str) -> Result<()> {
    let api: Api<olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion> = Api::namespaced(ctx.client.clone(), namespace);
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(err) if olm_runtime::error::is_not_found(&err) => Ok(()),
        Err(err) => Err(Error::api(format!("delete ClusterServiceVersion {namespace}/{name} to roll it back"), err)),
    }
}
