//! One writer at a time per CRD, and one write for every install waiting with the same CRD.
//!
//! A shared CRD (every install of an operator brings it) is written by each install: its plan
//! applies it with the installed-alongside annotations and the install's Operator label (and
//! the Operator controller labels a CRD installed otherwise). Concurrent writes of one object
//! make the API server retry each against the others (1,000 namespaces: 6.5 s per CRD write on
//! the server, and every install waiting on them), and a read-modify-write of its annotations
//! racing another loses one of them. Within this process they go one after the other.
//!
//! One after the other is still one read and one write of an object that grows with every
//! install (1,000 namespaces: a thousand annotations and labels), so the plans that wait for a
//! CRD with the same manifest join their shares (the CSV an annotation names, the Operator
//! label): whichever gets the CRD first writes every share waiting, and the others find theirs
//! written (group commit).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::api::DynamicObject;

/// One CRD step's part of a write: the CSV it installs (its installed-alongside annotation) and
/// its Operator component labels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Share {
    /// Namespace of the CSV.
    pub namespace: String,
    /// Name of the CSV.
    pub csv: String,
    /// The step's `operators.coreos.com/<operator>` labels.
    pub labels: BTreeMap<String, String>,
}

struct Waiting {
    ticket: u64,
    /// Digest of the step's manifest without its shares: only equal manifests share a write.
    manifest: u64,
    share: Share,
    /// The CRD as the write that carried this share left it.
    written: Option<Arc<DynamicObject>>,
}

#[derive(Default)]
struct Inner {
    locks: HashMap<String, Arc<tokio::sync::Mutex<()>>>,
    waiting: HashMap<String, Vec<Waiting>>,
    next_ticket: u64,
    /// (CRD, Operator label) → when a write of this process carried it, for [`LABELS_SETTLE`].
    labelled: HashMap<(String, String), Instant>,
}

/// How long a label a write carried is taken as on the CRD while the watch cache may not show
/// it yet (a shared CRD's events are as large as its thousand installs' labels, and come late).
const LABELS_SETTLE: Duration = Duration::from_secs(60);

/// The per-CRD locks and waiting shares, shared by the controllers that write CRDs (cloning
/// shares them).
#[derive(Clone, Default)]
pub struct CrdWrites(Arc<Mutex<Inner>>);

impl CrdWrites {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Wait until no other writer of the CRD `name` holds it; the guard holds it.
    pub async fn lock(&self, name: &str) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = self.inner().locks.entry(name.to_owned()).or_default().clone();
        lock.lock_owned().await
    }

    /// Whether a write of the CRD `name` by this process carried the Operator label `label`
    /// lately: the Operator controller, which labels a CRD its cache shows without the label,
    /// would otherwise label it again when the plan's write is not in its cache yet.
    pub fn labelled_lately(&self, name: &str, label: &str, now: Instant) -> bool {
        let inner = self.inner();
        inner.labelled.get(&(name.to_owned(), label.to_owned())).is_some_and(|at| now.duration_since(*at) < LABELS_SETTLE)
    }

    /// A write of the CRD `name` carried `labels`.
    pub fn carried(&self, name: &str, labels: impl IntoIterator<Item = String>, now: Instant) {
        let mut inner = self.inner();
        inner.labelled.retain(|_, at| now.duration_since(*at) < LABELS_SETTLE);
        for label in labels {
            inner.labelled.insert((name.to_owned(), label), now);
        }
    }

    /// Offer `share` for the next write of the CRD `name` with a manifest of digest
    /// `manifest`; then take the lock and ask the ticket whether it was written meanwhile.
    pub fn join(&self, name: &str, manifest: u64, share: Share) -> Ticket {
        let mut inner = self.inner();
        inner.next_ticket += 1;
        let ticket = inner.next_ticket;
        inner.waiting.entry(name.to_owned()).or_default().push(Waiting { ticket, manifest, share, written: None });
        Ticket { writes: self.clone(), crd: name.to_owned(), id: ticket }
    }
}

/// A share waiting for a write of its CRD; dropping it withdraws the share.
pub struct Ticket {
    writes: CrdWrites,
    crd: String,
    id: u64,
}

impl Ticket {
    /// The CRD as another step's write left it, when that write carried this share.
    pub fn written(&self) -> Option<Arc<DynamicObject>> {
        let inner = self.writes.inner();
        inner.waiting.get(&self.crd)?.iter().find(|w| w.ticket == self.id)?.written.clone()
    }

    /// The shares to write now (hold the CRD's lock): this one's first, then every other one
    /// waiting, not yet written, with the same manifest.
    pub fn batch(&self) -> Vec<(u64, Share)> {
        let inner = self.writes.inner();
        let Some(waiting) = inner.waiting.get(&self.crd) else { return Vec::new() };
        let Some(own) = waiting.iter().find(|w| w.ticket == self.id) else { return Vec::new() };
        let mut batch = vec![(own.ticket, own.share.clone())];
        batch.extend(
            waiting
                .iter()
                .filter(|w| w.ticket != self.id && w.manifest == own.manifest && w.written.is_none())
                .map(|w| (w.ticket, w.share.clone())),
        );
        batch
    }

    /// The write of `tickets`' shares succeeded and left the CRD as `object`.
    pub fn wrote(&self, tickets: &[u64], object: Arc<DynamicObject>) {
        let mut labels = Vec::new();
        {
            let mut inner = self.writes.inner();
            for waiting in inner.waiting.get_mut(&self.crd).into_iter().flatten() {
                if tickets.contains(&waiting.ticket) {
                    labels.extend(waiting.share.labels.keys().cloned());
                    if waiting.ticket != self.id {
                        waiting.written = Some(object.clone());
                    }
                }
            }
        }
        self.writes.carried(&self.crd, labels, Instant::now());
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut inner = self.writes.inner();
        if let Some(waiting) = inner.waiting.get_mut(&self.crd) {
            waiting.retain(|w| w.ticket != self.id);
            if waiting.is_empty() {
                inner.waiting.remove(&self.crd);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CRD: &str = "etcdclusters.etcd.database.coreos.com";

    fn share(namespace: &str) -> Share {
        Share {
            namespace: namespace.into(),
            csv: "etcdoperator.v0.9.4".into(),
            labels: BTreeMap::from([(format!("operators.coreos.com/etcd.{namespace}"), String::new())]),
        }
    }

    #[tokio::test]
    async fn writers_of_one_crd_wait_for_each_other_and_others_do_not() {
        let writes = CrdWrites::default();
        let held = writes.lock(CRD).await;
        let same = writes.clone();
        let mut waiting = tokio::spawn(async move { same.lock(CRD).await });
        let other = tokio::time::timeout(std::time::Duration::from_secs(1), writes.lock("etcdbackups.etcd.database.coreos.com")).await;
        assert!(other.is_ok(), "another CRD is not held");
        assert!(tokio::time::timeout(std::time::Duration::from_millis(100), &mut waiting).await.is_err(), "the same CRD waits");
        drop(held);
        assert!(tokio::time::timeout(std::time::Duration::from_secs(1), waiting).await.is_ok(), "and goes once released");
    }

    #[test]
    fn the_first_writer_carries_every_share_waiting_with_the_same_manifest() {
        let writes = CrdWrites::default();
        let a = writes.join(CRD, 1, share("a"));
        let b = writes.join(CRD, 1, share("b"));
        let other_manifest = writes.join(CRD, 2, share("c"));
        let other_crd = writes.join("etcdbackups.etcd.database.coreos.com", 1, share("d"));
        let batch = a.batch();
        assert_eq!(batch.iter().map(|(_, s)| s.namespace.as_str()).collect::<Vec<_>>(), ["a", "b"]);
        let object = Arc::new(DynamicObject::new(CRD, &kube::api::ApiResource::erase::<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>(&())));
        a.wrote(&batch.iter().map(|(t, _)| *t).collect::<Vec<_>>(), object.clone());
        assert!(b.written().is_some_and(|o| Arc::ptr_eq(&o, &object)), "b finds its share written");
        assert!(other_manifest.written().is_none(), "another manifest writes itself");
        assert!(other_crd.written().is_none());
        assert_eq!(other_manifest.batch().len(), 1, "a written share is not written again");
        // The Operator controller sees the labels the write carried as on the CRD for a while.
        let now = Instant::now();
        for labelled in ["operators.coreos.com/etcd.a", "operators.coreos.com/etcd.b"] {
            assert!(writes.labelled_lately(CRD, labelled, now), "{labelled}");
            assert!(!writes.labelled_lately(CRD, labelled, now + LABELS_SETTLE), "{labelled} after a while");
        }
        assert!(!writes.labelled_lately(CRD, "operators.coreos.com/etcd.c", now), "not written yet");
        assert!(!writes.labelled_lately("etcdbackups.etcd.database.coreos.com", "operators.coreos.com/etcd.a", now), "another CRD");
    }

    #[test]
    fn a_failed_write_leaves_the_others_to_write_themselves_and_a_dropped_ticket_withdraws() {
        let writes = CrdWrites::default();
        let a = writes.join(CRD, 1, share("a"));
        let b = writes.join(CRD, 1, share("b"));
        assert_eq!(a.batch().len(), 2);
        drop(a);
        assert!(b.written().is_none(), "nothing was written for b");
        assert_eq!(b.batch().iter().map(|(_, s)| s.namespace.as_str()).collect::<Vec<_>>(), ["b"]);
        drop(b);
        assert!(writes.inner().waiting.is_empty(), "no share left behind");
    }
}
