//! Act: carry out a decision's actions against the API server, in the order `act` describes.

use std::sync::Arc;

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{CustomResourceConversion, CustomResourceDefinition};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::core::{ClusterResourceScope, NamespaceResourceScope};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use olm_api::v2::{OperatorCondition, OperatorConditionStatus};
use olm_runtime::error::{api_status_code, is_not_found};
use olm_api::keys;
use olm_runtime::{Cache, ControllerContext, Error, Result};
use serde_json::json;

use super::certs::{self};
use super::api_registration::WebhookConfig;
use super::decide::{CsvAction, CsvDecision};
use super::finalizer;
use super::installer::Installer;
use crate::metadata::owner_selector;
use super::state::CsvState;

/// Apply the decision's actions. The CSV's own metadata (finalizer first, labels,
/// annotations) goes first, in order. Then the OperatorCondition, which nothing in the pass
/// waits for, at the same time as everything else in order (the operator's Deployment among
/// it: what the install waits for should not queue behind writes it does not need). The
/// provided APIs' ClusterRoles are left to `apply_api_roles` and the copies to `act_copies`,
/// after the status. Every failure stops the pass.
pub(super) async fn act(ctx: &ControllerContext<CsvState>, csv: &ClusterServiceVersion, decision: &CsvDecision) -> Result<()> {
    let apply = PatchParams::apply(&ctx.field_manager()).force();
    let installer = Installer::of(ctx, csv);
    let is_metadata = |a: &CsvAction| matches!(a, CsvAction::AddFinalizer { .. } | CsvAction::Label(_) | CsvAction::Annotate(_));
    let is_side = |a: &CsvAction| matches!(a, CsvAction::ApplyOperatorCondition(_));
    let is_later = |a: &CsvAction| matches!(a, CsvAction::ApplyApiRole(_));
    for action in decision.actions.iter().filter(|a| is_metadata(a)) {
        act_one(ctx, csv, &installer, action, &apply).await?;
    }
    let side = act_at_once(ctx, csv, &installer, decision.actions.iter().filter(|a| is_side(a)), &apply);
    let ordered = async {
        for action in decision.actions.iter().filter(|a| !is_metadata(a) && !is_side(a) && !is_later(a) && !is_copy(a)) {
            act_one(ctx, csv, &installer, action, &apply).await?;
        }
        Ok(())
    };
    futures::future::try_join(side, ordered).await?;
    Ok(())
}

fn is_copy(action: &CsvAction) -> bool {
    matches!(action, CsvAction::ApplyCopy(_) | CsvAction::SetCopyStatus { .. } | CsvAction::DeleteCopy { .. })
}

/// The decision's copies, after `act` and the status: a pass stopped by a failure in `act` (a
/// lifted role the group's ServiceAccount may not write) tells no other namespace that the
/// operator runs, and the CSV's own status does not wait for its copies.
pub(super) async fn act_copies(ctx: &ControllerContext<CsvState>, csv: &ClusterServiceVersion, decision: &CsvDecision) {
    let copies: Vec<&CsvAction> = decision.actions.iter().filter(|a| is_copy(a)).collect();
    if !copies.is_empty() {
        write_copies(ctx, csv, &copies).await;
    }
}

/// Copies written at once: an all-namespaces operator has one in every namespace, and one
/// after the other they held its pass (and its status) for a minute at 1,000 namespaces.
const COPIES_AT_ONCE: usize = 8;

/// Write, update and delete the copies of `csv`, [`COPIES_AT_ONCE`] at a time. Best effort:
/// a copy failure must not hide the status of the CSV itself (a namespace may be going
/// away); failed copies are retried on the next pass (the periodic resync at the latest).
async fn write_copies(ctx: &ControllerContext<CsvState>, csv: &ClusterServiceVersion, actions: &[&CsvAction]) {
    let namespace = csv.namespace().unwrap_or_default();
    let name = csv.name_any();
    // A copy carries what the cache leaves out of the original: read it whole, once.
    let mut full_original = None;
    if actions.iter().any(|a| matches!(a, CsvAction::ApplyCopy(_))) {
        let api: Api<ClusterServiceVersion> = Api::namespaced(ctx.client.clone(), &namespace);
        match api.get(&name).await {
            Ok(full) => full_original = Some(full),
            Err(err) => {
                let err = Error::api(format!("read ClusterServiceVersion {namespace}/{name} to copy it"), err);
                tracing::warn!(%err, error.category = err.category(), "cannot copy the CSV; retrying on the next pass");
            }
        }
    }
    let (full_original, name) = (full_original.as_ref(), name.as_str());
    let writes: Vec<futures::future::BoxFuture<'_, Result<()>>> =
        actions.iter().map(|action| write_copy(ctx, action, full_original, name).boxed()).collect();
    let results: Vec<Result<()>> = futures::stream::iter(writes).buffer_unordered(COPIES_AT_ONCE).collect().await;
    let failed: Vec<Error> = results.into_iter().filter_map(Result::err).collect();
    if let Some(err) = failed.first() {
        tracing::warn!(%err, error.category = err.category(), failed = failed.len(), "some copies failed; retrying on the next pass");
    }
}

/// The provided APIs' ClusterRoles, all at once, after the status: nothing waits for them,
/// and the status (Succeeded) should not wait for a dozen writes either.
pub(super) async fn apply_api_roles(ctx: &ControllerContext<CsvState>, csv: &ClusterServiceVersion, decision: &CsvDecision) -> Result<()> {
    let apply = PatchParams::apply(&ctx.field_manager()).force();
    act_at_once(ctx, csv, &Installer::olm(ctx), decision.actions.iter().filter(|a| matches!(a, CsvAction::ApplyApiRole(_))), &apply).await
}

/// Apply `actions` concurrently (none of them depends on another, and none copies the CSV).
async fn act_at_once<'a>(
    ctx: &ControllerContext<CsvState>,
    csv: &ClusterServiceVersion,
    installer: &Installer,
    actions: impl Iterator<Item = &'a CsvAction>,
    apply: &PatchParams,
) -> Result<()> {
    futures::future::try_join_all(actions.map(|action| async move { act_one(ctx, csv, installer, action, apply).await })).await?;
    Ok(())
}

/// Apply one action. What grants the operator something is written by `installer`.
async fn act_one(
    ctx: &ControllerContext<CsvState>,
    csv: &ClusterServiceVersion,
    installer: &Installer,
    action: &CsvAction,
    apply: &PatchParams,
) -> Result<()> {
    let namespace = csv.namespace().unwrap_or_default();
    let name = csv.name_any();
    match action {
        // The CSV itself.
        CsvAction::Annotate(annotations) => {
            let patch = json!({ "metadata": { "annotations": annotations } });
            patch_csv(ctx, &namespace, &name, &patch, "annotate").await
        }
        CsvAction::Label(labels) => {
            let patch = json!({ "metadata": { "labels": labels } });
            patch_csv(ctx, &namespace, &name, &patch, "label").await
        }
        CsvAction::AddFinalizer { current, resource_version } => {
            finalizer::add(ctx, &namespace, &name, current.as_deref(), resource_version.as_deref()).await
        }
        CsvAction::DeleteOwnedClusterObjects => delete_owned_cluster_objects(&ctx.client, csv).await,
        CsvAction::RemoveFinalizer { index } => {
            finalizer::remove(ctx, &namespace, &name, *index).await?;
            tracing::info!("cluster-scoped objects deleted; cleanup finalizer removed");
            Ok(())
        }
        CsvAction::DeleteSelf => delete_self(ctx, &namespace, &name).await,
        // The operator's Deployments.
        CsvAction::ApplyDeployment(deployment) => apply_deployment(ctx, installer, &namespace, deployment, apply).await,
        CsvAction::DeleteDeployment(dep_name) => delete_deployment(installer, &namespace, dep_name).await,
        // RBAC (the provided APIs' aggregated roles grant the operator nothing) and the
        // OperatorCondition.
        CsvAction::ApplyApiRole(role) => apply_cluster_scoped(&olm(ctx), role.as_ref(), apply).await,
        CsvAction::ApplyClusterRole(role) => apply_cluster_scoped(installer, role.as_ref(), apply).await,
        CsvAction::ApplyClusterRoleBinding(binding) => apply_cluster_scoped(installer, binding.as_ref(), apply).await,
        CsvAction::ApplyRole(role) => {
            let cache = is_managed(role.as_ref()).then_some(&ctx.state.managed_roles);
            apply_namespaced_into(installer, &role.namespace().unwrap_or_default(), role.as_ref(), apply, cache).await
        }
        CsvAction::ApplyRoleBinding(binding) => {
            let cache = is_managed(binding.as_ref()).then_some(&ctx.state.managed_role_bindings);
            apply_namespaced_into(installer, &binding.namespace().unwrap_or_default(), binding.as_ref(), apply, cache).await
        }
        CsvAction::ApplyOperatorCondition(condition) => {
            apply_namespaced_into(&olm(ctx), &namespace, condition.as_ref(), apply, Some(&ctx.state.operator_conditions)).await
        }
        CsvAction::ApplyOperatorConditionStatus(status) => apply_condition_status(ctx, &namespace, &name, status).await,
        // APIServices, webhooks and what serves them.
        CsvAction::ApplySecret(secret) => apply_namespaced(&olm(ctx), &namespace, secret.as_ref(), apply).await,
        CsvAction::ApplyService(service) => apply_namespaced(&olm(ctx), &namespace, service.as_ref(), apply).await,
        CsvAction::ApplyApiService(api_service) => apply_cluster_scoped(installer, api_service.as_ref(), apply).await,
        CsvAction::ApplyWebhook { existing, config } => apply_webhook(ctx, installer, existing.as_deref(), config).await,
        CsvAction::ApplyCrdConversion { crd, conversion } => apply_crd_conversion(ctx, installer, crd, conversion).await,
        CsvAction::ResetCrdConversion { crd } => reset_crd_conversion(ctx, crd).await,
        CsvAction::DeleteWebhook { kind, name: config_name } => delete_webhook(ctx, kind, config_name).await,
        // Copies: `write_copies`.
        CsvAction::ApplyCopy(_) | CsvAction::SetCopyStatus { .. } | CsvAction::DeleteCopy { .. } => Ok(()),
    }
}

/// Merge-patch the CSV's metadata; `what` says what it does (`annotate`, `label`).
async fn patch_csv(ctx: &ControllerContext<CsvState>, namespace: &str, name: &str, patch: &serde_json::Value, what: &str) -> Result<()> {
    let api: Api<ClusterServiceVersion> = Api::namespaced(ctx.client.clone(), namespace);
    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map_err(|err| Error::api(format!("{what} ClusterServiceVersion {namespace}/{name}"), err))?;
    Ok(())
}

async fn delete_self(ctx: &ControllerContext<CsvState>, namespace: &str, name: &str) -> Result<()> {
    let api: Api<ClusterServiceVersion> = Api::namespaced(ctx.client.clone(), namespace);
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => tracing::info!("deleted ClusterServiceVersion"),
        Err(err) if is_not_found(&err) => {}
        Err(err) => return Err(Error::api(format!("delete ClusterServiceVersion {namespace}/{name}"), err)),
    }
    Ok(())
}

async fn apply_deployment(
    ctx: &ControllerContext<CsvState>,
    installer: &Installer,
    namespace: &str,
    deployment: &Deployment,
    apply: &PatchParams,
) -> Result<()> {
    let api: Api<Deployment> = Api::namespaced(installer.client()?, namespace);
    let as_whom = installer.as_whom();
    let name = deployment.name_any();
    let applied = match api.patch(&name, apply, &Patch::Apply(deployment)).await {
        Ok(applied) => applied,
        // An upgrade that changes an immutable field (spec.selector) cannot be applied: as
        // upstream's install strategy does, the Deployment is replaced.
        Err(err) if is_immutable_field(&err) => {
            tracing::info!(deployment = %name, "an immutable field changed: replacing the deployment");
            delete_deployment(installer, namespace, &name).await?;
            server_side_apply(&api, Some(namespace), &as_whom, deployment, apply).await?
        }
        // A Deployment going from RollingUpdate to Recreate keeps the rollingUpdate the API
        // server defaulted (no field manager owns it, so an apply cannot drop it), and the
        // server refuses it beside Recreate: clear it, as upstream's full update does.
        Err(err) if is_rolling_update_beside_recreate(&err) => {
            tracing::info!(deployment = %name, "strategy changes to Recreate: clearing the defaulted rollingUpdate");
            let clear = json!({"spec": {"strategy": {"type": "Recreate", "rollingUpdate": null}}});
            let params = PatchParams { field_manager: apply.field_manager.clone(), ..Default::default() };
            api.patch(&name, &params, &Patch::Merge(&clear))
                .await
                .map_err(|err| Error::api(format!("clear spec.strategy.rollingUpdate of Deployment {namespace}/{name}{as_whom}"), err))?;
            server_side_apply(&api, Some(namespace), &as_whom, deployment, apply).await?
        }
        Err(err) => return Err(Error::api(format!("apply Deployment {namespace}/{name}{as_whom}"), err)),
    };
    // What was just applied is what the CSV wants, at the generation returned.
    ctx.state.verified_specs.remember(&applied);
    tracing::info!(deployment = %deployment.name_any(), "applied deployment");
    Ok(())
}

/// A 422 because the change touches a field the API server does not let change.
fn is_immutable_field(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.code == 422 && status.message.contains("field is immutable"))
}

/// A 422 because a defaulted `rollingUpdate` stays beside a new `type: Recreate`.
fn is_rolling_update_beside_recreate(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.code == 422
        && status.message.contains("rollingUpdate")
        && status.message.contains("Recreate"))
}

async fn delete_deployment(installer: &Installer, namespace: &str, dep_name: &str) -> Result<()> {
    let api: Api<Deployment> = Api::namespaced(installer.client()?, namespace);
    match api.delete(dep_name, &DeleteParams::background()).await {
        Ok(_) => tracing::info!(deployment = %dep_name, "deleted deployment no longer in the strategy"),
        Err(err) if is_not_found(&err) => {}
        Err(err) => return Err(Error::api(format!("delete Deployment {namespace}/{dep_name}{}", installer.as_whom()), err)),
    }
    Ok(())
}

async fn apply_condition_status(
    ctx: &ControllerContext<CsvState>,
    namespace: &str,
    name: &str,
    status: &OperatorConditionStatus,
) -> Result<()> {
    let api: Api<OperatorCondition> = Api::namespaced(ctx.client.clone(), namespace);
    let patch = json!({ "status": status });
    match api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch)).await {
        Ok(_) => {}
        // Created in this pass but not visible yet, or gone: the next pass syncs it.
        Err(err) if is_not_found(&err) => {}
        Err(err) => return Err(Error::api(format!("update the status of OperatorCondition {namespace}/{name}"), err)),
    }
    Ok(())
}

/// Server-side applies a description's configuration: under the name of the one found for it
/// (possibly generated by an older OLM), else under its fixed name.
async fn apply_webhook(ctx: &ControllerContext<CsvState>, installer: &Installer, existing: Option<&str>, config: &WebhookConfig) -> Result<()> {
    match config {
        WebhookConfig::Validating(object) => apply_named(ctx, installer, existing, object.as_ref()).await,
        WebhookConfig::Mutating(object) => apply_named(ctx, installer, existing, object.as_ref()).await,
    }
}

async fn apply_named<K>(ctx: &ControllerContext<CsvState>, installer: &Installer, existing: Option<&str>, object: &K) -> Result<()>
where
    K: Applied + kube::Resource<Scope = ClusterResourceScope>,
{
    let mut object = object.clone();
    let name = existing.map(str::to_owned).or_else(|| object.meta().name.clone()).unwrap_or_default();
    object.meta_mut().name = Some(name.clone());
    object.meta_mut().generate_name = None;
    let apply = PatchParams::apply(&ctx.field_manager()).force();
    apply_cluster_scoped(installer, &object, &apply).await
}

async fn delete_webhook(ctx: &ControllerContext<CsvState>, kind: &str, config_name: &str) -> Result<()> {
    let deleted = if kind == "MutatingWebhookConfiguration" {
        Api::<MutatingWebhookConfiguration>::all(ctx.client.clone())
            .delete(config_name, &DeleteParams::default())
            .await
            .map(|_| ())
    } else {
        Api::<ValidatingWebhookConfiguration>::all(ctx.client.clone())
            .delete(config_name, &DeleteParams::default())
            .await
            .map(|_| ())
    };
    match deleted {
        Ok(()) => tracing::info!(%kind, name = %config_name, "deleted webhook configuration no longer declared"),
        Err(err) if is_not_found(&err) => {}
        Err(err) => return Err(Error::api(format!("delete {kind} {config_name}"), err)),
    }
    Ok(())
}

async fn apply_crd_conversion(
    ctx: &ControllerContext<CsvState>,
    installer: &Installer,
    crd: &str,
    conversion: &CustomResourceConversion,
) -> Result<()> {
    // A merge patch of `spec.conversion` only: the rest of the CRD belongs to
    // whoever installed it, and `url: null` keeps exactly one client target.
    let mut wanted = serde_json::to_value(conversion).map_err(|source| Error::Serialize {
        what: format!("conversion of CustomResourceDefinition {crd}"),
        source,
    })?;
    if let Some(client) = wanted.pointer_mut("/webhook/clientConfig").and_then(|c| c.as_object_mut()) {
        client.insert("url".to_owned(), serde_json::Value::Null);
    }
    let patch = json!({ "spec": { "conversion": wanted } });
    let params = PatchParams {
        field_manager: Some(ctx.field_manager()),
        ..PatchParams::default()
    };
    Api::<CustomResourceDefinition>::all(installer.client()?)
        .patch(crd, &params, &Patch::Merge(&patch))
        .await
        .map_err(|err| Error::api(format!("configure the conversion webhook of CustomResourceDefinition {crd}{}", installer.as_whom()), err))?;
    Ok(())
}

async fn reset_crd_conversion(ctx: &ControllerContext<CsvState>, crd: &str) -> Result<()> {
    let patch = json!({ "spec": { "conversion": { "strategy": "None", "webhook": null } } });
    let params = PatchParams {
        field_manager: Some(ctx.field_manager()),
        ..PatchParams::default()
    };
    match Api::<CustomResourceDefinition>::all(ctx.client.clone())
        .patch(crd, &params, &Patch::Merge(&patch))
        .await
    {
        Ok(_) => tracing::info!(%crd, "conversion webhook removed from the CRD"),
        Err(err) if is_not_found(&err) => {}
        Err(err) => return Err(Error::api(format!("remove the conversion webhook of CustomResourceDefinition {crd}"), err)),
    }
    Ok(())
}

/// One copy action of [`write_copies`].
async fn write_copy(ctx: &ControllerContext<CsvState>, action: &CsvAction, full_original: Option<&ClusterServiceVersion>, name: &str) -> Result<()> {
    match action {
        CsvAction::ApplyCopy(copy) => match full_original {
            Some(full) => apply_copy(ctx, &super::decide::with_full_content(&copy.build(), full)).await,
            // Already reported: the original could not be read.
            None => Ok(()),
        },
        CsvAction::SetCopyStatus { namespace: target, status } => set_copy_status(ctx, target, name, status).await,
        CsvAction::DeleteCopy { namespace: target } => delete_copy(ctx, target, name).await,
        _ => Ok(()),
    }
}

async fn apply_copy(ctx: &ControllerContext<CsvState>, copy: &ClusterServiceVersion) -> Result<()> {
    let target = copy.namespace().unwrap_or_default();
    let name = copy.name_any();
    let api: Api<ClusterServiceVersion> = Api::namespaced(ctx.client.clone(), &target);
    let mut object = copy.clone();
    let status = object.status.take();
    // A new copy is created, so that a CSV of the same name that is no copy (another group's
    // install there, not yet in the cache) is never written over; a known copy is applied with
    // its uid, which the API server refuses to change (422) should the name have changed hands.
    // Either refusal leaves the namespace to what is there: the next pass sees it.
    let written = if object.metadata.uid.is_none() {
        let params = kube::api::PostParams { field_manager: Some(ctx.field_manager()), ..Default::default() };
        api.create(&params, &object).await
    } else {
        api.patch(&name, &PatchParams::apply(&ctx.field_manager()).force(), &Patch::Apply(&object)).await
    };
    let applied = match written {
        Ok(applied) => applied,
        Err(err) if matches!(api_status_code(&err), Some(409 | 422)) => {
            tracing::info!(target_namespace = %target, %err, "a CSV of the same name that is not this copy is there: not copied over it");
            return Ok(());
        }
        Err(err) => return Err(Error::api(format!("copy ClusterServiceVersion into {target}"), err)),
    };
    if let Some(status) = status {
        ctx.status.apply(&applied, &status).await?;
    }
    Ok(())
}

/// Write the status of the copy `target/name`, which the decision found different (times
/// included: a hand edit of a time is reverted too).
async fn set_copy_status(
    ctx: &ControllerContext<CsvState>,
    target: &str,
    name: &str,
    status: &olm_api::v1alpha1::cluster_service_version::ClusterServiceVersionStatus,
) -> Result<()> {
    let copy = ClusterServiceVersion {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(target.to_owned()),
            ..Default::default()
        },
        spec: Default::default(),
        status: None,
    };
    ctx.status.replace(&copy, status).await.map(|_| ())
}

/// Delete the copy `target/name` (gone already is no error).
async fn delete_copy(ctx: &ControllerContext<CsvState>, target: &str, name: &str) -> Result<()> {
    let api: Api<ClusterServiceVersion> = Api::namespaced(ctx.client.clone(), target);
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => {
            tracing::info!(target_namespace = %target, "deleted copied CSV");
            Ok(())
        }
        Err(err) if is_not_found(&err) => Ok(()),
        Err(err) => Err(Error::api(format!("delete copied ClusterServiceVersion {target}/{name}"), err)),
    }
}

/// What a server-side apply writes and reads back: a kind with static type information.
trait Applied: kube::Resource<DynamicType = ()> + Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned {}

impl<K> Applied for K where K: kube::Resource<DynamicType = ()> + Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned {}

/// Whether `object` is one the caches of `olm.managed` objects hold.
fn is_managed<K: kube::Resource>(object: &K) -> bool {
    object.meta().labels.as_ref().and_then(|labels| labels.get(keys::MANAGED_LABEL)).is_some_and(|v| v == "true")
}

/// OLM writing as itself, for what grants the operator nothing.
fn olm(ctx: &ControllerContext<CsvState>) -> Installer {
    Installer::olm(ctx)
}

/// Server-side apply the namespaced `object` in `namespace` as `writer`.
async fn apply_namespaced<K>(writer: &Installer, namespace: &str, object: &K, params: &PatchParams) -> Result<()>
where
    K: Applied + kube::Resource<Scope = NamespaceResourceScope>,
{
    let api: Api<K> = Api::namespaced(writer.client()?, namespace);
    server_side_apply(&api, Some(namespace), &writer.as_whom(), object, params).await.map(drop)
}

/// [`apply_namespaced`] of an object `cache` holds (when given), telling it what was written:
/// a pass woken before the watch brings the write then does not write it again.
async fn apply_namespaced_into<K>(writer: &Installer, namespace: &str, object: &K, params: &PatchParams, cache: Option<&Cache<K>>) -> Result<()>
where
    K: Applied + kube::Resource<Scope = NamespaceResourceScope> + Send + Sync + 'static,
{
    let api: Api<K> = Api::namespaced(writer.client()?, namespace);
    let answer = server_side_apply(&api, Some(namespace), &writer.as_whom(), object, params).await?;
    if let Some(cache) = cache {
        cache.wrote(answer);
    }
    Ok(())
}

/// Server-side apply the cluster-scoped `object` as `writer`.
async fn apply_cluster_scoped<K>(writer: &Installer, object: &K, params: &PatchParams) -> Result<()>
where
    K: Applied + kube::Resource<Scope = ClusterResourceScope>,
{
    server_side_apply(&Api::<K>::all(writer.client()?), None, &writer.as_whom(), object, params).await.map(drop)
}

/// Server-side apply `object` (under its own name) through `api`, returning the object as the
/// server stored it; an error names the kind, the namespace (`None` for cluster-scoped kinds),
/// the name and who wrote (`as_whom`).
async fn server_side_apply<K: Applied>(api: &Api<K>, namespace: Option<&str>, as_whom: &str, object: &K, params: &PatchParams) -> Result<K> {
    let name = object.name_any();
    api.patch(&name, params, &Patch::Apply(object)).await.map_err(|err| {
        let at = namespace.map(|ns| format!("{ns}/")).unwrap_or_default();
        Error::api(format!("apply {} {at}{name}{as_whom}", K::kind(&())), err)
    })
}

/// Delete the ClusterRoles, ClusterRoleBindings, APIServices and webhook configurations
/// labelled with `csv` as owner.
async fn delete_owned_cluster_objects(client: &kube::Client, csv: &ClusterServiceVersion) -> Result<()> {
    let params = kube::api::ListParams::default().labels(&owner_selector(csv));
    let owner = format!("ClusterServiceVersion {}/{}", csv.namespace().unwrap_or_default(), csv.name_any());
    delete_labelled(Api::<ClusterRole>::all(client.clone()), &params, &format!("ClusterRoles of {owner}")).await?;
    delete_labelled(Api::<ClusterRoleBinding>::all(client.clone()), &params, &format!("ClusterRoleBindings of {owner}")).await?;
    if !csv.spec.owned_api_services().is_empty() {
        delete_labelled(Api::<APIService>::all(client.clone()), &params, &format!("APIServices of {owner}")).await?;
    }
    if !certs::cert_deployments(csv).is_empty() {
        // The auth-reader bindings live in kube-system, out of reach of ownerReferences.
        let api = Api::<RoleBinding>::namespaced(client.clone(), "kube-system");
        delete_labelled(api, &params, &format!("kube-system RoleBindings of {owner}")).await?;
    }
    if !csv.spec.webhooks().is_empty() {
        let validating = Api::<ValidatingWebhookConfiguration>::all(client.clone());
        delete_labelled(validating, &params, &format!("ValidatingWebhookConfigurations of {owner}")).await?;
        let mutating = Api::<MutatingWebhookConfiguration>::all(client.clone());
        delete_labelled(mutating, &params, &format!("MutatingWebhookConfigurations of {owner}")).await?;
    }
    Ok(())
}

/// Delete what `params` selects through `api`; `what` names it in the error.
async fn delete_labelled<K: Applied>(api: Api<K>, params: &kube::api::ListParams, what: &str) -> Result<()> {
    api.delete_collection(&DeleteParams::default(), params)
        .await
        .map_err(|err| Error::api(format!("delete the {what}"), err))?;
    Ok(())
}

/// Lifted ClusterRoles and ClusterRoleBindings cannot carry an ownerReference to a namespaced
/// CSV: when a (non-copied) CSV disappears from the cache they are deleted by its owner labels.
pub(super) fn delete_cluster_rbac_of_deleted_csvs(
    ctx: Arc<ControllerContext<CsvState>>,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let events = ctx.state.csvs.subscribe();
    async move {
        let mut events = std::pin::pin!(events);
        while let Some(csv) = events.next().await {
            if csv.is_copied()
                || ctx.state.csvs.store().get(&ObjectRef::from_obj(csv.as_ref())).is_some()
                || !ctx.leadership.is_leader()
            {
                continue;
            }
            let params = kube::api::ListParams::default().labels(&owner_selector(&csv));
            let roles: Api<ClusterRole> = Api::all(ctx.client.clone());
            let bindings: Api<ClusterRoleBinding> = Api::all(ctx.client.clone());
            let deleted_roles = roles.delete_collection(&DeleteParams::default(), &params).await;
            let deleted_bindings = bindings.delete_collection(&DeleteParams::default(), &params).await;
            if let Err(err) = deleted_roles.map(|_| ()).and(deleted_bindings.map(|_| ())) {
                tracing::warn!(%err, csv = %csv.name_any(), "cannot delete the cluster RBAC of a deleted CSV");
            }
        }
    }
}
