//! What the Operator controller's keeper has yet to do, one entry per Operator and per
//! Subscription however many changes asked for it. The keeper writes (an Operator created, a
//! Subscription labelled) one at a time; the changes that ask for them keep coming meanwhile.
//! Read into this backlog as they come, they cost a name each; left in the caches' channels
//! until the keeper is free, each held a copy of the changed object (1,000 namespaces: 450 MB
//! of queued objects, most of them shared CRDs as large as their installs).

use std::collections::BTreeSet;
use std::sync::Mutex;

/// One thing to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Work {
    /// Make sure the Operator of this name exists.
    Operator(String),
    /// Label this Subscription (namespace, name), as the cache shows it then.
    Subscription(String, String),
    /// Check every Operator and Subscription.
    Sweep,
}

#[derive(Default)]
struct Pending {
    operators: BTreeSet<String>,
    subscriptions: BTreeSet<(String, String)>,
    sweep: bool,
    closed: bool,
}

/// The backlog, filled by the changes and emptied by the keeper.
#[derive(Default)]
pub struct Backlog {
    pending: Mutex<Pending>,
    added: tokio::sync::Notify,
}

impl Backlog {
    fn pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Add `work` (nothing when the same is already waiting).
    pub fn add(&self, work: Work) {
        {
            let mut pending = self.pending();
            match work {
                Work::Operator(name) => {
                    pending.operators.insert(name);
                }
                Work::Subscription(namespace, name) => {
                    pending.subscriptions.insert((namespace, name));
                }
                Work::Sweep => pending.sweep = true,
            }
        }
        self.added.notify_one();
    }

    /// No more work comes: [`Backlog::next`] ends.
    pub fn close(&self) {
        self.pending().closed = true;
        self.added.notify_one();
    }

    /// The next thing to do (Operators first, then Subscriptions, then a sweep), waiting for
    /// one; None once closed.
    pub async fn next(&self) -> Option<Work> {
        loop {
            if let Some(work) = self.take() {
                return work;
            }
            self.added.notified().await;
        }
    }

    /// Some(None): closed; None: nothing yet.
    fn take(&self) -> Option<Option<Work>> {
        let mut pending = self.pending();
        if pending.closed {
            return Some(None);
        }
        if let Some(name) = pending.operators.pop_first() {
            return Some(Some(Work::Operator(name)));
        }
        if let Some((namespace, name)) = pending.subscriptions.pop_first() {
            return Some(Some(Work::Subscription(namespace, name)));
        }
        if std::mem::take(&mut pending.sweep) {
            return Some(Some(Work::Sweep));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn repeated_changes_wait_as_one_entry_and_closing_ends_it() {
        let backlog = Backlog::default();
        for _ in 0..3 {
            backlog.add(Work::Subscription("team-a".into(), "etcd".into()));
            backlog.add(Work::Operator("etcd.team-a".into()));
        }
        backlog.add(Work::Sweep);
        backlog.add(Work::Sweep);
        assert_eq!(backlog.next().await, Some(Work::Operator("etcd.team-a".into())));
        assert_eq!(backlog.next().await, Some(Work::Subscription("team-a".into(), "etcd".into())));
        assert_eq!(backlog.next().await, Some(Work::Sweep));
        let waiting = tokio::time::timeout(std::time::Duration::from_millis(50), backlog.next()).await;
        assert!(waiting.is_err(), "nothing left: it waits");
        backlog.add(Work::Operator("etcd.team-b".into()));
        assert_eq!(backlog.next().await, Some(Work::Operator("etcd.team-b".into())));
        backlog.close();
        assert_eq!(backlog.next().await, None);
    }
}
