//! Hostile trees: link loops, links leaving the catalog, FIFOs, limits.

use std::os::unix::fs::symlink;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use super::*;
use crate::load::{fbc_files, fbc_files_within, load_fbc};

/// A package `name` as one FBC file.
fn package_yaml(name: &str) -> String {
    format!(
        "---\nschema: olm.package\nname: {name}\ndefaultChannel: stable\n---\nschema: olm.channel\npackage: {name}\nname: stable\nentries:\n- name: {name}.v1.0.0\n---\nschema: olm.bundle\npackage: {name}\nname: {name}.v1.0.0\nimage: quay.io/x/{name}:1.0.0\nproperties:\n- type: olm.package\n  value:\n    packageName: {name}\n    version: 1.0.0\n"
    )
}

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo").arg(path).status().expect("mkfifo runs");
    assert!(status.success());
}

/// Runs `f` on a thread and fails the test instead of hanging if it blocks (opening a FIFO).
fn within_seconds<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(20)).expect("the walk finished (a FIFO was not opened)")
}

fn messages(problems: &[Problem]) -> Vec<String> {
    problems.iter().map(ToString::to_string).collect()
}

fn rel(problem: &Problem, root: &Path) -> String {
    problem.file.as_deref().unwrap().strip_prefix(root).unwrap().display().to_string()
}

#[test]
fn a_self_link_is_not_followed_and_warned_about_once() {
    let dir = tempfile::tempdir().unwrap();
    write(&dir.path().join("pkg/catalog.yaml"), &package_yaml("a"));
    symlink(".", dir.path().join("self")).unwrap();
    let (files, problems) = fbc_files(dir.path()).unwrap();
    assert_eq!(files, vec![dir.path().join("pkg/catalog.yaml")]);
    assert_eq!(problems.len(), 1, "{:?}", messages(&problems));
    assert_eq!(problems[0].code, "DirectorySymlink");
    assert!(problems[0].warning);
    assert_eq!(rel(&problems[0], dir.path()), "self");
    assert!(problems[0].message.contains("not followed"), "{}", problems[0]);
}

#[test]
fn two_loop_links_end_at_once() {
    let dir = tempfile::tempdir().unwrap();
    write(&dir.path().join("pkg/catalog.yaml"), &package_yaml("a"));
    symlink(".", dir.path().join("self")).unwrap();
    symlink("..", dir.path().join("pkg/up")).unwrap();
    let root = dir.path().to_path_buf();
    let (files, problems) = within_seconds(move || fbc_files(&root).unwrap());
    assert_eq!(files.len(), 1);
    let links: Vec<String> = problems.iter().map(|p| rel(p, dir.path())).collect();
    assert_eq!(links, ["pkg/up", "self"]);
    assert!(problems.iter().all(|p| p.code == "DirectorySymlink"));
}

#[test]
fn a_link_to_the_filesystem_root_is_refused_naming_link_and_target() {
    let dir = tempfile::tempdir().unwrap();
    write(&dir.path().join("catalog.yaml"), &package_yaml("a"));
    symlink("/", dir.path().join("everything")).unwrap();
    let (files, problems) = fbc_files(dir.path()).unwrap();
    assert_eq!(files, vec![dir.path().join("catalog.yaml")]);
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].code, "OutsideCatalog");
    assert!(!problems[0].warning);
    let text = problems[0].to_string();
    assert!(text.contains("everything") && text.contains("outside the catalog, to \"/\""), "{text}");
}

#[test]
fn a_link_to_a_file_outside_the_root_is_refused() {
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.yaml");
    write(&secret, "schema: olm.package\nname: secret\n");
    let dir = tempfile::tempdir().unwrap();
    symlink(&secret, dir.path().join("catalog.yaml")).unwrap();
    // A link that climbs out with `..` is the same.
    symlink(format!("../{}/secret.yaml", outside.path().file_name().unwrap().to_str().unwrap()), dir.path().join("climb.yaml"))
        .unwrap();
    let (files, problems) = fbc_files(dir.path()).unwrap();
    assert!(files.is_empty(), "{files:?}");
    assert_eq!(problems.len(), 2, "{:?}", messages(&problems));
    for problem in &problems {
        assert_eq!(problem.code, "OutsideCatalog");
        assert!(problem.to_string().contains("secret.yaml"), "{problem}");
    }
}

#[test]
fn a_file_link_inside_the_root_is_read() {
    let dir = tempfile::tempdir().unwrap();
    write(&dir.path().join("real/catalog.yaml"), &package_yaml("a"));
    symlink("real/catalog.yaml", dir.path().join("linked.yaml")).unwrap();
    let (files, problems) = fbc_files(dir.path()).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(files, vec![dir.path().join("linked.yaml"), dir.path().join("real/catalog.yaml")]);
}

#[test]
fn a_fifo_is_named_and_never_opened() {
    let dir = tempfile::tempdir().unwrap();
    write(&dir.path().join("a/catalog.yaml"), &package_yaml("a"));
    mkfifo(&dir.path().join("b.yaml"));
    symlink("b.yaml", dir.path().join("c.yaml")).unwrap();
    let root = dir.path().to_path_buf();
    let (catalog, problems) = within_seconds(move || load_fbc(&root).unwrap());
    assert_eq!(catalog.counts().0, 1, "the healthy package loads");
    assert_eq!(problems.len(), 2, "{:?}", messages(&problems));
    assert_eq!(rel(&problems[0], dir.path()), "b.yaml");
    assert!(problems[0].message.contains("FIFO") && problems[0].message.contains("not a regular file"), "{}", problems[0]);
    assert_eq!(rel(&problems[1], dir.path()), "c.yaml");
    assert!(problems[1].message.contains("b.yaml"), "names the link's target: {}", problems[1]);
    // Named directly, it is refused too.
    let fifo = dir.path().join("b.yaml");
    let err = within_seconds(move || crate::load::parse_file(&fifo).unwrap_err());
    assert_eq!(err.category(), "CatalogPathRefused");
    assert!(err.to_string().contains("FIFO"), "{err}");
}

#[test]
fn an_ignored_fifo_is_not_reported() {
    let dir = tempfile::tempdir().unwrap();
    write(&dir.path().join("catalog.yaml"), &package_yaml("a"));
    write(&dir.path().join(".indexignore"), "*.pipe\n");
    mkfifo(&dir.path().join("x.pipe"));
    let (files, problems) = fbc_files(dir.path()).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(files.len(), 1);
}

#[test]
fn a_loop_link_next_to_a_healthy_package_leaves_it_loaded() {
    let dir = tempfile::tempdir().unwrap();
    write(&dir.path().join("healthy/catalog.yaml"), &package_yaml("healthy"));
    symlink("..", dir.path().join("healthy/loop")).unwrap();
    symlink("/", dir.path().join("healthy/escape")).unwrap();
    let (catalog, problems) = load_fbc(dir.path()).unwrap();
    assert_eq!(catalog.packages().len(), 1);
    assert_eq!(catalog.packages()[0].name, "healthy");
    let codes: Vec<&str> = problems.iter().map(|p| p.code).collect();
    assert_eq!(codes, ["OutsideCatalog", "DirectorySymlink"]);
}

#[test]
fn too_deep_a_tree_names_the_directory_and_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    write(&dir.path().join("a/catalog.yaml"), &package_yaml("a"));
    write(&dir.path().join("b/c/d/deep.yaml"), &package_yaml("d"));
    let limits = WalkLimits { max_depth: 2, ..WalkLimits::default() };
    let (files, problems) = fbc_files_within(dir.path(), limits).unwrap();
    assert_eq!(files, vec![dir.path().join("a/catalog.yaml")]);
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].code, "TooDeep");
    assert_eq!(rel(&problems[0], dir.path()), "b/c/d");
    assert!(problems[0].message.contains("deeper than the 2 levels allowed"), "{}", problems[0]);
}

#[test]
fn too_many_entries_name_the_limit_once() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..3 {
        for j in 0..3 {
            write(&dir.path().join(format!("d{i}/f{j}.yaml")), "schema: x\n");
        }
    }
    let limits = WalkLimits { max_entries: 5, ..WalkLimits::default() };
    let (files, problems) = fbc_files_within(dir.path(), limits).unwrap();
    assert!(files.len() < 5, "{files:?}");
    assert_eq!(problems.len(), 1, "{:?}", messages(&problems));
    assert_eq!(problems[0].code, "TooManyFiles");
    assert!(problems[0].message.contains("more than the 5 files and directories allowed"), "{}", problems[0]);
}

#[test]
fn too_large_a_file_names_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    write(&dir.path().join("big.yaml"), &package_yaml("big"));
    let limits = WalkLimits { max_file_bytes: 10, ..WalkLimits::default() };
    let (files, problems) = fbc_files_within(dir.path(), limits).unwrap();
    assert!(files.is_empty());
    assert_eq!(problems[0].code, "FileTooLarge");
    assert!(problems[0].to_string().contains("big.yaml") && problems[0].message.contains("more than the 10 allowed"));
}

#[test]
fn a_root_that_is_a_link_is_walked_where_it_points() {
    let dir = tempfile::tempdir().unwrap();
    write(&dir.path().join("real/catalog.yaml"), &package_yaml("a"));
    symlink("real", dir.path().join("current")).unwrap();
    let (files, problems) = fbc_files(&dir.path().join("current")).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(files, vec![dir.path().join("current/catalog.yaml")]);
}

/// A bundle directory: `manifests/` linking out of the bundle, or holding a FIFO, is an
/// error naming it (before, the FIFO was dropped and the bundle rendered without it).
#[test]
fn bundle_directories_are_confined_and_fifos_named() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("b");
    write(
        &bundle.join("metadata/annotations.yaml"),
        "annotations:\n  operators.operatorframework.io.bundle.package.v1: b\n  operators.operatorframework.io.bundle.channels.v1: stable\n",
    );
    fs::create_dir_all(bundle.join("manifests")).unwrap();
    mkfifo(&bundle.join("manifests/csv.yaml"));
    let at = bundle.clone();
    let err = within_seconds(move || crate::render::render_bundle_dir(&at, &Default::default()).unwrap_err());
    assert!(err.to_string().contains("manifests/csv.yaml") && err.to_string().contains("FIFO"), "{err}");

    fs::remove_dir_all(bundle.join("manifests")).unwrap();
    symlink("/etc", bundle.join("manifests")).unwrap();
    let err = crate::render::render_bundle_dir(&bundle, &Default::default()).unwrap_err();
    assert!(err.to_string().contains("outside the catalog, to \"/etc\""), "{err}");
}

/// `validate` over a catalog with a FIFO where a package's file should be fails, naming it.
#[test]
fn validate_reports_a_fifo_instead_of_passing() {
    let dir = tempfile::tempdir().unwrap();
    write(&dir.path().join("a/catalog.yaml"), &package_yaml("a"));
    fs::create_dir_all(dir.path().join("b")).unwrap();
    mkfifo(&dir.path().join("b/catalog.yaml"));
    let root = dir.path().to_path_buf();
    let report = within_seconds(move || crate::validate(&root).unwrap());
    assert!(!report.passed());
    assert_eq!(report.packages, 1);
    assert!(report.problems[0].to_string().contains("b/catalog.yaml"), "{:?}", messages(&report.problems));
}
