//! Pure decisions of the Subscription controller: whether to resolve now, and the full status
//! (state, currentCSV/installedCSV, plan references, catalog health and conditions).
//!
//! Differences from upstream, on purpose:
//! - conditions are attributed only to the Subscription they concern: a broken catalog or an
//!   unresolvable Subscription does not put `ResolutionFailed`/`CatalogSourcesUnhealthy=True`
//!   on its neighbours (`catalogHealth` still lists every visible catalog);
//! - each InstallPlan belongs to one Subscription, so `installPlanApproval: Manual` holds back
//!   only that Subscription's plans;
//! - the next upgrade is planned once the installed CSV has Succeeded (one step at a time).
//!
//! Longer than ~600 lines with its unit tests: the status rules and the tests of each rule sit together.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use olm_api::common::ConditionStatus;
use olm_api::v1alpha1::cluster_service_version::CsvPhase;
use olm_api::v1alpha1::install_plan::InstallPlanPhase;
use olm_api::v1alpha1::subscription::{
    InstallPlanReference, Subscription, SubscriptionCatalogHealth, SubscriptionCondition, SubscriptionConditionType, SubscriptionState,
    SubscriptionStatus, reasons,
};
use olm_resolver::CatalogKey;

use crate::plan_write_failures::WriteFailure;

/// A catalog visible to the Subscription's namespace.
#[derive(Clone, Debug, PartialEq)]
pub struct CatalogView {
    /// Name and namespace.
    pub key: CatalogKey,
    /// The CatalogSource's uid.
    pub uid: Option<String>,
    /// Its content can be read now.
    pub healthy: bool,
    /// Why not, when it cannot.
    pub error: Option<String>,
}

/// The InstallPlan a Subscription references.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanView {
    /// Name.
    pub name: String,
    /// Uid.
    pub uid: String,
    /// `spec.generation`.
    pub generation: Option<i64>,
    /// `status.phase`.
    pub phase: InstallPlanPhase,
    /// The reason of the `Installed` condition when it is False.
    pub failed_reason: Option<String>,
    /// `status.message`.
    pub message: Option<String>,
    /// The InstallPlan controller's last write of its status was refused.
    pub write_failed: Option<WriteFailure>,
    /// It has no steps yet: its bundle lookups are pending, or failed (resolution goes on, so
    /// the pull is retried and the steps written when it succeeds).
    pub awaits_content: bool,
    /// `spec.clusterServiceVersionNames`: the bundles it installs.
    pub bundles: Vec<String>,
}

/// What the observe step found about the Subscription's current CSV.
#[derive(Clone, Debug, PartialEq)]
pub struct CsvView {
    /// Name.
    pub name: String,
    /// `status.phase`.
    pub phase: Option<CsvPhase>,
    /// When it is `Failed`: its reason and message.
    pub failure: Option<(String, String)>,
}

/// Whether to resolve now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Gate {
    /// Resolve.
    Resolve,
    /// Not now, because...
    Wait(&'static str),
}

/// Resolution is needed unless a plan is in flight, failed, or the installed CSV has not
/// finished installing. With `fail_forward` (the OperatorGroup's `upgradeStrategy:
/// TechPreviewUnsafeFailForward`, as upstream) a failed plan does not hold resolution back: a
/// newer bundle that upgrades from what is installed replaces it (the same bundles again keep
/// the failed plan: same name).
pub fn gate(plan: Option<&PlanView>, plan_missing: bool, current: Option<&CsvView>, has_plan_ref: bool, fail_forward: bool) -> Gate {
    if has_plan_ref && !plan_missing && !plan.is_some_and(|p| p.awaits_content) {
        match plan.map(|p| &p.phase) {
            Some(InstallPlanPhase::Failed) if fail_forward => {}
            Some(InstallPlanPhase::Failed) => return Gate::Wait("the InstallPlan failed"),
            Some(InstallPlanPhase::Complete) => {
                if current.is_none() {
                    return Gate::Wait("the InstallPlan is complete; waiting for its CSV");
                }
            }
            _ => return Gate::Wait("an InstallPlan is in progress"),
        }
    }
    match current.map(|c| c.phase.as_ref()) {
        Some(Some(CsvPhase::Succeeded)) | None => Gate::Resolve,
        Some(_) => Gate::Wait("the installed CSV has not succeeded yet"),
    }
}

/// The outcome of this reconcile's resolution.
#[derive(Clone, Debug, PartialEq)]
pub enum Resolved {
    /// Resolution did not run (see [`Gate`]).
    Skipped,
    /// It ran and this Subscription could not be resolved.
    Failed {
        /// `ConstraintsNotSatisfiable` or `ErrorPreventedResolution`.
        reason: &'static str,
        /// Why, and what to change.
        message: String,
    },
    /// It resolved, and a bundle image is still being pulled.
    Unpacking {
        /// Which bundle and image, and for how long so far.
        message: String,
        /// The plan showing its pending bundle lookups, when written.
        plan: Option<PlanView>,
    },
    /// It resolved, but a bundle image could not be pulled or read.
    UnpackFailed {
        /// Which image, which registry, why, and what to do.
        message: String,
        /// The plan showing its failed bundle lookups, when written.
        plan: Option<PlanView>,
    },
    /// It resolved, but writing the plan (or its content) was refused by the API server.
    WriteFailed {
        /// The error's category (`ApiInvalid`, `ApiServerError`, …), as on the Event.
        reason: &'static str,
        /// What was refused, what the API server said, and what to do.
        message: String,
    },
    /// Nothing new for this Subscription.
    UpToDate,
    /// A plan was created.
    NewPlan {
        /// The plan.
        plan: PlanView,
        /// The CSV it installs for this Subscription.
        current_csv: String,
    },
}

/// Deprecations that apply to the Subscription (from its catalog).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Deprecations {
    /// `olm.package` message.
    pub package: Option<String>,
    /// `olm.channel` message (only when `spec.channel` names it).
    pub channel: Option<String>,
    /// `olm.bundle` message of the installed bundle.
    pub bundle: Option<String>,
}

/// Everything the status is computed from.
#[derive(Clone, Debug)]
pub struct Observed<'a> {
    /// The Subscription (fresh from the API server).
    pub sub: &'a Subscription,
    /// Catalogs visible from its namespace, sorted by namespace and name.
    pub catalogs: Vec<CatalogView>,
    /// The referenced plan, when it exists.
    pub plan: Option<PlanView>,
    /// A plan is referenced but does not exist.
    pub plan_missing: bool,
    /// The current CSV, when it exists in the namespace.
    pub current: Option<CsvView>,
    /// An installed CSV of the package this Subscription takes over (no currentCSV yet).
    pub adopted: Option<String>,
    /// This reconcile's resolution.
    pub resolved: Resolved,
    /// Deprecations.
    pub deprecations: Deprecations,
    /// Why the installed CSV is not its channel's head (reason, message), when resolution
    /// found nothing to do.
    pub behind: Option<(&'static str, String)>,
    /// What becomes of the `RolledBack` condition.
    pub rolled_back: RolledBackNote,
}

/// The `RolledBack` condition (see [`super::rollback`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub enum RolledBackNote {
    /// No rollback (any more): no condition.
    #[default]
    Clear,
    /// As it is.
    Keep,
    /// A rollback starts: reason and message.
    Set(&'static str, String),
}

fn set_condition(
    conditions: &mut Vec<SubscriptionCondition>,
    type_: SubscriptionConditionType,
    status: ConditionStatus,
    reason: Option<&str>,
    message: Option<String>,
    now: Timestamp,
) {
    let previous = conditions.iter().position(|c| c.type_ == type_);
    let transition = match previous.map(|i| &conditions[i]) {
        Some(c) if c.status == status => c.last_transition_time.clone(),
        _ => Some(Time(now)),
    };
    let condition = SubscriptionCondition {
        type_,
        status,
        reason: reason.map(str::to_owned),
        message,
        last_heartbeat_time: Some(Time(now)),
        last_transition_time: transition,
    };
    match previous {
        Some(i) => conditions[i] = condition,
        None => conditions.push(condition),
    }
}

fn remove_condition(conditions: &mut Vec<SubscriptionCondition>, type_: &SubscriptionConditionType) {
    conditions.retain(|c| &c.type_ != type_);
}

/// The catalog this Subscription reads.
pub fn target(sub: &Subscription) -> CatalogKey {
    CatalogKey::new(sub.spec.source.clone(), sub.spec.source_namespace.clone())
}

/// The full desired status.
pub fn status(o: &Observed<'_>, now: Timestamp) -> SubscriptionStatus {
    let previous = o.sub.status.clone().unwrap_or_default();
    let mut st = previous.clone();
    let mut conditions = previous.conditions.clone().unwrap_or_default();
    st.last_updated = Some(Time(now));

    // Catalog health: every visible catalog; the condition only about the one we use.
    st.catalog_health = Some(
        o.catalogs
            .iter()
            .map(|c| SubscriptionCatalogHealth {
                catalog_source_ref: Some(ObjectReference {
                    api_version: Some("operators.coreos.com/v1alpha1".into()),
                    kind: Some("CatalogSource".into()),
                    name: Some(c.key.name.clone()),
                    namespace: Some(c.key.namespace.clone()),
                    uid: c.uid.clone(),
                    ..Default::default()
                }),
                last_updated: Some(Time(now)),
                healthy: c.healthy,
            })
            .collect(),
    );
    let wanted = target(o.sub);
    let others_unhealthy: Vec<String> = o
        .catalogs
        .iter()
        .filter(|c| !c.healthy && c.key != wanted)
        .map(|c| c.key.to_string())
        .collect();
    match o.catalogs.iter().find(|c| c.key == wanted) {
        None => {
            let reason = if o.catalogs.is_empty() {
                reasons::NO_CATALOG_SOURCES_FOUND
            } else {
                reasons::UNHEALTHY_CATALOG_SOURCE_FOUND
            };
            set_condition(
                &mut conditions,
                SubscriptionConditionType::CatalogSourcesUnhealthy,
                ConditionStatus::True,
                Some(reason),
                Some(format!("targeted catalogsource {} missing", wanted)),
                now,
            );
        }
        // Upstream's words exactly (clients compare them); why the catalog cannot be read is
        // in ResolutionFailed and on the CatalogSource.
        Some(c) if !c.healthy => set_condition(
            &mut conditions,
            SubscriptionConditionType::CatalogSourcesUnhealthy,
            ConditionStatus::True,
            Some(reasons::UNHEALTHY_CATALOG_SOURCE_FOUND),
            Some(format!("targeted catalogsource {} unhealthy", c.key)),
            now,
        ),
        Some(_) => {
            let message = if others_unhealthy.is_empty() {
                "all available catalogsources are healthy".to_owned()
            } else {
                format!(
                    "the targeted catalogsource is healthy (unhealthy but not used by this subscription: {})",
                    others_unhealthy.join(", ")
                )
            };
            set_condition(
                &mut conditions,
                SubscriptionConditionType::CatalogSourcesUnhealthy,
                ConditionStatus::False,
                Some(reasons::ALL_CATALOG_SOURCES_HEALTHY),
                Some(message),
                now,
            );
        }
    }

    // Plan and CSV bookkeeping.
    let mut plan = o.plan.clone();
    if o.plan_missing && o.current.is_none() {
        // The plan went away before its CSV appeared: start over. The reference stays until a
        // new plan replaces it, so that the new one is named apart from the deleted one
        // (`plan::plan_name`) even when this resolution makes none.
        st.install_plan = None;
        st.install_plan_generation = None;
        st.current_csv = None;
        st.state = Some(SubscriptionState::None);
        remove_condition(&mut conditions, &SubscriptionConditionType::InstallPlanMissing);
    }
    if let Some(adopted) = &o.adopted {
        st.current_csv = Some(adopted.clone());
        st.installed_csv = Some(adopted.clone());
    }
    match &o.resolved {
        Resolved::Failed { reason, message } => set_condition(
            &mut conditions,
            SubscriptionConditionType::ResolutionFailed,
            ConditionStatus::True,
            Some(reason),
            Some(message.clone()),
            now,
        ),
        Resolved::UnpackFailed { message, .. } => {
            remove_condition(&mut conditions, &SubscriptionConditionType::ResolutionFailed);
            set_condition(
                &mut conditions,
                SubscriptionConditionType::BundleUnpackFailed,
                ConditionStatus::True,
                Some(reasons::BUNDLE_UNPACK_FAILED),
                Some(message.clone()),
                now,
            );
        }
        Resolved::Unpacking { message, .. } => {
            remove_condition(&mut conditions, &SubscriptionConditionType::ResolutionFailed);
            remove_condition(&mut conditions, &SubscriptionConditionType::BundleUnpackFailed);
            set_condition(
                &mut conditions,
                SubscriptionConditionType::BundleUnpacking,
                ConditionStatus::True,
                Some(reasons::UNPACKING_IN_PROGRESS),
                Some(message.clone()),
                now,
            );
        }
        Resolved::WriteFailed { .. } => remove_condition(&mut conditions, &SubscriptionConditionType::ResolutionFailed),
        Resolved::UpToDate | Resolved::NewPlan { .. } => remove_condition(&mut conditions, &SubscriptionConditionType::ResolutionFailed),
        Resolved::Skipped => {}
    }
    if matches!(o.resolved, Resolved::UpToDate | Resolved::NewPlan { .. } | Resolved::Failed { .. } | Resolved::WriteFailed { .. }) {
        remove_condition(&mut conditions, &SubscriptionConditionType::BundleUnpackFailed);
    }
    if !matches!(o.resolved, Resolved::Unpacking { .. } | Resolved::Skipped) {
        remove_condition(&mut conditions, &SubscriptionConditionType::BundleUnpacking);
    }
    match (&o.resolved, &o.behind) {
        (Resolved::UpToDate, Some((reason, message))) => set_condition(
            &mut conditions,
            SubscriptionConditionType::BehindChannelHead,
            ConditionStatus::True,
            Some(reason),
            Some(message.clone()),
            now,
        ),
        (Resolved::UpToDate | Resolved::NewPlan { .. }, None) | (Resolved::NewPlan { .. }, _) => {
            remove_condition(&mut conditions, &SubscriptionConditionType::BehindChannelHead)
        }
        _ => {}
    }
    match &o.rolled_back {
        RolledBackNote::Clear => remove_condition(&mut conditions, &SubscriptionConditionType::RolledBack),
        RolledBackNote::Keep => {}
        RolledBackNote::Set(reason, message) => set_condition(
            &mut conditions,
            SubscriptionConditionType::RolledBack,
            ConditionStatus::True,
            Some(reason),
            Some(message.clone()),
            now,
        ),
    }
    let shown = match &o.resolved {
        Resolved::NewPlan { plan: new, current_csv } => {
            st.current_csv = Some(current_csv.clone());
            Some(new)
        }
        Resolved::Unpacking { plan: Some(new), .. } | Resolved::UnpackFailed { plan: Some(new), .. } => Some(new),
        // No plan referenced yet, but one is observed: the plan that created this
        // Subscription (observe: `olm.generated-by`).
        _ if st.install_plan_ref.is_none() => o.plan.as_ref(),
        _ => None,
    };
    if let Some(new) = shown {
        st.install_plan_ref = Some(ObjectReference {
            api_version: Some("operators.coreos.com/v1alpha1".into()),
            kind: Some("InstallPlan".into()),
            name: Some(new.name.clone()),
            namespace: o.sub.metadata.namespace.clone(),
            uid: Some(new.uid.clone()),
            ..Default::default()
        });
        st.install_plan = Some(InstallPlanReference {
            api_version: "operators.coreos.com/v1alpha1".into(),
            kind: "InstallPlan".into(),
            name: new.name.clone(),
            uuid: new.uid.clone(),
        });
        st.install_plan_generation = new.generation;
        plan = Some(new.clone());
    }
    let current_exists = o.current.is_some() && !matches!(o.resolved, Resolved::NewPlan { .. });
    if current_exists {
        st.installed_csv = st.current_csv.clone();
    }
    st.state = Some(match plan.as_ref().map(|p| &p.phase) {
        Some(InstallPlanPhase::Failed) => SubscriptionState::UpgradeFailed,
        Some(InstallPlanPhase::Complete) | None if current_exists || o.adopted.is_some() => SubscriptionState::AtLatestKnown,
        Some(_) => SubscriptionState::UpgradePending,
        None => st
            .state
            .clone()
            .filter(|s| *s != SubscriptionState::AtLatestKnown)
            .unwrap_or(SubscriptionState::None),
    });

    // The installed CSV's failure, in its own words.
    match o.current.as_ref().and_then(|c| c.failure.as_ref().map(|f| (c, f))) {
        Some((csv, (reason, message))) => set_condition(
            &mut conditions,
            SubscriptionConditionType::InstalledCsvFailed,
            ConditionStatus::True,
            Some(reason),
            Some(format!("ClusterServiceVersion {} failed: {message}", csv.name)),
            now,
        ),
        None => remove_condition(&mut conditions, &SubscriptionConditionType::InstalledCsvFailed),
    }

    // Plan conditions.
    let pending = SubscriptionConditionType::InstallPlanPending;
    let failed = SubscriptionConditionType::InstallPlanFailed;
    let missing = SubscriptionConditionType::InstallPlanMissing;
    match plan.as_ref() {
        Some(p) => {
            remove_condition(&mut conditions, &missing);
            match &p.phase {
                InstallPlanPhase::Complete => {
                    remove_condition(&mut conditions, &pending);
                    remove_condition(&mut conditions, &failed);
                }
                InstallPlanPhase::Failed => {
                    remove_condition(&mut conditions, &pending);
                    let reason = p.failed_reason.clone().unwrap_or_else(|| reasons::INSTALL_PLAN_FAILED.to_owned());
                    set_condition(
                        &mut conditions,
                        failed,
                        ConditionStatus::True,
                        Some(&reason),
                        p.message.clone(),
                        now,
                    );
                }
                phase => {
                    remove_condition(&mut conditions, &failed);
                    let reason = match phase {
                        InstallPlanPhase::None => reasons::INSTALL_PLAN_NOT_YET_RECONCILED.to_owned(),
                        other => other.as_str().to_owned(),
                    };
                    // The plan's own message, as upstream (empty while it waits for approval:
                    // clients compare it); how to approve is in the InstallPlanCreated Event.
                    set_condition(&mut conditions, pending, ConditionStatus::True, Some(&reason), p.message.clone(), now);
                }
            }
        }
        None => {
            remove_condition(&mut conditions, &pending);
            remove_condition(&mut conditions, &failed);
            if o.plan_missing && o.current.is_some() {
                set_condition(
                    &mut conditions,
                    missing,
                    ConditionStatus::True,
                    Some(reasons::REFERENCED_INSTALL_PLAN_NOT_FOUND),
                    Some(format!(
                        "the referenced InstallPlan {} was not found",
                        previous.install_plan_ref.as_ref().and_then(|r| r.name.clone()).unwrap_or_default()
                    )),
                    now,
                );
            } else {
                remove_condition(&mut conditions, &missing);
            }
        }
    }

    // A refused write: this pass's (creating the plan) or the InstallPlan controller's last
    // one (writing the plan's status); gone once a write goes through.
    let refused = match &o.resolved {
        Resolved::WriteFailed { reason, message } => Some(((*reason).to_owned(), message.clone())),
        _ => plan.as_ref().and_then(|p| p.write_failed.clone()).map(|f| (f.reason, f.message)),
    };
    match refused {
        Some((reason, message)) => set_condition(
            &mut conditions,
            SubscriptionConditionType::InstallPlanWriteFailed,
            ConditionStatus::True,
            Some(&reason),
            Some(message),
            now,
        ),
        None => remove_condition(&mut conditions, &SubscriptionConditionType::InstallPlanWriteFailed),
    }

    // Deprecations (never block anything).
    let d = &o.deprecations;
    let mut rollup = Vec::new();
    for (type_, message, kind) in [
        (SubscriptionConditionType::PackageDeprecated, &d.package, "olm.package"),
        (SubscriptionConditionType::ChannelDeprecated, &d.channel, "olm.channel"),
        (SubscriptionConditionType::BundleDeprecated, &d.bundle, "olm.bundle"),
    ] {
        match message {
            Some(m) => {
                let name = match kind {
                    "olm.package" => o.sub.spec.name.clone(),
                    "olm.channel" => o.sub.spec.channel.clone().unwrap_or_default(),
                    _ => st.installed_csv.clone().unwrap_or_default(),
                };
                let text = format!("{kind}/{name}: {m}");
                rollup.push(text.clone());
                set_condition(&mut conditions, type_, ConditionStatus::True, Some("Deprecated"), Some(text), now);
            }
            None => remove_condition(&mut conditions, &type_),
        }
    }
    if rollup.is_empty() {
        remove_condition(&mut conditions, &SubscriptionConditionType::Deprecated);
    } else {
        set_condition(
            &mut conditions,
            SubscriptionConditionType::Deprecated,
            ConditionStatus::True,
            Some("Deprecated"),
            Some(rollup.join("; ")),
            now,
        );
    }

    st.conditions = Some(conditions);
    st
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
#[path = "decide_tests.rs"]
mod tests;
