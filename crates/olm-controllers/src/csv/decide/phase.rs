//! The per-phase part of the machine: `decide_phase` dispatches to one function per phase.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;
use olm_api::v1alpha1::RequirementStatus;
use olm_api::v1alpha1::cluster_service_version::{ClusterServiceVersion, ClusterServiceVersionStatus, CsvPhase, CsvReason};

use super::deletion::{crd_owner_conflict, replaced, replacement, replaces_cycle};
use super::exposure::{api_service_conflict, api_service_problems, conversion_problem, exposure_actions};
use crate::csv::api_registration;
use super::strategy::{invalid_strategy, strategy_problem};
use crate::csv::deployment::Health;
use super::{
    CsvAction, CsvDecision, INSTALL_TIMEOUT, Observed, PROGRESS_REFRESH, REINSTALL_PAUSE, REQUEUE_REQUIREMENTS,
    REQUEUE_RESYNC, REQUEUE_WAITING, transition,
};
use crate::csv::certs::{self, cert_deployments};
use crate::csv::deployment::DeploymentProblem;
use crate::csv::requirements;
use crate::metadata::{is_rollback_of, owned_by};

/// What stays the same through the phases of one pass.
pub(super) struct Pass<'p, 'a> {
    /// The observation.
    pub observed: &'p Observed<'a>,
    /// The group's upgrade strategy is `TechPreviewUnsafeFailForward`.
    pub fail_forward: bool,
    /// The namespace selector of the operator's admission webhooks.
    pub namespace_selector: Option<&'p LabelSelector>,
    /// The time of the pass.
    pub now: Timestamp,
}

/// The per-phase part of the machine.
pub(super) fn decide_phase(pass: &Pass<'_, '_>, previous: &ClusterServiceVersionStatus, phase: CsvPhase) -> CsvDecision {
    match phase {
        CsvPhase::None | CsvPhase::Unknown | CsvPhase::Other(_) => none(pass, previous),
        CsvPhase::Pending => pending(pass, previous),
        CsvPhase::InstallReady => install_ready(pass, previous),
        CsvPhase::Installing => installing(pass, previous),
        CsvPhase::Succeeded => succeeded(pass, previous),
        CsvPhase::Failed => failed(pass, previous),
        CsvPhase::Replacing => replacing(pass, previous),
        CsvPhase::Deleting => CsvDecision::status(previous.clone()).act(CsvAction::DeleteSelf),
    }
}

/// Go on deciding, from `first`'s status, in phase `next` with the same observation. A move
/// that needs nothing but a status change (None → Pending, Pending → InstallReady) is not worth
/// a status write and a watch round trip of its own: that is most of an install's time. The
/// conditions history still records every step, and the Events of both steps are kept.
fn and_then_phase(first: CsvDecision, pass: &Pass<'_, '_>, next: CsvPhase) -> CsvDecision {
    let Some(status) = first.status.clone() else {
        return first;
    };
    let mut second = decide_phase(pass, &status, next);
    if second.status.is_none() {
        second.status = first.status;
    }
    let mut actions = first.actions;
    actions.append(&mut second.actions);
    second.actions = actions;
    let mut events = first.events;
    events.append(&mut second.events);
    second.events = events;
    second
}

/// `decision` with the requirement check's entries as `status.requirementStatus`.
fn with_requirements(mut decision: CsvDecision, entries: Vec<RequirementStatus>) -> CsvDecision {
    if let Some(status) = decision.status.as_mut() {
        status.requirement_status = Some(Arc::new(entries));
    }
    decision
}

/// Pending with the requirements as checked, one or more not met; re-checked periodically
/// (RBAC is not watched).
fn requirements_not_met(pass: &Pass<'_, '_>, previous: &ClusterServiceVersionStatus, entries: Vec<RequirementStatus>) -> CsvDecision {
    let d = transition(
        previous,
        CsvPhase::Pending,
        CsvReason::RequirementsNotMet,
        "one or more requirements couldn't be found",
        pass.now,
    );
    with_requirements(d, entries).requeue(REQUEUE_REQUIREMENTS)
}

/// Replacing: `next` replaces this CSV.
fn being_replaced(pass: &Pass<'_, '_>, previous: &ClusterServiceVersionStatus, next: &ClusterServiceVersion) -> CsvDecision {
    transition(
        previous,
        CsvPhase::Replacing,
        CsvReason::BeingReplaced,
        format!("being replaced by csv: {}", next.name_any()),
        pass.now,
    )
}

/// A Succeeded CSV keeps admin/edit/view ClusterRoles for each API it provides (written after
/// the status, see `ApplyApiRole`).
fn with_api_roles(observed: &Observed<'_>, mut decision: CsvDecision) -> CsvDecision {
    for role in crate::rbac::provided_api_roles(observed.csv, observed.crd_uids) {
        let current = observed
            .cluster_roles
            .get(&role.name_any())
            .is_some_and(|existing| crate::rbac::role_is_current(existing, &role));
        if !current {
            decision = decision.act(CsvAction::ApplyApiRole(Box::new(role)));
        }
    }
    decision
}

/// A new CSV: Pending, and on at once; but while it is younger than [`FIRST_CHECK_GRACE`] and
/// its requirements are not all there, nothing is written yet (see there).
fn none(pass: &Pass<'_, '_>, previous: &ClusterServiceVersionStatus) -> CsvDecision {
    let pending = transition(previous, CsvPhase::Pending, CsvReason::RequirementsUnknown, "requirements not yet checked", pass.now);
    let decision = and_then_phase(pending, pass, CsvPhase::Pending);
    let not_met = decision.status.as_ref().is_some_and(|s| s.reason == Some(CsvReason::RequirementsNotMet));
    match grace_left(pass.observed.csv, pass.now) {
        Some(left) if not_met => CsvDecision {
            status: None,
            events: Vec::new(),
            ..decision
        }
        .requeue(left.min(GRACE_RECHECK)),
        _ => decision,
    }
}

/// How long a new CSV whose requirements are missing waits before it says so. Its InstallPlan
/// writes the CRDs, ServiceAccounts and RBAC it needs in the rounds right after the CSV, so the
/// first pass nearly always finds them missing: Pending/RequirementsNotMet, its Event and the
/// watch traffic of both were one of an install's five CSV status writes for news that is
/// stale a second later. The CRDs' and ServiceAccounts' events wake the CSV; what is still
/// missing after the grace (a requirement no plan writes) is reported then.
const FIRST_CHECK_GRACE: Duration = Duration::from_secs(10);

/// Re-check period within [`FIRST_CHECK_GRACE`]: RBAC the plan writes wakes no CSV.
const GRACE_RECHECK: Duration = Duration::from_secs(2);

/// What is left of [`FIRST_CHECK_GRACE`] for `csv` at `now` (by its creationTimestamp; none for
/// a CSV without one or created "after" `now`, a clock skew that must not hold it back).
fn grace_left(csv: &ClusterServiceVersion, now: Timestamp) -> Option<Duration> {
    let created = csv.metadata.creation_timestamp.as_ref()?.0;
    let age = now.duration_since(created);
    if age.is_negative() {
        return None;
    }
    FIRST_CHECK_GRACE.checked_sub(age.unsigned_abs()).filter(|left| !left.is_zero())
}

/// Pending: the upgrade gate, the requirements, the descriptions and ownership conflicts; then
/// InstallReady once the replaced CSV (if any) has handed over.
fn pending(pass: &Pass<'_, '_>, previous: &ClusterServiceVersionStatus) -> CsvDecision {
    let (observed, now) = (pass.observed, pass.now);
    let csv = observed.csv;
    // The operator being replaced can veto its upgrade through its OperatorCondition.
    if let Some((olm_api::ConditionStatus::False, message)) = observed.replaced_condition.and_then(|c| c.upgradeable()) {
        return transition(
            previous,
            CsvPhase::Pending,
            CsvReason::OperatorConditionNotUpgradeable,
            format!("The operator is not upgradeable: {message}"),
            now,
        )
        .requeue(REQUEUE_REQUIREMENTS);
    }
    if let Some(problem) = invalid_strategy(csv) {
        return transition(previous, CsvPhase::Failed, CsvReason::InvalidInstallStrategy, problem, now);
    }
    let (entries, met) = requirements::check(csv, &observed.facts, observed.permissions);
    if !met {
        return requirements_not_met(pass, previous, entries);
    }
    // Failing past this point, the requirements as checked stay in the status (as upstream).
    if let Some(problem) = api_registration::webhook_description_problem(csv) {
        return with_requirements(transition(previous, CsvPhase::Failed, CsvReason::InvalidWebhookDescription, problem, now), entries);
    }
    if let Some(conflict) = crd_owner_conflict(observed) {
        let failed = transition(previous, CsvPhase::Failed, CsvReason::OwnerConflict, format!("owner conflict: {conflict}"), now);
        return with_requirements(failed, entries);
    }
    if let Some(conflict) = api_service_conflict(observed) {
        return with_requirements(transition(previous, CsvPhase::Failed, CsvReason::OwnerConflict, conflict, now), entries);
    }
    if let Some(cycle) = replaces_cycle(observed) {
        let message = format!(
            "spec.replaces forms a cycle ({} -> {}): no CSV of it replaces another, so this newest one does not install and the others keep running; delete this CSV, or set its spec.replaces to a CSV that does not replace it",
            cycle.join(" -> "),
            cycle[0]
        );
        let failed = transition(previous, CsvPhase::Failed, CsvReason::Other("ReplacesCycle".into()), message, now);
        return with_requirements(failed, entries);
    }
    if let Some(old) = replaced(observed)
        && old.phase() != Some(&CsvPhase::Replacing)
    {
        // Wait until the CSV we replace hands over (it moves to Replacing when it sees
        // us); its status change triggers this CSV again.
        return with_requirements(CsvDecision::status(previous.clone()), entries).requeue(REQUEUE_WAITING);
    }
    let d = transition(
        previous,
        CsvPhase::InstallReady,
        CsvReason::AllRequirementsMet,
        "all requirements found, attempting install",
        now,
    );
    and_then_phase(with_requirements(d, entries), pass, CsvPhase::InstallReady)
}

/// InstallReady: apply the exposure objects and the Deployments (and delete the Deployments
/// the strategy no longer lists); Installing.
fn install_ready(pass: &Pass<'_, '_>, previous: &ClusterServiceVersionStatus) -> CsvDecision {
    let (observed, now) = (pass.observed, pass.now);
    let csv = observed.csv;
    if let Some(problem) = invalid_strategy(csv) {
        return transition(previous, CsvPhase::Failed, CsvReason::InvalidInstallStrategy, problem, now);
    }
    if let Some(problem) = certs::invalid_descriptions(csv) {
        return transition(previous, CsvPhase::Failed, CsvReason::InvalidInstallStrategy, problem, now);
    }
    if let Some(conflict) = api_service_conflict(observed) {
        // Never overwrite an APIService that belongs to someone else.
        return transition(previous, CsvPhase::Failed, CsvReason::OwnerConflict, conflict, now);
    }
    if let Some(problem) = conversion_problem(observed) {
        // Upstream finds this while installing: the install fails with the reason below.
        return transition(
            previous,
            CsvPhase::Failed,
            CsvReason::InstallComponentFailed,
            format!("install strategy failed: {problem}"),
            now,
        );
    }
    let desired = observed.desired_deployments();
    let wanted_names: BTreeSet<String> = desired.iter().map(|d| d.name_any()).collect();
    let mut d = transition(
        previous,
        CsvPhase::Installing,
        CsvReason::InstallSucceeded,
        "waiting for install components to report healthy",
        now,
    );
    if observed.serving_certs.values().any(|c| c.fresh)
        && let Some(status) = d.status.as_mut()
    {
        status.certs_last_updated = Some(Time(now));
        status.certs_rotate_at = Some(Time(certs::rotate_at(now)));
    }
    let (before, after) = exposure_actions(observed, pass.namespace_selector);
    for action in before {
        d = d.act(action);
    }
    for deployment in desired {
        d = d.act(CsvAction::ApplyDeployment(Box::new(deployment.clone())));
    }
    for action in after {
        d = d.act(action);
    }
    for (name, deployment) in observed.deployments {
        if !wanted_names.contains(name) && owned_by(deployment.labels(), csv) {
            d = d.act(CsvAction::DeleteDeployment(name.clone()));
        }
    }
    d.requeue(REQUEUE_WAITING)
}

/// Installing: Succeeded once the components are healthy; back to InstallReady for what needs
/// applying again; Failed after the install timeout.
fn installing(pass: &Pass<'_, '_>, previous: &ClusterServiceVersionStatus) -> CsvDecision {
    let (observed, now) = (pass.observed, pass.now);
    match strategy_problem(observed, observed.desired_deployments(), Health::Rollout) {
        None => with_api_roles(
            observed,
            transition(previous, CsvPhase::Succeeded, CsvReason::InstallSucceeded, "install strategy completed with no errors", now),
        )
        .requeue(REQUEUE_RESYNC),
        Some(DeploymentProblem::Unrecoverable(message)) => install_check_failed(previous, &message, now),
        Some(problem) if problem.needs_apply() && !matches!(problem, DeploymentProblem::Missing(_)) => transition(
            previous,
            CsvPhase::InstallReady,
            CsvReason::InstallWaiting,
            format!("installing: {}", problem.message()),
            now,
        ),
        Some(problem) => {
            let since = previous.last_transition_time.as_ref().map(|t| t.0).unwrap_or(now);
            let timeout = SignedDuration::try_from(INSTALL_TIMEOUT).unwrap_or(SignedDuration::from_secs(300));
            if since + timeout < now {
                transition(
                    previous,
                    CsvPhase::Failed,
                    CsvReason::InstallCheckFailed,
                    format!(
                        "install timeout: after {}s still {}; `kubectl describe pods -n {}` tells why (a node selector no node matches, an image that cannot be pulled, a failing readiness probe)",
                        INSTALL_TIMEOUT.as_secs(),
                        problem.message(),
                        observed.csv.metadata.namespace.as_deref().unwrap_or_default()
                    ),
                    now,
                )
            } else {
                let waiting = transition(
                    previous,
                    CsvPhase::Installing,
                    CsvReason::InstallWaiting,
                    format!("installing: {}", problem.message()),
                    now,
                );
                paced_progress(previous, waiting, now)
            }
        }
    }
}

/// `waiting` (Installing, with the rollout's progress message), or, while the status written
/// last is an Installing one younger than [`PROGRESS_REFRESH`], that status unchanged: no write
/// until the refresh is due (then the message is brought up to date) or the phase changes.
fn paced_progress(previous: &ClusterServiceVersionStatus, waiting: CsvDecision, now: Timestamp) -> CsvDecision {
    let in_progress = previous.phase == Some(CsvPhase::Installing)
        && matches!(previous.reason, Some(CsvReason::InstallSucceeded | CsvReason::InstallWaiting));
    let refresh = SignedDuration::try_from(PROGRESS_REFRESH).unwrap_or(SignedDuration::from_secs(15));
    match previous.last_update_time.as_ref().map(|t| t.0 + refresh) {
        Some(due) if in_progress && now < due => {
            let left = due.duration_since(now).unsigned_abs();
            CsvDecision::status(previous.clone()).requeue(left.clamp(Duration::from_secs(1), REQUEUE_WAITING))
        }
        _ => waiting.requeue(REQUEUE_WAITING),
    }
}

/// Succeeded: hand over to a replacement, rotate certificates when due, and watch the
/// APIServices, the requirements and the components.
fn succeeded(pass: &Pass<'_, '_>, previous: &ClusterServiceVersionStatus) -> CsvDecision {
    let (observed, now) = (pass.observed, pass.now);
    let csv = observed.csv;
    if let Some(next) = replacement(observed) {
        return being_replaced(pass, previous, next);
    }
    // Due by the status, or the stored certificates cannot serve any more (observe generated
    // fresh ones: the Secret was changed, or they expired).
    let rotation_due = previous.certs_rotate_at.as_ref().is_some_and(|at| at.0 <= now) || observed.serving_certs.values().any(|c| c.fresh);
    if rotation_due && !cert_deployments(csv).is_empty() {
        return transition(
            previous,
            CsvPhase::InstallReady,
            CsvReason::NeedsCertRotation,
            "CSV owns resources that require a cert refresh",
            now,
        );
    }
    // As upstream: a generated APIService that is gone, stale or taken fails the CSV
    // with this reason; the Failed pass reinstalls it when it can.
    if let (Some(problem), _) = api_service_problems(observed) {
        return transition(previous, CsvPhase::Failed, CsvReason::ApiServiceResourceIssue, problem.message(), now);
    }
    let (entries, met) = requirements::check(csv, &observed.facts, None);
    if !met {
        let d = transition(
            previous,
            CsvPhase::Failed,
            CsvReason::RequirementsNotMet,
            "requirements no longer met",
            now,
        );
        return with_requirements(d, entries);
    }
    reinstall(pass, previous, CsvReason::ComponentUnhealthy, CsvPhase::Failed)
        .unwrap_or_else(|| with_api_roles(observed, CsvDecision::status(previous.clone())).requeue(REQUEUE_RESYNC))
}

/// Failed: hand over (fail-forward), wait where retrying cannot help, else reinstall what is
/// missing or recover to Succeeded.
fn failed(pass: &Pass<'_, '_>, previous: &ClusterServiceVersionStatus) -> CsvDecision {
    let (observed, now) = (pass.observed, pass.now);
    let csv = observed.csv;
    // With the fail-forward upgrade strategy a failed CSV hands over to its replacement, and
    // always to the version a rollback brings back.
    if let Some(next) = replacement(observed)
        && (pass.fail_forward || is_rollback_of(next, &csv.name_any()))
    {
        return being_replaced(pass, previous, next);
    }
    let (entries, met) = requirements::check(csv, &observed.facts, observed.permissions);
    if !met {
        return requirements_not_met(pass, previous, entries);
    }
    if invalid_strategy(csv).is_some() {
        // Nothing to retry until the CSV itself changes.
        return CsvDecision::status(previous.clone());
    }
    if previous.reason == Some(CsvReason::InvalidWebhookDescription) && api_registration::webhook_description_problem(csv).is_some() {
        // Fixed only by editing the CSV.
        return CsvDecision::status(previous.clone());
    }
    if previous.reason == Some(CsvReason::InstallComponentFailed) && conversion_problem(observed).is_some() {
        // Retrying cannot help until the CSV or the CRD changes (both are watched).
        return CsvDecision::status(previous.clone()).requeue(REQUEUE_RESYNC);
    }
    if previous.reason == Some(CsvReason::InstallComponentFailed) {
        // The API server refused the install; wait before trying again so a CSV that is
        // refused every time cycles slowly instead of hot-looping through the phases.
        let since = previous.last_transition_time.as_ref().map(|t| t.0).unwrap_or(now);
        let pause = SignedDuration::try_from(REINSTALL_PAUSE).unwrap_or(SignedDuration::from_secs(30));
        if since + pause > now {
            let left = (since + pause).duration_since(now).unsigned_abs();
            return CsvDecision::status(previous.clone()).requeue(left.max(Duration::from_secs(1)));
        }
    }
    if previous.reason == Some(CsvReason::OwnerConflict)
        && (crd_owner_conflict(observed).is_some() || api_service_conflict(observed).is_some())
    {
        return CsvDecision::status(previous.clone()).requeue(REQUEUE_RESYNC);
    }
    match api_service_problems(observed) {
        (Some(DeploymentProblem::Unrecoverable(_)), _) => {
            // Owned by someone else now: nothing to reinstall until that changes.
            return CsvDecision::status(previous.clone()).requeue(REQUEUE_RESYNC);
        }
        (Some(problem), _) => {
            return transition(
                previous,
                CsvPhase::Pending,
                CsvReason::ApiServiceResourcesNeedReinstall,
                problem.message(),
                now,
            );
        }
        (None, _) => {}
    }
    reinstall(pass, previous, CsvReason::NeedsReinstall, CsvPhase::Pending).unwrap_or_else(|| {
        transition(previous, CsvPhase::Succeeded, CsvReason::InstallSucceeded, "install strategy completed with no errors", now)
            .requeue(REQUEUE_RESYNC)
    })
}

/// How an installed CSV (Succeeded or Failed) answers a problem with its strategy (`None`
/// when there is none): what applying again fixes goes back to InstallReady, anything else to
/// `otherwise`, both with `reason`; a Deployment past its progress deadline fails the CSV, as
/// upstream: applying the same spec again cannot help, and would cycle a Failed CSV through
/// the phases.
fn reinstall(pass: &Pass<'_, '_>, previous: &ClusterServiceVersionStatus, reason: CsvReason, otherwise: CsvPhase) -> Option<CsvDecision> {
    let problem = strategy_problem(pass.observed, pass.observed.desired_deployments(), Health::Installed)?;
    let phase = match problem {
        DeploymentProblem::Unrecoverable(ref message) => return Some(install_check_failed(previous, message, pass.now).requeue(REQUEUE_RESYNC)),
        DeploymentProblem::Updated(_) | DeploymentProblem::AnnotationsMissing(_) => CsvPhase::InstallReady,
        _ => otherwise,
    };
    Some(transition(previous, phase, reason, format!("installing: {}", problem.message()), pass.now).requeue(REQUEUE_RESYNC))
}

/// Whether `next` (this CSV's replacement), or a CSV that replaces it further along the chain
/// past CSVs that are themselves being replaced, has Succeeded: the oldest of a chain can go
/// then, as upstream's `findIntermediatesForDeletion` decides. Checking `next` alone waits for
/// ever when a walk outran this CSV's passes: `next` went Succeeded, then Replacing, and waits
/// for this CSV to go first.
fn newer_succeeded(observed: &Observed<'_>, next: &ClusterServiceVersion) -> bool {
    let mut seen = BTreeSet::new();
    let mut current = next;
    loop {
        match current.phase() {
            Some(CsvPhase::Succeeded) => return true,
            Some(CsvPhase::Replacing | CsvPhase::Deleting) if seen.insert(current.name_any()) => {}
            _ => return false,
        }
        let name = current.name_any();
        match observed.peers.iter().copied().find(|p| p.spec.replaces.as_deref() == Some(name.as_str())) {
            Some(newer) => current = newer,
            None => return false,
        }
    }
}

/// A Deployment that will not become available (past its progress deadline) fails the CSV.
fn install_check_failed(previous: &ClusterServiceVersionStatus, message: &str, now: Timestamp) -> CsvDecision {
    transition(previous, CsvPhase::Failed, CsvReason::InstallCheckFailed, format!("install failed: {message}"), now)
}

/// Replacing: Deleting once the replacement has Succeeded (the oldest of the chain first).
fn replacing(pass: &Pass<'_, '_>, previous: &ClusterServiceVersionStatus) -> CsvDecision {
    let (observed, now) = (pass.observed, pass.now);
    if replacement(observed).is_some() && replaced(observed).is_some() {
        // Not the oldest of the chain: deleting it now would break the chain.
        return CsvDecision::status(previous.clone()).requeue(REQUEUE_WAITING);
    }
    match replacement(observed) {
        Some(next) if newer_succeeded(observed, next) => transition(
            previous,
            CsvPhase::Deleting,
            CsvReason::Replaced,
            "has been replaced by a newer ClusterServiceVersion that has successfully installed.",
            now,
        ),
        Some(_) => CsvDecision::status(previous.clone()).requeue(REQUEUE_WAITING),
        // The replacement disappeared: run again as the installed version.
        None => transition(previous, CsvPhase::Pending, CsvReason::NeedsReinstall, "the replacing ClusterServiceVersion is gone", now),
    }
}
