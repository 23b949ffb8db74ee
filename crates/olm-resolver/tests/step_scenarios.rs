//! Scenarios modelled on upstream's step-resolver tests (upgrades of installed
//! operators, skipRange, skips, API transfer), with our own data.

mod common;
use common::*;
use olm_resolver::{Reason, Version};

const NS: &str = "ns";

fn c() -> olm_resolver::CatalogKey {
    key("cat", NS)
}

fn with_version(mut e: E, v: &str) -> E {
    e.0.version = Some(Version::parse(v).expect("version"));
    e
}

#[test]
fn skip_range_on_the_head_upgrades_an_unversioned_install() {
    // An installed CSV without a version counts as 0.0.0.
    let mut inst = installed(e("a.v1", "0.0.0", "a", "").provides("g", "v", "K1"));
    inst.entry.version = Some(Version::new(0, 0, 0));
    let r = scenario(NS, vec![cat("cat", NS, 0, vec![e("a.v3", "1.0.0", "a", "alpha").replaces("a.v2").skip_range("< 1.0.0")])])
        .installed(inst)
        .sub(sub("a", "alpha", c()))
        .resolve();
    assert_ok(&r);
    assert_eq!(names(&r), ["a.v3"]);
    assert_eq!((r.bundles[0].reason, r.bundles[0].replaces.as_deref()), (Reason::Upgrade, Some("a.v1")));
}

#[test]
fn a_head_whose_skip_range_excludes_the_install_yields_to_the_next_entry() {
    let entries = vec![
        e("a.v2", "1.0.0", "a", "alpha").skip_range("< 1.0.0"),
        e("a.v3", "1.0.0", "a", "alpha").replaces("a.v2").skip_range("< 1.0.0"),
        e("a.v4", "1.0.0", "a", "alpha").replaces("a.v3").skip_range("< 1.0.0 !0.0.0"),
    ];
    let r = scenario(NS, vec![cat("cat", NS, 0, entries)])
        .installed(installed(with_version(e("a.v1", "0.0.0", "a", ""), "0.0.0")))
        .sub(sub("a", "alpha", c()))
        .resolve();
    assert_ok(&r);
    assert_eq!(names(&r), ["a.v3"]);
}

#[test]
fn specified_skips_let_the_head_replace_the_install() {
    let entries = vec![
        e("a.v2", "1.0.0", "a", "alpha").skips(&["a.v1"]),
        e("a.v3", "1.0.0", "a", "alpha").replaces("a.v2").skips(&["a.v1"]),
    ];
    let r = scenario(NS, vec![cat("cat", NS, 0, entries)])
        .installed(installed(e("a.v1", "0.0.0", "a", "")))
        .sub(sub("a", "alpha", c()))
        .resolve();
    assert_eq!(names(&r), ["a.v3"]);
    assert_eq!(r.bundles[0].replaces.as_deref(), Some("a.v1"));
}

#[test]
fn starting_csv_installs_that_bundle_not_the_head() {
    let entries = vec![
        e("a.v1", "0.0.1", "a", "alpha"),
        e("a.v2", "0.0.2", "a", "alpha").replaces("a.v1"),
        e("a.v3", "1.0.0", "a", "alpha").replaces("a.v2").skip_range("< 1.0.0"),
    ];
    let r = scenario(NS, vec![cat("cat", NS, 0, entries)]).sub(sub("a", "alpha", c()).starting_csv("a.v2")).resolve();
    assert_eq!(names(&r), ["a.v2"]);
    assert_eq!((r.bundles[0].reason, r.bundles[0].replaces.as_deref()), (Reason::Install, Some("a.v1")));
}

#[test]
fn mutually_dependent_operators_upgrade_together() {
    let entries = vec![
        e("a.v2", "2.0.0", "a", "alpha").replaces("a.v1").provides("g", "v", "K3").requires("g", "v", "K4"),
        e("b.v2", "2.0.0", "b", "alpha").replaces("b.v1").provides("g", "v", "K4").requires("g", "v", "K3"),
    ];
    let r = scenario(NS, vec![cat("cat", NS, 0, entries)])
        .installed(installed(e("a.v1", "1.0.0", "a", "").provides("g", "v", "K1").requires("g", "v", "K2")))
        .installed(installed(e("b.v1", "1.0.0", "b", "").provides("g", "v", "K2").requires("g", "v", "K1")))
        .sub(sub("a", "alpha", c()))
        .sub(sub("b", "alpha", c()))
        .resolve();
    assert_ok(&r);
    assert_eq!(names(&r), ["a.v2", "b.v2"]);
}

#[test]
fn an_older_bundle_is_picked_when_only_it_provides_the_api() {
    let entries = vec![
        e("a.v1", "1.0.0", "a", "alpha").provides("g", "v", "K1"),
        e("a.v2", "2.0.0", "a", "alpha").replaces("a.v1"),
        e("b.v1", "1.0.0", "b", "alpha").requires("g", "v", "K1"),
    ];
    let r = scenario(NS, vec![cat("cat", NS, 0, entries)]).sub(sub("b", "alpha", c())).resolve();
    assert_ok(&r);
    assert_eq!(names(&r), ["a.v1", "b.v1"]);
    assert_eq!(r.bundles[0].reason, Reason::Dependency);
}

#[test]
fn installed_operators_upgrade_while_keeping_their_provider() {
    let entries = vec![
        e("a.v1", "1.0.0", "a", "alpha").requires("g", "v", "K1"),
        e("a.v2", "2.0.0", "a", "alpha").replaces("a.v1").requires("g", "v", "K1"),
        e("b.v1", "1.0.0", "b", "beta").provides("g", "v", "K1"),
        e("b.v2", "2.0.0", "b", "beta").replaces("b.v1").provides("g", "v", "K1"),
    ];
    let r = scenario(NS, vec![cat("cat", NS, 0, entries)])
        .installed(installed(e("a.v1", "1.0.0", "a", "").requires("g", "v", "K1")))
        .installed(installed(e("b.v1", "1.0.0", "b", "").provides("g", "v", "K1")))
        .sub(sub("a", "alpha", c()))
        .sub(sub("b", "beta", c()))
        .resolve();
    assert_ok(&r);
    assert_eq!(names(&r), ["a.v2", "b.v2"]);
}

#[test]
fn an_api_moves_from_one_operator_to_another_in_one_step() {
    let entries = vec![
        e("a.v2", "2.0.0", "a", "alpha").replaces("a.v1"),
        e("b.v2", "2.0.0", "b", "alpha").replaces("b.v1").provides("g", "v", "K1"),
    ];
    let r = scenario(NS, vec![cat("cat", NS, 0, entries)])
        .installed(installed(e("a.v1", "1.0.0", "a", "").provides("g", "v", "K1")))
        .installed(installed(e("b.v1", "1.0.0", "b", "").requires("g", "v", "K1")))
        .sub(sub("a", "alpha", c()))
        .sub(sub("b", "alpha", c()))
        .resolve();
    assert_ok(&r);
    assert_eq!(names(&r), ["a.v2", "b.v2"]);
}

#[test]
fn a_missing_dependency_fails_the_subscription_naming_the_api() {
    let entries = vec![e("a.v1", "1.0.0", "a", "alpha").requires("g", "v", "K1")];
    let r = scenario(NS, vec![cat("cat", NS, 0, entries)]).sub(sub("a", "alpha", c())).resolve();
    assert!(r.bundles.is_empty());
    assert_contains(error_of(&r, "a"), &["a.v1", "K1 (g/v)"]);
}

#[test]
fn a_new_subscription_conflicting_with_an_installed_one_fails_alone() {
    let entries = vec![e("a.v1", "1.0.0", "a", "alpha").provides("g", "v", "K1"), e("b.v1", "1.0.0", "b", "alpha").provides("g", "v", "K1")];
    let r = scenario(NS, vec![cat("cat", NS, 0, entries)])
        .installed(installed(e("a.v1", "1.0.0", "a", "").provides("g", "v", "K1")))
        .sub(sub("a", "alpha", c()))
        .sub(sub("b", "alpha", c()))
        .resolve();
    assert!(r.bundles.is_empty());
    assert_eq!(r.errors.len(), 1);
    assert_contains(error_of(&r, "b"), &["b.v1", "a.v1", "K1 (g/v)"]);
}

#[test]
fn two_subscriptions_to_one_package_in_different_channels_both_fail() {
    let entries = vec![e("a.v1", "1.0.0", "a", "alpha").provides("g", "v", "K1"), e("a.v2", "2.0.0", "a", "beta").provides("g", "v", "K1")];
    let r = scenario(NS, vec![cat("cat", NS, 0, entries)])
        .sub(sub("a", "alpha", c()))
        .sub(sub("a", "beta", c()))
        .resolve();
    assert!(r.bundles.is_empty());
    assert_eq!(r.errors.len(), 2);
    assert!(r.errors.iter().all(|e| e.message.contains("also subscribes to package a")), "{:?}", r.errors);
}
