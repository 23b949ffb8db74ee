//! Status writes: server-side apply on the status subresource with one field manager per
//! controller, skipped when the desired status equals the observed one ignoring timestamps.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::api::{Patch, PatchParams};
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use kube::{Api, Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::error::{Error, Result};

/// Keys holding times that change on every write without changing meaning.
const TIMESTAMP_KEYS: &[&str] = &[
    "lastUpdateTime",
    "lastTransitionTime",
    "lastUpdated",
    "lastHeartbeatTime",
    "lastProbeTime",
];

/// `value` with every timestamp key and every null removed, for comparisons.
pub fn without_timestamps(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(key, v)| !TIMESTAMP_KEYS.contains(&key.as_str()) && !v.is_null())
                .map(|(key, v)| (key.clone(), without_timestamps(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_timestamps).collect()),
        other => other.clone(),
    }
}

/// Whether two statuses mean the same thing (timestamps and nulls ignored; a missing status
/// equals an empty object).
pub fn same_ignoring_timestamps(observed: Option<&Value>, desired: &Value) -> bool {
    let empty = Value::Object(Default::default());
    without_timestamps(observed.unwrap_or(&empty)) == without_timestamps(desired)
}

fn to_status_value<K: Resource<DynamicType = ()>, S: Serialize>(desired: &S) -> Result<Value> {
    serde_json::to_value(desired).map_err(|source| Error::Serialize {
        what: format!("{} status", K::kind(&())),
        source,
    })
}

/// A namespaced kind whose status a [`StatusWriter`] writes.
pub trait Namespaced: Resource<DynamicType = (), Scope = NamespaceResourceScope> + Clone + Serialize + DeserializeOwned + std::fmt::Debug {}

impl<K> Namespaced for K where K: Resource<DynamicType = (), Scope = NamespaceResourceScope> + Clone + Serialize + DeserializeOwned + std::fmt::Debug {}

/// Writes `.status` of one kind with one field manager.
#[derive(Clone)]
pub struct StatusWriter {
    client: Client,
    field_manager: String,
    /// For each object whose status this writer changed and whose new version the watch cache
    /// has not shown yet: the resourceVersion the write replaced, and the one it made.
    replaced: Arc<Mutex<HashMap<ObjectKey, (String, String)>>>,
}

/// Kind, namespace, name.
type ObjectKey = (String, String, String);

/// Objects written but not seen again, kept at most (their watch events normally arrive within
/// milliseconds; an object deleted meanwhile would otherwise stay forever).
const REPLACED_KEPT: usize = 4096;

fn key_of<K: Resource<DynamicType = ()>>(obj: &K) -> ObjectKey {
    (K::kind(&()).into_owned(), obj.namespace().unwrap_or_default(), obj.name_any())
}

impl StatusWriter {
    /// A writer whose field manager is e.g. `olm/csv`.
    pub fn new(client: Client, field_manager: impl Into<String>) -> Self {
        Self {
            client,
            field_manager: field_manager.into(),
            replaced: Arc::default(),
        }
    }

    /// Whether `obj` is older than this writer's last status write of it: the watch cache has
    /// not caught up with the write yet. A pass on it would decide again from the old status
    /// (and redo its work, or write the old status back over the new one); the write's own
    /// watch event brings the next pass. Older is the version the write replaced, or, where
    /// resourceVersions are numbers (etcd's revisions, as every API server here serves them), any
    /// below the written one: another writer's change made between the read and the write (a
    /// label) arrives first, with the status as it was before the write.
    pub fn is_stale<K: Resource<DynamicType = ()>>(&self, obj: &K) -> bool {
        let mut replaced = self.replaced.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = key_of(obj);
        let Some((old, written)) = replaced.get(&key) else { return false };
        let stale = obj.meta().resource_version.as_ref().is_some_and(|seen| {
            seen == old || matches!((seen.parse::<u64>(), written.parse::<u64>()), (Ok(seen), Ok(written)) if seen < written)
        });
        if !stale {
            replaced.remove(&key);
        }
        stale
    }

    /// The field manager.
    pub fn field_manager(&self) -> &str {
        &self.field_manager
    }

    /// Apply `desired` as the status of the namespaced `obj` unless it equals the observed
    /// status ignoring timestamps. Returns whether a write happened.
    pub async fn apply<K: Namespaced, S: Serialize>(&self, obj: &K, desired: &S) -> Result<bool> {
        let api: Api<K> = Api::namespaced(self.client.clone(), &obj.namespace().unwrap_or_default());
        self.write(api, obj, desired).await
    }

    /// Like [`StatusWriter::apply`], for cluster-scoped kinds.
    pub async fn apply_cluster<K, S>(&self, obj: &K, desired: &S) -> Result<bool>
    where
        K: Resource<DynamicType = (), Scope = ClusterResourceScope>
            + Clone
            + Serialize
            + DeserializeOwned
            + std::fmt::Debug,
        S: Serialize,
    {
        self.write(Api::all(self.client.clone()), obj, desired).await
    }

    /// Apply `desired` as the status of the namespaced `obj` without comparing it with the
    /// observed one: for a caller that compared already, timestamps included.
    pub async fn replace<K: Namespaced, S: Serialize>(&self, obj: &K, desired: &S) -> Result<bool> {
        let api: Api<K> = Api::namespaced(self.client.clone(), &obj.namespace().unwrap_or_default());
        let desired = to_status_value::<K, S>(desired)?;
        self.send(api, obj, desired).await
    }

    async fn write<K, S>(&self, api: Api<K>, obj: &K, desired: &S) -> Result<bool>
    where
        K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
        S: Serialize,
    {
        let desired = to_status_value::<K, S>(desired)?;
        let observed = serde_json::to_value(obj).map_err(|source| Error::Serialize {
            what: format!("{} {}", K::kind(&()), obj.name_any()),
            source,
        })?;
        if same_ignoring_timestamps(observed.get("status"), &desired) {
            return Ok(false);
        }
        self.send(api, obj, desired).await
    }

    async fn send<K>(&self, api: Api<K>, obj: &K, desired: Value) -> Result<bool>
    where
        K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
    {
        let name = obj.name_any();
        let patch = json!({
            "apiVersion": K::api_version(&()),
            "kind": K::kind(&()),
            "status": desired,
        });
        let params = PatchParams::apply(&self.field_manager).force();
        let written = api
            .patch_status(&name, &params, &Patch::Apply(&patch))
            .await
            .map_err(|err| {
                let namespace = obj.namespace().map(|ns| format!("{ns}/")).unwrap_or_default();
                Error::write(format!("write the status of {} {namespace}{name}", K::kind(&())), obj.object_ref(&()), err)
            })?;
        // Only a write that made a new version can be waited for: a no-op keeps the old one.
        if let (Some(old), Some(new)) = (obj.meta().resource_version.as_ref(), written.meta().resource_version.as_ref())
            && old != new
        {
            let mut replaced = self.replaced.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if replaced.len() >= REPLACED_KEPT {
                replaced.clear();
            }
            replaced.insert(key_of(obj), (old.clone(), new.clone()));
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(version: &str) -> k8s_openapi::api::core::v1::ConfigMap {
        let mut map = k8s_openapi::api::core::v1::ConfigMap::default();
        map.metadata.name = Some("m".into());
        map.metadata.namespace = Some("ns".into());
        map.metadata.resource_version = Some(version.into());
        map
    }

    fn writer_after_a_write(replaced: &str, written: &str) -> StatusWriter {
        let config = kube::Config::new("http://127.0.0.1:1".parse().expect("url"));
        let writer = StatusWriter::new(Client::try_from(config).expect("client"), "olm/test");
        writer.replaced.lock().unwrap().insert(key_of(&at("0")), (replaced.to_owned(), written.to_owned()));
        writer
    }

    #[tokio::test]
    async fn a_version_older_than_the_write_is_stale_until_the_write_is_seen() {
        let writer = writer_after_a_write("100", "102");
        assert!(writer.is_stale(&at("100")), "the version the write replaced");
        // Another writer's change (a label) made between the read and the write: still the old
        // status.
        assert!(writer.is_stale(&at("101")));
        assert!(!writer.is_stale(&at("102")), "the write itself");
        assert!(!writer.is_stale(&at("101")), "once seen, the write is forgotten");
        // A later version, and versions that are not numbers, are not stale.
        assert!(!writer_after_a_write("100", "102").is_stale(&at("103")));
        let opaque = writer_after_a_write("a", "c");
        assert!(opaque.is_stale(&at("a")));
        assert!(!opaque.is_stale(&at("b")));
    }

    #[test]
    fn timestamps_do_not_count_as_a_change() {
        let observed = json!({"phase": "Succeeded", "reason": "InstallSucceeded",
            "lastUpdateTime": "2026-01-01T00:00:00Z",
            "conditions": [{"phase": "Pending", "lastTransitionTime": "2026-01-01T00:00:00Z"}]});
        let desired = json!({"phase": "Succeeded", "reason": "InstallSucceeded",
            "lastUpdateTime": "2026-11-21T00:00:00Z",
            "conditions": [{"phase": "Pending", "lastTransitionTime": "2026-11-21T00:00:00Z"}]});
        assert!(same_ignoring_timestamps(Some(&observed), &desired));
        let changed = json!({"phase": "Failed", "reason": "InstallSucceeded"});
        assert!(!same_ignoring_timestamps(Some(&observed), &changed));
        assert!(same_ignoring_timestamps(None, &json!({"message": null})));
    }
}
