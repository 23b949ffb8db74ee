//! `olm uninstall SUBSCRIPTION`: says what goes and what stays, asks, then uninstalls — all of
//! it in `olm_admin::uninstall`, which the console's Uninstall page shares.

use std::process::ExitCode;

use clap::Args;
use olm_admin::uninstall::{self, Item, OptionNames, Options};

use super::{KubeArgs, block_on, confirm, connect, waiting};

/// `olm uninstall`.
#[derive(Debug, Args)]
pub struct UninstallArgs {
    /// The Subscription of the operator to remove.
    name: String,
    #[command(flatten)]
    kube: KubeArgs,
    /// Also delete the operands: every object of the CRDs the operator owns, in its target namespaces.
    #[arg(long)]
    delete_operands: bool,
    /// Also delete the CRDs the operator owns that no other operator owns or requires (their
    /// objects go with them, so this implies --delete-operands).
    #[arg(long)]
    delete_crds: bool,
    /// Go ahead without asking (for scripts); what is deleted is still listed.
    #[arg(long, short = 'y')]
    yes: bool,
}

const FLAGS: OptionNames<'static> = OptionNames { delete_operands: "--delete-operands", delete_crds: "--delete-crds" };

fn print_items(items: &[Item], prefix: &str) {
    for item in items {
        println!("{prefix}{}", item.text);
        for detail in &item.details {
            println!("    {detail}");
        }
    }
}

/// Exit 0 when everything listed is gone; 1 when not confirmed, or something did not go in time.
pub fn run(args: UninstallArgs) -> anyhow::Result<ExitCode> {
    block_on(async move {
        let (client, namespace) = connect(&args.kube).await?;
        let options = Options { delete_operands: args.delete_operands, delete_crds: args.delete_crds };
        let plan = uninstall::observe(&client, &namespace, &args.name).await?;
        let summary = plan.summary(options, FLAGS);
        println!("{}:", summary.title);
        print_items(&summary.goes, "  ");
        print_items(&summary.kept, "Kept: ");
        if !args.yes && !confirm("Uninstall?")? {
            println!("Nothing was deleted.");
            return Ok(ExitCode::from(1));
        }
        let done = uninstall::execute(&client, &plan, options, &waiting()).await?;
        if let Some(note) = done.note {
            eprintln!("note: {note}");
        }
        println!("Uninstalled {}.", done.uninstalled);
        Ok(ExitCode::SUCCESS)
    })
}
