//! The deployable artefacts: the Dockerfile refers to files that exist and builds the binary
//! the manifests run; every container command line in manifests/ is accepted by this `olm`;
//! and `kubectl apply --server-side --dry-run=server -f manifests/` succeeds against the local
//! control plane (started by `olm dev cluster up`), and so does the release pair `olm release`
//! writes (crds.yaml, olm.yaml) with the same objects.

use std::path::PathBuf;
use std::process::Command;

use olm_e2e::repo;

fn manifest_docs() -> Vec<(PathBuf, serde_json::Value)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo().join("manifests"))
        .expect("manifests/ exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    let mut docs = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("readable");
        for doc in text.split("\n---") {
            if doc.lines().all(|l| l.trim().is_empty() || l.trim_start().starts_with('#')) {
                continue;
            }
            let value: serde_json::Value = serde_saphyr::from_str(doc)
                .unwrap_or_else(|e| panic!("{}: not YAML: {e}", file.display()));
            docs.push((file.clone(), value));
        }
    }
    docs
}

#[test]
fn dockerfile_copies_existing_paths_and_builds_the_olm_binary() {
    let dockerfile = std::fs::read_to_string(repo().join("Dockerfile")).expect("Dockerfile at the repository root");
    let mut copies = 0;
    for line in dockerfile.lines().map(str::trim) {
        let Some(rest) = line.strip_prefix("COPY ") else { continue };
        if rest.contains("--from=") {
            continue;
        }
        let words: Vec<&str> = rest.split_whitespace().collect();
        for source in &words[..words.len() - 1] {
            assert!(repo().join(source).exists(), "Dockerfile copies {source}, which does not exist in the repository");
            copies += 1;
        }
    }
    assert!(copies >= 4, "Dockerfile should copy Cargo.toml, Cargo.lock, crates and catalogs");
    assert!(dockerfile.contains("cargo build --release --locked -p olm"), "builds the olm package");
    assert!(dockerfile.contains("target/release/olm"), "copies the olm binary out of the build");
    assert!(dockerfile.contains("COPY catalogs /catalogs"), "ships the catalogs at /catalogs");
    assert!(dockerfile.contains("USER 65532"), "runs as non-root");
    // The binary is named olm.
    let cargo = std::fs::read_to_string(repo().join("crates/olm/Cargo.toml")).expect("crates/olm/Cargo.toml");
    assert!(cargo.contains("name = \"olm\""));
    // Every catalog directory the manifests serve is in the image (catalogs/ → /catalogs).
    for (file, doc) in manifest_docs() {
        for arg in container_args(&doc) {
            if let Some(spec) = arg.strip_prefix("--catalog=") {
                let dir = spec.split_once('=').map(|(_, d)| d).unwrap_or(spec);
                let in_repo = dir.strip_prefix("/catalogs/").map(|rest| repo().join("catalogs").join(rest));
                assert!(
                    in_repo.as_ref().is_some_and(|p| p.is_dir()),
                    "{}: --catalog {dir} is not under /catalogs or missing from catalogs/",
                    file.display()
                );
            }
        }
    }
}

fn container_args(doc: &serde_json::Value) -> Vec<String> {
    let containers = doc.pointer("/spec/template/spec/containers").and_then(|c| c.as_array()).cloned().unwrap_or_default();
    containers
        .iter()
        .flat_map(|c| c.get("args").and_then(|a| a.as_array()).cloned().unwrap_or_default())
        .filter_map(|a| a.as_str().map(str::to_owned))
        .collect()
}

#[test]
fn every_deployment_command_line_is_accepted_by_olm() {
    let mut deployments = 0;
    for (file, doc) in manifest_docs() {
        if doc.get("kind").and_then(|k| k.as_str()) != Some("Deployment") {
            continue;
        }
        deployments += 1;
        let args = container_args(&doc);
        assert!(!args.is_empty(), "{}: a Deployment without args", file.display());
        // Unknown flags or bad values fail before --help is honoured.
        let out = Command::new(olm_e2e::olm_bin()).args(&args).arg("--help").output().expect("olm runs");
        assert!(
            out.status.success(),
            "{}: `olm {}` is rejected: {}",
            file.display(),
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        let probes = doc.pointer("/spec/template/spec/containers/0/readinessProbe/httpGet/path").and_then(|p| p.as_str());
        assert_eq!(probes, Some("/readyz"), "{}: readiness probe on /readyz", file.display());
        let live = doc.pointer("/spec/template/spec/containers/0/livenessProbe/httpGet/path").and_then(|p| p.as_str());
        assert_eq!(live, Some("/healthz"), "{}: liveness probe on /healthz", file.display());
        assert!(doc.pointer("/spec/template/spec/containers/0/resources/requests").is_some(), "{}: resources", file.display());
        let replicas = doc.pointer("/spec/replicas").and_then(|r| r.as_i64()).unwrap_or(1);
        if replicas > 1 && args.first().map(String::as_str) == Some("run") {
            assert!(args.iter().any(|a| a == "--leader-elect"), "{}: several controller replicas need --leader-elect", file.display());
        }
    }
    assert_eq!(deployments, 3, "catalog server, controllers and package server");
}

/// `olm` pointed at the tests' own control plane (olm-testkit's layout), never the developer's.
fn olm_on_test_cluster() -> Command {
    let layout = olm_testkit::test_layout().expect("test layout");
    let mut cmd = Command::new(olm_e2e::olm_bin());
    cmd.env("OLM_DEV_STATE_DIR", &layout.state_dir).env("OLM_DEV_PORT_BASE", layout.host_ports.base.to_string()).env_remove("KUBECONFIG");
    cmd
}

/// `olm dev cluster env` as (KUBECONFIG, PATH).
fn dev_env() -> Option<(String, String)> {
    let out = olm_on_test_cluster().args(["dev", "env"]).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut kubeconfig = None;
    let mut path = None;
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("export KUBECONFIG=") {
            kubeconfig = Some(v.trim_matches('\'').to_owned());
        }
        if let Some(v) = line.strip_prefix("export PATH=") {
            let dir = v.split(':').next().unwrap_or_default().trim_matches('\'');
            path = Some(format!("{dir}:{}", std::env::var("PATH").unwrap_or_default()));
        }
    }
    Some((kubeconfig?, path?))
}

fn kubectl(env: &(String, String), args: &[&str], stdin: Option<&str>) -> std::process::Output {
    use std::io::Write;
    let mut child = Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", &env.0)
        .env("PATH", &env.1)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("kubectl runs (olm dev cluster up puts it on PATH)");
    if let Some(input) = stdin {
        child.stdin.take().expect("stdin").write_all(input.as_bytes()).expect("write stdin");
    }
    drop(child.stdin.take());
    child.wait_with_output().expect("kubectl finishes")
}

#[test]
fn manifests_apply_server_side_dry_run_against_the_local_cluster() {
    let status = olm_on_test_cluster().args(["dev", "cluster", "up"]).output().expect("olm runs");
    assert!(status.status.success(), "olm dev cluster up: {}", String::from_utf8_lossy(&status.stderr));
    let env = dev_env().expect("olm dev env prints KUBECONFIG and PATH");
    // The CRDs (manifests/crds/, applied first) and the namespaces must exist for a dry run of
    // the namespaced objects: a dry run persists nothing.
    let crds = kubectl(&env, &["apply", "--server-side", "--force-conflicts", "-f", &repo().join("manifests/crds").display().to_string()], None);
    assert!(crds.status.success(), "CRDs: {}", String::from_utf8_lossy(&crds.stderr));
    // The namespaces for real, with their Pod Security labels (olm: restricted enforced).
    let namespaces = repo().join("manifests/00-namespaces.yaml");
    let created = kubectl(&env, &["apply", "--server-side", "--force-conflicts", "-f", &namespaces.display().to_string()], None);
    assert!(created.status.success(), "namespaces: {}", String::from_utf8_lossy(&created.stderr));
    let dir = repo().join("manifests");
    let out = kubectl(&env, &["apply", "--server-side", "--dry-run=server", "-f", &dir.display().to_string()], None);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "dry run failed:\n{stdout}\n{stderr}");
    // The API server warns about a workload whose pods its namespace's Pod Security level
    // would refuse; OLM's own meet restricted.
    assert!(!stderr.contains("PodSecurity"), "OLM's pods do not meet the restricted profile:\n{stderr}");
    let plain = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: plain\n  namespace: olm\nspec:\n  selector:\n    matchLabels: {app: plain}\n  template:\n    metadata:\n      labels: {app: plain}\n    spec:\n      containers:\n      - name: c\n        image: example.com/plain:1\n";
    let refused = kubectl(&env, &["apply", "--server-side", "--dry-run=server", "-f", "-"], Some(plain));
    let warned = String::from_utf8_lossy(&refused.stderr);
    assert!(warned.contains("would violate PodSecurity \"restricted:latest\""), "a pod without a security context is warned about:\n{warned}");
    // The release pair (`olm release`): the same objects, with the image asked for.
    let release = tempfile::tempdir().expect("a directory for the release pair");
    let written = olm_on_test_cluster()
        .args(["release", "--image", "registry.example.com/olm@sha256:0123", "--output-dir"])
        .arg(release.path())
        .output()
        .expect("olm runs");
    assert!(written.status.success(), "olm release: {}", String::from_utf8_lossy(&written.stderr));
    let crds = kubectl(&env, &["apply", "--server-side", "--force-conflicts", "-f", &release.path().join("crds.yaml").display().to_string()], None);
    assert!(crds.status.success(), "crds.yaml: {}", String::from_utf8_lossy(&crds.stderr));
    let olm_yaml = release.path().join("olm.yaml");
    let pair = kubectl(&env, &["apply", "--server-side", "--dry-run=server", "-f", &olm_yaml.display().to_string()], None);
    assert!(pair.status.success(), "olm.yaml dry run failed:\n{}", String::from_utf8_lossy(&pair.stderr));
    assert_eq!(String::from_utf8_lossy(&pair.stdout), stdout, "olm.yaml holds what manifests/ holds");
    let text = std::fs::read_to_string(&olm_yaml).expect("olm.yaml");
    assert_eq!(text.matches("image: registry.example.com/olm@sha256:0123").count(), 3, "the three Deployments run the image asked for");
    for object in [
        "deployment.apps/olm-operator",
        "deployment.apps/packageserver",
        "deployment.apps/olm-catalog",
        "apiservice.apiregistration.k8s.io/v1.packages.operators.coreos.com",
        "catalogsource.operators.coreos.com/community",
        "operatorgroup.operators.coreos.com/global-operators",
        "operatorgroup.operators.coreos.com/olm-operators",
    ] {
        assert!(stdout.contains(object), "{object} missing from the dry run:\n{stdout}");
    }
}
