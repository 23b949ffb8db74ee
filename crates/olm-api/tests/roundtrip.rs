//! Real manifests parse into the typed API and serialise back to the same JSON.

mod support;

use std::path::Path;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::DynamicObject;
use olm_api::v1alpha1::ClusterServiceVersion;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use support::{files_under, json_diff, testdata};

/// Parses `path` as `T`, serialises it again, and returns the differences with the raw
/// document (empty when the round trip is exact, up to dropped `null` members).
fn roundtrip<T: DeserializeOwned + Serialize>(path: &Path) -> Result<Vec<String>, String> {
    // Explicit nulls are dropped on purpose (see `olm_api::unknown`); everything else stays.
    let raw: Value = olm_api::unknown::without_null_members(olm_api::yaml::from_path(path).map_err(|err| err.to_string())?);
    let typed: T = olm_api::yaml::from_path(path).map_err(|err| err.to_string())?;
    let back = serde_json::to_value(&typed).map_err(|err| format!("{}: serialise: {err}", path.display()))?;
    let mut problems = json_diff(&raw, &back);
    // A second round trip through JSON text must be stable too.
    let again: T = serde_json::from_value(back.clone()).map_err(|err| format!("{}: reparse: {err}", path.display()))?;
    let back_again = serde_json::to_value(&again).map_err(|err| err.to_string())?;
    problems.extend(json_diff(&back, &back_again).into_iter().map(|d| format!("second pass: {d}")));
    Ok(problems)
}

fn assert_all_roundtrip(files: &[std::path::PathBuf], check: impl Fn(&Path) -> Result<Vec<String>, String>) {
    let mut failures = Vec::new();
    for file in files {
        match check(file) {
            Ok(problems) if problems.is_empty() => {}
            Ok(problems) => failures.push(format!("{}:\n    {}", file.display(), problems.join("\n    "))),
            Err(err) => failures.push(err),
        }
    }
    assert!(failures.is_empty(), "{} of {} files did not round-trip:\n{}", failures.len(), files.len(), failures.join("\n"));
}

fn crd_roundtrip(path: &Path) -> Result<Vec<String>, String> {
    let head: DynamicObject = olm_api::yaml::from_path(path).map_err(|err| err.to_string())?;
    let api_version = head.types.as_ref().map(|t| t.api_version.as_str()).unwrap_or_default();
    match api_version {
        "apiextensions.k8s.io/v1" => roundtrip::<CustomResourceDefinition>(path),
        // k8s-openapi has no v1beta1 CRD type (removed in Kubernetes 1.22); such files are
        // handled as untyped objects.
        "apiextensions.k8s.io/v1beta1" => roundtrip::<DynamicObject>(path),
        other => Err(format!("{}: unexpected apiVersion {other:?}", path.display())),
    }
}

#[test]
fn every_etcd_bundle_csv_round_trips() {
    let files = files_under(&testdata().join("etcd/bundles"), ".clusterserviceversion.yaml");
    assert_eq!(files.len(), 6, "six etcd bundles");
    assert_all_roundtrip(&files, roundtrip::<ClusterServiceVersion>);
}

#[test]
fn every_etcd_legacy_csv_round_trips() {
    let files = files_under(&testdata().join("etcd/legacy"), ".clusterserviceversion.yaml");
    assert_eq!(files.len(), 6, "six etcd package-manifest CSVs");
    assert_all_roundtrip(&files, roundtrip::<ClusterServiceVersion>);
}

#[test]
fn every_etcd_crd_round_trips() {
    let files: Vec<_> = files_under(&testdata().join("etcd"), ".crd.yaml");
    assert_eq!(files.len(), 32, "16 CRD files per layout");
    assert_all_roundtrip(&files, crd_roundtrip);
}

/// The one change a round trip may make: a CSV written with a foreign `apiVersion` (a few
/// service-binding-operator releases say `binding.operators.coreos.com/v1alpha1`) comes back
/// with the right one, as it does when upstream OLM decodes and creates it.
const CORRECTED_API_VERSION: &str = r#".apiVersion: "binding.operators.coreos.com/v1alpha1" became "operators.coreos.com/v1alpha1""#;

#[test]
fn community_csvs_round_trip() {
    let files = files_under(&testdata().join("csvs"), ".yaml");
    assert!(files.len() >= 100, "expected at least 100 CSV fixtures, found {}", files.len());
    let corrected = std::cell::Cell::new(0);
    assert_all_roundtrip(&files, |path| {
        let mut problems = roundtrip::<ClusterServiceVersion>(path)?;
        let before = problems.len();
        problems.retain(|p| p != CORRECTED_API_VERSION);
        corrected.set(corrected.get() + before - problems.len());
        Ok(problems)
    });
    assert_eq!(corrected.get(), 5, "the five service-binding-operator CSVs with a foreign apiVersion");
}

#[test]
fn unmodelled_fields_survive() {
    // Keys outside upstream's types, found in real bundles: `spec.skipRange`, `spec.support`,
    // `ports` inside a Deployment spec, a bare label map as a Deployment selector.
    let mut seen = std::collections::BTreeSet::new();
    for file in files_under(&testdata().join("csvs"), ".yaml") {
        let csv: ClusterServiceVersion = olm_api::yaml::from_path(&file).expect("fixture parses");
        seen.extend(csv.spec.extra.keys().cloned());
        for deployment in csv.spec.install.spec.iter().flat_map(|s| &s.deployments) {
            if deployment.spec.has_untyped_content() {
                seen.insert(format!("deployment:{}", deployment.name));
            }
        }
    }
    assert!(seen.contains("skipRange"), "{seen:?}");
    assert!(seen.contains("support"), "{seen:?}");
    assert!(seen.iter().any(|k| k.starts_with("deployment:")), "{seen:?}");
}

#[test]
fn csv_fields_are_typed_not_just_carried() {
    let path = testdata().join("etcd/bundles/0.9.4/manifests/etcdoperator.v0.9.4.clusterserviceversion.yaml");
    let csv: ClusterServiceVersion = olm_api::yaml::from_path(&path).expect("etcd 0.9.4 parses");
    assert_eq!(csv.metadata.name.as_deref(), Some("etcdoperator.v0.9.4"));
    assert_eq!(csv.spec.version.as_deref(), Some("0.9.4"));
    assert_eq!(csv.spec.replaces.as_deref(), Some("etcdoperator.v0.9.2"));
    let owned: Vec<&str> = csv.spec.owned_crds().iter().map(|c| c.name.as_str()).collect();
    assert_eq!(owned, ["etcdclusters.etcd.database.coreos.com", "etcdbackups.etcd.database.coreos.com", "etcdrestores.etcd.database.coreos.com"]);
    let modes: Vec<(&str, bool)> = csv.spec.install_modes().iter().map(|m| (m.type_.as_str(), m.supported)).collect();
    assert_eq!(modes, [("OwnNamespace", true), ("SingleNamespace", true), ("MultiNamespace", false), ("AllNamespaces", false)]);
    let strategy = csv.spec.install.spec.as_ref().expect("install strategy");
    assert_eq!(csv.spec.install.strategy, "deployment");
    assert_eq!(strategy.deployments.len(), 1);
    let deployment = &strategy.deployments[0];
    assert_eq!(deployment.name, "etcd-operator");
    let containers = &deployment.spec.template.spec.as_ref().expect("pod spec").containers;
    assert_eq!(containers.len(), 3);
    assert_eq!(containers[0].name, "etcd-operator");
    let permissions = strategy.permissions.as_deref().expect("permissions");
    assert_eq!(permissions[0].service_account_name, "etcd-operator");
    assert!(permissions[0].rules.iter().any(|r| r.api_groups.as_deref() == Some(&["etcd.database.coreos.com".to_owned()][..])));
    // Known keys are typed, not carried as extras.
    assert!(csv.spec.extra.is_empty(), "{:?}", csv.spec.extra.keys().collect::<Vec<_>>());
    assert!(csv.spec.install.extra.is_empty() && strategy.extra.is_empty() && deployment.extra.is_empty());
    assert!(csv.spec.owned_crds().iter().all(|c| c.extra.is_empty()));
    let semver = csv.spec.semver().expect("has a version").expect("valid semver");
    assert_eq!((semver.major, semver.minor, semver.patch), (0, 9, 4));
}

#[test]
fn explicit_nulls_are_dropped_not_kept() {
    // 14 CRD descriptions in the fixtures say `resources: null`; server-side apply would
    // reject that, so the serialised CSV must not contain it.
    let mut nulls_in_input = 0;
    for file in files_under(&testdata().join("csvs"), ".yaml") {
        let raw: Value = olm_api::yaml::from_path(&file).expect("fixture");
        nulls_in_input += count_null_members(&raw);
        let csv: ClusterServiceVersion = olm_api::yaml::from_path(&file).expect("fixture");
        let back = serde_json::to_value(&csv).expect("serialise");
        assert_eq!(count_null_members(&back), 0, "{}", file.display());
    }
    assert!(nulls_in_input > 0, "the fixtures do contain explicit nulls");
}

fn count_null_members(value: &Value) -> usize {
    match value {
        Value::Object(map) => map.values().map(|v| usize::from(v.is_null()) + count_null_members(v)).sum(),
        Value::Array(items) => items.iter().map(count_null_members).sum(),
        _ => 0,
    }
}
