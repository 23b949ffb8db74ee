//! A plan's preview computed again from the cluster as it is now (what `olm plan show` and the
//! console's review page show), and the line that says where the plan stands.

use kube::{Api, ResourceExt};
use olm_api::v1alpha1::install_plan::{InstallPlan, InstallPlanPhase};
use olm_runtime::error::api_message;
use serde_json::Value;

use super::{PlanPreview, observe, preview};
use crate::installplan::content::resolved_steps;

/// The plan `namespace/name` and its preview against the cluster as it is now, with the
/// existing objects each changed CRD schema would refuse; errors in words, with what to do.
pub async fn preview_of(client: &kube::Client, namespace: &str, name: &str) -> Result<(InstallPlan, PlanPreview), String> {
    let api: Api<InstallPlan> = Api::namespaced(client.clone(), namespace);
    let plan = api
        .get_opt(name)
        .await
        .map_err(|err| format!("cannot read InstallPlan {namespace}/{name}: {}", api_message(&err)))?
        .ok_or_else(|| format!("InstallPlan {namespace}/{name} not found (kubectl get installplans -n {namespace})"))?;
    let Some(steps) = plan.status.as_ref().and_then(|s| s.plan.clone()) else {
        return Err(format!(
            "InstallPlan {namespace}/{name} has no steps yet: OLM is still reading its bundles (kubectl get installplan {name} -n {namespace} -o yaml shows its bundleLookups)"
        ));
    };
    let steps = resolved_steps(client, &plan, &steps).await.map_err(|err| err.message)?;
    let installed = observe::installed(client, namespace, &steps)
        .await
        .map_err(|err| format!("cannot read what InstallPlan {namespace}/{name} changes: {}", api_message(&err)))?;
    let mut preview = preview(&steps, &installed);
    for crd in preview.crds.iter_mut().filter(|c| !c.changed_schemas.is_empty()) {
        let existing = installed.objects.get(&("CustomResourceDefinition".to_owned(), crd.name.clone()));
        let desired = steps
            .iter()
            .find(|s| s.resource.kind == "CustomResourceDefinition" && s.resource.name == crd.name)
            .and_then(|s| serde_json::from_str::<Value>(s.resource.manifest.as_deref()?).ok());
        let (Some(existing), Some(desired)) = (existing, desired) else { continue };
        match olm_install::crd_check::refused_objects(client, existing, &desired, 20).await {
            Ok(refused) => {
                crd.invalid_objects = refused.into_iter().map(|r| format!("{} ({}): {}", r.object, r.version, r.problems.join(", "))).collect();
            }
            Err(failed) => crd.invalid_objects = vec![format!("cannot list {} objects to check them: {}", failed.kind, api_message(&failed.error))],
        }
    }
    Ok((plan, preview))
}

/// `InstallPlan ns/name: phase`, and what that means for the preview.
pub fn header(plan: &InstallPlan) -> String {
    let namespace = plan.namespace().unwrap_or_default();
    let phase = plan.status.as_ref().map(|s| s.phase.clone()).unwrap_or(InstallPlanPhase::None);
    let note = match phase {
        InstallPlanPhase::RequiresApproval if !plan.spec.approved => {
            format!("waits for approval (kubectl olm approve {} -n {namespace})", plan.name_any())
        }
        InstallPlanPhase::Complete => "already applied: compared with what is installed now".into(),
        InstallPlanPhase::Failed => {
            format!("failed: {}", plan.status.as_ref().and_then(|s| s.message.clone()).unwrap_or_default())
        }
        other => (if other.as_str().is_empty() { "not planned yet" } else { other.as_str() }).to_string(),
    };
    format!("InstallPlan {namespace}/{}: {note}\n", plan.name_any())
}
