//! The README quick start, run as a new user would: the real `olm` binary and kubectl.
//!
//!   olm dev up
//!   eval "$(olm dev env)"
//!   kubectl get packagemanifests -n olm
//!   kubectl get packagemanifest etcd -n olm -o jsonpath='{.status.defaultChannel}'
//!   kubectl apply -f - (an OperatorGroup and a Subscription for etcd)
//!   kubectl get csv -n <ns> -w   (until Succeeded)
//!   kubectl get operators        (the Operator etcd.<ns> lists the CSV)
//!
//! plus: the registry `olm dev env` names in OLM_DEV_REGISTRY answers `GET /v2/`, stopping the
//! package server leaves `kubectl get pods -A` working, `olm dev up` brings it back, `olm dev up`
//! from another build of olm takes the environment over (and back), and `olm dev down --purge`
//! stops every process `olm dev up` started.
//!
//! All of it on a throwaway environment (temporary OLM_DEV_STATE_DIR, a free OLM_DEV_PORT_BASE
//! from 30000), so neither the developer's `olm dev` cluster nor the tests' shared one is touched.


use std::io::{Read as _, Write};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use olm_e2e::dev_env::{DevEnvironment, process_alive};

/// What `eval "$(olm dev env)"` sets.
struct Shell {
    kubeconfig: String,
    path: String,
    registry: String,
}

fn eval_dev_env(env: &DevEnvironment) -> Shell {
    let olm = |args: &[&str]| env.olm(args);
    let out = olm(&["dev", "env"]);
    assert!(out.status.success(), "olm dev env: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let cluster_env = olm(&["dev", "cluster", "env"]);
    let registry_line = format!("export OLM_DEV_REGISTRY=127.0.0.1:{}\n", env.base + 500);
    assert_eq!(
        text,
        format!("{}{registry_line}", String::from_utf8_lossy(&cluster_env.stdout)),
        "olm dev env prints what olm dev cluster env prints, plus the registry"
    );
    let value = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("export {name}=")))
            .unwrap_or_else(|| panic!("olm dev env sets {name}:\n{text}"))
            .to_owned()
    };
    let kubeconfig = value("KUBECONFIG").trim_matches('\'').to_owned();
    let bin = value("PATH").split(':').next().unwrap_or_default().trim_matches('\'').to_owned();
    let registry = value("OLM_DEV_REGISTRY");
    Shell { kubeconfig, path: format!("{bin}:{}", std::env::var("PATH").unwrap_or_default()), registry }
}

impl Shell {
    fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut child = Command::new("kubectl")
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("PATH", &self.path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl is on the PATH olm dev env sets");
        if let Some(input) = stdin {
            child.stdin.take().expect("stdin").write_all(input.as_bytes()).expect("write");
        }
        drop(child.stdin.take());
        child.wait_with_output().expect("kubectl finishes")
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args, None);
        assert!(out.status.success(), "kubectl {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

struct NamespaceGuard<'a>(&'a Shell, String);

impl Drop for NamespaceGuard<'_> {
    fn drop(&mut self) {
        let _ = self.0.kubectl(&["delete", "namespace", &self.1, "--wait=false", "--ignore-not-found"], None);
    }
}

/// The README's OLM v1 quick start, verbatim (its `$OLM_DEV_REGISTRY` as the shell expands it):
/// a ClusterCatalog of the bundled catalog image, an installer ServiceAccount and a
/// ClusterExtension of etcd, installed from its bundle image as that account; then deleted with
/// what it installed (before the v0 quick start installs etcd's CRDs for a Subscription).
fn olm_v1_quick_start(shell: &Shell) {
    let readme = std::fs::read_to_string(olm_e2e::repo().join("README.md")).expect("README.md");
    let section = &readme[readme.find("## OLM v1 API").expect("the README's OLM v1 section")..];
    let start = section.find("kubectl apply -f - <<YAML\n").expect("the quick start's kubectl apply") + "kubectl apply -f - <<YAML\n".len();
    let end = start + section[start..].find("\n  YAML\n").expect("the end of its YAML");
    let yaml: String = section[start..end].lines().map(|l| format!("{}\n", l.strip_prefix("  ").unwrap_or(l))).collect();
    let yaml = yaml.replace("$OLM_DEV_REGISTRY", &shell.registry);
    shell.ok(&["create", "namespace", "etcd-v1"]);
    let _guard = NamespaceGuard(shell, "etcd-v1".to_owned());
    let applied = shell.kubectl(&["apply", "-f", "-"], Some(&yaml));
    assert!(applied.status.success(), "the OLM v1 quick start: {}", String::from_utf8_lossy(&applied.stderr));
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let row = shell.ok(&["get", "clusterextension", "etcd", "-o", "jsonpath={.status.install.bundle.name} {.status.conditions[?(@.type==\"Installed\")].status}"]);
        if row.trim() == "etcdoperator.v0.9.4-clusterwide True" {
            break;
        }
        let status = shell.kubectl(&["get", "clusterextension", "etcd", "-o", "jsonpath={.status.conditions}"], None);
        assert!(Instant::now() < deadline, "the OLM v1 quick start did not install etcd in 180s: {row:?} {}", String::from_utf8_lossy(&status.stdout));
        std::thread::sleep(Duration::from_secs(1));
    }
    let deployment = shell.ok(&["get", "deployment", "etcd-operator", "-n", "etcd-v1", "-o", "jsonpath={.metadata.labels.olm\\.operatorframework\\.io/owner-name}"]);
    assert_eq!(deployment, "etcd", "the operator runs, owned by its ClusterExtension");
    let table = shell.ok(&["get", "clusterextension", "etcd"]);
    assert!(table.contains("etcdoperator.v0.9.4-clusterwide"), "{table}");
    shell.ok(&["delete", "clusterextension", "etcd", "--wait=true"]);
    shell.ok(&["delete", "clustercatalog", "operatorhubio"]);
    shell.ok(&["delete", "clusterrolebinding", "etcd-installer"]);
    let deadline = Instant::now() + Duration::from_secs(120);
    while shell.kubectl(&["get", "crd", "etcdclusters.etcd.database.coreos.com"], None).status.success() {
        assert!(Instant::now() < deadline, "the ClusterExtension's CRDs were not removed with it in 120s");
        std::thread::sleep(Duration::from_secs(1));
    }
}

#[test]
fn readme_quick_start_works_verbatim() {
    // Dropped on any exit, a failed assertion included: `olm dev down --purge`.
    let mut env = DevEnvironment::new(30000);
    let olm = |args: &[&str]| env.olm(args);
    let up = olm(&["dev", "up"]);
    assert!(
        up.status.success(),
        "olm dev up failed:\n{}\n{}",
        String::from_utf8_lossy(&up.stdout),
        String::from_utf8_lossy(&up.stderr)
    );
    let shell = eval_dev_env(&env);

    let mut registry = std::net::TcpStream::connect(&shell.registry).expect("OLM_DEV_REGISTRY accepts connections");
    write!(registry, "GET /v2/ HTTP/1.0\r\nHost: {}\r\n\r\n", shell.registry).expect("send");
    let mut answer = String::new();
    registry.read_to_string(&mut answer).expect("read");
    assert!(answer.starts_with("HTTP/1.1 200") || answer.starts_with("HTTP/1.0 200"), "GET /v2/ on {}:\n{answer}", shell.registry);

    olm_v1_quick_start(&shell);

    let started = Instant::now();
    let table = shell.ok(&["get", "packagemanifests", "-n", "olm"]);
    let list_latency = started.elapsed();
    let header = table.lines().next().unwrap_or_default();
    assert!(header.split_whitespace().eq(["NAME", "CATALOG", "AGE"]), "columns as upstream: {header}");
    assert!(
        table.lines().any(|l| l.split_whitespace().next() == Some("etcd") && l.contains("Community Operators")),
        "etcd listed:\n{table}"
    );
    eprintln!("kubectl get packagemanifests -n olm took {list_latency:?} (including kubectl start-up)");

    let channel = shell.ok(&["get", "packagemanifest", "etcd", "-n", "olm", "-o", "jsonpath={.status.defaultChannel}"]);
    assert_eq!(channel, "singlenamespace-alpha");
    let catalog = shell.ok(&["get", "packagemanifest", "etcd", "-n", "olm", "-o", "jsonpath={.status.catalogSource}"]);
    let catalog_ns = shell.ok(&["get", "packagemanifest", "etcd", "-n", "olm", "-o", "jsonpath={.status.catalogSourceNamespace}"]);
    assert_eq!((catalog.as_str(), catalog_ns.as_str()), ("community", "olm"));
    let yaml = shell.ok(&["get", "packagemanifest", "etcd", "-n", "olm", "-o", "yaml"]);
    assert!(yaml.contains("kind: PackageManifest") && yaml.contains("currentCSV: etcdoperator.v"), "{yaml}");
    let describe = shell.ok(&["describe", "packagemanifest", "etcd", "-n", "olm"]);
    assert!(describe.contains("Default Channel:") && describe.contains("singlenamespace-alpha"), "{describe}");

    // The user's namespace sees the global catalog too.
    let ns = format!("quickstart-{}", std::process::id());
    let _guard = NamespaceGuard(&shell, ns.clone());
    shell.ok(&["create", "namespace", &ns]);
    let in_ns = shell.ok(&["get", "packagemanifests", "-n", &ns, "-o", "name"]);
    assert!(in_ns.lines().any(|l| l == "packagemanifest.packages.operators.coreos.com/etcd"), "{in_ns}");

    let subscription = format!(
        r#"apiVersion: operators.coreos.com/v1
kind: OperatorGroup
metadata:
  name: etcd
  namespace: {ns}
spec:
  targetNamespaces:
  - {ns}
---
apiVersion: operators.coreos.com/v1alpha1
kind: Subscription
metadata:
  name: etcd
  namespace: {ns}
spec:
  name: etcd
  channel: {channel}
  source: {catalog}
  sourceNamespace: {catalog_ns}
"#
    );
    let applied = shell.kubectl(&["apply", "-f", "-"], Some(&subscription));
    assert!(applied.status.success(), "{}", String::from_utf8_lossy(&applied.stderr));

    let deadline = Instant::now() + Duration::from_secs(180);
    let last = loop {
        let out = shell.kubectl(&["get", "csv", "-n", &ns, "-o", "jsonpath={range .items[*]}{.metadata.name}={.status.phase}{\"\\n\"}{end}"], None);
        let last = String::from_utf8_lossy(&out.stdout).into_owned();
        if last.lines().any(|l| l.starts_with("etcdoperator.v") && l.ends_with("=Succeeded")) {
            break last;
        }
        if Instant::now() > deadline {
            let sub = shell.kubectl(&["get", "subscription", "etcd", "-n", &ns, "-o", "yaml"], None);
            panic!(
                "the etcd CSV did not reach Succeeded in 180s; CSVs: {last:?}\nsubscription:\n{}",
                String::from_utf8_lossy(&sub.stdout)
            );
        }
        std::thread::sleep(Duration::from_secs(2));
    };
    eprintln!("CSV: {last}");
    // It came from a bundle image in the local registry, named by digest in the catalog image.
    let paths = shell.ok(&["get", "installplans", "-n", &ns, "-o", "jsonpath={.items[*].status.bundleLookups[*].path}"]);
    assert!(paths.contains(&format!("{}/olm/bundles/etcd@sha256:", shell.registry)), "bundle lookups: {paths}");
    let image = shell.ok(&["get", "catalogsource", "community", "-n", "olm", "-o", "jsonpath={.spec.image}"]);
    assert_eq!(image, format!("{}/olm/community-catalog:latest", shell.registry));
    // The README's `kubectl get operators`: the Operator of the package in that namespace,
    // listing the CSV among its components.
    let operator = format!("etcd.{ns}");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let listed = shell.ok(&["get", "operators"]);
        let components = shell.kubectl(&["get", "operator", &operator, "-o", "jsonpath={.status.components.refs[*].name}"], None);
        let components = String::from_utf8_lossy(&components.stdout).into_owned();
        if listed.contains(&operator) && components.contains("etcdoperator.v0.9.4") {
            break;
        }
        assert!(Instant::now() < deadline, "kubectl get operators: {listed}\ncomponents of {operator}: {components}");
        std::thread::sleep(Duration::from_secs(1));
    }

    // The README's upgrade: with startingCSV 0.9.0, OLM installs 0.9.0 and walks the channel to
    // 0.9.4, every bundle pulled from its image.
    let upgrade_ns = format!("quickstart-upgrade-{}", std::process::id());
    let _upgrade_guard = NamespaceGuard(&shell, upgrade_ns.clone());
    shell.ok(&["create", "namespace", &upgrade_ns]);
    let upgrade = subscription.replace(&ns, &upgrade_ns).replace("  sourceNamespace:", "  startingCSV: etcdoperator.v0.9.0\n  sourceNamespace:");
    assert!(upgrade.contains("startingCSV: etcdoperator.v0.9.0"), "{upgrade}");
    let applied = shell.kubectl(&["apply", "-f", "-"], Some(&upgrade));
    assert!(applied.status.success(), "{}", String::from_utf8_lossy(&applied.stderr));
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let csvs = shell.ok(&["get", "csv", "-n", &upgrade_ns, "-o", "jsonpath={range .items[*]}{.metadata.name}={.status.phase}{\"\\n\"}{end}"]);
        if csvs.trim() == "etcdoperator.v0.9.4=Succeeded" {
            break;
        }
        assert!(Instant::now() < deadline, "etcd did not walk 0.9.0 → 0.9.4 in 180s; CSVs: {csvs:?}");
        std::thread::sleep(Duration::from_secs(2));
    }
    let installed = shell.ok(&["get", "subscription", "etcd", "-n", &upgrade_ns, "-o", "jsonpath={.status.installedCSV} {.status.state}"]);
    assert_eq!(installed.trim(), "etcdoperator.v0.9.4 AtLatestKnown");
    // The cluster admin's view of it (README, "For cluster admins"): `kubectl olm` through a
    // `kubectl-olm` link on PATH, the channel head read from the package server.
    let plugins = olm_e2e::admin::plugin_dir().expect("a directory for the kubectl-olm link");
    let status = Command::new("kubectl")
        .args(["olm", "status", "etcd", "-n", &upgrade_ns])
        .env("KUBECONFIG", &shell.kubeconfig)
        .env("PATH", format!("{}:{}", plugins.path().display(), shell.path))
        .output()
        .expect("kubectl olm runs");
    let page = String::from_utf8_lossy(&status.stdout);
    assert!(status.status.success(), "kubectl olm status: {page}{}", String::from_utf8_lossy(&status.stderr));
    assert!(page.contains("Channel head: etcdoperator.v0.9.4\n") && page.contains("the installed version is the channel head"), "{page}");
    drop(_upgrade_guard);

    // Stopping the package server must not break kubectl for anything else.
    let pid_file = env.state_dir().join("pids/olm-packageserver.pid");
    let pid = std::fs::read_to_string(&pid_file).expect("olm dev up records the package server pid");
    let killed = Command::new("kill").arg(pid.trim()).status().expect("kill runs");
    assert!(killed.success());
    std::thread::sleep(Duration::from_secs(2));
    let pods = shell.kubectl(&["get", "pods", "-A"], None);
    assert!(pods.status.success(), "kubectl get pods -A with the package server down: {}", String::from_utf8_lossy(&pods.stderr));
    assert!(String::from_utf8_lossy(&pods.stdout).contains(&ns), "pods listed");
    let status = olm(&["dev", "status"]);
    assert!(!status.status.success(), "olm dev status reports the stopped package server");
    assert!(String::from_utf8_lossy(&status.stdout).contains("olm-packageserver"), "{}", String::from_utf8_lossy(&status.stdout));

    // `olm dev up` again restores it (idempotent).
    let again = olm(&["dev", "up"]);
    assert!(again.status.success(), "second olm dev up: {}", String::from_utf8_lossy(&again.stderr));
    assert!(String::from_utf8_lossy(&again.stderr).contains("olm-controllers already running"));
    let status = olm(&["dev", "status"]);
    assert!(status.status.success(), "olm dev status after up:\n{}", String::from_utf8_lossy(&status.stdout));
    shell.ok(&["get", "packagemanifest", "etcd", "-n", &ns]);

    // Another build of olm (here a copy at another path, as target/debug vs target/release)
    // takes over the processes this one started, instead of finding their ports taken.
    let other = tempfile::tempdir().expect("a directory for another build");
    let other_olm = other.path().join("olm");
    std::fs::copy(olm_e2e::olm_bin(), &other_olm).expect("copy of olm");
    let taken_over = env.olm_binary(&other_olm, &["dev", "up"]);
    let said = String::from_utf8_lossy(&taken_over.stderr);
    assert!(taken_over.status.success(), "olm dev up from another build: {said}");
    for process in ["olm-catalog", "olm-controllers", "olm-packageserver"] {
        assert!(
            said.contains(&format!("restarting {process}")) && said.contains("another build of olm"),
            "the other build restarts {process} as its own:\n{said}"
        );
    }
    shell.ok(&["get", "packagemanifest", "etcd", "-n", &ns]);
    // And this build takes them back.
    let back = olm(&["dev", "up"]);
    assert!(back.status.success(), "olm dev up after another build's: {}", String::from_utf8_lossy(&back.stderr));
    assert!(String::from_utf8_lossy(&back.stderr).contains("another build of olm"));
    drop(_guard);

    // `olm dev down --purge` stops everything `olm dev up` started: the OLM host processes and
    // the control plane, each by its recorded pid.
    let started: Vec<(String, u32)> = env.recorded_pids();
    let names: Vec<&str> = started.iter().map(|(n, _)| n.as_str()).collect();
    for expected in ["olm-catalog", "olm-controllers", "olm-packageserver", "registry", "etcd", "kube-apiserver"] {
        assert!(names.iter().any(|n| n.starts_with(expected)), "olm dev up records a pid for {expected}: {names:?}");
    }
    let down = env.down();
    assert!(
        down.status.success(),
        "olm dev down --purge failed:\n{}\n{}",
        String::from_utf8_lossy(&down.stdout),
        String::from_utf8_lossy(&down.stderr)
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let alive: Vec<&(String, u32)> = started.iter().filter(|(_, pid)| process_alive(*pid)).collect();
        if alive.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "still running after olm dev down: {alive:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(!env.state_dir().join("kubeconfig").exists(), "--purge deletes the kubeconfig");
    let status = env.olm(&["dev", "status"]);
    assert!(!status.status.success(), "olm dev status after down reports nothing healthy");
}
