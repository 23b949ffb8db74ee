//! Read your own writes: the objects this process wrote that its watch has not brought back
//! yet. A controller whose pass writes two objects is woken by the first one's event, often
//! before the second one's arrives; reading the second from the store, it would write it again
//! (at 1,000 namespaces, half the RoleBindings of OperatorConditions were written twice).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::Resource;
use kube::runtime::reflector::ObjectRef;

/// How long a write stands in for the store's version at most: its watch event normally
/// arrives within a second, and a watch that broke must not hide the store's truth for long.
const SETTLES: Duration = Duration::from_secs(10);

/// Writes kept at most (each goes when its event arrives; this bounds what a broken watch
/// leaves).
const KEPT: usize = 4096;

/// What was written, by object.
pub(crate) struct Written<K: Resource<DynamicType = ()>> {
    entries: Mutex<HashMap<ObjectRef<K>, Entry<K>>>,
}

struct Entry<K> {
    /// The resourceVersion the store held when the answer came (None: it held nothing).
    replaced: Option<String>,
    /// The object as the API server answered the write (prepared as the store keeps objects).
    object: Arc<K>,
    at: Instant,
}

impl<K: Resource<DynamicType = ()>> Default for Written<K> {
    fn default() -> Self {
        Self { entries: Mutex::default() }
    }
}

impl<K: Resource<DynamicType = ()> + Clone> Written<K> {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectRef<K>, Entry<K>>> {
        self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Remember `answer`, the API server's answer to a write, while the store holds `stored`.
    /// Nothing to remember when the store has the answer's version already.
    pub(crate) fn record(&self, stored: Option<&K>, answer: Arc<K>, now: Instant) {
        let replaced = stored.and_then(|s| s.meta().resource_version.clone());
        if replaced.is_some() && replaced == answer.meta().resource_version {
            return;
        }
        let mut entries = self.lock();
        if entries.len() >= KEPT {
            entries.clear();
        }
        entries.insert(ObjectRef::from_obj(answer.as_ref()), Entry { replaced, object: answer, at: now });
    }

    /// The watch brought an event for `key`: the store is as new as the write, or newer.
    pub(crate) fn seen(&self, key: &ObjectRef<K>) {
        let mut entries = self.lock();
        if !entries.is_empty() {
            entries.remove(key);
        }
    }

    /// A relist: every object comes again.
    pub(crate) fn forget_all(&self) {
        self.lock().clear();
    }

    /// `stored` (the store's version of `key`), or what this process wrote over it when the
    /// store still holds exactly the version the write replaced.
    pub(crate) fn newer(&self, key: &ObjectRef<K>, stored: Option<Arc<K>>, now: Instant) -> Option<Arc<K>> {
        let mut entries = self.lock();
        let Some(entry) = entries.get(key) else {
            return stored;
        };
        let stored_version = stored.as_ref().and_then(|s| s.meta().resource_version.clone());
        if now.duration_since(entry.at) < SETTLES && stored_version == entry.replaced {
            return Some(entry.object.clone());
        }
        entries.remove(key);
        stored
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn config_map(version: &str, value: &str) -> Arc<ConfigMap> {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some("c".into());
        cm.metadata.namespace = Some("ns".into());
        cm.metadata.resource_version = Some(version.into());
        cm.data = Some([("k".to_owned(), value.to_owned())].into());
        Arc::new(cm)
    }

    fn value(cm: Option<Arc<ConfigMap>>) -> Option<String> {
        cm.and_then(|cm| cm.data.as_ref().and_then(|d| d.get("k").cloned()))
    }

    /// "new" (version 2) written over "old" (version 1), which the store still holds.
    fn new_written_over_old() -> (Written<ConfigMap>, Instant, Arc<ConfigMap>, ObjectRef<ConfigMap>) {
        let written = Written::<ConfigMap>::default();
        let now = Instant::now();
        let old = config_map("1", "old");
        let key = ObjectRef::from_obj(old.as_ref());
        written.record(Some(&old), config_map("2", "new"), now);
        (written, now, old, key)
    }

    #[test]
    fn a_write_reads_back_until_its_event_arrives() {
        let (written, now, old, key) = new_written_over_old();
        assert_eq!(value(written.newer(&key, Some(old.clone()), now)).as_deref(), Some("new"));
        written.seen(&key);
        assert_eq!(value(written.newer(&key, Some(old), now)).as_deref(), Some("old"), "after the event the store is the truth");
    }

    #[test]
    fn a_created_object_reads_back_and_a_store_that_moved_on_wins() {
        let written = Written::<ConfigMap>::default();
        let now = Instant::now();
        let created = config_map("5", "mine");
        let key = ObjectRef::from_obj(created.as_ref());
        written.record(None, created, now);
        assert_eq!(value(written.newer(&key, None, now)).as_deref(), Some("mine"));
        // The store holds another version than the one the write replaced: it is newer.
        assert_eq!(value(written.newer(&key, Some(config_map("7", "theirs")), now)).as_deref(), Some("theirs"));
        assert_eq!(value(written.newer(&key, None, now)), None, "forgotten once the store moved");
    }

    #[test]
    fn a_write_stands_in_for_a_while_only_and_not_when_the_store_had_it() {
        let (written, now, old, key) = new_written_over_old();
        assert_eq!(value(written.newer(&key, Some(old.clone()), now + SETTLES)).as_deref(), Some("old"));
        // The store had the answer's version already (its event came first): nothing to stand in.
        let stored = config_map("3", "as the watch brought it");
        written.record(Some(&stored), config_map("3", "as the write answered"), now);
        assert_eq!(value(written.newer(&key, Some(stored), now)).as_deref(), Some("as the watch brought it"));
    }
}
