//! Per-object failure counting for `error_policy`: bounded exponential backoff, reset on success.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use super::error::Error;

/// Identifies one reconciled object: kind, namespace ("" for cluster-scoped) and name.
pub type ObjectKey = (&'static str, String, String);

/// Consecutive failures per object; the delay doubles with each failure up to `max`.
#[derive(Debug)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    failures: Mutex<HashMap<ObjectKey, u32>>,
}

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

    /// Record a failure of `key` and return how long to wait before the next attempt.
    pub fn on_failure(&self, key: ObjectKey, err: &Error) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let count = failures.entry(key).or_insert(0);
        *count = count.saturating_add(1);
        backoff_delay(*count, err.retryable(), self.base, self.max)
    }

    /// Forget the failures of `key` after a successful reconcile.
    pub fn on_success(&self, key: &ObjectKey) {
        let mut failures = self.failures.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        failures.remove(key);
    }

    /// How many consecutive failures `key` has had.
    pub fn failures(&self, key: &ObjectKey) -> u32 {
        let failures = self.failures.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        failures.get(key).copied().unwrap_or(0)
    }
}

/// How long to wait before the next attempt after `failures` consecutive failures:
/// exponential from `base`, capped at `max`. Non-retryable errors wait `max` straight away,
/// so a broken object is looked at again only slowly (someone may fix it) and never hot-loops.
pub fn backoff_delay(failures: u32, retryable: bool, base: Duration, max: Duration) -> Duration {
    if !retryable {
        return max;
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
        assert_eq!(backoff.on_failure(key.clone(), &err), Duration::from_secs(1));
        assert_eq!(backoff.on_failure(key.clone(), &err), Duration::from_secs(2));
        assert_eq!(backoff.on_failure(key.clone(), &err), Duration::from_secs(4));
        assert_eq!(backoff.on_failure(key.clone(), &err), Duration::from_secs(8));
        assert_eq!(backoff.on_failure(key.clone(), &err), Duration::from_secs(10));
        assert_eq!(backoff.failures(&key), 5);
        backoff.on_success(&key);
        assert_eq!(backoff.on_failure(key, &err), Duration::from_secs(1));
    }

    #[test]
    fn backoff_grows_and_is_bounded() {
        let base = Duration::from_millis(500);
        let max = Duration::from_secs(300);
        assert_eq!(backoff_delay(1, true, base, max), Duration::from_millis(500));
        assert_eq!(backoff_delay(2, true, base, max), Duration::from_secs(1));
        assert_eq!(backoff_delay(5, true, base, max), Duration::from_secs(8));
        assert_eq!(backoff_delay(40, true, base, max), max);
        assert_eq!(backoff_delay(1, false, base, max), max);
    }
}
