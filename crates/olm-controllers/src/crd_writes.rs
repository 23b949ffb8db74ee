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
//!
//! Each such write still costs the API server about 90 ms of CPU at a thousand installs (the
//! object is 250 KiB), so once this process has written a CRD's manifest, a plan that brings
//! the same manifest again within [`SHARE_WINDOW`] of the last write parks its share instead
//! of writing: its step waits (WaitingForApi) and looks again, and the first plan to come after
//! the window writes every parked share with its own (1,000 namespaces: 200 writes per CRD
//! before, a few dozen now). Only while the CRD is busy ([`BUSY_SHARES`] steps in
//! [`BUSY_SPAN`]): an install or upgrade now and then completes its plan as before. Nothing is
//! lost on a restart: a plan whose share no write of this process carried writes it itself.

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

/// A share parked until the next write of its CRD with the same manifest.
struct Parked {
    manifest: u64,
    share: Share,
    since: Instant,
}

/// What this process's last write of a CRD applied and left.
#[derive(Clone, Copy)]
struct LastWrite {
    /// Digest of the manifest without its shares.
    manifest: u64,
    /// `metadata.generation` the write left (a spec change by anyone else moves it on).
    generation: Option<i64>,
    at: Instant,
}

impl LastWrite {
    /// Whether the write applied the manifest of digest `manifest` and the CRD still has the
    /// generation it left (`generation`, from the watch cache).
    fn is_current(&self, manifest: u64, generation: Option<i64>) -> bool {
        self.manifest == manifest && self.generation.is_some() && self.generation == generation
    }
}

#[derive(Default)]
struct Inner {
    locks: HashMap<String, Arc<tokio::sync::Mutex<()>>>,
    waiting: HashMap<String, Vec<Waiting>>,
    next_ticket: u64,
    /// (CRD, Operator label) → when a write of this process carried it, for [`LABELS_SETTLE`].
    labelled: HashMap<(String, String), Instant>,
    parked: HashMap<String, Vec<Parked>>,
    last_write: HashMap<String, LastWrite>,
    /// (CRD, namespace, CSV) → when a write of this process carried that share, and whether
    /// it was parked (the CRD existed: the step is Present).
    carried: HashMap<(String, String, String), (Instant, bool)>,
    /// When steps brought a share of the CRD lately (within [`BUSY_SPAN`]).
    asked: HashMap<String, std::collections::VecDeque<Instant>>,
}

/// How long a label a write carried is taken as on the CRD while the watch cache may not show
/// it yet (a shared CRD's events are as large as its thousand installs' labels, and come late).
const LABELS_SETTLE: Duration = Duration::from_secs(60);

/// How long after this process wrote a CRD a share with the same manifest is parked rather
/// than written (see the module documentation). Plans wait at most about this long more to
/// complete; their CSVs and RBAC are applied meanwhile.
pub const SHARE_WINDOW: Duration = Duration::from_secs(5);

/// A CRD is busy, and shares of it are parked, while at least this many steps brought one in
/// the last [`BUSY_SPAN`] (1,000 namespaces: several a second).
pub const BUSY_SHARES: usize = 10;
/// See [`BUSY_SHARES`].
pub const BUSY_SPAN: Duration = Duration::from_secs(10);

/// How long a carried share is remembered for the plan that parked it, and a parked share
/// for a write (a plan looks again within seconds; one deleted meanwhile leaves its share).
const SHARE_MEMORY: Duration = Duration::from_secs(600);

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
    /// A label a parked share brings counts too: the next write carries it.
    pub fn labelled_lately(&self, name: &str, label: &str, now: Instant) -> bool {
        let inner = self.inner();
        inner.labelled.get(&(name.to_owned(), label.to_owned())).is_some_and(|at| now.duration_since(*at) < LABELS_SETTLE)
            || inner.parked.get(name).into_iter().flatten().any(|p| p.share.labels.contains_key(label))
    }

    /// Park `share` (of a step whose manifest has digest `manifest`) for the next write of the
    /// CRD `name`, when the CRD is busy, this process wrote that manifest less than
    /// [`SHARE_WINDOW`] ago and the CRD's generation (`generation`, from the watch cache) is
    /// still the one that write left: true when parked (or parked already), false when the
    /// step is to write now.
    pub fn park(&self, name: &str, manifest: u64, generation: Option<i64>, share: &Share, now: Instant) -> bool {
        let mut inner = self.inner();
        let asked = inner.asked.entry(name.to_owned()).or_default();
        while asked.front().is_some_and(|at| now.duration_since(*at) >= BUSY_SPAN) {
            asked.pop_front();
        }
        asked.push_back(now);
        if asked.len() < BUSY_SHARES {
            return false;
        }
        let Some(last) = inner.last_write.get(name).copied() else { return false };
        if !last.is_current(manifest, generation) || now.duration_since(last.at) >= SHARE_WINDOW {
            return false;
        }
        let parked = inner.parked.entry(name.to_owned()).or_default();
        parked.retain(|p| now.duration_since(p.since) < SHARE_MEMORY);
        if !parked.iter().any(|p| p.manifest == manifest && p.share.namespace == share.namespace && p.share.csv == share.csv) {
            parked.push(Parked { manifest, share: share.clone(), since: now });
        }
        true
    }

    /// Whether the manifest of digest `manifest` is what this process last wrote to the CRD
    /// `name` and nobody changed the CRD's spec since (`generation`, from the watch cache): a
    /// step bringing it again changes no spec and needs no upgrade check.
    pub fn spec_current(&self, name: &str, manifest: u64, generation: Option<i64>) -> bool {
        let inner = self.inner();
        inner.last_write.get(name).is_some_and(|last| last.is_current(manifest, generation))
    }

    /// Whether a write of this process carried the share of the CSV `namespace/csv` in the CRD
    /// `name`: `Some(parked)` if so (parked: it waited for another step's write).
    pub fn carried_share(&self, name: &str, namespace: &str, csv: &str) -> Option<bool> {
        let inner = self.inner();
        inner.carried.get(&(name.to_owned(), namespace.to_owned(), csv.to_owned())).map(|(_, parked)| *parked)
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

/// The shares one write carries.
#[derive(Debug, Default)]
pub struct Batch {
    manifest: u64,
    /// The waiting steps' shares, the writer's first.
    pub tickets: Vec<(u64, Share)>,
    /// The parked shares.
    pub parked: Vec<Share>,
}

impl Batch {
    /// Every share of the write.
    pub fn shares(&self) -> impl Iterator<Item = &Share> {
        self.tickets.iter().map(|(_, share)| share).chain(&self.parked)
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
    /// waiting, not yet written, with the same manifest, then those parked with it.
    pub fn batch(&self) -> Batch {
        let inner = self.writes.inner();
        let Some(waiting) = inner.waiting.get(&self.crd) else { return Batch::default() };
        let Some(own) = waiting.iter().find(|w| w.ticket == self.id) else { return Batch::default() };
        let mut tickets = vec![(own.ticket, own.share.clone())];
        tickets.extend(
            waiting
                .iter()
                .filter(|w| w.ticket != self.id && w.manifest == own.manifest && w.written.is_none())
                .map(|w| (w.ticket, w.share.clone())),
        );
        let parked = inner.parked.get(&self.crd).into_iter().flatten().filter(|p| p.manifest == own.manifest).map(|p| p.share.clone()).collect();
        Batch { manifest: own.manifest, tickets, parked }
    }

    /// The write of `batch` succeeded and left the CRD as `object`.
    pub fn wrote(&self, batch: &Batch, object: Arc<DynamicObject>) {
        let now = Instant::now();
        let mut labels: Vec<String> = batch.parked.iter().flat_map(|share| share.labels.keys().cloned()).collect();
        {
            let mut inner = self.writes.inner();
            let tickets: Vec<u64> = batch.tickets.iter().map(|(ticket, _)| *ticket).collect();
            for waiting in inner.waiting.get_mut(&self.crd).into_iter().flatten() {
                if tickets.contains(&waiting.ticket) {
                    labels.extend(waiting.share.labels.keys().cloned());
                    if waiting.ticket != self.id {
                        waiting.written = Some(object.clone());
                    }
                }
            }
            let is_parked = |share: &Share| batch.parked.iter().any(|p| p.namespace == share.namespace && p.csv == share.csv);
            if let Some(parked) = inner.parked.get_mut(&self.crd) {
                parked.retain(|p| p.manifest != batch.manifest || !is_parked(&p.share));
                if parked.is_empty() {
                    inner.parked.remove(&self.crd);
                }
            }
            inner.carried.retain(|_, (at, _)| now.duration_since(*at) < SHARE_MEMORY);
            let shares = batch.tickets.iter().map(|(_, share)| (share, false)).chain(batch.parked.iter().map(|share| (share, true)));
            for (share, parked) in shares {
                inner.carried.insert((self.crd.clone(), share.namespace.clone(), share.csv.clone()), (now, parked));
            }
            let generation = object.metadata.generation;
            inner.last_write.insert(self.crd.clone(), LastWrite { manifest: batch.manifest, generation, at: now });
        }
        self.writes.carried(&self.crd, labels, now);
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

    fn crd_object(generation: Option<i64>) -> Arc<DynamicObject> {
        let mut object = DynamicObject::new(CRD, &kube::api::ApiResource::erase::<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>(&()));
        object.metadata.generation = generation;
        Arc::new(object)
    }

    #[test]
    fn a_share_of_the_manifest_just_written_is_parked_for_the_next_write() {
        let writes = CrdWrites::default();
        let now = Instant::now();
        assert!(!writes.park(CRD, 1, Some(1), &share("a"), now), "nothing written by this process yet: write");
        let a = writes.join(CRD, 1, share("a"));
        let batch = a.batch();
        a.wrote(&batch, crd_object(Some(1)));
        drop(a);
        assert_eq!(writes.carried_share(CRD, "a", "etcdoperator.v0.9.4"), Some(false), "written by its own step");
        assert!(writes.spec_current(CRD, 1, Some(1)));
        assert!(!writes.spec_current(CRD, 1, Some(2)), "someone changed the spec since");
        assert!(!writes.spec_current(CRD, 2, Some(1)), "another manifest");

        let now = Instant::now();
        assert!(!writes.park(CRD, 1, Some(1), &share("x"), now), "not busy: write");
        for _ in 0..BUSY_SHARES {
            writes.park("etcdbackups.etcd.database.coreos.com", 1, Some(1), &share("x"), now);
        }
        assert!(!writes.park(CRD, 1, Some(1), &share("x"), now), "another CRD's steps do not make this one busy");
        // Three asked so far, this one included.
        for _ in 4..BUSY_SHARES {
            assert!(!writes.park(CRD, 1, Some(1), &share("x"), now), "not busy yet");
        }
        assert!(!writes.park(CRD, 2, Some(1), &share("x"), now), "another manifest writes itself");
        assert!(!writes.park(CRD, 1, Some(2), &share("x"), now), "a spec changed elsewhere writes itself");
        assert!(!writes.park(CRD, 1, Some(1), &share("x"), now + SHARE_WINDOW), "after the window: write");
        assert!(writes.park(CRD, 1, Some(1), &share("b"), now));
        assert!(writes.park(CRD, 1, Some(1), &share("b"), now), "parking again changes nothing");
        assert!(writes.park(CRD, 1, Some(1), &share("c"), now));
        assert!(writes.labelled_lately(CRD, "operators.coreos.com/etcd.b", now), "the next write carries a parked label");
        assert_eq!(writes.carried_share(CRD, "b", "etcdoperator.v0.9.4"), None);

        // The next writer with the same manifest carries the parked shares.
        let d = writes.join(CRD, 1, share("d"));
        let batch = d.batch();
        assert_eq!(batch.shares().map(|s| s.namespace.as_str()).collect::<Vec<_>>(), ["d", "b", "c"]);
        d.wrote(&batch, crd_object(Some(1)));
        for (namespace, parked) in [("b", true), ("c", true), ("d", false)] {
            assert_eq!(writes.carried_share(CRD, namespace, "etcdoperator.v0.9.4"), Some(parked), "{namespace}");
        }
        assert!(writes.inner().parked.is_empty(), "no share left parked");
        assert!(!writes.park(CRD, 1, Some(1), &share("e"), Instant::now() + BUSY_SPAN), "no longer busy: write");
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
        assert_eq!(batch.shares().map(|s| s.namespace.as_str()).collect::<Vec<_>>(), ["a", "b"]);
        let object = crd_object(Some(1));
        a.wrote(&batch, object.clone());
        assert!(b.written().is_some_and(|o| Arc::ptr_eq(&o, &object)), "b finds its share written");
        assert!(other_manifest.written().is_none(), "another manifest writes itself");
        assert!(other_crd.written().is_none());
        assert_eq!(other_manifest.batch().shares().count(), 1, "a written share is not written again");
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
        assert_eq!(a.batch().shares().count(), 2);
        drop(a);
        assert!(b.written().is_none(), "nothing was written for b");
        assert_eq!(b.batch().shares().map(|s| s.namespace.as_str()).collect::<Vec<_>>(), ["b"]);
        drop(b);
        assert!(writes.inner().waiting.is_empty(), "no share left behind");
    }
}
