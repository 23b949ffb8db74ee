//! Rolling an operator back to the CSV the installed one replaced. [`prepare`] checks what it
//! can (something installed, what it replaced, the catalog still offering it) and
//! [`Rollback::summary`] says how it will go; [`request`] annotates the Subscription
//! (`olm-rs.io/rolled-back-from`) and OLM does it (the Subscription controller's `rollback`);
//! [`progress`] reads how far it got, [`withdraw`] takes back a request OLM refused, and
//! [`follow`] does both until the rollback is done, waits for approval or is refused.

use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use olm_api::common::ConditionStatus;
use olm_api::keys::ROLLED_BACK_FROM_ANNOTATION;
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use olm_api::v1alpha1::install_plan::{InstallPlan, InstallPlanPhase};
use olm_api::v1alpha1::subscription::{Subscription, SubscriptionConditionType};
use serde_json::{Value, json};

use crate::{AdminError, Waiting};

/// A rollback that can be asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rollback {
    pub namespace: String,
    pub subscription: String,
    /// The installed CSV, and the one it replaced.
    pub from: String,
    pub to: String,
    /// The catalog (`namespace/name`), the package and the Subscription's approval.
    pub catalog: String,
    pub package: String,
    pub approval: String,
    /// Whether the catalog still offers `to`; why that could not be checked.
    pub offered: Result<bool, String>,
    /// The annotation as it was (an earlier rollback's), to put back if OLM refuses.
    pub before: Option<String>,
}

/// What asking for a rollback of a Subscription would do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prepared {
    /// A rollback from this CSV was already asked for.
    UnderWay { from: String },
    Ready(Rollback),
}

/// Checks that Subscription `namespace/name` can go back one version; refused, saying why,
/// when it has nothing to go back to or the catalog no longer offers it.
pub async fn prepare(client: &kube::Client, namespace: &str, name: &str) -> Result<Prepared, AdminError> {
    let (_, sub) = crate::subscription(client, namespace, name).await?;
    let status = sub.status.clone().unwrap_or_default();
    let from = status
        .current_csv
        .clone()
        .filter(|c| !c.is_empty())
        .ok_or_else(|| AdminError::Refused(format!("Subscription {namespace}/{name} has installed nothing yet: there is nothing to roll back")))?;
    let before = sub.annotations().get(ROLLED_BACK_FROM_ANNOTATION).cloned();
    if before.as_deref() == Some(from.as_str()) {
        return Ok(Prepared::UnderWay { from });
    }
    let newer = Api::<ClusterServiceVersion>::namespaced(client.clone(), namespace)
        .get_opt(&from)
        .await
        .map_err(|err| AdminError::api(format!("cannot read ClusterServiceVersion {namespace}/{from}"), err))?
        .ok_or_else(|| AdminError::Refused(format!("the Subscription's CSV {from} is not in namespace {namespace}: nothing to roll back")))?;
    let to = newer.spec.replaces.clone().filter(|r| !r.is_empty()).ok_or_else(|| {
        AdminError::Refused(format!("cannot roll back: {from} replaces no earlier version (spec.replaces is empty), so there is nothing to go back to"))
    })?;
    let catalog = format!("{}/{}", sub.spec.source_namespace, sub.spec.source);
    let offered = offered(client, &sub, &to).await;
    if offered == Ok(false) {
        return Err(AdminError::Refused(format!("cannot roll back: catalog {catalog} no longer offers {to} in package {}", sub.spec.name)));
    }
    Ok(Prepared::Ready(Rollback {
        namespace: namespace.to_owned(),
        subscription: name.to_owned(),
        from,
        to,
        catalog,
        package: sub.spec.name.clone(),
        approval: sub.spec.approval().as_str().to_owned(),
        offered,
        before,
    }))
}

/// Whether the Subscription's catalog lists `csv` in its package (PackageManifest API).
async fn offered(client: &kube::Client, sub: &Subscription, csv: &str) -> Result<bool, String> {
    let Some(package) = crate::package_manifest(client, sub).await? else {
        return Ok(false);
    };
    let channels = package.data.pointer("/status/channels").and_then(Value::as_array).cloned().unwrap_or_default();
    Ok(channels.iter().any(|c| {
        c.get("currentCSV").and_then(Value::as_str) == Some(csv)
            || c.get("entries").and_then(Value::as_array).into_iter().flatten().any(|e| e.get("name").and_then(Value::as_str) == Some(csv))
    }))
}

impl Rollback {
    /// How it will go, a sentence a line.
    pub fn summary(&self) -> Vec<String> {
        let (namespace, name, from, to, catalog) = (&self.namespace, &self.subscription, &self.from, &self.to, &self.catalog);
        let mut lines = vec![format!("Rolls Subscription {namespace}/{name} back from {from} to {to}.")];
        if let Err(why) = &self.offered {
            lines.push(format!("(Cannot check the catalog from here: {why}. OLM says on the Subscription if it no longer has {to}.)"));
        }
        lines.push(format!(
            "{to} comes back from catalog {catalog} through an InstallPlan ({} approval): its Deployments, ServiceAccounts and permissions again. OLM first checks that its CRDs keep every object stored now, and changes nothing if they do not.",
            self.approval
        ));
        lines.push(format!("{from} is not installed again until the catalog offers a newer version or the annotation {ROLLED_BACK_FROM_ANNOTATION} is removed."));
        lines
    }
}

/// Asks OLM for `rollback`: the Subscription annotated with the CSV it rolls back from.
pub async fn request(client: &kube::Client, rollback: &Rollback) -> Result<(), AdminError> {
    annotate(client, &rollback.namespace, &rollback.subscription, Some(&rollback.from)).await
}

/// Takes back a request OLM refused: the annotation as it was before (`before`).
pub async fn withdraw(client: &kube::Client, namespace: &str, name: &str, before: Option<&str>) -> Result<(), AdminError> {
    annotate(client, namespace, name, before).await
}

async fn annotate(client: &kube::Client, namespace: &str, name: &str, value: Option<&str>) -> Result<(), AdminError> {
    Api::<Subscription>::namespaced(client.clone(), namespace)
        .patch(name, &PatchParams::default(), &Patch::Merge(json!({"metadata": {"annotations": {ROLLED_BACK_FROM_ANNOTATION: value}}})))
        .await
        .map(drop)
        .map_err(|err| AdminError::api(format!("cannot set the annotation {ROLLED_BACK_FROM_ANNOTATION} of Subscription {namespace}/{name}"), err))
}

/// Where a rollback from `from` (to `to`, when known) stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// OLM refused it and changed nothing; why.
    Refused(String),
    /// Its InstallPlan waits for approval.
    WaitsForApproval { plan: String },
    /// The CSV it went back to is Succeeded and `from` is gone.
    Done { csv: String },
    /// Still going: the Subscription's CSV and its phase, in words.
    Going(String),
}

/// What the Subscription, its CSVs and its plan say of a rollback from `from` (pure).
pub fn assess(sub: &Subscription, current: Option<&ClusterServiceVersion>, from_left: bool, plan: Option<&InstallPlan>, from: &str, to: Option<&str>) -> Progress {
    let status = sub.status.clone().unwrap_or_default();
    let refused = status.conditions.iter().flatten().find(|c| {
        c.type_ == SubscriptionConditionType::ResolutionFailed && c.status == ConditionStatus::True && c.reason.as_deref() == Some("RollbackImpossible")
    });
    if let Some(refused) = refused {
        return Progress::Refused(refused.message.clone().unwrap_or_default());
    }
    let current_name = status.current_csv.clone().unwrap_or_default();
    let phase = current.map_or_else(
        || "not created yet".to_owned(),
        |csv| csv.status.as_ref().and_then(|s| s.phase.as_ref()).map_or_else(|| "no phase yet".to_owned(), |p| p.as_str().to_owned()),
    );
    if current_name != from && phase == "Succeeded" && !from_left && to.is_none_or(|to| to == current_name) {
        return Progress::Done { csv: current_name };
    }
    if let Some(plan) = plan
        && !plan.spec.approved
        && plan.status.as_ref().is_some_and(|s| s.phase == InstallPlanPhase::RequiresApproval)
        && plan.spec.cluster_service_version_names.iter().any(|c| Some(c.as_str()) == to)
    {
        return Progress::WaitsForApproval { plan: plan.name_any() };
    }
    Progress::Going(format!("Subscription {}: {current_name} {phase}{}", sub.name_any(), if from_left { format!("; {from} still there") } else { String::new() }))
}

/// Reads where the rollback of Subscription `namespace/name` from `from` stands.
pub async fn progress(client: &kube::Client, namespace: &str, name: &str, from: &str, to: Option<&str>) -> Result<Progress, AdminError> {
    let (_, sub) = crate::subscription(client, namespace, name).await?;
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), namespace);
    let read = |csv: String| {
        let csvs = csvs.clone();
        async move { csvs.get_opt(&csv).await.map_err(|err| AdminError::api(format!("cannot read ClusterServiceVersion {namespace}/{csv}"), err)) }
    };
    let current = read(sub.status.as_ref().and_then(|s| s.current_csv.clone()).unwrap_or_default()).await?;
    let from_left = read(from.to_owned()).await?.is_some();
    let plan = match sub.status.as_ref().and_then(|s| s.install_plan_ref.as_ref()).and_then(|r| r.name.clone()) {
        Some(plan) => Api::<InstallPlan>::namespaced(client.clone(), namespace)
            .get_opt(&plan)
            .await
            .map_err(|err| AdminError::api(format!("cannot read InstallPlan {namespace}/{plan}"), err))?,
        None => None,
    };
    Ok(assess(&sub, current.as_ref(), from_left, plan.as_ref(), from, to))
}

/// How a followed rollback stands at the end of the wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Followed {
    /// Back at `csv`, Succeeded.
    Done { csv: String },
    /// Its InstallPlan waits for approval.
    WaitsForApproval { plan: String },
    /// OLM refused it and the request was withdrawn: why, in words.
    Refused(String),
    /// Still going when the wait ran out.
    Going,
}

/// Follows the rollback of Subscription `namespace/name` from `from` (to `to`, when known)
/// until it is done, waits for approval or is refused, saying each new state to
/// `waiting.progress`. A refused request is withdrawn (the annotation as it was, `before`),
/// since OLM changed nothing.
pub async fn follow(client: &kube::Client, namespace: &str, name: &str, from: &str, to: Option<&str>, before: Option<&str>, waiting: &Waiting<'_>) -> Result<Followed, AdminError> {
    let started = std::time::Instant::now();
    let mut last = String::new();
    while started.elapsed() < waiting.limit {
        match progress(client, namespace, name, from, to).await? {
            Progress::Refused(why) => {
                withdraw(client, namespace, name, before).await?;
                return Ok(Followed::Refused(format!("{why} (the request was withdrawn: {from} stays installed)")));
            }
            Progress::Done { csv } => return Ok(Followed::Done { csv }),
            Progress::WaitsForApproval { plan } => return Ok(Followed::WaitsForApproval { plan }),
            Progress::Going(line) => {
                if line != last {
                    (waiting.progress)(&line);
                    last = line;
                }
            }
        }
        tokio::time::sleep(waiting.poll).await;
    }
    Ok(Followed::Going)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(current: &str, conditions: Value) -> Subscription {
        serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription", "metadata": {"name": "koku", "namespace": "a"},
            "spec": {"name": "koku", "source": "c", "sourceNamespace": "olm"},
            "status": {"currentCSV": current, "installPlanRef": {"name": "install-1", "namespace": "a"}, "conditions": conditions}}))
        .expect("a Subscription")
    }

    fn csv(name: &str, phase: &str) -> ClusterServiceVersion {
        serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion", "metadata": {"name": name, "namespace": "a"},
            "spec": {"displayName": name, "install": {"strategy": "deployment"}}, "status": {"phase": phase}}))
        .expect("a CSV")
    }

    fn plan(csv: &str, approved: bool) -> InstallPlan {
        serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan", "metadata": {"name": "install-1", "namespace": "a"},
            "spec": {"clusterServiceVersionNames": [csv], "approval": "Manual", "approved": approved}, "status": {"phase": "RequiresApproval", "catalogSources": []}}))
        .expect("an InstallPlan")
    }

    #[test]
    fn a_refusal_a_plan_to_approve_done_and_under_way_are_told_apart() {
        let refused = sub("v2", json!([{"type": "ResolutionFailed", "status": "True", "reason": "RollbackImpossible", "message": "cannot roll back from v2 to v1: v1beta1"}]));
        assert_eq!(assess(&refused, Some(&csv("v2", "Succeeded")), true, None, "v2", Some("v1")), Progress::Refused("cannot roll back from v2 to v1: v1beta1".into()));
        let going = sub("v1", json!([]));
        assert_eq!(
            assess(&going, Some(&csv("v1", "Succeeded")), false, None, "v2", Some("v1")),
            Progress::Done { csv: "v1".into() },
            "back at v1, v2 gone"
        );
        assert_eq!(
            assess(&going, Some(&csv("v1", "Succeeded")), true, None, "v2", Some("v1")),
            Progress::Going("Subscription koku: v1 Succeeded; v2 still there".into())
        );
        assert_eq!(assess(&going, None, true, Some(&plan("v1", false)), "v2", Some("v1")), Progress::WaitsForApproval { plan: "install-1".into() });
        assert_eq!(assess(&going, None, true, Some(&plan("v1", true)), "v2", Some("v1")), Progress::Going("Subscription koku: v1 not created yet; v2 still there".into()));
        assert_eq!(assess(&going, None, true, Some(&plan("v3", false)), "v2", Some("v1")), Progress::Going("Subscription koku: v1 not created yet; v2 still there".into()), "another version's plan");
    }

    #[test]
    fn the_summary_says_what_comes_back_from_where_and_what_stays_away() {
        let rollback = Rollback {
            namespace: "a".into(),
            subscription: "koku".into(),
            from: "v2".into(),
            to: "v1".into(),
            catalog: "olm/c".into(),
            package: "koku".into(),
            approval: "Manual".into(),
            offered: Err("the PackageManifest API did not answer".into()),
            before: None,
        };
        let lines = rollback.summary();
        assert_eq!(lines[0], "Rolls Subscription a/koku back from v2 to v1.");
        assert!(lines[1].contains("Cannot check the catalog from here: the PackageManifest API did not answer"), "{lines:?}");
        assert!(lines[2].starts_with("v1 comes back from catalog olm/c through an InstallPlan (Manual approval)"), "{lines:?}");
        assert!(lines[3].starts_with("v2 is not installed again until"), "{lines:?}");
        assert_eq!(Rollback { offered: Ok(true), ..rollback }.summary().len(), 3);
    }
}
