//! `olm plan show PLAN`: what an InstallPlan will change, compared with what is installed now.

use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use kube::{Api, ResourceExt};
use olm_api::v1alpha1::install_plan::{InstallPlan, InstallPlanPhase};
use olm_controllers::installplan::content::resolved_steps;
use olm_controllers::plan_preview::{PlanPreview, observe, preview, render};
use serde_json::Value;

use super::{KubeArgs, Output, api_error, block_on, connect, print_data};

/// `olm plan …`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    #[command(subcommand)]
    command: PlanCommand,
}

#[derive(Debug, Subcommand)]
enum PlanCommand {
    /// Show what an InstallPlan will create or change before approving it: permissions added and
    /// removed, CRD changes (and existing objects a new schema refuses), Deployment images,
    /// replicas and resources, webhooks and APIServices.
    Show(ShowArgs),
}

#[derive(Debug, Args)]
struct ShowArgs {
    /// The InstallPlan.
    name: String,
    #[command(flatten)]
    kube: KubeArgs,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value = "text")]
    output: Output,
}

pub fn run(args: PlanArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        PlanCommand::Show(args) => block_on(async move {
            let (client, namespace) = connect(&args.kube).await?;
            let (plan, preview) = preview_of(&client, &namespace, &args.name).await?;
            if args.output == Output::Text {
                print!("{}{}", header(&plan), render::text(&preview));
            } else {
                print_data(args.output, &preview)?;
            }
            Ok(ExitCode::SUCCESS)
        }),
    }
}

/// The plan and its preview against the cluster as it is now, with the existing objects each
/// changed CRD schema would refuse.
pub async fn preview_of(client: &kube::Client, namespace: &str, name: &str) -> anyhow::Result<(InstallPlan, PlanPreview)> {
    let api: Api<InstallPlan> = Api::namespaced(client.clone(), namespace);
    let plan = api
        .get_opt(name)
        .await
        .map_err(|err| anyhow::anyhow!("cannot read InstallPlan {namespace}/{name}: {}", api_error(&err)))?
        .with_context(|| format!("InstallPlan {namespace}/{name} not found (kubectl get installplans -n {namespace})"))?;
    let steps = plan.status.as_ref().and_then(|s| s.plan.clone());
    let Some(steps) = steps else {
        anyhow::bail!("InstallPlan {namespace}/{name} has no steps yet: OLM is still reading its bundles (kubectl get installplan {name} -n {namespace} -o yaml shows its bundleLookups)");
    };
    let steps = resolved_steps(client, &plan, &steps).await.map_err(|err| anyhow::anyhow!("{}", err.message))?;
    let installed = observe::installed(client, namespace, &steps)
        .await
        .map_err(|err| anyhow::anyhow!("cannot read what InstallPlan {namespace}/{name} changes: {}", api_error(&err)))?;
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
            Err(failed) => crd.invalid_objects = vec![format!("cannot list {} objects to check them: {}", failed.kind, api_error(&failed.error))],
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
