//! `olm rollback SUBSCRIPTION`: back to the CSV the installed one replaced. Says how it will
//! go and checks what it can first, asks, then annotates the Subscription
//! (`olm-rs.io/rolled-back-from`) and follows OLM doing it (see the Subscription controller's
//! `rollback`).

use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use olm_api::common::ConditionStatus;
use olm_api::keys::ROLLED_BACK_FROM_ANNOTATION;
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use olm_api::v1alpha1::install_plan::{InstallPlan, InstallPlanPhase};
use olm_api::v1alpha1::subscription::{Subscription, SubscriptionConditionType};
use serde_json::{Value, json};

use super::status::csv_state;
use super::{AskArgs, KubeArgs, POLL, WAIT, api_error, block_on, confirm, connect, progress};

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
        let (subs, sub) = super::subscription(&client, &namespace, name).await?;
        let status = sub.status.clone().unwrap_or_default();
        let from = status.current_csv.clone().filter(|c| !c.is_empty()).with_context(|| format!("Subscription {namespace}/{name} has installed nothing yet: there is nothing to roll back"))?;
        if sub.annotations().get(ROLLED_BACK_FROM_ANNOTATION) == Some(&from) {
            println!("A rollback from {from} is already under way.");
            return if args.ask.no_wait { Ok(ExitCode::SUCCESS) } else { follow(&client, &namespace, name, &from, None, None).await };
        }
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &namespace);
        let newer = csvs
            .get_opt(&from)
            .await
            .map_err(|err| anyhow::anyhow!("cannot read ClusterServiceVersion {namespace}/{from}: {}", api_error(&err)))?
            .with_context(|| format!("the Subscription's CSV {from} is not in namespace {namespace}: nothing to roll back"))?;
        let to = newer
            .spec
            .replaces
            .clone()
            .filter(|r| !r.is_empty())
            .with_context(|| format!("cannot roll back: {from} replaces no earlier version (spec.replaces is empty), so there is nothing to go back to"))?;
        println!("Rolls Subscription {namespace}/{name} back from {from} to {to}.");
        match offered(&client, &sub, &to).await {
            Ok(false) => anyhow::bail!(
                "cannot roll back: catalog {}/{} no longer offers {to} in package {}",
                sub.spec.source_namespace,
                sub.spec.source,
                sub.spec.name
            ),
            Ok(true) => {}
            Err(why) => println!("(Cannot check the catalog from here: {why}. OLM says on the Subscription if it no longer has {to}.)"),
        }
        println!(
            "{to} comes back from catalog {}/{} through an InstallPlan ({} approval): its Deployments, ServiceAccounts and permissions again. OLM first checks that its CRDs keep every object stored now, and changes nothing if they do not.",
            sub.spec.source_namespace,
            sub.spec.source,
            sub.spec.approval().as_str()
        );
        println!("{from} is not installed again until the catalog offers a newer version or the annotation {ROLLED_BACK_FROM_ANNOTATION} is removed.");
        if !args.ask.yes && !confirm(&format!("Roll back to {to}?"))? {
            println!("Not rolled back.");
            return Ok(ExitCode::from(1));
        }
        subs.patch(name, &PatchParams::default(), &Patch::Merge(json!({"metadata": {"annotations": {ROLLED_BACK_FROM_ANNOTATION: from}}})))
            .await
            .map_err(|err| anyhow::anyhow!("cannot annotate Subscription {namespace}/{name}: {}", api_error(&err)))?;
        if args.ask.no_wait {
            return Ok(ExitCode::SUCCESS);
        }
        let before = sub.annotations().get(ROLLED_BACK_FROM_ANNOTATION).cloned();
        follow(&client, &namespace, name, &from, Some(&to), before).await
    })
}

/// Whether the Subscription's catalog lists `csv` in its package (PackageManifest API).
async fn offered(client: &kube::Client, sub: &Subscription, csv: &str) -> Result<bool, String> {
    let Some(package) = super::package_manifest(client, sub).await? else {
        return Ok(false);
    };
    let channels = package.data.pointer("/status/channels").and_then(Value::as_array).cloned().unwrap_or_default();
    Ok(channels.iter().any(|c| {
        c.get("currentCSV").and_then(Value::as_str) == Some(csv)
            || c.get("entries").and_then(Value::as_array).into_iter().flatten().any(|e| e.get("name").and_then(Value::as_str) == Some(csv))
    }))
}

/// Follow the rollback until `to` (when known) is the Subscription's Succeeded CSV and `from`
/// is gone; when OLM refuses it, say why and take the request back (the annotation as it was,
/// `before`: an earlier rollback's).
async fn follow(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    from: &str,
    to: Option<&str>,
    before: Option<String>,
) -> anyhow::Result<ExitCode> {
    let subs: Api<Subscription> = Api::namespaced(client.clone(), namespace);
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), namespace);
    let plans: Api<InstallPlan> = Api::namespaced(client.clone(), namespace);
    let started = Instant::now();
    let mut last = String::new();
    while started.elapsed() < WAIT {
        let sub = subs.get(name).await.map_err(|err| anyhow::anyhow!("cannot read Subscription {namespace}/{name}: {}", api_error(&err)))?;
        let status = sub.status.clone().unwrap_or_default();
        let refused = status.conditions.iter().flatten().find(|c| {
            c.type_ == SubscriptionConditionType::ResolutionFailed
                && c.status == ConditionStatus::True
                && c.reason.as_deref() == Some("RollbackImpossible")
        });
        if let Some(refused) = refused {
            // Nothing was changed: take the request back, so the Subscription is as before.
            subs.patch(name, &PatchParams::default(), &Patch::Merge(json!({"metadata": {"annotations": {ROLLED_BACK_FROM_ANNOTATION: before}}})))
                .await
                .map_err(|err| anyhow::anyhow!("cannot set the annotation {ROLLED_BACK_FROM_ANNOTATION} back: {}", api_error(&err)))?;
            anyhow::bail!("{} (the request was withdrawn: {from} stays installed)", refused.message.clone().unwrap_or_default());
        }
        let current = status.current_csv.clone().unwrap_or_default();
        let current_csv = csvs.get_opt(&current).await.map_err(|err| anyhow::anyhow!("cannot read ClusterServiceVersion {namespace}/{current}: {}", api_error(&err)))?;
        let (phase, _) = current_csv.as_ref().map_or_else(|| ("not created yet".to_owned(), String::new()), csv_state);
        let newer_left = csvs.get_opt(from).await.map_err(|err| anyhow::anyhow!("cannot read ClusterServiceVersion {namespace}/{from}: {}", api_error(&err)))?.is_some();
        let line = format!("Subscription {name}: {current} {phase}{}", if newer_left { format!("; {from} still there") } else { String::new() });
        if line != last {
            progress(&line);
            last = line;
        }
        if current != from && phase == "Succeeded" && !newer_left && to.is_none_or(|to| to == current) {
            println!("Rolled back to {current}.");
            return Ok(ExitCode::SUCCESS);
        }
        if let Some(plan_name) = status.install_plan_ref.as_ref().and_then(|r| r.name.clone())
            && let Some(plan) = plans.get_opt(&plan_name).await.map_err(|err| anyhow::anyhow!("cannot read InstallPlan {namespace}/{plan_name}: {}", api_error(&err)))?
            && !plan.spec.approved
            && plan.status.as_ref().is_some_and(|s| s.phase == InstallPlanPhase::RequiresApproval)
            && plan.spec.cluster_service_version_names.iter().any(|c| Some(c.as_str()) == to)
        {
            println!(
                "The rollback's InstallPlan {plan_name} waits for approval.\n  preview it: kubectl olm plan show {plan_name} -n {namespace}\n  approve it: kubectl olm approve {plan_name} -n {namespace}"
            );
            return Ok(ExitCode::SUCCESS);
        }
        tokio::time::sleep(POLL).await;
    }
    progress(&format!("still not done after {} s: kubectl olm status {name} -n {namespace} tells where it stands", WAIT.as_secs()));
    Ok(ExitCode::from(1))
}
