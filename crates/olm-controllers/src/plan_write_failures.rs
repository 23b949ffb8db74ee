//! Status writes of InstallPlans that the API server refuses, shared by the InstallPlan
//! controller, which records them, and the Subscription controller, which reports them on the
//! Subscription that owns the plan (`InstallPlanWriteFailed`): a plan whose status cannot be
//! written cannot say so itself, and the Subscription is what the user created and looks at.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::channel::mpsc;

/// A refused write: the error's category (the Event reason) and the sentence to show.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteFailure {
    /// PascalCase category, e.g. `ApiInvalid`.
    pub reason: String,
    /// What was refused, what the API server said, and what to do.
    pub message: String,
}

impl WriteFailure {
    /// The failure an error of a refused write is.
    pub fn of(err: &olm_runtime::Error) -> Self {
        Self {
            reason: err.category().to_owned(),
            message: write_failed_message(&err.to_string(), err.retryable()),
        }
    }
}

/// The `InstallPlanWriteFailed` message for a refused write (`failed`: what was being
/// written and what the API server said): the sentence and what to do about it.
pub fn write_failed_message(failed: &str, retryable: bool) -> String {
    let advice = if retryable {
        "OLM retries with backoff and installs once the write goes through; if it keeps failing, look at the API server (and etcd)"
    } else {
        "The same request is refused until the cause changes: lift what refuses it (an admission policy or webhook, a quota, RBAC); OLM retries with backoff and installs once it is accepted"
    };
    format!("Cannot {failed}. {advice}.")
}

/// Namespace and name of an InstallPlan.
pub type PlanKey = (String, String);

/// The InstallPlans whose last status write was refused.
#[derive(Clone, Default)]
pub struct PlanWriteFailures {
    failures: Arc<Mutex<HashMap<PlanKey, WriteFailure>>>,
    listeners: Arc<Mutex<Vec<mpsc::UnboundedSender<PlanKey>>>>,
}

impl PlanWriteFailures {
    /// Record the outcome of a status write of `plan`: `Some` when refused, `None` when it went
    /// through. Listeners hear of every change.
    pub fn record(&self, plan: PlanKey, failure: Option<WriteFailure>) {
        let changed = {
            let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
            match failure {
                Some(failure) => failures.insert(plan.clone(), failure.clone()).as_ref() != Some(&failure),
                None => failures.remove(&plan).is_some(),
            }
        };
        if changed {
            let mut listeners = self.listeners.lock().unwrap_or_else(|p| p.into_inner());
            listeners.retain(|tx| tx.unbounded_send(plan.clone()).is_ok());
        }
    }

    /// The refused write of `plan`, if its last status write was refused.
    pub fn get(&self, namespace: &str, plan: &str) -> Option<WriteFailure> {
        let failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        failures.get(&(namespace.to_owned(), plan.to_owned())).cloned()
    }

    /// A stream of the plans whose write outcome changed.
    pub fn subscribe(&self) -> mpsc::UnboundedReceiver<PlanKey> {
        let (tx, rx) = mpsc::unbounded();
        self.listeners.lock().unwrap_or_else(|p| p.into_inner()).push(tx);
        rx
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    #[tokio::test]
    async fn a_refusal_is_kept_until_a_write_goes_through_and_each_change_is_heard() {
        let failures = PlanWriteFailures::default();
        let changes = failures.subscribe();
        let key: PlanKey = ("ns".into(), "install-x".into());
        let refused = WriteFailure { reason: "ApiInvalid".into(), message: "Cannot write …".into() };
        failures.record(key.clone(), Some(refused.clone()));
        failures.record(key.clone(), Some(refused.clone()));
        assert_eq!(failures.get("ns", "install-x"), Some(refused));
        failures.record(key.clone(), None);
        failures.record(key.clone(), None);
        assert_eq!(failures.get("ns", "install-x"), None);
        drop(failures);
        let heard: Vec<PlanKey> = changes.collect().await;
        assert_eq!(heard, vec![key.clone(), key], "the same refusal again, or a second success, is no change");
    }
}
