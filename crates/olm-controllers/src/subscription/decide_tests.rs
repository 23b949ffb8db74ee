use super::*;
use crate::plan_write_failures::write_failed_message;
use olm_api::v1alpha1::subscription::SubscriptionSpec;

fn sub() -> Subscription {
    let mut s = Subscription::new(
        "etcd",
        SubscriptionSpec {
            source: "community".into(),
            source_namespace: "olm".into(),
            name: "etcd".into(),
            channel: Some("singlenamespace-alpha".into()),
            ..Default::default()
        },
    );
    s.metadata.namespace = Some("team-a".into());
    s
}

fn catalog(name: &str, healthy: bool) -> CatalogView {
    CatalogView {
        key: CatalogKey::new(name, "olm"),
        uid: None,
        healthy,
        error: (!healthy).then(|| "connection refused".to_owned()),
    }
}

fn observed(s: &Subscription, resolved: Resolved) -> Observed<'_> {
    Observed {
        sub: s,
        catalogs: vec![catalog("broken", false), catalog("community", true)],
        plan: None,
        plan_missing: false,
        current: None,
        adopted: None,
        resolved,
        deprecations: Deprecations::default(),
        behind: None,
        rolled_back: Default::default(),
    }
}

fn condition(st: &SubscriptionStatus, t: SubscriptionConditionType) -> Option<SubscriptionCondition> {
    st.conditions.clone().unwrap_or_default().into_iter().find(|c| c.type_ == t)
}

fn plan(phase: InstallPlanPhase) -> PlanView {
    PlanView {
        name: "install-x".into(),
        uid: "u1".into(),
        generation: Some(1),
        phase,
        failed_reason: None,
        message: None,
        write_failed: None,
        awaits_content: false,
        bundles: vec!["etcd.v1".into()],
    }
}

#[test]
fn a_broken_neighbour_catalog_does_not_mark_this_subscription_unhealthy() {
    let s = sub();
    let st = status(&observed(&s, Resolved::UpToDate), Timestamp::UNIX_EPOCH);
    let c = condition(&st, SubscriptionConditionType::CatalogSourcesUnhealthy).expect("condition");
    assert_eq!(c.status, ConditionStatus::False);
    assert!(c.message.unwrap_or_default().contains("olm/broken"));
    let health = st.catalog_health.unwrap_or_default();
    assert_eq!(health.len(), 2);
    assert!(!health[0].healthy && health[1].healthy);
}

#[test]
fn the_targeted_catalog_being_down_is_reported() {
    let mut s = sub();
    s.spec.source = "broken".into();
    let st = status(&observed(&s, Resolved::Skipped), Timestamp::UNIX_EPOCH);
    let c = condition(&st, SubscriptionConditionType::CatalogSourcesUnhealthy).expect("condition");
    assert_eq!(c.status, ConditionStatus::True);
    // Upstream's message, word for word (its e2e suite compares it); the why is elsewhere.
    assert_eq!(c.message.as_deref(), Some("targeted catalogsource olm/broken unhealthy"));
}

#[test]
fn a_new_plan_makes_the_subscription_upgrade_pending() {
    let s = sub();
    let o = observed(
        &s,
        Resolved::NewPlan {
            plan: plan(InstallPlanPhase::Installing),
            current_csv: "etcdoperator.v0.9.0".into(),
        },
    );
    let st = status(&o, Timestamp::UNIX_EPOCH);
    assert_eq!(st.state, Some(SubscriptionState::UpgradePending));
    assert_eq!(st.current_csv.as_deref(), Some("etcdoperator.v0.9.0"));
    assert_eq!(st.installed_csv, None);
    assert_eq!(st.install_plan_ref.as_ref().and_then(|r| r.name.as_deref()), Some("install-x"));
    assert_eq!(st.install_plan_generation, Some(1));
    let c = condition(&st, SubscriptionConditionType::InstallPlanPending).expect("pending");
    assert_eq!(c.reason.as_deref(), Some("Installing"));
}

#[test]
fn a_completed_plan_with_its_csv_is_at_latest_known() {
    let mut s = sub();
    s.status = Some(SubscriptionStatus {
        current_csv: Some("etcdoperator.v0.9.0".into()),
        ..Default::default()
    });
    let mut o = observed(&s, Resolved::UpToDate);
    o.plan = Some(plan(InstallPlanPhase::Complete));
    o.current = Some(CsvView {
        name: "etcdoperator.v0.9.0".into(),
        phase: Some(CsvPhase::Succeeded),
        failure: None,
    });
    let st = status(&o, Timestamp::UNIX_EPOCH);
    assert_eq!(st.state, Some(SubscriptionState::AtLatestKnown));
    assert_eq!(st.installed_csv.as_deref(), Some("etcdoperator.v0.9.0"));
    assert!(condition(&st, SubscriptionConditionType::InstallPlanPending).is_none());
}

#[test]
fn manual_plans_wait_with_upstreams_condition_and_failures_are_reported() {
    let s = sub();
    let mut o = observed(&s, Resolved::Skipped);
    o.plan = Some(plan(InstallPlanPhase::RequiresApproval));
    let st = status(&o, Timestamp::UNIX_EPOCH);
    let c = condition(&st, SubscriptionConditionType::InstallPlanPending).expect("pending");
    assert_eq!(c.reason.as_deref(), Some("RequiresApproval"));
    // Upstream's condition, message and all (clients compare it); the Event says how to approve.
    assert_eq!(c.message, None);

    let mut failed = plan(InstallPlanPhase::Failed);
    failed.failed_reason = Some("InstallComponentFailed".into());
    failed.message = Some("cannot apply Role team-a/x: forbidden".into());
    o.plan = Some(failed);
    let st = status(&o, Timestamp::UNIX_EPOCH);
    assert_eq!(st.state, Some(SubscriptionState::UpgradeFailed));
    let c = condition(&st, SubscriptionConditionType::InstallPlanFailed).expect("failed");
    assert_eq!(c.reason.as_deref(), Some("InstallComponentFailed"));
}

#[test]
fn resolution_failures_are_set_and_cleared() {
    let s = sub();
    let st = status(
        &observed(
            &s,
            Resolved::Failed {
                reason: reasons::CONSTRAINTS_NOT_SATISFIABLE,
                message: "no package nope; packages: etcd".into(),
            },
        ),
        Timestamp::UNIX_EPOCH,
    );
    let c = condition(&st, SubscriptionConditionType::ResolutionFailed).expect("failed");
    assert_eq!(c.status, ConditionStatus::True);
    assert_eq!(c.reason.as_deref(), Some("ConstraintsNotSatisfiable"));
    let mut again = sub();
    again.status = Some(st);
    let st = status(&observed(&again, Resolved::UpToDate), Timestamp::UNIX_EPOCH);
    assert!(condition(&st, SubscriptionConditionType::ResolutionFailed).is_none());
}

#[test]
fn an_unpack_failure_is_its_own_condition_until_a_plan_is_made() {
    let s = sub();
    let message = "bundle etcdoperator.v0.9.2 of package etcd (catalog olm/community): image r/etcd@sha256:00 was not found in registry r".to_owned();
    let st = status(&observed(&s, Resolved::UnpackFailed { message: message.clone(), plan: None }), Timestamp::UNIX_EPOCH);
    let c = condition(&st, SubscriptionConditionType::BundleUnpackFailed).expect("unpack failed");
    assert_eq!((c.status, c.reason.as_deref(), c.message), (ConditionStatus::True, Some("BundleUnpackFailed"), Some(message)));
    assert!(condition(&st, SubscriptionConditionType::ResolutionFailed).is_none(), "resolution itself succeeded");
    let mut again = sub();
    again.status = Some(st);
    let st = status(
        &observed(&again, Resolved::NewPlan { plan: plan(InstallPlanPhase::Installing), current_csv: "etcdoperator.v0.9.2".into() }),
        Timestamp::UNIX_EPOCH,
    );
    assert!(condition(&st, SubscriptionConditionType::BundleUnpackFailed).is_none());
}

#[test]
fn a_refused_plan_write_is_a_condition_until_a_write_goes_through() {
    let s = sub();
    let message = write_failed_message(
        "write the status of InstallPlan ns/install-x: denied by policy deny-plans (Invalid, HTTP 422)",
        false,
    );
    assert!(message.starts_with("Cannot write the status of InstallPlan ns/install-x: denied"), "{message}");
    assert!(message.contains("admission policy"), "{message}");
    // Refused while creating the plan.
    let st = status(&observed(&s, Resolved::WriteFailed { reason: "ApiInvalid", message: message.clone() }), Timestamp::UNIX_EPOCH);
    let c = condition(&st, SubscriptionConditionType::InstallPlanWriteFailed).expect("condition");
    assert_eq!((c.reason.as_deref(), c.message.as_deref()), (Some("ApiInvalid"), Some(message.as_str())));
    // Created; then the InstallPlan controller's write of its status is refused.
    let mut again = s.clone();
    again.status = Some(st);
    let mut refused = plan(InstallPlanPhase::Installing);
    refused.write_failed = Some(WriteFailure { reason: "ApiServerError".into(), message: "Cannot write …".into() });
    let st = status(&observed(&again, Resolved::NewPlan { plan: refused.clone(), current_csv: "etcdoperator.v0.9.2".into() }), Timestamp::UNIX_EPOCH);
    let c = condition(&st, SubscriptionConditionType::InstallPlanWriteFailed).expect("condition");
    assert_eq!(c.reason.as_deref(), Some("ApiServerError"));
    again.status = Some(st);
    let mut o = observed(&again, Resolved::Skipped);
    o.plan = Some(refused);
    assert!(condition(&status(&o, Timestamp::UNIX_EPOCH), SubscriptionConditionType::InstallPlanWriteFailed).is_some());
    // Its next write goes through.
    o.plan = Some(plan(InstallPlanPhase::Installing));
    assert!(condition(&status(&o, Timestamp::UNIX_EPOCH), SubscriptionConditionType::InstallPlanWriteFailed).is_none());
}

#[test]
fn behind_the_channel_head_is_a_condition_until_the_next_plan() {
    let s = sub();
    let mut o = observed(&s, Resolved::UpToDate);
    o.behind = Some(("InstalledNotInChannel", "the installed CSV etcdoperator.v0.9.0 is not in channel alpha".into()));
    let st = status(&o, Timestamp::UNIX_EPOCH);
    let c = condition(&st, SubscriptionConditionType::BehindChannelHead).expect("behind");
    assert_eq!((c.status, c.reason.as_deref()), (ConditionStatus::True, Some("InstalledNotInChannel")));
    let mut again = sub();
    again.status = Some(st);
    let st = status(
        &observed(&again, Resolved::NewPlan { plan: plan(InstallPlanPhase::Installing), current_csv: "etcdoperator.v0.9.2".into() }),
        Timestamp::UNIX_EPOCH,
    );
    assert!(condition(&st, SubscriptionConditionType::BehindChannelHead).is_none());
}

#[test]
fn deprecations_roll_up() {
    let s = sub();
    let mut o = observed(&s, Resolved::UpToDate);
    o.deprecations = Deprecations {
        package: Some("use etcd-v2".into()),
        channel: None,
        bundle: None,
    };
    let st = status(&o, Timestamp::UNIX_EPOCH);
    let c = condition(&st, SubscriptionConditionType::PackageDeprecated).expect("package");
    assert_eq!(c.message.as_deref(), Some("olm.package/etcd: use etcd-v2"));
    assert!(condition(&st, SubscriptionConditionType::Deprecated).is_some());
    assert!(condition(&st, SubscriptionConditionType::ChannelDeprecated).is_none());
}

#[test]
fn the_gate_waits_for_plans_and_unfinished_csvs() {
    let succeeded = CsvView {
        name: "a".into(),
        phase: Some(CsvPhase::Succeeded),
        failure: None,
    };
    let installing = CsvView {
        name: "a".into(),
        phase: Some(CsvPhase::Installing),
        failure: None,
    };
    assert_eq!(gate(None, false, None, false, false), Gate::Resolve);
    assert!(matches!(
        gate(Some(&plan(InstallPlanPhase::Installing)), false, None, true, false),
        Gate::Wait(_)
    ));
    assert!(matches!(
        gate(Some(&plan(InstallPlanPhase::Failed)), false, None, true, false),
        Gate::Wait(_)
    ));
    assert!(matches!(
        gate(Some(&plan(InstallPlanPhase::Complete)), false, None, true, false),
        Gate::Wait(_)
    ));
    assert_eq!(
        gate(Some(&plan(InstallPlanPhase::Complete)), false, Some(&succeeded), true, false),
        Gate::Resolve
    );
    assert!(matches!(
        gate(Some(&plan(InstallPlanPhase::Complete)), false, Some(&installing), true, false),
        Gate::Wait(_)
    ));
    assert_eq!(gate(None, true, None, true, false), Gate::Resolve, "a vanished plan is replanned");
    // TechPreviewUnsafeFailForward: a failed plan does not hold back a newer bundle; the CSV
    // that was installed must still have succeeded.
    assert_eq!(gate(Some(&plan(InstallPlanPhase::Failed)), false, None, true, true), Gate::Resolve);
    assert_eq!(gate(Some(&plan(InstallPlanPhase::Failed)), false, Some(&succeeded), true, true), Gate::Resolve);
    assert!(matches!(gate(Some(&plan(InstallPlanPhase::Failed)), false, Some(&installing), true, true), Gate::Wait(_)));
    assert!(matches!(gate(Some(&plan(InstallPlanPhase::Installing)), false, None, true, true), Gate::Wait(_)), "only a failed plan");
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

#[test]
fn a_bundle_being_pulled_is_said_and_the_condition_goes_once_the_plan_is_written() {
    let s = sub();
    let message = "pulling bundle etcdoperator.v0.9.4 (catalog olm/community) image r/etcd@sha256:abc, for 3s so far".to_owned();
    let pulling = PlanView { awaits_content: true, ..plan(InstallPlanPhase::Installing) };
    let st = status(&observed(&s, Resolved::Unpacking { message: message.clone(), plan: Some(pulling.clone()) }), Timestamp::UNIX_EPOCH);
    let c = condition(&st, SubscriptionConditionType::BundleUnpacking).expect("unpacking");
    assert_eq!((c.status, c.reason.as_deref(), c.message), (ConditionStatus::True, Some("UnpackingInProgress"), Some(message)));
    // As upstream: the Subscription refers to the plan whose lookups are pending.
    assert_eq!(st.install_plan_ref.as_ref().and_then(|r| r.name.as_deref()), Some("install-x"));
    assert_eq!(st.state, Some(SubscriptionState::UpgradePending));
    // That plan does not hold resolution back: the pull's end makes the plan's steps.
    assert_eq!(gate(Some(&pulling), false, None, true, false), Gate::Resolve);
    let mut s = s;
    s.status = Some(st);
    let failed = PlanView {
        awaits_content: true,
        message: Some("bundle unpacking failed: unauthorized".into()),
        failed_reason: Some("InstallComponentFailed".into()),
        ..plan(InstallPlanPhase::Failed)
    };
    let st = status(&observed(&s, Resolved::UnpackFailed { message: "unauthorized".into(), plan: Some(failed.clone()) }), Timestamp::UNIX_EPOCH);
    assert!(condition(&st, SubscriptionConditionType::BundleUnpacking).is_none());
    assert!(condition(&st, SubscriptionConditionType::BundleUnpackFailed).is_some());
    assert_eq!(st.state, Some(SubscriptionState::UpgradeFailed));
    // A failed pull is retried (a plan that failed installing waits for the user).
    assert_eq!(gate(Some(&failed), false, None, true, false), Gate::Resolve);
    assert_ne!(gate(Some(&plan(InstallPlanPhase::Failed)), false, None, true, false), Gate::Resolve);
}

#[test]
fn a_subscription_a_plan_created_shows_that_plan() {
    // A dependency's Subscription, created by plan install-x (observe found it through
    // olm.generated-by): it references that plan, as upstream.
    let s = sub();
    let mut o = observed(&s, Resolved::Skipped);
    o.plan = Some(plan(InstallPlanPhase::Complete));
    let st = status(&o, Timestamp::UNIX_EPOCH);
    assert_eq!(st.install_plan_ref.and_then(|r| r.name).as_deref(), Some("install-x"));
    assert_eq!(st.install_plan.map(|r| r.name).as_deref(), Some("install-x"));
    assert_eq!(st.install_plan_generation, Some(1));
}

#[test]
fn a_failed_installed_csv_is_said_on_the_subscription() {
    let mut s = sub();
    s.status = Some(SubscriptionStatus { current_csv: Some("widget.v1.0.0".into()), ..Default::default() });
    let mut o = observed(&s, Resolved::UpToDate);
    o.plan = Some(plan(InstallPlanPhase::Complete));
    o.current = Some(CsvView {
        name: "widget.v1.0.0".into(),
        phase: Some(CsvPhase::Failed),
        failure: Some((
            "InterOperatorGroupOwnerConflict".into(),
            "provided API(s) Widget.v1.x.olm.test are already provided by OperatorGroup a/global".into(),
        )),
    });
    let st = status(&o, Timestamp::UNIX_EPOCH);
    let failed = condition(&st, SubscriptionConditionType::InstalledCsvFailed).expect("said");
    assert_eq!(failed.reason.as_deref(), Some("InterOperatorGroupOwnerConflict"));
    assert_eq!(
        failed.message.as_deref(),
        Some("ClusterServiceVersion widget.v1.0.0 failed: provided API(s) Widget.v1.x.olm.test are already provided by OperatorGroup a/global")
    );
    // Once it runs again, the condition goes.
    let mut s = s.clone();
    s.status = Some(st);
    let mut o = observed(&s, Resolved::UpToDate);
    o.plan = Some(plan(InstallPlanPhase::Complete));
    o.current = Some(CsvView { name: "widget.v1.0.0".into(), phase: Some(CsvPhase::Succeeded), failure: None });
    assert!(condition(&status(&o, Timestamp::UNIX_EPOCH), SubscriptionConditionType::InstalledCsvFailed).is_none());
}

#[test]
fn a_plan_deleted_before_its_csv_came_starts_over_and_the_new_plan_replaces_the_reference() {
    let mut s = sub();
    s.status = Some(status(
        &observed(&s, Resolved::NewPlan { plan: plan(InstallPlanPhase::RequiresApproval), current_csv: "etcd.v1".into() }),
        Timestamp::UNIX_EPOCH,
    ));
    // A user deleted install-x; this pass's resolution made no plan (say, the catalog is down).
    let gone = Observed { plan_missing: true, ..observed(&s, Resolved::Skipped) };
    let st = status(&gone, Timestamp::UNIX_EPOCH);
    assert_eq!((st.state.clone(), st.current_csv.clone(), st.install_plan.clone()), (Some(SubscriptionState::None), None, None));
    // Kept: the next plan is named apart from the deleted one (plan::plan_name).
    assert_eq!(st.install_plan_ref.as_ref().and_then(|r| r.name.as_deref()), Some("install-x"));
    assert!(condition(&st, SubscriptionConditionType::InstallPlanMissing).is_none(), "nothing was installed: nothing is missing");
    assert_eq!(gate(None, true, None, true, false), Gate::Resolve);

    s.status = Some(st);
    let again = PlanView { name: "install-y".into(), ..plan(InstallPlanPhase::RequiresApproval) };
    let o = Observed { plan_missing: true, ..observed(&s, Resolved::NewPlan { plan: again, current_csv: "etcd.v1".into() }) };
    let st = status(&o, Timestamp::UNIX_EPOCH);
    assert_eq!(st.install_plan_ref.as_ref().and_then(|r| r.name.as_deref()), Some("install-y"));
    assert_eq!(st.install_plan.as_ref().map(|p| p.name.as_str()), Some("install-y"));
    assert_eq!(st.state, Some(SubscriptionState::UpgradePending));
}
