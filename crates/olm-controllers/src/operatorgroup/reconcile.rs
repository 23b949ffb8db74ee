//! Observe → decide → act for OperatorGroups.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};
use olm_api::keys;
use olm_api::v1::operator_group::OperatorGroup;
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use serde_json::json;
use tracing::instrument;

use super::decide::{NamespaceView, Observed, OgAction, decide};
use olm_runtime::controller::action_for;
use olm_runtime::{Cache, ControllerContext, Error, Result, error_policy, guarded};

/// Controller name: metric label, field manager `olm/operatorgroup`.
pub const NAME: &str = "operatorgroup";

/// The caches the OperatorGroup controller reads.
#[derive(Clone)]
pub struct OgState {
    /// Every OperatorGroup.
    pub groups: Cache<OperatorGroup>,
    /// Every ClusterServiceVersion.
    pub csvs: Cache<ClusterServiceVersion>,
    /// Every Namespace.
    pub namespaces: Cache<Namespace>,
    /// ClusterRoles labelled `olm.managed=true`.
    pub cluster_roles: Cache<ClusterRole>,
    /// Every ServiceAccount (for `spec.serviceAccountName`).
    pub service_accounts: Cache<ServiceAccount>,
}

/// Namespaces as plain views of `namespaces`.
pub fn namespace_views(namespaces: &[Arc<Namespace>]) -> Vec<NamespaceView<'_>> {
    static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();
    namespaces
        .iter()
        .map(|ns| NamespaceView {
            name: ns.metadata.name.as_deref().unwrap_or_default(),
            labels: ns.metadata.labels.as_ref().unwrap_or(&NO_LABELS),
        })
        .collect()
}

#[instrument(skip_all, fields(kind = "OperatorGroup", namespace = %group.namespace().unwrap_or_default(), name = %group.name_any()))]
async fn reconcile(group: Arc<OperatorGroup>, ctx: Arc<ControllerContext<OgState>>) -> Result<Action> {
    let namespace = group.namespace().unwrap_or_default();
    let state = &ctx.state;
    let namespace_list = state.namespaces.list();
    let namespaces = namespace_views(&namespace_list);
    let csvs = state.csvs.list_in(&namespace);
    let groups_in_namespace = state.groups.list_in(&namespace).len().max(1);
    let owner = crate::metadata::operator_group_owner_labels(&group);
    let roles = crate::metadata::carrying_owner(&state.cluster_roles, &owner);
    let taken_role_names = taken_role_names(&state.cluster_roles, &group, &owner);
    let observed = Observed {
        group: &group,
        groups_in_namespace,
        namespaces: &namespaces,
        csvs: csvs.iter().map(Arc::as_ref).collect(),
        cluster_roles: roles.iter().map(Arc::as_ref).collect(),
        taken_role_names,
        service_account_exists: group
            .spec
            .service_account_name
            .as_ref()
            .map(|sa| state.service_accounts.get(Some(&namespace), sa).is_some()),
    };
    let decision = decide(&observed, Timestamp::now());

    // The roles are independent of each other: written together, so that a pass (which a new
    // member CSV waits for, in the queue behind other groups' passes) takes one round trip
    // for them instead of three. Everything else goes in the decided order.
    let mut roles = Vec::new();
    for action in &decision.actions {
        if matches!(action, OgAction::ApplyClusterRole(_) | OgAction::DeleteClusterRole { .. }) {
            roles.push(act(&ctx, &group, action));
            continue;
        }
        futures::future::try_join_all(roles.drain(..)).await?;
        act(&ctx, &group, action).await?;
    }
    futures::future::try_join_all(roles).await?;
    if let Some(status) = &decision.status {
        ctx.status.apply(group.as_ref(), status).await?;
    }
    Ok(action_for(decision.requeue_after))
}

/// Carry out one action of `group`'s decision.
async fn act(ctx: &ControllerContext<OgState>, group: &OperatorGroup, action: &OgAction) -> Result<()> {
    let namespace = group.namespace().unwrap_or_default();
    let params = PatchParams::default();
    match action {
        OgAction::AnnotateCsv { name, annotations } => {
            let api: Api<ClusterServiceVersion> = Api::namespaced(ctx.client.clone(), &namespace);
            let patch = json!({ "metadata": { "annotations": annotations } });
            api.patch(name, &params, &Patch::Merge(&patch))
                .await
                .map_err(|err| Error::api(format!("annotate ClusterServiceVersion {namespace}/{name}"), err))?;
            tracing::info!(csv = %name, "set OperatorGroup annotations on member CSV");
        }
        OgAction::SetProvidedApis { value } => {
            let api: Api<OperatorGroup> = Api::namespaced(ctx.client.clone(), &namespace);
            let patch = json!({ "metadata": { "annotations": { keys::PROVIDED_APIS_ANNOTATION: value } } });
            api.patch(&group.name_any(), &params, &Patch::Merge(&patch))
                .await
                .map_err(|err| Error::api(format!("set olm.providedAPIs on OperatorGroup {namespace}/{}", group.name_any()), err))?;
        }
        OgAction::ApplyClusterRole(role) => {
            let api: Api<ClusterRole> = Api::all(ctx.client.clone());
            let role_name = role.name_any();
            api.patch(&role_name, &PatchParams::apply(&ctx.field_manager()).force(), &Patch::Apply(role.as_ref()))
                .await
                .map_err(|err| Error::api(format!("apply ClusterRole {role_name}"), err))?;
        }
        OgAction::DeleteClusterRole { name } => {
            let api: Api<ClusterRole> = Api::all(ctx.client.clone());
            match api.delete(name, &kube::api::DeleteParams::default()).await {
                Ok(_) => {}
                Err(err) if olm_runtime::error::is_not_found(&err) => {}
                Err(err) => return Err(Error::api(format!("delete ClusterRole {name}"), err)),
            }
        }
        OgAction::LabelNamespace { namespace: target, key } => label_namespace(ctx, target, key, true).await?,
        OgAction::UnlabelNamespace { namespace: target, key } => label_namespace(ctx, target, key, false).await?,
    }
    Ok(())
}

/// The names `group`'s roles could take that a role of another owner has, up to the first free
/// (or its own) name of each role.
fn taken_role_names(roles: &Cache<ClusterRole>, group: &OperatorGroup, owner: &BTreeMap<String, String>) -> BTreeSet<String> {
    let mut taken = BTreeSet::new();
    for (suffix, _) in crate::rbac::ROLE_TYPES {
        for name in super::decide::operator_group_role_names(group, suffix) {
            match roles.get(None, &name) {
                Some(role) if !crate::metadata::carries_owner(role.as_ref(), owner) => {
                    taken.insert(name);
                }
                _ => break,
            }
        }
    }
    taken
}

/// Adds (or removes) the group label `key` on namespace `namespace` (a merge patch; a
/// namespace already gone is no error when removing).
async fn label_namespace(ctx: &ControllerContext<OgState>, namespace: &str, key: &str, add: bool) -> Result<()> {
    let api: Api<Namespace> = Api::all(ctx.client.clone());
    let value = if add { json!("") } else { serde_json::Value::Null };
    let patch = json!({ "metadata": { "labels": { key: value } } });
    match api.patch(namespace, &PatchParams::default(), &Patch::Merge(&patch)).await {
        Ok(_) => Ok(()),
        Err(err) if !add && olm_runtime::error::is_not_found(&err) => Ok(()),
        Err(err) => Err(Error::api(format!("{} label {key} on Namespace {namespace}", if add { "add" } else { "remove" }), err)),
    }
}

/// Removes the labels of OperatorGroups that no longer exist from every namespace: on
/// startup and after a group is deleted (a group deleted while OLM was down included).
async fn remove_stale_group_labels(ctx: &ControllerContext<OgState>) {
    let uids = ctx.state.groups.list().iter().filter_map(|g| g.uid()).collect();
    let stale = super::decide::stale_group_labels(&namespace_views(&ctx.state.namespaces.list()), &uids);
    for (namespace, key) in stale {
        match label_namespace(ctx, &namespace, &key, false).await {
            Ok(()) => tracing::info!(%namespace, label = %key, "removed the label of a deleted OperatorGroup"),
            Err(err) => tracing::warn!(%namespace, label = %key, "cannot remove the label of a deleted OperatorGroup: {err}"),
        }
    }
}

/// ClusterRoles are cluster-scoped, so no ownerReference can point at the (namespaced) group:
/// when a group disappears from the cache, its roles are deleted by their owner labels, and its
/// namespace labels removed.
fn delete_roles_of_deleted_groups(ctx: Arc<ControllerContext<OgState>>) -> impl std::future::Future<Output = ()> + Send + 'static {
    let events = ctx.state.groups.subscribe();
    let sweeps = {
        let ctx = ctx.clone();
        async move {
            let gained = ctx.leadership.gained();
            let mut gained = std::pin::pin!(gained);
            while gained.next().await.is_some() {
                remove_stale_group_labels(&ctx).await;
            }
        }
    };
    let deletions = async move {
        let mut events = std::pin::pin!(events);
        while let Some(group) = events.next().await {
            if ctx.state.groups.store().get(&ObjectRef::from_obj(group.as_ref())).is_some() || !ctx.leadership.is_leader() {
                continue;
            }
            remove_stale_group_labels(&ctx).await;
            let selector = crate::metadata::operator_group_owner_labels(&group)
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",");
            let api: Api<ClusterRole> = Api::all(ctx.client.clone());
            let params = kube::api::ListParams::default().labels(&selector);
            match api.delete_collection(&kube::api::DeleteParams::default(), &params).await {
                Ok(_) => tracing::info!(group = %group.name_any(), namespace = %group.namespace().unwrap_or_default(), "deleted the ClusterRoles of a deleted OperatorGroup"),
                Err(err) => tracing::warn!(%err, group = %group.name_any(), "cannot delete the ClusterRoles of a deleted OperatorGroup"),
            }
        }
    };
    async move {
        tokio::join!(sweeps, deletions);
    }
}

/// Whether a change to namespace `namespace` can change what `group` targets or holds.
pub fn namespace_may_concern(group: &OperatorGroup, namespace: &str) -> bool {
    let explicit = group.spec.target_namespaces.as_deref().filter(|t| !t.is_empty());
    group.namespace().as_deref() == Some(namespace)
        || match explicit {
            Some(targets) => targets.iter().any(|t| t == namespace),
            None => group.spec.selector.is_some(),
        }
}

/// Build the OperatorGroup controller; it subscribes to the caches now (call this before the
/// caches start) and runs, once every cache it reads has synced, until `shutdown` resolves.
pub fn run(
    ctx: Arc<ControllerContext<OgState>>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let state = ctx.state.clone();
    let groups_store = state.groups.store().clone();
    let by_namespace_store = groups_store.clone();
    let all_store = groups_store.clone();
    let peers_store = groups_store.clone();
    let sa_store = groups_store.clone();
    let in_namespace = move |store: &kube::runtime::reflector::Store<OperatorGroup>, ns: Option<String>| {
        store
            .state()
            .iter()
            .filter(|g| g.namespace() == ns)
            .map(|g| ObjectRef::from_obj(g.as_ref()))
            .collect::<Vec<_>>()
    };
    let controller = Controller::for_shared_stream(state.groups.subscribe(), groups_store)
        .with_config(olm_runtime::controller::controller_config())
        // Another group appearing or leaving changes MultipleOperatorGroup on its peers.
        .watches_shared_stream(state.groups.subscribe(), move |g: Arc<OperatorGroup>| {
            in_namespace(&peers_store, g.namespace())
        })
        // Member CSVs need annotations and feed olm.providedAPIs; copies are no members.
        .watches_shared_stream(state.csvs.subscribe_changes(crate::metadata::csv_change), move |csv: Arc<ClusterServiceVersion>| {
            if csv.is_copied() {
                return Vec::new();
            }
            in_namespace(&by_namespace_store, csv.namespace())
        })
        // The group's service account appearing or going away.
        .watches_shared_stream(state.service_accounts.subscribe(), move |sa: Arc<ServiceAccount>| {
            let name = sa.name_any();
            sa_store
                .state()
                .iter()
                .filter(|g| g.namespace() == sa.namespace() && g.spec.service_account_name.as_deref() == Some(name.as_str()))
                .map(|g| ObjectRef::from_obj(g.as_ref()))
                .collect::<Vec<_>>()
        })
        // A namespace appearing, changing labels or going away concerns only the groups whose
        // targets it can change: selector-based groups, groups naming it, and its own groups.
        // (All-namespaces groups target "" whatever exists; mapping every namespace event to
        // every group made reconciles grow with the square of the namespaces.)
        .watches_shared_stream(state.namespaces.subscribe(), move |ns: Arc<Namespace>| {
            let name = ns.name_any();
            all_store
                .state()
                .iter()
                .filter(|g| namespace_may_concern(g, &name))
                .map(|g| ObjectRef::from_obj(g.as_ref()))
                .collect::<Vec<_>>()
        })
        .reconcile_all_on(ctx.leadership.gained())
        .graceful_shutdown_on(shutdown);
    let cleanup = delete_roles_of_deleted_groups(ctx.clone());
    async move {
        state.groups.synced().await;
        state.csvs.synced().await;
        state.namespaces.synced().await;
        state.cluster_roles.synced().await;
        state.service_accounts.synced().await;
        let controller = controller
            .run(|group, ctx| guarded(group, ctx, reconcile), error_policy, ctx)
            .for_each(|_| futures::future::ready(()));
        // The cleanup loop only ends with the cache; the controller ends on shutdown.
        tokio::select! {
            _ = controller => {}
            _ = cleanup => {}
        }
    }
}
