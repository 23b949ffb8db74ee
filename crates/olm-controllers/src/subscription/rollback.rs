//! Going back from an upgrade (#22), pure and opt-in: what no OLM does. A Subscription
//! annotated [`ROLLED_BACK_FROM_ANNOTATION`]` = B` (by `olm rollback`, or by OLM when it is
//! annotated [`AUTO_ROLLBACK_ANNOTATION`] and its upgrade's CSV B failed) goes back to the CSV
//! B replaced, A, through a normal InstallPlan of A's bundle from the catalog, replacing B: A's
//! Deployments, ServiceAccounts and permissions are applied again (with the OperatorGroup's
//! ServiceAccount when it has one), its CRD steps are checked against the stored versions and
//! objects first, and B goes once A has succeeded. The plan waits for approval as the
//! Subscription says, except an automatic rollback's: that is what the annotation asked for.
//! A's CSV is annotated [`ROLLBACK_OF_ANNOTATION`]` = B`, so that the CSV controller takes it
//! for B's replacement although B's `spec.replaces` names A (A may still be there, waiting in
//! Replacing, when B failed before finishing).
//!
//! Afterwards B is never chosen again for this Subscription; a newer version of the catalog
//! is, and removing the annotation lets B back in.

use std::sync::Arc;

use kube::ResourceExt;
use olm_api::keys::{AUTO_ROLLBACK_ANNOTATION, ROLLED_BACK_FROM_ANNOTATION};
#[cfg(doc)]
use olm_api::keys::ROLLBACK_OF_ANNOTATION;
use olm_api::v1alpha1::cluster_service_version::{ClusterServiceVersion, CsvPhase};
use olm_api::v1alpha1::subscription::{Subscription, SubscriptionConditionType};
use olm_resolver::Selected;
use olm_runtime::EventNote;

/// Reason of the `RolledBack` condition when OLM rolled a failed upgrade back.
pub const UPGRADE_FAILED: &str = "UpgradeFailed";
/// Reason of the `RolledBack` condition when a person asked for the rollback.
pub const ROLLBACK_REQUESTED: &str = "RollbackRequested";
/// Reason of the `BehindChannelHead` condition while the resolver's choice is the version
/// rolled back.
pub const UPGRADE_ROLLED_BACK: &str = "UpgradeRolledBack";

/// What to do about a rollback now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Nothing: resolve as usual.
    None,
    /// Install `to` from the catalog again, replacing `from`.
    Reinstall { from: String, to: String },
    /// A rollback was asked for and cannot happen: why, and what to do.
    Impossible(String),
}

/// The rollback decision for one Subscription.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// What to do.
    pub step: Step,
    /// OLM decided the rollback itself: write [`ROLLED_BACK_FROM_ANNOTATION`] with this CSV.
    pub mark: Option<String>,
    /// The `RolledBack` condition to set (reason, message), when it changes.
    pub condition: Option<(&'static str, String)>,
    /// The Event to send.
    pub event: Option<EventNote>,
    /// The CSV resolution must not choose for this Subscription.
    pub rejected: Option<String>,
}

fn annotation<'a>(sub: &'a Subscription, key: &str) -> Option<&'a str> {
    sub.annotations().get(key).map(String::as_str).filter(|v| !v.trim().is_empty())
}

/// What to do for `sub`, whose namespace has `csvs`.
pub fn decide(sub: &Subscription, csvs: &[Arc<ClusterServiceVersion>]) -> Decision {
    let status = sub.status.clone().unwrap_or_default();
    let find = |name: &str| csvs.iter().find(|c| c.name_any() == name && !c.is_copied());
    let mut decision = Decision { step: Step::None, mark: None, condition: None, event: None, rejected: None };
    let requested = annotation(sub, ROLLED_BACK_FROM_ANNOTATION).map(str::to_owned);
    // Automatic: the Subscription's own upgrade failed (and said why).
    let auto = annotation(sub, AUTO_ROLLBACK_ANNOTATION) == Some("true");
    let failed = status
        .current_csv
        .as_deref()
        .and_then(find)
        .filter(|c| auto && c.phase() == Some(&CsvPhase::Failed) && c.metadata.deletion_timestamp.is_none())
        .filter(|c| c.spec.replaces.as_deref().is_some_and(|r| !r.is_empty()))
        .filter(|c| requested.as_ref().is_none_or(|r| *r == c.name_any()));
    let why = failed.map(|c| {
        let csv_status = c.status.clone().unwrap_or_default();
        let reason = csv_status.reason.map(|r| r.as_str().to_owned()).unwrap_or_default();
        format!("{reason}: {}", csv_status.message.unwrap_or_default())
    });
    let from = match (requested, failed) {
        (Some(from), _) => from,
        (None, Some(failed)) => {
            decision.mark = Some(failed.name_any());
            failed.name_any()
        }
        (None, None) => return decision,
    };
    decision.rejected = Some(from.clone());
    // Only while `from` is the Subscription's current CSV: once the rollback is under way (its
    // plan created, or `to` adopted again), resolution takes over, rejecting `from`.
    let mine = status.current_csv.as_deref() == Some(from.as_str());
    let Some(newer) = find(&from).filter(|_| mine) else {
        // Rolled back already (or the annotation names a CSV this Subscription does not run).
        return decision;
    };
    let Some(to) = newer.spec.replaces.clone().filter(|r| !r.is_empty()) else {
        decision.step = Step::Impossible(format!(
            "cannot roll back from {from}: it replaces no earlier version (spec.replaces is empty), so there is nothing to go back to; remove the annotation {ROLLED_BACK_FROM_ANNOTATION}"
        ));
        return decision;
    };
    decision.step = Step::Reinstall { from: from.clone(), to: to.clone() };
    let said = status.conditions.iter().flatten().find(|c| c.type_ == SubscriptionConditionType::RolledBack);
    if said.and_then(|c| c.message.as_deref()).is_some_and(|m| about(m, &from)) {
        // This rollback is under way and said so: keep its first word on why (the failed CSV
        // moves on to Replacing, which would turn an automatic rollback into a requested one).
        return decision;
    }
    let how = match why {
        Some(ref why) => format!(
            "the upgrade to {from} failed ({why}) and is rolled back to {to} ({AUTO_ROLLBACK_ANNOTATION})"
        ),
        None => format!("rolling back from {from} to {to}, as the annotation {ROLLED_BACK_FROM_ANNOTATION} asks"),
    };
    let message = format!(
        "{how}; {from} is not installed again until the catalog offers a newer version or the annotation {ROLLED_BACK_FROM_ANNOTATION} is removed"
    );
    let reason = if why.is_some() { UPGRADE_FAILED } else { ROLLBACK_REQUESTED };
    if said.is_none() {
        decision.event = Some(EventNote::warning(reason, "Rollback", message.clone()));
    }
    decision.condition = Some((reason, message));
    decision
}

/// Whether a `RolledBack` message is about the rollback from `from` (either wording above).
fn about(message: &str, from: &str) -> bool {
    message.starts_with(&format!("the upgrade to {from} failed (")) || message.starts_with(&format!("rolling back from {from} to "))
}

/// The CSV `sub` rolls back, when `bundles` are that rollback's (one of them replaces it).
pub fn rollback_from<'a>(sub: &'a Subscription, bundles: &[&Selected]) -> Option<&'a str> {
    let from = annotation(sub, ROLLED_BACK_FROM_ANNOTATION)?;
    bundles.iter().any(|b| b.replaces.as_deref() == Some(from)).then_some(from)
}

/// The `BehindChannelHead` note while resolution's choice is the rejected CSV.
pub fn rejected_note(rejected: &str) -> (&'static str, String) {
    (
        UPGRADE_ROLLED_BACK,
        format!(
            "{rejected} was rolled back and is not installed again until the catalog offers a newer version; to install it anyway, remove the annotation {ROLLED_BACK_FROM_ANNOTATION} from the Subscription"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sub(annotations: serde_json::Value, current: &str) -> Subscription {
        serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": "etcd", "namespace": "ns", "annotations": annotations},
            "spec": {"source": "c", "sourceNamespace": "ns", "name": "etcd"},
            "status": {"currentCSV": current, "installedCSV": current}
        }))
        .unwrap()
    }

    fn csv(name: &str, replaces: Option<&str>, phase: &str) -> Arc<ClusterServiceVersion> {
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
                "metadata": {"name": name, "namespace": "ns"},
                "spec": {"displayName": name, "replaces": replaces, "install": {"strategy": "deployment"}},
                "status": {"phase": phase, "reason": "InstallCheckFailed", "message": "deployment etcd-operator exceeded its progress deadline"}
            }))
            .unwrap(),
        )
    }

    #[test]
    fn a_failed_upgrade_is_rolled_back_only_when_asked_for() {
        let csvs = [csv("etcd.v1", None, "Replacing"), csv("etcd.v2", Some("etcd.v1"), "Failed")];
        let plain = decide(&sub(json!({}), "etcd.v2"), &csvs);
        assert_eq!((plain.step, plain.rejected), (Step::None, None), "upstream behaviour without the annotation");

        let auto = decide(&sub(json!({AUTO_ROLLBACK_ANNOTATION: "true"}), "etcd.v2"), &csvs);
        assert_eq!(auto.step, Step::Reinstall { from: "etcd.v2".into(), to: "etcd.v1".into() });
        assert_eq!(auto.mark.as_deref(), Some("etcd.v2"));
        let (reason, message) = auto.condition.expect("a condition");
        assert_eq!(reason, UPGRADE_FAILED);
        assert!(message.starts_with("the upgrade to etcd.v2 failed (InstallCheckFailed: deployment etcd-operator exceeded its progress deadline) and is rolled back to etcd.v1"), "{message}");
        assert!(auto.event.is_some());

        let succeeded = [csv("etcd.v1", None, "Replacing"), csv("etcd.v2", Some("etcd.v1"), "Succeeded")];
        assert_eq!(decide(&sub(json!({AUTO_ROLLBACK_ANNOTATION: "true"}), "etcd.v2"), &succeeded).step, Step::None, "nothing failed");
        let first = [csv("etcd.v1", None, "Failed")];
        assert_eq!(decide(&sub(json!({AUTO_ROLLBACK_ANNOTATION: "true"}), "etcd.v1"), &first).step, Step::None, "a first install has nothing to go back to");
    }

    #[test]
    fn a_requested_rollback_reinstalls_a_version_that_is_gone_and_then_rejects_the_newer_one() {
        let asked = sub(json!({ROLLED_BACK_FROM_ANNOTATION: "etcd.v2"}), "etcd.v2");
        let decision = decide(&asked, &[csv("etcd.v2", Some("etcd.v1"), "Succeeded")]);
        assert_eq!(decision.step, Step::Reinstall { from: "etcd.v2".into(), to: "etcd.v1".into() });
        assert_eq!((decision.mark, decision.condition.map(|c| c.0)), (None, Some(ROLLBACK_REQUESTED)));

        // Done: etcd.v1 is the Subscription's CSV again; etcd.v2 stays rejected.
        let done = decide(&sub(json!({ROLLED_BACK_FROM_ANNOTATION: "etcd.v2"}), "etcd.v1"), &[csv("etcd.v1", Some("etcd.v2"), "Succeeded")]);
        assert_eq!((done.step, done.rejected.as_deref(), done.condition), (Step::None, Some("etcd.v2"), None));

        let nothing_before = decide(&asked, &[csv("etcd.v2", None, "Succeeded")]);
        assert!(matches!(nothing_before.step, Step::Impossible(ref why) if why.contains("replaces no earlier version")));
    }

    #[test]
    fn an_automatic_rollback_stays_one_while_the_failed_csv_moves_on() {
        let failed = [csv("etcd.v1", None, "Replacing"), csv("etcd.v2", Some("etcd.v1"), "Failed")];
        let first = decide(&sub(json!({AUTO_ROLLBACK_ANNOTATION: "true"}), "etcd.v2"), &failed);
        let (reason, message) = first.condition.expect("a condition");
        // OLM wrote the annotation and the condition; then etcd.v2 went to Replacing.
        let mut marked = sub(json!({AUTO_ROLLBACK_ANNOTATION: "true", ROLLED_BACK_FROM_ANNOTATION: "etcd.v2"}), "etcd.v2");
        marked.status.as_mut().unwrap().conditions = Some(vec![serde_json::from_value(json!({
            "type": "RolledBack", "status": "True", "reason": reason, "message": message
        }))
        .unwrap()]);
        let replacing = [csv("etcd.v1", None, "Pending"), csv("etcd.v2", Some("etcd.v1"), "Replacing")];
        let later = decide(&marked, &replacing);
        assert_eq!(later.step, Step::Reinstall { from: "etcd.v2".into(), to: "etcd.v1".into() });
        assert_eq!((later.condition, later.event), (None, None), "the UpgradeFailed condition is kept, not turned into RollbackRequested");

        // A rollback from another version is a new one, and says so.
        let mut newer = marked.clone();
        newer.metadata.annotations.as_mut().unwrap().insert(ROLLED_BACK_FROM_ANNOTATION.into(), "etcd.v3".into());
        newer.status.as_mut().unwrap().current_csv = Some("etcd.v3".into());
        let again = decide(&newer, &[csv("etcd.v3", Some("etcd.v2"), "Succeeded")]);
        assert_eq!(again.condition.map(|c| c.0), Some(ROLLBACK_REQUESTED));
    }
}
