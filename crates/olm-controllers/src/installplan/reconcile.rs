//! Observe → decide → act for InstallPlans: move through approval, then apply the steps with
//! server-side apply (CRDs first, with the stored-versions safety check), and record each
//! step's status.
//!
//! Longer than ~600 lines: the executor of a plan's rounds (apply, read back, WaitingForApi, scoped refusals) reads best in one place.

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ApiResource, DynamicObject, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::{Api, Resource, ResourceExt};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::runtime::reflector::ObjectRef;
use olm_api::v1::operator_group::OperatorGroup;
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use olm_api::v1alpha1::install_plan::{InstallPlan, InstallPlanPhase, InstallPlanStatus, Step, StepStatus};
use serde_json::{Value, json};
use tracing::instrument;

use super::crd_upgrade;
use super::state::InstallPlanState;
use super::decide::{self, Next, Pass, StepError};
use super::rounds::{self, Applied, Progress};
use super::scope::{self, RefusedStep};
use crate::plan_content::keep_references;
use crate::plan_write_failures::WriteFailure;
use crate::plan_steps::resource_of;
use olm_runtime::controller::action_for;
use olm_runtime::error::{api_status_code, is_not_found};
use olm_runtime::{ControllerContext, Result, error_policy, guarded};
use crate::scoped_client::{InstallIdentity, ServiceAccountRef, install_identity};

/// Who applies a plan's steps (CRDs excepted: OLM always applies those itself, as upstream).
struct Installer {
    /// The client the non-CRD steps are applied with.
    client: kube::Client,
    /// The group's ServiceAccount the client acts as, if any.
    service_account: Option<ServiceAccountRef>,
}

fn describe(step: &Step, namespace: &str) -> String {
    let r = &step.resource;
    match resource_of(&r.group, &r.kind) {
        Some((_, true)) => format!("{} {namespace}/{}", r.kind, r.name),
        _ => format!("{} {}", r.kind, r.name),
    }
}

fn api_error_message(err: &kube::Error) -> String {
    match err {
        kube::Error::Api(status) => format!("{} ({})", status.message, status.reason),
        other => other.to_string(),
    }
}

/// What a failed request of a step means for the plan. A 403 names who was refused and what to
/// grant; it is retried (see `decide::after_pass`).
fn step_error(step: &Step, namespace: &str, request_verb: &str, installer: Option<&Installer>, err: &kube::Error) -> StepError {
    let code = api_status_code(err);
    if code == Some(403)
        && let kube::Error::Api(status) = err
    {
        let r = &step.resource;
        let namespaced = resource_of(&r.group, &r.kind).is_some_and(|(_, namespaced)| namespaced);
        let plural = resource_of(&r.group, &r.kind).map_or("", |(plural, _)| plural);
        let refused = RefusedStep {
            kind: &r.kind,
            name: &r.name,
            group: &r.group,
            plural,
            namespace: namespaced.then_some(namespace),
            request_verb,
        };
        let message = match installer.and_then(|i| i.service_account.as_ref()) {
            Some(sa) => scope::forbidden_for_service_account(sa, &refused, &status.message),
            None => scope::forbidden_for_olm(&refused, &status.message),
        };
        return StepError {
            message,
            retryable: true,
            forbidden: true,
        };
    }
    if code == Some(404)
        && let Some(message) = missing_api(step, err)
    {
        return StepError::new(format!("cannot apply {}: {message}", describe(step, namespace)), true);
    }
    let retryable = !matches!(code, Some(400 | 405 | 413 | 415 | 422));
    StepError::new(format!("cannot apply {}: {}", describe(step, namespace), api_error_message(err)), retryable)
}

/// A 404 on applying a step whose API the cluster does not serve (the API server answers with
/// a bare "404 page not found"), said in words: which API, and what would provide it. A 404
/// about a missing namespace is left as the API server says it.
fn missing_api(step: &Step, err: &kube::Error) -> Option<String> {
    if let kube::Error::Api(status) = err
        && status.message.contains("namespaces")
    {
        return None;
    }
    let r = &step.resource;
    let api = if r.group.is_empty() { r.version.clone() } else { format!("{}/{}", r.group, r.version) };
    let provider = match resource_of(&r.group, &r.kind) {
        Some((plural, _)) if !r.group.is_empty() => format!("its CustomResourceDefinition {plural}.{}", r.group),
        _ => format!("the API group {}", if r.group.is_empty() { "core" } else { r.group.as_str() }),
    };
    Some(format!(
        "this cluster does not serve {api} {kind}: install what provides it ({provider}, for example the operator that owns that API) and the plan is retried, or remove the {kind} from the bundle",
        kind = r.kind
    ))
}

/// Existing custom resources must stay valid under the new CRD's schemas (every version both
/// CRDs serve whose schema changes). Skipped for CRDs converted by a webhook, as upstream does.
async fn existing_objects_valid(client: &kube::Client, existing: &Value, desired: &Value) -> Result<(), StepError> {
    if desired.pointer("/spec/conversion/strategy").and_then(Value::as_str) == Some("Webhook") {
        return Ok(());
    }
    let name = desired.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let kind = desired.pointer("/spec/names/kind").and_then(Value::as_str).unwrap_or_default();
    let refused = olm_install::crd_check::refused_objects(client, existing, desired, 1).await.map_err(|failed| {
        StepError::new(
            format!(
                "cannot list existing {} objects to check them against the new CustomResourceDefinition {name}: {}",
                failed.kind,
                api_error_message(&failed.error)
            ),
            true,
        )
    })?;
    match refused.into_iter().next() {
        None => Ok(()),
        Some(object) => Err(StepError::new(
            format!(
                "cannot update CustomResourceDefinition {name}: the existing {kind} {} is not valid under the new schema of {}: {}",
                object.object,
                object.version,
                object.problems.join("; ")
            ),
            false,
        )),
    }
}

fn established(object: &Value) -> bool {
    object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| c.get("type") == Some(&json!("Established")) && c.get("status") == Some(&json!("True")))
}

/// `name` as the API server's watch cache has it (`resourceVersion=0`: no read from storage,
/// which on a busy control plane waits behind the writes in flight), or None.
async fn get_cached_opt<K>(api: &Api<K>, name: &str) -> std::result::Result<Option<K>, kube::Error>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.get_with(name, &kube::api::GetParams::any()).await {
        Ok(found) => Ok(Some(found)),
        Err(err) if is_not_found(&err) => Ok(None),
        Err(err) => Err(err),
    }
}

/// Read a CRD step's CRD and check that applying the step is safe (stored versions kept,
/// existing objects still valid): whether it exists.
async fn check_crd(ctx: &ControllerContext<InstallPlanState>, step: &Step) -> Result<bool, StepError> {
    let r = &step.resource;
    let manifest: Value = serde_json::from_str(r.manifest.as_deref().unwrap_or("{}"))
        .map_err(|err| StepError::new(format!("the manifest of step {} is not valid JSON: {err}", describe(step, "")), false))?;
    // The manifest this process last wrote to the CRD, whose spec nobody changed since: nothing
    // to check (at a thousand installs of one operator, each read was a 250 KiB object).
    let digest = super::shared_crd::without_shares(&manifest).0;
    if ctx.state.crd_writes.spec_current(&r.name, digest, super::shared_crd::cached_generation(ctx, &r.name)) {
        return Ok(true);
    }
    let api: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
    // From the API server's watch cache (no storage read): most installs bring new CRDs, and
    // the write of a shared CRD reads it live anyway, under its lock (`shared_crd`). A CRD
    // created or changed elsewhere a moment ago may be missed here; the API server itself
    // still refuses an update that drops a stored version.
    let existing = get_cached_opt(&api, &r.name).await.map_err(|err| step_error(step, "", "get", None, &err))?;
    let Some(existing) = existing else { return Ok(false) };
    let mut existing = serde_json::to_value(&existing).unwrap_or(Value::Null);
    if let Err(message) = olm_install::crd_rules::stored_versions_kept(&existing, &manifest) {
        let refused = |more: String| StepError::new(format!("cannot update CustomResourceDefinition {}: {message}{more}", r.name), false);
        let Some(target) = crd_upgrade::migration_target(&existing, &manifest) else {
            return Err(refused(String::new()));
        };
        let dropped = crd_upgrade::dropped_stored_versions(&existing, &manifest);
        let rewritten = crd_upgrade::migrate(&ctx.client, &existing, &dropped, &target).await.map_err(|err| {
            let failed = format!(" (migrating them to {target} failed: {}", err.message);
            if err.retryable {
                StepError::new(format!("cannot update CustomResourceDefinition {} yet: {message}{failed}; retrying)", r.name), true)
            } else {
                refused(format!("{failed})"))
            }
        })?;
        tracing::info!(crd = %r.name, dropped = ?dropped, %target, rewritten, "stored objects migrated before a CRD upgrade");
        let migrated = api.get(&r.name).await.map_err(|err| step_error(step, "", "get", None, &err))?;
        existing = serde_json::to_value(&migrated).unwrap_or(Value::Null);
    }
    existing_objects_valid(&ctx.client, &existing, &manifest).await?;
    if let Some(reset) = crd_upgrade::conversion_reset(&existing, &manifest) {
        api.patch(&r.name, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&reset))
            .await
            .map_err(|err| step_error(step, "", "patch", None, &err))?;
    }
    Ok(true)
}

/// Apply one step: read what exists (for `Present` vs `Created`; for a CRD not checked yet,
/// `check_crd`), then server-side apply the manifest. `crd_existed` is what `check_crd` found
/// earlier in the pass.
async fn apply_step(
    ctx: &ControllerContext<InstallPlanState>,
    step: &Step,
    namespace: &str,
    installer: &Installer,
    owner_uid: Option<&str>,
    crd_existed: Option<bool>,
    plan: Option<&str>,
) -> Result<Applied, StepError> {
    let r = &step.resource;
    let Some((plural, namespaced)) = resource_of(&r.group, &r.kind) else {
        return Err(unsupported(ctx, step).await);
    };
    let mut manifest: Value = serde_json::from_str(r.manifest.as_deref().unwrap_or("{}")).map_err(|err| {
        StepError::new(format!("the manifest of step {} is not valid JSON: {err}", describe(step, namespace)), false)
    })?;
    let api_resource = ApiResource {
        group: r.group.clone(),
        version: r.version.clone(),
        api_version: if r.group.is_empty() {
            r.version.clone()
        } else {
            format!("{}/{}", r.group, r.version)
        },
        kind: r.kind.clone(),
        plural: plural.to_owned(),
    };
    // CRDs are cluster infrastructure shared by every tenant: OLM applies them itself
    // (upstream does too); everything else is written with the installer's permissions.
    let is_crd = r.kind == "CustomResourceDefinition";
    let client = if is_crd { ctx.client.clone() } else { installer.client.clone() };
    let step_installer = (!is_crd).then_some(installer);
    let api: Api<DynamicObject> = if namespaced {
        Api::namespaced_with(client, namespace, &api_resource)
    } else {
        Api::all_with(client, &api_resource)
    };
    // A manifest whose apiVersion names no group where the step names one (a hand-written CRD
    // step: `apiVersion: v1`) is applied as the step says; the API server refuses it otherwise.
    // A manifest without apiVersion or kind (a client serialized a typed object without them, as
    // upstream's e2e suite does) takes them from the step, as upstream does.
    let written_api_version = manifest.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    if written_api_version.is_empty() || (!r.group.is_empty() && !written_api_version.contains('/')) {
        manifest["apiVersion"] = json!(api_resource.api_version);
    }
    if manifest.get("kind").and_then(Value::as_str).is_none_or(str::is_empty) {
        manifest["kind"] = json!(r.kind);
    }
    if namespaced {
        fill_csv_owner_uids(ctx, step, namespace, &mut manifest).await?;
        manifest["metadata"]["namespace"] = json!(namespace);
        if r.kind != "ClusterServiceVersion"
            && r.kind != "Subscription"
            && let Some(uid) = owner_uid
        {
            manifest["metadata"]["ownerReferences"] = json!([{
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
                "name": step.resolving, "uid": uid, "controller": false, "blockOwnerDeletion": false,
            }]);
        }
    }
    if r.kind == "ClusterServiceVersion" {
        stamp_csv(&mut manifest, &ctx.state.groups.list_in(namespace));
    }
    // A Subscription a plan creates (a dependency's) names the plan, which it then shows as
    // its InstallPlan, as upstream.
    if r.kind == "Subscription"
        && let Some(plan) = plan
        && let Some(metadata) = manifest.get_mut("metadata").and_then(Value::as_object_mut)
        && let Some(annotations) = metadata.entry("annotations").or_insert_with(|| json!({})).as_object_mut()
    {
        annotations.insert(olm_api::keys::GENERATED_BY_ANNOTATION.to_owned(), json!(plan));
    }
    let fail = |verb: &str, err: kube::Error| {
        if is_not_found(&err) {
            tracing::info!(step = %describe(step, namespace), "API not served yet");
        }
        step_error(step, namespace, verb, step_installer, &err)
    };
    let (applied, existed) = if is_crd {
        let existed = match crd_existed {
            Some(existed) => existed,
            None => check_crd(ctx, step).await?,
        };
        let applied = super::shared_crd::apply(ctx, &api, &r.name, namespace, &step.resolving, manifest)
            .await
            .map_err(|(verb, err)| fail(verb, err))?;
        (applied, existed)
    } else {
        // Copies are OLM's own objects: OLM removes one in the way, whoever installs.
        let csvs: Option<Api<ClusterServiceVersion>> =
            (r.kind == "ClusterServiceVersion").then(|| Api::namespaced(ctx.client.clone(), namespace));
        if let Some(csvs) = &csvs {
            super::copy_in_the_way::remove_cached(csvs, ctx.state.csvs.get(Some(namespace), &r.name).as_deref()).await?;
        }
        // Created or Present from the apply's own answer (201 or 200): no read first.
        let params = PatchParams::apply(&ctx.field_manager()).force();
        match olm_runtime::apply::apply(&api, &r.name, &params, &manifest).await {
            Ok(applied) => {
                if let Some(csvs) = &csvs
                    && let Ok(csv) = serde_json::to_value(&applied.object).and_then(serde_json::from_value::<ClusterServiceVersion>)
                {
                    super::copy_in_the_way::undo_if_copy(csvs, &csv).await?;
                }
                (Some(applied.object), !applied.created)
            }
            // An installer that may not apply the kind: create it, as upstream's ensurers do, so
            // that a refusal names the verb to grant (create); one that exists stays refused.
            Err(err) if api_status_code(&err) == Some(403) => {
                let object: DynamicObject = serde_json::from_value(manifest.clone())
                    .map_err(|err| StepError::new(format!("the manifest of step {} is not an object: {err}", describe(step, namespace)), false))?;
                let params = kube::api::PostParams { field_manager: Some(ctx.field_manager()), ..Default::default() };
                return match api.create(&params, &object).await {
                    Ok(created) => {
                        let csv_uid = (r.kind == "ClusterServiceVersion").then(|| created.uid()).flatten();
                        Ok(Applied { status: StepStatus::Created, csv_uid, parked: false })
                    }
                    Err(conflict) if api_status_code(&conflict) == Some(409) => Err(fail("patch", err)),
                    Err(refused) => Err(fail("create", refused)),
                };
            }
            Err(err) => {
                let Some(fields) = super::pruned_write::undeclared_fields(&err) else {
                    return Err(fail("patch", err));
                };
                let (written, created) =
                    super::pruned_write::write(&api, &r.name, &manifest, &ctx.field_manager()).await.map_err(|err| fail("create", err))?;
                if let Some(plan) = plan {
                    let regarding = ObjectReference {
                        api_version: Some("operators.coreos.com/v1alpha1".into()),
                        kind: Some("InstallPlan".into()),
                        name: Some(plan.to_owned()),
                        namespace: Some(namespace.to_owned()),
                        ..Default::default()
                    };
                    let note = super::pruned_write::note(&describe(step, namespace), &r.kind, &api_resource.api_version, &fields);
                    ctx.events.publish(&regarding, &note).await;
                }
                let csv_uid = (r.kind == "ClusterServiceVersion").then(|| written.uid()).flatten();
                return Ok(Applied { status: if created { StepStatus::Created } else { StepStatus::Present }, csv_uid, parked: false });
            }
        }
    };
    let Some(applied) = applied else {
        // Parked: the CRD is as this manifest has it; the next write of it carries this step's
        // annotation and labels, and the step looks again (`recheck_crd`).
        return Ok(Applied { status: StepStatus::WaitingForApi, csv_uid: None, parked: true });
    };
    let status = if is_crd && !established(&serde_json::to_value(&applied).unwrap_or(Value::Null)) {
        StepStatus::WaitingForApi
    } else if existed {
        StepStatus::Present
    } else {
        StepStatus::Created
    };
    let csv_uid = (r.kind == "ClusterServiceVersion").then(|| applied.uid()).flatten();
    Ok(Applied { status, csv_uid, parked: false })
}

/// A manifest (written by hand) naming a ClusterServiceVersion of the namespace as owner
/// without its uid gets the uid, as upstream fills it in; while that CSV does not exist the step
/// waits, retried for the retry window.
async fn fill_csv_owner_uids(ctx: &ControllerContext<InstallPlanState>, step: &Step, namespace: &str, manifest: &mut Value) -> Result<(), StepError> {
    let Some(owners) = manifest.pointer_mut("/metadata/ownerReferences").and_then(Value::as_array_mut) else {
        return Ok(());
    };
    let csvs: Api<olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion> = Api::namespaced(ctx.client.clone(), namespace);
    for owner in owners.iter_mut() {
        let is_csv = owner.get("kind").and_then(Value::as_str) == Some("ClusterServiceVersion");
        let has_uid = owner.get("uid").and_then(Value::as_str).is_some_and(|u| !u.is_empty());
        let Some(name) = owner.get("name").and_then(Value::as_str).map(str::to_owned).filter(|_| is_csv && !has_uid) else {
            continue;
        };
        let found = csvs.get_opt(&name).await.map_err(|err| step_error(step, namespace, "get", None, &err))?;
        let Some(uid) = found.and_then(|csv| csv.uid()) else {
            return Err(StepError::new(
                format!("{}: its owner ClusterServiceVersion {namespace}/{name} does not exist (yet)", describe(step, namespace)),
                true,
            ));
        };
        owner["uid"] = json!(uid);
    }
    Ok(())
}

/// The error for a step of a kind OLM does not install. When the API server does not serve
/// that kind at all, it says so in upstream's words and is retried for the retry window (the API
/// may be on its way, as upstream retries); a kind the cluster serves but OLM does not install
/// from bundles fails at once.
async fn unsupported(ctx: &ControllerContext<InstallPlanState>, step: &Step) -> StepError {
    let r = &step.resource;
    let group_version = if r.group.is_empty() { r.version.clone() } else { format!("{}/{}", r.group, r.version) };
    let served = match kube::discovery::oneshot::pinned_group(&ctx.client, &kube::core::GroupVersion::gv(&r.group, &r.version)).await {
        Ok(group) => group.recommended_kind(&r.kind).is_some(),
        Err(err) => api_status_code(&err) != Some(404),
    };
    if served {
        return StepError::new(
            format!(
                "bundle object {} of {} is a {} ({group_version}), which OLM does not install from bundles",
                r.name, step.resolving, r.kind
            ),
            false,
        );
    }
    StepError::new(
        format!(
            "api-server resource not found installing {} {}: GroupVersionKind {group_version}, Kind={} not found on the cluster",
            r.kind, r.name, r.kind
        ),
        true,
    )
}

/// Write into a CSV manifest what the CSV controller would add first (see
/// `csv::decide::creation_metadata`). Applied on every apply of the step, not only the first:
/// server-side apply removes the fields its manager stops sending.
fn stamp_csv(manifest: &mut Value, groups: &[Arc<OperatorGroup>]) {
    let Ok(csv) = serde_json::from_value::<olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion>(manifest.clone()) else {
        // The CSV controller reports what is wrong with it.
        return;
    };
    let groups: Vec<&OperatorGroup> = groups.iter().map(Arc::as_ref).collect();
    let stamp = crate::metadata::creation_metadata(&csv, &groups);
    let Some(metadata) = manifest.get_mut("metadata").and_then(Value::as_object_mut) else { return };
    for (field, entries) in [("labels", stamp.labels), ("annotations", stamp.annotations)] {
        if let Some(map) = metadata.entry(field).or_insert_with(|| json!({})).as_object_mut() {
            for (key, value) in entries {
                map.insert(key, json!(value));
            }
        }
    }
    if let Some(list) = metadata.entry("finalizers").or_insert_with(|| json!([])).as_array_mut() {
        for finalizer in stamp.finalizers {
            if !list.iter().any(|f| f.as_str() == Some(finalizer.as_str())) {
                list.push(json!(finalizer));
            }
        }
    }
}

/// A CRD step applied in an earlier pass that the API server had not Established yet, or whose
/// share was parked: look again. A share no write of this process carried (still parked, or
/// parked before a restart) is applied again: parked again, or written.
async fn recheck_crd(
    ctx: &ControllerContext<InstallPlanState>,
    step: &Step,
    namespace: &str,
    installer: &Installer,
) -> Result<Applied, StepError> {
    let Some(parked) = ctx.state.crd_writes.carried_share(&step.resource.name, namespace, &step.resolving) else {
        return apply_step(ctx, step, namespace, installer, None, None, None).await;
    };
    // A parked share's CRD existed (Present); established long ago as a rule, which the cache shows.
    let cached = ctx.state.crds.as_ref().and_then(|crds| crds.get(None, &step.resource.name));
    if parked && cached.is_some_and(|crd| established(&serde_json::to_value(crd.as_ref()).unwrap_or(Value::Null))) {
        return Ok(Applied { status: StepStatus::Present, csv_uid: None, parked: false });
    }
    let api: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
    // The watch cache's view is enough: a stale answer only means one more look.
    let found = get_cached_opt(&api, &step.resource.name)
        .await
        .map_err(|err| step_error(step, namespace, "get", None, &err))?;
    let status = match found {
        Some(crd) if established(&serde_json::to_value(&crd).unwrap_or(Value::Null)) => StepStatus::Created,
        Some(_) => StepStatus::WaitingForApi,
        // Deleted meanwhile: apply it again (as OLM: `apply_step` never uses the installer for CRDs).
        None => return apply_step(ctx, step, namespace, installer, None, None, None).await,
    };
    Ok(Applied { status, csv_uid: None, parked: false })
}

/// One execution pass, as [`rounds`] plans it: the CRD changes checked first, then the rounds
/// (CRDs with the CSV, ServiceAccounts with roles and bindings, the rest), the steps of a round
/// applied concurrently, since none depends on another of its round. Steps done in an earlier
/// pass are not applied again, except the CSVs, whose uids own the rest. A CRD the API server
/// has not Established yet holds back only the steps of the kind it defines (upstream's
/// WaitingForApi): the CSV and RBAC do not depend on it, so they go on meanwhile.
async fn execute(ctx: &ControllerContext<InstallPlanState>, plan: &InstallPlan, steps: &[Step], installer: &Installer) -> Pass {
    let namespace = plan.namespace().unwrap_or_default();
    let plan_name = plan.name_any();
    let plan_name = plan_name.as_str();
    let pass = rounds::plan_pass(steps, installer.service_account.is_some());
    let mut progress = Progress::new(steps.to_vec());
    let checks_started = std::time::Instant::now();
    let checked = futures::future::join_all(pass.crd_checks.iter().map(|&i| check_crd(ctx, &progress.steps[i]))).await;
    tracing::debug!(crds = pass.crd_checks.len(), ms = checks_started.elapsed().as_secs_f64() * 1e3, "CRD changes checked");
    let mut crd_existed: HashMap<usize, bool> = HashMap::new();
    for (&i, result) in pass.crd_checks.iter().zip(checked) {
        match result {
            Ok(existed) => {
                crd_existed.insert(i, existed);
            }
            Err(error) => return progress.finish(Some(error)),
        }
    }
    for round in &pass.rounds {
        let runnable = progress.runnable(round);
        let round_started = std::time::Instant::now();
        let results = futures::future::join_all(runnable.iter().map(|&i| {
            let step = &progress.steps[i];
            let namespace = namespace.as_str();
            let owner = progress.csv_uids.get(&step.resolving).map(String::as_str);
            let existed = crd_existed.get(&i).copied();
            async move {
                if step.status == StepStatus::WaitingForApi && step.resource.kind == "CustomResourceDefinition" {
                    recheck_crd(ctx, step, namespace, installer).await
                } else {
                    apply_step(ctx, step, namespace, installer, owner, existed, Some(plan_name)).await
                }
            }
        }))
        .await;
        tracing::debug!(steps = runnable.len(), ms = round_started.elapsed().as_secs_f64() * 1e3, "steps applied");
        if let Some(error) = progress.record(&runnable, results) {
            return progress.finish(Some(error));
        }
    }
    progress.finish(None)
}

#[instrument(skip_all, fields(kind = "InstallPlan", namespace = %plan.namespace().unwrap_or_default(), name = %plan.name_any()))]
async fn reconcile(plan: Arc<InstallPlan>, ctx: Arc<ControllerContext<InstallPlanState>>) -> Result<Action> {
    ctx.state.metrics
        .install_plan_count
        .set(i64::try_from(ctx.state.plans.store().len()).unwrap_or(i64::MAX));
    let now = Timestamp::now();
    let previous = plan.status.clone().unwrap_or_default();
    match decide::next(&plan) {
        Next::Wait => Ok(Action::await_change()),
        Next::Enter(InstallPlanPhase::Installing) => {
            // Approved: entering Installing needs nothing but this status, so the steps are
            // applied in the same pass and the status is written once, with their outcome.
            tracing::info!(phase = InstallPlanPhase::Installing.as_str(), "InstallPlan phase");
            let entered = decide::enter(&previous, InstallPlanPhase::Installing, now);
            execute_plan(&ctx, &plan, &previous, entered).await
        }
        Next::Enter(phase) => {
            tracing::info!(phase = phase.as_str(), "InstallPlan phase");
            let status = decide::enter(&previous, phase, now);
            write_status(&ctx, &plan, &status).await?;
            Ok(Action::await_change())
        }
        Next::Execute => execute_plan(&ctx, &plan, &previous, previous.clone()).await,
        Next::Preview => {
            super::preview::write(&ctx, &plan).await?;
            Ok(Action::await_change())
        }
    }
}

/// One execution pass over the plan's steps, from status `base` (the observed one, or the one
/// just entered); `previous` is the status the plan has on the server.
async fn execute_plan(
    ctx: &Arc<ControllerContext<InstallPlanState>>,
    plan: &Arc<InstallPlan>,
    previous: &InstallPlanStatus,
    base: InstallPlanStatus,
) -> Result<Action> {
    let now = Timestamp::now();
    let namespace = plan.namespace().unwrap_or_default();
    let groups = ctx.state.groups.list_in(&namespace);
    let identity = install_identity(&namespace, &groups.iter().map(Arc::as_ref).collect::<Vec<_>>());
    let installer = ctx.state.clients.for_identity(&identity).map(|client| Installer {
        client,
        service_account: match &identity {
            InstallIdentity::ServiceAccount(sa) => Some(sa.clone()),
            _ => None,
        },
    });
    let installer = match installer {
        Ok(installer) => installer,
        Err(err) => {
            let words = crate::scoped_client::upstream_unavailable_words(&groups.iter().map(Arc::as_ref).collect::<Vec<_>>());
            let (status, delay, event) = decide::blocked(&base, words, err.to_string(), now);
            if previous.message != status.message {
                tracing::info!(category = err.category(), "InstallPlan waits: {err}");
            }
            write_status(ctx, plan, &status).await?;
            if let Some(note) = event {
                ctx.events.publish(&plan.object_ref(&()), &note).await;
            }
            return Ok(Action::requeue(delay));
        }
    };
    let mut base = base;
    base.attenuated_service_account_ref = installer.service_account.as_ref().map(|sa| ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("ServiceAccount".into()),
        name: Some(sa.name.clone()),
        namespace: Some(sa.namespace.clone()),
        ..Default::default()
    });
    let steps = base.plan.clone().unwrap_or_default();
    // Large content is applied from the plan's ConfigMaps; the status keeps the references.
    let pass = match super::content::resolved_steps(&ctx.client, plan, &steps).await {
        Ok(resolved) => {
            let pass = execute(ctx, plan, &resolved, &installer).await;
            Pass { steps: keep_references(&steps, pass.steps), ..pass }
        }
        Err(error) => Pass { steps, error: Some(error), waiting_for_api: false, parked: false },
    };
    let (status, requeue, event) = decide::after_pass(&base, pass, Timestamp::now());
    if status.phase != previous.phase {
        tracing::info!(
            phase = status.phase.as_str(),
            message = status.message.as_deref().unwrap_or_default(),
            "InstallPlan phase"
        );
    }
    write_status(ctx, plan, &status).await?;
    if let Some(note) = event {
        ctx.events.publish(&plan.object_ref(&()), &note).await;
    }
    Ok(action_for(requeue))
}

/// Write the plan's status, recording whether the API server refused it: the Subscription
/// that owns the plan reports a refusal (the error policy backs off and puts the Event on the
/// plan).
async fn write_status(ctx: &ControllerContext<InstallPlanState>, plan: &InstallPlan, status: &InstallPlanStatus) -> Result<()> {
    let key = (plan.namespace().unwrap_or_default(), plan.name_any());
    match ctx.status.apply(plan, status).await {
        Ok(_) => {
            ctx.state.write_failures.record(key, None);
            Ok(())
        }
        Err(err) => {
            if err.refused_write().is_some() {
                ctx.state.write_failures.record(key, Some(WriteFailure::of(&err)));
            }
            Err(err)
        }
    }
}

/// Build the InstallPlan controller (subscribes now; call before the caches start) and run it
/// until `shutdown` resolves.
pub fn run(
    ctx: Arc<ControllerContext<InstallPlanState>>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let state = ctx.state.clone();
    let plans_store = state.plans.store().clone();
    let controller = Controller::for_shared_stream(state.plans.subscribe(), state.plans.store().clone())
        .with_config(olm_runtime::controller::controller_config())
        // A group appearing, or finding its ServiceAccount, lets waiting plans of its namespace go on.
        .watches_shared_stream(state.groups.subscribe(), move |group: Arc<OperatorGroup>| {
            plans_store
                .state()
                .iter()
                .filter(|p| p.namespace() == group.namespace())
                .filter(|p| p.status.as_ref().is_some_and(|s| s.phase == InstallPlanPhase::Installing))
                .map(|p| ObjectRef::from_obj(p.as_ref()))
                .collect::<Vec<_>>()
        })
        .reconcile_all_on(ctx.leadership.gained())
        .graceful_shutdown_on(shutdown);
    async move {
        state.plans.synced().await;
        state.groups.synced().await;
        state.csvs.synced().await;
        controller
            .run(|plan, ctx| guarded(plan, ctx, reconcile), error_policy, ctx)
            .for_each(|_| futures::future::ready(()))
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_api_the_cluster_does_not_serve_is_named_with_what_provides_it() {
        let step: Step = serde_json::from_value(json!({
            "resolving": "x.v1", "status": "Unknown",
            "resource": {"group": "monitoring.coreos.com", "version": "v1", "kind": "ServiceMonitor", "name": "metrics",
                         "sourceName": "c", "sourceNamespace": "olm", "manifest": "{}"}
        }))
        .expect("a step");
        // What kube-apiserver answers for a group it does not serve.
        let err = kube::Error::Api(Box::new(kube::core::Status::failure("404 page not found\n", "Failed to parse error data").with_code(404)));
        let e = step_error(&step, "ns", "create", None, &err);
        assert!(e.retryable);
        assert_eq!(
            e.message,
            "cannot apply ServiceMonitor ns/metrics: this cluster does not serve monitoring.coreos.com/v1 ServiceMonitor: install what provides it (its CustomResourceDefinition servicemonitors.monitoring.coreos.com, for example the operator that owns that API) and the plan is retried, or remove the ServiceMonitor from the bundle"
        );
        let gone = kube::Error::Api(Box::new(kube::core::Status::failure("namespaces \"ns\" not found", "NotFound").with_code(404)));
        assert!(step_error(&step, "ns", "create", None, &gone).message.contains("namespaces \"ns\" not found"));
    }
}
