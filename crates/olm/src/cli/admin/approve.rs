//! `olm approve PLAN`: show the preview, ask, approve, then follow the plan and its CSVs until
//! they are done.

use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use olm_api::v1alpha1::install_plan::{InstallPlan, InstallPlanPhase};
use olm_controllers::plan_preview::render;
use serde_json::json;

use super::plan::{header, preview_of};
use super::{AskArgs, KubeArgs, POLL, WAIT, api_error, block_on, confirm, connect, progress};

/// `olm approve`.
#[derive(Debug, Args)]
pub struct ApproveArgs {
    /// The InstallPlan waiting for approval.
    name: String,
    #[command(flatten)]
    kube: KubeArgs,
    #[command(flatten)]
    ask: AskArgs,
}

/// Exit 0 when approved (and, unless `--no-wait`, installed); 1 when not approved or the
/// install failed or did not finish in time.
pub fn run(args: ApproveArgs) -> anyhow::Result<ExitCode> {
    block_on(async move {
        let (client, namespace) = connect(&args.kube).await?;
        let (plan, preview) = preview_of(&client, &namespace, &args.name).await?;
        print!("{}{}", header(&plan), render::text(&preview));
        let name = plan.name_any();
        if plan.spec.approved {
            println!("InstallPlan {namespace}/{name} is already approved.");
            return Ok(ExitCode::SUCCESS);
        }
        let question = if preview.grants_more() {
            format!("Approve InstallPlan {namespace}/{name}, with the permissions it adds?")
        } else {
            format!("Approve InstallPlan {namespace}/{name}?")
        };
        if !args.ask.yes && !confirm(&question)? {
            println!("Not approved.");
            return Ok(ExitCode::from(1));
        }
        let api: Api<InstallPlan> = Api::namespaced(client.clone(), &namespace);
        api.patch(&name, &PatchParams::default(), &Patch::Merge(json!({"spec": {"approved": true}})))
            .await
            .map_err(|err| anyhow::anyhow!("cannot approve InstallPlan {namespace}/{name}: {}", api_error(&err)))?;
        println!("Approved InstallPlan {namespace}/{name}.");
        if args.ask.no_wait {
            return Ok(ExitCode::SUCCESS);
        }
        follow(&client, &namespace, &name).await
    })
}

/// Follow a plan until Complete and its CSVs Succeeded, printing each change of phase.
pub async fn follow(client: &kube::Client, namespace: &str, name: &str) -> anyhow::Result<ExitCode> {
    let plans: Api<InstallPlan> = Api::namespaced(client.clone(), namespace);
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), namespace);
    let started = Instant::now();
    let mut last = String::new();
    while started.elapsed() < WAIT {
        let plan = plans.get(name).await.map_err(|err| anyhow::anyhow!("cannot read InstallPlan {namespace}/{name}: {}", api_error(&err)))?;
        let status = plan.status.clone().unwrap_or_default();
        let mut line = format!("InstallPlan {name}: {}", status.phase.as_str());
        if status.phase == InstallPlanPhase::Failed {
            progress(&line);
            anyhow::bail!("InstallPlan {namespace}/{name} failed: {}", status.message.unwrap_or_default());
        }
        let mut done = status.phase == InstallPlanPhase::Complete;
        if done {
            for csv in &plan.spec.cluster_service_version_names {
                let found = csvs.get_opt(csv).await.map_err(|err| anyhow::anyhow!("cannot read ClusterServiceVersion {namespace}/{csv}: {}", api_error(&err)))?;
                let (phase, message) = found.as_ref().map_or_else(|| ("not created yet".into(), String::new()), super::status::csv_state);
                line.push_str(&format!("; {csv}: {phase}"));
                if phase == "Failed" {
                    progress(&line);
                    anyhow::bail!("ClusterServiceVersion {namespace}/{csv} failed: {message}");
                }
                done &= phase == "Succeeded";
            }
        }
        if line != last {
            progress(&line);
            last = line;
        }
        if done {
            println!("Installed: {}.", plan.spec.cluster_service_version_names.join(", "));
            return Ok(ExitCode::SUCCESS);
        }
        tokio::time::sleep(POLL).await;
    }
    progress(&format!("still not done after {} s: kubectl olm status -n {namespace} tells where it stands", WAIT.as_secs()));
    Ok(ExitCode::from(1))
}
