//! A plan waiting for approval gets its preview (`crate::plan_preview`) written into the
//! [`PREVIEW_ANNOTATION`] once, so that a console or `kubectl get installplan -o yaml` shows
//! what approving it changes. Only plans that wait for approval pay for it: a few GETs (the
//! replaced CSV, the CRDs and roles the plan changes) and one patch.

use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use olm_api::v1alpha1::install_plan::InstallPlan;
use olm_runtime::{ControllerContext, Error, Result};
use serde_json::json;

use super::state::InstallPlanState;
use crate::plan_preview::{PREVIEW_ANNOTATION, observe, preview};

/// Compute the preview of `plan` and write it into its annotation.
pub async fn write(ctx: &ControllerContext<InstallPlanState>, plan: &InstallPlan) -> Result<()> {
    let namespace = plan.namespace().unwrap_or_default();
    let steps = plan.status.as_ref().and_then(|s| s.plan.clone()).unwrap_or_default();
    let steps = match super::content::resolved_steps(&ctx.client, plan, &steps).await {
        Ok(steps) => steps,
        Err(err) => {
            // Executing the plan reports this; the preview then goes without.
            tracing::info!("no preview: {}", err.message);
            return Ok(());
        }
    };
    let installed = observe::installed(&ctx.client, &namespace, &steps)
        .await
        .map_err(|err| Error::api(format!("read what InstallPlan {namespace}/{} changes", plan.name_any()), err))?;
    let summary = preview(&steps, &installed);
    let text = serde_json::to_string(&summary).map_err(|source| Error::Serialize { what: "a plan preview".into(), source })?;
    let patch = json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
        "metadata": {"name": plan.name_any(), "namespace": namespace, "annotations": {PREVIEW_ANNOTATION: text}},
    });
    let api: Api<InstallPlan> = Api::namespaced(ctx.client.clone(), &namespace);
    api.patch(&plan.name_any(), &PatchParams::apply(&format!("{}-preview", ctx.field_manager())).force(), &Patch::Apply(&patch))
        .await
        .map_err(|err| Error::api(format!("write the preview of InstallPlan {namespace}/{}", plan.name_any()), err))?;
    Ok(())
}
