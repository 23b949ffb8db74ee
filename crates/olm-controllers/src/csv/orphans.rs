//! Cluster RBAC OLM made for a CSV whose namespace is gone. ClusterRoles and bindings cannot
//! carry an ownerReference to a namespaced CSV; they are deleted by owner labels when the CSV
//! leaves the cache (`act::delete_cluster_rbac_of_deleted_csvs`). An InstallPlan still running
//! while its namespace terminates can apply them after that cleanup, and then nothing would
//! ever delete them. Once a namespace is gone nothing made for a CSV there is wanted: the
//! cluster RBAC owned by CSVs of a namespace that no longer exists is deleted when the namespace
//! disappears, and by a sweep every [`SWEEP`] (namespaces gone while OLM was down, or a plan
//! that wrote after the namespace's deletion).
//!
//! APIServices are cluster-scoped too: one labelled as owned by a CSV that does not exist (its
//! namespace gone, or the CSV) is deleted when it appears or changes, and by the sweep, as
//! upstream deletes orphaned APIServices.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{DeleteParams, ListParams, Preconditions};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};
use olm_api::keys;
use olm_runtime::{ControllerContext, Error};

use super::decide::OwnerLabels;
use super::state::CsvState;

/// How often the cluster RBAC of CSVs is checked for owners in vanished namespaces.
pub const SWEEP: Duration = Duration::from_secs(600);

/// The owner namespaces, among `labels` (of cluster-scoped objects made for CSVs), that do not
/// exist any more (`exists` says which do).
pub fn vanished_owner_namespaces<'a>(
    labels: impl IntoIterator<Item = &'a BTreeMap<String, String>>,
    exists: impl Fn(&str) -> bool,
) -> BTreeSet<String> {
    labels
        .into_iter()
        .filter(|labels| labels.get(keys::OWNER_KIND_LABEL).map(String::as_str) == Some("ClusterServiceVersion"))
        .filter_map(|labels| labels.get(keys::OWNER_NAMESPACE_LABEL))
        .filter(|namespace| !namespace.is_empty() && !exists(namespace))
        .cloned()
        .collect()
}

/// Deletes `api_service` when the CSV its owner labels name does not exist (the cache of
/// CSVs is synced before this runs, and a CSV is in it before OLM makes its APIService). The
/// delete is guarded by the uid seen: a re-created APIService is judged again on its own.
async fn delete_if_orphaned(ctx: &ControllerContext<CsvState>, api_service: &APIService) {
    let owner = OwnerLabels::of(api_service.labels());
    let Some((namespace, name)) = owner.csv() else {
        return;
    };
    if ctx.state.csvs.get(Some(namespace), name).is_some() {
        return;
    }
    let api_name = api_service.name_any();
    let params = DeleteParams { preconditions: Some(Preconditions { uid: api_service.uid(), resource_version: None }), ..Default::default() };
    match Api::<APIService>::all(ctx.client.clone()).delete(&api_name, &params).await {
        Ok(_) => tracing::info!(apiservice = %api_name, csv = %format!("{namespace}/{name}"), "deleted an APIService whose owning CSV does not exist"),
        Err(err) if olm_runtime::error::is_not_found(&err) => {}
        Err(err) => {
            let err = Error::api(format!("delete the orphaned APIService {api_name}"), err);
            tracing::warn!(error = %err, "retried by the next sweep");
        }
    }
}

fn owned_by_csvs_of(namespace: &str) -> ListParams {
    ListParams::default().labels(&format!(
        "{}=ClusterServiceVersion,{}={namespace}",
        keys::OWNER_KIND_LABEL,
        keys::OWNER_NAMESPACE_LABEL
    ))
}

/// Delete the ClusterRoles and ClusterRoleBindings made for CSVs of `namespace`.
async fn delete_cluster_rbac_of(client: &kube::Client, namespace: &str) {
    let params = owned_by_csvs_of(namespace);
    let roles = Api::<ClusterRole>::all(client.clone()).delete_collection(&DeleteParams::default(), &params).await;
    let bindings = Api::<ClusterRoleBinding>::all(client.clone()).delete_collection(&DeleteParams::default(), &params).await;
    for (what, result) in [("ClusterRoles", roles.map(|_| ())), ("ClusterRoleBindings", bindings.map(|_| ()))] {
        if let Err(err) = result {
            let err = Error::api(format!("delete the {what} of CSVs of the deleted namespace {namespace}"), err);
            tracing::warn!(error = %err, "retried by the next sweep");
        }
    }
}

/// The owner namespaces of the cluster RBAC made for CSVs.
async fn owner_namespaces(client: &kube::Client) -> Result<Vec<BTreeMap<String, String>>, kube::Error> {
    let params = ListParams::default().labels(&format!("{}=ClusterServiceVersion", keys::OWNER_KIND_LABEL));
    let roles = Api::<ClusterRole>::all(client.clone()).list_metadata(&params).await?;
    let bindings = Api::<ClusterRoleBinding>::all(client.clone()).list_metadata(&params).await?;
    Ok(roles.items.iter().map(|r| r.labels().clone()).chain(bindings.items.iter().map(|b| b.labels().clone())).collect())
}

/// Runs while the CSV controller runs: deletes the cluster RBAC of CSVs of each namespace that
/// disappears, and sweeps every [`SWEEP`] (the first sweep once the caches have synced).
pub fn delete_cluster_rbac_of_deleted_namespaces(
    ctx: Arc<ControllerContext<CsvState>>,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let namespaces = ctx.state.namespaces.subscribe();
    let api_services = ctx.state.api_services.subscribe();
    async move {
        enum Work {
            Gone(String),
            ApiService(Arc<APIService>),
            Sweep,
        }
        let api_service_store = ctx.state.api_services.store().clone();
        let api_services = api_services.filter_map(move |a| {
            let current = api_service_store.get(&ObjectRef::from_obj(a.as_ref())).is_some();
            futures::future::ready((current && OwnerLabels::of(a.labels()).csv().is_some()).then_some(Work::ApiService(a)))
        });
        let store = ctx.state.namespaces.store().clone();
        let gone = namespaces.filter_map(move |ns| {
            let deleted = store.get(&ObjectRef::from_obj(ns.as_ref())).is_none();
            futures::future::ready(deleted.then(|| Work::Gone(ns.name_any())))
        });
        let sweeps = futures::stream::unfold(None, |interval: Option<tokio::time::Interval>| async move {
            // The first tick is at once: a sweep right after the caches synced.
            let mut interval = interval.unwrap_or_else(|| tokio::time::interval(SWEEP));
            interval.tick().await;
            Some((Work::Sweep, Some(interval)))
        });
        let mut work = std::pin::pin!(futures::stream::select(futures::stream::select(gone, api_services), sweeps));
        while let Some(item) = work.next().await {
            if !ctx.leadership.is_leader() {
                continue;
            }
            match item {
                Work::Gone(namespace) => delete_cluster_rbac_of(&ctx.client, &namespace).await,
                Work::ApiService(api_service) => delete_if_orphaned(&ctx, &api_service).await,
                Work::Sweep => sweep(&ctx).await,
            }
        }
    }
}

/// Every APIService made for a CSV that does not exist, and the cluster RBAC of CSVs of
/// namespaces that no longer exist.
async fn sweep(ctx: &ControllerContext<CsvState>) {
    for api_service in ctx.state.api_services.list() {
        delete_if_orphaned(ctx, &api_service).await;
    }
    match owner_namespaces(&ctx.client).await {
        Ok(labels) => {
            let namespaces = &ctx.state.namespaces;
            for namespace in vanished_owner_namespaces(&labels, |ns| namespaces.get(None, ns).is_some()) {
                tracing::info!(namespace, "deleting the cluster RBAC of CSVs of a namespace that no longer exists");
                delete_cluster_rbac_of(&ctx.client, &namespace).await;
            }
        }
        Err(err) => {
            let err = Error::api("list the ClusterRoles and ClusterRoleBindings made for CSVs", err);
            tracing::warn!(error = %err, "retried by the next sweep");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(kind: &str, namespace: &str) -> BTreeMap<String, String> {
        BTreeMap::from([
            (keys::OWNER_LABEL.to_owned(), "etcdoperator.v0.9.4".to_owned()),
            (keys::OWNER_KIND_LABEL.to_owned(), kind.to_owned()),
            (keys::OWNER_NAMESPACE_LABEL.to_owned(), namespace.to_owned()),
        ])
    }

    #[test]
    fn only_csv_owned_rbac_of_vanished_namespaces_is_orphaned() {
        let all = [
            labels("ClusterServiceVersion", "gone"),
            labels("ClusterServiceVersion", "gone"),
            labels("ClusterServiceVersion", "here"),
            labels("OperatorGroup", "also-gone"),
            labels("ClusterServiceVersion", ""),
        ];
        let vanished = vanished_owner_namespaces(&all, |ns| ns == "here");
        assert_eq!(vanished, BTreeSet::from(["gone".to_owned()]));
    }

    #[test]
    fn the_csv_an_object_is_made_for_is_named_by_its_owner_labels() {
        let csv_owner = |labels: &BTreeMap<String, String>| OwnerLabels::of(labels).csv().map(|(ns, name)| (ns.to_owned(), name.to_owned()));
        assert_eq!(csv_owner(&labels("ClusterServiceVersion", "ops")), Some(("ops".to_owned(), "etcdoperator.v0.9.4".to_owned())));
        assert_eq!(csv_owner(&labels("OperatorGroup", "ops")), None);
        assert_eq!(csv_owner(&labels("ClusterServiceVersion", "")), None);
        assert_eq!(csv_owner(&BTreeMap::new()), None);
    }
}
