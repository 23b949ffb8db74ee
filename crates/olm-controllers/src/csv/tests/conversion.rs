//! Conversion webhooks: the CRDs they list pointed at the operator's Service, their rules, and
//! their removal when the operator goes.

use super::*;

const ETCDCLUSTERS: &str = "etcdclusters.etcd.database.coreos.com";

/// The etcd CSV with a conversion webhook for its EtcdCluster CRD, in an all-namespaces group;
/// `only_all_namespaces` says whether its install modes allow nothing else (upstream's rule).
fn conversion_world(phase: (CsvPhase, CsvReason), only_all_namespaces: bool) -> World {
    let mut world = World::etcd_ready(Some(phase));
    let og = group("og", &[""]);
    let mut value = serde_json::to_value(&world.csv).expect("csv json");
    value["spec"]["installModes"] = serde_json::json!([
        {"type": "OwnNamespace", "supported": !only_all_namespaces},
        {"type": "SingleNamespace", "supported": false},
        {"type": "MultiNamespace", "supported": false},
        {"type": "AllNamespaces", "supported": true},
    ]);
    value["spec"]["webhookdefinitions"] = serde_json::json!([{
        "generateName": "cetcd.example.com", "type": "ConversionWebhook", "deploymentName": "etcd-operator",
        "containerPort": 9443, "webhookPath": "/convert", "admissionReviewVersions": ["v1", "v1beta1"],
        "conversionCRDs": [ETCDCLUSTERS],
    }]);
    world.csv = annotate_for(serde_json::from_value(value).expect("csv with a conversion webhook"), &og);
    world.groups = vec![og];
    let cert = crate::csv::certs::generate("etcd-operator-service", NS, now()).expect("certificate");
    world.serving_certs = BTreeMap::from([("etcd-operator".to_owned(), cert)]);
    world
}

fn crd_conversions(decision: &CsvDecision) -> Vec<(String, k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceConversion)> {
    decision
        .actions
        .iter()
        .filter_map(|a| match a {
            CsvAction::ApplyCrdConversion { crd, conversion } => Some((crd.clone(), (**conversion).clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_conversion_webhook_points_its_crds_at_the_operator_service_with_the_generated_ca() {
    let world = conversion_world((CsvPhase::InstallReady, CsvReason::AllRequirementsMet), true);
    let ca = world.serving_certs["etcd-operator"].ca_pem.clone();
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Installing, CsvReason::InstallSucceeded));
    let conversions = crd_conversions(&decision);
    assert_eq!(conversions.len(), 1, "{:?}", decision.actions);
    let (crd, conversion) = &conversions[0];
    assert_eq!(crd, ETCDCLUSTERS);
    assert_eq!(conversion.strategy, "Webhook");
    let webhook = conversion.webhook.as_ref().expect("webhook");
    assert_eq!(webhook.conversion_review_versions, ["v1", "v1beta1"]);
    let client = webhook.client_config.as_ref().expect("client config");
    assert_eq!(client.ca_bundle.as_ref().map(|b| b.0.clone()), Some(ca.into_bytes()));
    let service = client.service.as_ref().expect("service");
    assert_eq!(
        (service.namespace.as_str(), service.name.as_str(), service.path.as_deref(), service.port),
        (NS, "etcd-operator-service", Some("/convert"), Some(9443))
    );
    // The serving Deployment mounts the pair and its Service exposes the webhook port.
    let service = decision.actions.iter().find_map(|a| match a {
        CsvAction::ApplyService(s) => Some(s),
        _ => None,
    });
    let ports: Vec<i32> = service.and_then(|s| s.spec.as_ref()).and_then(|s| s.ports.clone()).unwrap_or_default().iter().map(|p| p.port).collect();
    assert_eq!(ports, [9443]);
    let mounted = decision.actions.iter().any(|a| match a {
        CsvAction::ApplyDeployment(d) => d
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .is_some_and(|p| p.containers[0].volume_mounts.iter().flatten().any(|m| m.mount_path == crate::csv::certs::WEBHOOK_CERT_DIR)),
        _ => false,
    });
    assert!(mounted, "the webhook certificate is mounted into the serving Deployment");
    // No admission configuration is made for a conversion webhook.
    assert!(!decision.actions.iter().any(|a| matches!(a, CsvAction::ApplyWebhook { .. })));
}

#[test]
fn a_crd_whose_conversion_drifted_is_configured_again() {
    let mut world = conversion_world((CsvPhase::Installing, CsvReason::InstallSucceeded), true);
    for cert in world.serving_certs.values_mut() {
        cert.fresh = false;
    }
    let mut world = world.with_installed_deployments();
    // Not configured (strategy None): back to InstallReady, which applies it.
    world.crds.get_mut(ETCDCLUSTERS).expect("crd").conversion = Some(Default::default());
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::InstallReady, CsvReason::InstallWaiting));
    let message = decision.status.as_ref().and_then(|s| s.message.clone()).unwrap_or_default();
    assert!(message.contains(ETCDCLUSTERS), "{message}");

    // Configured as rendered (the API server defaults nothing we set): Succeeded.
    let hook = world.csv.spec.webhooks()[0].clone();
    let wanted = crate::csv::api_registration::render_conversion(&world.csv, &hook, &world.serving_certs["etcd-operator"]);
    world.crds.get_mut(ETCDCLUSTERS).expect("crd").conversion = Some(wanted.clone());
    assert_eq!(phase_reason(&world.decide()), (CsvPhase::Succeeded, CsvReason::InstallSucceeded));

    // A stale CA (certificates rotated, CRD not updated yet) counts as drift.
    let mut stale = wanted;
    if let Some(client) = stale.webhook.as_mut().and_then(|w| w.client_config.as_mut()) {
        client.ca_bundle = Some(k8s_openapi::ByteString(b"old".to_vec()));
    }
    world.crds.get_mut(ETCDCLUSTERS).expect("crd").conversion = Some(stale);
    assert_eq!(phase_reason(&world.decide()), (CsvPhase::InstallReady, CsvReason::InstallWaiting));
}

#[test]
fn a_conversion_webhook_needs_an_operator_that_supports_only_all_namespaces() {
    let world = conversion_world((CsvPhase::InstallReady, CsvReason::AllRequirementsMet), false);
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Failed, CsvReason::InstallComponentFailed));
    assert_eq!(
        decision.status.as_ref().and_then(|s| s.message.as_deref()),
        Some("install strategy failed: unable to manage conversion webhook: CSVs with conversion webhooks must support only AllNamespaces")
    );
    assert!(crd_conversions(&decision).is_empty(), "nothing is configured");
    assert!(!decision.actions.iter().any(|a| matches!(a, CsvAction::ApplyDeployment(_))), "no install");

    // It stays Failed (no reinstall loop) until the CSV or the CRD changes.
    let mut failed = conversion_world((CsvPhase::InstallReady, CsvReason::AllRequirementsMet), false);
    failed.csv.status = decision.status.clone();
    if let Some(status) = failed.csv.status.as_mut() {
        status.last_transition_time = Some(Time(now() - SignedDuration::from_secs(3600)));
    }
    let again = failed.decide();
    assert_eq!(phase_reason(&again), (CsvPhase::Failed, CsvReason::InstallComponentFailed));
    assert!(again.events.is_empty());
}

#[test]
fn a_conversion_crd_must_be_owned_and_must_not_preserve_unknown_fields() {
    let mut world = conversion_world((CsvPhase::InstallReady, CsvReason::AllRequirementsMet), true);
    world.crds.get_mut(ETCDCLUSTERS).expect("crd").preserve_unknown_fields = true;
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Failed, CsvReason::InstallComponentFailed));
    let message = decision.status.as_ref().and_then(|s| s.message.clone()).unwrap_or_default();
    assert!(message.contains("PreserveUnknownFields must be false") && message.contains(ETCDCLUSTERS), "{message}");

    let mut world = conversion_world((CsvPhase::InstallReady, CsvReason::AllRequirementsMet), true);
    let mut value = serde_json::to_value(&world.csv).expect("json");
    value["spec"]["webhookdefinitions"][0]["conversionCRDs"] = serde_json::json!(["things.example.com"]);
    world.csv = serde_json::from_value(value).expect("csv");
    let decision = world.decide();
    let message = decision.status.as_ref().and_then(|s| s.message.clone()).unwrap_or_default();
    assert!(message.contains("does not own CRD things.example.com"), "{message}");

    let mut value = serde_json::to_value(&world.csv).expect("json");
    value["spec"]["webhookdefinitions"][0]["conversionCRDs"] = serde_json::json!([]);
    world.csv = serde_json::from_value(value).expect("csv");
    let message = world.decide().status.and_then(|s| s.message).unwrap_or_default();
    assert!(message.contains("conversion webhook must have at least one CRD specified"), "{message}");
}

#[test]
fn deleting_a_csv_that_nothing_replaces_removes_its_conversion_webhook_from_the_crds() {
    let mut world = conversion_world((CsvPhase::Succeeded, CsvReason::InstallSucceeded), true);
    world.csv.metadata.deletion_timestamp = Some(Time(now()));
    let resets: Vec<CsvAction> = world
        .decide()
        .actions
        .into_iter()
        .filter(|a| matches!(a, CsvAction::ResetCrdConversion { .. } | CsvAction::RemoveFinalizer { .. }))
        .collect();
    assert_eq!(
        resets,
        [CsvAction::ResetCrdConversion { crd: ETCDCLUSTERS.to_owned() }, CsvAction::RemoveFinalizer { index: 0 }],
        "reset before the finalizer goes"
    );

    // Being replaced by a newer version: the CRD keeps its webhook (the new operator serves it).
    let mut next = world.csv.clone();
    next.metadata.name = Some("etcdoperator.v0.9.5".into());
    next.metadata.deletion_timestamp = None;
    next.spec.replaces = Some(world.csv.name_any());
    world.peers = vec![next];
    assert!(!world.decide().actions.iter().any(|a| matches!(a, CsvAction::ResetCrdConversion { .. })));
}

#[test]
fn the_cached_crd_keeps_its_labels_but_not_the_installed_alongside_annotations() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let mut crd = CustomResourceDefinition::default();
    crd.metadata.annotations = Some(
        [
            ("operatorframework.io/installed-alongside-4f5029d97012e166".to_owned(), "ns/test-csv".to_owned()),
            ("app.kubernetes.io/note".to_owned(), "kept".to_owned()),
        ]
        .into(),
    );
    crd.metadata.labels = Some([("operators.coreos.com/etcd.ns".to_owned(), String::new())].into());
    crate::csv::reconcile::trim_cached_crd(&mut crd);
    assert_eq!(crd.annotations().keys().collect::<Vec<_>>(), ["app.kubernetes.io/note"]);
    assert!(crd.labels().contains_key("operators.coreos.com/etcd.ns"), "the Operator controller reads the labels");
}
