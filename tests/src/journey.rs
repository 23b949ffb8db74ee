//! The waits of an operator's journey that suites share: a CSV Succeeded (failing at once with
//! the CSV's message when it fails), an old CSV replaced and gone (never left Failed), and a
//! Subscription at its channel head; each shows the objects when it times out. And the start
//! of a journey: a cluster without the CRDs of the packages about to be installed.

use std::time::Duration;

use kube::Api;
use olm_api::v1alpha1::cluster_service_version::{ClusterServiceVersion, CsvPhase};
use olm_api::v1alpha1::install_plan::{BundleLookup, InstallPlan, InstallPlanPhase};
use olm_api::v1alpha1::subscription::{Subscription, SubscriptionConditionType, SubscriptionState};
use olm_testkit::{TestCluster, TestNamespace};

/// What a timed-out wait shows.
const OBJECTS: &[&str] = &["subscriptions", "installplans", "csvs", "catalogsources", "operatorgroups"];

/// Wait until the CSV `name` is Succeeded.
pub async fn csv_succeeded(ns: &TestNamespace, name: &str, timeout: Duration) -> anyhow::Result<ClusterServiceVersion> {
    let csvs: Api<ClusterServiceVersion> = ns.api();
    Ok(ns
        .wait_for(&format!("{name} Succeeded"), timeout, OBJECTS, || {
            let csvs = csvs.clone();
            async move {
                let csv = csvs.get_opt(name).await.map_err(|e| e.to_string())?;
                match csv.as_ref().and_then(|c| c.status.as_ref()).and_then(|s| s.phase.clone()) {
                    Some(CsvPhase::Succeeded) => Ok(csv),
                    Some(CsvPhase::Failed) => Err(format!(
                        "{name} failed: {}",
                        csv.and_then(|c| c.status).and_then(|s| s.message).unwrap_or_default()
                    )),
                    _ => Ok(None),
                }
            }
        })
        .await?)
}

/// Wait until the CSV `name` is gone, replaced by a newer one; it must never be Failed. Call it
/// once the replacement exists: a CSV not made yet is gone too.
pub async fn csv_replaced(ns: &TestNamespace, name: &str, timeout: Duration) -> anyhow::Result<()> {
    let csvs: Api<ClusterServiceVersion> = ns.api();
    Ok(ns
        .wait_for(&format!("{name} to be replaced and go"), timeout, OBJECTS, || {
            let csvs = csvs.clone();
            async move {
                match csvs.get_opt(name).await.map_err(|e| e.to_string())? {
                    None => Ok(Some(())),
                    Some(csv) if csv.status.as_ref().and_then(|s| s.phase.as_ref()) == Some(&CsvPhase::Failed) => {
                        Err(format!("{name} failed: {:?}", csv.status.and_then(|s| s.message)))
                    }
                    Some(_) => Ok(None),
                }
            }
        })
        .await?)
}

/// Wait until the Subscription `sub` has `csv` installed and says AtLatestKnown.
pub async fn at_latest(ns: &TestNamespace, sub: &str, csv: &str, timeout: Duration) -> anyhow::Result<()> {
    let subs: Api<Subscription> = ns.api();
    Ok(ns
        .wait_for(&format!("Subscription {sub} AtLatestKnown on {csv}"), timeout, OBJECTS, || {
            let subs = subs.clone();
            async move {
                let status = subs.get(sub).await.map_err(|e| e.to_string())?.status.unwrap_or_default();
                Ok::<_, String>(
                    (status.installed_csv.as_deref() == Some(csv) && status.state == Some(SubscriptionState::AtLatestKnown)).then_some(()),
                )
            }
        })
        .await?)
}

/// The message of the Subscription `sub`'s condition `type_` once it is True.
pub async fn condition_true(ns: &TestNamespace, sub: &str, type_: SubscriptionConditionType, timeout: Duration) -> anyhow::Result<String> {
    let subs: Api<Subscription> = ns.api();
    Ok(ns
        .wait_for(&format!("Subscription {sub} {type_:?}"), timeout, OBJECTS, || {
            let subs = subs.clone();
            let type_ = type_.clone();
            async move {
                let status = subs.get(sub).await.map_err(|e| e.to_string())?.status.unwrap_or_default();
                Ok::<_, String>(
                    status
                        .conditions
                        .unwrap_or_default()
                        .into_iter()
                        .find(|c| c.type_ == type_ && c.status.as_str() == "True")
                        .map(|c| c.message.unwrap_or_default()),
                )
            }
        })
        .await?)
}

/// The InstallPlan the Subscription `sub` refers to, once `pick` finds what is wanted in it.
async fn referenced_plan<T>(
    ns: &TestNamespace,
    sub: &str,
    what: &str,
    timeout: Duration,
    pick: impl Fn(&InstallPlan) -> Option<T> + Copy,
) -> anyhow::Result<T> {
    let subs: Api<Subscription> = ns.api();
    let plans: Api<InstallPlan> = ns.api();
    Ok(ns
        .wait_for(&format!("the InstallPlan of Subscription {sub}: {what}"), timeout, OBJECTS, || {
            let (subs, plans) = (subs.clone(), plans.clone());
            async move {
                let status = subs.get(sub).await.map_err(|e| e.to_string())?.status.unwrap_or_default();
                let Some(name) = status.install_plan_ref.and_then(|r| r.name) else {
                    return Ok::<_, String>(None);
                };
                Ok(plans.get_opt(&name).await.map_err(|e| e.to_string())?.as_ref().and_then(pick))
            }
        })
        .await?)
}

/// The first bundle lookup of the InstallPlan the Subscription `sub` refers to, once it has a
/// condition (pending or failed) and the plan no steps.
pub async fn referenced_plan_lookup(ns: &TestNamespace, sub: &str, timeout: Duration) -> anyhow::Result<BundleLookup> {
    referenced_plan(ns, sub, "a bundle lookup with a condition", timeout, |plan| {
        let status = plan.status.as_ref()?;
        if status.plan.is_some() {
            return None;
        }
        status.bundle_lookups.iter().flatten().find(|l| l.conditions.as_ref().is_some_and(|c| !c.is_empty())).cloned()
    })
    .await
}

/// The message of the InstallPlan the Subscription `sub` refers to, once it is Failed.
pub async fn referenced_plan_failed(ns: &TestNamespace, sub: &str, timeout: Duration) -> anyhow::Result<String> {
    referenced_plan(ns, sub, "Failed", timeout, |plan| {
        let status = plan.status.as_ref()?;
        (status.phase == InstallPlanPhase::Failed).then(|| status.message.clone().unwrap_or_default())
    })
    .await
}

/// Records the path a Subscription walks: the CSVs of every InstallPlan made in a namespace,
/// by generation, and every CSV or InstallPlan that was ever Failed on the way, from watches (OLM keeps only
/// the last five plans of a namespace, so a long walk cannot be read back from the plans left
/// at the end, and an old CSV that failed before it was replaced is gone by then).
pub struct WalkRecorder {
    plans: std::sync::Arc<std::sync::Mutex<std::collections::BTreeMap<i64, Vec<String>>>>,
    failed: std::sync::Arc<std::sync::Mutex<std::collections::BTreeMap<String, String>>>,
    tasks: [tokio::task::JoinHandle<()>; 2],
}

/// Call `record` with every object a watch of `api` sees, for as long as the task runs (a
/// watch error is retried by the watcher itself).
fn watch_each<K>(api: Api<K>, mut record: impl FnMut(K) + Send + 'static) -> tokio::task::JoinHandle<()>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    use futures::StreamExt as _;
    tokio::spawn(async move {
        let mut events = std::pin::pin!(kube::runtime::watcher(api, Default::default()));
        while let Some(event) = events.next().await {
            if let Ok(kube::runtime::watcher::Event::Apply(object) | kube::runtime::watcher::Event::InitApply(object)) = event {
                record(object);
            }
        }
    })
}

impl WalkRecorder {
    /// Start watching `ns`; start it before the Subscription is created.
    pub fn start(ns: &TestNamespace) -> Self {
        let plans = std::sync::Arc::new(std::sync::Mutex::new(std::collections::BTreeMap::new()));
        let failed = std::sync::Arc::new(std::sync::Mutex::new(std::collections::BTreeMap::new()));
        let (record_plans, record_failed, record_failed_plans) = (plans.clone(), failed.clone(), failed.clone());
        let tasks = [
            watch_each(ns.api::<InstallPlan>(), move |plan: InstallPlan| {
                let status = plan.status.clone().unwrap_or_default();
                if status.phase == InstallPlanPhase::Failed
                    && let Ok(mut failed) = record_failed_plans.lock()
                {
                    failed.entry(format!("InstallPlan {}", plan.metadata.name.clone().unwrap_or_default())).or_insert(status.message.unwrap_or_default());
                }
                if let Ok(mut plans) = record_plans.lock() {
                    plans.insert(plan.spec.generation.unwrap_or(0), plan.spec.cluster_service_version_names);
                }
            }),
            watch_each(ns.api::<ClusterServiceVersion>(), move |csv: ClusterServiceVersion| {
                let status = csv.status.unwrap_or_default();
                // A copy of an all-namespaces operator's CSV mirrors its original's status; the
                // original is watched in its own namespace.
                let copied = status.reason.as_ref().is_some_and(|r| r.as_str() == "Copied");
                if status.phase == Some(CsvPhase::Failed)
                    && !copied
                    && let (Some(name), Ok(mut failed)) = (csv.metadata.name, record_failed.lock())
                {
                    // Which requirements were not met, when that is why.
                    let unmet: Vec<String> = status
                        .requirement_status
                        .iter()
                        .flat_map(|r| r.iter())
                        .filter(|r| !matches!(r.status.as_str(), "Present" | "Satisfied"))
                        .map(|r| {
                            let dependents: Vec<String> = r
                                .dependents
                                .iter()
                                .flatten()
                                .filter(|d| d.status.as_str() != "Satisfied")
                                .map(|d| d.message.clone().unwrap_or_default())
                                .collect();
                            format!("{} {} {}: {} {}", r.kind, r.name, r.status.as_str(), r.message, dependents.join("; "))
                        })
                        .collect();
                    let reason = status.reason.as_ref().map(|r| r.as_str().to_owned()).unwrap_or_default();
                    let unmet = if unmet.is_empty() { String::new() } else { format!(" [{}]", unmet.join(" | ")) };
                    failed.entry(name).or_insert(format!("{reason}: {}{unmet}", status.message.unwrap_or_default()));
                }
            }),
        ];
        WalkRecorder { plans, failed, tasks }
    }

    /// The CSVs of the plans seen so far, oldest plan first.
    pub fn walked(&self) -> Vec<String> {
        self.plans.lock().map(|plans| plans.values().flatten().cloned().collect()).unwrap_or_default()
    }

    /// The CSVs and InstallPlans seen Failed so far, with the first reason and message seen.
    pub fn failed(&self) -> std::collections::BTreeMap<String, String> {
        self.failed.lock().map(|failed| failed.clone()).unwrap_or_default()
    }
}

impl Drop for WalkRecorder {
    fn drop(&mut self) {
        self.tasks.iter().for_each(tokio::task::JoinHandle::abort);
    }
}

/// Wait until the CSV `name` is Succeeded, failing at once when `walk` has seen a CSV or an
/// InstallPlan of the namespace Failed (what the user would see go wrong).
pub async fn csv_succeeded_on_the_way(ns: &TestNamespace, walk: &WalkRecorder, name: &str, timeout: Duration) -> anyhow::Result<()> {
    let csvs: Api<ClusterServiceVersion> = ns.api();
    let begin = std::time::Instant::now();
    loop {
        if let Some((what, why)) = walk.failed().into_iter().next() {
            anyhow::bail!("{what} Failed on the way to {name}: {why}");
        }
        let csv = csvs.get_opt(name).await?;
        if csv.and_then(|c| c.status).and_then(|s| s.phase) == Some(CsvPhase::Succeeded) {
            return Ok(());
        }
        if begin.elapsed() > timeout {
            anyhow::bail!("{name} not Succeeded after {timeout:?}:\n{}", ns.dump(OBJECTS).await);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Delete the CRDs `names` and wait until they are gone: each suite of real packages starts on
/// a cluster that never ran them, as a fresh cluster (CI's) is. Earlier suites (and earlier
/// runs) leave newer CRDs of the same packages behind, and installing an older bundle over a
/// CRD that stores a version it does not know is refused, rightly.
pub async fn remove_crds(cluster: &TestCluster, names: &std::collections::BTreeSet<String>, timeout: Duration) -> anyhow::Result<()> {
    use anyhow::Context as _;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let api: Api<CustomResourceDefinition> = Api::all(cluster.client());
    let mut present = Vec::new();
    for name in names {
        match api.delete(name, &Default::default()).await {
            Ok(_) => present.push(name.clone()),
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(err) => return Err(err).with_context(|| format!("delete CRD {name}")),
        }
    }
    olm_testkit::wait_for("the CRDs to be gone", timeout, || {
        let (api, present) = (api.clone(), present.clone());
        async move {
            for name in present {
                if api.get_opt(&name).await.map_err(|e| e.to_string())?.is_some() {
                    return Ok::<_, String>(None);
                }
            }
            Ok(Some(()))
        }
    })
    .await?;
    Ok(())
}
