//! `olm dev up --in-cluster` (#19): OLM as cluster admins run it — the repository's Dockerfile
//! built here (buildah), pushed to the environment's registry, and manifests/ applied with only
//! the image changed, every OLM pod running on the real node. On a throwaway environment:
//!
//! - every OLM pod (2 replicas each of controllers, catalog server, package server) is Running
//!   and Ready by its probes on olm-dev-real-node, from the image built here;
//! - `kubectl get packagemanifests` is answered by the packageserver pods through the
//!   aggregation layer (the APIService's Service has pod endpoints);
//! - OLM's ServiceAccounts hold the roles of manifests/ and nothing more: no binding to
//!   cluster-admin anywhere, and without one rule of its ClusterRole an install fails, naming
//!   the permission, then succeeds once the rule is back;
//! - the etcd journey: a Manual Subscription with startingCSV 0.9.0 waits for approval, then
//!   walks to 0.9.4 Succeeded (the operator's pods on kwok); the leader controller pod is
//!   deleted while an install runs, the other replica takes the Lease and the install
//!   completes; uninstalling (Subscription and CSV deleted) keeps the CRDs and the CRs;
//! - OLM installed with its Helm chart (`olm dev up --in-cluster --helm`): with OLM's
//!   Deployments deleted, helm takes over every other object manifests/ applied and creates the
//!   Deployments again; the pods are Ready on the real node and an install succeeds.
//!
//! Needs root (buildah, debootstrap, the real node): skipped with a message otherwise.

use std::process::Output;
use std::time::{Duration, Instant};

use olm_e2e::dev_env::DevEnvironment;

const OLM_NS: &str = "olm";

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

struct Cluster<'a> {
    env: &'a DevEnvironment,
}

impl Cluster<'_> {
    fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> Output {
        olm_e2e::dev_env::kubectl(self.env, args, stdin)
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args, None);
        assert!(out.status.success(), "kubectl {}: {}", args.join(" "), text(&out));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    fn apply(&self, yaml: &str) {
        let out = self.kubectl(&["apply", "-f", "-"], Some(yaml));
        assert!(out.status.success(), "kubectl apply: {}\n{yaml}", text(&out));
    }

    /// Polls `check` every 2 s until it returns Ok, or panics with its last error.
    fn wait<T>(&self, what: &str, timeout: Duration, mut check: impl FnMut() -> Result<T, String>) -> T {
        let start = Instant::now();
        loop {
            match check() {
                Ok(value) => {
                    eprintln!("{what}: {:?}", start.elapsed());
                    return value;
                }
                Err(last) if start.elapsed() > timeout => {
                    let pods = self.kubectl(&["get", "pods", "-A", "-o", "wide"], None);
                    panic!("timed out after {timeout:?} waiting for {what}: {last}\npods:\n{}", text(&pods));
                }
                Err(_) => std::thread::sleep(Duration::from_secs(2)),
            }
        }
    }

    fn csv_phases(&self, ns: &str) -> String {
        self.ok(&["get", "csv", "-n", ns, "-o", "jsonpath={range .items[*]}{.metadata.name}={.status.phase}{\"\\n\"}{end}"])
    }

    fn wait_csv(&self, ns: &str, csv: &str, timeout: Duration) {
        let wanted = format!("{csv}=Succeeded");
        self.wait(&format!("{ns}/{csv} Succeeded"), timeout, || {
            let phases = self.csv_phases(ns);
            if phases.lines().any(|l| l == wanted) { Ok(()) } else { Err(format!("CSVs: {phases:?}")) }
        });
    }
}

fn subscription(ns: &str, approval: &str, starting_csv: Option<&str>) -> String {
    let starting = starting_csv.map(|c| format!("  startingCSV: {c}\n")).unwrap_or_default();
    format!(
        r#"{namespace}---
apiVersion: operators.coreos.com/v1alpha1
kind: Subscription
metadata:
  name: etcd
  namespace: {ns}
spec:
  name: etcd
  channel: singlenamespace-alpha
  source: community
  sourceNamespace: olm
  installPlanApproval: {approval}
{starting}"#,
        namespace = olm_e2e::dev_env::own_namespace_yaml(ns)
    )
}

/// Every object of manifests/*.yaml (not crds/).
fn manifest_objects() -> Vec<serde_json::Value> {
    let dir = olm_e2e::repo().join("manifests");
    let mut objects = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("manifests/").flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|x| x != "yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("readable");
        for doc in text.split("\n---") {
            if doc.lines().all(|l| l.trim().is_empty() || l.trim_start().starts_with('#')) {
                continue;
            }
            objects.push(serde_saphyr::from_str(doc).unwrap_or_else(|e| panic!("{}: {e}", path.display())));
        }
    }
    objects
}

/// `ServiceAccount/<ns>/<name> -> <role>` for every binding in manifests/ whose subject is one of
/// OLM's ServiceAccounts.
fn manifest_bindings() -> Vec<String> {
    let mut found = Vec::new();
    for value in manifest_objects() {
        if !matches!(value["kind"].as_str(), Some("ClusterRoleBinding" | "RoleBinding")) {
            continue;
        }
        let role = value["roleRef"]["name"].as_str().unwrap_or_default().to_owned();
        for subject in value["subjects"].as_array().into_iter().flatten() {
            if subject["kind"] == "ServiceAccount" && subject["namespace"] == OLM_NS {
                found.push(format!("ServiceAccount/{OLM_NS}/{} -> {role}", subject["name"].as_str().unwrap_or_default()));
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

/// `Kind/name <managed-by label> <Helm release annotation>` of every object of manifests/ as the
/// cluster has it.
fn release_ownership(cluster: &Cluster<'_>) -> Vec<String> {
    let mut by_namespace: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for object in manifest_objects() {
        let field = |pointer: &str| object.pointer(pointer).and_then(serde_json::Value::as_str).unwrap_or_default().to_owned();
        by_namespace.entry(field("/metadata/namespace")).or_default().push(format!("{}/{}", field("/kind"), field("/metadata/name")));
    }
    let mut lines = Vec::new();
    for (namespace, objects) in by_namespace {
        let mut args: Vec<&str> = vec!["get"];
        args.extend(objects.iter().map(String::as_str));
        if !namespace.is_empty() {
            args.extend(["-n", &namespace]);
        }
        args.extend(["-o", "json"]);
        let got: serde_json::Value = serde_json::from_str(&cluster.ok(&args)).expect("kubectl's JSON");
        // One object comes as itself, several as a List.
        let items = if got["kind"] == "List" { got["items"].as_array().cloned().unwrap_or_default() } else { vec![got] };
        for item in items {
            let field = |pointer: &str| item.pointer(pointer).and_then(serde_json::Value::as_str).unwrap_or("-").to_owned();
            lines.push(format!(
                "{}/{} {} {}",
                field("/kind"),
                field("/metadata/name"),
                field("/metadata/labels/app.kubernetes.io~1managed-by"),
                field("/metadata/annotations/meta.helm.sh~1release-name")
            ));
        }
    }
    lines
}

/// Every OLM pod is Running and Ready on the real node from the image pushed to `registry`;
/// returns the pods' names.
fn assert_olm_pods(cluster: &Cluster<'_>, registry: &str) -> Vec<String> {
    let pods = cluster.ok(&[
        "get", "pods", "-n", OLM_NS, "-o",
        "jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName} {.status.phase} {.status.conditions[?(@.type==\"Ready\")].status} {.spec.containers[0].image} restarts={.status.containerStatuses[0].restartCount}{\"\\n\"}{end}",
    ]);
    eprintln!("{pods}");
    let lines: Vec<&str> = pods.lines().collect();
    assert_eq!(lines.len(), 6, "two pods each of olm-catalog, olm-operator, packageserver:\n{pods}");
    for line in &lines {
        let words: Vec<&str> = line.split(' ').collect();
        assert_eq!(words[1..4], ["olm-dev-real-node", "Running", "True"], "{line}");
        assert!(words[4].starts_with(&format!("{registry}/olm/olm@sha256:")), "runs the image built here: {line}");
    }
    lines.iter().map(|l| l.split(' ').next().unwrap_or_default().to_owned()).collect()
}

/// The pod holding the controllers' Lease (its identity is `<pod name>-<pid>`).
fn leader(cluster: &Cluster<'_>) -> String {
    let holder = cluster.ok(&["get", "lease", "olm-operator-lock", "-n", OLM_NS, "-o", "jsonpath={.spec.holderIdentity}"]);
    holder.rsplit_once('-').map(|(pod, _)| pod.to_owned()).unwrap_or(holder)
}

#[test]
fn olm_runs_as_pods_from_its_own_image() {
    if !olm_e2e::dev_env::running_as_root() {
        eprintln!("SKIPPED in_cluster: `olm dev up --in-cluster` needs root (buildah, debootstrap, the real node); run the suite as root");
        return;
    }
    let first_base = std::env::var("OLM_TEST_PORT_BASE").ok().and_then(|b| b.parse().ok()).unwrap_or(30800);
    let mut env = DevEnvironment::new(first_base);
    let total = Instant::now();
    let up = env.olm(&["dev", "up", "--in-cluster"]);
    assert!(up.status.success(), "olm dev up --in-cluster failed:\n{}", text(&up));
    eprintln!("olm dev up --in-cluster: {:?}\n{}", total.elapsed(), String::from_utf8_lossy(&up.stdout));
    let cluster = Cluster { env: &env };
    let registry = format!("127.0.0.1:{}", env.base + 500);

    // Every OLM pod on the real node, Ready, from the image built here.
    assert_olm_pods(&cluster, &registry);
    // The Deployments' status follows the pods' within a few seconds (the controller-manager
    // writes it); what `olm dev status` said meanwhile is printed, so a flap shows.
    let status = olm_e2e::dev_env::wait_for_on(&env, "olm dev status healthy", Duration::from_secs(60), || {
        let status = env.olm(&["dev", "status"]);
        if status.status.success() { Ok(status) } else { eprintln!("{}", text(&status)); Err(text(&status)) }
    });
    assert!(text(&status).contains("deployment/olm-operator") && text(&status).contains("2/2 ready"), "{}", text(&status));

    // The PackageManifest API, served by the packageserver pods through the aggregation layer.
    let endpoints = cluster.ok(&["get", "endpointslices", "-n", OLM_NS, "-l", "kubernetes.io/service-name=packageserver", "-o", "jsonpath={.items[*].endpoints[*].addresses[*]}"]);
    assert!(endpoints.split_whitespace().count() == 2 && endpoints.split_whitespace().all(|ip| ip.starts_with("10.88.")), "the APIService's Service has the two pods behind it: {endpoints}");
    let table = cluster.ok(&["get", "packagemanifests", "-n", OLM_NS]);
    assert!(table.lines().any(|l| l.starts_with("etcd ") && l.contains("Community Operators")), "{table}");

    // Least privilege: OLM's ServiceAccounts are bound to the roles of manifests/ only.
    let bindings = cluster.ok(&[
        "get", "clusterrolebindings,rolebindings", "-A", "-o",
        "jsonpath={range .items[*]}{.roleRef.name} {range .subjects[*]}{.kind}/{.namespace}/{.name},{end}{\"\\n\"}{end}",
    ]);
    let olm_bindings: Vec<&str> = bindings.lines().filter(|l| l.contains(&format!("ServiceAccount/{OLM_NS}/"))).collect();
    assert!(!olm_bindings.is_empty(), "{bindings}");
    assert!(bindings.lines().filter(|l| l.starts_with("cluster-admin ")).all(|l| !l.contains("ServiceAccount/")), "no ServiceAccount is bound to cluster-admin:\n{bindings}");
    let mut in_cluster: Vec<String> = olm_bindings
        .iter()
        .flat_map(|l| {
            let (role, subjects) = l.split_once(' ').unwrap_or((l, ""));
            subjects
                .split(',')
                .filter(|s| s.starts_with(&format!("ServiceAccount/{OLM_NS}/")))
                .map(move |s| format!("{s} -> {role}"))
                .collect::<Vec<_>>()
        })
        .collect();
    in_cluster.sort();
    in_cluster.dedup();
    assert_eq!(in_cluster, manifest_bindings(), "OLM's ServiceAccounts are bound to exactly the roles manifests/ binds them to");
    // The etcd journey, Manual: the plan waits for approval, then 0.9.0 walks to 0.9.4.
    let journey = "olm-in-cluster-journey";
    cluster.apply(&subscription(journey, "Manual", Some("etcdoperator.v0.9.0")));
    let plan = cluster.wait("an InstallPlan awaiting approval", Duration::from_secs(120), || {
        let plans = cluster.ok(&["get", "installplans", "-n", journey, "-o", "jsonpath={range .items[*]}{.metadata.name}={.status.phase}{\"\\n\"}{end}"]);
        plans.lines().find_map(|l| l.strip_suffix("=RequiresApproval")).map(str::to_owned).ok_or(plans)
    });
    assert_eq!(cluster.csv_phases(journey), "", "nothing is installed before approval");
    // Approve each plan as it comes: 0.9.0, then each upgrade of the channel.
    let approved = Instant::now();
    cluster.wait("etcdoperator.v0.9.4 Succeeded, each plan approved", Duration::from_secs(300), || {
        let plans = cluster.ok(&["get", "installplans", "-n", journey, "-o", "jsonpath={range .items[*]}{.metadata.name}={.spec.approved}{\"\\n\"}{end}"]);
        for name in plans.lines().filter_map(|l| l.strip_suffix("=false")) {
            cluster.ok(&["patch", "installplan", name, "-n", journey, "--type=merge", "-p", r#"{"spec":{"approved":true}}"#]);
        }
        let phases = cluster.csv_phases(journey);
        if phases.trim() == "etcdoperator.v0.9.4=Succeeded" { Ok(()) } else { Err(format!("CSVs: {phases:?}")) }
    });
    eprintln!("first plan {plan}; 0.9.4 Succeeded {:?} after the first approval", approved.elapsed());
    let on_kwok = cluster.ok(&["get", "pods", "-n", journey, "-o", "jsonpath={.items[*].spec.nodeName}"]);
    assert!(!on_kwok.is_empty() && on_kwok.split_whitespace().all(|n| n == "kwok-node-0"), "the operator's pods run on kwok: {on_kwok}");

    // Leader failover: delete the leader while an install runs; the other replica finishes it.
    let first_leader = leader(&cluster);
    let failover = "olm-in-cluster-failover";
    cluster.apply(&subscription(failover, "Automatic", None));
    cluster.ok(&["delete", "pod", &first_leader, "-n", OLM_NS, "--wait=false"]);
    let deleted = Instant::now();
    // A pod deleted gracefully releases the Lease (empty holder); the other replica then takes it.
    let second_leader = cluster.wait("another replica to hold the Lease", Duration::from_secs(90), || {
        let now = leader(&cluster);
        if !now.is_empty() && now != first_leader { Ok(now) } else { Err(format!("holder {now:?}")) }
    });
    let replicas = cluster.ok(&["get", "pods", "-n", OLM_NS, "-l", "app.kubernetes.io/name=olm-operator", "-o", "name"]);
    assert!(replicas.lines().any(|p| p == format!("pod/{second_leader}")), "the new leader is a pod of olm-operator: {second_leader} in {replicas}");
    eprintln!("leader {first_leader} deleted; {second_leader} took over after {:?}", deleted.elapsed());
    cluster.wait_csv(failover, "etcdoperator.v0.9.4", Duration::from_secs(180));
    let plans = cluster.ok(&["get", "installplans", "-n", failover, "-o", "name"]);
    assert_eq!(plans.lines().count(), 1, "one InstallPlan, not one per leader: {plans}");

    // Uninstall keeps the CRDs and the CRs.
    let cr = format!(
        "apiVersion: etcd.database.coreos.com/v1beta2\nkind: EtcdCluster\nmetadata:\n  name: example\n  namespace: {journey}\nspec:\n  size: 1\n  version: 3.2.13\n"
    );
    cluster.apply(&cr);
    cluster.ok(&["delete", "subscription", "etcd", "-n", journey]);
    cluster.ok(&["delete", "csv", "etcdoperator.v0.9.4", "-n", journey]);
    cluster.wait("the operator's Deployment to go with its CSV", Duration::from_secs(60), || {
        let deployments = cluster.ok(&["get", "deployments", "-n", journey, "-o", "name"]);
        if deployments.is_empty() { Ok(()) } else { Err(deployments) }
    });
    cluster.ok(&["get", "crd", "etcdclusters.etcd.database.coreos.com"]);
    cluster.ok(&["get", "etcdcluster", "example", "-n", journey]);

    // A permission manifests/ grants, taken away: an install fails naming it; given back, it
    // succeeds. (The rule that lets the controllers create Deployments.)
    let rules = cluster.ok(&["get", "clusterrole", "olm-operator", "-o", "json"]);
    let mut role: serde_json::Value = serde_json::from_str(&rules).expect("ClusterRole JSON");
    let all_rules = role["rules"].as_array().cloned().unwrap_or_default();
    let index = all_rules
        .iter()
        .position(|r| r["apiGroups"].as_array().is_some_and(|g| g.iter().any(|g| g == "apps")) && r["resources"].as_array().is_some_and(|g| g.iter().any(|g| g == "deployments")))
        .expect("manifests/ grants the controllers Deployments");
    let removed = all_rules[index].clone();
    role["rules"].as_array_mut().expect("rules").remove(index);
    for field in ["resourceVersion", "uid", "creationTimestamp", "managedFields"] {
        role["metadata"].as_object_mut().expect("metadata").remove(field);
    }
    let without = serde_json::to_string(&role).expect("JSON");
    let out = cluster.kubectl(&["replace", "-f", "-"], Some(&without));
    assert!(out.status.success(), "{}", text(&out));
    let denied = "olm-in-cluster-denied";
    cluster.apply(&subscription(denied, "Automatic", None));
    let message = cluster.wait("the install to fail for want of the permission", Duration::from_secs(120), || {
        let messages = cluster.ok(&["get", "csv,installplans", "-n", denied, "-o", "jsonpath={range .items[*]}{.status.message}{\"\\n\"}{range .status.conditions[*]}{.message}{\"\\n\"}{end}{end}"]);
        messages.lines().find(|l| l.contains("forbidden") && l.contains("deployments")).map(str::to_owned).ok_or(messages)
    });
    eprintln!("without the rule: {message}");
    role["rules"].as_array_mut().expect("rules").insert(index, removed);
    let restored = serde_json::to_string(&role).expect("JSON");
    let out = cluster.kubectl(&["replace", "-f", "-"], Some(&restored));
    assert!(out.status.success(), "{}", text(&out));
    cluster.wait_csv(denied, "etcdoperator.v0.9.4", Duration::from_secs(240));

    // OLM from its Helm chart. Without OLM's Deployments, helm must create them; everything
    // else manifests/ applied it takes over (--take-ownership).
    let before = assert_olm_pods(&cluster, &registry);
    cluster.ok(&["delete", "deployment", "olm-catalog", "olm-operator", "packageserver", "-n", OLM_NS]);
    cluster.wait("OLM's pods to go with their Deployments", Duration::from_secs(120), || {
        let pods = cluster.ok(&["get", "pods", "-n", OLM_NS, "-o", "name"]);
        if pods.is_empty() { Ok(()) } else { Err(pods) }
    });
    let helm_up = env.olm(&["dev", "up", "--in-cluster", "--helm"]);
    assert!(helm_up.status.success(), "olm dev up --in-cluster --helm failed:\n{}", text(&helm_up));
    eprintln!("olm dev up --in-cluster --helm:\n{}", String::from_utf8_lossy(&helm_up.stdout));
    let release = cluster.ok(&["get", "secrets", "-n", OLM_NS, "-l", "owner=helm,name=olm,status=deployed", "-o", "name"]);
    assert_eq!(release.lines().count(), 1, "one deployed revision of the Helm release olm: {release:?}");
    let owned = release_ownership(&cluster);
    assert_eq!(owned.len(), manifest_objects().len(), "every object of manifests/ is there: {owned:#?}");
    for line in &owned {
        assert!(line.ends_with(" Helm olm"), "every object of OLM belongs to the Helm release olm: {line}\n{owned:#?}");
    }
    let after = assert_olm_pods(&cluster, &registry);
    assert!(after.iter().all(|pod| !before.contains(pod)), "the pods are new, from the Deployments helm created: {before:?} then {after:?}");
    let table = cluster.ok(&["get", "packagemanifests", "-n", OLM_NS]);
    assert!(table.lines().any(|l| l.starts_with("etcd ")), "{table}");
    let charted = "olm-in-cluster-helm";
    cluster.apply(&subscription(charted, "Automatic", None));
    cluster.wait_csv(charted, "etcdoperator.v0.9.4", Duration::from_secs(180));

    let down = env.down();
    assert!(down.status.success(), "olm dev down --purge: {}", text(&down));
    eprintln!("in-cluster test: {:?} in all", total.elapsed());
}
