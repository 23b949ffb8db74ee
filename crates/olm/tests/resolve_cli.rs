//! `olm resolve` as a process: exit codes, JSON/YAML shape, and errors on stderr.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn olm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_olm")).args(args).output().expect("run olm")
}

fn requests() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../olm-resolver/testdata/requests")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn an_upgrade_resolves_with_exit_0_and_the_documented_json() {
    let req = requests().join("etcd-from-0.9.0.yaml");
    let o = olm(&["resolve", "--request", req.to_str().expect("utf-8 path"), "--output", "json"]);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("stdout is JSON");
    assert_eq!(
        v,
        serde_json::json!({
            "bundles": [{"name": "etcdoperator.v0.9.2", "package": "etcd", "catalog": "community",
                         "catalogNamespace": "olm", "replaces": "etcdoperator.v0.9.0", "reason": "upgrade"}],
            "errors": []
        })
    );
}

#[test]
fn a_failed_subscription_exits_1_and_the_others_still_resolve() {
    let req = requests().join("etcd-new.yaml");
    let o = olm(&["resolve", "--request", req.to_str().expect("utf-8 path"), "--output", "json"]);
    assert_eq!(o.status.code(), Some(1), "stderr: {}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("stdout is JSON");
    assert_eq!(v["bundles"][0]["name"], "etcdoperator.v0.9.0");
    assert_eq!(v["bundles"][0]["reason"], "install");
    assert_eq!(v["bundles"].as_array().map(Vec::len), Some(1));
    assert_eq!(v["errors"][0]["subscription"], "etcd-typo");
    let msg = v["errors"][0]["message"].as_str().expect("message is a string");
    assert!(msg.contains("package etcd-operator is not in catalog community"), "{msg}");
}

#[test]
fn text_and_yaml_outputs_are_rendered() {
    let req = requests().join("etcd-from-0.9.0.yaml");
    let o = olm(&["resolve", "--request", req.to_str().expect("utf-8 path")]);
    assert_eq!(o.status.code(), Some(0));
    let text = stdout(&o);
    assert!(text.contains("Namespace operators: 1 bundle to install, 0 Subscriptions failed."), "{text}");
    assert!(text.contains("upgrade") && text.contains("etcdoperator.v0.9.2") && text.contains("upgrades etcdoperator.v0.9.0"), "{text}");

    let o = olm(&["resolve", "--request", req.to_str().expect("utf-8 path"), "--output", "yaml"]);
    assert_eq!(o.status.code(), Some(0));
    let yaml = stdout(&o);
    assert!(yaml.contains("name: etcdoperator.v0.9.2") && yaml.contains("reason: upgrade"), "{yaml}");
}

#[test]
fn a_malformed_request_exits_2_naming_the_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let req = dir.path().join("req.yaml");
    std::fs::write(&req, "namespace: ops\nsubscriptions:\n- {package: a, catalog: c, chanel: x}\n").expect("write");
    let o = olm(&["resolve", "--request", req.to_str().expect("utf-8 path"), "--output", "json"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(o.stdout.is_empty());
    let err = stderr(&o);
    assert!(err.contains("req.yaml") && err.contains("chanel"), "{err}");

    let o = olm(&["resolve", "--request", dir.path().join("missing.yaml").to_str().expect("utf-8 path")]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("missing.yaml"));
}

#[test]
fn a_malformed_catalog_exits_2_naming_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("catalog")).expect("mkdir");
    std::fs::write(dir.path().join("catalog/index.yaml"), "schema: olm.package\nname: [unclosed\n").expect("write");
    let req = dir.path().join("req.yaml");
    std::fs::write(
        &req,
        "namespace: ops\ncatalogs:\n- {name: broken, namespace: olm, path: ./catalog}\nsubscriptions:\n- {package: a, catalog: broken}\n",
    )
    .expect("write");
    let o = olm(&["resolve", "--request", req.to_str().expect("utf-8 path"), "--output", "json"]);
    assert_eq!(o.status.code(), Some(2), "stdout: {}", stdout(&o));
    let err = stderr(&o);
    assert!(err.contains("broken") && err.contains("index.yaml"), "{err}");
}

#[test]
fn a_missing_catalog_path_names_the_field_and_says_the_cause_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let req = dir.path().join("req.yaml");
    std::fs::write(&req, "namespace: ops\ncatalogs:\n- {name: c, namespace: olm, path: ./nope}\nsubscriptions:\n- {package: a, catalog: c}\n")
        .expect("write");
    let o = olm(&["resolve", "--request", req.to_str().expect("utf-8 path")]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.contains("catalogs[0].path (catalog c") && err.contains("nope"), "{err}");
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
}
