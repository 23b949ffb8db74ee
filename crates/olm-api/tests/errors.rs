//! Bad input gives errors that name the file, the position and the field; never a panic.

mod support;

use olm_api::v1alpha1::{ClusterServiceVersion, CsvPhase, InstallModeType, Subscription};
use olm_api::yaml::{self, YamlError};
use support::testdata;

const ETCD_094: &str = "etcd/bundles/0.9.4/manifests/etcdoperator.v0.9.4.clusterserviceversion.yaml";

fn etcd_csv_text() -> String {
    std::fs::read_to_string(testdata().join(ETCD_094)).expect("fixture")
}

fn write_temp(name: &str, text: &str) -> (tempdir::Dir, std::path::PathBuf) {
    let dir = tempdir::Dir::new();
    let path = dir.path().join(name);
    std::fs::write(&path, text).expect("write temp file");
    (dir, path)
}

/// A throwaway directory removed on drop (no extra dependency needed).
mod tempdir {
    pub struct Dir(std::path::PathBuf);
    impl Dir {
        pub fn new() -> Self {
            static COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let path = std::env::temp_dir().join(format!("olm-api-test-{}-{n}", std::process::id()));
            std::fs::create_dir_all(&path).expect("create temp dir");
            Dir(path)
        }
        pub fn path(&self) -> &std::path::Path {
            &self.0
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[test]
fn malformed_yaml_names_file_line_and_column() {
    let text = "apiVersion: operators.coreos.com/v1alpha1\nkind: ClusterServiceVersion\nmetadata:\n  name: broken\nspec:\n  displayName: [unclosed\n  install: {}\n";
    let (_dir, path) = write_temp("broken.clusterserviceversion.yaml", text);
    let err = yaml::from_path::<ClusterServiceVersion>(&path).expect_err("malformed YAML must fail");
    let details = err.invalid().expect("an invalid-document error");
    assert_eq!(details.origin, path.display().to_string());
    assert!(details.line.is_some_and(|line| line >= 6), "line of the problem: {err}");
    assert!(details.column.is_some(), "column: {err}");
    let message = err.to_string();
    assert!(message.starts_with(&format!("{}:", path.display())), "{message}");
    assert_eq!(err.category(), "InvalidManifest");
}

#[test]
fn bad_indentation_is_reported_not_panicked() {
    let text = "kind: ClusterServiceVersion\nmetadata:\n  name: x\n spec: {}\n";
    let err = yaml::from_str::<ClusterServiceVersion>(text, "inline.yaml").expect_err("bad indentation");
    let details = err.invalid().expect("invalid document");
    assert_eq!(details.line, Some(4), "{err}");
    assert_eq!(details.field, None, "a syntax error at the top names no field: {err}");
}

#[test]
fn unknown_install_mode_names_the_field_and_the_accepted_values() {
    let text = etcd_csv_text().replacen("type: MultiNamespace", "type: Bogus", 1);
    let err = yaml::from_str::<ClusterServiceVersion>(&text, "etcd-bogus.yaml").expect_err("Bogus install mode");
    let details = err.invalid().expect("invalid document");
    assert_eq!(details.field.as_deref(), Some("spec.installModes[2].type"), "{err}");
    // The position of the offending value, not of the enclosing `spec`.
    assert_eq!((details.line, details.column), (Some(279), Some(11)), "{err}");
    let message = err.to_string();
    assert!(message.starts_with("etcd-bogus.yaml:279:11: field `spec.installModes[2].type`: unknown variant `Bogus`"), "{message}");
    assert!(message.contains("Bogus"), "{message}");
    for accepted in InstallModeType::ALL {
        assert!(message.contains(accepted.as_str()), "{message} should list {accepted}");
    }
}

#[test]
fn unknown_approval_is_rejected_with_the_accepted_values() {
    let text = "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata:\n  name: etcd\n  namespace: operators\nspec:\n  name: etcd\n  source: operatorhubio-catalog\n  sourceNamespace: olm\n  installPlanApproval: manual\n";
    let err = yaml::from_str::<Subscription>(text, "sub.yaml").expect_err("lower-case approval");
    let details = err.invalid().expect("invalid document");
    assert_eq!(details.field.as_deref(), Some("spec.installPlanApproval"), "{err}");
    assert!(err.to_string().contains("Automatic") && err.to_string().contains("Manual"), "{err}");
}

#[test]
fn missing_required_field_is_named() {
    let text = "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata:\n  name: etcd\nspec:\n  name: etcd\n  sourceNamespace: olm\n";
    let err = yaml::from_str::<Subscription>(text, "sub.yaml").expect_err("no source");
    assert!(err.to_string().contains("source"), "{err}");
}

#[test]
fn unknown_status_values_are_kept_not_rejected() {
    let mut text = etcd_csv_text();
    text.push_str("status:\n  phase: Frobnicating\n  reason: SomethingNew\n  requirementStatus:\n  - group: x\n    version: v1\n    kind: Y\n    name: z\n    status: Maybe\n    message: ''\n");
    let csv: ClusterServiceVersion = yaml::from_str(&text, "etcd-with-status.yaml").expect("unknown status values are accepted");
    let status = csv.status.as_ref().expect("status");
    assert_eq!(status.phase, Some(CsvPhase::Other("Frobnicating".into())));
    assert!(!status.phase.as_ref().is_some_and(CsvPhase::is_known));
    let back = serde_json::to_value(&csv).expect("serialise");
    assert_eq!(back["status"]["phase"], "Frobnicating");
    assert_eq!(back["status"]["reason"], "SomethingNew");
    assert_eq!(back["status"]["requirementStatus"][0]["status"], "Maybe");
}

#[test]
fn known_status_values_map_to_variants() {
    let mut text = etcd_csv_text();
    text.push_str("status:\n  phase: Succeeded\n  reason: InstallSucceeded\n");
    let csv: ClusterServiceVersion = yaml::from_str(&text, "etcd.yaml").expect("parses");
    assert_eq!(csv.phase(), Some(&CsvPhase::Succeeded));
    assert_eq!(CsvPhase::Succeeded.as_str(), "Succeeded");
    assert_eq!(CsvPhase::None.as_str(), "");
}

#[test]
fn a_missing_file_is_a_read_error_naming_it() {
    let err = yaml::from_path::<ClusterServiceVersion>("/nonexistent/csv.yaml").expect_err("no such file");
    assert!(matches!(err, YamlError::Read { .. }));
    assert!(err.to_string().starts_with("/nonexistent/csv.yaml: cannot read"), "{err}");
}

#[test]
fn multi_document_errors_name_the_document() {
    let text = "---\napiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata:\n  name: a\n---\n---\napiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata:\n  name: b\nspec:\n  upgradeStrategy: Sometimes\n";
    let err = yaml::all_from_str::<olm_api::v1::OperatorGroup>(text, "groups.yaml").expect_err("bad strategy");
    let details = err.invalid().expect("invalid document");
    assert_eq!(details.document, Some(2), "empty documents are skipped: {err}");
    assert_eq!(details.field.as_deref(), Some("spec.upgradeStrategy"), "{err}");
    let fixed = text.replace("Sometimes", "TechPreviewUnsafeFailForward");
    let groups = yaml::all_from_str::<olm_api::v1::OperatorGroup>(&fixed, "groups.yaml").expect("valid");
    assert_eq!(groups.len(), 2);
    assert_eq!(groups[0].spec.upgrade_strategy(), olm_api::v1::UpgradeStrategy::Default);
    assert_eq!(groups[1].spec.upgrade_strategy(), olm_api::v1::UpgradeStrategy::TechPreviewUnsafeFailForward);
}

#[test]
fn type_errors_deep_in_a_pod_template_point_at_the_value() {
    let text = etcd_csv_text().replacen("replicas: 1", "replicas: one", 1);
    let err = yaml::from_str::<ClusterServiceVersion>(&text, "etcd.yaml").expect_err("replicas must be a number");
    let details = err.invalid().expect("invalid document");
    assert_eq!(details.field.as_deref(), Some("spec.install.spec.deployments[0].spec.replicas"), "{err}");
    let line = details.line.expect("a line") as usize;
    assert!(text.lines().nth(line - 1).is_some_and(|l| l.contains("replicas: one")), "line {line} of: {err}");
}
