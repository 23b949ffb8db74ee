//! One writer at a time per CRD. A shared CRD (every install of an operator brings it) is
//! written by each install: its plan applies it with the installed-alongside annotations, and the
//! Operator controller labels it for the install's Operator. Concurrent writes of one object
//! make the API server retry each against the others (1,000 namespaces: 6.5 s per CRD write on
//! the server, and every install waiting on them), and a read-modify-write of its annotations
//! racing another loses one of them. Within this process they go one after the other.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The per-CRD locks, shared by the controllers that write CRDs (cloning shares them).
#[derive(Clone, Default)]
pub struct CrdWrites(Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>);

impl CrdWrites {
    /// Wait until no other writer of the CRD `name` holds it; the guard holds it.
    pub async fn lock(&self, name: &str) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = {
            let mut locks = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            locks.entry(name.to_owned()).or_default().clone()
        };
        lock.lock_owned().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn writers_of_one_crd_wait_for_each_other_and_others_do_not() {
        let writes = CrdWrites::default();
        let held = writes.lock("etcdclusters.etcd.database.coreos.com").await;
        let same = writes.clone();
        let mut waiting = tokio::spawn(async move { same.lock("etcdclusters.etcd.database.coreos.com").await });
        let other = tokio::time::timeout(std::time::Duration::from_secs(1), writes.lock("etcdbackups.etcd.database.coreos.com")).await;
        assert!(other.is_ok(), "another CRD is not held");
        assert!(tokio::time::timeout(std::time::Duration::from_millis(100), &mut waiting).await.is_err(), "the same CRD waits");
        drop(held);
        assert!(tokio::time::timeout(std::time::Duration::from_secs(1), waiting).await.is_ok(), "and goes once released");
    }
}
