use super::*;

fn csv(modes: &[&str], extra: Value) -> Value {
    let install_modes: Vec<Value> =
        ["AllNamespaces", "OwnNamespace", "SingleNamespace", "MultiNamespace"].iter().map(|m| json!({ "type": m, "supported": modes.contains(m) })).collect();
    let mut csv = json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": { "name": "widget.v1.0.0", "annotations": { "capabilities": "Basic Install", "kubectl.kubernetes.io/last-applied-configuration": "{}" } },
        "spec": {
            "installModes": install_modes,
            "install": { "strategy": "deployment", "spec": {
                "permissions": [{ "serviceAccountName": "widget", "rules": [{ "apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"] }] }],
                "clusterPermissions": [{ "serviceAccountName": "widget", "rules": [{ "apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["*"] }] }],
                "deployments": [{ "name": "widget-operator", "label": { "app": "widget" }, "spec": {
                    "selector": { "matchLabels": { "app": "widget" } },
                    "template": { "metadata": { "labels": { "app": "widget" }, "annotations": { "own": "yes" } },
                                  "spec": { "serviceAccountName": "widget", "containers": [{ "name": "op", "image": "widget:1" }] } }
                } }]
            } }
        }
    });
    if let (Some(spec), Value::Object(extra)) = (csv["spec"].as_object_mut(), extra) {
        spec.extend(extra);
    }
    csv
}

fn bundle(csv: Value, properties: Value) -> BundleContent {
    let crd = json!({ "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": { "name": "widgets.example.com" },
                      "spec": { "group": "example.com", "names": { "kind": "Widget", "plural": "widgets" }, "scope": "Namespaced", "versions": [] },
                      "status": { "storedVersions": ["v1"] } });
    let service = json!({ "apiVersion": "v1", "kind": "Service", "metadata": { "name": "widget-metrics", "namespace": "elsewhere" }, "spec": { "ports": [{ "port": 8443 }] } });
    BundleContent {
        name: "widget.v1.0.0".into(),
        package: "widget".into(),
        bundle_path: String::new(),
        csv_json: csv.to_string(),
        objects: vec![csv.to_string(), crd.to_string(), service.to_string()],
        properties_annotation: json!({ "properties": properties }).to_string(),
    }
}

fn kinds(rendered: &Rendered) -> Vec<(String, String, Option<String>)> {
    rendered
        .objects
        .iter()
        .map(|o| {
            let text = |p: &str| o.pointer(p).and_then(Value::as_str).map(str::to_owned);
            (text("/kind").unwrap_or_default(), text("/metadata/name").unwrap_or_default(), text("/metadata/namespace"))
        })
        .collect()
}

const ALL: Target<'static> = Target { install_namespace: "widgets", config: None };

fn watching(ns: &str) -> Map<String, Value> {
    json!({ "watchNamespace": ns }).as_object().cloned().unwrap()
}

#[test]
fn all_namespaces_renders_plain_objects_in_apply_order_without_a_csv() {
    let rendered = render(&bundle(csv(&["AllNamespaces"], json!({})), json!([])), &ALL).unwrap();
    let got: Vec<String> = kinds(&rendered).into_iter().map(|(k, ..)| k).collect();
    assert_eq!(
        got,
        ["CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRole", "ClusterRoleBinding", "ClusterRoleBinding", "Service", "Deployment"],
        "namespaced permissions of an all-namespaces operator become a ClusterRole; no CSV is written"
    );
    assert_eq!(kinds(&rendered)[6], ("Service".to_owned(), "widget-metrics".to_owned(), None), "a manifest's own namespace is dropped: it goes to the install namespace");
    let crd = &rendered.objects[0];
    assert!(crd.get("status").is_none(), "a bundle's CRD status is not applied");
    let binding = &rendered.objects[4];
    assert_eq!(binding["subjects"][0], json!({ "kind": "ServiceAccount", "name": "widget", "namespace": "widgets" }));
    assert_eq!(binding["roleRef"]["name"], rendered.objects[2]["metadata"]["name"], "each binding binds its own role");
    assert_ne!(rendered.objects[2]["metadata"]["name"], rendered.objects[3]["metadata"]["name"], "two roles, two names");
    let promoted = rendered.objects[2]["rules"].as_array().unwrap();
    assert_eq!(promoted.last().unwrap()["resources"], json!(["namespaces"]), "a promoted Role may also read namespaces, as upstream's");
}

#[test]
fn the_deployment_runs_in_the_install_namespace_and_is_told_what_to_watch() {
    let rendered = render(&bundle(csv(&["AllNamespaces"], json!({})), json!([])), &ALL).unwrap();
    let deployment = rendered.objects.last().unwrap();
    assert_eq!(deployment["metadata"], json!({ "name": "widget-operator", "namespace": "widgets", "labels": { "app": "widget" } }));
    let annotations = &deployment["spec"]["template"]["metadata"]["annotations"];
    assert_eq!(annotations[TARGET_NAMESPACES_ANNOTATION], json!(""), "empty: all namespaces");
    assert_eq!(annotations[OPERATOR_NAMESPACE_ANNOTATION], json!("widgets"));
    assert_eq!(annotations["capabilities"], json!("Basic Install"), "the CSV's annotations reach the pods");
    assert_eq!(annotations["own"], json!("yes"), "the template's own annotations are kept");
    assert!(annotations.get("kubectl.kubernetes.io/last-applied-configuration").is_none());
    assert_eq!(deployment["spec"]["revisionHistoryLimit"], json!(1));
}

#[test]
fn a_watch_namespace_gets_roles_there_and_names_it_to_the_pods() {
    let config = watching("apps");
    let target = Target { install_namespace: "widgets", config: Some(&config) };
    let rendered = render(&bundle(csv(&["SingleNamespace"], json!({})), json!([])), &target).unwrap();
    let got = kinds(&rendered);
    let role = got.iter().find(|(k, ..)| k == "Role").expect("a Role");
    assert_eq!(role.2.as_deref(), Some("apps"), "permissions hold in the watched namespace");
    let binding = rendered.objects.iter().find(|o| o["kind"] == "RoleBinding").unwrap();
    assert_eq!(binding["subjects"][0]["namespace"], json!("widgets"), "for the account in the install namespace");
    assert!(got.iter().any(|(k, ..)| k == "ClusterRole"), "clusterPermissions stay cluster-wide");
    let deployment = rendered.objects.last().unwrap();
    assert_eq!(deployment["spec"]["template"]["metadata"]["annotations"][TARGET_NAMESPACES_ANNOTATION], json!("apps"));
}

#[test]
fn install_modes_decide_the_watch_namespace_and_a_refusal_says_what_to_set() {
    // (supported modes, spec.config.inline, the namespace watched or the refusal's words)
    let cases: &[(&[&str], Value, Result<Option<&str>, &str>)] = &[
        (&["AllNamespaces"], json!(null), Ok(None)),
        (&["AllNamespaces", "OwnNamespace"], json!({}), Ok(None)),
        (&["AllNamespaces", "OwnNamespace"], json!({ "watchNamespace": null }), Ok(None)),
        (&["OwnNamespace"], json!({ "watchNamespace": "widgets" }), Ok(Some("widgets"))),
        (&["SingleNamespace"], json!({ "watchNamespace": "apps" }), Ok(Some("apps"))),
        (&["AllNamespaces", "SingleNamespace"], json!({ "watchNamespace": "apps" }), Ok(Some("apps"))),
        (&["OwnNamespace"], json!(null), Err("required field \"watchNamespace\" is missing: bundle widget.v1.0.0 supports [OwnNamespace], not AllNamespaces; set spec.config.inline.watchNamespace to \"widgets\"")),
        (&["SingleNamespace"], json!({}), Err("required field \"watchNamespace\" is missing: bundle widget.v1.0.0 supports [SingleNamespace], not AllNamespaces; set spec.config.inline.watchNamespace to a namespace other than")),
        (&["AllNamespaces"], json!({ "watchNamespace": "widgets" }), Err("unknown field \"watchNamespace\": bundle widget.v1.0.0 supports only AllNamespaces; remove")),
        (&["OwnNamespace"], json!({ "watchNamespace": "apps" }), Err("invalid value \"apps\": must be \"widgets\" (the namespace where the operator is installed) because this operator only supports OwnNamespace install mode")),
        (&["SingleNamespace"], json!({ "watchNamespace": "widgets" }), Err("invalid value \"widgets\": must be different from \"widgets\" (the install namespace)")),
        (&["OwnNamespace"], json!({ "watchNamespace": "Not_A_Name" }), Err("field \"watchNamespace\" must match pattern")),
        (&["OwnNamespace"], json!({ "watchNamespace": 3 }), Err("invalid type for field \"watchNamespace\"")),
        (&["AllNamespaces"], json!({ "watchNamespaces": "apps" }), Err("unknown field \"watchNamespaces\"")),
    ];
    for (modes, inline, want) in cases {
        let config = inline.as_object().cloned();
        let target = Target { install_namespace: "widgets", config: config.as_ref() };
        let got = render(&bundle(csv(modes, json!({})), json!([])), &target);
        match (want, got) {
            (Ok(watched), Ok(rendered)) => {
                let deployment = rendered.objects.last().unwrap();
                assert_eq!(deployment["spec"]["template"]["metadata"]["annotations"][TARGET_NAMESPACES_ANNOTATION], json!(watched.unwrap_or("")), "{modes:?} {inline}");
            }
            (Err(words), Err(RenderError::InvalidConfiguration(message))) => {
                assert!(message.starts_with("invalid ClusterExtension configuration: invalid configuration: "), "{message}");
                assert!(message.contains(words), "{modes:?} {inline}: {message}");
            }
            (want, got) => panic!("{modes:?} {inline}: wanted {want:?}, got {got:?}"),
        }
    }
    let got = render(&bundle(csv(&["MultiNamespace"], json!({})), json!([])), &ALL);
    assert!(matches!(got, Err(RenderError::Unsupported(m)) if m.starts_with("unsupported bundle: bundle must support at least one of [AllNamespaces SingleNamespace OwnNamespace] install modes")));
}

#[test]
fn what_v1_does_not_install_is_refused_by_name() {
    let cases = [
        (json!({ "webhookdefinitions": [{ "type": "ValidatingAdmissionWebhook" }] }), json!([]), "unsupported bundle: webhookDefinitions are not supported: widget.v1.0.0"),
        (json!({ "apiservicedefinitions": { "owned": [{ "name": "v1.example.com" }] } }), json!([]), "unsupported bundle: apiServiceDefintions are not supported: widget.v1.0.0"),
        (json!({}), json!([{ "type": "olm.package.required", "value": { "packageName": "etcd", "versionRange": ">=0.9" } }]), "validating bundle \"widget.v1.0.0\": bundle \"widget.v1.0.0\" has a dependency declared via property \"olm.package.required\" which is currently not supported"),
        (json!({}), json!([{ "type": "olm.gvk.required", "value": { "group": "etcd.database.coreos.com", "version": "v1beta2", "kind": "EtcdCluster" } }]), "via property \"olm.gvk.required\""),
    ];
    for (extra, properties, says) in cases {
        match render(&bundle(csv(&["AllNamespaces"], extra), properties), &ALL) {
            Err(RenderError::Unsupported(message)) => {
                assert!(message.contains(says), "{message}");
                assert!(message.contains("Subscription (OLM v0)"), "says what to do instead: {message}");
            }
            other => panic!("{says}: {other:?}"),
        }
    }
}

#[test]
fn a_service_account_the_bundle_ships_is_not_generated_twice_and_default_is_never_generated() {
    let mut csv = csv(&["AllNamespaces"], json!({}));
    csv["spec"]["install"]["spec"]["permissions"][0]["serviceAccountName"] = json!("default");
    let mut b = bundle(csv, json!([]));
    b.objects.push(json!({ "apiVersion": "v1", "kind": "ServiceAccount", "metadata": { "name": "widget" } }).to_string());
    let rendered = render(&b, &ALL).unwrap();
    let accounts: Vec<_> = kinds(&rendered).into_iter().filter(|(k, ..)| k == "ServiceAccount").collect();
    assert_eq!(accounts, [("ServiceAccount".to_owned(), "widget".to_owned(), None)], "the bundle's own, once");
}

#[test]
fn a_broken_bundle_is_invalid_and_named() {
    let mut b = bundle(csv(&["AllNamespaces"], json!({})), json!([]));
    b.csv_json = "{not json".into();
    assert!(matches!(render(&b, &ALL), Err(RenderError::Invalid(m)) if m.contains("bundle widget.v1.0.0 is not valid JSON")));
    let mut b = bundle(csv(&["AllNamespaces"], json!({})), json!([]));
    b.objects.push(json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": {} }).to_string());
    assert!(matches!(render(&b, &ALL), Err(RenderError::Invalid(m)) if m.contains("(ConfigMap) of bundle widget.v1.0.0 has no metadata.name")));
}
