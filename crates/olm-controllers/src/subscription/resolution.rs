//! Resolution for one Subscription, pure: the resolver's request for its namespace (installed
//! operators and every Subscription), the gate that says whether to resolve now, and what this
//! Subscription should get — nothing, a failure to report, or the bundles of a new InstallPlan.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;
use olm_api::keys;
use olm_api::v1alpha1::cluster_service_version::{ClusterServiceVersion, CsvPhase};
use olm_api::v1alpha1::subscription::{Subscription, SubscriptionConditionType, reasons};
use olm_catalog_client::CatalogContent;
use olm_resolver::{CatalogKey, Catalogs, Installed, Request, Selected};
use olm_runtime::EventNote;
use serde_json::{Value, json};

use super::decide::{self, CatalogView, Deprecations, Gate};
use super::observe::{Facts, GroupModes};

/// How soon to try again when the targeted catalog cannot be read (its recovery also
/// triggers a reconcile at once).
pub const CATALOG_RETRY: Duration = Duration::from_secs(30);

/// What this reconcile should do for the Subscription.
#[derive(Clone, Debug, PartialEq)]
pub enum Intent {
    /// Nothing: a plan is in flight, or the installed CSV has not finished (see [`Gate`]).
    Wait,
    /// Report that the Subscription cannot be resolved.
    Fail {
        /// `ConstraintsNotSatisfiable` or `ErrorPreventedResolution`.
        reason: &'static str,
        /// Why, and what to change.
        message: String,
        /// When to look again.
        requeue: Option<Duration>,
    },
    /// Nothing new for this Subscription.
    UpToDate,
    /// Resolution chose this CSV, which was rolled back: nothing, and say why.
    Rejected(String),
    /// Create an InstallPlan for these bundles: this Subscription's first, then the
    /// dependencies no Subscription asked for.
    Install {
        /// The bundles.
        bundles: Vec<Selected>,
        /// The CSV it installs for this Subscription.
        current_csv: String,
    },
}

/// The resolution decision.
#[derive(Clone, Debug, PartialEq)]
pub struct ResolutionDecision {
    /// What to do.
    pub intent: Intent,
    /// An installed CSV of the package this Subscription takes over (it has no currentCSV yet).
    pub adopted: Option<String>,
    /// Whether the resolver ran, and if so whether this Subscription resolved (the metric).
    pub resolver_ran: Option<bool>,
    /// The Event to send (a new resolution failure).
    pub event: Option<EventNote>,
}

impl ResolutionDecision {
    /// `intent`, decided without running the resolver (a rollback).
    pub fn of(intent: Intent) -> ResolutionDecision {
        ResolutionDecision { intent, adopted: None, resolver_ran: None, event: None }
    }
}

/// Decide, from what was observed, whether to resolve and what this Subscription gets;
/// `rejected` is a CSV rolled back, which it does not get again.
pub fn decide(facts: &Facts, rejected: Option<&str>) -> ResolutionDecision {
    let sub = &facts.sub;
    let name = sub.name_any();
    let namespace = sub.namespace().unwrap_or_default();
    let previous = sub.status.clone().unwrap_or_default();
    let plan_ref = previous.install_plan_ref.as_ref().and_then(|r| r.name.as_ref());
    let mut decision = ResolutionDecision { intent: Intent::Wait, adopted: None, resolver_ran: None, event: None };
    let gate = decide::gate(facts.plan.as_ref(), facts.plan_missing, facts.current.as_ref(), plan_ref.is_some(), facts.fail_forward);
    tracing::debug!(?gate, plan = ?plan_ref, plan_phase = ?facts.plan.as_ref().map(|p| p.phase.clone()), plan_missing = facts.plan_missing, current = ?facts.current, "resolution gate");
    if gate != Gate::Resolve {
        return decision;
    }
    let target = decide::target(sub);
    if !facts.contents.contains_key(&target) {
        decision.intent = Intent::Fail {
            reason: reasons::ERROR_PREVENTED_RESOLUTION,
            message: catalog_unavailable(&target, &facts.catalogs),
            requeue: Some(CATALOG_RETRY),
        };
        return decision;
    }
    let catalogs = Catalogs::from_indexed(facts.contents.values().map(|c| c.indexed.clone()));
    let (mut request, owned) = build_request(&namespace, &facts.global_namespace, &facts.subs, &facts.csvs, &catalogs);
    request.install_modes = facts.group_modes.as_ref().map(|g| g.modes.clone()).unwrap_or_default();
    if previous.current_csv.is_none() {
        decision.adopted = owned.get(&name).cloned();
    }
    let resolution = olm_resolver::resolve(&catalogs, &request);
    let mine_failed = resolution.errors.iter().find(|e| e.subscription == name);
    decision.resolver_ran = Some(mine_failed.is_none());
    if let Some(error) = mine_failed {
        let changed = previous
            .condition(&SubscriptionConditionType::ResolutionFailed)
            .is_none_or(|c| c.message.as_deref() != Some(error.message.as_str()));
        if changed {
            decision.event = Some(EventNote::warning("ResolutionFailed", "Resolve", format!("{}: {}", error.category, error.message)));
        }
        decision.intent = Intent::Fail {
            reason: reasons::CONSTRAINTS_NOT_SATISFIABLE,
            message: error.message.clone(),
            requeue: None,
        };
        return decision;
    }
    let mine: Vec<&Selected> = resolution
        .bundles
        .iter()
        .filter(|b| b.subscription.as_deref() == Some(name.as_str()))
        .collect();
    decision.intent = match mine.first() {
        None => Intent::UpToDate,
        Some(first) if Some(first.name.as_str()) == rejected => Intent::Rejected(first.name.clone()),
        Some(first) => Intent::Install {
            current_csv: first.name.clone(),
            bundles: mine
                .iter()
                .copied()
                .chain(resolution.bundles.iter().filter(|b| b.subscription.is_none()))
                .cloned()
                .collect(),
        },
    };
    decision
}

/// A rollback to `to`: the plan that installs it again from the Subscription's catalog,
/// replacing `from`; or why it cannot.
pub fn rollback_intent(facts: &Facts, from: &str, to: &str) -> Intent {
    let sub = &facts.sub;
    let target = decide::target(sub);
    let bundle = facts.contents.get(&target).and_then(|content| content.catalog.bundle(&sub.spec.name, to));
    let Some(bundle) = bundle else {
        return Intent::Fail {
            reason: ROLLBACK_IMPOSSIBLE,
            message: format!(
                "cannot roll back from {from} to {to}: catalog {target} does not have {to} (any more) in package {}; remove the annotation {} to stay on {from}",
                sub.spec.name,
                keys::ROLLED_BACK_FROM_ANNOTATION
            ),
            requeue: Some(CATALOG_RETRY),
        };
    };
    let channel = sub.spec.channel.clone().filter(|c| !c.is_empty()).or_else(|| bundle.channels.first().cloned()).unwrap_or_default();
    Intent::Install {
        current_csv: to.to_owned(),
        bundles: vec![Selected {
            name: to.to_owned(),
            package: sub.spec.name.clone(),
            channel,
            version: Some(bundle.version.clone()),
            catalog: target,
            replaces: Some(from.to_owned()),
            reason: olm_resolver::Reason::Upgrade,
            subscription: Some(sub.name_any()),
        }],
    }
}

/// Reason of `ResolutionFailed` when a rollback cannot happen.
pub const ROLLBACK_IMPOSSIBLE: &str = "RollbackImpossible";

/// The package of an installed CSV, from its `operatorframework.io/properties` annotation.
pub fn package_of(csv: &ClusterServiceVersion) -> Option<String> {
    let text = csv.annotations().get(keys::PROPERTIES_ANNOTATION)?;
    let value: Value = serde_json::from_str(text).ok()?;
    value
        .get("properties")?
        .as_array()?
        .iter()
        .find(|p| p.get("type") == Some(&json!("olm.package")))
        .and_then(|p| p.pointer("/value/packageName"))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// Installed operators and the resolver's Subscriptions for `namespace`. Returns the request
/// and, per Subscription name, the installed CSV it owns (by status or adoption).
fn build_request(
    namespace: &str,
    global_namespace: &str,
    subs: &[Arc<Subscription>],
    csvs: &[Arc<ClusterServiceVersion>],
    catalogs: &Catalogs,
) -> (Request, HashMap<String, String>) {
    // A CSV a rollback brought back is not replaced by the newer one it rolls back, though
    // that one's spec.replaces names it.
    let rolled_back_to = |name: &str, newer: &ClusterServiceVersion| {
        csvs.iter().any(|c| c.name_any() == name && crate::metadata::is_rollback_of(c, &newer.name_any()))
    };
    let replaced: HashSet<String> = csvs
        .iter()
        .filter_map(|c| c.spec.replaces.clone().filter(|r| !rolled_back_to(r, c)))
        .collect();
    let live: Vec<&Arc<ClusterServiceVersion>> = csvs
        .iter()
        .filter(|c| !c.is_copied())
        .filter(|c| !matches!(c.phase(), Some(CsvPhase::Replacing | CsvPhase::Deleting)))
        .filter(|c| !replaced.contains(&c.name_any()))
        .collect();
    let mut owner: HashMap<String, String> = HashMap::new();
    let mut owned_csv: HashMap<String, String> = HashMap::new();
    for sub in subs {
        let status = sub.status.clone().unwrap_or_default();
        for name in [status.installed_csv, status.current_csv].into_iter().flatten() {
            if live.iter().any(|c| c.name_any() == name) && !owner.contains_key(&name) {
                owner.insert(name.clone(), sub.name_any());
                owned_csv.insert(sub.name_any(), name);
                break;
            }
        }
    }
    // A Subscription without a current CSV takes over an installed CSV of its package.
    for sub in subs {
        let has_current = sub.status.as_ref().and_then(|s| s.current_csv.as_ref()).is_some();
        if has_current || owned_csv.contains_key(&sub.name_any()) {
            continue;
        }
        if let Some(csv) = live
            .iter()
            .find(|c| !owner.contains_key(&c.name_any()) && package_of(c).as_deref() == Some(sub.spec.name.as_str()))
        {
            owner.insert(csv.name_any(), sub.name_any());
            owned_csv.insert(sub.name_any(), csv.name_any());
        }
    }
    let mut request = Request::new(namespace);
    request.global_namespace = global_namespace.to_owned();
    for csv in &live {
        let name = csv.name_any();
        let owning = owner.get(&name).and_then(|s| subs.iter().find(|sub| &sub.name_any() == s));
        let package = package_of(csv).or_else(|| owning.map(|s| s.spec.name.clone())).unwrap_or_default();
        let catalog = owning.map(|s| decide::target(s));
        let version = csv
            .spec
            .version
            .as_deref()
            .and_then(|v| olm_catalog::version::parse_version(v).ok());
        request
            .installed
            .push(Installed::from_catalogs(catalogs, &name, &package, catalog.as_ref(), version));
    }
    for sub in subs {
        request.subscriptions.push(olm_resolver::Subscription {
            name: sub.name_any(),
            package: sub.spec.name.clone(),
            channel: sub.spec.channel.clone().filter(|c| !c.is_empty()),
            catalog: decide::target(sub),
            starting_csv: sub.spec.starting_csv.clone().filter(|c| !c.is_empty()),
            installed_csv: owned_csv.get(&sub.name_any()).cloned(),
        });
    }
    (request, owned_csv)
}

fn catalog_unavailable(target: &CatalogKey, views: &[CatalogView]) -> String {
    match views.iter().find(|v| &v.key == target) {
        Some(view) => format!(
            "catalog {} cannot be read: {}; resolution of this subscription resumes when it is back",
            target,
            view.error.clone().unwrap_or_else(|| "not read yet".into())
        ),
        None => {
            let known: Vec<String> = views.iter().map(|v| v.key.to_string()).collect();
            format!(
                "CatalogSource {} (spec.source, spec.sourceNamespace) does not exist; catalogs visible from this namespace: {}",
                target,
                if known.is_empty() { "none".to_owned() } else { known.join(", ") }
            )
        }
    }
}

/// Why the installed CSV is not the head of the Subscription's channel, when it is not and
/// resolution found nothing to do: (reason, message naming the head and what to do).
/// Upstream says `AtLatestKnown` and nothing else.
/// `visible` are the catalogs the Subscription's namespace can use.
pub fn behind_head<'a>(
    content: Option<&Arc<CatalogContent>>,
    visible: impl IntoIterator<Item = &'a Arc<CatalogContent>>,
    sub: &Subscription,
    installed: &str,
    group_modes: Option<&GroupModes>,
) -> Option<(&'static str, String)> {
    let package = content?.catalog.package(&sub.spec.name)?;
    let channel_name = sub.spec.channel.clone().filter(|c| !c.is_empty()).unwrap_or_else(|| package.default_channel.clone());
    let channel = package.channel(&channel_name)?;
    let head = channel.head()?.name.clone();
    if head == installed {
        return None;
    }
    let reinstall = format!(
        "to install {head}, delete the CSV {installed} and the Subscription, then subscribe again (with spec.startingCSV: {head} if you want exactly that one)"
    );
    if channel.entry(installed).is_none() {
        return Some((
            "InstalledNotInChannel",
            format!("the installed CSV {installed} is not in channel {channel_name}, whose head is {head}: nothing on the channel upgrades it; {reinstall}"),
        ));
    }
    let version = package.bundle(installed).map(|b| &b.version);
    match channel.path_to_head(installed, version) {
        None => Some((
            "NoUpgradePath",
            format!(
                "no upgrade path from {installed} to {head}, the head of channel {channel_name}: no bundle on the way replaces it, skips it or covers its version with olm.skipRange (the package's publisher can add one); {reinstall}"
            ),
        )),
        Some(path) => {
            let next = path.first().map(|(e, _)| e.name.clone()).unwrap_or_else(|| head.clone());
            // Upstream never upgrades to a bundle another entry skips (its publisher withdrew it).
            let skipped: Vec<&str> = channel.entries().iter().flat_map(|e| e.skips.iter().map(String::as_str)).collect();
            let successors = channel.successors(installed, version);
            if !successors.is_empty() && successors.iter().all(|e| skipped.contains(&e.name.as_str())) {
                let names: Vec<&str> = successors.iter().map(|e| e.name.as_str()).collect();
                return Some((
                    "UpgradeSkipped",
                    format!(
                        "{head}, the head of channel {channel_name}, is not reached from {installed}: the bundles that upgrade from it ({}) are skipped by other entries of the channel (their publisher withdrew them), and OLM does not upgrade to a skipped bundle; {reinstall}",
                        names.join(", ")
                    ),
                ));
            }
            if let Some(group) = group_modes
                && let Some(bundle) = package.bundle(&next)
                && let Some(supported) = bundle.supported_install_modes()
                && let Some(missing) = group.modes.iter().find(|m| !supported.contains(m))
            {
                let supported = if supported.is_empty() { "none".to_owned() } else { supported.join(", ") };
                return Some((
                    "UnsupportedInstallMode",
                    format!(
                        "{head}, the head of channel {channel_name}, is reachable from {installed}, but the next bundle, {next}, does not support the install mode {missing} that OperatorGroup {} asks for (it supports: {supported}), so {installed} keeps running; to upgrade, install it with an OperatorGroup whose target namespaces {next} supports, or stay on {installed}",
                        group.group
                    ),
                ));
            }
            let visible: Vec<&Arc<CatalogContent>> = visible.into_iter().collect();
            let unmet = package.bundle(&next).map(|b| unmet_needs(b, &visible)).unwrap_or_default();
            if !unmet.is_empty() {
                return Some((
                    "UpgradeDependencyMissing",
                    format!(
                        "{head}, the head of channel {channel_name}, is reachable from {installed}, but the next bundle, {next}, requires {}, which no catalog this namespace can use has; add a catalog that has it (or install it in this namespace), and the upgrade goes on",
                        unmet.join(" and ")
                    ),
                ));
            }
            Some((
                "UpgradeNotChosen",
                format!(
                    "{head}, the head of channel {channel_name}, is reachable from {installed} (next: {next}), but resolution keeps {installed}: what the next bundle needs is not available in this namespace's catalogs, or an OperatorCondition says the operator is not Upgradeable; check the operator's OperatorCondition and the other conditions here"
                ),
            ))
        }
    }
}

/// What `bundle` requires (packages in a range, APIs) that no bundle of `catalogs` provides.
fn unmet_needs(bundle: &olm_catalog::Bundle, catalogs: &[&Arc<CatalogContent>]) -> Vec<String> {
    let mut unmet = Vec::new();
    for required in bundle.required_packages() {
        let found = catalogs.iter().any(|c| {
            c.catalog.package(&required.package_name).is_some_and(|p| {
                p.bundles().iter().any(|b| required.range.as_ref().is_none_or(|r| r.contains(&b.version)))
            })
        });
        if !found {
            unmet.push(format!("package {} {}", required.package_name, required.version_range));
        }
    }
    for gvk in bundle.required_gvks() {
        if !catalogs.iter().any(|c| c.catalog.bundles_providing(gvk).next().is_some()) {
            unmet.push(format!("the API {} ({}/{})", gvk.kind, gvk.group, gvk.version));
        }
    }
    unmet
}

pub fn deprecations(content: Option<&Arc<CatalogContent>>, sub: &Subscription, installed: Option<&str>) -> Deprecations {
    let mut out = Deprecations::default();
    let Some(content) = content else {
        return out;
    };
    for d in content.indexed.deprecations.iter().filter(|d| d.package == sub.spec.name) {
        match d.scope.as_str() {
            "olm.package" => out.package = Some(d.message.clone()),
            "olm.channel" if sub.spec.channel.as_deref() == Some(d.name.as_str()) => out.channel = Some(d.message.clone()),
            "olm.bundle" if installed == Some(d.name.as_str()) => out.bundle = Some(d.message.clone()),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use olm_api::v1alpha1::subscription::{SubscriptionSpec, SubscriptionStatus};

    fn csv(name: &str, package: &str, replaces: Option<&str>) -> Arc<ClusterServiceVersion> {
        let mut c: ClusterServiceVersion = serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": name, "namespace": "ns", "annotations": {
                keys::PROPERTIES_ANNOTATION: json!({"properties": [{"type": "olm.package", "value": {"packageName": package, "version": "0.9.0"}}]}).to_string()
            }},
            "spec": {"version": "0.9.0", "displayName": name, "install": {"strategy": "deployment"}},
        }))
        .expect("csv");
        c.spec.replaces = replaces.map(str::to_owned);
        Arc::new(c)
    }

    fn sub(name: &str, package: &str, current: Option<&str>) -> Arc<Subscription> {
        let mut s = Subscription::new(
            name,
            SubscriptionSpec {
                source: "community".into(),
                source_namespace: "olm".into(),
                name: package.into(),
                ..Default::default()
            },
        );
        s.metadata.namespace = Some("ns".into());
        s.status = current.map(|c| SubscriptionStatus {
            current_csv: Some(c.into()),
            ..Default::default()
        });
        Arc::new(s)
    }

    #[test]
    fn installed_operators_are_owned_by_their_subscriptions_or_adopted() {
        let catalogs = Catalogs::new(Vec::new());
        let csvs = vec![
            csv("etcd.v1", "etcd", None),
            csv("etcd.v2", "etcd", Some("etcd.v1")),
            csv("other.v1", "other", None),
        ];
        let subs = vec![sub("etcd", "etcd", Some("etcd.v2")), sub("other", "other", None)];
        let (request, owned) = build_request("ns", "olm", &subs, &csvs, &catalogs);
        let names: Vec<_> = request.installed.iter().map(|i| i.entry.name.clone()).collect();
        assert_eq!(names, vec!["etcd.v2", "other.v1"], "a replaced CSV is not an installed operator");
        assert_eq!(owned.get("etcd").map(String::as_str), Some("etcd.v2"));
        assert_eq!(owned.get("other").map(String::as_str), Some("other.v1"), "adopted by package");
        assert_eq!(request.subscriptions[1].installed_csv.as_deref(), Some("other.v1"));
        assert_eq!(request.installed[1].entry.package, "other");
    }

    #[test]
    fn a_missing_catalog_message_lists_what_exists() {
        let views = vec![CatalogView {
            key: CatalogKey::new("community", "olm"),
            uid: None,
            healthy: true,
            error: None,
        }];
        let message = catalog_unavailable(&CatalogKey::new("nope", "ns"), &views);
        assert!(message.contains("ns/nope") && message.contains("olm/community"), "{message}");
    }

    /// The catalog `olm/community` of these FBC documents.
    fn community<const N: usize>(docs: [serde_json::Value; N]) -> Arc<CatalogContent> {
        let docs = docs.into_iter().map(|value| olm_catalog::Document { value, source: None }).collect();
        Arc::new(CatalogContent::from_documents(CatalogKey::new("community", "olm"), 0, docs, None, Default::default()).expect("content"))
    }

    #[test]
    fn a_subscription_below_its_channel_head_is_told_why() {
        let bundle = |name: &str, version: &str| {
            json!({"schema": "olm.bundle", "name": name, "package": "etcd", "image": format!("r/{name}"),
                   "properties": [{"type": "olm.package", "value": {"packageName": "etcd", "version": version}}]})
        };
        let content = community([
            json!({"schema": "olm.package", "name": "etcd", "defaultChannel": "stable"}),
            json!({"schema": "olm.channel", "package": "etcd", "name": "stable",
                   "entries": [{"name": "etcd.v2"}, {"name": "etcd.v3", "replaces": "etcd.v2"}]}),
            json!({"schema": "olm.channel", "package": "etcd", "name": "legacy", "entries": [{"name": "etcd.v1"}]}),
            bundle("etcd.v1", "1.0.0"),
            bundle("etcd.v2", "2.0.0"),
            bundle("etcd.v3", "3.0.0"),
        ]);
        let s = sub("etcd", "etcd", Some("etcd.v1"));
        assert_eq!(behind_head(Some(&content), [&content], &s, "etcd.v3", None), None, "at the head");
        let (reason, message) = behind_head(Some(&content), [&content], &s, "etcd.v1", None).expect("behind");
        assert_eq!(reason, "InstalledNotInChannel");
        assert!(message.contains("etcd.v1 is not in channel stable, whose head is etcd.v3") && message.contains("startingCSV: etcd.v3"), "{message}");
        let (reason, message) = behind_head(Some(&content), [&content], &s, "etcd.v2", None).expect("behind");
        assert_eq!(reason, "UpgradeNotChosen");
        assert!(message.contains("next: etcd.v3"), "{message}");

        // The next bundle needs a package no catalog has: named.
        let mut v3 = bundle("etcd.v3", "3.0.0");
        v3["properties"].as_array_mut().unwrap().extend([
            json!({"type": "olm.package.required", "value": {"packageName": "cert-manager", "versionRange": ">=1.14.0"}}),
            json!({"type": "olm.gvk.required", "value": {"group": "argoproj.io", "kind": "Application", "version": "v1alpha1"}}),
        ]);
        let needy = community([
            json!({"schema": "olm.package", "name": "etcd", "defaultChannel": "stable"}),
            json!({"schema": "olm.channel", "package": "etcd", "name": "stable",
                   "entries": [{"name": "etcd.v2"}, {"name": "etcd.v3", "replaces": "etcd.v2"}]}),
            bundle("etcd.v2", "2.0.0"),
            v3,
        ]);
        // The only upgrade from etcd.v1 is skipped by the head, which does not upgrade from v1.
        let withdrawn = community([
            json!({"schema": "olm.package", "name": "etcd", "defaultChannel": "stable"}),
            json!({"schema": "olm.channel", "package": "etcd", "name": "stable", "entries": [
                {"name": "etcd.v1"}, {"name": "etcd.v2", "replaces": "etcd.v1"},
                {"name": "etcd.v3", "replaces": "etcd.v2", "skips": ["etcd.v2"]}]}),
            bundle("etcd.v1", "1.0.0"),
            bundle("etcd.v2", "2.0.0"),
            bundle("etcd.v3", "3.0.0"),
        ]);
        let (reason, message) = behind_head(Some(&withdrawn), [&withdrawn], &s, "etcd.v1", None).expect("behind");
        assert_eq!(reason, "UpgradeSkipped");
        assert!(message.contains("(etcd.v2) are skipped by other entries") && message.contains("startingCSV: etcd.v3"), "{message}");

        let (reason, message) = behind_head(Some(&needy), [&needy], &s, "etcd.v2", None).expect("behind");
        assert_eq!(reason, "UpgradeDependencyMissing");
        assert!(
            message.contains("the next bundle, etcd.v3, requires package cert-manager >=1.14.0 and the API Application (argoproj.io/v1alpha1)"),
            "{message}"
        );
    }

    #[test]
    fn an_upgrade_the_group_cannot_run_is_explained() {
        // As argocd-operator from 0.8.0 on: the next bundle supports AllNamespaces only.
        let bundle = |name: &str, version: &str, modes: &[&str]| {
            let modes: Vec<serde_json::Value> = ["OwnNamespace", "SingleNamespace", "MultiNamespace", "AllNamespaces"]
                .iter()
                .map(|m| json!({"type": m, "supported": modes.contains(m)}))
                .collect();
            json!({"schema": "olm.bundle", "name": name, "package": "argocd", "image": format!("r/{name}"),
                   "properties": [{"type": "olm.package", "value": {"packageName": "argocd", "version": version}},
                                  {"type": "olm.csv.metadata", "value": {"installModes": modes}}]})
        };
        let content = community([
            json!({"schema": "olm.package", "name": "argocd", "defaultChannel": "alpha"}),
            json!({"schema": "olm.channel", "package": "argocd", "name": "alpha", "entries": [
                {"name": "argocd.v0.7.0"}, {"name": "argocd.v0.8.0", "replaces": "argocd.v0.7.0"},
                {"name": "argocd.v0.9.0", "replaces": "argocd.v0.8.0"}]}),
            bundle("argocd.v0.7.0", "0.7.0", &["OwnNamespace", "AllNamespaces"]),
            bundle("argocd.v0.8.0", "0.8.0", &["AllNamespaces"]),
            bundle("argocd.v0.9.0", "0.9.0", &["AllNamespaces"]),
        ]);
        let s = sub("argocd", "argocd", Some("argocd.v0.7.0"));
        let own = GroupModes { group: "og".into(), modes: vec!["OwnNamespace".into()] };
        let (reason, message) = behind_head(Some(&content), [&content], &s, "argocd.v0.7.0", Some(&own)).expect("behind");
        assert_eq!(reason, "UnsupportedInstallMode");
        assert!(
            message.contains("the next bundle, argocd.v0.8.0, does not support the install mode OwnNamespace that OperatorGroup og asks for (it supports: AllNamespaces), so argocd.v0.7.0 keeps running"),
            "{message}"
        );
        let all = GroupModes { group: "og".into(), modes: vec!["AllNamespaces".into()] };
        let (reason, _) = behind_head(Some(&content), [&content], &s, "argocd.v0.7.0", Some(&all)).expect("behind");
        assert_eq!(reason, "UpgradeNotChosen");
    }

    #[test]
    fn a_group_asks_for_the_install_modes_of_its_targets() {
        let group = |targets: Option<&[&str]>| {
            let mut group = olm_api::v1::operator_group::OperatorGroup::new("og", Default::default());
            group.status = targets.map(|t| olm_api::v1::operator_group::OperatorGroupStatus {
                namespaces: Some(t.iter().map(|s| s.to_string()).collect()),
                ..Default::default()
            });
            vec![Arc::new(group)]
        };
        let modes = |targets: Option<&[&str]>| GroupModes::of(&group(targets), "ns").map(|g| g.modes);
        assert_eq!(modes(Some(&[""])), Some(vec!["AllNamespaces".to_owned()]));
        assert_eq!(modes(Some(&["ns"])), Some(vec!["OwnNamespace".to_owned()]));
        assert_eq!(modes(Some(&["other"])), Some(vec!["SingleNamespace".to_owned()]));
        assert_eq!(modes(Some(&["ns", "other"])), Some(vec!["MultiNamespace".to_owned(), "OwnNamespace".to_owned()]));
        assert_eq!(modes(Some(&["a", "b"])), Some(vec!["MultiNamespace".to_owned()]));
        assert_eq!(GroupModes::of(&[], "ns"), None, "no group");
        // Before the group's controller writes its status: its spec, unless a selector leaves
        // the targets to be found.
        assert_eq!(modes(None), Some(vec!["AllNamespaces".to_owned()]), "no targetNamespaces, no selector");
        let from_spec = |spec: serde_json::Value| {
            let group: olm_api::v1::operator_group::OperatorGroup =
                serde_json::from_value(serde_json::json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup", "metadata": {"name": "og"}, "spec": spec})).unwrap();
            GroupModes::of(&[Arc::new(group)], "ns").map(|g| g.modes)
        };
        assert_eq!(from_spec(serde_json::json!({"targetNamespaces": ["ns"]})), Some(vec!["OwnNamespace".to_owned()]));
        assert_eq!(from_spec(serde_json::json!({"selector": {"matchLabels": {"team": "a"}}})), None, "targets not resolved yet");
    }
}
