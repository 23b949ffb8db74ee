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
static NO_CERTS: BTreeMap<String, ServingCert> = BTreeMap::new();

fn watching(ns: &str) -> Map<String, Value> {
    json!({ "watchNamespace": ns }).as_object().cloned().unwrap()
}

#[test]
fn all_namespaces_renders_plain_objects_in_apply_order_without_a_csv() {
    let rendered = render(&bundle(csv(&["AllNamespaces"], json!({})), json!([])), &ALL, &NO_CERTS).unwrap();
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
    let rendered = render(&bundle(csv(&["AllNamespaces"], json!({})), json!([])), &ALL, &NO_CERTS).unwrap();
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
    let rendered = render(&bundle(csv(&["SingleNamespace"], json!({})), json!([])), &target, &NO_CERTS).unwrap();
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
        let got = render(&bundle(csv(modes, json!({})), json!([])), &target, &NO_CERTS);
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
    let got = render(&bundle(csv(&["MultiNamespace"], json!({})), json!([])), &ALL, &NO_CERTS);
    assert!(matches!(got, Err(RenderError::Unsupported(m)) if m.starts_with("unsupported bundle: bundle must support at least one of [AllNamespaces SingleNamespace OwnNamespace] install modes")));
}

#[test]
fn what_v1_does_not_install_is_refused_by_name() {
    let cases = [
        (json!({ "apiservicedefinitions": { "owned": [{ "name": "v1.example.com" }] } }), json!([]), "unsupported bundle: apiServiceDefintions are not supported: widget.v1.0.0"),
        (json!({}), json!([{ "type": "olm.package.required", "value": { "packageName": "etcd", "versionRange": ">=0.9" } }]), "validating bundle \"widget.v1.0.0\": bundle \"widget.v1.0.0\" has a dependency declared via property \"olm.package.required\" which is currently not supported"),
        (json!({}), json!([{ "type": "olm.gvk.required", "value": { "group": "etcd.database.coreos.com", "version": "v1beta2", "kind": "EtcdCluster" } }]), "via property \"olm.gvk.required\""),
    ];
    for (extra, properties, says) in cases {
        match render(&bundle(csv(&["AllNamespaces"], extra), properties), &ALL, &NO_CERTS) {
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
    let rendered = render(&b, &ALL, &NO_CERTS).unwrap();
    let accounts: Vec<_> = kinds(&rendered).into_iter().filter(|(k, ..)| k == "ServiceAccount").collect();
    assert_eq!(accounts, [("ServiceAccount".to_owned(), "widget".to_owned(), None)], "the bundle's own, once");
}

#[test]
fn a_broken_bundle_is_invalid_and_named() {
    let mut b = bundle(csv(&["AllNamespaces"], json!({})), json!([]));
    b.csv_json = "{not json".into();
    assert!(matches!(render(&b, &ALL, &NO_CERTS), Err(RenderError::Invalid(m)) if m.contains("bundle widget.v1.0.0 is not valid JSON")));
    let mut b = bundle(csv(&["AllNamespaces"], json!({})), json!([]));
    b.objects.push(json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": {} }).to_string());
    assert!(matches!(render(&b, &ALL, &NO_CERTS), Err(RenderError::Invalid(m)) if m.contains("(ConfigMap) of bundle widget.v1.0.0 has no metadata.name")));
}

fn with_webhooks(modes: &[&str], hooks: Value) -> BundleContent {
    let mut csv = csv(modes, json!({}));
    csv["spec"]["webhookdefinitions"] = hooks;
    bundle(csv, json!([]))
}

fn certs() -> BTreeMap<String, ServingCert> {
    let cert = ServingCert { ca_pem: "CA".into(), cert_pem: "CERT".into(), key_pem: "KEY".into(), fresh: true };
    BTreeMap::from([("widget-operator".to_owned(), cert)])
}

fn object<'a>(rendered: &'a Rendered, kind: &str) -> &'a Value {
    rendered.objects.iter().find(|o| o["kind"] == kind).unwrap_or_else(|| panic!("no {kind}"))
}

#[test]
fn admission_webhooks_are_served_with_a_certificate_and_limited_to_the_watched_namespace() {
    let hooks = json!([
        { "type": "ValidatingAdmissionWebhook", "generateName": "vwidget.example.com", "deploymentName": "widget-operator", "containerPort": 9443,
          "webhookPath": "/validate", "failurePolicy": "Fail", "sideEffects": "None", "admissionReviewVersions": ["v1"],
          "rules": [{ "operations": ["CREATE"], "apiGroups": ["example.com"], "apiVersions": ["v1"], "resources": ["widgets"] }] },
        { "type": "MutatingAdmissionWebhook", "generateName": "mwidget.example.com-", "deploymentName": "widget-operator", "containerPort": 9443,
          "targetPort": 8443, "webhookPath": "/mutate", "sideEffects": "None", "admissionReviewVersions": ["v1"], "reinvocationPolicy": "IfNeeded" }
    ]);
    let config = watching("widgets");
    let target = Target { install_namespace: "widgets", config: Some(&config) };
    let rendered = render(&with_webhooks(&["OwnNamespace"], hooks), &target, &certs()).unwrap();
    assert_eq!(certificates_needed(&with_webhooks(&["OwnNamespace"], json!([{ "deploymentName": "widget-operator" }]))).unwrap(), BTreeSet::from(["widget-operator".to_owned()]));

    let secret = rendered.objects.iter().find(|o| o["kind"] == "Secret").unwrap();
    assert_eq!(secret["metadata"], json!({ "name": "widget-operator-service-cert", "namespace": "widgets" }));
    assert_eq!(secret["data"]["tls.crt"], json!("Q0VSVA=="), "base64 of the pair");
    let service = rendered.objects.iter().find(|o| o["kind"] == "Service" && o["metadata"]["name"] == "widget-operator-service").unwrap();
    assert_eq!(service["spec"]["selector"], json!({ "app": "widget" }), "the Deployment's pods");
    assert_eq!(service["spec"]["ports"], json!([{ "name": "9443", "port": 9443, "targetPort": 9443, "protocol": "TCP" }]), "one port per container port");

    let validating = object(&rendered, "ValidatingWebhookConfiguration");
    assert_eq!(validating["metadata"]["name"], json!("vwidget.example.com"));
    let hook = &validating["webhooks"][0];
    assert_eq!(hook["clientConfig"]["service"], json!({ "namespace": "widgets", "name": "widget-operator-service", "path": "/validate", "port": 9443 }));
    assert_eq!(hook["clientConfig"]["caBundle"], json!("Q0E="), "the CA, base64");
    assert_eq!(hook["failurePolicy"], json!("Fail"));
    assert_eq!(hook["namespaceSelector"]["matchExpressions"][0]["values"], json!(["widgets"]), "only the watched namespace");
    let mutating = object(&rendered, "MutatingWebhookConfiguration");
    assert_eq!(mutating["metadata"]["name"], json!("mwidget.example.com"), "generateName's trailing dash dropped");
    assert_eq!(mutating["webhooks"][0]["reinvocationPolicy"], json!("IfNeeded"));

    let deployment = object(&rendered, "Deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    // Both certificate volumes, as upstream mounts them for a webhook: operators read either.
    let volumes: Vec<(&str, &str)> = pod["volumes"].as_array().unwrap().iter().map(|v| (v["name"].as_str().unwrap(), v["secret"]["secretName"].as_str().unwrap())).collect();
    assert_eq!(volumes, [("apiservice-cert", "widget-operator-service-cert"), ("webhook-cert", "widget-operator-service-cert")]);
    let mounts: Vec<&str> = pod["containers"][0]["volumeMounts"].as_array().unwrap().iter().map(|m| m["mountPath"].as_str().unwrap()).collect();
    assert_eq!(mounts, ["/apiserver.local.config/certificates", "/tmp/k8s-webhook-server/serving-certs"]);
    let kinds: Vec<String> = kinds(&rendered).into_iter().map(|(k, ..)| k).collect();
    let at = |kind: &str| kinds.iter().position(|k| k == kind).unwrap();
    assert!(at("Secret") < at("Deployment") && at("Deployment") < at("ValidatingWebhookConfiguration"), "certificates first, configurations last: {kinds:?}");
}

#[test]
fn a_conversion_webhook_is_set_on_its_crd_and_needs_all_namespaces_only() {
    let conversion = json!([{ "type": "ConversionWebhook", "generateName": "cwidget.example.com", "deploymentName": "widget-operator", "containerPort": 443,
                              "targetPort": 9443, "webhookPath": "/convert", "admissionReviewVersions": ["v1", "v1beta1"], "conversionCRDs": ["widgets.example.com"] }]);
    let rendered = render(&with_webhooks(&["AllNamespaces"], conversion.clone()), &ALL, &certs()).unwrap();
    let crd = object(&rendered, "CustomResourceDefinition");
    assert_eq!(crd["spec"]["conversion"]["strategy"], json!("Webhook"));
    assert_eq!(crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"], json!({ "namespace": "widgets", "name": "widget-operator-service", "path": "/convert", "port": 443 }));
    assert_eq!(crd["spec"]["conversion"]["webhook"]["conversionReviewVersions"], json!(["v1", "v1beta1"]));
    let service = rendered.objects.iter().find(|o| o["kind"] == "Service" && o["metadata"]["name"] == "widget-operator-service").unwrap();
    assert_eq!(service["spec"]["ports"][0]["targetPort"], json!(9443));

    // Upstream's checks, in its words.
    let cases = [
        (&["AllNamespaces", "OwnNamespace"][..], conversion.clone(), "conversion webhooks are only supported for bundles that only support AllNamespaces install mode"),
        (&["AllNamespaces"][..], json!([{ "type": "ValidatingAdmissionWebhook", "generateName": "v", "deploymentName": "nope" }]), "webhook of type 'ValidatingAdmissionWebhook' with name 'v' references non-existent deployment 'nope'"),
        (&["AllNamespaces"][..], json!([{ "type": "ConversionWebhook", "generateName": "c", "deploymentName": "widget-operator", "conversionCRDs": ["others.example.com"] }]), "conversion webhook 'c' references custom resource definition 'others.example.com' not owned bundle"),
    ];
    for (modes, hooks, says) in cases {
        match render(&with_webhooks(modes, hooks), &ALL, &certs()) {
            Err(RenderError::Invalid(message)) => assert!(message.contains(says) && message.starts_with("invalid bundle widget.v1.0.0: "), "{message}"),
            other => panic!("{says}: {other:?}"),
        }
    }
}
