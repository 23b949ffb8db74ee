//! `olm status [SUBSCRIPTION]`: one page per Subscription — what is installed and how it is,
//! the channel's head and why the installed version is or is not it, plans waiting for
//! approval, the catalog's health and the last failure with what to do. `observe` reads the
//! cluster; `assess` (pure) decides what to say.

use std::process::ExitCode;

use clap::Args;
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use olm_api::common::ConditionStatus;
use olm_api::v1alpha1::catalog_source::CatalogSource;
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use olm_api::v1alpha1::install_plan::{InstallPlan, InstallPlanPhase};
use olm_api::v1alpha1::subscription::{Subscription, SubscriptionConditionType, SubscriptionState};
use serde::Serialize;
use serde_json::Value;

use super::{KubeArgs, Output, api_error, block_on, connect, print_data};

/// `olm status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The Subscription (default: every Subscription of the namespace).
    name: Option<String>,
    #[command(flatten)]
    kube: KubeArgs,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value = "text")]
    output: Output,
}

/// What is read for one Subscription.
pub struct Observed {
    pub sub: Subscription,
    /// The installed CSV (`status.installedCSV`), if it exists.
    pub installed: Option<ClusterServiceVersion>,
    /// The CSV being installed (`status.currentCSV`) when it is another one.
    pub current: Option<ClusterServiceVersion>,
    /// The InstallPlans the Subscription owns.
    pub plans: Vec<InstallPlan>,
    /// Its CatalogSource, if it exists.
    pub catalog: Option<CatalogSource>,
    /// The head of its channel from the PackageManifest API, or why it is unknown.
    pub head: Result<Option<String>, String>,
}

/// What `olm status` says of one Subscription.
#[derive(Debug, Default, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub namespace: String,
    pub name: String,
    /// Installed and Succeeded, and nothing failing.
    pub healthy: bool,
    /// One line: healthy, or what is wrong.
    pub verdict: String,
    /// Labelled lines, in order.
    pub lines: Vec<(String, String)>,
}

/// Exit 0 when every Subscription shown is healthy, 1 when one is not.
pub fn run(args: StatusArgs) -> anyhow::Result<ExitCode> {
    block_on(async move {
        let (client, namespace) = connect(&args.kube).await?;
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &namespace);
        let subs = match &args.name {
            Some(name) => vec![super::subscription(&client, &namespace, name).await?.1],
            None => subs
                .list(&ListParams::default())
                .await
                .map_err(|err| anyhow::anyhow!("cannot list Subscriptions in {namespace}: {}", api_error(&err)))?
                .items,
        };
        if subs.is_empty() {
            println!("No Subscriptions in namespace {namespace}.");
            return Ok(ExitCode::SUCCESS);
        }
        let mut reports = Vec::new();
        for sub in subs {
            reports.push(assess(&observe(&client, sub).await?));
        }
        let healthy = reports.iter().all(|r| r.healthy);
        match args.output {
            Output::Text => {
                let pages: Vec<String> = reports.iter().map(text).collect();
                print!("{}", pages.join("\n"));
            }
            other => print_data(other, &reports)?,
        }
        Ok(if healthy { ExitCode::SUCCESS } else { ExitCode::from(1) })
    })
}

async fn observe(client: &kube::Client, sub: Subscription) -> anyhow::Result<Observed> {
    let namespace = sub.namespace().unwrap_or_default();
    let read = |what: String| move |err: kube::Error| anyhow::anyhow!("cannot read {what}: {}", api_error(&err));
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &namespace);
    let status = sub.status.clone().unwrap_or_default();
    let installed = match status.installed_csv.as_deref().filter(|n| !n.is_empty()) {
        Some(name) => csvs.get_opt(name).await.map_err(read(format!("ClusterServiceVersion {namespace}/{name}")))?,
        None => None,
    };
    let current = match status.current_csv.as_deref().filter(|n| !n.is_empty() && Some(*n) != status.installed_csv.as_deref()) {
        Some(name) => csvs.get_opt(name).await.map_err(read(format!("ClusterServiceVersion {namespace}/{name}")))?,
        None => None,
    };
    let uid = sub.uid().unwrap_or_default();
    let mut plans: Vec<InstallPlan> = Api::<InstallPlan>::namespaced(client.clone(), &namespace)
        .list(&ListParams::default())
        .await
        .map_err(read(format!("the InstallPlans of {namespace}")))?
        .items
        .into_iter()
        .filter(|p| p.owner_references().iter().any(|o| o.uid == uid))
        .collect();
    plans.sort_by_key(|p| std::cmp::Reverse(p.spec.generation.unwrap_or_default()));
    let catalog_ns = if sub.spec.source_namespace.is_empty() { namespace.clone() } else { sub.spec.source_namespace.clone() };
    let catalog = Api::<CatalogSource>::namespaced(client.clone(), &catalog_ns)
        .get_opt(&sub.spec.source)
        .await
        .map_err(read(format!("CatalogSource {catalog_ns}/{}", sub.spec.source)))?;
    let head = channel_head(client, &sub).await;
    Ok(Observed { sub, installed, current, plans, catalog, head })
}

/// The head of the Subscription's channel, as the PackageManifest API says it.
async fn channel_head(client: &kube::Client, sub: &Subscription) -> Result<Option<String>, String> {
    let Some(package) = super::package_manifest(client, sub).await? else {
        return Ok(None);
    };
    let status = package.data.get("status").cloned().unwrap_or(Value::Null);
    let channel = sub
        .spec
        .channel
        .clone()
        .filter(|c| !c.is_empty())
        .or_else(|| status.get("defaultChannel").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_default();
    Ok(status
        .get("channels")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|c| c.get("name").and_then(Value::as_str) == Some(channel.as_str()))
        .and_then(|c| c.get("currentCSV").and_then(Value::as_str))
        .map(str::to_owned))
}

/// A CSV's phase and message.
pub fn csv_state(csv: &ClusterServiceVersion) -> (String, String) {
    let status = csv.status.clone().unwrap_or_default();
    let phase = status.phase.as_ref().map_or_else(|| "no phase yet".to_owned(), |p| p.as_str().to_owned());
    (phase, status.message.unwrap_or_default())
}

/// What to say of one Subscription (pure).
pub fn assess(o: &Observed) -> Report {
    let sub = &o.sub;
    let namespace = sub.namespace().unwrap_or_default();
    let status = sub.status.clone().unwrap_or_default();
    let mut lines: Vec<(String, String)> = Vec::new();
    let mut problems: Vec<String> = Vec::new();
    let mut line = |label: &str, text: String| lines.push((label.to_owned(), text));
    let channel = sub.spec.channel.clone().filter(|c| !c.is_empty()).unwrap_or_else(|| "(the default channel)".into());
    line(
        "Package",
        format!(
            "{}, channel {channel}, from CatalogSource {}/{}, approval {}",
            sub.spec.name,
            sub.spec.source_namespace,
            sub.spec.source,
            sub.spec.approval().as_str()
        ),
    );
    let installed_name = status.installed_csv.clone().filter(|n| !n.is_empty());
    let mut healthy = false;
    match (&installed_name, &o.installed) {
        (None, _) => {
            line("Installed", "nothing yet".into());
            problems.push("nothing is installed yet".into());
        }
        (Some(name), None) => {
            line("Installed", format!("{name}, but that ClusterServiceVersion does not exist (deleted?)"));
            problems.push(format!("the installed CSV {name} is gone: OLM installs it again, or delete the Subscription"));
        }
        (Some(name), Some(csv)) => {
            let (phase, message) = csv_state(csv);
            let version = csv.spec.version.as_ref().map(|v| format!(" (version {v})")).unwrap_or_default();
            line("Installed", format!("{name}{version}: {phase}{}", if message.is_empty() { String::new() } else { format!(" — {message}") }));
            healthy = phase == "Succeeded";
            if !healthy {
                problems.push(format!("{name} is {phase}: {message} (kubectl describe csv {name} -n {namespace})"));
            }
        }
    }
    if let Some(current) = &o.current {
        let (phase, message) = csv_state(current);
        line("Upgrading to", format!("{}: {phase}{}", current.name_any(), if message.is_empty() { String::new() } else { format!(" — {message}") }));
    }
    match &o.head {
        Ok(Some(head)) => line("Channel head", head.clone()),
        Ok(None) => line("Channel head", "unknown: the catalog does not list this package or channel".into()),
        Err(why) => line("Channel head", format!("unknown: {why}")),
    }
    let condition = |type_: SubscriptionConditionType| {
        status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == type_ && c.status == ConditionStatus::True)
            .map(|c| format!("{}: {}", c.reason.clone().unwrap_or_default(), c.message.clone().unwrap_or_default()))
    };
    let waiting: Vec<&InstallPlan> = o
        .plans
        .iter()
        .filter(|p| !p.spec.approved && p.status.as_ref().is_some_and(|s| s.phase == InstallPlanPhase::RequiresApproval))
        .collect();
    let at_head = matches!((&o.head, &installed_name), (Ok(Some(head)), Some(installed)) if head == installed);
    let why = if at_head {
        "the installed version is the channel head".to_owned()
    } else if let Some(plan) = waiting.first() {
        format!("an upgrade to {} waits for approval", plan.spec.cluster_service_version_names.join(", "))
    } else if let Some(current) = &o.current {
        format!("{} is being installed", current.name_any())
    } else if let Some(behind) = condition(SubscriptionConditionType::BehindChannelHead) {
        behind
    } else if installed_name.is_some() && status.state == Some(SubscriptionState::AtLatestKnown) {
        // OLM says BehindChannelHead whenever the installed version is not the head.
        "the installed version is the latest of its channel (AtLatestKnown)".to_owned()
    } else if installed_name.is_some() {
        format!("OLM has no upgrade to offer yet (state {})", status.state.as_ref().map(|s| s.as_str().to_owned()).unwrap_or_default())
    } else {
        "nothing installed yet".into()
    };
    line("Why", why);
    if let Some(rolled_back) = condition(SubscriptionConditionType::RolledBack) {
        line("Rolled back", rolled_back);
    }
    for plan in waiting {
        let name = plan.name_any();
        line(
            "Waiting",
            format!(
                "InstallPlan {name} ({}) waits for approval.\n  preview it: kubectl olm plan show {name} -n {namespace}\n  approve it: kubectl olm approve {name} -n {namespace}",
                plan.spec.cluster_service_version_names.join(", ")
            ),
        );
    }
    match &o.catalog {
        None => {
            line("Catalog", format!("CatalogSource {}/{} does not exist", sub.spec.source_namespace, sub.spec.source));
            problems.push(format!("create CatalogSource {}/{} or point the Subscription at one that exists", sub.spec.source_namespace, sub.spec.source));
        }
        Some(catalog) => {
            let state = catalog
                .status
                .as_ref()
                .and_then(|s| s.connection_state.as_ref())
                .map(|c| c.last_observed_state.clone())
                .unwrap_or_else(|| "not read yet".into());
            let message = catalog.status.as_ref().and_then(|s| s.message.clone()).filter(|m| !m.is_empty());
            line("Catalog", format!("{}: {state}{}", catalog.name_any(), message.map(|m| format!(" — {m}")).unwrap_or_default()));
        }
    }
    for type_ in [
        SubscriptionConditionType::ResolutionFailed,
        SubscriptionConditionType::InstallPlanFailed,
        SubscriptionConditionType::CatalogSourcesUnhealthy,
        SubscriptionConditionType::BundleUnpackFailed,
        SubscriptionConditionType::InstallPlanWriteFailed,
        SubscriptionConditionType::InstallPlanMissing,
    ] {
        if let Some(text) = condition(type_.clone()) {
            problems.push(format!("{}: {text}", type_.as_str()));
        }
    }
    if let Some(failed) = o.plans.iter().find(|p| p.status.as_ref().is_some_and(|s| s.phase == InstallPlanPhase::Failed)) {
        let message = failed.status.as_ref().and_then(|s| s.message.clone()).unwrap_or_default();
        line("Last failure", format!("InstallPlan {}: {message}", failed.name_any()));
    }
    let healthy = healthy && problems.is_empty();
    for problem in &problems {
        line("Problem", problem.clone());
    }
    let verdict = if healthy {
        "healthy".to_owned()
    } else {
        format!("NOT HEALTHY: {}", problems.first().cloned().unwrap_or_default())
    };
    Report { namespace, name: sub.name_any(), healthy, verdict, lines }
}

/// A report as a page of text.
pub fn text(report: &Report) -> String {
    let mut out = format!("Subscription {}/{}: {}\n", report.namespace, report.name, report.verdict);
    for (label, text) in &report.lines {
        let mut rows = text.lines();
        out.push_str(&format!("  {:<13} {}\n", format!("{label}:"), rows.next().unwrap_or_default()));
        for row in rows {
            out.push_str(&format!("  {:<13} {row}\n", ""));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn from<T: serde::de::DeserializeOwned>(value: Value) -> T {
        serde_json::from_value(value).expect("a valid object")
    }

    fn observed(installed_phase: Option<&str>, head: &str, plans: Vec<InstallPlan>) -> Observed {
        let sub = from(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": "etcd", "namespace": "ns", "uid": "u"},
            "spec": {"source": "community", "sourceNamespace": "olm", "name": "etcd", "channel": "alpha", "installPlanApproval": "Manual"},
            "status": {"installedCSV": "etcd.v1", "currentCSV": "etcd.v1", "state": "AtLatestKnown"}
        }));
        let installed = installed_phase.map(|phase| {
            from(json!({
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
                "metadata": {"name": "etcd.v1", "namespace": "ns"},
                "spec": {"displayName": "etcd", "install": {"strategy": "deployment"}},
                "status": {"phase": phase, "message": "install strategy completed with no errors"}
            }))
        });
        let catalog = from(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
            "metadata": {"name": "community", "namespace": "olm"},
            "spec": {"sourceType": "grpc"}, "status": {"connectionState": {"lastObservedState": "READY"}}
        }));
        Observed { sub, installed, current: None, plans, catalog: Some(catalog), head: Ok(Some(head.into())) }
    }

    fn waiting_plan() -> InstallPlan {
        from(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
            "metadata": {"name": "install-abc", "namespace": "ns"},
            "spec": {"clusterServiceVersionNames": ["etcd.v2"], "approval": "Manual", "approved": false},
            "status": {"phase": "RequiresApproval", "catalogSources": []}
        }))
    }

    fn said(report: &Report, label: &str) -> String {
        report.lines.iter().filter(|(l, _)| l == label).map(|(_, t)| t.as_str()).collect::<Vec<_>>().join("\n")
    }

    #[test]
    fn at_the_head_and_succeeded_is_healthy() {
        let report = assess(&observed(Some("Succeeded"), "etcd.v1", vec![]));
        assert!(report.healthy, "{report:#?}");
        assert_eq!(report.verdict, "healthy");
        assert_eq!(said(&report, "Why"), "the installed version is the channel head");
        assert!(text(&report).starts_with("Subscription ns/etcd: healthy\n  Package:      etcd, channel alpha, from CatalogSource olm/community, approval Manual\n"), "{}", text(&report));
    }

    #[test]
    fn an_upgrade_waiting_for_approval_says_how_to_preview_and_approve_it() {
        let report = assess(&observed(Some("Succeeded"), "etcd.v2", vec![waiting_plan()]));
        assert!(report.healthy, "waiting for approval is not a failure");
        assert_eq!(said(&report, "Why"), "an upgrade to etcd.v2 waits for approval");
        let waiting = said(&report, "Waiting");
        assert!(waiting.contains("kubectl olm plan show install-abc -n ns") && waiting.contains("kubectl olm approve install-abc -n ns"), "{waiting}");
    }

    #[test]
    fn a_failed_csv_or_a_missing_catalog_is_not_healthy_and_says_what_to_do() {
        let report = assess(&observed(Some("Failed"), "etcd.v1", vec![]));
        assert!(!report.healthy);
        assert!(report.verdict.starts_with("NOT HEALTHY: etcd.v1 is Failed") && report.verdict.contains("kubectl describe csv etcd.v1 -n ns"), "{}", report.verdict);
        let mut gone = observed(Some("Succeeded"), "etcd.v1", vec![]);
        gone.catalog = None;
        let report = assess(&gone);
        assert!(!report.healthy);
        assert_eq!(report.verdict, "NOT HEALTHY: create CatalogSource olm/community or point the Subscription at one that exists");
        let report = assess(&observed(None, "etcd.v1", vec![]));
        assert!(report.verdict.contains("the installed CSV etcd.v1 is gone"), "{}", report.verdict);
    }
}
