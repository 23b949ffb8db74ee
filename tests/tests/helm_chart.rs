//! OLM installed with Helm: the chart `olm release` writes (`chart/`), rendered by the real
//! helm (built from the Go module proxy into olm-dev's cache). With the default values it
//! renders exactly the objects of the release's `olm.yaml` (manifests/); the values people
//! change — namespace, image, replicas, resources, leader election, the bundled catalog — change
//! what they say and nothing else; and a setting that cannot work is refused with why. (What
//! the defaults render, olm.yaml, the API server accepts: deploy.rs applies it as a dry run.)

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// The objects of a multi-document YAML text by (kind, namespace, name).
fn objects(text: &str) -> BTreeMap<(String, String, String), Value> {
    serde_saphyr::from_multiple::<Value>(text)
        .unwrap_or_else(|e| panic!("YAML: {e}\n{text}"))
        .into_iter()
        .filter(|doc| !doc.is_null())
        .map(|doc| {
            let field = |pointer: &str| doc.pointer(pointer).and_then(Value::as_str).unwrap_or_default().to_owned();
            ((field("/kind"), field("/metadata/namespace"), field("/metadata/name")), doc)
        })
        .collect()
}

fn helm(args: &[&str]) -> std::process::Output {
    let layout = olm_testkit::test_layout().expect("test layout");
    olm_dev::ensure_helm_built(&layout, &olm_dev::Progress::new()).expect("helm builds from the Go module proxy");
    Command::new(layout.helm()).args(args).env("HELM_CACHE_HOME", std::env::temp_dir().join("olm-helm-cache")).output().expect("helm runs")
}

fn render(chart: &Path, sets: &[&str]) -> BTreeMap<(String, String, String), Value> {
    let mut args = vec!["template", "olm", chart.to_str().expect("utf-8 path")];
    for set in sets {
        args.extend(["--set", set]);
    }
    let out = helm(&args);
    assert!(out.status.success(), "helm {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
    objects(&String::from_utf8_lossy(&out.stdout))
}

fn deployment<'a>(objects: &'a BTreeMap<(String, String, String), Value>, namespace: &str, name: &str) -> &'a Value {
    objects
        .get(&("Deployment".into(), namespace.into(), name.into()))
        .unwrap_or_else(|| panic!("Deployment {namespace}/{name} rendered; got {:?}", objects.keys().collect::<Vec<_>>()))
}

fn args_of(deployment: &Value) -> Vec<String> {
    deployment
        .pointer("/spec/template/spec/containers/0/args")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str().map(str::to_owned))
        .collect()
}

#[test]
fn the_chart_renders_the_release_and_the_values_people_change() {
    let release = tempfile::tempdir().expect("a directory for the release");
    let written = Command::new(olm_e2e::olm_bin()).args(["release", "--output-dir"]).arg(release.path()).output().expect("olm runs");
    assert!(written.status.success(), "olm release: {}", String::from_utf8_lossy(&written.stderr));
    let chart = release.path().join("chart");

    let lint = helm(&["lint", chart.to_str().expect("utf-8 path")]);
    assert!(lint.status.success(), "helm lint: {}{}", String::from_utf8_lossy(&lint.stdout), String::from_utf8_lossy(&lint.stderr));

    // Default values: exactly olm.yaml's objects.
    let olm_yaml = std::fs::read_to_string(release.path().join("olm.yaml")).expect("olm.yaml");
    let expected = objects(&olm_yaml);
    let rendered = render(&chart, &[]);
    assert_eq!(rendered.keys().collect::<Vec<_>>(), expected.keys().collect::<Vec<_>>(), "the same objects");
    for (key, object) in &expected {
        assert_eq!(rendered.get(key), Some(object), "{key:?} renders as olm.yaml has it");
    }
    // The CRDs are the chart's crds/, as in crds.yaml.
    let crds = std::fs::read_to_string(release.path().join("crds.yaml")).expect("crds.yaml");
    assert_eq!(std::fs::read_to_string(chart.join("crds/crds.yaml")).expect("chart crds"), crds);

    // The values people change.
    let changed = render(
        &chart,
        &[
            "namespace=olm-system",
            "operatorsNamespace=all-operators",
            "image=registry.example.com/olm@sha256:0123",
            "controllers.replicas=1",
            "controllers.leaderElection=false",
            "packageserver.resources.limits.memory=1Gi",
            "catalog.enabled=false",
        ],
    );
    assert!(changed.keys().all(|(_, ns, _)| ns != "olm" && ns != "operators"), "nothing left in olm or operators: {:?}", changed.keys());
    assert!(changed.contains_key(&("Namespace".into(), String::new(), "olm-system".into())));
    assert!(changed.contains_key(&("OperatorGroup".into(), "all-operators".into(), "global-operators".into())));
    assert!(!changed.keys().any(|(kind, _, name)| kind == "CatalogSource" || name == "olm-catalog" && kind == "Deployment"), "no bundled catalog");
    let controllers = deployment(&changed, "olm-system", "olm-operator");
    assert_eq!(controllers.pointer("/spec/replicas"), Some(&Value::from(1)));
    let args = args_of(controllers);
    assert!(!args.iter().any(|a| a.starts_with("--leader-elect") || a.starts_with("--lease-name")), "{args:?}");
    assert!(args.contains(&"--namespace=olm-system".to_owned()), "{args:?}");
    let env = controllers.pointer("/spec/template/spec/containers/0/env/1/value");
    assert_eq!(env, Some(&Value::from("olm-system")), "the global catalog namespace follows");
    let packageserver = deployment(&changed, "olm-system", "packageserver");
    assert_eq!(packageserver.pointer("/spec/template/spec/containers/0/resources/limits/memory"), Some(&Value::from("1Gi")));
    assert_eq!(packageserver.pointer("/spec/template/spec/containers/0/resources/requests/cpu"), Some(&Value::from("10m")), "the rest of the default resources stay");
    assert!(args_of(packageserver).contains(&"--serving-cert-dns-names=packageserver.olm-system.svc,packageserver.olm-system.svc.cluster.local".to_owned()));
    for (key, object) in &changed {
        if key.0 == "Deployment" {
            assert_eq!(object.pointer("/spec/template/spec/containers/0/image"), Some(&Value::from("registry.example.com/olm@sha256:0123")), "{key:?}");
        }
    }
    let api_service = changed.get(&("APIService".into(), String::new(), "v1.packages.operators.coreos.com".into())).expect("the APIService");
    assert_eq!(api_service.pointer("/spec/service/namespace"), Some(&Value::from("olm-system")));
    let binding_subjects = changed
        .iter()
        .filter(|((kind, _, _), _)| kind == "ClusterRoleBinding")
        .flat_map(|(_, b)| b.pointer("/subjects").and_then(Value::as_array).cloned().unwrap_or_default())
        .filter_map(|s| s.pointer("/namespace").and_then(Value::as_str).map(str::to_owned))
        .collect::<Vec<_>>();
    assert!(!binding_subjects.is_empty() && binding_subjects.iter().all(|ns| ns == "olm-system"), "{binding_subjects:?}");

    // Two controller replicas without leader election would both act: refused, saying why.
    let refused = helm(&["template", "olm", chart.to_str().expect("utf-8 path"), "--set", "controllers.leaderElection=false"]);
    assert!(!refused.status.success());
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(why.contains("controllers.replicas > 1 needs controllers.leaderElection"), "{why}");
}
