//! CRD upgrades that a server-side apply of the new CRD cannot do alone, and upstream refuses
//! or does by replacing the whole CRD:
//!
//! - A version dropped from `spec.versions` but still in `status.storedVersions` would strand
//!   the objects stored in it. Upstream refuses the upgrade and leaves the migration to the
//!   admin (real channels need it: authorino-operator 0.14.0 drops `v1beta1`, which every
//!   cluster that ran 0.0.1 still lists). We migrate as kube-storage-version-migrator does:
//!   every object is written back unchanged, so the API server stores it in the CRD's current
//!   storage version, and then the dropped versions leave `status.storedVersions`. Only when
//!   the new CRD keeps that storage version; otherwise the upgrade is refused as before.
//! - A conversion webhook the new CRD no longer has is reset first ([`conversion_reset`]).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::ResourceExt as _;
use serde_json::{Value, json};

use olm_runtime::error::api_message as api_error_message;

/// The versions of `existing`'s `status.storedVersions` that `desired` no longer offers.
pub fn dropped_stored_versions(existing: &Value, desired: &Value) -> Vec<String> {
    let offered = version_names(desired);
    stored_versions(existing).into_iter().filter(|v| !offered.contains(v)).collect()
}

/// The version the migration stores every object in: `existing`'s storage version, when
/// `desired` still offers it.
pub fn migration_target(existing: &Value, desired: &Value) -> Option<String> {
    let storage = existing
        .pointer("/spec/versions")
        .and_then(Value::as_array)?
        .iter()
        .find(|v| v.get("storage") == Some(&json!(true)))?
        .get("name")?
        .as_str()?
        .to_owned();
    version_names(desired).contains(&storage).then_some(storage)
}

/// `status.storedVersions` once the objects are stored in `target`: the dropped ones gone.
pub fn stored_versions_after(existing: &Value, dropped: &[String], target: &str) -> Vec<String> {
    let mut kept: Vec<String> = stored_versions(existing).into_iter().filter(|v| !dropped.contains(v)).collect();
    if !kept.iter().any(|v| v == target) {
        kept.push(target.to_owned());
    }
    kept
}

fn stored_versions(crd: &Value) -> Vec<String> {
    strings(crd.pointer("/status/storedVersions"), |v| v.as_str())
}

fn version_names(crd: &Value) -> Vec<String> {
    strings(crd.pointer("/spec/versions"), |v| v.get("name").and_then(Value::as_str))
}

fn strings(list: Option<&Value>, name: impl Fn(&Value) -> Option<&str>) -> Vec<String> {
    list.and_then(Value::as_array).into_iter().flatten().filter_map(|v| name(v).map(str::to_owned)).collect()
}

/// The merge patch that takes an existing CRD off a conversion webhook the new CRD no longer
/// has, or None. The webhook's client config was written by the CSV controller (another field
/// manager), so a server-side apply of a CRD without `spec.conversion` would drop only the
/// strategy and leave the client config behind, which the API server refuses
/// (authorino-operator 0.14.0 → 0.15.0). Upstream replaces the whole CRD, which clears both.
pub fn conversion_reset(existing: &Value, desired: &Value) -> Option<Value> {
    let webhook = |crd: &Value| crd.pointer("/spec/conversion/strategy").and_then(Value::as_str) == Some("Webhook");
    (webhook(existing) && !webhook(desired)).then(|| json!({"spec": {"conversion": {"strategy": "None", "webhook": null}}}))
}

/// Write every object of the CRD `existing` back unchanged (stored then in `target`), then
/// drop `dropped` from its `status.storedVersions`. Returns how many objects were rewritten.
/// Why a migration stopped, and whether the same migration may succeed later without anyone
/// changing anything (an object changed meanwhile, the API server busy or down).
#[derive(Debug)]
pub struct MigrationError {
    pub message: String,
    pub retryable: bool,
}

impl MigrationError {
    fn of(what: String, err: &kube::Error) -> MigrationError {
        MigrationError { message: format!("{what}: {}", api_error_message(err)), retryable: transient(err) }
    }
}

/// A conflict (the object changed between the list and the write), throttling, a server
/// error or no answer: worth retrying. Anything else the API server refused stays refused.
pub fn transient(err: &kube::Error) -> bool {
    match olm_runtime::error::api_status_code(err) {
        Some(code) => code == 409 || code == 429 || code >= 500,
        None => true,
    }
}

pub async fn migrate(client: &kube::Client, existing: &Value, dropped: &[String], target: &str) -> Result<usize, MigrationError> {
    let text = |pointer: &str| existing.pointer(pointer).and_then(Value::as_str).unwrap_or_default().to_owned();
    let (name, group) = (text("/metadata/name"), text("/spec/group"));
    let resource = ApiResource {
        api_version: format!("{group}/{target}"),
        group,
        version: target.to_owned(),
        kind: text("/spec/names/kind"),
        plural: text("/spec/names/plural"),
    };
    let all: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let mut rewritten = 0;
    let mut params = ListParams::default().limit(500);
    loop {
        let page = all.list(&params).await.map_err(|err| MigrationError::of(format!("cannot list its {} objects", resource.kind), &err))?;
        for object in &page.items {
            let api: Api<DynamicObject> = match object.namespace() {
                Some(ns) => Api::namespaced_with(client.clone(), &ns, &resource),
                None => Api::all_with(client.clone(), &resource),
            };
            match api.replace(&object.name_any(), &PostParams::default(), object).await {
                Ok(_) => rewritten += 1,
                // Deleted since the list: nothing left to migrate.
                Err(err) if olm_runtime::error::api_status_code(&err) == Some(404) => {}
                Err(err) => return Err(MigrationError::of(format!("cannot rewrite {} {}", resource.kind, object.name_any()), &err)),
            }
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => break,
        }
    }
    let stored = stored_versions_after(existing, dropped, target);
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.patch_status(&name, &PatchParams::default(), &Patch::Merge(json!({"status": {"storedVersions": stored}})))
        .await
        .map_err(|err| MigrationError::of("cannot update its status.storedVersions".to_owned(), &err))?;
    Ok(rewritten)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_stored_version_is_migrated_to_the_storage_version_the_new_crd_keeps() {
        // authorino-operator: 0.0.1 stored v1beta1; 0.13.1 serves v1beta1 and v1beta2 (storage);
        // 0.14.0 serves only v1beta2.
        let existing = json!({
            "spec": {"versions": [{"name": "v1beta1", "storage": false}, {"name": "v1beta2", "storage": true}]},
            "status": {"storedVersions": ["v1beta1", "v1beta2"]},
        });
        let desired = json!({"spec": {"versions": [{"name": "v1beta2", "storage": true}]}});
        let dropped = dropped_stored_versions(&existing, &desired);
        assert_eq!(dropped, ["v1beta1"]);
        assert_eq!(migration_target(&existing, &desired).as_deref(), Some("v1beta2"));
        assert_eq!(stored_versions_after(&existing, &dropped, "v1beta2"), ["v1beta2"]);
        // Nothing to do when the new CRD keeps what is stored.
        assert!(dropped_stored_versions(&existing, &existing).is_empty());
        // The new CRD drops the storage version itself: no migration target, the upgrade is refused.
        let drops_storage = json!({"spec": {"versions": [{"name": "v1", "storage": true}]}});
        assert_eq!(migration_target(&existing, &drops_storage), None);
    }

    #[test]
    fn a_conversion_webhook_the_new_crd_drops_is_reset() {
        let webhook = json!({"spec": {"conversion": {"strategy": "Webhook", "webhook": {"clientConfig": {"service": {"name": "s"}}}}}});
        let none = json!({"spec": {"versions": []}});
        assert_eq!(
            conversion_reset(&webhook, &none),
            Some(json!({"spec": {"conversion": {"strategy": "None", "webhook": null}}}))
        );
        assert_eq!(conversion_reset(&webhook, &webhook), None);
        assert_eq!(conversion_reset(&none, &none), None);
    }

    #[test]
    fn a_conflict_or_a_busy_server_is_retried_and_a_refusal_is_not() {
        let status = |code: u16| kube::Error::Api(Box::new(kube::core::Status::failure("m", "Reason").with_code(code)));
        assert!(transient(&status(409)) && transient(&status(429)) && transient(&status(503)));
        assert!(!transient(&status(422)) && !transient(&status(403)));
        let err = MigrationError::of("cannot rewrite Widget a".into(), &status(409));
        assert!(err.retryable && err.message.starts_with("cannot rewrite Widget a: "), "{err:?}");
    }
}
