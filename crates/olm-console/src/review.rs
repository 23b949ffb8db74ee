//! The upgrade review page: an InstallPlan as `kubectl olm plan show` sees it (the same
//! preview, computed from the cluster as it is now: permissions added and removed, CRD schema
//! changes and the objects they would refuse, images and containers changed), with Approve
//! when it waits for approval. Pure renderer.

use olm_api::v1alpha1::install_plan::{InstallPlan, InstallPlanPhase};
use olm_controllers::plan_preview::{PlanPreview, header, render};

use crate::html::{escape, query_value};

/// Whether `plan` waits for someone to approve it.
pub fn waits_for_approval(plan: &InstallPlan) -> bool {
    !plan.spec.approved && plan.status.as_ref().is_some_and(|s| s.phase == InstallPlanPhase::RequiresApproval)
}

/// The page's body.
pub fn page(plan: &InstallPlan, preview: &PlanPreview) -> String {
    let namespace = plan.metadata.namespace.clone().unwrap_or_default();
    let name = plan.metadata.name.clone().unwrap_or_default();
    let mut html = format!("<p class=\"note\">{}</p>", escape(header(plan).trim()));
    html.push_str(&format!("<h2>What it changes</h2><pre class=\"preview\"><code>{}</code></pre>", escape(&render::text(preview))));
    if waits_for_approval(plan) {
        html.push_str(&format!(
            "<form method=\"post\" action=\"/plan/{}/{}/approve\"><button type=\"submit\">Approve</button> <a href=\"/installed\">Not now</a></form>",
            query_value(&namespace),
            query_value(&name)
        ));
    }
    html
}
