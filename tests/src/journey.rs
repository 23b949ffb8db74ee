//! The waits of an operator's journey that suites share: a CSV Succeeded (failing at once with
//! the CSV's message when it fails), an old CSV replaced and gone (never left Failed), and a
//! Subscription at its channel head; each shows the objects when it times out.

use std::time::Duration;

use kube::Api;
use olm_api::v1alpha1::cluster_service_version::{ClusterServiceVersion, CsvPhase};
use olm_api::v1alpha1::subscription::{Subscription, SubscriptionState};
use olm_testkit::TestNamespace;

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

/// Wait until the CSV `name` is gone, replaced by a newer one; it must never be Failed.
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
