//! Shared watch caches: one watch per resource type for the whole process, read by every
//! controller through a `Store`, and fanned out to controllers as shared trigger streams.

use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use futures::channel::mpsc;
use futures::{Stream, StreamExt, TryStreamExt, future::BoxFuture};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::admin::Readiness;
use super::cache_index::{self, IndexSlot};
use super::cache_written::Written;
pub use super::cache_index::KeysOf;

/// One cache's figures: objects, bytes of their compact JSON, and heap bytes of a clone of
/// each.
type Census = Box<dyn Fn(fn() -> u64) -> (usize, usize, usize) + Send + Sync>;

/// The caches made while `OLM_DEBUG_CACHES` was set, for [`census`].
static CENSUS: Mutex<Vec<(String, Census)>> = Mutex::new(Vec::new());

/// One watch cache's figures of [`census`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheCensus {
    pub name: String,
    pub objects: usize,
    /// Bytes of the objects' compact JSON.
    pub json_bytes: usize,
    /// Heap bytes a clone of each object and of its key in the store allocate (parts shared
    /// between objects, such as interned install strategies, count as none): what the decoded
    /// objects cost, but for the store's hash table.
    pub heap_bytes: usize,
}

/// Every cache made while `OLM_DEBUG_CACHES` was set. A memory investigation's figure of what
/// each kind holds; it serializes and clones every object, so it is for debugging only.
/// `thread_allocated` reads the bytes this thread has allocated so far (jemalloc's
/// `thread.allocated`), which tells the heap bytes of each clone.
pub fn census(thread_allocated: fn() -> u64) -> Vec<CacheCensus> {
    let caches = CENSUS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    caches.iter().map(|(name, count)| {
        let (objects, json_bytes, heap_bytes) = count(thread_allocated);
        CacheCensus { name: name.clone(), objects, json_bytes, heap_bytes }
    }).collect()
}

fn register_census<K: Resource<DynamicType = ()> + Clone + Serialize + Send + Sync + 'static>(name: &str, store: &Store<K>) {
    if std::env::var_os("OLM_DEBUG_CACHES").is_none() {
        return;
    }
    let store = store.clone();
    let count: Census = Box::new(move |thread_allocated| {
        let objects = store.state();
        let json_bytes = objects.iter().map(|o| serde_json::to_vec(o.as_ref()).map_or(0, |v| v.len())).sum();
        let heap_bytes = objects.iter().map(|o| {
            let before = thread_allocated();
            let copy = (K::clone(o), ObjectRef::from_obj(o.as_ref()));
            let after = thread_allocated();
            drop(copy);
            after.saturating_sub(before) as usize
        }).sum();
        (objects.len(), json_bytes, heap_bytes)
    });
    CENSUS.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push((name.to_owned(), count));
}

/// The annotation `kubectl apply` (client-side) records the applied object in.
const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// A watch cache of one resource type.
pub struct Cache<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    store: Store<K>,
    name: String,
    subscribers: Subscribers<K>,
    index: IndexSlot<K>,
    /// What this process wrote that the watch has not brought back yet ([`Cache::wrote`]).
    written: Arc<Written<K>>,
    /// What the watch does to every object before storing it (also done to written ones).
    trim: fn(&mut K),
    // kube's `Store::wait_until_ready` wakes only the last of several concurrent waiters, so
    // exactly one task waits on it and publishes the result here for everybody else.
    synced: tokio::sync::watch::Receiver<bool>,
}

/// The senders of every subscriber of one cache. Each subscriber gets its own unbounded
/// channel, so a slow controller never stalls the watch or the other subscribers, and no
/// change is ever dropped.
type Subscribers<K> = Arc<Mutex<Vec<mpsc::UnboundedSender<Arc<K>>>>>;

impl<K> Clone for Cache<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            name: self.name.clone(),
            subscribers: self.subscribers.clone(),
            index: self.index.clone(),
            written: self.written.clone(),
            trim: self.trim,
            synced: self.synced.clone(),
        }
    }
}

impl<K> Cache<K>
where
    K: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
{
    /// A cache holding `objects` that no watch changes: for tests of what reads a cache.
    pub fn holding(objects: impl IntoIterator<Item = K>) -> Self {
        let (store, mut writer) = reflector::store::<K>();
        for obj in objects {
            writer.apply_watcher_event(&watcher::Event::Apply(obj));
        }
        let (_synced_tx, synced) = tokio::sync::watch::channel(true);
        Cache {
            store,
            name: K::kind(&()).into_owned(),
            subscribers: Arc::default(),
            index: Arc::default(),
            written: Arc::default(),
            trim: |_| {},
            synced,
        }
    }

    /// The cache's name (used by `/readyz`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The store (read-only view of every object).
    pub fn store(&self) -> &Store<K> {
        &self.store
    }

    /// Every cached object.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.store.state()
    }

    /// Cached objects in `namespace`: from the namespace index when the cache has one
    /// ([`Cache::index_namespaces`]), else by a pass over every object.
    pub fn list_in(&self, namespace: &str) -> Vec<Arc<K>> {
        cache_index::in_namespace(&self.index, &self.store, namespace)
            .unwrap_or_else(|| self.store.state_filter(|obj| obj.meta().namespace.as_deref() == Some(namespace)))
    }

    /// Index the objects by namespace from now on, for [`Cache::list_in`]: for the caches
    /// that controllers read a namespace of on every pass (at 1,000 namespaces, a pass over
    /// every object per read was a tenth of `olm run`'s CPU).
    pub fn index_namespaces(&self) {
        cache_index::start_namespaces(&self.index, &self.store);
    }

    /// One object by namespace (None for cluster-scoped) and name: as this process last wrote
    /// it when the watch has not brought that write back yet ([`Cache::wrote`]).
    pub fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<K>> {
        let mut key = ObjectRef::<K>::new(name);
        if let Some(ns) = namespace {
            key = key.within(ns);
        }
        self.written.newer(&key, self.store.get(&key), std::time::Instant::now())
    }

    /// Record `answer`, the API server's answer to a write of an object this cache holds (it
    /// must match the cache's selector): [`Cache::get`] returns it until the watch brings the
    /// write, so that a pass woken meanwhile does not write it again.
    pub fn wrote(&self, mut answer: K) {
        let key = ObjectRef::from_obj(&answer);
        let stored = self.store.get(&key);
        prepare(&mut answer, self.trim);
        self.written.record(stored.as_deref(), Arc::new(answer), std::time::Instant::now());
    }

    /// Index the objects by `keys` too from now on (see [`Cache::indexed`]). Every clone of
    /// the cache shares the index, and several readers may add their keys: a key two readers'
    /// functions share only gives each more objects to filter.
    pub fn index_by(&self, keys: KeysOf<K>) {
        cache_index::start(&self.index, &self.store, keys);
    }

    /// The objects whose keys include `key`, as the store holds them now; None when the cache
    /// has no index.
    pub fn indexed(&self, key: u64) -> Option<Vec<Arc<K>>> {
        cache_index::get(&self.index, &self.store, key)
    }

    /// The objects `keep` accepts, among those under `key` when the cache is indexed by keys
    /// (every object `keep` accepts must have `key` among its keys), else among all.
    pub fn select(&self, key: u64, keep: impl Fn(&K) -> bool) -> Vec<Arc<K>> {
        match self.indexed(key) {
            Some(found) => found.into_iter().filter(|obj| keep(obj)).collect(),
            None => self.store.state_filter(keep),
        }
    }

    /// Wait for the initial list (returns at once when it already finished).
    pub async fn synced(&self) {
        let mut synced = self.synced.clone();
        // An error means the watch task is gone (shutdown): nothing left to wait for.
        let _ = synced.wait_for(|ready| *ready).await;
    }

    /// Whether the initial list finished.
    pub fn is_synced(&self) -> bool {
        *self.synced.borrow()
    }

    /// A stream of every object that changed (applied or deleted; deleted objects are no
    /// longer in the store). Subscribe before `Caches::start` to also see the initial list.
    pub fn subscribe(&self) -> impl Stream<Item = Arc<K>> + Send + 'static + use<K> {
        let (tx, rx) = mpsc::unbounded();
        self.subscribers.lock().unwrap_or_else(|p| p.into_inner()).push(tx);
        rx
    }

    /// A trigger stream that yields nothing but calls `forget` with each object deleted (gone
    /// from the store when its change arrives): for state a controller keeps beside the cache,
    /// since a deleted object is not reconciled. Pass it to `Controller::reconcile_on`.
    pub fn deleted<F>(&self, forget: F) -> impl Stream<Item = ObjectRef<K>> + Send + 'static + use<K, F>
    where
        F: Fn(&K) + Send + 'static,
    {
        let store = self.store.clone();
        self.subscribe().filter_map(move |obj| {
            if store.get(&ObjectRef::from_obj(obj.as_ref())).is_none() {
                forget(&obj);
            }
            futures::future::ready(None)
        })
    }

    /// Like [`Cache::subscribe`], but only the objects whose `view` differs from the one of
    /// their previous change (and new and deleted objects): a controller that reads part of an
    /// object is not woken by the rest. (A CatalogSource's status moves with every registry
    /// poll; waking every Subscription of the cluster for it was most of their reconciles.)
    /// Only a digest of each view is kept, so the memory is a few words per object.
    pub fn subscribe_changes<V>(&self, view: fn(&K) -> V) -> impl Stream<Item = Arc<K>> + Send + 'static + use<K, V>
    where
        V: std::hash::Hash + 'static,
    {
        let store = self.store.clone();
        let mut seen: std::collections::HashMap<(Option<String>, String), u64> = std::collections::HashMap::new();
        self.subscribe().filter_map(move |obj| {
            let key = (obj.meta().namespace.clone(), obj.meta().name.clone().unwrap_or_default());
            let present = store.get(&ObjectRef::from_obj(obj.as_ref())).is_some();
            let changed = if present {
                let current = digest(view(&obj));
                let changed = seen.get(&key) != Some(&current);
                seen.insert(key, current);
                changed
            } else {
                seen.remove(&key);
                true
            };
            futures::future::ready(changed.then_some(obj))
        })
    }
}

/// Hand a watch event, already applied to `store`, to the subscribers. A changed object goes
/// as the store holds it, so however many subscribers there are and however long they take to
/// read it, it is one copy; a deleted one as the event carries it. The objects of a (re)list go
/// together once it is done, from the store: sent one by one as listed, each was a second copy,
/// held until controllers that start only once every cache has listed read it (1,000
/// namespaces: a restarted `olm run` ended 40 MB larger than the first).
fn fan_out<K>(event: &watcher::Event<K>, store: &Store<K>, subscribers: &Subscribers<K>, index: &IndexSlot<K>)
where
    K: Resource<DynamicType = ()> + Clone,
{
    let send = |objects: &mut dyn Iterator<Item = Arc<K>>| {
        let mut subs = subscribers.lock().unwrap_or_else(|p| p.into_inner());
        for obj in objects {
            // A closed channel means its controller stopped: forget it.
            subs.retain(|tx| tx.unbounded_send(obj.clone()).is_ok());
        }
    };
    match event {
        watcher::Event::Apply(obj) => {
            let stored = store.get(&ObjectRef::from_obj(obj)).unwrap_or_else(|| Arc::new(obj.clone()));
            cache_index::applied(index, &stored);
            send(&mut std::iter::once(stored));
        }
        watcher::Event::Delete(obj) => {
            cache_index::gone(index, obj);
            send(&mut std::iter::once(Arc::new(obj.clone())));
        }
        watcher::Event::InitDone => {
            cache_index::relisted(index, store);
            send(&mut store.state().into_iter());
        }
        watcher::Event::Init | watcher::Event::InitApply(_) => {}
    }
}

/// A digest of `value` that stays the same within the process (what a change filter keeps of
/// each object instead of the object).
pub fn digest(value: impl std::hash::Hash) -> u64 {
    std::hash::BuildHasher::hash_one(&std::hash::BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default(), value)
}

/// What a cache does to every object before storing it: drop what no controller reads and
/// every object may carry, then `trim` it the way its cache asks.
pub fn prepare<K: Resource>(obj: &mut K, trim: fn(&mut K)) {
    let meta = obj.meta_mut();
    // No controller reads managedFields, and they are often a third of an object: keeping them
    // would grow memory with every namespace for nothing.
    meta.managed_fields = None;
    // kubectl's client-side apply keeps a whole second copy of the object here; no controller
    // reads it.
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove(LAST_APPLIED_ANNOTATION);
    }
    trim(obj);
}

/// Equal values held once. Caches of many objects that carry the same large part (every
/// namespace's CSV of one operator has the same install strategy) keep a single copy of it:
/// a cache's `trim` swaps each object's part for the shared one. Values are found by a
/// digest (the function the interner is made with) and confirmed equal; entries whose every holder is gone are pruned
/// as new values arrive, so the interner never keeps a value alive.
pub struct Interner<T> {
    digest: fn(&T) -> Option<u64>,
    entries: Mutex<InternerEntries<T>>,
}

struct InternerEntries<T> {
    by_digest: std::collections::HashMap<u64, Vec<std::sync::Weak<T>>>,
    inserted_since_prune: usize,
}

impl<T: PartialEq> Interner<T> {
    /// An interner that finds equal values by `digest` (None: the value is not shared).
    pub fn new(digest: fn(&T) -> Option<u64>) -> Self {
        Interner {
            digest,
            entries: Mutex::new(InternerEntries { by_digest: Default::default(), inserted_since_prune: 0 }),
        }
    }

    /// Replace `value` with the held equal value, or hold it as the first of its kind.
    pub fn intern(&self, value: &mut Arc<T>) {
        let Some(digest) = (self.digest)(value) else {
            return;
        };
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let bucket = entries.by_digest.entry(digest).or_default();
        if let Some(existing) = bucket.iter().filter_map(std::sync::Weak::upgrade).find(|held| **held == **value) {
            *value = existing;
            return;
        }
        bucket.push(Arc::downgrade(value));
        entries.inserted_since_prune += 1;
        if entries.inserted_since_prune >= 256 {
            entries.inserted_since_prune = 0;
            entries.by_digest.retain(|_, bucket| {
                bucket.retain(|held| held.strong_count() > 0);
                !bucket.is_empty()
            });
        }
    }

    /// Number of distinct values with a holder.
    pub fn len(&self) -> usize {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.by_digest.values().flatten().filter(|held| held.strong_count() > 0).count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The set of caches of a process. Create caches, subscribe controllers, then `start`.
/// Dropping the set stops its watches.
#[derive(Default)]
pub struct Caches {
    readiness: Readiness,
    pending: Vec<BoxFuture<'static, Vec<tokio::task::JoinHandle<()>>>>,
    running: Vec<tokio::task::JoinHandle<()>>,
    /// Where the watches run (decoding and storing objects): a dedicated thread's runtime, or
    /// the caller's when None.
    watch_runtime: Option<tokio::runtime::Handle>,
}

impl Drop for Caches {
    fn drop(&mut self) {
        // The watches belong to this set: stop them with it.
        for task in &self.running {
            task.abort();
        }
    }
}

impl Caches {
    /// Caches that report their initial sync to `readiness`.
    pub fn new(readiness: Readiness) -> Self {
        Self {
            readiness,
            pending: Vec::new(),
            running: Vec::new(),
            watch_runtime: None,
        }
    }

    /// Run the watches on a dedicated thread (a single-threaded runtime), which calls `init`
    /// first. Falls back to the caller's runtime when the thread cannot be started.
    pub fn on_own_thread(mut self, init: fn()) -> Self {
        let (tx, rx) = std::sync::mpsc::channel();
        let started = std::thread::Builder::new().name("olm-caches".into()).spawn(move || {
            init();
            match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(runtime) => {
                    let _ = tx.send(Some(runtime.handle().clone()));
                    // Runs until the process exits; the watch tasks are aborted with their set.
                    runtime.block_on(std::future::pending::<()>());
                }
                Err(err) => {
                    tracing::warn!(%err, "cannot start the caches' runtime; watches run on the main one");
                    let _ = tx.send(None);
                }
            }
        });
        if started.is_ok() {
            self.watch_runtime = rx.recv().ok().flatten();
        }
        self
    }

    /// The readiness tracker the caches report to.
    pub fn readiness(&self) -> &Readiness {
        &self.readiness
    }

    /// Add a cache of `api` filtered by `config`. The watch runs only after `start`.
    pub fn watch<K>(&mut self, api: Api<K>, config: watcher::Config) -> Cache<K>
    where
        K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Serialize + Send + Sync + 'static,
    {
        self.watch_trimmed(api, config, |_| {})
    }

    /// Like [`Caches::watch`], with `trim` applied to every object before it is stored: for
    /// fields no controller reads, which would otherwise cost memory for every object.
    pub fn watch_trimmed<K>(&mut self, api: Api<K>, config: watcher::Config, trim: fn(&mut K)) -> Cache<K>
    where
        K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Serialize + Send + Sync + 'static,
    {
        let name = match &config.label_selector {
            Some(selector) => format!("{}[{selector}]", K::kind(&())),
            None => K::kind(&()).into_owned(),
        };
        let (store, writer) = reflector::store::<K>();
        register_census(&name, &store);
        let subscribers: Subscribers<K> = Arc::default();
        let index: IndexSlot<K> = Arc::default();
        self.readiness.register(name.clone());
        let (synced_tx, synced_rx) = tokio::sync::watch::channel(false);
        let written: Arc<Written<K>> = Arc::default();
        let cache = Cache {
            store: store.clone(),
            name: name.clone(),
            subscribers: subscribers.clone(),
            index: index.clone(),
            written: written.clone(),
            trim,
            synced: synced_rx,
        };
        let readiness = self.readiness.clone();
        let watch_runtime = self.watch_runtime.clone();
        self.pending.push(Box::pin(async move {
            let ready_store = store.clone();
            let ready_name = name.clone();
            let ready_task = tokio::spawn(async move {
                if ready_store.wait_until_ready().await.is_ok() {
                    tracing::info!(cache = %ready_name, objects = ready_store.len(), "watch cache synced");
                    readiness.mark_ready(&ready_name);
                    synced_tx.send_replace(true);
                }
            });
            let fan_out_store = store.clone();
            let arriving_index = index.clone();
            let watch = async move {
                watcher(api, config)
                    .default_backoff()
                    .modify(move |obj| prepare(obj, trim))
                    // Named in the namespace index before the store has them (see cache_index).
                    .inspect_ok(move |event| {
                        if let watcher::Event::Apply(obj) | watcher::Event::InitApply(obj) = event {
                            cache_index::arriving(&arriving_index, obj);
                        }
                    })
                    .reflect(writer)
                    .for_each(|event| {
                        match event {
                            Ok(event) => {
                                match &event {
                                    watcher::Event::Apply(obj) | watcher::Event::Delete(obj) => written.seen(&ObjectRef::from_obj(obj)),
                                    watcher::Event::Init => written.forget_all(),
                                    watcher::Event::InitApply(_) | watcher::Event::InitDone => {}
                                }
                                fan_out(&event, &fan_out_store, &subscribers, &index);
                            }
                            Err(err) => {
                                tracing::warn!(cache = %name, %err, "watch failed; retrying with backoff");
                            }
                        }
                        futures::future::ready(())
                    })
                    .await;
            };
            let watch_task = match &watch_runtime {
                Some(runtime) => runtime.spawn(watch),
                None => tokio::spawn(watch),
            };
            vec![ready_task, watch_task]
        }));
        cache
    }

    /// Start every watch. Subscriptions must have been taken before.
    pub async fn start(&mut self) {
        let pending: Vec<_> = self.pending.drain(..).collect();
        for start in pending {
            let tasks = start.await;
            self.running.extend(tasks);
        }
    }
}

/// Wait until every cache in `names` reports synced through `readiness`.
pub async fn wait_synced(readiness: &Readiness, names: &[&str]) {
    loop {
        let pending = readiness.pending();
        if names.iter().all(|name| !pending.iter().any(|p| p == name)) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}


#[cfg(test)]
mod tests {
    use super::{Cache, Interner, Subscribers};
    use futures::{FutureExt, StreamExt};
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::{reflector, watcher};
    use std::collections::BTreeMap;
    use std::sync::Arc;

    fn config_map(uid: &str, data: &str, resource_version: &str) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some("a".into());
        cm.metadata.namespace = Some("ns".into());
        cm.metadata.uid = Some(uid.into());
        cm.metadata.resource_version = Some(resource_version.into());
        cm.data = Some(BTreeMap::from([("k".to_string(), data.to_string())]));
        cm
    }

    #[test]
    fn a_change_subscriber_sees_new_changed_and_deleted_objects_only() {
        let (store, mut writer) = reflector::store::<ConfigMap>();
        let subscribers: Subscribers<ConfigMap> = Arc::default();
        let (_synced_tx, synced) = tokio::sync::watch::channel(true);
        let cache = Cache { store, name: "ConfigMap".into(), subscribers: subscribers.clone(), index: Default::default(), written: Default::default(), trim: |_| {}, synced };
        let mut changes = Box::pin(cache.subscribe_changes(|cm: &ConfigMap| (cm.metadata.uid.clone(), cm.data.clone())));
        // What the watch task does with each event: store, then fan out.
        let fan_out_store = cache.store.clone();
        let mut emit = |event: watcher::Event<ConfigMap>| {
            writer.apply_watcher_event(&event);
            super::fan_out(&event, &fan_out_store, &subscribers, &Default::default());
        };
        let mut next = || changes.next().now_or_never().flatten().map(|cm| cm.metadata.resource_version.clone().unwrap());
        emit(watcher::Event::Apply(config_map("u1", "1", "10")));
        assert_eq!(next().as_deref(), Some("10"), "a new object");
        // Only the resourceVersion moved (a status write, say): nobody is woken.
        emit(watcher::Event::Apply(config_map("u1", "1", "11")));
        assert_eq!(next(), None, "nothing read changed");
        emit(watcher::Event::Apply(config_map("u1", "2", "12")));
        assert_eq!(next().as_deref(), Some("12"), "a change");
        emit(watcher::Event::Delete(config_map("u1", "2", "13")));
        assert_eq!(next().as_deref(), Some("13"), "a deletion");
        // Re-created with what it had: new again.
        emit(watcher::Event::Apply(config_map("u2", "2", "14")));
        assert_eq!(next().as_deref(), Some("14"), "a new object of the same name");
        // Deleted and re-created before the subscriber looks: the new object still wakes it.
        emit(watcher::Event::Delete(config_map("u2", "2", "15")));
        emit(watcher::Event::Apply(config_map("u3", "2", "16")));
        assert_eq!(next().as_deref(), Some("16"));
        assert_eq!(next(), None);
    }

    #[test]
    fn subscribers_get_the_stored_copy_and_a_list_once_it_is_done() {
        let (store, mut writer) = reflector::store::<ConfigMap>();
        let subscribers: Subscribers<ConfigMap> = Arc::default();
        let (_synced_tx, synced) = tokio::sync::watch::channel(true);
        let cache = Cache { store: store.clone(), name: "ConfigMap".into(), subscribers: subscribers.clone(), index: Default::default(), written: Default::default(), trim: |_| {}, synced };
        let (mut first, mut second) = (Box::pin(cache.subscribe()), Box::pin(cache.subscribe()));
        let mut emit = |event: watcher::Event<ConfigMap>| {
            writer.apply_watcher_event(&event);
            super::fan_out(&event, &store, &subscribers, &Default::default());
        };
        emit(watcher::Event::Init);
        emit(watcher::Event::InitApply(config_map("u1", "1", "10")));
        assert!(first.next().now_or_never().is_none(), "nothing while the list goes on");
        emit(watcher::Event::InitDone);
        let listed = first.next().now_or_never().flatten().expect("the listed object once the list is done");
        assert_eq!(listed.metadata.resource_version.as_deref(), Some("10"));
        emit(watcher::Event::Apply(config_map("u1", "2", "11")));
        let _listed = second.next().now_or_never().flatten().expect("the listed object");
        let (a, b) = (first.next().now_or_never().flatten().expect("a change"), second.next().now_or_never().flatten().expect("a change"));
        assert!(Arc::ptr_eq(&a, &b), "one copy for every subscriber");
        assert!(Arc::ptr_eq(&a, &cache.get(Some("ns"), "a").expect("stored")), "the store's own");
    }

    #[test]
    fn equal_values_are_held_once_and_dropped_values_are_forgotten() {
        // A digest that puts every value in one bucket: equality alone must tell them apart.
        let interner = Interner::<Vec<String>>::new(|_| Some(0));
        let mut a = Arc::new(vec!["x".to_string(), "y".to_string()]);
        let mut b = Arc::new(vec!["x".to_string(), "y".to_string()]);
        let mut c = Arc::new(vec!["z".to_string()]);
        interner.intern(&mut a);
        interner.intern(&mut b);
        interner.intern(&mut c);
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(interner.len(), 2);
        drop((a, b));
        // The interner holds no value alive.
        assert_eq!(interner.len(), 1);
        let mut again = Arc::new(vec!["x".to_string(), "y".to_string()]);
        let before = Arc::as_ptr(&again);
        interner.intern(&mut again);
        assert_eq!(Arc::as_ptr(&again), before, "a value whose holders are gone is not revived");
        assert_eq!(interner.len(), 2);
    }
}
