//! The InstallPlan phase machine (pure): `""`/Planning → RequiresApproval → Installing →
//! Complete, or Failed; and what an execution pass means for the status.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use olm_api::common::ConditionStatus;
use olm_api::v1alpha1::install_plan::{
    InstallPlan, InstallPlanCondition, InstallPlanConditionReason, InstallPlanConditionType, InstallPlanPhase, InstallPlanStatus, Step,
};

use crate::runtime::EventNote;

/// How long transient errors are retried after `status.startTime` (upstream's
/// `--install-plan-retry-timeout` default).
pub const RETRY_TIMEOUT: Duration = Duration::from_secs(60);
/// How soon to look again while a CRD is not Established yet: soon at first (the API server
/// usually establishes a new CRD within tens of milliseconds, and the install waits on it),
/// then backing off with the time already waited, up to a bound.
pub fn wait_for_api_delay(waited: Duration) -> Duration {
    (waited / 4).clamp(Duration::from_millis(20), Duration::from_secs(2))
}

/// What to do with a plan now.
#[derive(Clone, Debug, PartialEq)]
pub enum Next {
    /// Nothing until the plan changes (no plan yet, waiting for approval, or finished).
    Wait,
    /// Move to a phase (status write only).
    Enter(InstallPlanPhase),
    /// Apply the steps.
    Execute,
}

/// The next move for `plan`.
pub fn next(plan: &InstallPlan) -> Next {
    let Some(status) = plan.status.as_ref() else {
        return Next::Wait;
    };
    match &status.phase {
        InstallPlanPhase::None | InstallPlanPhase::Planning => {
            if status.plan.is_none() {
                Next::Wait
            } else if plan.spec.approved {
                Next::Enter(InstallPlanPhase::Installing)
            } else {
                Next::Enter(InstallPlanPhase::RequiresApproval)
            }
        }
        InstallPlanPhase::RequiresApproval if plan.spec.approved => Next::Enter(InstallPlanPhase::Installing),
        InstallPlanPhase::Installing => Next::Execute,
        _ => Next::Wait,
    }
}

/// A failed step.
#[derive(Clone, Debug, PartialEq)]
pub struct StepError {
    /// Names the object and the API error.
    pub message: String,
    /// Whether another pass can succeed.
    pub retryable: bool,
}

/// The outcome of one execution pass.
#[derive(Clone, Debug, PartialEq)]
pub struct Pass {
    /// The steps with their new statuses.
    pub steps: Vec<Step>,
    /// The first error, which stopped the pass.
    pub error: Option<StepError>,
    /// Some CRD is not Established yet.
    pub waiting_for_api: bool,
}

fn installed_condition(
    status: ConditionStatus,
    reason: Option<InstallPlanConditionReason>,
    message: Option<String>,
    now: Timestamp,
) -> InstallPlanCondition {
    InstallPlanCondition {
        type_: Some(InstallPlanConditionType::Installed),
        status: Some(status),
        last_update_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
        reason,
        message,
    }
}

/// The status after entering `phase` (no execution).
pub fn enter(previous: &InstallPlanStatus, phase: InstallPlanPhase, now: Timestamp) -> InstallPlanStatus {
    let mut status = previous.clone();
    if phase == InstallPlanPhase::Installing && status.start_time.is_none() {
        status.start_time = Some(Time(now));
    }
    status.phase = phase;
    status
}

/// The status, requeue and Event after an execution pass.
pub fn after_pass(previous: &InstallPlanStatus, pass: Pass, now: Timestamp) -> (InstallPlanStatus, Option<Duration>, Option<EventNote>) {
    let mut status = previous.clone();
    status.plan = Some(pass.steps);
    let started = status.start_time.as_ref().map_or(now, |t| t.0);
    if status.start_time.is_none() {
        status.start_time = Some(Time(now));
    }
    let elapsed = Duration::try_from(now.duration_since(started)).unwrap_or(Duration::ZERO);
    match pass.error {
        Some(error) if !error.retryable || elapsed >= RETRY_TIMEOUT => {
            let message = if error.retryable {
                format!("{} (still failing after retrying for {}s)", error.message, RETRY_TIMEOUT.as_secs())
            } else {
                error.message
            };
            status.phase = InstallPlanPhase::Failed;
            status.message = Some(message.clone());
            status.conditions = Some(vec![installed_condition(
                ConditionStatus::False,
                Some(InstallPlanConditionReason::InstallComponentFailed),
                Some(message.clone()),
                now,
            )]);
            (status, None, Some(EventNote::warning("InstallComponentFailed", "Install", message)))
        }
        Some(error) => {
            status.phase = InstallPlanPhase::Installing;
            status.message = Some(format!("retrying execution due to error: {}", error.message));
            // Bounded: the pass is retried at most every few seconds, and only for RETRY_TIMEOUT.
            let delay = Duration::from_secs((elapsed.as_secs() / 10).clamp(1, 5));
            (status, Some(delay), None)
        }
        None if pass.waiting_for_api => {
            status.phase = InstallPlanPhase::Installing;
            status.message = None;
            (status, Some(wait_for_api_delay(elapsed)), None)
        }
        None => {
            status.phase = InstallPlanPhase::Complete;
            status.message = None;
            status.conditions = Some(vec![installed_condition(ConditionStatus::True, None, None, now)]);
            (
                status,
                None,
                Some(EventNote::normal(
                    "InstallSucceeded",
                    "Install",
                    "every step of the plan was applied",
                )),
            )
        }
    }
}

/// At most this many InstallPlans are kept per namespace (upstream's number).
pub const MAX_PLANS_PER_NAMESPACE: usize = 5;

/// Which finished plans to delete so that at most [`MAX_PLANS_PER_NAMESPACE`] remain: the
/// lowest generations first, never one a Subscription references or one still in progress,
/// at most five per pass. `plans` are (name, generation, phase).
pub fn plans_to_collect(plans: &[(String, i64, InstallPlanPhase)], referenced: &[String]) -> Vec<String> {
    let excess = plans.len().saturating_sub(MAX_PLANS_PER_NAMESPACE);
    let mut candidates: Vec<&(String, i64, InstallPlanPhase)> = plans
        .iter()
        .filter(|(name, _, phase)| !referenced.contains(name) && matches!(phase, InstallPlanPhase::Complete | InstallPlanPhase::Failed))
        .collect();
    candidates.sort_by_key(|(_, generation, _)| *generation);
    candidates
        .into_iter()
        .take(excess.min(5))
        .map(|(name, _, _)| name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use olm_api::v1alpha1::install_plan::{Approval, InstallPlanSpec, StepResource, StepStatus};

    fn plan(approved: bool, phase: Option<InstallPlanPhase>, with_steps: bool) -> InstallPlan {
        let mut ip = InstallPlan::new(
            "install-abc",
            InstallPlanSpec {
                source: None,
                source_namespace: None,
                cluster_service_version_names: vec!["etcdoperator.v0.9.0".into()],
                approval: if approved { Approval::Automatic } else { Approval::Manual },
                approved,
                generation: Some(1),
            },
        );
        ip.status = phase.map(|phase| InstallPlanStatus {
            phase,
            plan: with_steps.then(Vec::new),
            ..Default::default()
        });
        ip
    }

    #[test]
    fn phases_follow_approval() {
        assert_eq!(next(&plan(true, None, false)), Next::Wait, "no status yet");
        assert_eq!(next(&plan(true, Some(InstallPlanPhase::None), false)), Next::Wait, "no plan yet");
        assert_eq!(
            next(&plan(true, Some(InstallPlanPhase::None), true)),
            Next::Enter(InstallPlanPhase::Installing)
        );
        assert_eq!(
            next(&plan(false, Some(InstallPlanPhase::None), true)),
            Next::Enter(InstallPlanPhase::RequiresApproval)
        );
        assert_eq!(next(&plan(false, Some(InstallPlanPhase::RequiresApproval), true)), Next::Wait);
        assert_eq!(
            next(&plan(true, Some(InstallPlanPhase::RequiresApproval), true)),
            Next::Enter(InstallPlanPhase::Installing)
        );
        assert_eq!(next(&plan(true, Some(InstallPlanPhase::Installing), true)), Next::Execute);
        assert_eq!(next(&plan(true, Some(InstallPlanPhase::Complete), true)), Next::Wait);
        assert_eq!(next(&plan(true, Some(InstallPlanPhase::Failed), true)), Next::Wait);
    }

    #[test]
    fn old_finished_unreferenced_plans_are_collected() {
        let plans: Vec<(String, i64, InstallPlanPhase)> = (1..=8)
            .map(|g| {
                (
                    format!("p{g}"),
                    g,
                    if g == 2 {
                        InstallPlanPhase::Installing
                    } else {
                        InstallPlanPhase::Complete
                    },
                )
            })
            .collect();
        let referenced = vec!["p1".to_owned()];
        assert_eq!(plans_to_collect(&plans, &referenced), ["p3", "p4", "p5"]);
        assert!(plans_to_collect(&plans[..5], &[]).is_empty());
    }

    fn step(status: StepStatus) -> Step {
        Step {
            resolving: "x".into(),
            resource: StepResource {
                kind: "ConfigMap".into(),
                name: "c".into(),
                ..Default::default()
            },
            optional: None,
            status,
        }
    }

    #[test]
    fn a_crd_not_established_yet_is_looked_at_again_soon_then_less_often() {
        let t0 = Timestamp::from_second(1000).expect("time");
        let start = InstallPlanStatus {
            phase: InstallPlanPhase::Installing,
            start_time: Some(Time(t0)),
            ..Default::default()
        };
        let waiting = Pass {
            steps: vec![step(StepStatus::WaitingForApi)],
            error: None,
            waiting_for_api: true,
        };
        let (s, requeue, event) = after_pass(&start, waiting.clone(), t0);
        assert_eq!(s.phase, InstallPlanPhase::Installing);
        assert!(event.is_none());
        assert_eq!(requeue, Some(Duration::from_millis(20)));
        let later = Timestamp::from_second(1000 + 4).expect("time");
        assert_eq!(after_pass(&start, waiting.clone(), later).1, Some(Duration::from_secs(1)));
        let much_later = Timestamp::from_second(1000 + 600).expect("time");
        assert_eq!(after_pass(&start, waiting, much_later).1, Some(Duration::from_secs(2)));
    }

    #[test]
    fn passes_complete_retry_or_fail() {
        let t0 = Timestamp::from_second(1000).expect("time");
        let start = InstallPlanStatus {
            phase: InstallPlanPhase::Installing,
            start_time: Some(Time(t0)),
            ..Default::default()
        };
        let ok = Pass {
            steps: vec![step(StepStatus::Created)],
            error: None,
            waiting_for_api: false,
        };
        let (s, requeue, event) = after_pass(&start, ok, t0);
        assert_eq!(s.phase, InstallPlanPhase::Complete);
        assert!(requeue.is_none());
        assert_eq!(event.map(|e| e.reason), Some("InstallSucceeded".into()));

        let transient = StepError {
            message: "apply ConfigMap ns/c: connection reset".into(),
            retryable: true,
        };
        let pass = Pass {
            steps: vec![step(StepStatus::Unknown)],
            error: Some(transient.clone()),
            waiting_for_api: false,
        };
        let (s, requeue, _) = after_pass(&start, pass.clone(), t0);
        assert_eq!(s.phase, InstallPlanPhase::Installing);
        assert!(
            s.message
                .unwrap_or_default()
                .starts_with("retrying execution due to error: apply ConfigMap ns/c")
        );
        assert!(requeue.is_some_and(|d| d >= Duration::from_secs(1)));

        let later = Timestamp::from_second(1000 + 61).expect("time");
        let (s, _, event) = after_pass(&start, pass, later);
        assert_eq!(s.phase, InstallPlanPhase::Failed);
        assert!(event.is_some());

        let fatal = StepError {
            message: "apply Role ns/r: forbidden".into(),
            retryable: false,
        };
        let (s, _, _) = after_pass(
            &start,
            Pass {
                steps: vec![],
                error: Some(fatal),
                waiting_for_api: false,
            },
            t0,
        );
        assert_eq!(s.phase, InstallPlanPhase::Failed);
        let condition = s.conditions.unwrap_or_default().remove(0);
        assert_eq!(condition.reason, Some(InstallPlanConditionReason::InstallComponentFailed));
        assert!(condition.message.unwrap_or_default().contains("Role ns/r"));
    }
}
