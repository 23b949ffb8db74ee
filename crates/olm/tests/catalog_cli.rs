//! `olm catalog validate` / `olm catalog render` as a user runs them.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn olm() -> Command {
    Command::new(env!("CARGO_BIN_EXE_olm"))
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let p = entry.unwrap().path();
        let dest = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_dir(&p, &dest)
        } else {
            fs::copy(&p, &dest).unwrap();
        }
    }
}

#[test]
fn validate_passes_on_every_shipped_catalog() {
    let mut seen = 0;
    for entry in fs::read_dir(repo().join("catalogs")).unwrap() {
        let dir = entry.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        let out = olm().args(["catalog", "validate"]).arg(&dir).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{}: {stdout}{}", dir.display(), String::from_utf8_lossy(&out.stderr));
        assert!(stdout.contains("valid file-based catalog:"), "{stdout}");
        seen += 1;
    }
    assert!(seen >= 1);
    let out = olm().args(["catalog", "validate"]).arg(repo().join("catalogs/community")).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 package, 3 channels, 6 bundles"));
}

#[test]
fn validate_fails_and_names_a_missing_bundle() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&repo().join("catalogs/community"), dir.path());
    let file = dir.path().join("etcd/catalog.yaml");
    let text = fs::read_to_string(&file).unwrap();
    let broken = text.replacen("- name: etcdoperator.v0.9.2-clusterwide\n", "- name: etcdoperator.v0.9.3-missing\n", 1);
    assert_ne!(text, broken);
    fs::write(&file, broken).unwrap();

    let out = olm().args(["catalog", "validate"]).arg(dir.path()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.lines().any(|l| l.contains("etcd/catalog.yaml")
            && l.contains("channel \"clusterwide-alpha\"")
            && l.contains("etcdoperator.v0.9.3-missing")
            && l.contains("has no olm.bundle")),
        "{stdout}"
    );

    let out = olm().args(["catalog", "validate", "-o", "json"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["passed"], false);
    assert!(report["problems"].as_array().unwrap().iter().any(|p| p["code"] == "MissingBundle" && p["bundle"] == "etcdoperator.v0.9.3-missing"));
}

#[test]
fn validate_of_a_missing_directory_exits_2() {
    let out = olm().args(["catalog", "validate", "/nonexistent/olm-catalog"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/olm-catalog"));
}

#[test]
fn render_reproduces_the_shipped_etcd_catalog() {
    let src = repo().join("crates/olm-catalog/tests/fixtures/bundles/etcd");
    let out = olm().args(["catalog", "render"]).arg(&src).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let shipped = fs::read(repo().join("catalogs/community/etcd/catalog.yaml")).unwrap();
    assert!(out.stdout == shipped, "catalogs/community/etcd/catalog.yaml differs from `olm catalog render`");

    // JSON output of the legacy package manifests of the same operator
    let legacy = repo().join("crates/olm-catalog/tests/fixtures/packagemanifests/etcd");
    let out = olm().args(["catalog", "render", "-o", "json", "--migrate-level", "bundle-object-to-csv-metadata"]).arg(&legacy).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let blobs: Vec<serde_json::Value> =
        serde_json::Deserializer::from_slice(&out.stdout).into_iter().collect::<Result<_, _>>().unwrap();
    assert_eq!(blobs.iter().filter(|b| b["schema"] == "olm.bundle").count(), 6);
    assert_eq!(blobs[0]["schema"], "olm.package");
    assert_eq!(blobs[0]["defaultChannel"], "singlenamespace-alpha");
    assert!(blobs.iter().filter(|b| b["schema"] == "olm.bundle").all(|b| b["properties"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["type"] == "olm.csv.metadata")));
}

#[test]
fn render_reports_unreadable_sources() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("catalog.yaml"), "schema: olm.package\nname: [oops\n").unwrap();
    let out = olm().args(["catalog", "render"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("catalog.yaml") && stderr.contains("invalid YAML"), "{stderr}");
}

/// A legacy package with a CSV no channel reaches renders anyway: the CSV is left out with a
/// warning (exit 0), and a CSV reached only by `skips` is kept in its channel.
#[test]
fn render_of_a_legacy_package_leaves_out_an_unreachable_csv_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let package = dir.path().join("etcd");
    copy_dir(&repo().join("crates/olm-catalog/tests/fixtures/packagemanifests/etcd"), &package);
    let csv_of = |version: &str| {
        fs::read_dir(package.join(version))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.to_string_lossy().ends_with(".clusterserviceversion.yaml"))
            .unwrap()
    };
    // 0.9.3 replaces 0.9.0 and 0.9.4 skips it: reachable by skips only.
    let v092 = fs::read_to_string(csv_of("0.9.2")).unwrap();
    assert!(v092.contains("  replaces: etcdoperator.v0.9.0\n"));
    fs::create_dir_all(package.join("0.9.3")).unwrap();
    fs::write(package.join("0.9.3/etcdoperator.v0.9.3.clusterserviceversion.yaml"), v092.replace("etcdoperator.v0.9.2", "etcdoperator.v0.9.3").replace("version: 0.9.2\n", "version: 0.9.3\n")).unwrap();
    let v094_path = csv_of("0.9.4");
    let v094 = fs::read_to_string(&v094_path).unwrap();
    fs::write(&v094_path, v094.replace("  replaces: etcdoperator.v0.9.2\n", "  replaces: etcdoperator.v0.9.2\n  skips:\n  - etcdoperator.v0.9.3\n")).unwrap();
    // An orphan nobody replaces or skips.
    fs::create_dir_all(package.join("9.9.9")).unwrap();
    fs::write(
        package.join("9.9.9/orphan.clusterserviceversion.yaml"),
        v092.replace("etcdoperator.v0.9.2", "etcdoperator.v9.9.9-orphan").replace("version: 0.9.2\n", "version: 9.9.9\n").replace("  replaces: etcdoperator.v0.9.0\n", ""),
    )
    .unwrap();

    let out = olm().args(["catalog", "render", "-o", "json"]).arg(&package).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("warning:") && stderr.contains("etcdoperator.v9.9.9-orphan") && stderr.contains("left out"), "{stderr}");
    assert!(!stdout.contains("etcdoperator.v9.9.9-orphan"), "the orphan is left out");
    assert!(stdout.contains("\"etcdoperator.v0.9.3\""), "the skipped CSV is in its channel");
}

/// A lone bundle directory that cannot be read is listed like any source problem (exit 1, as
/// `--help` says), naming the file and what is wrong with it; a missing path is exit 2.
#[test]
fn render_of_an_unreadable_bundle_exits_1_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    fs::create_dir_all(bundle.join("manifests")).unwrap();
    fs::create_dir_all(bundle.join("metadata")).unwrap();
    fs::write(bundle.join("manifests/csv.yaml"), "- a list, not an object\n").unwrap();
    fs::write(
        bundle.join("metadata/annotations.yaml"),
        "annotations:\n  operators.operatorframework.io.bundle.package.v1: p\n  operators.operatorframework.io.bundle.channels.v1: a\n",
    )
    .unwrap();
    let out = olm().args(["catalog", "render"]).arg(&bundle).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("csv.yaml") && stderr.contains("is a list, not a Kubernetes object"), "{stderr}");

    let out = olm().args(["catalog", "render"]).arg(dir.path().join("missing")).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}
