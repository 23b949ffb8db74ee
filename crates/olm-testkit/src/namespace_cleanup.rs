//! How test namespaces go: without waiting for kube-controller-manager, but never leaving a CSV
//! that only a finished test's OLM could release.
//!
//! A namespace's deletion is the namespace controller's: it starts 5 s after the delete (a fixed
//! grace period) and then deletes every kind the API server serves, ~15 s a namespace with this
//! suite's CRDs. Waiting for that after each test was about a third of the suite's time. What a
//! test must wait for is the one thing only its own OLM can do: remove the CSV cleanup finalizer
//! (with the test's process gone, that CSV and its namespace would stay forever).

use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::{Api, Client};

use crate::{NAMESPACE_LABEL, Result, TestkitError, run_id, wait_for};

/// OLM's finalizer on a CSV (`olm_api::keys::CSV_CLEANUP_FINALIZER`; this crate does not know
/// OLM's types).
const CSV_CLEANUP_FINALIZER: &str = "operators.coreos.com/csv-cleanup";

fn csv_resource() -> ApiResource {
    ApiResource {
        group: "operators.coreos.com".into(),
        version: "v1alpha1".into(),
        api_version: "operators.coreos.com/v1alpha1".into(),
        kind: "ClusterServiceVersion".into(),
        plural: "clusterserviceversions".into(),
    }
}

/// The CSVs of `namespace` that carry OLM's cleanup finalizer (none when the cluster has no CSV
/// API).
async fn finalized_csvs(csvs: &Api<DynamicObject>) -> std::result::Result<Vec<String>, kube::Error> {
    match csvs.list(&ListParams::default()).await {
        Ok(list) => Ok(list
            .items
            .into_iter()
            .filter(|csv| csv.metadata.finalizers.iter().flatten().any(|f| f == CSV_CLEANUP_FINALIZER))
            .filter_map(|csv| csv.metadata.name)
            .collect()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// Deletes the namespace `name` (if it is still there), then each of its CSVs that OLM holds,
/// and waits up to `timeout` until OLM has released them all. The namespace's other objects go
/// in the background.
pub(crate) async fn delete_namespace(client: &Client, name: &str, timeout: Duration) -> Result<()> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    match namespaces.delete(name, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
        Err(source) => return Err(TestkitError::Api { action: format!("deleting namespace {name}"), source }),
    }
    let csvs: Api<DynamicObject> = Api::namespaced_with(client.clone(), name, &csv_resource());
    let held = finalized_csvs(&csvs)
        .await
        .map_err(|source| TestkitError::Api { action: format!("listing the CSVs of namespace {name}"), source })?;
    for csv in &held {
        match csvs.delete(csv, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(source) => return Err(TestkitError::Api { action: format!("deleting CSV {name}/{csv}"), source }),
        }
    }
    if held.is_empty() {
        return Ok(());
    }
    wait_for(&format!("OLM to release the CSVs of namespace {name} (its {CSV_CLEANUP_FINALIZER} finalizer)"), timeout, || {
        let csvs = csvs.clone();
        async move {
            let held = finalized_csvs(&csvs).await.map_err(|e| e.to_string())?;
            if held.is_empty() { Ok(Some(())) } else { Err(format!("still held: {}", held.join(", "))) }
        }
    })
    .await
}

/// Removes what earlier test binaries left behind. cargo runs test binaries one after another,
/// so a test namespace from another run belongs to a finished process. Its OLM controllers are
/// gone with it: the CSV cleanup finalizer would hold the namespace in Terminating forever,
/// and its operators would still count as API owners (InterOperatorGroupOwnerConflict) for the
/// next binary. So each stale namespace is deleted, and its CSVs too, their finalizer removed.
/// Best effort: waits up to 60 s until those CSVs are gone, never fails the test.
pub(crate) async fn sweep_finished_runs(client: Client) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let Ok(list) = namespaces.list(&ListParams::default().labels(NAMESPACE_LABEL)).await else {
        return;
    };
    let stale: Vec<String> = list
        .items
        .into_iter()
        .filter(|ns| ns.metadata.labels.as_ref().and_then(|l| l.get(crate::RUN_LABEL)).map(String::as_str) != Some(run_id()))
        .filter_map(|ns| ns.metadata.name)
        .collect();
    let unfinalize = Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}}));
    let mut stale_csvs = Vec::new();
    for name in &stale {
        let _ = namespaces.delete(name, &DeleteParams::default()).await;
        let csvs: Api<DynamicObject> = Api::namespaced_with(client.clone(), name, &csv_resource());
        for csv in finalized_csvs(&csvs).await.unwrap_or_default() {
            let _ = csvs.delete(&csv, &DeleteParams::default()).await;
            let _ = csvs.patch(&csv, &PatchParams::default(), &unfinalize).await;
        }
        stale_csvs.push(csvs);
    }
    let _ = wait_for("the CSVs of finished test runs to be deleted", Duration::from_secs(60), || {
        let stale_csvs = stale_csvs.clone();
        async move {
            for csvs in &stale_csvs {
                if !finalized_csvs(csvs).await.map_err(|e| e.to_string())?.is_empty() {
                    return Ok::<_, String>(None);
                }
            }
            Ok(Some(()))
        }
    })
    .await;
}
