//! Applying a rendered bundle (server-side apply, field manager `olm/clusterextension`), each
//! object labelled and owned by its ClusterExtension; checking CRD upgrades before anything is
//! written; removing what the previous revision applied and the new one dropped. Every refusal
//! names the object, who was refused and what to change. What OLM v0 installed is taken over
//! only for a ClusterExtension `olm migrate` made ([`super::adopt`]).

use std::collections::HashMap;

use kube::api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::Scope;
use kube::{Api, Client};
use olm_runtime::error::{api_message, api_status_code, is_not_found};
use serde_json::{Value, json};

use super::adopt::{self, AdoptFrom};
use super::record::{ObjectRef, owner_reference};
use super::{OWNER_KIND, OWNER_KIND_LABEL, OWNER_NAME_LABEL};

/// Who writes: OLM itself, or the ServiceAccount the ClusterExtension names.
pub struct Installer {
    pub client: Client,
    /// `namespace/name` of the ServiceAccount acted as, when one is.
    pub service_account: Option<String>,
}

impl Installer {
    fn who(&self) -> String {
        match &self.service_account {
            Some(sa) => format!("ServiceAccount {sa}"),
            None => "OLM's own ServiceAccount".to_owned(),
        }
    }
}

/// The ClusterExtension the objects belong to.
pub struct Owner<'a> {
    pub name: &'a str,
    pub uid: &'a str,
    pub install_namespace: &'a str,
    /// The OLM v0 install it adopts (`olm-rs.io/adopt-from`), when a migration made it.
    pub adopt_from: Option<&'a AdoptFrom>,
}

/// What [`apply_all`] applied.
pub struct Applied {
    pub objects: Vec<ObjectRef>,
    /// The Deployments adopted from OLM v0 that keep the spec they run with.
    pub live_spec: Vec<ObjectRef>,
    /// Every object as applied, in order: the release's manifest.
    pub manifest: Vec<Value>,
}

/// Resolved kinds, for one pass.
#[derive(Default)]
pub struct Kinds(HashMap<(String, String), (ApiResource, bool)>);

impl Kinds {
    /// How `api_version` `kind` is served: its resource and whether it is namespaced.
    async fn of(&mut self, client: &Client, api_version: &str, kind: &str) -> Result<(ApiResource, bool), String> {
        let key = (api_version.to_owned(), kind.to_owned());
        if let Some(found) = self.0.get(&key) {
            return Ok(found.clone());
        }
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let not_served = || {
            format!("this cluster does not serve {api_version} {kind}: install what provides it (its CustomResourceDefinition or API) and OLM tries again, or choose a bundle without it")
        };
        let (resource, capabilities) = kube::discovery::pinned_kind(client, &gvk).await.map_err(|err| match &err {
            err if is_not_found(err) => not_served(),
            kube::Error::Discovery(_) => not_served(),
            other => format!("cannot look up how {api_version} {kind} is served: {}", api_message(other)),
        })?;
        let found = (resource, capabilities.scope == Scope::Namespaced);
        self.0.insert(key, found.clone());
        Ok(found)
    }
}

/// `object` as it is applied: in the install namespace when namespaced and not placed, labelled
/// and owned by the ClusterExtension.
fn owned(mut object: Value, owner: &Owner<'_>, namespaced: bool) -> Value {
    let metadata = object.get_mut("metadata").and_then(Value::as_object_mut);
    if let Some(metadata) = metadata {
        if namespaced && metadata.get("namespace").and_then(Value::as_str).is_none_or(str::is_empty) {
            metadata.insert("namespace".into(), json!(owner.install_namespace));
        }
        if !namespaced {
            metadata.remove("namespace");
        }
        let labels = metadata.entry("labels").or_insert_with(|| json!({}));
        if !labels.is_object() {
            *labels = json!({});
        }
        labels[OWNER_KIND_LABEL] = json!(OWNER_KIND);
        labels[OWNER_NAME_LABEL] = json!(owner.name);
        metadata.insert("ownerReferences".into(), json!([owner_reference(owner.name, owner.uid)]));
    }
    object
}

fn api_for(client: &Client, resource: &ApiResource, namespace: Option<&str>) -> Api<DynamicObject> {
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
        None => Api::all_with(client.clone(), resource),
    }
}

/// Apply `objects` in order; `recorded` is what the installed revision applied (those are this
/// extension's already), `live_spec` the Deployments of this bundle adopted from OLM v0 that
/// keep the spec they run with. Returns what was applied, or the first refusal in words.
pub async fn apply_all(
    installer: &Installer,
    field_manager: &str,
    owner: &Owner<'_>,
    objects: Vec<Value>,
    recorded: &[ObjectRef],
    live_spec: &[ObjectRef],
    kinds: &mut Kinds,
) -> Result<Applied, String> {
    let mut applied = Applied { objects: Vec::with_capacity(objects.len()), live_spec: Vec::new(), manifest: Vec::with_capacity(objects.len()) };
    let params = PatchParams::apply(field_manager).force();
    for object in objects {
        let api_version = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default().to_owned();
        let kind = object.get("kind").and_then(Value::as_str).unwrap_or_default().to_owned();
        let (resource, namespaced) = kinds.of(&installer.client, &api_version, &kind).await?;
        let mut object = owned(object, owner, namespaced);
        let reference = ObjectRef::of(&object);
        let api = api_for(&installer.client, &resource, namespaced.then_some(reference.namespace.as_str()));
        let released = if recorded.contains(&reference) { None } else { claim(&api, &reference, &kind, owner, field_manager).await? };
        if kind == "Deployment" {
            let live = match released {
                Some(live) => Some(live),
                // A failed read must not fall back to the rendered spec: that would restart the
                // pods and end the adoption's keeping of it.
                None if live_spec.contains(&reference) => api
                    .get_opt(&reference.name)
                    .await
                    .map_err(|err| format!("cannot read {reference} to keep the spec it runs with: {}; OLM tries again", api_message(&err)))?,
                None => None,
            };
            if let Some(live) = live {
                object = adopt::with_live_spec(object, &live);
                applied.live_spec.push(reference.clone());
            }
        }
        api.patch(&reference.name, &params, &Patch::Apply(&object)).await.map_err(|err| refused(installer, "apply", &reference, &resource, &err))?;
        applied.objects.push(reference);
        applied.manifest.push(object);
    }
    Ok(applied)
}

/// An object that exists and belongs to something else is not taken over (upstream refuses
/// the same): say whose it is and what to do. What OLM v0 installed for the CSV a migration
/// adopts from is released from OLM v0 here, and returned as it is now.
async fn claim(api: &Api<DynamicObject>, reference: &ObjectRef, kind: &str, owner: &Owner<'_>, field_manager: &str) -> Result<Option<DynamicObject>, String> {
    let existing = match api.get_opt(&reference.name).await {
        Ok(existing) => existing,
        // Cannot read it: the apply says why, with the verb it needs.
        Err(_) => return Ok(None),
    };
    let Some(existing) = existing else { return Ok(None) };
    let labels = existing.metadata.labels.clone().unwrap_or_default();
    if labels.get(OWNER_NAME_LABEL).map(String::as_str) == Some(owner.name) && labels.get(OWNER_KIND_LABEL).map(String::as_str) == Some(OWNER_KIND) {
        return Ok(None);
    }
    if let Some(from) = owner.adopt_from
        && !labels.contains_key(OWNER_NAME_LABEL)
        && adopt::installed_by(&existing, from, kind, OWNER_NAME_LABEL)
    {
        let patch: json_patch::Patch = serde_json::from_value(adopt::release_patch(&existing, field_manager))
            .map_err(|err| format!("cannot form the patch that releases {reference} from OLM v0: {err}"))?;
        let released = api.patch(&reference.name, &PatchParams::default(), &Patch::<()>::Json(patch)).await.map_err(|err| {
            format!("cannot release {reference} from OLM v0 (ClusterServiceVersion {}/{}): {}; OLM tries again", from.namespace, from.csv, api_message(&err))
        })?;
        tracing::info!(object = %reference, csv = %from.csv, "adopted from OLM v0");
        return Ok(Some(released));
    }
    let v0 = labels.keys().find(|k| k.starts_with(olm_api::keys::OPERATOR_COMPONENT_LABEL_PREFIX));
    let whose = match (labels.get(OWNER_NAME_LABEL), v0) {
        (Some(other), _) => format!("it belongs to ClusterExtension {other}"),
        (None, Some(label)) => format!("OLM v0 installed it: its label {label} names the Operator that has it"),
        (None, None) => "it was not installed by this ClusterExtension".to_owned(),
    };
    Err(format!(
        "{reference} already exists and cannot be managed by this ClusterExtension ({whose}): delete it, or uninstall what installed it, and OLM tries again"
    ))
}

fn refused(installer: &Installer, verb: &str, reference: &ObjectRef, resource: &ApiResource, err: &kube::Error) -> String {
    let said = api_message(err);
    match api_status_code(err) {
        Some(403) => format!(
            "{} may not {verb} {reference}: {said}; grant it {} on {} (or name another spec.serviceAccount) and OLM tries again",
            installer.who(),
            // A server-side apply is authorized as a patch, and as a create when the object is new.
            if verb == "apply" { "create and patch" } else { verb },
            if resource.group.is_empty() { resource.plural.clone() } else { format!("{}.{}", resource.plural, resource.group) }
        ),
        _ => format!("cannot {verb} {reference}: {said}"),
    }
}

/// Delete what the previous revision applied and the new one dropped. Already gone is done. A
/// CRD is kept: its custom resources are the users' data (upstream's Helm deletes it, and them);
/// it still goes with the ClusterExtension, which owns it.
pub async fn remove(installer: &Installer, dropped: &[&ObjectRef], kinds: &mut Kinds) -> Result<(), String> {
    for reference in dropped {
        if reference.kind == "CustomResourceDefinition" {
            tracing::info!(object = %reference, "kept: the new revision no longer has this CRD, but its objects are users' data");
            continue;
        }
        let resource = match kinds.of(&installer.client, &reference.api_version, &reference.kind).await {
            Ok((resource, _)) => resource,
            // Its API is gone, and the object with it.
            Err(_) => continue,
        };
        let namespace = (!reference.namespace.is_empty()).then_some(reference.namespace.as_str());
        let api = api_for(&installer.client, &resource, namespace);
        match api.delete(&reference.name, &DeleteParams::background()).await {
            Ok(_) => tracing::info!(object = %reference, "removed: the new revision no longer has it"),
            Err(err) if is_not_found(&err) => {}
            Err(err) => return Err(refused(installer, "delete", reference, &resource, &err)),
        }
    }
    Ok(())
}

/// CRD upgrade safety (`spec.install.preflight.crdUpgradeSafety`): every CRD of the bundle that
/// exists already must keep its stored versions served, and the existing custom resources must
/// stay valid under its new schemas. Read with OLM's own client; upstream's words lead.
pub async fn check_crds(client: &Client, objects: &[Value]) -> Result<(), String> {
    let api: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"), "customresourcedefinitions"),
    );
    let mut problems = Vec::new();
    for crd in objects.iter().filter(|o| o.get("kind").and_then(Value::as_str) == Some("CustomResourceDefinition")) {
        let name = crd.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
        let existing = api.get_opt(name).await.map_err(|err| format!("cannot read CustomResourceDefinition {name} to check its upgrade: {}", api_message(&err)))?;
        let Some(existing) = existing else { continue };
        let existing = serde_json::to_value(&existing).unwrap_or(Value::Null);
        if let Err(why) = olm_install::crd_rules::stored_versions_kept(&existing, crd) {
            problems.push(format!("validating upgrade for CRD {name:?}: {why}"));
            continue;
        }
        match olm_install::crd_check::refused_objects(client, &existing, crd, 3).await {
            Ok(refused) if refused.is_empty() => {}
            Ok(refused) => problems.push(format!(
                "validating upgrade for CRD {name:?}: existing objects are not valid under the new schema: {}",
                refused.iter().map(|r| format!("{} ({}: {})", r.object, r.version, r.problems.join("; "))).collect::<Vec<_>>().join(", ")
            )),
            Err(failed) => return Err(format!("cannot list existing {} objects to check the upgrade of CRD {name:?}: {}", failed.kind, api_message(&failed.error))),
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{}; fix the objects or the bundle, or set spec.install.preflight.crdUpgradeSafety.enforcement: None to skip this check",
        problems.join("\n")
    ))
}
