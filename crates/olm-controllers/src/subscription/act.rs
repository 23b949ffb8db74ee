//! Act for one Subscription: create the InstallPlan resolution asked for (its bundles' content
//! read from their catalogs, then the plan and its status), and keep the namespace's plans
//! bounded.

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use olm_api::v1alpha1::install_plan::{InstallPlan, InstallPlanPhase};
use olm_api::v1alpha1::subscription::Subscription;
use olm_resolver::Selected;
use olm_runtime::{ControllerContext, Error, EventNote, Result};

use super::decide::PlanView;
use super::plan::NewPlan;
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

/// Read the bundles' manifests (pulling bundle images the catalog names), create the
/// InstallPlan and write its plan. Errors that come from catalog content are returned as
/// `Ok(Err(_))`.
pub async fn create_plan(
    ctx: &ControllerContext<SubscriptionControllerState>,
    facts: &Facts,
    bundles: &[&Selected],
    now: Timestamp,
) -> Result<std::result::Result<PlanView, ContentError>> {
    let sub = &facts.sub;
    let namespace = sub.namespace().unwrap_or_default();
    // Every bundle's read starts now (a plan of several bundles pulls them side by side).
    let mut fetched = Vec::with_capacity(bundles.len());
    let mut pending = Vec::new();
    let waiter = (namespace.clone(), sub.name_any());
    for bundle in bundles {
        let Some(content) = facts.contents.get(&bundle.catalog) else {
            return Ok(Err(ContentError::Other(format!(
                "catalog {} of bundle {} is not available",
                bundle.catalog, bundle.name
            ))));
        };
        match ctx.state.pulls.read(content, bundle, waiter.clone(), facts.unpack.timeout).await {
            PullOutcome::Ready(content) => fetched.push(content),
            PullOutcome::Failed(err) => return Ok(Err(err)),
            PullOutcome::Pending(message) => pending.push(message),
        }
    }
    if !pending.is_empty() {
        return Ok(Err(ContentError::Pending(pending.join("; "))));
    }
    let NewPlan { plan, status, content } =
        match super::plan::install_plan(sub, bundles, &fetched, &facts.subs, facts.next_plan_generation, now) {
            Ok(built) => built,
            Err(message) => return Ok(Err(ContentError::Other(message))),
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
