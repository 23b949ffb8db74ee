//! `olm dev up --real-node` (#19): one real kubelet node next to the kwok node, running real
//! containers. On a throwaway environment (temporary state directory, a free port base from
//! 31800, or `OLM_TEST_PORT_BASE`):
//!
//! - a tiny HTTP server (C, `gcc -static`) is built here, wrapped as a one-layer image and
//!   pushed to the environment's registry (OLM_DEV_REGISTRY, plain HTTP);
//! - a Deployment that tolerates the real node's taint and selects it runs that image: its pod
//!   is Running and Ready (an HTTP readiness probe) on olm-dev-real-node, and `kubectl logs`
//!   reaches the kubelet; a pod without the toleration goes to the kwok node;
//! - a small operator (the same server) is installed from a bundle image through a Subscription
//!   whose `config` sends it to the real node: its pod runs there and its CSV Succeeds;
//! - `olm dev status` lists containerd, kubelet, kube-proxy and CoreDNS and the real node;
//! - `olm dev down --purge` leaves no containerd, kubelet or kube-proxy process, no bridge and
//!   no mount behind.
//!
//! Needs root (containerd, kubelet, a bridge, iptables): skipped with a message otherwise.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use olm_e2e::dev_env::{DevEnvironment, kubectl, process_alive, wait_for_on};

const SERVER_C: &str = r#"
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>

static void bye(int sig) { (void)sig; _exit(0); }

int main(void) {
    /* PID 1 of a container ignores SIGTERM unless it handles it. */
    signal(SIGTERM, bye);
    int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons(8080);
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    if (bind(s, (struct sockaddr *)&a, sizeof a) || listen(s, 16)) { perror("listen"); return 1; }
    printf("hello-real listening on :8080\n");
    fflush(stdout);
    for (;;) {
        int c = accept(s, 0, 0);
        if (c < 0) continue;
        char buf[1024];
        (void)read(c, buf, sizeof buf);
        const char *r = "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nhello from a real node\n";
        (void)write(c, r, strlen(r));
        close(c);
    }
}
"#;

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn kubectl_ok(env: &DevEnvironment, args: &[&str], stdin: Option<&str>) -> String {
    let out = kubectl(env, args, stdin);
    assert!(out.status.success(), "kubectl {}: {}", args.join(" "), text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Compiles the server and pushes it as a one-layer image; returns `registry/repo@digest`.
fn build_and_push_server(work: &Path, registry: &str) -> String {
    let source = work.join("server.c");
    let binary = work.join("server");
    std::fs::write(&source, SERVER_C).expect("write server.c");
    let gcc = Command::new("gcc").args(["-Os", "-static", "-o"]).arg(&binary).arg(&source).output().expect("gcc runs");
    assert!(gcc.status.success(), "gcc -static server.c: {}", text(&gcc));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let files = [olm_e2e::stand_in::ImageFile { source: binary, dest: "/server".into(), executable: true }];
    let config = serde_json::json!({"Entrypoint": ["/server"], "ExposedPorts": {"8080/tcp": {}}});
    runtime
        .block_on(olm_e2e::stand_in::push_image(&format!("{registry}/e2e/hello-real:v1"), &files, config))
        .expect("push the server image")
}

fn deployment(image: &str) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: hello-real
  namespace: default
spec:
  replicas: 1
  selector:
    matchLabels: {{app: hello-real}}
  template:
    metadata:
      labels: {{app: hello-real}}
    spec:
      nodeSelector:
        {label}: {value}
      tolerations:
      - key: {taint}
        operator: Exists
        effect: NoSchedule
      terminationGracePeriodSeconds: 2
      containers:
      - name: hello
        image: {image}
        ports:
        - containerPort: 8080
        readinessProbe:
          httpGet: {{path: /, port: 8080}}
          periodSeconds: 1
        resources:
          limits: {{cpu: 100m, memory: 16Mi}}
"#,
        label = "olm.dev/node",
        value = "real",
        taint = "olm.dev/real-node",
    )
}

/// The hello server as an operator: a bundle (CSV with one Deployment running `image`) pushed as
/// an image, and a catalog image naming it by digest; returns the catalog image.
fn push_hello_operator_catalog(work: &Path, registry: &str, image: &str) -> String {
    let bundle = work.join("hello-bundle");
    std::fs::create_dir_all(bundle.join("manifests")).expect("bundle dir");
    std::fs::create_dir_all(bundle.join("metadata")).expect("bundle dir");
    let csv = format!(
        r#"apiVersion: operators.coreos.com/v1alpha1
kind: ClusterServiceVersion
metadata:
  name: hello-real.v0.1.0
spec:
  displayName: Hello Real
  version: 0.1.0
  installModes:
  - {{type: OwnNamespace, supported: true}}
  - {{type: SingleNamespace, supported: true}}
  - {{type: MultiNamespace, supported: false}}
  - {{type: AllNamespaces, supported: false}}
  install:
    strategy: deployment
    spec:
      deployments:
      - name: hello-operator
        spec:
          replicas: 1
          selector:
            matchLabels: {{app: hello-operator}}
          template:
            metadata:
              labels: {{app: hello-operator}}
            spec:
              terminationGracePeriodSeconds: 2
              containers:
              - name: hello
                image: {image}
                ports:
                - containerPort: 8080
                readinessProbe:
                  httpGet: {{path: /, port: 8080}}
                  periodSeconds: 1
                resources:
                  limits: {{cpu: 100m, memory: 16Mi}}
"#
    );
    std::fs::write(bundle.join("manifests/hello.clusterserviceversion.yaml"), csv).expect("write CSV");
    std::fs::write(
        bundle.join("metadata/annotations.yaml"),
        "annotations:\n  operators.operatorframework.io.bundle.mediatype.v1: registry+v1\n  operators.operatorframework.io.bundle.manifests.v1: manifests/\n  operators.operatorframework.io.bundle.metadata.v1: metadata/\n  operators.operatorframework.io.bundle.package.v1: hello-real\n  operators.operatorframework.io.bundle.channels.v1: stable\n  operators.operatorframework.io.bundle.channel.default.v1: stable\n",
    )
    .expect("write annotations");
    let bundle_path = bundle.to_str().expect("path");
    let bundle_image = olm_e2e::olm(&["bundle", "push", bundle_path, &format!("{registry}/e2e/hello-real-bundle:v0.1.0")]).expect("olm bundle push");
    let rendered = olm_e2e::olm(&["catalog", "render", bundle_path, "--image", bundle_image.trim(), "--migrate-level", "bundle-object-to-csv-metadata", "-o", "json"])
        .expect("olm catalog render");
    let fbc = work.join("hello-catalog");
    std::fs::create_dir_all(&fbc).expect("catalog dir");
    let package = r#"{"schema":"olm.package","name":"hello-real","defaultChannel":"stable"}"#;
    let channel = r#"{"schema":"olm.channel","package":"hello-real","name":"stable","entries":[{"name":"hello-real.v0.1.0"}]}"#;
    std::fs::write(fbc.join("catalog.json"), format!("{package}\n{channel}\n{}", rendered.trim())).expect("write catalog");
    let catalog = format!("{registry}/e2e/hello-real-catalog:v1");
    olm_e2e::olm(&["catalog", "push", fbc.to_str().expect("path"), &catalog]).expect("olm catalog push");
    catalog
}

/// Namespace, OperatorGroup, CatalogSource and a Subscription whose config sends the operator's
/// pods to the real node.
fn hello_subscription(ns: &str, catalog: &str) -> String {
    format!(
        r#"{namespace}---
apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata:
  name: hello
  namespace: {ns}
spec:
  sourceType: grpc
  image: {catalog}
---
apiVersion: operators.coreos.com/v1alpha1
kind: Subscription
metadata:
  name: hello-real
  namespace: {ns}
spec:
  name: hello-real
  channel: stable
  source: hello
  sourceNamespace: {ns}
  config:
    nodeSelector:
      olm.dev/node: real
    tolerations:
    - key: olm.dev/real-node
      operator: Exists
      effect: NoSchedule
"#,
        namespace = olm_e2e::dev_env::own_namespace_yaml(ns)
    )
}

const STAYS_ON_KWOK: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: no-toleration
  namespace: default
spec:
  containers:
  - name: c
    image: example.invalid/cannot-exist:v1
"#;

#[test]
fn a_real_pod_runs_on_the_real_node() {
    let Some(mut env) = olm_e2e::dev_env::real_node_environment("real_node") else { return };
    let total = Instant::now();

    let status = env.olm(&["dev", "status"]);
    let status_text = text(&status);
    for needed in ["containerd", "kubelet", "kube-proxy", "coredns", "node olm-dev-real-node (real): Ready"] {
        assert!(status_text.contains(needed), "olm dev status shows {needed}:\n{status_text}");
    }
    let nodes = kubectl_ok(&env, &["get", "nodes", "-o", "wide"], None);
    eprintln!("{nodes}");
    assert!(nodes.lines().any(|l| l.starts_with("olm-dev-real-node") && l.contains(" Ready ") && l.contains("containerd://")), "{nodes}");

    let registry = format!("127.0.0.1:{}", env.base + 500);
    let work = tempfile::tempdir().expect("work directory");
    let image = build_and_push_server(work.path(), &registry);
    kubectl_ok(&env, &["apply", "-f", "-"], Some(&deployment(&image)));
    kubectl_ok(&env, &["apply", "-f", "-"], Some(STAYS_ON_KWOK));

    let started = Instant::now();
    let pod = wait_for_on(&env, "the hello-real pod to be Running and Ready", Duration::from_secs(180), || {
        let out = kubectl(
            &env,
            &["get", "pods", "-n", "default", "-l", "app=hello-real", "-o",
              "jsonpath={range .items[*]}{.metadata.name} {.status.phase} {.spec.nodeName} {.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}"],
            None,
        );
        let listing = text(&out);
        listing
            .lines()
            .find(|l| l.ends_with(" Running olm-dev-real-node True"))
            .map(|l| l.split(' ').next().unwrap_or_default().to_owned())
            .ok_or(listing)
    });
    eprintln!("pod {pod} Running and Ready on the real node {:?} after the Deployment was applied", started.elapsed());
    let wide = kubectl_ok(&env, &["get", "pod", "-n", "default", &pod, "-o", "wide"], None);
    eprintln!("{wide}");
    assert!(wide.contains("olm-dev-real-node") && wide.contains("10.88."), "{wide}");
    let logs = kubectl_ok(&env, &["logs", "-n", "default", &pod], None);
    assert!(logs.contains("hello-real listening on :8080"), "kubectl logs reaches the kubelet: {logs}");

    // A small operator (the same server) from a bundle image, through a Subscription whose
    // config sends it to the real node: its pod really runs, and the CSV Succeeds on its
    // readiness.
    let operator_ns = "hello-operator";
    let catalog = push_hello_operator_catalog(work.path(), &registry, &image);
    kubectl_ok(&env, &["apply", "-f", "-"], Some(&hello_subscription(operator_ns, &catalog)));
    let started = Instant::now();
    wait_for_on(&env, "CSV hello-real.v0.1.0 Succeeded", Duration::from_secs(180), || {
        let phase = kubectl_ok(&env, &["get", "csv", "hello-real.v0.1.0", "-n", operator_ns, "--ignore-not-found", "-o", "jsonpath={.status.phase}"], None);
        if phase == "Succeeded" { Ok(()) } else { Err(format!("phase {phase:?}")) }
    });
    eprintln!("operator hello-real.v0.1.0 Succeeded {:?} after its Subscription", started.elapsed());
    let operator_pods = kubectl_ok(
        &env,
        &["get", "pods", "-n", operator_ns, "-l", "app=hello-operator", "-o",
          "jsonpath={range .items[*]}{.spec.nodeName} {.status.phase} {.status.conditions[?(@.type==\"Ready\")].status} {.spec.containers[0].image}{\"\\n\"}{end}"],
        None,
    );
    assert_eq!(operator_pods.trim(), format!("olm-dev-real-node Running True {image}"), "the operator's pod runs for real");
    let lookups = kubectl_ok(&env, &["get", "installplans", "-n", operator_ns, "-o", "jsonpath={.items[*].status.bundleLookups[*].path}"], None);
    assert!(lookups.contains(&format!("{registry}/e2e/hello-real-bundle@sha256:")), "installed from its bundle image: {lookups}");

    let kwok_node = wait_for_on(&env, "the pod without toleration to be scheduled", Duration::from_secs(60), || {
        let node = kubectl_ok(&env, &["get", "pod", "-n", "default", "no-toleration", "-o", "jsonpath={.spec.nodeName}"], None);
        if node.is_empty() { Err("not scheduled yet".to_owned()) } else { Ok(node) }
    });
    assert_eq!(kwok_node, "kwok-node-0", "a pod that does not opt in stays on the kwok node");

    let pids = env.recorded_pids();
    let node_pids: Vec<(String, u32)> = pids
        .into_iter()
        .filter(|(name, _)| ["containerd.pid", "kubelet.pid", "kube-proxy.pid", "coredns.pid"].contains(&name.as_str()))
        .collect();
    assert_eq!(node_pids.len(), 4, "containerd, kubelet, kube-proxy and CoreDNS are recorded: {node_pids:?}");
    let bridge = format!("olm{}", env.base);
    let state_dir = env.state_dir().to_path_buf();

    let down = env.down();
    assert!(down.status.success(), "olm dev down --purge: {}", text(&down));
    for (name, pid) in &node_pids {
        assert!(!process_alive(*pid), "{name} (pid {pid}) still runs after olm dev down --purge");
    }
    let link = Command::new("ip").args(["link", "show", &bridge]).output().expect("ip runs");
    assert!(!link.status.success(), "bridge {bridge} is gone: {}", text(&link));
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let state = state_dir.display().to_string();
    assert!(!mounts.contains(&state), "no mount under {state} is left:\n{mounts}");
    let shims = Command::new("pgrep").args(["-f", &format!("containerd-shim.*{state}")]).output().expect("pgrep runs");
    assert!(String::from_utf8_lossy(&shims.stdout).trim().is_empty(), "no containerd shim of the environment is left");
    let nat = Command::new("iptables-save").args(["-t", "nat"]).output().expect("iptables-save runs");
    let cni_network = format!("name: \\\"olm-dev-{}\\\"", env.base);
    assert!(!String::from_utf8_lossy(&nat.stdout).contains(&cni_network), "no NAT rule of CNI network olm-dev-{} is left", env.base);
    let kubelet_elsewhere = Command::new("pgrep").args(["-x", "kubelet"]).output().is_ok_and(|o| o.status.success());
    if !kubelet_elsewhere {
        let filter = Command::new("iptables-save").output().expect("iptables-save runs");
        let rules = String::from_utf8_lossy(&filter.stdout);
        assert!(!rules.contains("KUBE-"), "kubelet's and kube-proxy's chains are gone:\n{rules}");
    }
    eprintln!("real node test: {:?} in all", total.elapsed());
}
