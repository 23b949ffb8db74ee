//! A plan's CRD step written: with the installed-alongside annotations and Operator labels of
//! every install of the CRD, one writer at a time, and one write for the plans waiting with the
//! same manifest (see `crate::crd_writes`).

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::Api;
use serde_json::{Value, json};

use super::alongside;
use super::state::InstallPlanState;
use crate::crd_writes::Share;
use olm_runtime::ControllerContext;

/// Apply `manifest`, the CRD `name` of a step installing the CSV `namespace/csv`, and return it
/// as the API server left it; or None when the step's share was parked for the next write of
/// the same manifest (see `crate::crd_writes`: the step looks again). The manifest's own
/// Operator labels are its share; the rest of it must equal another step's for the two to
/// share a write. An error comes with the verb that failed.
pub async fn apply(
    ctx: &ControllerContext<InstallPlanState>,
    api: &Api<DynamicObject>,
    name: &str,
    namespace: &str,
    csv: &str,
    mut manifest: Value,
) -> Result<Option<DynamicObject>, (&'static str, kube::Error)> {
    let (digest, labels) = without_shares(&manifest);
    let writes = &ctx.state.crd_writes;
    let share = Share { namespace: namespace.to_owned(), csv: csv.to_owned(), labels };
    if writes.park(name, digest, cached_generation(ctx, name), &share, std::time::Instant::now()) {
        return Ok(None);
    }
    let ticket = writes.join(name, digest, share);
    let _lock = writes.lock(name).await;
    if let Some(written) = ticket.written() {
        return Ok(Some(written.as_ref().clone()));
    }
    let batch = ticket.batch();
    let csvs: Vec<(String, String)> = batch.shares().map(|share| (share.namespace.clone(), share.csv.clone())).collect();
    let now = Timestamp::now();
    let installed = |ns: &str, csv: &str| {
        let found = ctx.state.csvs.get(Some(ns), csv);
        // The namespace's plans are read only for a CSV the cache does not have.
        let plans = if found.is_none() { ctx.state.plans.list_in(ns) } else { Vec::new() };
        alongside::still_installed(csv, found, &plans, now)
    };
    let shared = alongside::for_write(&ctx.client, name, &csvs, installed)
        .await
        .map_err(|err| ("get", err))?;
    let labels = shared.component_labels.into_iter().chain(batch.shares().flat_map(|share| share.labels.clone()));
    if let Some(metadata) = manifest.get_mut("metadata").and_then(Value::as_object_mut) {
        for (field, values) in [("annotations", shared.annotations.into_iter().collect::<Vec<_>>()), ("labels", labels.collect())] {
            let map = metadata.entry(field).or_insert_with(|| json!({}));
            if !map.is_object() {
                *map = json!({});
            }
            if let Some(map) = map.as_object_mut() {
                for (k, v) in values {
                    map.entry(k).or_insert(json!(v));
                }
            }
        }
    }
    let params = PatchParams::apply(&ctx.field_manager()).force();
    let applied = api.patch(name, &params, &Patch::Apply(&manifest)).await.map_err(|err| ("patch", err))?;
    if csvs.len() > 1 {
        tracing::debug!(crd = name, installs = csvs.len(), parked = batch.parked.len(), "one write for several installs of a shared CRD");
    }
    ticket.wrote(&batch, Arc::new(applied.clone()));
    Ok(Some(applied))
}

/// The `metadata.generation` of the CRD `name` as the watch cache has it (None without a CRD
/// cache: nothing is parked then).
pub fn cached_generation(ctx: &ControllerContext<InstallPlanState>, name: &str) -> Option<i64> {
    ctx.state.crds.as_ref()?.get(None, name)?.metadata.generation
}

/// The digest of `manifest` without its Operator labels, and those labels.
pub fn without_shares(manifest: &Value) -> (u64, std::collections::BTreeMap<String, String>) {
    let mut rest = manifest.clone();
    let mut labels = std::collections::BTreeMap::new();
    if let Some(map) = rest.pointer_mut("/metadata/labels").and_then(Value::as_object_mut) {
        let all: std::collections::BTreeMap<String, String> =
            map.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned())).collect();
        labels = alongside::component_labels(&all);
        map.retain(|k, _| !labels.contains_key(k));
    }
    (olm_runtime::cache::digest(rest.to_string()), labels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_differing_only_in_their_operator_labels_share_a_write() {
        let crd = |label: &str| {
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                   "metadata": {"name": "etcdclusters.etcd.database.coreos.com", "labels": {label: "", "app": "etcd"}},
                   "spec": {"group": "etcd.database.coreos.com"}})
        };
        let (a, a_labels) = without_shares(&crd("operators.coreos.com/etcd.a"));
        let (b, _) = without_shares(&crd("operators.coreos.com/etcd.b"));
        assert_eq!(a, b);
        assert_eq!(a_labels.keys().collect::<Vec<_>>(), ["operators.coreos.com/etcd.a"]);
        let mut changed = crd("operators.coreos.com/etcd.a");
        changed["spec"]["group"] = json!("other");
        assert_ne!(without_shares(&changed).0, a, "another spec writes itself");
    }
}
