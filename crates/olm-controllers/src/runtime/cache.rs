//! Shared watch caches: one watch per resource type for the whole process, read by every
//! controller through a `Store`, and fanned out to controllers as shared trigger streams.

use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use futures::{Stream, StreamExt, future::BoxFuture};
use kube::runtime::reflector::{self, ObjectRef, ReflectHandle, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

use super::admin::Readiness;

/// Events buffered per shared stream before the watch waits for slow subscribers.
const SUBSCRIBER_BUFFER: usize = 1024;

/// A watch cache of one resource type.
pub struct Cache<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    store: Store<K>,
    name: String,
    // The writer stays here until the cache starts, so subscriptions see every event.
    writer: Arc<Mutex<Option<Writer<K>>>>,
}

impl<K> Clone for Cache<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            name: self.name.clone(),
            writer: self.writer.clone(),
        }
    }
}

/// Subscribing after the caches started would miss the initial list.
#[derive(Debug, thiserror::Error)]
#[error("cannot subscribe to the {0} cache after it started")]
pub struct AlreadyStarted(pub String);

impl<K> Cache<K>
where
    K: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
{
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

    /// Cached objects in `namespace`.
    pub fn list_in(&self, namespace: &str) -> Vec<Arc<K>> {
        self.store
            .state_filter(|obj| obj.meta().namespace.as_deref() == Some(namespace))
    }

    /// One object by namespace (None for cluster-scoped) and name.
    pub fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<K>> {
        let mut key = ObjectRef::<K>::new(name);
        if let Some(ns) = namespace {
            key = key.within(ns);
        }
        self.store.get(&key)
    }

    /// Whether the initial list finished.
    pub fn is_synced(&self) -> bool {
        // The store is ready once the writer saw the first complete list.
        futures::FutureExt::now_or_never(self.store.wait_until_ready()).is_some_and(|r| r.is_ok())
    }

    /// A stream of objects as they change, shared with the other subscribers.
    pub fn subscribe(&self) -> Result<ReflectHandle<K>, AlreadyStarted> {
        let writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        writer
            .as_ref()
            .and_then(Writer::subscribe)
            .ok_or_else(|| AlreadyStarted(self.name.clone()))
    }
}

/// The set of caches of a process. Create caches, subscribe controllers, then `start`.
#[derive(Default)]
pub struct Caches {
    readiness: Readiness,
    pending: Vec<BoxFuture<'static, ()>>,
}

impl Caches {
    /// Caches that report their initial sync to `readiness`.
    pub fn new(readiness: Readiness) -> Self {
        Self {
            readiness,
            pending: Vec::new(),
        }
    }

    /// The readiness tracker the caches report to.
    pub fn readiness(&self) -> &Readiness {
        &self.readiness
    }

    /// Add a cache of `api` filtered by `config`. The watch runs only after `start`.
    pub fn watch<K>(&mut self, api: Api<K>, config: watcher::Config) -> Cache<K>
    where
        K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    {
        let name = match &config.label_selector {
            Some(selector) => format!("{}[{selector}]", K::kind(&())),
            None => K::kind(&()).into_owned(),
        };
        let (store, writer) = reflector::store_shared::<K>(SUBSCRIBER_BUFFER);
        let writer = Arc::new(Mutex::new(Some(writer)));
        self.readiness.register(name.clone());
        let cache = Cache {
            store: store.clone(),
            name: name.clone(),
            writer: writer.clone(),
        };
        let readiness = self.readiness.clone();
        self.pending.push(Box::pin(async move {
            let Some(writer) = writer.lock().unwrap_or_else(|p| p.into_inner()).take() else {
                return;
            };
            let watch_name = name.clone();
            let ready_store = store.clone();
            let ready_name = name.clone();
            tokio::spawn(async move {
                if ready_store.wait_until_ready().await.is_ok() {
                    tracing::info!(cache = %ready_name, objects = ready_store.len(), "watch cache synced");
                    readiness.mark_ready(&ready_name);
                }
            });
            tokio::spawn(async move {
                watcher(api, config)
                    .default_backoff()
                    .reflect_shared(writer)
                    .for_each(|event| {
                        if let Err(err) = event {
                            tracing::warn!(cache = %watch_name, %err, "watch failed; retrying with backoff");
                        }
                        futures::future::ready(())
                    })
                    .await;
            });
        }));
        cache
    }

    /// Start every watch. Subscriptions must have been taken before.
    pub async fn start(&mut self) {
        for start in self.pending.drain(..) {
            start.await;
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

/// Turn a shared handle into a plain stream of objects (for `Controller::for_shared_stream`).
pub fn objects<K>(handle: ReflectHandle<K>) -> impl Stream<Item = Arc<K>> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
{
    handle.boxed()
}
