//! `olm migrate` (issue #54) on the real node, with pods that really run: Authorino, a real
//! community operator (its bundles in tests/testdata/real-bundles, unchanged, pushed as bundle
//! images) with a CRD conversion webhook, cluster RBAC and a custom resource, installed by OLM
//! v0 for all namespaces, becomes an OLM v1 ClusterExtension in place. Public images cannot be
//! pulled here: the images its CSV names (quay.io/kuadrant/…) are stood in for by a program of
//! this build (src/bin/operator_stand_in.rs: the probes, and a conversion webhook that really
//! converts) pushed under the same paths to the dev registry, the node's mirror.
//!
//! - the operator's and the webhook's pods Run and are Ready on olm-dev-real-node;
//! - a read of the custom resource at the version that is not stored goes through the webhook
//!   before, during (read again and again while `olm migrate` runs) and after the migration,
//!   and never fails;
//! - the same pods (uids), the same CRD and the same custom resource (uid, resourceVersion);
//! - then an upgrade through the extension's version: 0.13.0's operator pod runs on the node
//!   and the webhook still answers.
//!
//! Needs root (the real node): skipped with a message otherwise.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use olm_e2e::dev_env::{DevEnvironment, kubectl, kubectl_paths, wait_for_on};

const NS: &str = "authorino-operator";
const BUNDLES: &str = "tests/testdata/real-bundles/authorino-operator";
const REAL_NODE: &str = "olm-dev-real-node";

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn kubectl_ok(env: &DevEnvironment, args: &[&str], stdin: Option<&str>) -> String {
    let out = kubectl(env, args, stdin);
    assert!(out.status.success(), "kubectl {}: {}", args.join(" "), text(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// `name uid node phase ready image` of the pods of Deployment `app`'s selector.
fn pods(env: &DevEnvironment, selector: &str) -> Vec<String> {
    let listing = kubectl_ok(
        env,
        &["get", "pods", "-n", NS, "-l", selector, "-o",
          "jsonpath={range .items[*]}{.metadata.uid} {.spec.nodeName} {.status.phase} {.status.conditions[?(@.type==\"Ready\")].status} {.spec.containers[0].image}{\"\\n\"}{end}"],
        None,
    );
    listing.lines().map(str::to_owned).collect()
}

/// Waits until every pod of `selector` runs Ready on the real node from `image`; their uids.
fn running_on_the_node(env: &DevEnvironment, selector: &str, image: &str) -> Vec<String> {
    wait_for_on(env, &format!("the pods of {selector} Running and Ready on {REAL_NODE} from {image}"), Duration::from_secs(240), || {
        let pods = pods(env, selector);
        let wanted = format!(" {REAL_NODE} Running True {image}");
        if !pods.is_empty() && pods.iter().all(|p| p.ends_with(&wanted)) {
            Ok(pods.iter().map(|p| p.split(' ').next().unwrap_or_default().to_owned()).collect())
        } else {
            Err(format!("{pods:?}"))
        }
    })
}

/// The bundles as images, and a catalog image of them with the channel 0.12.0 → 0.13.0.
fn push_catalog(work: &Path, registry: &str) -> String {
    let bundles = olm_e2e::repo().join(BUNDLES);
    let mut rendered = String::new();
    for version in ["0.12.0", "0.13.0"] {
        let dir = bundles.join(version);
        let image = olm_e2e::olm(&["bundle", "push", dir.to_str().expect("path"), &format!("{registry}/e2e/authorino-operator-bundle:v{version}")])
            .expect("olm bundle push");
        let json = olm_e2e::olm(&["catalog", "render", dir.to_str().expect("path"), "--image", image.trim(), "--migrate-level", "bundle-object-to-csv-metadata", "-o", "json"])
            .expect("olm catalog render");
        rendered.push_str(json.trim());
        rendered.push('\n');
    }
    let fbc = work.join("catalog");
    std::fs::create_dir_all(&fbc).expect("catalog dir");
    let head = r#"{"schema":"olm.package","name":"authorino-operator","defaultChannel":"stable"}
{"schema":"olm.channel","package":"authorino-operator","name":"stable","entries":[{"name":"authorino-operator.v0.12.0"},{"name":"authorino-operator.v0.13.0","replaces":"authorino-operator.v0.12.0"}]}
"#;
    std::fs::write(fbc.join("catalog.json"), format!("{head}{rendered}")).expect("write catalog");
    let catalog = format!("{registry}/e2e/authorino-catalog:v1");
    olm_e2e::olm(&["catalog", "push", fbc.to_str().expect("path"), &catalog]).expect("olm catalog push");
    catalog
}

fn v0_install(catalog: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Namespace
metadata:
  name: {NS}
---
apiVersion: operators.coreos.com/v1
kind: OperatorGroup
metadata:
  name: global
  namespace: {NS}
spec: {{}}
---
apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata:
  name: authorino
  namespace: {NS}
spec:
  sourceType: grpc
  image: {catalog}
---
apiVersion: operators.coreos.com/v1alpha1
kind: Subscription
metadata:
  name: authorino-operator
  namespace: {NS}
  annotations:
    olm-rs.io/auto-approve-starting-csv: "true"
spec:
  name: authorino-operator
  channel: stable
  source: authorino
  sourceNamespace: {NS}
  startingCSV: authorino-operator.v0.12.0
  installPlanApproval: Manual
"#
    )
}

const AUTH_CONFIG: &str = r#"apiVersion: authorino.kuadrant.io/v1beta2
kind: AuthConfig
metadata:
  name: talker-api
  namespace: authorino-operator
spec:
  hosts:
  - talker-api.example.com
"#;

/// Reads the AuthConfig at v1beta1 (stored at v1beta2: the API server asks the webhook) until
/// stopped; the failures, each with when and what kubectl said, and the number of reads.
fn read_through_the_webhook(env: &DevEnvironment, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<(Vec<String>, usize)> {
    let (kubectl, kubeconfig) = kubectl_paths(env);
    std::thread::spawn(move || {
        let begin = Instant::now();
        let (mut failures, mut reads) = (Vec::new(), 0);
        while !stop.load(Ordering::Relaxed) {
            let out = Command::new(&kubectl)
                .args(["get", "authconfigs.v1beta1.authorino.kuadrant.io", "talker-api", "-n", NS, "-o", "jsonpath={.apiVersion}"])
                .env("KUBECONFIG", &kubeconfig)
                .output()
                .expect("kubectl runs");
            reads += 1;
            if !out.status.success() || String::from_utf8_lossy(&out.stdout) != "authorino.kuadrant.io/v1beta1" {
                failures.push(format!("{:?}: {}", begin.elapsed(), text(&out)));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        (failures, reads)
    })
}

#[test]
fn a_running_community_operator_with_a_webhook_moves_to_olm_v1_in_place() {
    let Some(mut env) = olm_e2e::dev_env::real_node_environment("real_node_migrate") else { return };
    let total = Instant::now();
    // Every pod of this test runs for real: the real node takes all, the kwok node none.
    kubectl_ok(&env, &["taint", "nodes", REAL_NODE, "olm.dev/real-node-"], None);
    kubectl_ok(&env, &["cordon", "kwok-node-0"], None);

    let registry = format!("127.0.0.1:{}", env.base + 500);
    let work = tempfile::tempdir().expect("work directory");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let program = Path::new(env!("CARGO_BIN_EXE_operator_stand_in"));
    let stand_ins = ["kuadrant/authorino-operator:v0.12.0", "kuadrant/authorino-operator:v0.13.0", "kuadrant/authorino:v0.18.0"].map(|path| format!("{registry}/{path}"));
    let references: Vec<&str> = stand_ins.iter().map(String::as_str).collect();
    runtime.block_on(olm_e2e::stand_in::push_operator_stand_in(program, &references)).expect("push the stand-in images");

    // OLM v0 installs 0.12.0 for all namespaces.
    let catalog = push_catalog(work.path(), &registry);
    kubectl_ok(&env, &["apply", "-f", "-"], Some(&v0_install(&catalog)));
    wait_for_on(&env, "CSV authorino-operator.v0.12.0 Succeeded", Duration::from_secs(300), || {
        let phase = kubectl_ok(&env, &["get", "csv", "authorino-operator.v0.12.0", "-n", NS, "--ignore-not-found", "-o", "jsonpath={.status.phase}"], None);
        if phase == "Succeeded" { Ok(()) } else { Err(format!("phase {phase:?}")) }
    });
    let operator_pods = running_on_the_node(&env, "control-plane=authorino-operator", "quay.io/kuadrant/authorino-operator:v0.12.0");
    let webhook_pods = running_on_the_node(&env, "authorino-component=authorino-webhooks", "quay.io/kuadrant/authorino:v0.18.0");

    // A custom resource, read through the conversion webhook.
    kubectl_ok(&env, &["apply", "-f", "-"], Some(AUTH_CONFIG));
    wait_for_on(&env, "the AuthConfig read at v1beta1 through the webhook", Duration::from_secs(60), || {
        let out = kubectl(&env, &["get", "authconfigs.v1beta1.authorino.kuadrant.io", "talker-api", "-n", NS, "-o", "jsonpath={.apiVersion}"], None);
        if out.status.success() { Ok(()) } else { Err(text(&out)) }
    });
    let identity = |env: &DevEnvironment| {
        (
            kubectl_ok(env, &["get", "authconfigs.v1beta2.authorino.kuadrant.io", "talker-api", "-n", NS, "-o", "jsonpath={.metadata.uid} {.metadata.resourceVersion}"], None),
            kubectl_ok(env, &["get", "crd", "authconfigs.authorino.kuadrant.io", "-o", "jsonpath={.metadata.uid}"], None),
            kubectl_ok(env, &["get", "deployments", "-n", NS, "-o", "jsonpath={range .items[*]}{.metadata.name}={.metadata.uid}/{.metadata.generation} {end}"], None),
        )
    };
    let before = identity(&env);

    // The migration, the webhook read again and again meanwhile.
    let stop = Arc::new(AtomicBool::new(false));
    let reader = read_through_the_webhook(&env, stop.clone());
    let (_, kubeconfig) = kubectl_paths(&env);
    let started = Instant::now();
    let migrated = env.olm(&["migrate", "authorino-operator", "-n", NS, "--pin", "--yes", &format!("--kubeconfig={}", kubeconfig.display())]);
    let took = started.elapsed();
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    let (failures, reads) = reader.join().expect("the reader");
    assert!(migrated.status.success(), "olm migrate:\n{}", text(&migrated));
    eprintln!("olm migrate took {took:?}; the AuthConfig was read through the webhook {reads} times meanwhile");
    assert!(failures.is_empty(), "reads through the webhook failed during the migration: {failures:#?}");
    assert!(reads >= 5, "the webhook was read during the migration ({reads} times)");

    // Nothing restarted, nothing recreated, nothing lost.
    assert_eq!(identity(&env), before, "the custom resource, the CRD and the Deployments are the same objects, unchanged");
    assert_eq!(running_on_the_node(&env, "control-plane=authorino-operator", "quay.io/kuadrant/authorino-operator:v0.12.0"), operator_pods, "the operator's pod is the same");
    assert_eq!(running_on_the_node(&env, "authorino-component=authorino-webhooks", "quay.io/kuadrant/authorino:v0.18.0"), webhook_pods, "the webhook's pod is the same");
    let installed = kubectl_ok(&env, &["get", "clusterextension", "authorino-operator", "-o", "jsonpath={.status.install.bundle.version} {.status.conditions[?(@.type==\"MigratedFromOLMv0\")].status}"], None);
    assert_eq!(installed, "0.12.0 True");
    let labels = kubectl_ok(&env, &["get", "deployments", "-n", NS, "-o", "jsonpath={.items[*].metadata.labels}"], None);
    assert!(!labels.contains("olm.owner") && labels.contains("olm.operatorframework.io/owner-name"), "the Deployments are OLM v1's alone: {labels}");
    let subscriptions = kubectl_ok(&env, &["get", "subscriptions,csv,operatorgroups", "-n", NS, "-o", "name"], None);
    assert!(subscriptions.is_empty(), "OLM v0's objects are gone: {subscriptions}");
    let logs = kubectl_ok(&env, &["logs", "-n", NS, "deployment/authorino-webhooks"], None);
    assert!(logs.contains("converted 1 objects to \"authorino.kuadrant.io/v1beta1\""), "the webhook's own log shows its conversions:\n{logs}");

    // An upgrade through the extension's version: the new operator pod runs on the node.
    kubectl_ok(&env, &["patch", "clusterextension", "authorino-operator", "--type=merge", "-p", r#"{"spec":{"source":{"catalog":{"version":"0.13.0"}}}}"#], None);
    wait_for_on(&env, "0.13.0 installed through the extension", Duration::from_secs(300), || {
        let version = kubectl_ok(&env, &["get", "clusterextension", "authorino-operator", "-o", "jsonpath={.status.install.bundle.version}"], None);
        if version == "0.13.0" { Ok(()) } else { Err(version) }
    });
    running_on_the_node(&env, "control-plane=authorino-operator", "quay.io/kuadrant/authorino-operator:v0.13.0");
    let after = kubectl(&env, &["get", "authconfigs.v1beta1.authorino.kuadrant.io", "talker-api", "-n", NS, "-o", "jsonpath={.metadata.uid}"], None);
    assert!(after.status.success(), "the webhook answers after the upgrade: {}", text(&after));
    assert_eq!(String::from_utf8_lossy(&after.stdout), before.0.split(' ').next().unwrap_or_default(), "the same custom resource");

    let down = env.down();
    assert!(down.status.success(), "olm dev down --purge: {}", text(&down));
    eprintln!("real node migration test: {:?} in all", total.elapsed());
}
