//! A secondary index of a watch cache: the objects under each key a function gives them (the
//! Operator controller's component labels), and under their namespace, so that a read finds
//! its few objects without a pass over every object of the kind. A pass per read made the
//! Operator controller quadratic in the number of namespaces: at 1,000 it was 40 % of `olm
//! run`'s CPU; the passes of `Cache::list_in` were most of the rest.
//!
//! The keys' index holds `Weak` references: it never keeps an object alive, a replaced or
//! deleted object simply stops upgrading, and what it returns is checked against the store, so
//! a stale entry can cost a lookup but never give a wrong answer. Dead entries are pruned as
//! new ones arrive.
//!
//! The namespace index holds names, and gives the store's objects of those names. A name is
//! added before the store gets the object and removed after the store lost it, so the index
//! never misses what the store holds: `Cache::list_in` through it answers exactly as a pass
//! over the store (a controller deciding from a list that missed an object for a moment, an
//! InstallPlan say, could act twice).

use std::collections::{HashMap, HashSet};
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
    entries: Entries<K>,
    /// The names of each namespace's objects, once asked for.
    namespaces: Option<HashMap<String, HashSet<String>>>,
}

/// The names of `store`'s objects, by namespace.
fn names_of<K: Resource<DynamicType = ()> + Clone>(store: &Store<K>) -> HashMap<String, HashSet<String>> {
    let mut names: HashMap<String, HashSet<String>> = HashMap::new();
    for obj in store.state() {
        if let (Some(ns), Some(name)) = (obj.meta().namespace.as_ref(), obj.meta().name.as_ref()) {
            names.entry(ns.clone()).or_default().insert(name.clone());
        }
    }
    names
}

/// Where a cache's index lives: shared by the cache's clones and its watch task, empty until
/// [`crate::cache::Cache::index_by`].
pub(crate) type IndexSlot<K> = Arc<RwLock<Option<Index<K>>>>;

impl<K: Resource<DynamicType = ()> + Clone> Index<K> {
    /// An index of `store`'s present objects by `keys` and, with `by_namespace`, namespace.
    fn of(store: &Store<K>, keys: Vec<KeysOf<K>>, by_namespace: bool) -> Self {
        let namespaces = by_namespace.then(|| names_of(store));
        let mut index = Index { keys, entries: Entries { by_key: HashMap::new(), inserted_since_prune: 0 }, namespaces };
        for obj in store.state() {
            index.insert(&obj);
        }
        index
    }

    fn insert(&mut self, obj: &Arc<K>) {
        for key in self.keys.iter().flat_map(|keys| keys(obj)) {
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
    let (mut all, by_namespace) = guard.as_ref().map(|index| (index.keys.clone(), index.namespaces.is_some())).unwrap_or_default();
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

/// Name `obj` in the namespace index before the store gets it (a watch event's object).
pub(crate) fn arriving<K: Resource<DynamicType = ()>>(slot: &IndexSlot<K>, obj: &K) {
    let (Some(ns), Some(name)) = (obj.meta().namespace.as_ref(), obj.meta().name.as_ref()) else { return };
    let mut guard = slot.write().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(namespaces) = guard.as_mut().and_then(|index| index.namespaces.as_mut())
        && !namespaces.get(ns).is_some_and(|names| names.contains(name))
    {
        namespaces.entry(ns.clone()).or_default().insert(name.clone());
    }
}

/// Forget `obj`'s name in the namespace index once the store lost it (a deletion).
pub(crate) fn gone<K: Resource<DynamicType = ()>>(slot: &IndexSlot<K>, obj: &K) {
    let (Some(ns), Some(name)) = (obj.meta().namespace.as_ref(), obj.meta().name.as_ref()) else { return };
    let mut guard = slot.write().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(namespaces) = guard.as_mut().and_then(|index| index.namespaces.as_mut())
        && let Some(names) = namespaces.get_mut(ns)
    {
        names.remove(name);
        if names.is_empty() {
            namespaces.remove(ns);
        }
    }
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
        *index = Index::of(store, std::mem::take(&mut index.keys), index.namespaces.is_some());
    }
}

/// The store's current objects indexed under `key`, a key of the keys function (entries are
/// made from the keys of the version they point to, so a current one is under its own keys),
/// or None when the cache has no keys function.
pub(crate) fn get<K: Resource<DynamicType = ()> + Clone>(slot: &IndexSlot<K>, store: &Store<K>, key: u64) -> Option<Vec<Arc<K>>> {
    let guard = slot.read().unwrap_or_else(std::sync::PoisonError::into_inner);
    let index = guard.as_ref().filter(|index| !index.keys.is_empty())?;
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

/// The store's objects in `namespace`, or None when the cache is not indexed by namespace.
pub(crate) fn in_namespace<K: Resource<DynamicType = ()> + Clone>(slot: &IndexSlot<K>, store: &Store<K>, namespace: &str) -> Option<Vec<Arc<K>>> {
    let guard = slot.read().unwrap_or_else(std::sync::PoisonError::into_inner);
    let namespaces = guard.as_ref()?.namespaces.as_ref()?;
    Some(
        namespaces
            .get(namespace)
            .into_iter()
            .flatten()
            .filter_map(|name| store.get(&ObjectRef::new(name).within(namespace)))
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
        // As the cache's watch does: named first, then stored, then indexed by keys.
        let added = in_other("new");
        arriving(&slot, &added);
        assert_eq!(names(in_namespace(&slot, &store, "other")), ["there"], "only what the store holds");
        writer.apply_watcher_event(&watcher::Event::Apply(added.clone()));
        assert_eq!(names(in_namespace(&slot, &store, "other")), ["new", "there"], "listed as soon as stored");
        applied(&slot, &store.get(&ObjectRef::from_obj(&added)).unwrap());
        // A change is listed throughout, in the version the store holds.
        let mut changed = in_other("new");
        changed.metadata.labels = None;
        arriving(&slot, &changed);
        writer.apply_watcher_event(&watcher::Event::Apply(changed.clone()));
        let listed = in_namespace(&slot, &store, "other").unwrap_or_default();
        assert!(listed.iter().any(|c| c.metadata.name.as_deref() == Some("new") && c.metadata.labels.is_none()), "the current version");
        writer.apply_watcher_event(&watcher::Event::Delete(changed.clone()));
        assert_eq!(names(in_namespace(&slot, &store, "other")), ["there"], "gone from the store: not listed");
        gone(&slot, &changed);
        assert_eq!(names(in_namespace(&slot, &store, "none")), Vec::<String>::new());
        let held: usize = slot.read().unwrap().as_ref().unwrap().namespaces.as_ref().unwrap().values().map(HashSet::len).sum();
        assert_eq!(held, 2, "a deleted object's name is forgotten");
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
