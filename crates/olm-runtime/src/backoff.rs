//! Per-object failure counting for `error_policy`: bounded exponential backoff, reset on success.
//!
//! The delay is also a gate: a watch event (our own write, a deleted child, an owned object
//! changing) would otherwise start the next attempt at once and turn a failing write into a
//! hot loop against the API server. Until the delay has passed, a reconcile of the object only
//! asks to come back when it has (`Backoff::gate`); a change of the object's own spec (a new
//! `metadata.generation`) still goes through at once, since the user may have fixed it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::error::Error;

/// Identifies one reconciled object: kind, namespace ("" for cluster-scoped) and name.
pub type ObjectKey = (&'static str, String, String);

/// Consecutive failures per object; the delay doubles with each failure up to `max`.
#[derive(Debug)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    failures: Mutex<HashMap<ObjectKey, Failures>>,
}

/// An object's failures since its last success.
#[derive(Debug)]
struct Failures {
    count: u32,
    /// No attempt before this.
    retry_at: Instant,
    /// `metadata.generation` of the object when it last failed.
    generation: Option<i64>,
}

/// How many times `base` a non-retryable error waits at first: such a failure (a write refused
/// by an admission policy, an invalid object) needs somebody to change something, which takes
/// minutes, not milliseconds; it is still looked at again, more and more slowly, because
/// nothing tells OLM when it was fixed.
const NOT_RETRYABLE_FACTOR: u32 = 10;

impl Default for Backoff {
    fn default() -> Self {
        Self::new(Duration::from_millis(500), Duration::from_secs(300))
    }
}

impl Backoff {
    /// A backoff starting at `base` and never waiting longer than `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max,
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// Record a failure of `key` (at `generation`) and return how long to wait before the next
    /// attempt.
    pub fn on_failure(&self, key: ObjectKey, generation: Option<i64>, err: &Error) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let entry = failures.entry(key).or_insert(Failures {
            count: 0,
            retry_at: Instant::now(),
            generation,
        });
        entry.count = entry.count.saturating_add(1);
        let delay = backoff_delay(entry.count, err.retryable(), self.base, self.max);
        entry.retry_at = Instant::now() + delay;
        entry.generation = generation;
        delay
    }

    /// How long `key` must still wait before its next attempt, when it is backing off and its
    /// spec (`generation`) has not changed since it failed; None when it may go now.
    pub fn gate(&self, key: &ObjectKey, generation: Option<i64>) -> Option<Duration> {
        let failures = self.failures.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let entry = failures.get(key)?;
        if entry.generation != generation {
            return None;
        }
        let left = entry.retry_at.saturating_duration_since(Instant::now());
        (!left.is_zero()).then_some(left)
    }

    /// Forget the failures of `key` after a successful reconcile.
    pub fn on_success(&self, key: &ObjectKey) {
        let mut failures = self.failures.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        failures.remove(key);
    }

    /// How many consecutive failures `key` has had.
    pub fn failures(&self, key: &ObjectKey) -> u32 {
        let failures = self.failures.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        failures.get(key).map_or(0, |f| f.count)
    }
}

/// How long to wait before the next attempt after `failures` consecutive failures:
/// exponential from `base`, capped at `max`. Non-retryable errors start ten times higher
/// (`NOT_RETRYABLE_FACTOR`), so a broken object is looked at again only slowly (someone may
/// fix it) and never hot-loops, yet a fix made a minute later is noticed within a minute or so.
pub fn backoff_delay(failures: u32, retryable: bool, base: Duration, max: Duration) -> Duration {
    if !retryable {
        return exponential(failures, base.saturating_mul(NOT_RETRYABLE_FACTOR), max);
    }
    exponential(failures, base, max)
}

/// `base` doubled for every failure after the first, capped at `max` (`failures` 0 and 1 give
/// `base`).
pub fn exponential(failures: u32, base: Duration, max: Duration) -> Duration {
    let exponent = failures.saturating_sub(1).min(20);
    base.saturating_mul(1u32 << exponent).min(max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_double_the_delay_and_success_resets_it() {
        let backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(10));
        let key: ObjectKey = ("ClusterServiceVersion", "ns".into(), "a".into());
        let err = Error::CacheNotSynced("Deployment");
        assert_eq!(backoff.on_failure(key.clone(), None, &err), Duration::from_secs(1));
        assert_eq!(backoff.on_failure(key.clone(), None, &err), Duration::from_secs(2));
        assert_eq!(backoff.on_failure(key.clone(), None, &err), Duration::from_secs(4));
        assert_eq!(backoff.on_failure(key.clone(), None, &err), Duration::from_secs(8));
        assert_eq!(backoff.on_failure(key.clone(), None, &err), Duration::from_secs(10));
        assert_eq!(backoff.failures(&key), 5);
        backoff.on_success(&key);
        assert_eq!(backoff.on_failure(key, None, &err), Duration::from_secs(1));
    }

    #[test]
    fn a_backing_off_object_waits_unless_its_spec_changed() {
        let backoff = Backoff::new(Duration::from_secs(60), Duration::from_secs(600));
        let key: ObjectKey = ("Subscription", "ns".into(), "etcd".into());
        assert_eq!(backoff.gate(&key, Some(1)), None, "nothing failed yet");
        backoff.on_failure(key.clone(), Some(1), &Error::CacheNotSynced("InstallPlan"));
        let left = backoff.gate(&key, Some(1)).expect("still backing off");
        assert!(left > Duration::from_secs(59) && left <= Duration::from_secs(60), "{left:?}");
        assert_eq!(backoff.gate(&key, Some(2)), None, "a new spec is looked at at once");
        backoff.on_success(&key);
        assert_eq!(backoff.gate(&key, Some(1)), None);
        let quick = Backoff::new(Duration::ZERO, Duration::ZERO);
        quick.on_failure(key.clone(), Some(1), &Error::CacheNotSynced("InstallPlan"));
        assert_eq!(quick.gate(&key, Some(1)), None, "a delay that has passed lets it go");
    }

    #[test]
    fn backoff_grows_and_is_bounded() {
        let base = Duration::from_millis(500);
        let max = Duration::from_secs(300);
        assert_eq!(backoff_delay(1, true, base, max), Duration::from_millis(500));
        assert_eq!(backoff_delay(2, true, base, max), Duration::from_secs(1));
        assert_eq!(backoff_delay(5, true, base, max), Duration::from_secs(8));
        assert_eq!(backoff_delay(40, true, base, max), max);
        assert_eq!(backoff_delay(1, false, base, max), Duration::from_secs(5));
        assert_eq!(backoff_delay(3, false, base, max), Duration::from_secs(20));
        assert_eq!(backoff_delay(9, false, base, max), max);
    }
}
