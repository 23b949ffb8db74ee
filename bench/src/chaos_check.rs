//! What the chaos run checks once the monkey stops, as a cluster admin would look: every
//! Subscription on the channel head with its CSV Succeeded; no CSV in a transitional phase;
//! no CSV planned by two InstallPlans (a duplicate plan) and no unexpected CSV; one Role,
//! RoleBinding, ServiceAccount and Deployment per thing a CSV declares (a step applied twice
//! under another name would show here); nothing OLM made left behind by a CSV that is gone.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Context;
use serde_json::Value;

use crate::chaos_catalog::{GLOBAL, GLOBAL_NAMESPACE, UPDATE, Workload, csv_name, installs};

/// Per namespace, the Subscriptions (package → expected CSV) and the CSVs it should hold.
pub struct Expected {
    namespaces: BTreeMap<String, (Vec<(String, String)>, BTreeSet<String>)>,
}

impl Expected {
    pub fn new(work: &[Workload]) -> Expected {
        let mut namespaces = BTreeMap::new();
        let head = |package: &str| csv_name(package, UPDATE);
        namespaces.insert(GLOBAL_NAMESPACE.to_owned(), (vec![(GLOBAL.to_owned(), head(GLOBAL))], BTreeSet::from([head(GLOBAL)])));
        for w in work {
            let csvs = installs(w.package).into_iter().map(head).collect();
            namespaces.insert(w.namespace.clone(), (vec![(w.package.to_owned(), head(w.package))], csvs));
        }
        Expected { namespaces }
    }

    /// Installs and upgrades the workload asks for: every CSV of the channel, per installed package.
    pub fn installs(&self, versions: usize) -> usize {
        self.namespaces.values().map(|(_, csvs)| csvs.len() * versions).sum()
    }
}

#[derive(Default)]
pub struct Outcome {
    pub subscriptions: usize,
    /// Subscriptions at the expected CSV, Succeeded.
    pub at_head: usize,
    /// "ns/sub: what is wrong".
    pub not_converged: Vec<String>,
    /// CSVs in a phase other than Succeeded ("ns/csv: phase reason").
    pub transitional: Vec<String>,
    pub duplicate_plans: Vec<String>,
    pub unexpected_csvs: Vec<String>,
    pub duplicate_objects: Vec<String>,
    pub orphans: Vec<String>,
    pub failed_plans: Vec<String>,
    pub install_plans: usize,
    pub csvs: usize,
}

impl Outcome {
    pub fn converged(&self) -> bool {
        self.at_head == self.subscriptions && self.transitional.is_empty() && self.unexpected_csvs.is_empty()
    }

    pub fn clean(&self) -> bool {
        self.converged() && self.duplicate_plans.is_empty() && self.duplicate_objects.is_empty() && self.orphans.is_empty()
    }
}

fn list(layout: &olm_dev::Layout, kind: &str, namespaced: bool) -> anyhow::Result<Vec<Value>> {
    let mut args = vec!["get", kind, "-o", "json"];
    if namespaced {
        args.push("-A");
    }
    let text = olm_dev::kubectl(layout, &args, None).map_err(|e| anyhow::anyhow!("kubectl get {kind}: {e}"))?;
    let value: Value = serde_json::from_str(&text).with_context(|| format!("kubectl get {kind} -o json"))?;
    Ok(value["items"].as_array().cloned().unwrap_or_default())
}

fn meta<'a>(item: &'a Value, field: &str) -> &'a str {
    item["metadata"][field].as_str().unwrap_or("")
}

/// Look at the cluster now. An API server that does not answer is an outcome not converged.
pub fn check(layout: &olm_dev::Layout, expected: &Expected) -> anyhow::Result<Outcome> {
    match observe(layout, expected) {
        Ok(outcome) => Ok(outcome),
        Err(err) => Ok(Outcome {
            subscriptions: expected.namespaces.len(),
            not_converged: vec![format!("cannot read the cluster: {err:#}")],
            ..Outcome::default()
        }),
    }
}

fn observe(layout: &olm_dev::Layout, expected: &Expected) -> anyhow::Result<Outcome> {
    let mut outcome = Outcome::default();
    let ours = |item: &Value| expected.namespaces.contains_key(meta(item, "namespace"));
    let subs: Vec<Value> = list(layout, "subscriptions.operators.coreos.com", true)?.into_iter().filter(ours).collect();
    let csvs: Vec<Value> = list(layout, "clusterserviceversions.operators.coreos.com", true)?.into_iter().filter(ours).collect();
    let plans: Vec<Value> = list(layout, "installplans.operators.coreos.com", true)?.into_iter().filter(ours).collect();
    outcome.install_plans = plans.len();
    // Copies of the all-namespaces CSV are expected everywhere; they are checked for phase only.
    let originals: Vec<&Value> = csvs.iter().filter(|c| c["status"]["reason"] != "Copied").collect();
    outcome.csvs = originals.len();
    let phase = |ns: &str, name: &str| {
        csvs.iter()
            .find(|c| meta(c, "namespace") == ns && meta(c, "name") == name)
            .map(|c| c["status"]["phase"].as_str().unwrap_or("").to_owned())
    };

    for (ns, (wanted_subs, wanted_csvs)) in &expected.namespaces {
        for (package, head) in wanted_subs {
            outcome.subscriptions += 1;
            let sub = subs.iter().find(|s| meta(s, "namespace") == ns && meta(s, "name") == package);
            let installed = sub.and_then(|s| s["status"]["installedCSV"].as_str()).unwrap_or("");
            match phase(ns, head) {
                Some(p) if installed == head && p == "Succeeded" => outcome.at_head += 1,
                other => outcome.not_converged.push(format!(
                    "{ns}/{package}: installedCSV {installed:?}, {head} {}",
                    other.map_or("missing".to_owned(), |p| format!("phase {p}"))
                )),
            }
        }
        let present: BTreeSet<String> = originals.iter().filter(|c| meta(c, "namespace") == ns).map(|c| meta(c, "name").to_owned()).collect();
        for extra in present.difference(wanted_csvs) {
            outcome.unexpected_csvs.push(format!("{ns}/{extra}"));
        }
        let mut planned: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for plan in plans.iter().filter(|p| meta(p, "namespace") == ns) {
            for csv in plan["spec"]["clusterServiceVersionNames"].as_array().into_iter().flatten() {
                planned.entry(csv.as_str().unwrap_or("")).or_default().push(meta(plan, "name"));
            }
            if plan["status"]["phase"] == "Failed" {
                outcome.failed_plans.push(format!("{ns}/{}", meta(plan, "name")));
            }
        }
        for (csv, by) in planned.into_iter().filter(|(_, by)| by.len() > 1) {
            outcome.duplicate_plans.push(format!("{ns}/{csv} planned by {}", by.join(", ")));
        }
    }
    for csv in &csvs {
        let p = csv["status"]["phase"].as_str().unwrap_or("");
        if p != "Succeeded" {
            let reason = csv["status"]["reason"].as_str().unwrap_or("");
            outcome.transitional.push(format!("{}/{}: {p} {reason}", meta(csv, "namespace"), meta(csv, "name")));
        }
    }
    owned_objects(layout, &originals, expected, &mut outcome)?;
    Ok(outcome)
}

/// Objects OLM labels with their owner CSV (`olm.owner`, `olm.owner.namespace`): one per
/// thing the CSV declares, and none whose CSV is gone.
fn owned_objects(layout: &olm_dev::Layout, csvs: &[&Value], expected: &Expected, outcome: &mut Outcome) -> anyhow::Result<()> {
    let existing: BTreeSet<(String, String)> = csvs.iter().map(|c| (meta(c, "namespace").to_owned(), meta(c, "name").to_owned())).collect();
    for (kind, namespaced) in [
        ("roles", true),
        ("rolebindings", true),
        ("serviceaccounts", true),
        ("deployments", true),
        ("clusterroles", false),
        ("clusterrolebindings", false),
    ] {
        let mut per_owner: BTreeMap<(String, String), usize> = BTreeMap::new();
        for item in list(layout, kind, namespaced)? {
            let labels = &item["metadata"]["labels"];
            let by_label = labels["olm.owner"].as_str().zip(labels["olm.owner.namespace"].as_str());
            let by_reference = item["metadata"]["ownerReferences"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|r| r["kind"] == "ClusterServiceVersion")
                .and_then(|r| r["name"].as_str())
                .map(|name| (name, meta(&item, "namespace")));
            let Some((owner, owner_ns)) = by_label.or(by_reference) else {
                continue;
            };
            if labels["olm.owner.kind"].as_str().is_some_and(|k| k != "ClusterServiceVersion") {
                continue;
            }
            if !expected.namespaces.contains_key(owner_ns) {
                continue;
            }
            let key = (owner_ns.to_owned(), owner.to_owned());
            if !existing.contains(&key) {
                outcome.orphans.push(format!("{kind} {}/{} (owner CSV {owner_ns}/{owner} is gone)", meta(&item, "namespace"), meta(&item, "name")));
            }
            *per_owner.entry(key).or_default() += 1;
        }
        // Every chaos CSV declares one permission set, ServiceAccount and Deployment.
        if namespaced {
            for ((ns, csv), count) in per_owner.into_iter().filter(|(_, n)| *n > 1) {
                outcome.duplicate_objects.push(format!("{count} {kind} owned by {ns}/{csv}"));
            }
        }
    }
    Ok(())
}
