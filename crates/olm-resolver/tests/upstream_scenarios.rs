//! Scenarios modelled on upstream OLM's resolver tests (same situations, our own data):
//! each asserts the bundles upstream selects, or that resolution fails.
//!
//! Longer than ~600 lines: one table of upstream's resolver scenarios, each a short test.

mod common;
use common::*;
use olm_resolver::{Reason, Requirement};

const NS: &str = "olm";

fn community() -> olm_resolver::CatalogKey {
    key("community", NS)
}

#[test]
fn new_subscription_next_to_an_installed_one_installs_only_the_new_package() {
    let r = scenario(
        NS,
        vec![cat(
            "community",
            NS,
            0,
            vec![e("app.v1", "0.0.1", "app", "alpha"), e("db.v1", "1.0.1", "db", "alpha")],
        )],
    )
    .installed(installed(e("app.v1", "0.0.1", "app", "").provides("g", "v", "K")))
    .sub(sub("app", "alpha", community()))
    .sub(sub("db", "alpha", community()))
    .resolve();
    assert_ok(&r);
    assert_eq!(picked(&r), ["db.v1@community"]);
    assert_eq!(r.bundles[0].reason, Reason::Install);
}

#[test]
fn two_disjoint_chains_in_a_channel_are_an_error_naming_both_chains() {
    let r = scenario(
        NS,
        vec![cat(
            "community",
            NS,
            0,
            vec![
                e("app.left.v1", "0.0.1", "app", "alpha"),
                e("app.left.v2", "0.0.2", "app", "alpha").replaces("app.left.v1"),
                e("app.right.v1", "1.0.0", "app", "alpha"),
                e("app.right.v2", "2.0.0", "app", "alpha").replaces("app.right.v1"),
            ],
        )],
    )
    .sub(sub("app", "alpha", community()))
    .resolve();
    assert!(r.bundles.is_empty());
    assert_contains(
        error_of(&r, "app"),
        &["2 separate replaces chains", "app.left.v2...app.left.v1", "app.right.v2...app.right.v1", "channel \"alpha\""],
    );
}

/// gitlab-runner-operator's stable channel: v1.23.1 is replaced by nothing (two heads by
/// opm's rule), but v1.52.0's skipRange covers it, so v1.52.0 is the head and an installed
/// v1.11.0 (on the other chain) upgrades straight to it.
#[test]
fn a_second_head_inside_a_newer_skip_range_is_no_error_and_upgrades_by_it() {
    let r = scenario(
        NS,
        vec![cat(
            "community",
            NS,
            0,
            vec![
                e("app.v1.11.0", "1.11.0", "app", "alpha"),
                e("app.v1.23.1", "1.23.1", "app", "alpha").replaces("app.v1.11.0"),
                e("app.v1.25.0", "1.25.0", "app", "alpha"),
                e("app.v1.52.0", "1.52.0", "app", "alpha").replaces("app.v1.25.0").skip_range(">=1.11.0 <1.52.0"),
            ],
        )],
    )
    .installed(installed(e("app.v1.11.0", "1.11.0", "app", "")))
    .sub(sub("app", "alpha", community()))
    .resolve();
    assert_ok(&r);
    assert_eq!(picked(&r), ["app.v1.52.0@community"]);
    assert_eq!((r.bundles[0].reason, r.bundles[0].replaces.as_deref()), (Reason::Upgrade, Some("app.v1.11.0")));
}

#[test]
fn the_same_bundle_in_two_channels_is_taken_from_the_subscribed_channel() {
    let r = scenario(
        NS,
        vec![cat(
            "community",
            NS,
            0,
            vec![
                e("app.v1", "0.0.1", "app", "alpha"),
                e("db.v1", "1.0.0", "db", "alpha"),
                e("db.v1", "1.0.0", "db", "beta"),
            ],
        )],
    )
    .installed(installed(e("app.v1", "0.0.1", "app", "")))
    .sub(sub("app", "alpha", community()))
    .sub(sub("db", "alpha", community()))
    .resolve();
    assert_ok(&r);
    assert_eq!(picked(&r), ["db.v1@community"]);
    assert_eq!(r.bundles[0].channel, "alpha");
}

#[test]
fn upgrade_and_new_install_both_take_the_newest_reachable_bundle() {
    let r = scenario(
        NS,
        vec![cat(
            "community",
            NS,
            0,
            vec![
                e("app.v1.0.1", "1.0.1", "app", "alpha").replaces("app.v1"),
                e("db.v0.9.0", "0.9.0", "db", "alpha"),
                e("db.v1.0.0", "1.0.0", "db", "alpha").replaces("db.v0.9.0"),
                e("db.v1.0.1", "1.0.1", "db", "alpha").replaces("db.v1.0.0"),
            ],
        )],
    )
    .installed(installed(e("app.v1", "1.0.0", "app", "")))
    .sub(sub("app", "alpha", community()))
    .sub(sub("db", "alpha", community()))
    .resolve();
    assert_ok(&r);
    assert_eq!(picked(&r), ["app.v1.0.1@community", "db.v1.0.1@community"]);
    let app = &r.bundles[0];
    assert_eq!((app.reason, app.replaces.as_deref()), (Reason::Upgrade, Some("app.v1")));
    let db = &r.bundles[1];
    assert_eq!((db.reason, db.replaces.as_deref()), (Reason::Install, Some("db.v1.0.0")));
}

fn package_deps_catalog(nested: bool) -> Vec<E> {
    let c = |n: &str, v: &str| {
        let x = e(n, v, "cache", "alpha");
        if nested { x.requires_package("queue", "1.0.1") } else { x }
    };
    vec![
        e("app.v1.0.1", "1.0.1", "app", "alpha").replaces("app.v1"),
        e("db.v0.9.0", "0.9.0", "db", "alpha"),
        e("db.v1.0.0", "1.0.0", "db", "alpha").replaces("db.v0.9.0"),
        e("db.v1.0.1", "1.0.1", "db", "alpha")
            .replaces("db.v1.0.0")
            .requires_package("cache", "1.0.1")
            .requires_package("store", "1.0.1"),
        c("cache.v1.0.0", "1.0.0"),
        c("cache.v1.0.1", "1.0.1").replaces("cache.v1.0.0"),
        e("store.v1.0.0", "1.0.0", "store", "alpha"),
        e("store.v1.0.1", "1.0.1", "store", "alpha").replaces("store.v1.0.0"),
        e("store.v1.0.2", "1.0.2", "store", "alpha").replaces("store.v1.0.1"),
        e("queue.v1.0.0", "1.0.0", "queue", "alpha"),
        e("queue.v1.0.1", "1.0.1", "queue", "alpha").replaces("queue.v1.0.0"),
    ]
}

#[test]
fn exact_version_requirements_pick_that_version_not_the_channel_head() {
    let r = scenario(NS, vec![cat("community", NS, 0, package_deps_catalog(false))])
        .installed(installed(e("app.v1", "1.0.0", "app", "")))
        .sub(sub("app", "alpha", community()))
        .sub(sub("db", "alpha", community()))
        .resolve();
    assert_ok(&r);
    assert_eq!(names(&r), ["app.v1.0.1", "cache.v1.0.1", "db.v1.0.1", "store.v1.0.1"]);
    let store = r.bundles.iter().find(|b| b.name == "store.v1.0.1").expect("store selected");
    assert_eq!(store.reason, Reason::Dependency);
}

#[test]
fn dependencies_are_followed_transitively() {
    let r = scenario(NS, vec![cat("community", NS, 0, package_deps_catalog(true))])
        .installed(installed(e("app.v1", "1.0.0", "app", "")))
        .sub(sub("app", "alpha", community()))
        .sub(sub("db", "alpha", community()))
        .resolve();
    assert_ok(&r);
    assert_eq!(names(&r), ["app.v1.0.1", "cache.v1.0.1", "db.v1.0.1", "queue.v1.0.1", "store.v1.0.1"]);
}

#[test]
fn dependency_catalog_preference_priority_then_name_then_own_catalog() {
    let main = || cat("community", NS, 0, vec![e("app.v1", "0.0.1", "app", "alpha").requires_package("lib", "0.0.1")]);
    let lib_in = |c: &str, p: i32| cat(c, NS, p, vec![e("lib.v1", "0.0.1", "lib", "alpha")]);

    // Higher priority wins.
    let r = scenario(NS, vec![main(), lib_in("aaa-low", 0), lib_in("zzz-high", 100)])
        .sub(sub("app", "alpha", community()))
        .resolve();
    assert_ok(&r);
    assert_eq!(picked(&r), ["app.v1@community", "lib.v1@zzz-high"]);

    // Same priority: catalog name decides.
    let r = scenario(NS, vec![main(), lib_in("bbb", 100), lib_in("aaa", 100)])
        .sub(sub("app", "alpha", community()))
        .resolve();
    assert_eq!(picked(&r), ["app.v1@community", "lib.v1@aaa"]);

    // The dependent's own catalog beats priority.
    let own = cat(
        "community",
        NS,
        0,
        vec![e("app.v1", "0.0.1", "app", "alpha").requires_package("lib", "0.0.1"), e("lib.v1", "0.0.1", "lib", "alpha")],
    );
    let r = scenario(NS, vec![own, lib_in("zzz-high", 100)]).sub(sub("app", "alpha", community())).resolve();
    assert_eq!(picked(&r), ["app.v1@community", "lib.v1@community"]);
}

#[test]
fn package_dependency_is_installed_with_the_subscription() {
    let r = scenario(
        NS,
        vec![cat(
            "community",
            NS,
            0,
            vec![
                e("app.v1.0.1", "1.0.1", "app", "alpha").replaces("app.v1"),
                e("db.v1", "1.0.0", "db", "alpha").requires_package("cache", "0.1.0"),
                e("cache.v1", "0.1.0", "cache", "alpha"),
            ],
        )],
    )
    .installed(installed(e("app.v1", "1.0.0", "app", "")))
    .sub(sub("app", "alpha", community()))
    .sub(sub("db", "alpha", community()))
    .resolve();
    assert_ok(&r);
    assert_eq!(names(&r), ["app.v1.0.1", "cache.v1", "db.v1"]);
}

#[test]
fn api_dependency_pulls_in_its_provider() {
    let r = scenario(
        NS,
        vec![cat(
            "community",
            NS,
            0,
            vec![
                e("app.v1", "0.0.1", "app", "alpha"),
                e("db.v1", "1.0.0", "db", "alpha").requires("g", "v", "K"),
                e("cache.v1", "0.1.0", "cache", "alpha").provides("g", "v", "K"),
            ],
        )],
    )
    .installed(installed(e("app.v1", "0.0.1", "app", "")))
    .sub(sub("app", "alpha", community()))
    .sub(sub("db", "alpha", community()))
    .resolve();
    assert_ok(&r);
    assert_eq!(names(&r), ["cache.v1", "db.v1"]);
}

#[test]
fn label_dependency_is_met_by_a_labelled_bundle_and_fails_without_one() {
    let r = scenario(
        NS,
        vec![cat(
            "community",
            NS,
            0,
            vec![e("app", "0.0.1", "app", "alpha").requires_label("lts"), e("db.v1", "1.0.0", "db", "beta").label("lts")],
        )],
    )
    .sub(sub("app", "alpha", community()))
    .resolve();
    assert_ok(&r);
    assert_eq!(names(&r), ["app", "db.v1"]);

    let r = scenario(
        NS,
        vec![cat(
            "community",
            NS,
            0,
            vec![e("app", "0.0.1", "app", "alpha").requires_label("lts"), e("db.v1", "1.0.0", "db", "alpha")],
        )],
    )
    .sub(sub("app", "alpha", community()))
    .resolve();
    assert!(r.bundles.is_empty());
    assert_contains(error_of(&r, "app"), &["labelled \"lts\""]);
}

#[test]
fn nested_api_dependencies_prefer_the_dependents_catalog() {
    let community_entries = vec![
        e("app.v1.0.1", "1.0.1", "app", "alpha").replaces("app.v1"),
        e("db.v1.0.0", "1.0.0", "db", "alpha").requires("g", "v", "K"),
        e("db.v1.0.1", "1.0.1", "db", "alpha").replaces("db.v1.0.0").requires("g", "v", "K"),
        e("cache.v1.0.0", "1.0.0", "cache", "alpha").provides("g", "v", "K").requires("g2", "v2", "K2"),
        e("cache.v1.0.1", "1.0.1", "cache", "alpha")
            .replaces("cache.v1.0.0")
            .provides("g", "v", "K")
            .requires("g2", "v2", "K2"),
        e("store.v1.0.1", "1.0.1", "store", "alpha").provides("g2", "v2", "K2").requires("g2", "v2", "K2"),
    ];
    let certified = vec![
        e("cache.v1.0.0", "1.0.0", "cache", "alpha").provides("g", "v", "K").requires("g2", "v2", "K2"),
        e("cache.v1.0.1", "1.0.1", "cache", "alpha")
            .replaces("cache.v1.0.0")
            .provides("g", "v", "K")
            .requires("g2", "v2", "K2"),
        e("store.v1.0.1", "1.0.1", "store", "alpha").provides("g2", "v2", "K2"),
    ];
    // The installed app provides g/v/K, but its upgrade drops it, so db's need for
    // g/v/K goes to cache, which needs g2/v2/K2 from store: all from community.
    let r = scenario(NS, vec![cat("community", NS, 0, community_entries), cat("certified", NS, 0, certified)])
        .installed(installed(e("app.v1", "1.0.0", "app", "").provides("g", "v", "K")))
        .sub(sub("app", "alpha", community()))
        .sub(sub("db", "alpha", community()))
        .resolve();
    assert_ok(&r);
    assert_eq!(
        picked(&r),
        ["app.v1.0.1@community", "cache.v1.0.1@community", "db.v1.0.1@community", "store.v1.0.1@community"]
    );
}

/// (name, version, provided APIs as (group, version, kind), replaces)
type FooSpec<'a> = (&'a str, &'a str, Vec<(&'a str, &'a str, &'a str)>, Option<&'a str>);

fn foo_all(props: Vec<FooSpec<'_>>) -> Vec<E> {
    props
        .into_iter()
        .map(|(name, version, gvks, replaces)| {
            let mut x = e(name, version, "foo", "stable");
            for (g, v, k) in gvks {
                x = x.provides(g, v, k);
            }
            if let Some(r) = replaces {
                x = x.replaces(r);
            }
            x
        })
        .collect()
}

#[test]
fn constraint_all_needs_one_bundle_meeting_every_part() {
    let all = Requirement::All(vec![
        Requirement::Package { name: "foo".into(), range: range(">=1.0.0") },
        Requirement::Gvk(gvk("g1", "v1", "K1")),
        Requirement::Gvk(gvk("g2", "v2", "K2")),
    ]);
    let mut entries = foo_all(vec![
        ("foo.v0.99.0", "0.99.0", vec![("g1", "v1", "K1"), ("g2", "v2", "K2"), ("g3", "v3", "K3")], None),
        ("foo.v1.0.0", "1.0.0", vec![("g2", "v2", "K2"), ("g3", "v3", "K3")], Some("foo.v0.99.0")),
        ("foo.v1.0.1", "1.0.1", vec![("g1", "v1", "K1"), ("g2", "v2", "K2"), ("g3", "v3", "K3")], Some("foo.v1.0.0")),
    ]);
    entries.push(e("bar.v1.0.0", "1.0.0", "bar", "stable").constraint(all, "all constraint"));
    let r = scenario(NS, vec![cat("community", NS, 0, entries)]).sub(sub("bar", "stable", community())).resolve();
    assert_ok(&r);
    assert_eq!(names(&r), ["bar.v1.0.0", "foo.v1.0.1"]);
}

#[test]
fn constraint_any_takes_the_first_bundle_meeting_one_part() {
    let any = Requirement::Any(vec![Requirement::Gvk(gvk("g1", "v1", "K1")), Requirement::Gvk(gvk("g2", "v2", "K2"))]);
    let mut entries = foo_all(vec![
        ("foo.v0.99.0", "0.99.0", vec![("g0", "v0", "K0")], None),
        ("foo.v1.0.0", "1.0.0", vec![("g1", "v1", "K1"), ("g2", "v2", "K2")], Some("foo.v0.99.0")),
        ("foo.v1.0.1", "1.0.1", vec![("g1", "v1", "K1"), ("g2", "v2", "K2"), ("g3", "v3", "K3")], Some("foo.v1.0.0")),
    ]);
    entries.push(e("bar.v1.0.0", "1.0.0", "bar", "stable").constraint(any, "any constraint"));
    let r = scenario(NS, vec![cat("community", NS, 0, entries)]).sub(sub("bar", "stable", community())).resolve();
    assert_ok(&r);
    assert_eq!(names(&r), ["bar.v1.0.0", "foo.v1.0.1"]);
}

#[test]
fn constraint_not_excludes_bundles_with_any_listed_api() {
    let c = Requirement::All(vec![
        Requirement::Gvk(gvk("g0", "v0", "K0")),
        Requirement::Not(vec![Requirement::Gvk(gvk("g1", "v1", "K1")), Requirement::Gvk(gvk("g2", "v2", "K2"))]),
    ]);
    let mut entries = foo_all(vec![
        ("foo.v0.99.0", "0.99.0", vec![("g0", "v0", "K0")], None),
        ("foo.v1.0.0", "1.0.0", vec![("g0", "v0", "K0"), ("g1", "v1", "K1"), ("g2", "v2", "K2")], Some("foo.v0.99.0")),
        (
            "foo.v1.0.1",
            "1.0.1",
            vec![("g0", "v0", "K0"), ("g1", "v1", "K1"), ("g2", "v2", "K2"), ("g3", "v3", "K3")],
            Some("foo.v1.0.0"),
        ),
    ]);
    entries.push(e("bar.v1.0.0", "1.0.0", "bar", "stable").constraint(c, "compound not constraint"));
    let r = scenario(NS, vec![cat("community", NS, 0, entries)]).sub(sub("bar", "stable", community())).resolve();
    assert_ok(&r);
    assert_eq!(names(&r), ["bar.v1.0.0", "foo.v0.99.0"]);
}

#[test]
fn a_dependency_whose_own_dependency_fails_is_taken_from_another_catalog() {
    let r = scenario(
        NS,
        vec![
            cat(
                "community",
                NS,
                0,
                vec![
                    e("app.v1", "0.0.1", "app", "alpha"),
                    e("db.v1", "1.0.0", "db", "alpha").requires_package("cache", "0.1.0"),
                    e("cache.v1", "0.1.0", "cache", "alpha").requires_package("missing", "0.1.0"),
                ],
            ),
            cat(
                "certified",
                NS,
                0,
                vec![
                    e("app.v1", "0.0.1", "app", "alpha"),
                    e("db.v1", "1.0.0", "db", "alpha").requires_package("cache", "0.1.0"),
                    e("cache.v1", "0.1.0", "cache", "alpha"),
                ],
            ),
        ],
    )
    .installed(installed(e("app.v1", "0.0.1", "app", "").provides("g", "v", "K")))
    .sub(sub("app", "alpha", community()))
    .sub(sub("db", "alpha", community()))
    .resolve();
    assert_ok(&r);
    assert_eq!(picked(&r), ["cache.v1@certified", "db.v1@community"]);
}

#[test]
fn catalogs_of_other_namespaces_are_invisible() {
    let r = scenario(
        "operators",
        vec![
            cat("community", "operators", 0, vec![e("app.v2", "0.0.2", "app", "alpha").replaces("app.v1")]),
            cat("elsewhere", "other", 0, vec![e("app.v3", "0.0.3", "app", "alpha").replaces("app.v1")]),
        ],
    )
    .installed(installed(e("app.v1", "0.0.1", "app", "")))
    .sub(sub("app", "alpha", key("community", "operators")))
    .resolve();
    assert_ok(&r);
    assert_eq!(picked(&r), ["app.v2@community"]);

    let r = scenario("operators", vec![cat("secret", "secret", 0, vec![e("app.v2", "0.0.2", "app", "alpha")])])
        .sub(sub("app", "alpha", key("secret", "secret")))
        .resolve();
    assert!(r.bundles.is_empty());
    assert_contains(error_of(&r, "app"), &["catalog secret is in namespace secret", "cannot use"]);
}

#[test]
fn without_a_channel_the_default_channel_is_preferred() {
    let r = scenario(
        NS,
        vec![cat(
            "community",
            NS,
            0,
            vec![e("app.v0.0.2", "0.0.2", "app", "alpha"), e("app.v0.0.1", "0.0.1", "app", "stable").default()],
        )],
    )
    .sub(sub("app", "", community()))
    .resolve();
    assert_ok(&r);
    assert_eq!(names(&r), ["app.v0.0.1"]);
    assert_eq!(r.bundles[0].channel, "stable");
}

#[test]
fn dependencies_prefer_the_providers_default_channel() {
    let r = scenario(
        NS,
        vec![cat(
            "community",
            NS,
            0,
            vec![
                e("app.v0.0.1", "0.0.1", "app", "alpha").requires("g", "v", "K"),
                e("db.v0.0.1", "0.0.1", "db", "stable").default().provides("g", "v", "K"),
                e("db.v0.0.2", "0.0.2", "db", "alpha").replaces("db.v0.0.1").provides("g", "v", "K"),
            ],
        )],
    )
    .sub(sub("app", "alpha", community()))
    .resolve();
    assert_ok(&r);
    assert_eq!(names(&r), ["app.v0.0.1", "db.v0.0.1"]);
}

#[test]
fn an_installed_operator_without_subscription_satisfies_dependencies() {
    let r = scenario(
        NS,
        vec![cat(
            "community",
            NS,
            0,
            vec![
                e("db.v1.0.0", "1.0.0", "db", "alpha").requires("g", "v", "K"),
                e("db.v1.0.1", "1.0.1", "db", "alpha").replaces("db.v1.0.0").requires("g", "v", "K"),
            ],
        )],
    )
    .installed(installed(e("app.v1", "0.0.1", "app", "").provides("g", "v", "K")))
    .sub(sub("db", "alpha", community()))
    .resolve();
    assert_ok(&r);
    assert_eq!(names(&r), ["db.v1.0.1"]);
}

#[test]
fn an_installed_operator_without_subscription_conflicts_with_a_second_provider() {
    let r = scenario(
        NS,
        vec![cat(
            "community",
            NS,
            0,
            vec![
                e("db.v1.0.0", "1.0.0", "db", "alpha").provides("g", "v", "K"),
                e("db.v1.0.1", "1.0.1", "db", "alpha").replaces("db.v1.0.0").provides("g", "v", "K"),
            ],
        )],
    )
    .installed(installed(e("app.v1", "0.0.1", "app", "").provides("g", "v", "K")))
    .sub(sub("db", "alpha", community()))
    .resolve();
    assert!(r.bundles.is_empty());
    assert_contains(error_of(&r, "db"), &["installed operator app.v1", "K (g/v)", "owned by no Subscription"]);
}

#[test]
fn a_package_cannot_satisfy_its_own_dependencies() {
    let r = scenario(
        NS,
        vec![
            cat(
                "community",
                NS,
                0,
                vec![
                    e("opA.v1.0.0", "1.0.0", "app", "stable").requires("g", "v", "K").requires("g2", "v", "K"),
                    e("opABC.v1.0.0", "1.0.0", "app", "alpha").provides("g", "v", "K").provides("g2", "v", "K"),
                    e("opB.v1.0.0", "1.0.0", "db", "stable").default().provides("g", "v", "K"),
                    e("opD.v1.0.0", "1.0.0", "db", "alpha").provides("g", "v", "K"),
                ],
            ),
            cat(
                "secondary",
                NS,
                0,
                vec![
                    e("opC.v1.0.0", "1.0.0", "db", "stable").default().provides("g2", "v", "K"),
                    e("opE.v1.0.0", "1.0.0", "cache", "stable").provides("g2", "v", "K"),
                ],
            ),
        ],
    )
    .sub(sub("app", "stable", community()))
    .resolve();
    assert_ok(&r);
    assert_eq!(picked(&r), ["opA.v1.0.0@community", "opB.v1.0.0@community", "opE.v1.0.0@secondary"]);
}

#[test]
fn api_ownership_moves_between_packages_across_upgrades() {
    // Phase 1: a fresh install pulls in the provider.
    let phase1 = vec![
        e("opA.v1.0.0", "1.0.0", "app", "stable").provides("g", "v", "K"),
        e("opB.v1.0.0", "1.0.0", "db", "stable").default().requires("g", "v", "K").provides("g2", "v", "K"),
    ];
    let r = scenario(NS, vec![cat("community", NS, 0, phase1)]).sub(sub("db", "stable", community())).resolve();
    assert_ok(&r);
    assert_eq!(names(&r), ["opA.v1.0.0", "opB.v1.0.0"]);

    let installed_pair = |s: Scenario| {
        s.installed(installed(e("opA.v1.0.0", "1.0.0", "app", "").provides("g", "v", "K")))
            .installed(installed(e("opB.v1.0.0", "1.0.0", "db", "").requires("g", "v", "K").provides("g2", "v", "K")))
            .sub(sub("app", "stable", community()))
            .sub(sub("db", "stable", community()))
    };
    // Phase 2: app's upgrade drops the API db needs, and nothing else provides it: stay.
    let phase2 = vec![
        e("opA.v1.0.0", "1.0.0", "app", "stable").provides("g", "v", "K"),
        e("opA.v1.0.1", "1.0.1", "app", "stable").replaces("opA.v1.0.0").requires("g", "v", "K"),
        e("opB.v1.0.0", "1.0.0", "db", "stable").default().requires("g", "v", "K").provides("g2", "v", "K"),
    ];
    let r = installed_pair(scenario(NS, vec![cat("community", NS, 0, phase2.clone())])).resolve();
    assert_ok(&r);
    assert!(r.bundles.is_empty(), "{:?}", picked(&r));

    // Phase 3: db's upgrade takes the API over, so both upgrade together.
    let mut phase3 = phase2;
    phase3.push(
        e("opB.v1.0.1", "1.0.1", "db", "stable")
            .default()
            .replaces("opB.v1.0.0")
            .provides("g", "v", "K")
            .provides("g2", "v", "K"),
    );
    let r = installed_pair(scenario(NS, vec![cat("community", NS, 0, phase3)])).resolve();
    assert_ok(&r);
    assert_eq!(names(&r), ["opA.v1.0.1", "opB.v1.0.1"]);
    assert!(r.bundles.iter().all(|b| b.reason == Reason::Upgrade));
}

#[test]
fn a_deprecated_only_bundle_is_never_chosen() {
    let r = scenario("ns", vec![cat("catalog", "ns", 0, vec![e("app.v1", "0.0.1", "app", "alpha").deprecated()])])
        .sub(sub("app", "alpha", key("catalog", "ns")))
        .resolve();
    assert!(r.bundles.is_empty());
    assert_contains(error_of(&r, "app"), &["app.v1", "deprecated"]);
}

#[test]
fn a_deprecated_entry_inside_a_channel_does_not_block_the_head() {
    let r = scenario(
        "ns",
        vec![cat(
            "catalog",
            "ns",
            0,
            vec![
                e("a-1", "1.0.0", "a", "c"),
                e("a-2", "2.0.0", "a", "c").replaces("a-1").deprecated(),
                e("a-3", "3.0.0", "a", "c").replaces("a-2"),
            ],
        )],
    )
    .sub(sub("a", "c", key("catalog", "ns")))
    .resolve();
    assert_ok(&r);
    assert_eq!(names(&r), ["a-3"]);
}

#[test]
fn starting_csv_may_select_a_skipped_entry_and_dependencies_skip_skipped_ones() {
    let r = scenario(
        NS,
        vec![cat(
            "community",
            NS,
            0,
            vec![
                e("db.v1", "1.0.0", "db", "alpha").requires("g", "v", "K"),
                e("db.v2", "2.0.0", "db", "alpha").skips(&["db.v1"]).requires("g", "v", "K"),
                e("app.v1", "1.0.0", "app", "alpha").provides("g", "v", "K"),
                e("app.v2", "2.0.0", "app", "alpha").replaces("app.v1").provides("g", "v", "K"),
                e("app.v3", "3.0.0", "app", "alpha").replaces("app.v2").provides("g", "v", "K"),
                e("app.v4", "4.0.0", "app", "alpha").replaces("app.v3").skips(&["app.v3"]).provides("g", "v", "K"),
                e("app.v5", "5.0.0", "app", "alpha")
                    .replaces("app.v4")
                    .skips(&["app.v2", "app.v3", "app.v4"])
                    .provides("g", "v", "K"),
                e("app.v6", "6.0.0", "app", "alpha").replaces("app.v5").provides("g", "v", "K"),
            ],
        )],
    )
    .sub(sub("db", "alpha", community()).starting_csv("db.v1"))
    .resolve();
    assert_ok(&r);
    assert_eq!(names(&r), ["app.v6", "db.v1"]);
}

#[test]
fn a_skipped_entry_is_not_the_head() {
    let r = scenario(
        "ns",
        vec![cat(
            "catalog",
            "ns",
            0,
            vec![e("db.v1", "1.0.0", "db", "alpha"), e("db.v2", "2.0.0", "db", "alpha").skips(&["db.v1"])],
        )],
    )
    .sub(sub("db", "alpha", key("catalog", "ns")))
    .resolve();
    assert_ok(&r);
    assert_eq!(names(&r), ["db.v2"]);
}

#[test]
fn a_skipped_entry_cannot_satisfy_a_dependency() {
    let r = scenario(
        "ns",
        vec![cat(
            "catalog",
            "ns",
            0,
            vec![
                e("a-1", "1.0.0", "a", "channel").requires("g", "v", "K"),
                e("b-3", "3.0.0", "b", "channel").replaces("b-2").skips(&["b-1"]),
                e("b-2", "2.0.0", "b", "channel").replaces("b-1"),
                e("b-1", "1.0.0", "b", "channel").provides("g", "v", "K"),
            ],
        )],
    )
    .sub(sub("a", "channel", key("catalog", "ns")))
    .resolve();
    assert!(r.bundles.is_empty());
    assert_contains(error_of(&r, "a"), &["K (g/v)", "b-1 is skipped by b-3"]);
}

#[test]
fn an_upgrade_that_would_break_an_installed_dependent_is_not_taken() {
    let mut unowned = installed(e("a-1", "0.0.0", "", "").requires_package("b", "1.0.0"));
    unowned.entry.package = String::new();
    let r = scenario("ns", vec![cat("catalog", "ns", 0, vec![e("b-2", "0.0.0", "b", "default").replaces("b-1")])])
        .installed(unowned)
        .installed(installed(e("b-1", "1.0.0", "b", "")))
        .sub(sub("b", "default", key("catalog", "ns")))
        .resolve();
    assert_ok(&r);
    assert!(r.bundles.is_empty(), "{:?}", picked(&r));
}

#[test]
fn channel_order_errors_are_reported() {
    let r = scenario(
        "ns",
        vec![cat(
            "catalog",
            "ns",
            0,
            vec![e("a", "1.0.0", "p", "c").replaces("b"), e("b", "0.9.0", "p", "c").replaces("a")],
        )],
    )
    .sub(sub("p", "c", key("catalog", "ns")))
    .resolve();
    assert_contains(error_of(&r, "p"), &["channel \"c\" of package \"p\" has no head"]);

    let r = scenario(
        "ns",
        vec![cat(
            "catalog",
            "ns",
            0,
            vec![
                e("a", "1.0.0", "p", "c").replaces("b"),
                e("b", "0.9.0", "p", "c").replaces("c"),
                e("c", "0.8.0", "p", "c").replaces("b"),
            ],
        )],
    )
    .sub(sub("p", "c", key("catalog", "ns")))
    .resolve();
    assert_contains(error_of(&r, "p"), &["starting at \"a\"", "loops back"]);
}

fn cel(rule: &str) -> Requirement {
    Requirement::Cel(olm_resolver::CelRule::compile(rule).expect("rule compiles"))
}

#[test]
fn cel_constraints_select_by_api_and_by_exact_version() {
    let gvk_rule = "properties.exists(p, p.type == 'olm.gvk' && p.value == {'group': 'g', 'version': 'v', 'kind': 'k'})";
    let r = scenario(
        NS,
        vec![cat(
            "community",
            NS,
            0,
            vec![
                e("opA.v1.0.0", "1.0.0", "app", "stable").constraint(cel(gvk_rule), "gvk-constraint"),
                e("opB.v1.0.0", "1.0.0", "db", "stable").default().provides("g", "v", "k"),
            ],
        )],
    )
    .sub(sub("app", "stable", community()))
    .resolve();
    assert_ok(&r);
    assert_eq!(names(&r), ["opA.v1.0.0", "opB.v1.0.0"]);

    let gvk2_rule = "properties.exists(p, p.type == 'olm.gvk' && p.value == {'group': 'g2', 'version': 'v', 'kind': 'k'})";
    let r = scenario(
        NS,
        vec![cat(
            "community",
            NS,
            0,
            vec![
                e("opA.v1.0.0", "1.0.0", "app", "stable").constraint(cel(gvk2_rule), "gvk2-constraint"),
                e("opB.v1.0.0", "1.0.0", "db", "stable").provides("g", "v", "k"),
            ],
        )],
    )
    .sub(sub("app", "stable", community()))
    .resolve();
    assert!(r.bundles.is_empty());
    assert_contains(error_of(&r, "app"), &["gvk2-constraint"]);

    let pkg_rule = "properties.exists(p, p.type == 'olm.package' && p.value.packageName == 'db' && (semver_compare(p.value.version, '1.0.1') == 0))";
    let r = scenario(
        NS,
        vec![cat(
            "community",
            NS,
            0,
            vec![
                e("opA.v1.0.0", "1.0.0", "app", "stable").constraint(cel(pkg_rule), "package-constraint"),
                e("opB.v1.0.0", "1.0.0", "db", "stable").default(),
                e("opB.v1.0.1", "1.0.1", "db", "stable").default().replaces("opB.v1.0.0"),
                e("opB.v1.0.2", "1.0.2", "db", "stable").default().replaces("opB.v1.0.1"),
            ],
        )],
    )
    .sub(sub("app", "stable", community()))
    .resolve();
    assert_ok(&r);
    assert_eq!(names(&r), ["opA.v1.0.0", "opB.v1.0.1"]);
}
