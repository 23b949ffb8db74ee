//! `olm plan show PLAN`: what an InstallPlan will change, compared with what is installed now.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use olm_api::v1alpha1::install_plan::InstallPlan;
use olm_controllers::plan_preview::{PlanPreview, render};

use super::{KubeArgs, Output, block_on, connect, print_data};

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

/// The plan and its preview against the cluster as it is now (`olm_controllers::plan_preview::preview_of`).
pub async fn preview_of(client: &kube::Client, namespace: &str, name: &str) -> anyhow::Result<(InstallPlan, PlanPreview)> {
    olm_controllers::plan_preview::preview_of(client, namespace, name).await.map_err(anyhow::Error::msg)
}

pub use olm_controllers::plan_preview::header;
