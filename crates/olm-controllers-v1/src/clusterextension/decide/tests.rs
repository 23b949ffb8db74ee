//! What a ClusterExtension's status says in each case a user meets: installed, upgrading and
//! failing with the old revision still installed, nothing installed yet, a configuration only a
//! change fixes, deprecations known or unknown; and when the next pass comes.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use olm_api::olmv1::ClusterExtension;
use olm_api::olmv1::cluster_extension::ClusterExtensionStatus;

use super::*;

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + seconds).unwrap()
}

fn extension(status: Option<&ClusterExtensionStatus>) -> ClusterExtension {
    let mut extension: ClusterExtension = serde_json::from_value(serde_json::json!({
        "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension",
        "metadata": {"name": "etcd", "generation": 3},
        "spec": {"namespace": "etcd", "source": {"sourceType": "Catalog", "catalog": {"packageName": "etcd"}}}
    }))
    .unwrap();
    extension.status = status.cloned();
    extension
}

fn etcd(version: &str) -> InstalledBundle {
    InstalledBundle {
        package: "etcd".into(),
        name: format!("etcdoperator.v{version}"),
        version: version.into(),
        image: format!("registry.test/etcd@sha256:{version}"),
    }
}

fn condition<'a>(status: &'a ClusterExtensionStatus, type_: &str) -> (&'a str, &'a str, &'a str) {
    let c = status.conditions.iter().find(|c| c.type_ == type_).unwrap_or_else(|| panic!("no {type_} condition"));
    (c.status.as_str(), c.reason.as_str(), c.message.as_str())
}

fn run(installed: Option<&InstalledBundle>, progress: Progress, deprecations: Option<&Deprecations>, failures: u32) -> (ClusterExtensionStatus, Option<Duration>) {
    let extension = extension(None);
    status(&Observed { extension: &extension, installed, progress: &progress, deprecations, failures }, at(0))
}

#[test]
fn what_installed_and_progressing_say_in_each_case() {
    let installed = etcd("0.9.4");
    let retrying = "error for resolved bundle \"etcdoperator.v0.9.5\" with version \"0.9.5\": validating upgrade for CRD \"etcdclusters.etcd.database.coreos.com\": …".to_owned();
    // (installed, progress) → (Installed, Progressing, requeue)
    let cases = [
        (Some(&installed), Progress::Done, ("True", "Succeeded", "Installed bundle registry.test/etcd@sha256:0.9.4 successfully"), ("True", "Succeeded", "Desired state reached"), Some(RESYNC)),
        (Some(&installed), Progress::Retrying(retrying.clone()), ("True", "Succeeded", "Installed bundle registry.test/etcd@sha256:0.9.4 successfully"), ("True", "Retrying", retrying.as_str()), Some(FIRST_RETRY)),
        (None, Progress::Retrying("no bundles found for package \"etcd\"".into()), ("False", "Failed", "No bundle installed"), ("True", "Retrying", "no bundles found for package \"etcd\""), Some(FIRST_RETRY)),
        (
            None,
            Progress::Stopped { reason: "InvalidConfiguration", message: "invalid ClusterExtension configuration: invalid configuration: required field \"watchNamespace\" is missing".into() },
            ("False", "Failed", "No bundle installed"),
            ("False", "InvalidConfiguration", "invalid ClusterExtension configuration: invalid configuration: required field \"watchNamespace\" is missing"),
            None,
        ),
    ];
    for (installed, progress, want_installed, want_progressing, want_requeue) in cases {
        let (status, requeue) = run(installed, progress.clone(), None, 1);
        assert_eq!(condition(&status, "Installed"), want_installed, "{progress:?}");
        assert_eq!(condition(&status, "Progressing"), want_progressing, "{progress:?}");
        assert_eq!(requeue, want_requeue, "{progress:?}");
        assert_eq!(status.install.as_ref().map(|i| i.bundle.name.as_str()), installed.map(|i| i.name.as_str()), "status.install names the installed bundle");
        assert!(status.conditions.iter().all(|c| c.observed_generation == Some(3)));
    }
}

#[test]
fn a_bundle_without_an_image_is_named_by_its_name() {
    let mut installed = etcd("0.9.4");
    installed.image.clear();
    let (status, _) = run(Some(&installed), Progress::Done, None, 0);
    assert_eq!(condition(&status, "Installed").2, "Installed bundle etcdoperator.v0.9.4 successfully");
}

#[test]
fn deprecation_conditions_follow_upstreams_table() {
    let installed = etcd("0.9.4");
    let none = Deprecations::default();
    let some = Deprecations { package: vec!["etcd is deprecated".into()], channels: vec!["alpha is deprecated".into()], bundle: vec!["0.9.4 has a CVE".into()] };
    let (status, _) = run(Some(&installed), Progress::Done, Some(&none), 0);
    assert_eq!(condition(&status, "Deprecated"), ("False", "NotDeprecated", "not deprecated"));
    assert_eq!(condition(&status, "PackageDeprecated"), ("False", "NotDeprecated", "package not deprecated"));
    assert_eq!(condition(&status, "ChannelDeprecated"), ("False", "NotDeprecated", "channel not deprecated"));
    assert_eq!(condition(&status, "BundleDeprecated"), ("False", "NotDeprecated", "bundle not deprecated"));

    let (status, _) = run(Some(&installed), Progress::Done, Some(&some), 0);
    assert_eq!(condition(&status, "Deprecated"), ("True", "Deprecated", "etcd is deprecated\nalpha is deprecated\n0.9.4 has a CVE"));
    assert_eq!(condition(&status, "ChannelDeprecated"), ("True", "Deprecated", "alpha is deprecated"));
    assert_eq!(condition(&status, "BundleDeprecated"), ("True", "Deprecated", "0.9.4 has a CVE"));

    let (status, _) = run(None, Progress::Done, Some(&some), 0);
    assert_eq!(condition(&status, "BundleDeprecated"), ("Unknown", "Absent", "no bundle installed yet"), "nothing installed: no bundle to judge");

    let (status, _) = run(Some(&installed), Progress::Retrying("x".into()), None, 1);
    for type_ in ["Deprecated", "PackageDeprecated", "ChannelDeprecated", "BundleDeprecated"] {
        assert_eq!(condition(&status, type_), ("Unknown", "DeprecationStatusUnknown", "deprecation status unknown: catalog data unavailable"), "{type_}");
    }
    let (status, _) = run(None, Progress::Retrying("x".into()), None, 1);
    assert_eq!(condition(&status, "BundleDeprecated"), ("Unknown", "Absent", "no bundle installed yet"));
}

#[test]
fn retries_slow_down_and_the_transition_time_moves_only_with_the_status() {
    assert_eq!([1, 2, 3, 6, 40].map(retry_after), [10, 20, 40, 300, 300].map(Duration::from_secs));
    let (first, _) = run(None, Progress::Retrying("a".into()), None, 1);
    let extension = extension(Some(&first));
    let progress = Progress::Retrying("b".into());
    let (second, _) = status(&Observed { extension: &extension, installed: None, progress: &progress, deprecations: None, failures: 2 }, at(60));
    let time = |s: &ClusterExtensionStatus| s.conditions.iter().find(|c| c.type_ == "Progressing").unwrap().last_transition_time.clone();
    assert_eq!(time(&first), time(&second), "still Retrying: the first transition time stays");
    let progress = Progress::Stopped { reason: "Blocked", message: "c".into() };
    let (third, _) = status(&Observed { extension: &extension, installed: None, progress: &progress, deprecations: None, failures: 3 }, at(120));
    assert_ne!(time(&first), time(&third), "True to False: a new transition time");
}

#[test]
fn an_extension_olm_migrate_made_says_where_it_came_from_and_others_do_not() {
    let installed = etcd("0.9.2");
    let mut migrated = extension(None);
    migrated.metadata.annotations = Some(
        [
            (olm_api::keys::MIGRATED_FROM_ANNOTATION.to_owned(), "operators/etcd".to_owned()),
            (olm_api::keys::ADOPT_FROM_ANNOTATION.to_owned(), "operators/etcdoperator.v0.9.2".to_owned()),
        ]
        .into(),
    );
    let observed = Observed { extension: &migrated, installed: Some(&installed), progress: &Progress::Done, deprecations: None, failures: 0 };
    let (status_now, _) = status(&observed, at(0));
    assert_eq!(
        condition(&status_now, MIGRATED_FROM_OLM_V0),
        ("True", "Adopted", "moved from OLM v0 in place: Subscription operators/etcd, ClusterServiceVersion operators/etcdoperator.v0.9.2")
    );
    let (plain, _) = run(Some(&installed), Progress::Done, None, 0);
    assert!(!plain.conditions.iter().any(|c| c.type_ == MIGRATED_FROM_OLM_V0));
}
