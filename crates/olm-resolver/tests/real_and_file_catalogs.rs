//! Catalogs on disk: the etcd operator's real bundles (community-operators, copied into
//! testdata) and an FBC with dependencies, constraints and deprecations. For etcd,
//! the upgrade path 0.9.0 → 0.9.2 → 0.9.4 in channel singlenamespace-alpha.

use std::path::PathBuf;

use olm_resolver::{CatalogKey, Catalogs, Installed, Reason, Request, Subscription, Version, adapter, file};

fn testdata(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testdata").join(rel)
}

fn etcd() -> Catalogs {
    let (snapshot, problems) =
        adapter::load(&testdata("etcd"), CatalogKey::new("community", "olm"), 0).expect("etcd bundles load");
    assert!(snapshot.entries.len() >= 6, "every bundle/channel pair is an entry: {problems:?}");
    Catalogs::new([snapshot])
}

fn resolve_from(installed: Option<&str>) -> olm_resolver::Resolution {
    let catalogs = etcd();
    let mut req = Request::new("operators");
    if let Some(name) = installed {
        let version = Version::parse(name.trim_start_matches("etcdoperator.v")).expect("version");
        req.installed.push(Installed::from_catalogs(
            &catalogs,
            name,
            "etcd",
            Some(&CatalogKey::new("community", "olm")),
            Some(version),
        ));
    }
    req.subscriptions
        .push(Subscription::new("etcd", CatalogKey::new("community", "olm")).channel("singlenamespace-alpha"));
    olm_resolver::resolve(&catalogs, &req)
}

#[test]
fn etcd_upgrades_one_edge_at_a_time_to_the_head() {
    let r = resolve_from(Some("etcdoperator.v0.9.0"));
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    let b: Vec<_> = r.bundles.iter().map(|b| (b.name.as_str(), b.replaces.as_deref(), b.reason)).collect();
    assert_eq!(b, [("etcdoperator.v0.9.2", Some("etcdoperator.v0.9.0"), Reason::Upgrade)]);

    let r = resolve_from(Some("etcdoperator.v0.9.2"));
    let b: Vec<_> = r.bundles.iter().map(|b| (b.name.as_str(), b.replaces.as_deref(), b.reason)).collect();
    assert_eq!(b, [("etcdoperator.v0.9.4", Some("etcdoperator.v0.9.2"), Reason::Upgrade)]);

    let r = resolve_from(Some("etcdoperator.v0.9.4"));
    assert!(r.bundles.is_empty() && r.errors.is_empty(), "at the head nothing changes: {r:?}");
}

#[test]
fn a_new_etcd_subscription_gets_the_channel_head_and_the_default_channel_when_omitted() {
    let r = resolve_from(None);
    assert_eq!(r.bundles.iter().map(|b| b.name.as_str()).collect::<Vec<_>>(), ["etcdoperator.v0.9.4"]);
    assert_eq!(r.bundles[0].reason, Reason::Install);

    let catalogs = etcd();
    let mut req = Request::new("operators");
    req.subscriptions.push(Subscription::new("etcd", CatalogKey::new("community", "olm")));
    let r = olm_resolver::resolve(&catalogs, &req);
    assert_eq!(r.bundles.len(), 1);
    assert_eq!((r.bundles[0].name.as_str(), r.bundles[0].channel.as_str()), ("etcdoperator.v0.9.4", "singlenamespace-alpha"));
}

#[test]
fn request_files_resolve_with_starting_csv_and_report_a_wrong_package_name() {
    let loaded = file::load_request(&testdata("requests/etcd-new.yaml")).expect("request loads");
    let r = olm_resolver::resolve(&loaded.catalogs, &loaded.request);
    let out = file::Output::from_resolution(&r);
    assert_eq!(out.bundles.len(), 1);
    assert_eq!(out.bundles[0].name, "etcdoperator.v0.9.0");
    assert_eq!(out.bundles[0].reason, "install");
    assert_eq!(out.errors.len(), 1);
    assert_eq!(out.errors[0].subscription, "etcd-typo");
    assert!(out.errors[0].message.contains("package etcd-operator is not in catalog community"), "{}", out.errors[0].message);
    assert!(out.errors[0].message.contains("similar names in that catalog: etcd"), "{}", out.errors[0].message);

    let loaded = file::load_request(&testdata("requests/etcd-from-0.9.0.yaml")).expect("request loads");
    let r = olm_resolver::resolve(&loaded.catalogs, &loaded.request);
    let out = file::Output::from_resolution(&r);
    assert_eq!(
        serde_json::to_value(&out).expect("json"),
        serde_json::json!({"bundles": [{"name": "etcdoperator.v0.9.2", "package": "etcd", "catalog": "community",
            "catalogNamespace": "olm", "replaces": "etcdoperator.v0.9.0", "reason": "upgrade"}], "errors": []})
    );
}

#[test]
fn fbc_dependencies_constraints_and_deprecations_resolve_through_request_files() {
    let loaded = file::load_request(&testdata("fbc-deps/request-new.yaml")).expect("request loads");
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let r = olm_resolver::resolve(&loaded.catalogs, &loaded.request);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    let got: Vec<_> = r.bundles.iter().map(|b| (b.name.as_str(), b.reason)).collect();
    assert_eq!(
        got,
        [("app.v1.2.0", Reason::Install), ("cache.v3.0.0", Reason::Dependency), ("db.v2.0.0", Reason::Dependency)]
    );
    assert_eq!(r.notices, ["olm.bundle/db.v2.0.0: db.v2.0.0 has a known bug; move to 2.1 when it is fixed"]);

    let loaded = file::load_request(&testdata("fbc-deps/request-upgrade.yaml")).expect("request loads");
    let r = olm_resolver::resolve(&loaded.catalogs, &loaded.request);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    let got: Vec<_> = r.bundles.iter().map(|b| (b.name.as_str(), b.replaces.as_deref(), b.reason)).collect();
    assert_eq!(got, [("db.v2.0.0", Some("db.v1.0.0"), Reason::Upgrade)]);
}

#[test]
fn cel_constraints_from_fbc_see_every_bundle_property() {
    let loaded = file::load_request(&testdata("fbc-cel/request.yaml")).expect("request loads");
    let r = olm_resolver::resolve(&loaded.catalogs, &loaded.request);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    let got: Vec<_> = r.bundles.iter().map(|b| b.name.as_str()).collect();
    // The head metrics.v2.0.0 carries another olm.maxOpenShiftVersion, so v1.0.0 is chosen.
    assert_eq!(got, ["app.v1.0.0", "metrics.v1.0.0"]);
}
