//! The resolver's rules one by one, failure isolation, and the wording of errors.

mod common;
use common::*;
use olm_resolver::{Deprecation, Reason, Requirement, category};

const NS: &str = "operators";
const GLOBAL: &str = "olm";

fn community() -> olm_resolver::CatalogKey {
    key("community", GLOBAL)
}

fn chain() -> Vec<E> {
    vec![
        e("app.v1", "1.0.0", "app", "stable").default(),
        e("app.v2", "2.0.0", "app", "stable").default().replaces("app.v1"),
        e("app.v3", "3.0.0", "app", "stable").default().replaces("app.v2"),
    ]
}

#[test]
fn upgrades_move_one_edge_at_a_time() {
    let r = scenario(NS, vec![cat("community", GLOBAL, 0, chain())])
        .installed(installed(e("app.v1", "1.0.0", "app", "")))
        .sub(sub("app", "stable", community()))
        .resolve();
    assert_ok(&r);
    assert_eq!(names(&r), ["app.v2"]);
    assert_eq!(r.bundles[0].replaces.as_deref(), Some("app.v1"));
    assert_eq!(r.bundles[0].reason, Reason::Upgrade);
}

#[test]
fn among_upgrade_edges_the_one_nearest_the_head_wins() {
    let mut entries = chain();
    entries.push(e("app.v4", "4.0.0", "app", "stable").default().replaces("app.v3").skips(&["app.v1"]));
    let r = scenario(NS, vec![cat("community", GLOBAL, 0, entries)])
        .installed(installed(e("app.v1", "1.0.0", "app", "")))
        .sub(sub("app", "stable", community()))
        .resolve();
    assert_eq!(names(&r), ["app.v4"]);

    let mut entries = chain();
    entries.push(e("app.v4", "4.0.0", "app", "stable").default().replaces("app.v3").skip_range(">=1.0.0 <3.0.0"));
    let r = scenario(NS, vec![cat("community", GLOBAL, 0, entries)])
        .installed(installed(e("app.v1", "1.0.0", "app", "")))
        .sub(sub("app", "", community()))
        .resolve();
    assert_eq!(names(&r), ["app.v4"]);
    assert_eq!(r.bundles[0].replaces.as_deref(), Some("app.v1"));
}

#[test]
fn an_unsatisfiable_upgrade_keeps_the_installed_bundle_without_error() {
    let entries = vec![
        e("app.v1", "1.0.0", "app", "stable"),
        e("app.v2", "2.0.0", "app", "stable").replaces("app.v1").requires("nowhere.io", "v1", "Missing"),
    ];
    let r = scenario(NS, vec![cat("community", GLOBAL, 0, entries)])
        .installed(installed(e("app.v1", "1.0.0", "app", "")))
        .sub(sub("app", "stable", community()))
        .resolve();
    assert_ok(&r);
    assert!(r.bundles.is_empty());
}

#[test]
fn the_installed_bundle_at_the_head_needs_nothing() {
    let r = scenario(NS, vec![cat("community", GLOBAL, 0, chain())])
        .installed(installed(e("app.v3", "3.0.0", "app", "")))
        .sub(sub("app", "stable", community()))
        .resolve();
    assert_ok(&r);
    assert!(r.bundles.is_empty());
}

#[test]
fn a_head_whose_skip_range_covers_its_own_version_is_not_an_upgrade_of_itself() {
    // Real heads often say `olm.skipRange: <3.1.0` while being 3.0.0's successor line
    // themselves: installed at that head, nothing is left to do (upstream: AtLatestKnown).
    let mut entries = chain();
    entries[2] = e("app.v3", "3.0.0", "app", "stable").default().replaces("app.v2").skip_range("<=3.0.0");
    let r = scenario(NS, vec![cat("community", GLOBAL, 0, entries)])
        .installed(installed(e("app.v3", "3.0.0", "app", "")))
        .sub(sub("app", "stable", community()))
        .resolve();
    assert_ok(&r);
    assert!(r.bundles.is_empty(), "{:?}", names(&r));
}

/// A real package's channel: `olm.skipRange: '>=1.0.0'` on every bundle, no upper bound.
fn open_ended_chain() -> Vec<E> {
    vec![
        e("app.v1", "1.0.0", "app", "stable").default().skip_range(">=1.0.0"),
        e("app.v2", "2.0.0", "app", "stable").default().replaces("app.v1").skip_range(">=1.0.0"),
        e("app.v3", "3.0.0", "app", "stable").default().replaces("app.v2").skip_range(">=1.0.0"),
    ]
}

#[test]
fn an_open_ended_skip_range_never_upgrades_backwards() {
    // At the head, every older range covers 3.0.0: none of them is an upgrade.
    let r = scenario(NS, vec![cat("community", GLOBAL, 0, open_ended_chain())])
        .installed(installed(e("app.v3", "3.0.0", "app", "")))
        .sub(sub("app", "stable", community()))
        .resolve();
    assert_ok(&r);
    assert!(r.bundles.is_empty(), "{:?}", names(&r));
    // In the middle, only the newer one is.
    let r = scenario(NS, vec![cat("community", GLOBAL, 0, open_ended_chain())])
        .installed(installed(e("app.v2", "2.0.0", "app", "").replaces("app.v1").skip_range(">=1.0.0")))
        .sub(sub("app", "stable", community()))
        .resolve();
    assert_eq!(names(&r), ["app.v3"]);
    // From the oldest, straight to the head (as upstream: the head ranks first).
    let r = scenario(NS, vec![cat("community", GLOBAL, 0, open_ended_chain())])
        .installed(installed(e("app.v1", "1.0.0", "app", "").skip_range(">=1.0.0")))
        .sub(sub("app", "stable", community()))
        .resolve();
    assert_eq!(names(&r), ["app.v3"]);
    assert_eq!(r.bundles[0].replaces.as_deref(), Some("app.v1"));
}

#[test]
fn an_upgrade_the_operator_group_cannot_run_is_not_taken() {
    // A real package drops OwnNamespace from 0.8.0 on: an OwnNamespace group stays on the last
    // version that supports it (0.7.0 here), never "upgrading" to one that would fail.
    let own_and_all = ["OwnNamespace", "SingleNamespace", "AllNamespaces"];
    let entries = vec![
        e("app.v0.6.0", "0.6.0", "app", "stable").default().install_modes(&own_and_all),
        e("app.v0.7.0", "0.7.0", "app", "stable").default().replaces("app.v0.6.0").install_modes(&own_and_all),
        e("app.v0.8.0", "0.8.0", "app", "stable").default().replaces("app.v0.7.0").install_modes(&["AllNamespaces"]),
    ];
    let at = |version: &str, modes: &[&str]| {
        scenario(NS, vec![cat("community", GLOBAL, 0, entries.clone())])
            .group_install_modes(modes)
            .installed(installed(e(&format!("app.v{version}"), version, "app", "")))
            .sub(sub("app", "stable", community()))
            .resolve()
    };
    assert_eq!(names(&at("0.6.0", &["OwnNamespace"])), ["app.v0.7.0"]);
    let r = at("0.7.0", &["OwnNamespace"]);
    assert_ok(&r);
    assert!(r.bundles.is_empty(), "{:?}", names(&r));
    // An all-namespaces group goes on; a group whose modes are not known is not held back.
    assert_eq!(names(&at("0.7.0", &["AllNamespaces"])), ["app.v0.8.0"]);
    assert_eq!(names(&at("0.7.0", &[])), ["app.v0.8.0"]);
}

#[test]
fn a_first_install_takes_no_bundle_the_operator_group_cannot_run() {
    // eclipse-che: the head needs a package no catalog has; the old bundles without that
    // dependency do not support AllNamespaces. Upstream installs an old one, whose CSV fails
    // UnsupportedOperatorGroup; the resolution fails instead, naming the missing package.
    let entries = vec![
        e("che.v7.41.2", "7.41.2", "che", "stable").default().install_modes(&["OwnNamespace"]),
        e("che.v7.121.0", "7.121.0", "che", "stable").default().replaces("che.v7.41.2").install_modes(&["OwnNamespace", "AllNamespaces"]).requires_package("devworkspace-operator", ">=0.1.0"),
    ];
    let resolve = |modes: &[&str], entries: Vec<_>| {
        scenario(NS, vec![cat("community", GLOBAL, 0, entries)]).group_install_modes(modes).sub(sub("che", "stable", community())).resolve()
    };
    let r = resolve(&["AllNamespaces"], entries.clone());
    assert!(r.bundles.is_empty(), "{:?}", names(&r));
    assert_contains(error_of(&r, "che"), &["che.v7.121.0", "requires package devworkspace-operator"]);
    // An OwnNamespace group takes the old one, as before.
    assert_eq!(names(&resolve(&["OwnNamespace"], entries)), ["che.v7.41.2"]);
    // No bundle of the channel supports the group's mode: said in those words.
    let r = resolve(&["AllNamespaces"], vec![e("che.v7.41.2", "7.41.2", "che", "stable").default().install_modes(&["OwnNamespace"])]);
    assert!(r.bundles.is_empty());
    assert_contains(
        error_of(&r, "che"),
        &["the namespace's OperatorGroup needs install mode AllNamespaces, and no bundle of channel stable supports it; they support: che.v7.41.2 (OwnNamespace)"],
    );
}

#[test]
fn a_failing_subscription_does_not_block_the_others() {
    let entries = vec![
        e("app.v1", "1.0.0", "app", "stable"),
        e("broken.v1", "1.0.0", "broken", "stable").requires("nowhere.io", "v1", "Missing"),
    ];
    let r = scenario(NS, vec![cat("community", GLOBAL, 0, entries)])
        .sub(sub("app", "stable", community()))
        .sub(sub("broken", "stable", community()))
        .sub(sub("typo", "stable", community()))
        .resolve();
    assert_eq!(names(&r), ["app.v1"]);
    assert_eq!(r.errors.len(), 2);
    let broken = error_of(&r, "broken");
    assert_contains(
        broken,
        &[
            "Subscription broken (package broken, channel stable, catalog community in namespace olm)",
            "bundle broken.v1 (catalog community) requires the API Missing (nowhere.io/v1)",
            "no operator installed in namespace operators or in the catalogs it can use (community in namespace olm) provides it",
            "Suggestion: add a catalog that has an operator providing Missing (nowhere.io/v1)",
        ],
    );
    assert_contains(error_of(&r, "typo"), &["package typo is not in catalog community (namespace olm)"]);
}

#[test]
fn a_missing_package_says_where_it_is() {
    let r = scenario(
        NS,
        vec![
            cat("community", GLOBAL, 0, vec![e("app.v1", "1.0.0", "app", "stable")]),
            cat("certified", NS, 0, vec![e("db.v1", "1.0.0", "db", "stable")]),
            cat("hidden", "elsewhere", 0, vec![e("cache.v1", "1.0.0", "cache", "stable")]),
        ],
    )
    .sub(sub("db", "stable", community()))
    .sub(sub("cache", "stable", community()))
    .sub(sub("ap", "stable", community()))
    .resolve();
    let db = &r.errors.iter().find(|e| e.subscription == "db").expect("db fails").clone();
    assert_eq!(db.category, category::PACKAGE_NOT_FOUND);
    assert_contains(
        &db.message,
        &[
            "package db is not in catalog community (namespace olm)",
            "It is in catalog certified in namespace operators",
            "Suggestion: set spec.source: certified and spec.sourceNamespace: operators",
        ],
    );
    assert_contains(error_of(&r, "cache"), &["catalog hidden in namespace elsewhere", "cannot see"]);
    assert_contains(error_of(&r, "ap"), &["Packages with similar names in that catalog: app"]);
}

#[test]
fn a_missing_channel_lists_the_channels() {
    let entries = vec![e("app.v1", "1.0.0", "app", "stable").default(), e("app.v1", "1.0.0", "app", "fast")];
    let r = scenario(NS, vec![cat("community", GLOBAL, 0, entries)]).sub(sub("app", "alpha", community())).resolve();
    let msg = error_of(&r, "app");
    assert_contains(
        msg,
        &[
            "package app in catalog community has no channel alpha; its channels are: fast, stable (default: stable)",
            "Suggestion: set spec.channel",
        ],
    );
    assert_eq!(r.errors[0].category, category::CHANNEL_NOT_FOUND);
}

#[test]
fn a_missing_starting_csv_lists_the_bundles() {
    let r = scenario(NS, vec![cat("community", GLOBAL, 0, chain())])
        .sub(sub("app", "stable", community()).starting_csv("app.v9"))
        .resolve();
    assert_contains(
        error_of(&r, "app"),
        &["no bundle named app.v9 in channel stable of package app", "app.v1, app.v2, app.v3", "spec.startingCSV"],
    );
}

#[test]
fn starting_csv_is_installed_then_ignored_once_something_is_installed() {
    let r = scenario(NS, vec![cat("community", GLOBAL, 0, chain())])
        .sub(sub("app", "stable", community()).starting_csv("app.v1"))
        .resolve();
    assert_eq!(names(&r), ["app.v1"]);
    let r = scenario(NS, vec![cat("community", GLOBAL, 0, chain())])
        .installed(installed(e("app.v2", "2.0.0", "app", "")))
        .sub(sub("app", "stable", community()).starting_csv("app.v1"))
        .resolve();
    assert_eq!(names(&r), ["app.v3"]);
}

#[test]
fn two_new_subscriptions_providing_one_api_both_fail_and_others_proceed() {
    let entries = vec![
        e("a.v1", "1.0.0", "a", "stable").provides("example.com", "v1", "Widget"),
        e("b.v1", "1.0.0", "b", "stable").provides("example.com", "v1", "Widget"),
        e("c.v1", "1.0.0", "c", "stable"),
    ];
    let r = scenario(NS, vec![cat("community", GLOBAL, 0, entries)])
        .sub(sub("a", "stable", community()))
        .sub(sub("b", "stable", community()))
        .sub(sub("c", "stable", community()))
        .resolve();
    assert_eq!(names(&r), ["c.v1"]);
    for (me, other) in [("a", "b"), ("b", "a")] {
        let msg = error_of(&r, me);
        assert_contains(
            msg,
            &[
                &format!("cannot be resolved together with Subscription {other}"),
                "both provide the API Widget (example.com/v1)",
                "Suggestion: delete one of Subscriptions",
            ],
        );
    }
    assert!(r.errors.iter().all(|e| e.category == category::CONFLICTING_SUBSCRIPTIONS));
}

#[test]
fn an_installed_subscribed_operator_keeps_its_api_and_the_newcomer_fails() {
    let entries = vec![
        e("a.v1", "1.0.0", "a", "stable").provides("example.com", "v1", "Widget"),
        e("b.v1", "1.0.0", "b", "stable").provides("example.com", "v1", "Widget"),
    ];
    let r = scenario(NS, vec![cat("community", GLOBAL, 0, entries)])
        .installed(installed(e("a.v1", "1.0.0", "a", "").provides("example.com", "v1", "Widget")))
        .sub(sub("b", "stable", community()))
        .sub(sub("a", "stable", community()))
        .resolve();
    assert!(r.bundles.is_empty());
    assert_eq!(r.errors.len(), 1);
    assert_contains(
        error_of(&r, "b"),
        &["installed operator a.v1 (kept for Subscription a)", "both provide the API Widget (example.com/v1)"],
    );
}

#[test]
fn no_version_in_range_lists_the_versions() {
    let entries = vec![
        e("app.v1", "1.0.0", "app", "stable").requires_package("db", ">=2.0.0 <3.0.0"),
        e("db.v1.0.0", "1.0.0", "db", "stable"),
        e("db.v1.5.0", "1.5.0", "db", "stable").replaces("db.v1.0.0"),
        e("db.v3.0.0", "3.0.0", "db", "stable").replaces("db.v1.5.0"),
    ];
    let r = scenario(NS, vec![cat("community", GLOBAL, 0, entries)]).sub(sub("app", "stable", community())).resolve();
    let msg = error_of(&r, "app");
    assert_contains(
        msg,
        &[
            "requires package db with a version in range >=2.0.0 <3.0.0",
            "the versions there are: 1.0.0, 1.5.0, 3.0.0",
            "Suggestion:",
        ],
    );
    assert_eq!(r.errors[0].category, category::CONSTRAINTS_NOT_SATISFIABLE);
}

#[test]
fn a_required_package_nowhere_to_be_found_is_named() {
    let entries = vec![e("app.v1", "1.0.0", "app", "stable").requires_package("db", ">=1.0.0")];
    let r = scenario(NS, vec![cat("community", GLOBAL, 0, entries)]).sub(sub("app", "stable", community())).resolve();
    assert_contains(error_of(&r, "app"), &["no catalog namespace operators can use has package db"]);
}

#[test]
fn deeper_failures_name_the_chain() {
    let entries = vec![
        e("app.v1", "1.0.0", "app", "stable").requires("example.com", "v1", "Db"),
        e("db.v1", "1.0.0", "db", "stable").provides("example.com", "v1", "Db").requires("example.com", "v1", "Disk"),
    ];
    let r = scenario(NS, vec![cat("community", GLOBAL, 0, entries)]).sub(sub("app", "stable", community())).resolve();
    assert_contains(
        error_of(&r, "app"),
        &["requires an operator providing the API Db (example.com/v1), and no candidate can be used", "db.v1: bundle db.v1 (catalog community) requires the API Disk (example.com/v1)"],
    );
}

#[test]
fn own_namespace_catalogs_come_before_global_ones() {
    let app = || cat("apps", GLOBAL, 0, vec![e("app.v1", "1.0.0", "app", "stable").requires_package("lib", ">=1.0.0")]);
    let lib = |name: &str, ns: &str| cat(name, ns, 0, vec![e("lib.v1", "1.0.0", "lib", "stable")]);
    let r = scenario(NS, vec![app(), lib("aaa-global", GLOBAL), lib("zzz-local", NS)])
        .sub(sub("app", "stable", key("apps", GLOBAL)))
        .resolve();
    assert_ok(&r);
    assert_eq!(picked(&r), ["app.v1@apps", "lib.v1@zzz-local"]);
    assert_eq!(r.bundles[1].catalog.namespace, NS);
}

#[test]
fn installed_operators_come_first_for_dependencies() {
    let entries = vec![
        e("app.v1", "1.0.0", "app", "stable").requires_package("lib", ">=1.0.0"),
        e("lib.v2", "2.0.0", "lib", "stable").replaces("lib.v1"),
    ];
    let r = scenario(NS, vec![cat("community", GLOBAL, 0, entries)])
        .installed(installed(e("lib.v1", "1.0.0", "lib", "")))
        .sub(sub("app", "stable", community()))
        .resolve();
    assert_ok(&r);
    assert_eq!(names(&r), ["app.v1"]);
}

#[test]
fn the_global_namespace_is_configurable() {
    let r = scenario(NS, vec![cat("community", "openshift-marketplace", 0, chain())])
        .global("openshift-marketplace")
        .sub(sub("app", "stable", key("community", "openshift-marketplace")))
        .resolve();
    assert_ok(&r);
    assert_eq!(names(&r), ["app.v3"]);
}

#[test]
fn deprecation_notices_are_information_only() {
    let c = cat_with_deprecations(
        cat("community", GLOBAL, 0, chain()),
        vec![
            Deprecation { scope: "olm.package".into(), package: "app".into(), name: String::new(), message: "use app2".into() },
            Deprecation { scope: "olm.bundle".into(), package: "app".into(), name: "app.v3".into(), message: "bad build".into() },
            Deprecation { scope: "olm.bundle".into(), package: "app".into(), name: "app.v1".into(), message: "old".into() },
        ],
    );
    let r = scenario(NS, vec![c]).sub(sub("app", "stable", community())).resolve();
    assert_ok(&r);
    assert_eq!(names(&r), ["app.v3"]);
    assert_eq!(r.notices, ["olm.package/app: use app2", "olm.bundle/app.v3: bad build"]);
}

#[test]
fn an_unmet_cel_constraint_names_the_rule_and_the_bundles_message() {
    let rule = olm_resolver::CelRule::compile("properties.exists(p, p.type == 'x')").expect("rule compiles");
    let entries = vec![
        e("app.v1", "1.0.0", "app", "stable").constraint(Requirement::Cel(rule), "needs x"),
        e("x.v1", "1.0.0", "x", "stable"),
    ];
    let r = scenario(NS, vec![cat("community", GLOBAL, 0, entries)]).sub(sub("app", "stable", community())).resolve();
    assert_contains(error_of(&r, "app"), &["matching the CEL rule \"properties.exists(p, p.type == 'x')\"", "the bundle says: \"needs x\"", "satisfies the rule"]);
}

#[test]
fn two_subscriptions_to_one_package_share_a_bundle_or_conflict() {
    // Same channel: both are satisfied by the same bundle, as upstream does.
    let r = scenario(NS, vec![cat("community", GLOBAL, 0, chain())])
        .sub(sub("app", "stable", community()).named("app-1"))
        .sub(sub("app", "stable", community()).named("app-2"))
        .resolve();
    assert_ok(&r);
    assert_eq!(names(&r), ["app.v3"]);

    // Channels without a common bundle: one package cannot be installed twice.
    let mut entries = chain();
    entries.push(e("app.v9", "9.0.0", "app", "fast"));
    let r = scenario(NS, vec![cat("community", GLOBAL, 0, entries)])
        .sub(sub("app", "stable", community()).named("app-1"))
        .sub(sub("app", "fast", community()).named("app-2"))
        .resolve();
    assert!(r.bundles.is_empty());
    assert_contains(error_of(&r, "app-1"), &["Subscription app-2 (channel fast) also subscribes to package app"]);
    assert_contains(error_of(&r, "app-2"), &["Subscription app-1 (channel stable) also subscribes to package app"]);
}

#[test]
fn an_installed_operator_nobody_owns_with_unmet_needs_is_named() {
    let r = scenario(NS, vec![cat("community", GLOBAL, 0, chain())])
        .installed(installed(e("orphan.v1", "1.0.0", "orphan", "").requires("example.com", "v1", "Gone")))
        .sub(sub("app", "stable", community()))
        .resolve();
    let err = &r.errors[0];
    assert_eq!(err.category, category::INSTALLED_OPERATORS_INCONSISTENT);
    assert_contains(&err.message, &["installed operator orphan.v1 requires the API Gone (example.com/v1)"]);
}

#[test]
fn a_deprecated_head_falls_back_to_the_previous_entry() {
    let entries = vec![
        e("app.v1", "1.0.0", "app", "stable"),
        e("app.v2", "2.0.0", "app", "stable").replaces("app.v1").deprecated(),
    ];
    let r = scenario(NS, vec![cat("community", GLOBAL, 0, entries)]).sub(sub("app", "stable", community())).resolve();
    assert_ok(&r);
    assert_eq!(names(&r), ["app.v1"]);
}

#[test]
fn print_sample_errors() {
    // Not an assertion on wording beyond the tests above: shows the messages with
    // `cargo test -- --nocapture print_sample_errors`.
    let entries = vec![
        e("app.v1", "1.0.0", "app", "stable").requires_package("db", ">=2.0.0"),
        e("db.v1.0.0", "1.0.0", "db", "stable"),
        e("w.v1", "1.0.0", "w", "stable").provides("example.com", "v1", "Widget"),
        e("v.v1", "1.0.0", "v", "stable").provides("example.com", "v1", "Widget"),
    ];
    let r = scenario(NS, vec![cat("community", GLOBAL, 0, entries)])
        .sub(sub("app", "stable", community()))
        .sub(sub("w", "stable", community()))
        .sub(sub("v", "stable", community()))
        .sub(sub("app", "beta", community()).named("app-beta"))
        .resolve();
    for e in &r.errors {
        println!("[{}] {}\n", e.category, e.message);
    }
    assert_eq!(r.errors.len(), 4);
}

#[test]
fn a_failed_subscription_package_is_not_pulled_in_as_a_dependency() {
    let entries = vec![
        e("db.v1", "1.0.0", "db", "stable").default().provides("example.com", "v1", "Db"),
        e("app.v1", "1.0.0", "app", "stable").requires("example.com", "v1", "Db"),
        e("web.v1", "1.0.0", "web", "stable"),
    ];
    let r = scenario(NS, vec![cat("community", GLOBAL, 0, entries)])
        .sub(sub("db", "beta", community()))
        .sub(sub("app", "stable", community()))
        .sub(sub("web", "stable", community()))
        .resolve();
    assert_eq!(names(&r), ["web.v1"]);
    assert_contains(error_of(&r, "db"), &["no channel beta"]);
    assert_contains(
        error_of(&r, "app"),
        &["db.v1 (catalog community) is not used because it is from package db, and Subscription db for that package cannot be resolved", "fix Subscription db first"],
    );
}

#[test]
fn the_installed_operator_of_a_failed_subscription_keeps_its_api() {
    let entries = vec![
        e("a.v1", "1.0.0", "a", "stable").provides("example.com", "v1", "Widget"),
        e("b.v1", "1.0.0", "b", "stable").provides("example.com", "v1", "Widget"),
    ];
    let r = scenario(NS, vec![cat("community", GLOBAL, 0, entries)])
        .installed(installed(e("a.v1", "1.0.0", "a", "").provides("example.com", "v1", "Widget")))
        .sub(sub("a", "nightly", community()))
        .sub(sub("b", "stable", community()))
        .resolve();
    assert!(r.bundles.is_empty(), "{:?}", picked(&r));
    assert_contains(error_of(&r, "a"), &["no channel nightly"]);
    assert_contains(error_of(&r, "b"), &["installed operator a.v1", "Widget (example.com/v1)"]);
}

#[test]
fn a_cel_rule_over_its_budget_fails_its_bundle_with_that_reason_and_nothing_else() {
    // Within the estimate checked when a catalog is read (64 properties a bundle), over the
    // evaluation budget against a bundle providing 3,000 APIs: the constraint fails, saying so.
    let rule = olm_resolver::CelRule::compile("properties.all(p, properties.all(q, size(q) == 2))").expect("rule compiles");
    let mut big = e("big.v1", "1.0.0", "big", "stable").default();
    for i in 0..3_000 {
        big = big.provides("example.com", "v1", &format!("Kind{i}"));
    }
    let entries = vec![
        e("app.v1", "1.0.0", "app", "stable").default().constraint(Requirement::Cel(rule), "needs a big operator"),
        big,
        e("other.v1", "1.0.0", "other", "stable").default(),
    ];
    let started = std::time::Instant::now();
    let r = scenario(NS, vec![cat("community", GLOBAL, 0, entries)])
        .sub(sub("app", "stable", community()))
        .sub(sub("other", "stable", community()))
        .resolve();
    eprintln!("resolved in {:?}", started.elapsed());
    assert_contains(error_of(&r, "app"), &["took more than the budget of 1000000 steps", "simplify the rule"]);
    assert_eq!(names(&r), ["other.v1"]);
}
