//! `olm rollback SUBSCRIPTION`: back to the CSV the installed one replaced. Says how it will
//! go and checks what it can first (`olm_admin::rollback`, shared with the console), asks,
//! then asks OLM for it and follows it (see the Subscription controller's `rollback`).

use std::process::ExitCode;

use clap::Args;
use olm_admin::rollback::{self, Followed, Prepared};

use super::{AskArgs, KubeArgs, WAIT, block_on, confirm, connect, progress};

/// `olm rollback`.
#[derive(Debug, Args)]
pub struct RollbackArgs {
    /// The Subscription whose operator goes back one version.
    name: String,
    #[command(flatten)]
    kube: KubeArgs,
    #[command(flatten)]
    ask: AskArgs,
}

/// Exit 0 when rolled back (or waiting for the admin to approve its plan); 1 when refused,
/// not confirmed, or not done in time.
pub fn run(args: RollbackArgs) -> anyhow::Result<ExitCode> {
    block_on(async move {
        let (client, namespace) = connect(&args.kube).await?;
        let name = args.name.as_str();
        let rollback = match rollback::prepare(&client, &namespace, name).await? {
            Prepared::UnderWay { from } => {
                println!("A rollback from {from} is already under way.");
                return if args.ask.no_wait { Ok(ExitCode::SUCCESS) } else { follow(&client, &namespace, name, &from, None, None).await };
            }
            Prepared::Ready(rollback) => rollback,
        };
        for line in rollback.summary() {
            println!("{line}");
        }
        if !args.ask.yes && !confirm(&format!("Roll back to {}?", rollback.to))? {
            println!("Not rolled back.");
            return Ok(ExitCode::from(1));
        }
        rollback::request(&client, &rollback).await?;
        if args.ask.no_wait {
            return Ok(ExitCode::SUCCESS);
        }
        follow(&client, &namespace, name, &rollback.from, Some(&rollback.to), rollback.before.as_deref()).await
    })
}

/// Follow the rollback until `to` (when known) is the Subscription's Succeeded CSV and `from`
/// is gone; when OLM refuses it, say why (the request is taken back: the annotation as it was,
/// `before`, an earlier rollback's).
async fn follow(client: &kube::Client, namespace: &str, name: &str, from: &str, to: Option<&str>, before: Option<&str>) -> anyhow::Result<ExitCode> {
    match rollback::follow(client, namespace, name, from, to, before, &super::waiting()).await? {
        Followed::Refused(said) => anyhow::bail!("{said}"),
        Followed::Done { csv } => {
            println!("Rolled back to {csv}.");
            Ok(ExitCode::SUCCESS)
        }
        Followed::WaitsForApproval { plan } => {
            println!(
                "The rollback's InstallPlan {plan} waits for approval.\n  preview it: kubectl olm plan show {plan} -n {namespace}\n  approve it: kubectl olm approve {plan} -n {namespace}"
            );
            Ok(ExitCode::SUCCESS)
        }
        Followed::Going => {
            progress(&format!("still not done after {} s: kubectl olm status {name} -n {namespace} tells where it stands", WAIT.as_secs()));
            Ok(ExitCode::from(1))
        }
    }
}
