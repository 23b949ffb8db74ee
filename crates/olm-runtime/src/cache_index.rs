//! A secondary index of a watch cache: the objects under each key a function gives them (the
//! Operator controller's component labels), and under their namespace, so that a read finds
//! its few objects without a pass over every object of the kind. A pass per read made the
//! Operator controller quadratic in the number of namespaces: at 1,000 it was 40 % of `olm
//! run`'s CPU; the passes of `Cache::list_in` were most of the rest.
//!
//! The index holds `Weak` references: it never keeps an object alive, a replaced or deleted
//! object simply stops upgrading, and what it returns is checked against the store, so a
//! stale entry can cost a lookup but never give a wrong answer. Dead entries are pruned as new
//! ones arrive.

use std::collections::HashMap;
use std::sync::{Arc, RwLock, Weak};

use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};

/// The keys of an object (none: it is not indexed).
pub type KeysOf<K> = fn(&K) -> Vec<u64>;

/// Entries inserted between two prunes of dead entries.
const PRUNE_EVERY: usize = 256;

struct Entries<K> {
    by_key: HashMap<u64, Vec<Weak<K>>>,
    inserted_since_prune: usize,
}

/// The index of one cache, once a controller asked for it.
pub(crate) struct Index<K> {
    /// The keys functions (several readers may each index the cache by their own).
    keys: Vec<KeysOf<K>>,
    /// Whether objects are indexed under [`namespace_key`] too.
    by_namespace: bool,
    entries: Entries<K>,
}

/// The key the objects of `namespace` are indexed under (see [`Index::by_namespace`]); a
/// digest of a pair, so that it never equals a key of a `KeysOf` function's strings.
fn namespace_key(namespace: &str) -> u64 {
    crate::cache::digest(("namespace", namespace))
}

/// Where a cache's index lives: shared by the cache's clones and its watch task, empty until
/// [`crate::cache::Cache::index_by`].
pub(crate) type IndexSlot<K> = Arc<RwLock<Option<Index<K>>>>;

impl<K: Resource<DynamicType = ()> + Clone> Index<K> {
    /// An index of `store`'s present objects by `keys` and, with `by_namespace`, namespace.
    fn of(store: &Store<K>, keys: Vec<KeysOf<K>>, by_namespace: bool) -> Self {
        let mut index = Index { keys, by_namespace, entries: Entries { by_key: HashMap::new(), inserted_since_prune: 0 } };
        for obj in store.state() {
            index.insert(&obj);
        }
        index
    }

    fn insert(&mut self, obj: &Arc<K>) {
        let namespace = self.by_namespace.then(|| obj.meta().namespace.as_deref().map(namespace_key)).flatten();
        for key in self.keys.iter().flat_map(|keys| keys(obj)).chain(namespace) {
            let held = self.entries.by_key.entry(key).or_default();
            if !held.iter().any(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(obj))) {
                held.push(Arc::downgrade(obj));
                self.entries.inserted_since_prune += 1;
            }
        }
        if self.entries.inserted_since_prune >= PRUNE_EVERY {
            self.entries.inserted_since_prune = 0;
            self.entries.by_key.retain(|_, held| {
                held.retain(|w| w.strong_count() > 0);
                !held.is_empty()
            });
        }
    }
}

/// Start indexing `store`'s objects by `keys` too, unless they already are (its present
/// objects at once).
pub(crate) fn start<K: Resource<DynamicType = ()> + Clone>(slot: &IndexSlot<K>, store: &Store<K>, keys: KeysOf<K>) {
    let mut guard = slot.write().unwrap_or_else(std::sync::PoisonError::into_inner);
    let (mut all, by_namespace) = guard.as_ref().map(|index| (index.keys.clone(), index.by_namespace)).unwrap_or_default();
    if all.iter().any(|known| std::ptr::fn_addr_eq(*known, keys)) {
        return;
    }
    all.push(keys);
    *guard = Some(Index::of(store, all, by_namespace));
}

/// Start indexing `store`'s objects by namespace too (its present objects at once).
pub(crate) fn start_namespaces<K: Resource<DynamicType = ()> + Clone>(slot: &IndexSlot<K>, store: &Store<K>) {
    let mut guard = slot.write().unwrap_or_else(std::sync::PoisonError::into_inner);
    let keys = guard.as_ref().map(|index| index.keys.clone()).unwrap_or_default();
    *guard = Some(Index::of(store, keys, true));
}



/// Index `stored`, the store's object after a watch event.
pub(crate) fn applied<K: Resource<DynamicType = ()> + Clone>(slot: &IndexSlot<K>, stored: &Arc<K>) {
    if let Some(index) = slot.write().unwrap_or_else(std::sync::PoisonError::into_inner).as_mut() {
        index.insert(stored);
    }
}

/// Index everything after a (re)list: the old objects' entries die with them.
pub(crate) fn relisted<K: Resource<DynamicType = ()> + Clone>(slot: &IndexSlot<K>, store: &Store<K>) {
    let mut guard = slot.write().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(index) = guard.as_mut() {
        *index = Index::of(store, std::mem::take(&mut index.keys), index.by_namespace);
    }
}

/// The store's current objects indexed under `key`, a key of the keys function (entries are
/// made from the keys of the version they point to, so a current one is under its own keys),
/// or None when the cache has no keys function.
pub(crate) fn get<K: Resource<DynamicType = ()> + Clone>(slot: &IndexSlot<K>, store: &Store<K>, key: u64) -> Option<Vec<Arc<K>>> {
    lookup(slot, store, key, |index| !index.keys.is_empty())
}

/// The store's current objects in `namespace` (and maybe a few others whose namespace has
/// the same digest), or None when the cache is not indexed by namespace.
pub(crate) fn in_namespace<K: Resource<DynamicType = ()> + Clone>(slot: &IndexSlot<K>, store: &Store<K>, namespace: &str) -> Option<Vec<Arc<K>>> {
    lookup(slot, store, namespace_key(namespace), |index| index.by_namespace)
}

fn lookup<K: Resource<DynamicType = ()> + Clone>(
    slot: &IndexSlot<K>,
    store: &Store<K>,
    key: u64,
    indexed: fn(&Index<K>) -> bool,
) -> Option<Vec<Arc<K>>> {
    let guard = slot.read().unwrap_or_else(std::sync::PoisonError::into_inner);
    let index = guard.as_ref().filter(|index| indexed(index))?;
    let Some(held) = index.entries.by_key.get(&key) else {
        return Some(Vec::new());
    };
    Some(
        held.iter()
            .filter_map(Weak::upgrade)
            // Only the version the store holds now: an older one still alive elsewhere may
            // have had other labels.
            .filter(|obj| store.get(&ObjectRef::from_obj(obj.as_ref())).is_some_and(|current| Arc::ptr_eq(&current, obj)))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::{reflector, watcher};
    use std::collections::BTreeMap;

    fn labelled(name: &str, label: Option<&str>) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name.into());
        cm.metadata.namespace = Some("ns".into());
        cm.metadata.labels = label.map(|l| BTreeMap::from([(l.to_owned(), String::new())]));
        cm
    }

    fn keys(cm: &ConfigMap) -> Vec<u64> {
        cm.metadata.labels.iter().flatten().map(|(k, _)| crate::cache::digest(k)).collect()
    }

    fn names(found: Option<Vec<Arc<ConfigMap>>>) -> Vec<String> {
        let mut names: Vec<String> = found.unwrap_or_default().iter().map(|c| c.metadata.name.clone().unwrap_or_default()).collect();
        names.sort();
        names
    }

    #[test]
    fn reads_follow_the_store_through_changes_relabels_and_deletions() {
        let (store, mut writer) = reflector::store::<ConfigMap>();
        let slot: IndexSlot<ConfigMap> = Arc::default();
        let apply = |writer: &mut reflector::store::Writer<ConfigMap>, cm: ConfigMap| {
            writer.apply_watcher_event(&watcher::Event::Apply(cm.clone()));
            applied(&slot, &store.get(&ObjectRef::from_obj(&cm)).unwrap());
        };
        writer.apply_watcher_event(&watcher::Event::Apply(labelled("before", Some("a"))));
        assert_eq!(get(&slot, &store, crate::cache::digest("a")), None, "no index until asked for");
        start(&slot, &store, keys);
        let a = crate::cache::digest("a");
        let b = crate::cache::digest("b");
        assert_eq!(names(get(&slot, &store, a)), ["before"], "objects present when the index starts are in it");

        apply(&mut writer, labelled("one", Some("a")));
        apply(&mut writer, labelled("two", Some("b")));
        apply(&mut writer, labelled("three", None));
        assert_eq!(names(get(&slot, &store, a)), ["before", "one"]);
        assert_eq!(names(get(&slot, &store, b)), ["two"]);

        // A relabelled object moves, even while its old version is still held elsewhere.
        let old = store.get(&ObjectRef::from_obj(&labelled("one", None))).unwrap();
        apply(&mut writer, labelled("one", Some("b")));
        assert_eq!(names(get(&slot, &store, a)), ["before"]);
        assert_eq!(names(get(&slot, &store, b)), ["one", "two"]);
        drop(old);

        // Changed again under the same label: listed once.
        apply(&mut writer, labelled("one", Some("b")));
        assert_eq!(names(get(&slot, &store, b)), ["one", "two"]);

        writer.apply_watcher_event(&watcher::Event::Delete(labelled("two", Some("b"))));
        assert_eq!(names(get(&slot, &store, b)), ["one"], "a deleted object is gone from the index");

        // A relist replaces everything.
        writer.apply_watcher_event(&watcher::Event::Init);
        writer.apply_watcher_event(&watcher::Event::InitApply(labelled("fresh", Some("a"))));
        writer.apply_watcher_event(&watcher::Event::InitDone);
        relisted(&slot, &store);
        assert_eq!(names(get(&slot, &store, a)), ["fresh"]);
        assert_eq!(names(get(&slot, &store, b)), Vec::<String>::new());
    }

    #[test]
    fn the_namespace_index_lists_a_namespace_beside_the_keys() {
        let (store, mut writer) = reflector::store::<ConfigMap>();
        let slot: IndexSlot<ConfigMap> = Arc::default();
        let in_other = |name: &str| {
            let mut cm = labelled(name, Some("a"));
            cm.metadata.namespace = Some("other".into());
            cm
        };
        writer.apply_watcher_event(&watcher::Event::Apply(labelled("here", Some("a"))));
        writer.apply_watcher_event(&watcher::Event::Apply(in_other("there")));
        assert_eq!(in_namespace(&slot, &store, "ns"), None, "no index until asked for");
        start_namespaces(&slot, &store);
        assert_eq!(names(in_namespace(&slot, &store, "ns")), ["here"]);
        assert_eq!(get(&slot, &store, crate::cache::digest("a")), None, "no keys function: keys are not read from it");
        start(&slot, &store, keys);
        assert_eq!(names(get(&slot, &store, crate::cache::digest("a"))), ["here", "there"], "keys added");
        let added = in_other("new");
        writer.apply_watcher_event(&watcher::Event::Apply(added.clone()));
        applied(&slot, &store.get(&ObjectRef::from_obj(&added)).unwrap());
        assert_eq!(names(in_namespace(&slot, &store, "other")), ["new", "there"], "the namespace index kept with the keys");
        assert_eq!(names(in_namespace(&slot, &store, "none")), Vec::<String>::new());
    }

    #[test]
    fn dead_entries_are_pruned() {
        let (store, mut writer) = reflector::store::<ConfigMap>();
        let slot: IndexSlot<ConfigMap> = Arc::default();
        start(&slot, &store, keys);
        for round in 0..(PRUNE_EVERY * 2) {
            let cm = labelled(&format!("cm-{}", round % 4), Some(&format!("label-{round}")));
            writer.apply_watcher_event(&watcher::Event::Apply(cm.clone()));
            applied(&slot, &store.get(&ObjectRef::from_obj(&cm)).unwrap());
        }
        let held: usize = slot.read().unwrap().as_ref().unwrap().entries.by_key.values().map(Vec::len).sum();
        assert!(held <= PRUNE_EVERY + 4, "{held} entries held for 4 live objects");
    }
}
