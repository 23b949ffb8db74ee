//! The in-memory catalog cache shared by the CatalogSource controller (which fills it) and the
//! Subscription and InstallPlan controllers (which read it). Readers get `Arc`s of immutable
//! content; a refresh swaps the entry and notifies listeners with the catalog's key.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use futures::channel::mpsc;
use k8s_openapi::jiff::Timestamp;
use olm_resolver::CatalogKey;

use crate::CatalogContent;

/// The gRPC connectivity strings upstream writes in `status.connectionState.lastObservedState`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectionState {
    /// No attempt finished yet.
    Connecting,
    /// The last attempt read the catalog.
    Ready,
    /// The last attempt failed.
    TransientFailure,
}

impl ConnectionState {
    /// Upstream's string.
    pub fn as_str(self) -> &'static str {
        match self {
            ConnectionState::Connecting => "CONNECTING",
            ConnectionState::Ready => "READY",
            ConnectionState::TransientFailure => "TRANSIENT_FAILURE",
        }
    }
}

/// What we know about one catalog.
#[derive(Clone, Debug)]
pub struct CatalogState {
    /// Result of the last attempt.
    pub connection: ConnectionState,
    /// The last content read successfully (kept while the catalog is down, so installed
    /// operators and other catalogs are not disturbed; `connection` tells whether it is live).
    pub content: Option<Arc<CatalogContent>>,
    /// The error of the last attempt, when it failed.
    pub last_error: Option<String>,
    /// The category of that error.
    pub last_error_category: Option<&'static str>,
    /// When the catalog was last read successfully.
    pub last_connect: Option<Timestamp>,
    /// When the last attempt (successful or not) finished.
    pub last_attempt: Option<Timestamp>,
    /// Consecutive failed attempts.
    pub failures: u32,
    /// What the content was read from (address, ConfigMap resourceVersion, ...): a change
    /// means the content must be read again at once.
    pub fingerprint: String,
}

impl CatalogState {
    /// Whether the catalog can be used now.
    pub fn healthy(&self) -> bool {
        self.connection == ConnectionState::Ready
    }
}

/// The shared cache.
#[derive(Clone, Default)]
pub struct CatalogCache {
    entries: Arc<RwLock<HashMap<CatalogKey, CatalogState>>>,
    listeners: Arc<Mutex<Vec<mpsc::UnboundedSender<CatalogKey>>>>,
}

impl std::fmt::Debug for CatalogCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CatalogCache").finish_non_exhaustive()
    }
}

impl CatalogCache {
    /// The state of one catalog.
    pub fn get(&self, key: &CatalogKey) -> Option<CatalogState> {
        self.entries.read().unwrap_or_else(|p| p.into_inner()).get(key).cloned()
    }

    /// Every catalog known in `namespace`.
    pub fn in_namespace(&self, namespace: &str) -> Vec<(CatalogKey, CatalogState)> {
        let entries = self.entries.read().unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<_> = entries
            .iter()
            .filter(|(k, _)| k.namespace == namespace)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Replace the state of a catalog and tell listeners.
    pub fn set(&self, key: CatalogKey, state: CatalogState) {
        self.entries.write().unwrap_or_else(|p| p.into_inner()).insert(key.clone(), state);
        self.notify(key);
    }

    /// Replace the state of a catalog without telling listeners: for a refresh that changed
    /// nothing they read (the same content, still healthy).
    pub fn set_quietly(&self, key: CatalogKey, state: CatalogState) {
        self.entries.write().unwrap_or_else(|p| p.into_inner()).insert(key, state);
    }

    /// Forget a deleted catalog and tell listeners.
    pub fn remove(&self, key: &CatalogKey) {
        let removed = self.entries.write().unwrap_or_else(|p| p.into_inner()).remove(key);
        if removed.is_some() {
            self.notify(key.clone());
        }
    }

    /// Number of catalogs and how many are ready.
    pub fn counts(&self) -> (usize, usize) {
        let entries = self.entries.read().unwrap_or_else(|p| p.into_inner());
        (entries.len(), entries.values().filter(|s| s.healthy()).count())
    }

    fn notify(&self, key: CatalogKey) {
        let mut listeners = self.listeners.lock().unwrap_or_else(|p| p.into_inner());
        listeners.retain(|tx| tx.unbounded_send(key.clone()).is_ok());
    }

    /// A stream of the keys of catalogs whose state changed.
    pub fn subscribe(&self) -> mpsc::UnboundedReceiver<CatalogKey> {
        let (tx, rx) = mpsc::unbounded();
        self.listeners.lock().unwrap_or_else(|p| p.into_inner()).push(tx);
        rx
    }
}
