//! Carrying out a migration plan, in an order that a rerun can finish from any point: OLM v0
//! is told to leave the Subscription and its CSV alone first; the extension adopts their
//! objects; only then do OLM v0's objects go, the Subscription last, so that a rerun reads it
//! and plans again. Every step is done-if-already-done.

use std::time::Instant;

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use olm_api::keys::{ADOPT_FROM_ANNOTATION, MIGRATED_FROM_ANNOTATION, MIGRATING_TO_ANNOTATION};
use olm_api::olmv1::cluster_catalog::ClusterCatalog;
use olm_api::olmv1::cluster_extension::ClusterExtension;
use olm_api::v1::operator_group::OperatorGroup;
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use olm_api::v1alpha1::install_plan::InstallPlan;
use olm_api::v1alpha1::subscription::Subscription;
use olm_runtime::error::is_not_found;
use serde_json::json;

use super::super::{POLL, WAIT, api_error, progress};
use super::plan::Plan;

/// The field manager of what `olm migrate` writes.
const FIELD_MANAGER: &str = "olm-migrate";

/// Migrate `sub` as `plan` says.
pub async fn migrate(client: &kube::Client, sub: &Subscription, plan: &Plan) -> anyhow::Result<()> {
    let namespace = sub.namespace().unwrap_or_default();
    let name = plan.extension.name_any();
    let csv_name = plan.deletions.csv.as_str();
    let adopt_from = format!("{namespace}/{csv_name}");
    let subs: Api<Subscription> = Api::namespaced(client.clone(), &namespace);
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &namespace);

    // 1. OLM v0 leaves them alone from now on.
    let pause = json!({"metadata": {"annotations": {MIGRATING_TO_ANNOTATION: name}}});
    subs.patch(&sub.name_any(), &PatchParams::default(), &Patch::Merge(&pause))
        .await
        .map_err(|err| anyhow::anyhow!("cannot annotate Subscription {namespace}/{}: {}", sub.name_any(), api_error(&err)))?;
    match csvs.patch(csv_name, &PatchParams::default(), &Patch::Merge(&pause)).await {
        Ok(_) => {}
        Err(err) if is_not_found(&err) => {}
        Err(err) => anyhow::bail!("cannot annotate ClusterServiceVersion {adopt_from}: {}", api_error(&err)),
    }
    progress(&format!("OLM v0 leaves Subscription {namespace}/{} and ClusterServiceVersion {adopt_from} alone ({MIGRATING_TO_ANNOTATION}={name})", sub.name_any()));

    // 2. What the extension needs.
    if let Some(catalog) = &plan.new_catalog {
        apply(&Api::<ClusterCatalog>::all(client.clone()), &catalog.name_any(), catalog, "ClusterCatalog").await?;
        wait_serving(client, &catalog.name_any()).await?;
    }
    if let Some(account) = &plan.new_service_account {
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &namespace);
        let wanted: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": account.name, "namespace": namespace}}))?;
        apply(&accounts, &account.name, &wanted, "ServiceAccount").await?;
        let binding_name = format!("olm-migrate-{namespace}-{}", account.name);
        let binding: ClusterRoleBinding = serde_json::from_value(json!({
            "metadata": {"name": binding_name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": account.cluster_role},
            "subjects": [{"kind": "ServiceAccount", "name": account.name, "namespace": namespace}],
        }))?;
        apply(&Api::<ClusterRoleBinding>::all(client.clone()), &binding_name, &binding, "ClusterRoleBinding").await?;
    }

    // 3. The extension adopts what OLM v0 installed.
    let extensions: Api<ClusterExtension> = Api::all(client.clone());
    apply(&extensions, &name, &plan.extension, "ClusterExtension").await?;
    let version = plan.extension.spec.source.catalog.as_ref().and_then(|c| c.version.clone()).unwrap_or_default();
    wait_installed(&extensions, &name, &version).await?;

    // 4. OLM v0's records of the install go; the objects are the extension's now.
    let plans: Api<InstallPlan> = Api::namespaced(client.clone(), &namespace);
    for plan_name in &plan.deletions.install_plans {
        delete(&plans, plan_name, "InstallPlan").await?;
    }
    delete(&csvs, csv_name, "ClusterServiceVersion").await?;
    wait_gone(&csvs, csv_name, "ClusterServiceVersion").await?;
    if let Some(group) = &plan.deletions.operator_group {
        delete(&Api::<OperatorGroup>::namespaced(client.clone(), &namespace), group, "OperatorGroup").await?;
    }

    // 5. The version as the Subscription had it: the channel followed, or pinned.
    let final_version = json!({"spec": {"source": {"catalog": {"version": plan.final_version}}}});
    extensions
        .patch(&name, &PatchParams::default(), &Patch::Merge(&final_version))
        .await
        .map_err(|err| anyhow::anyhow!("cannot set the version of ClusterExtension {name}: {}", api_error(&err)))?;

    // 6. Recorded, then the Subscription, last: until it goes, a rerun plans from it; after
    // it, a rerun finds the extension by its migrated-from annotation and does what `finish`
    // does (OLM v0's Operator object can only go once no Subscription carries its label).
    let extension = extensions.get(&name).await.map_err(|err| anyhow::anyhow!("cannot read ClusterExtension {name}: {}", api_error(&err)))?;
    record_event(client, &extension, &format!("{namespace}/{}", sub.name_any()), &adopt_from, &version).await;
    delete(&subs, &sub.name_any(), "Subscription").await?;
    finish(client, &extension).await
}

/// What follows the Subscription's deletion, done-if-already-done: the v0 Operator object of
/// the package goes, and the migration is recorded in an Event once.
pub async fn finish(client: &kube::Client, extension: &ClusterExtension) -> anyhow::Result<()> {
    let package = extension.spec.source.catalog.as_ref().map(|c| c.package_name.clone()).unwrap_or_default();
    let operator = olm_api::keys::operator_name(&package, &extension.spec.namespace);
    if let Some(note) = olm_admin::uninstall::remove_operator(client, &operator, &super::super::waiting()).await? {
        eprintln!("note: {note}");
    }
    let annotation = |key: &str| extension.annotations().get(key).cloned().unwrap_or_default();
    let (subscription, adopt_from) = (annotation(MIGRATED_FROM_ANNOTATION), annotation(ADOPT_FROM_ANNOTATION));
    let version = extension.status.as_ref().and_then(|s| s.install.as_ref()).map(|i| i.bundle.version.clone()).unwrap_or_default();
    record_event(client, extension, &subscription, &adopt_from, &version).await;
    Ok(())
}

/// Create or update what the plan made (fresh objects: no server fields to strip).
async fn apply<K>(api: &Api<K>, name: &str, object: &K, what: &str) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(name, &PatchParams::apply(FIELD_MANAGER), &Patch::Apply(object))
        .await
        .map_err(|err| anyhow::anyhow!("cannot create {what} {name}: {}", api_error(&err)))?;
    progress(&format!("{what} {name} is there"));
    Ok(())
}

async fn delete<K>(api: &Api<K>, name: &str, what: &str) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => {
            progress(&format!("deleted {what} {name}"));
            Ok(())
        }
        Err(err) if is_not_found(&err) => Ok(()),
        Err(err) => anyhow::bail!("cannot delete {what} {name}: {}", api_error(&err)),
    }
}

async fn wait_gone<K>(api: &Api<K>, name: &str, what: &str) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let started = Instant::now();
    while started.elapsed() < WAIT {
        match api.get_opt(name).await {
            Ok(None) => return Ok(()),
            Ok(Some(_)) => tokio::time::sleep(POLL).await,
            Err(err) => anyhow::bail!("cannot read {what} {name}: {}", api_error(&err)),
        }
    }
    anyhow::bail!("{what} {name} is still there after {}s (a finalizer holds it: see its metadata.finalizers); run olm migrate again once it is gone", WAIT.as_secs())
}

async fn wait_serving(client: &kube::Client, name: &str) -> anyhow::Result<()> {
    let api: Api<ClusterCatalog> = Api::all(client.clone());
    let started = Instant::now();
    let mut last = String::new();
    while started.elapsed() < WAIT {
        let catalog = api.get(name).await.map_err(|err| anyhow::anyhow!("cannot read ClusterCatalog {name}: {}", api_error(&err)))?;
        let serving = catalog.status.as_ref().and_then(|s| s.conditions.iter().find(|c| c.type_ == "Serving"));
        if serving.is_some_and(|c| c.status == "True") {
            return Ok(());
        }
        last = serving.map(|c| c.message.clone()).unwrap_or_default();
        tokio::time::sleep(POLL).await;
    }
    anyhow::bail!("ClusterCatalog {name} is not serving after {}s: {last}; nothing of OLM v0 was deleted, run olm migrate again once it serves", WAIT.as_secs())
}

async fn wait_installed(api: &Api<ClusterExtension>, name: &str, version: &str) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut last = String::new();
    while started.elapsed() < WAIT {
        let extension = api.get(name).await.map_err(|err| anyhow::anyhow!("cannot read ClusterExtension {name}: {}", api_error(&err)))?;
        let status = extension.status.clone().unwrap_or_default();
        let installed = status.install.as_ref().is_some_and(|i| i.bundle.version == version);
        let condition = |t: &str| status.conditions.iter().find(|c| c.type_ == t).cloned();
        if installed && condition("Installed").is_some_and(|c| c.status == "True") && condition("Progressing").is_some_and(|c| c.reason == "Succeeded") {
            progress(&format!("ClusterExtension {name} has adopted version {version}"));
            return Ok(());
        }
        last = condition("Progressing").map(|c| c.message).unwrap_or_default();
        tokio::time::sleep(POLL).await;
    }
    anyhow::bail!(
        "ClusterExtension {name} did not adopt version {version} within {}s: {last}; nothing of OLM v0 was deleted — fix what it says and run olm migrate again",
        WAIT.as_secs()
    )
}

/// An Event on the ClusterExtension naming what it came from, unless one already does (best
/// effort: the migration is done whether or not it is recorded). events.k8s.io, as OLM's
/// controllers write theirs; a cluster-scoped object's Events live in `default`.
async fn record_event(client: &kube::Client, extension: &ClusterExtension, subscription: &str, adopt_from: &str, version: &str) {
    let name = extension.name_any();
    let recorded: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), "default");
    let ours = ListParams::default().fields(&format!("involvedObject.name={name},reason=MigratedFromOLMv0"));
    if recorded.list(&ours).await.is_ok_and(|l| l.items.iter().any(|e| e.involved_object.uid == extension.uid())) {
        return;
    }
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), "default");
    let event: Result<k8s_openapi::api::events::v1::Event, _> = serde_json::from_value(json!({
        "metadata": {"name": format!("{name}.migrated-{:x}", std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos()), "namespace": "default"},
        "eventTime": k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(k8s_openapi::jiff::Timestamp::now()),
        "regarding": {"apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension", "name": name, "uid": extension.uid()},
        "reason": "MigratedFromOLMv0",
        "action": "Migrate",
        "note": format!("adopted {version} from Subscription {subscription} and ClusterServiceVersion {adopt_from} in place"),
        "type": "Normal",
        "reportingController": "olm.operatorframework.io/olm-migrate",
        "reportingInstance": "olm-migrate",
    }));
    match event {
        Ok(event) => {
            if let Err(err) = events.create(&PostParams::default(), &event).await {
                eprintln!("note: the migration is done, but its Event was not recorded: {}", api_error(&err));
            }
        }
        Err(err) => eprintln!("note: the migration is done, but its Event did not form: {err}"),
    }
}
