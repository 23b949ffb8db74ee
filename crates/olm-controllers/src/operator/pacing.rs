//! How often one Operator's status is written while many are.
//!
//! An Operator's status lists every component with its conditions, so it changes with each step
//! of an install: the plan's, the CSV's phases, the Deployment's rollout. At a thousand installs
//! at once that was 5.2 status writes per install, each ~8 ms of the API server's CPU on a
//! machine that CPU bounds. While the Operators are busy ([`BUSY_WRITES`] status writes in
//! [`BUSY_SPAN`]), an Operator written less than [`INTERVAL`] ago waits for the rest of it, and
//! the changes that come meanwhile go in one write. Otherwise a status is written at once: tools
//! read the components right after an install (`kubectl operator list-operands`).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Operators are busy while at least this many status writes went in the last [`BUSY_SPAN`].
pub const BUSY_WRITES: usize = 50;
/// See [`BUSY_WRITES`].
pub const BUSY_SPAN: Duration = Duration::from_secs(10);
/// Least time between two status writes of one Operator while Operators are busy.
pub const INTERVAL: Duration = Duration::from_secs(10);

#[derive(Default)]
struct Inner {
    /// When status writes went, within [`BUSY_SPAN`].
    recent: VecDeque<Instant>,
    /// Operator → when its status was last written (within [`INTERVAL`]).
    last: HashMap<String, Instant>,
}

/// The status writes of the Operator controller (cloning shares them).
#[derive(Clone, Default)]
pub struct Pacing(Arc<Mutex<Inner>>);

impl Pacing {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// How long the status of `operator` is to wait before it is written, if at all.
    pub fn wait(&self, operator: &str, now: Instant) -> Option<Duration> {
        let mut inner = self.inner();
        while inner.recent.front().is_some_and(|at| now.duration_since(*at) >= BUSY_SPAN) {
            inner.recent.pop_front();
        }
        if inner.recent.len() < BUSY_WRITES {
            return None;
        }
        let last = *inner.last.get(operator)?;
        INTERVAL.checked_sub(now.duration_since(last)).filter(|left| !left.is_zero())
    }

    /// The status of `operator` was written `now`.
    pub fn wrote(&self, operator: &str, now: Instant) {
        let mut inner = self.inner();
        inner.recent.push_back(now);
        inner.last.retain(|_, at| now.duration_since(*at) < INTERVAL);
        inner.last.insert(operator.to_owned(), now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operator_written_lately_waits_only_while_many_are_written() {
        let pacing = Pacing::default();
        let now = Instant::now();
        pacing.wrote("etcd.a", now);
        assert_eq!(pacing.wait("etcd.a", now + Duration::from_secs(1)), None, "not busy: written at once");
        for i in 0..BUSY_WRITES {
            pacing.wrote(&format!("other.{i}"), now);
        }
        assert_eq!(pacing.wait("etcd.a", now + Duration::from_secs(1)), Some(INTERVAL - Duration::from_secs(1)), "busy: the rest of the interval");
        assert_eq!(pacing.wait("etcd.b", now + Duration::from_secs(1)), None, "an Operator not written lately goes at once");
        assert_eq!(pacing.wait("etcd.a", now + INTERVAL), None, "the interval has passed");
        assert_eq!(pacing.wait("etcd.a", now + BUSY_SPAN + Duration::from_secs(1)), None, "no longer busy");
    }
}
