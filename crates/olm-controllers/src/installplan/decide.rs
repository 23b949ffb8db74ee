//! The InstallPlan phase machine (pure): `""`/Planning → RequiresApproval → Installing →
//! Complete, or Failed; and what an execution pass means for the status.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use olm_api::common::ConditionStatus;
use olm_api::v1alpha1::install_plan::{
    InstallPlan, InstallPlanCondition, InstallPlanConditionReason, InstallPlanConditionType, InstallPlanPhase, InstallPlanStatus, Step,
};

use olm_runtime::EventNote;

/// How long transient errors are retried after `status.startTime` (upstream's
/// `--install-plan-retry-timeout` default).
pub const RETRY_TIMEOUT: Duration = Duration::from_secs(60);
/// How soon to look again while a CRD is not Established yet: soon at first (the API server
/// usually establishes a new CRD within tens of milliseconds, and the install waits on it),
/// then backing off with the time already waited, up to a bound.
pub fn wait_for_api_delay(waited: Duration) -> Duration {
    (waited / 4).clamp(Duration::from_millis(20), Duration::from_secs(2))
}

/// How soon a plan whose CRD share is parked looks again (the share waits up to
/// `crate::crd_writes::SHARE_WINDOW` for a write).
pub const PARKED_RECHECK: Duration = Duration::from_secs(1);

/// What to do with a plan now.
#[derive(Clone, Debug, PartialEq)]
pub enum Next {
    /// Nothing until the plan changes (no plan yet, waiting for approval, or finished).
    Wait,
    /// Move to a phase (status write only).
    Enter(InstallPlanPhase),
    /// Apply the steps.
    Execute,
    /// Waiting for approval without a preview: write it (`crate::plan_preview`).
    Preview,
}

/// The next move for `plan`.
pub fn next(plan: &InstallPlan) -> Next {
    let Some(status) = plan.status.as_ref() else {
        return Next::Wait;
    };
    // No steps yet (its bundle images are being pulled, or a pull failed; the Subscription
    // controller writes them): nothing to execute or approve.
    if status.plan.is_none() {
        return Next::Wait;
    }
    // A plan without a phase, or Planning, is left as it is, as upstream leaves it: whoever
    // writes the steps writes the phase (the Subscription controller always does), and a
    // client may hold a plan there on purpose.
    match &status.phase {
        InstallPlanPhase::RequiresApproval if plan.spec.approved => Next::Enter(InstallPlanPhase::Installing),
        InstallPlanPhase::RequiresApproval
            if !plan.annotations().contains_key(crate::plan_preview::PREVIEW_ANNOTATION) =>
        {
            Next::Preview
        }
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
    /// The API server refused it (403): retried with backoff for as long as it takes, since a
    /// permission (of the group's ServiceAccount, or of OLM) may be granted at any time.
    pub forbidden: bool,
}

impl StepError {
    /// An error that is not a refusal.
    pub fn new(message: impl Into<String>, retryable: bool) -> Self {
        Self {
            message: message.into(),
            retryable,
            forbidden: false,
        }
    }
}

/// How soon to look again at a plan that has been refused (forbidden step, or nobody to install
/// as) for `refused_for`: every 2 s at first, slowing to once a minute.
pub fn refused_retry_delay(refused_for: Duration) -> Duration {
    Duration::from_secs((refused_for.as_secs() / 6).clamp(2, 60))
}

/// The outcome of one execution pass.
#[derive(Clone, Debug, PartialEq)]
pub struct Pass {
    /// The steps with their new statuses.
    pub steps: Vec<Step>,
    /// The first error, which stopped the pass.
    pub error: Option<StepError>,
    /// Some CRD is not Established yet, or a CRD step's share is parked for the next write of
    /// its CRD.
    pub waiting_for_api: bool,
    /// A CRD step's share is parked (`crate::crd_writes`): the next look is a second away at
    /// the soonest, not tens of milliseconds.
    pub parked: bool,
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

/// The previous `Installed` condition.
fn previous_installed(previous: &InstallPlanStatus) -> Option<&InstallPlanCondition> {
    previous
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == Some(InstallPlanConditionType::Installed))
}

/// `Installed=False` with `reason`, keeping the transition time while the reason stays; and how
/// long the plan has been refused for that reason.
fn refused_condition(
    previous: &InstallPlanStatus,
    reason: InstallPlanConditionReason,
    message: String,
    now: Timestamp,
) -> (InstallPlanCondition, Duration) {
    let mut condition = installed_condition(ConditionStatus::False, Some(reason.clone()), Some(message), now);
    let since = previous_installed(previous)
        .filter(|c| c.status == Some(ConditionStatus::False) && c.reason.as_ref() == Some(&reason))
        .and_then(|c| c.last_transition_time.clone());
    let mut refused_for = Duration::ZERO;
    if let Some(since) = since {
        refused_for = Duration::try_from(now.duration_since(since.0)).unwrap_or(Duration::ZERO);
        condition.last_transition_time = Some(since);
    }
    (condition, refused_for)
}

/// A Warning Event when a refusal starts or its message changes (not on every retry).
fn refusal_event(previous: &InstallPlanStatus, condition: &InstallPlanCondition) -> Option<EventNote> {
    let unchanged = previous_installed(previous).is_some_and(|c| {
        c.status == condition.status && c.reason == condition.reason && c.message == condition.message
    });
    let reason = condition.reason.as_ref()?.as_str().to_owned();
    (!unchanged).then(|| EventNote::warning(reason, "Install", condition.message.clone().unwrap_or_default()))
}

/// Previous conditions without a refusal that no longer holds.
fn without_refusal(previous: &InstallPlanStatus) -> Option<Vec<InstallPlanCondition>> {
    let kept: Vec<InstallPlanCondition> = previous
        .conditions
        .iter()
        .flatten()
        .filter(|c| !(c.type_ == Some(InstallPlanConditionType::Installed) && c.status == Some(ConditionStatus::False)))
        .cloned()
        .collect();
    (!kept.is_empty()).then_some(kept)
}

/// The status while nobody can install the plan (no or several OperatorGroups, or the group's
/// ServiceAccount is missing), as upstream: still `Installing`, `Installed=False` with reason
/// `InstallCheckFailed` and upstream's `words` (clients compare them), `status.message` and the
/// Event with the explanation `message`; looked at again with backoff and whenever a group
/// changes.
pub fn blocked(previous: &InstallPlanStatus, words: String, message: String, now: Timestamp) -> (InstallPlanStatus, Duration, Option<EventNote>) {
    let mut status = previous.clone();
    let (condition, refused_for) = refused_condition(previous, InstallPlanConditionReason::InstallCheckFailed, words, now);
    let changed = refusal_event(previous, &condition).is_some() || previous.message.as_deref() != Some(message.as_str());
    let event = changed.then(|| EventNote::warning("InstallCheckFailed", "Install", message.clone()));
    status.phase = InstallPlanPhase::Installing;
    status.message = Some(message);
    status.conditions = Some(vec![condition]);
    status.attenuated_service_account_ref = None;
    (status, refused_retry_delay(refused_for), event)
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
    // The retry window for transient errors starts again once a refusal is over, so time spent
    // waiting for a permission or a ServiceAccount does not count. (Not reset while refused: an
    // unchanged status is not rewritten, which keeps the backoff from being cut short by our
    // own status events.)
    let refusal_over = previous_installed(previous).is_some_and(|c| c.status == Some(ConditionStatus::False))
        && pass.error.as_ref().is_none_or(|e| !e.forbidden);
    if refusal_over {
        status.start_time = Some(Time(now));
    }
    let started = status.start_time.as_ref().map_or(now, |t| t.0);
    if status.start_time.is_none() {
        status.start_time = Some(Time(now));
    }
    let elapsed = Duration::try_from(now.duration_since(started)).unwrap_or(Duration::ZERO);
    match pass.error {
        Some(error) if error.forbidden => {
            // Never terminal (as upstream): the permission may be granted at any time, and the
            // plan then completes without anybody deleting it.
            let (condition, refused_for) =
                refused_condition(previous, InstallPlanConditionReason::InstallComponentFailed, error.message.clone(), now);
            let event = refusal_event(previous, &condition);
            status.phase = InstallPlanPhase::Installing;
            status.message = Some(format!("retrying execution due to error: {}", error.message));
            status.conditions = Some(vec![condition]);
            (status, Some(refused_retry_delay(refused_for)), event)
        }
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
            status.conditions = without_refusal(previous);
            status.message = Some(format!("retrying execution due to error: {}", error.message));
            // Bounded: the pass is retried at most every few seconds, and only for RETRY_TIMEOUT.
            let delay = Duration::from_secs((elapsed.as_secs() / 10).clamp(1, 5));
            (status, Some(delay), None)
        }
        None if pass.waiting_for_api => {
            status.phase = InstallPlanPhase::Installing;
            status.conditions = without_refusal(previous);
            status.message = None;
            let delay = wait_for_api_delay(elapsed);
            (status, Some(if pass.parked { delay.max(PARKED_RECHECK) } else { delay }), None)
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

#[cfg(test)]
mod tests {
    use super::*;
    use olm_runtime::status::without_timestamps;
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
        assert_eq!(next(&plan(true, Some(InstallPlanPhase::Installing), false)), Next::Wait, "bundles still being pulled");
        assert_eq!(next(&plan(true, Some(InstallPlanPhase::RequiresApproval), false)), Next::Wait, "approved while pulling");
        assert_eq!(next(&plan(true, Some(InstallPlanPhase::None), true)), Next::Wait, "no phase: left alone, as upstream");
        assert_eq!(next(&plan(false, Some(InstallPlanPhase::Planning), true)), Next::Wait, "Planning: left alone");
        let mut waiting = plan(false, Some(InstallPlanPhase::RequiresApproval), true);
        assert_eq!(next(&waiting), Next::Preview, "a plan waiting for approval gets its preview once");
        waiting.annotations_mut().insert(crate::plan_preview::PREVIEW_ANNOTATION.into(), "{}".into());
        assert_eq!(next(&waiting), Next::Wait);
        assert_eq!(
            next(&plan(true, Some(InstallPlanPhase::RequiresApproval), true)),
            Next::Enter(InstallPlanPhase::Installing)
        );
        assert_eq!(next(&plan(true, Some(InstallPlanPhase::Installing), true)), Next::Execute);
        assert_eq!(next(&plan(true, Some(InstallPlanPhase::Complete), true)), Next::Wait);
        assert_eq!(next(&plan(true, Some(InstallPlanPhase::Failed), true)), Next::Wait);
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
            parked: false,
        };
        let (s, requeue, event) = after_pass(&start, waiting.clone(), t0);
        assert_eq!(s.phase, InstallPlanPhase::Installing);
        assert!(event.is_none());
        assert_eq!(requeue, Some(Duration::from_millis(20)));
        let later = Timestamp::from_second(1000 + 4).expect("time");
        assert_eq!(after_pass(&start, waiting.clone(), later).1, Some(Duration::from_secs(1)));
        let much_later = Timestamp::from_second(1000 + 600).expect("time");
        assert_eq!(after_pass(&start, waiting.clone(), much_later).1, Some(Duration::from_secs(2)));
        // A parked share waits for the next write of its CRD: no look sooner than a second.
        let parked = Pass { parked: true, ..waiting };
        assert_eq!(after_pass(&start, parked.clone(), t0).1, Some(PARKED_RECHECK));
        assert_eq!(after_pass(&start, parked, much_later).1, Some(Duration::from_secs(2)));
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
            parked: false,
        };
        let (s, requeue, event) = after_pass(&start, ok, t0);
        assert_eq!(s.phase, InstallPlanPhase::Complete);
        assert!(requeue.is_none());
        assert_eq!(event.map(|e| e.reason), Some("InstallSucceeded".into()));

        let transient = StepError::new("apply ConfigMap ns/c: connection reset", true);
        let pass = Pass {
            steps: vec![step(StepStatus::Unknown)],
            error: Some(transient.clone()),
            waiting_for_api: false,
            parked: false,
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

        let fatal = StepError::new("apply Role ns/r: Role.rbac.authorization.k8s.io \"r\" is invalid", false);
        let (s, _, _) = after_pass(
            &start,
            Pass {
                steps: vec![],
                error: Some(fatal),
                waiting_for_api: false,
                parked: false,
            },
            t0,
        );
        assert_eq!(s.phase, InstallPlanPhase::Failed);
        let condition = s.conditions.unwrap_or_default().remove(0);
        assert_eq!(condition.reason, Some(InstallPlanConditionReason::InstallComponentFailed));
        assert!(condition.message.unwrap_or_default().contains("Role ns/r"));
    }

    fn forbidden(message: &str) -> Pass {
        Pass {
            steps: vec![step(StepStatus::Created), step(StepStatus::Unknown)],
            error: Some(StepError {
                message: message.into(),
                retryable: false,
                forbidden: true,
            }),
            waiting_for_api: false,
            parked: false,
        }
    }

    #[test]
    fn a_forbidden_step_keeps_installing_with_a_condition_and_slowing_retries() {
        let t0 = Timestamp::from_second(1000).expect("time");
        let start = InstallPlanStatus {
            phase: InstallPlanPhase::Installing,
            start_time: Some(Time(t0)),
            ..Default::default()
        };
        let message = "ServiceAccount team/installer may not get rolebindings in namespace team";
        let (s, requeue, event) = after_pass(&start, forbidden(message), t0);
        assert_eq!(s.phase, InstallPlanPhase::Installing, "never terminal");
        let event = event.expect("a Warning Event when the refusal starts");
        assert_eq!(event.reason, "InstallComponentFailed");
        assert_eq!(requeue, Some(Duration::from_secs(2)));
        assert_eq!(s.message.as_deref(), Some(format!("retrying execution due to error: {message}").as_str()));
        let condition = s.conditions.clone().unwrap_or_default().remove(0);
        assert_eq!(condition.type_, Some(InstallPlanConditionType::Installed));
        assert_eq!(condition.status, Some(ConditionStatus::False));
        assert_eq!(condition.reason, Some(InstallPlanConditionReason::InstallComponentFailed));
        assert_eq!(condition.message.as_deref(), Some(message));
        let steps = s.plan.clone().unwrap_or_default();
        assert_eq!(steps[0].status, StepStatus::Created, "what was applied is shown as such");

        // Ten minutes later: the transition time is kept, retries are at most a minute apart,
        // and the transient-error window has not run out.
        let later = Timestamp::from_second(1000 + 600).expect("time");
        let (s2, requeue, event) = after_pass(&s, forbidden(message), later);
        assert!(event.is_none(), "no Event on every retry");
        assert_eq!(requeue, Some(Duration::from_secs(60)));
        assert_eq!(
            without_timestamps(&serde_json::to_value(&s2).unwrap_or_default()),
            without_timestamps(&serde_json::to_value(&s).unwrap_or_default()),
            "an unchanged refusal is not rewritten (our own status event would cut the backoff short)"
        );
        assert_eq!(s2.phase, InstallPlanPhase::Installing);
        let condition = s2.conditions.clone().unwrap_or_default().remove(0);
        assert_eq!(condition.last_transition_time, Some(Time(t0)));

        // The permission is granted: the next pass completes.
        let done = Pass {
            steps: vec![step(StepStatus::Created), step(StepStatus::Created)],
            error: None,
            waiting_for_api: false,
            parked: false,
        };
        let (s3, _, _) = after_pass(&s2, done, later);
        assert_eq!(s3.phase, InstallPlanPhase::Complete);
        let condition = s3.conditions.unwrap_or_default().remove(0);
        assert_eq!(condition.status, Some(ConditionStatus::True));
        assert_eq!(s3.message, None);
    }

    #[test]
    fn a_plan_nobody_may_install_waits_with_install_check_failed() {
        let t0 = Timestamp::from_second(1000).expect("time");
        let start = InstallPlanStatus {
            phase: InstallPlanPhase::Installing,
            start_time: Some(Time(t0)),
            ..Default::default()
        };
        let message = "OperatorGroup team/og installs operators as ServiceAccount \"installer\" (spec.serviceAccountName), which does not exist".to_owned();
        let words = "please make sure the service account exists. sa=installer operatorgroup=team/og".to_owned();
        let (s, delay, event) = blocked(&start, words.clone(), message.clone(), t0);
        let event = event.expect("an Event");
        assert_eq!((event.reason.as_str(), event.message.as_str()), ("InstallCheckFailed", message.as_str()), "the Event explains");
        assert_eq!(s.phase, InstallPlanPhase::Installing);
        assert_eq!(s.message.as_deref(), Some(message.as_str()));
        let condition = s.conditions.clone().unwrap_or_default().remove(0);
        assert_eq!(condition.message.as_deref(), Some(words.as_str()), "upstream's words in the condition");
        assert_eq!(condition.reason, Some(InstallPlanConditionReason::InstallCheckFailed));
        assert_eq!(condition.status, Some(ConditionStatus::False));
        assert_eq!(delay, Duration::from_secs(2));
        // Once it can run, a transient error does not inherit the time spent blocked, and the
        // stale condition goes.
        let later = Timestamp::from_second(1000 + 3600).expect("time");
        let (blocked_long, delay, event) = blocked(&s, words, message, later);
        assert!(event.is_none());
        assert_eq!(delay, Duration::from_secs(60), "slows down to once a minute");
        assert_eq!(
            without_timestamps(&serde_json::to_value(&blocked_long).unwrap_or_default()),
            without_timestamps(&serde_json::to_value(&s).unwrap_or_default()),
            "an unchanged block is not rewritten"
        );
        let pass = Pass {
            steps: vec![],
            error: Some(StepError::new("connection reset", true)),
            waiting_for_api: false,
            parked: false,
        };
        let (s2, requeue, _) = after_pass(&blocked_long, pass, later);
        assert_eq!(s2.phase, InstallPlanPhase::Installing);
        assert!(requeue.is_some());
        assert!(s2.conditions.is_none(), "{:?}", s2.conditions);
    }
}
