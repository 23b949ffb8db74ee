//! Exposure through admission webhooks and APIServices: serving certificates, the Secret,
//! Service and RBAC behind them, the configurations, adoption and rotation.

use super::*;

#[test]
fn generated_certificates_name_the_service_and_round_trip_through_the_secret() {
    let csv = etcd();
    let cert = crate::csv::certs::generate("etcd-operator-service", NS, now()).expect("certificate");
    assert!(cert.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"), "{}", cert.ca_pem);
    assert!(cert.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
    assert!(cert.key_pem.contains("PRIVATE KEY"));
    let other = crate::csv::certs::generate("etcd-operator-service", NS, now()).expect("certificate");
    assert_ne!(cert.ca_hash(), other.ca_hash(), "fresh keys every time");

    let secret = crate::csv::certs::render_secret(&csv, "etcd-operator", &cert);
    assert_eq!(secret.metadata.name.as_deref(), Some("etcd-operator-service-cert"));
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    let keys_present: Vec<&String> = secret.data.as_ref().map(|d| d.keys().collect()).unwrap_or_default();
    assert_eq!(keys_present, ["olmCAKey", "tls.crt", "tls.key"]);
    let stored = crate::csv::certs::from_secret(&secret).expect("complete secret");
    assert_eq!((stored.ca_pem.as_str(), stored.fresh), (cert.ca_pem.as_str(), false));

    // Rotation: missing, never stamped, or past certsRotateAt.
    let rotate = crate::csv::certs::rotate_at(now());
    assert_eq!(rotate.duration_since(now()), SignedDuration::from_hours(729 * 24));
    assert!(crate::csv::certs::needs_rotation(None, Some(rotate), now()));
    assert!(crate::csv::certs::needs_rotation(Some(&stored), None, now()));
    assert!(!crate::csv::certs::needs_rotation(Some(&stored), Some(rotate), now()));
    assert!(crate::csv::certs::needs_rotation(Some(&stored), Some(rotate), rotate));

    // Usable: valid now, for the Service's host, and not about to expire; a Secret someone
    // overwrote (another host, garbage) or an expired pair is not.
    let usable = |cert: &crate::csv::certs::ServingCert, service: &str, at: Timestamp| crate::csv::certs::usable(cert, service, NS, at);
    assert!(usable(&stored, "etcd-operator-service", now()));
    assert!(!usable(&stored, "other-service", now()), "issued for another host");
    assert!(!usable(&stored, "etcd-operator-service", now() + SignedDuration::from_hours(730 * 24)), "expired");
    assert!(!usable(&stored, "etcd-operator-service", now() - SignedDuration::from_hours(72)), "not valid yet");
    let garbage = crate::csv::certs::ServingCert { ca_pem: "not a certificate".into(), ..stored.clone() };
    assert!(!usable(&garbage, "etcd-operator-service", now()));
}

#[test]
fn install_ready_exposes_apiservices_and_webhooks_with_the_generated_ca() {
    let world = exposed_world((CsvPhase::InstallReady, CsvReason::AllRequirementsMet));
    let ca = world.serving_certs["etcd-operator"].ca_pem.clone();
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Installing, CsvReason::InstallSucceeded));
    let status = decision.status.as_ref().expect("status");
    assert_eq!(status.certs_last_updated, Some(Time(now())));
    assert_eq!(status.certs_rotate_at, Some(Time(crate::csv::certs::rotate_at(now()))));

    let kinds: Vec<&str> = decision
        .actions
        .iter()
        .map(|a| match a {
            CsvAction::ApplySecret(_) => "Secret",
            CsvAction::ApplyService(_) => "Service",
            CsvAction::ApplyDeployment(_) => "Deployment",
            CsvAction::ApplyApiService(_) => "APIService",
            CsvAction::ApplyWebhook { .. } => "Webhook",
            _ => "other",
        })
        .filter(|k| *k != "other")
        .collect();
    assert_eq!(kinds, ["Secret", "Service", "Deployment", "APIService", "Webhook", "Webhook"], "apply order");

    for action in &decision.actions {
        match action {
            CsvAction::ApplyService(service) => {
                assert_eq!(service.metadata.name.as_deref(), Some("etcd-operator-service"));
                let ports = service.spec.as_ref().and_then(|s| s.ports.clone()).unwrap_or_default();
                let pairs: Vec<(i32, serde_json::Value)> = ports
                    .iter()
                    .map(|p| (p.port, serde_json::to_value(&p.target_port).expect("json")))
                    .collect();
                assert_eq!(pairs, [(443, serde_json::json!(8443)), (9443, serde_json::json!(9443))]);
                let selector = service.spec.as_ref().and_then(|s| s.selector.clone()).unwrap_or_default();
                assert_eq!(selector.get("name").map(String::as_str), Some("etcd-operator-alm-owned"));
            }
            CsvAction::ApplyDeployment(deployment) => {
                let template = pod_of(deployment);
                let mounts = &template["spec"]["containers"][0]["volumeMounts"];
                let paths: Vec<&str> = mounts.as_array().into_iter().flatten().filter_map(|m| m["mountPath"].as_str()).collect();
                assert_eq!(paths, ["/apiserver.local.config/certificates", "/tmp/k8s-webhook-server/serving-certs"]);
                let volumes = &template["spec"]["volumes"];
                assert_eq!(volumes[0]["secret"]["secretName"], serde_json::json!("etcd-operator-service-cert"));
                assert_eq!(volumes[0]["secret"]["items"][0], serde_json::json!({"key": "tls.crt", "path": "apiserver.crt"}));
                assert_eq!(volumes[1]["secret"]["items"][1], serde_json::json!({"key": "tls.key", "path": "tls.key"}));
                assert!(template["metadata"]["annotations"]["olmcahash"].is_string());
            }
            CsvAction::ApplyApiService(api) => {
                assert_eq!(api.metadata.name.as_deref(), Some("v1.example.com"));
                assert_eq!(api.labels().get(keys::OWNER_LABEL).map(String::as_str), Some("etcdoperator.v0.9.4"));
                let spec = api.spec.as_ref().expect("spec");
                assert_eq!(spec.ca_bundle.as_ref().map(|b| b.0.clone()), Some(ca.as_bytes().to_vec()));
                assert_eq!((spec.group_priority_minimum, spec.version_priority), (2000, 15));
                let service = spec.service.as_ref().expect("service");
                assert_eq!((service.name.as_deref(), service.namespace.as_deref(), service.port), (Some("etcd-operator-service"), Some(NS), Some(443)));
            }
            CsvAction::ApplyWebhook { existing, config } => {
                assert_eq!(existing, &None, "nothing to update yet");
                let value = match config.as_ref() {
                    crate::csv::api_registration::WebhookConfig::Validating(c) => serde_json::to_value(c),
                    crate::csv::api_registration::WebhookConfig::Mutating(c) => serde_json::to_value(c),
                }
                .expect("json");
                let generate_name = config.generate_name();
                let name = value["metadata"]["name"].as_str().unwrap_or_default().to_owned();
                assert!(name.starts_with(&format!("{generate_name}-")) && name.len() == generate_name.len() + 11, "{name}");
                assert_eq!(value["metadata"].get("generateName"), None, "a fixed name keeps creation idempotent");
                assert_eq!(value["metadata"]["labels"][keys::OWNER_KIND_LABEL], serde_json::json!("ClusterServiceVersion"));
                let hook = &value["webhooks"][0];
                assert_eq!(hook["clientConfig"]["service"]["name"], serde_json::json!("etcd-operator-service"));
                assert_eq!(hook["clientConfig"]["service"]["port"], serde_json::json!(9443));
                let expected_path = if generate_name.starts_with('v') { "/validate" } else { "/mutate" };
                assert_eq!(hook["clientConfig"]["service"]["path"], serde_json::json!(expected_path));
                assert_eq!(hook["namespaceSelector"], serde_json::json!({"matchLabels": {"olm.operatorgroup.uid/uid-og": ""}}));
                use base64::Engine as _;
                let bundle = base64::engine::general_purpose::STANDARD.encode(ca.as_bytes());
                assert_eq!(hook["clientConfig"]["caBundle"], serde_json::json!(bundle));
            }
            _ => {}
        }
    }
}

#[test]
fn an_all_namespaces_operator_webhook_selects_every_namespace() {
    let og = group("og", &[""]);
    assert_eq!(crate::csv::api_registration::namespace_selector(&og), None);
}

/// As upstream: a group with a namespace selector scopes its operators' webhooks with that
/// selector, as it is.
#[test]
fn a_selector_group_scopes_webhooks_with_its_selector() {
    let mut og = group("og", &[""]);
    og.spec.target_namespaces = None;
    let selector = k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
        match_labels: Some([("foo".to_owned(), "bar".to_owned())].into()),
        match_expressions: None,
    };
    og.spec.selector = Some(selector.clone());
    assert_eq!(crate::csv::api_registration::namespace_selector(&og), Some(selector));
}

#[test]
fn installing_waits_for_the_apiservice_and_reapplies_what_is_missing() {
    // Everything applied, APIService not Available yet: keep waiting.
    let waiting = with_exposure_installed(exposed_world((CsvPhase::Installing, CsvReason::InstallSucceeded)), false);
    let decision = waiting.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Installing, CsvReason::InstallWaiting));
    assert!(
        decision.status.as_ref().and_then(|s| s.message.as_deref()).unwrap_or_default().contains("APIService v1.example.com"),
        "{:?}",
        decision.status
    );

    // Available: Succeeded, with the ordinary resync (the exposure objects are watched).
    let ready = with_exposure_installed(exposed_world((CsvPhase::Installing, CsvReason::InstallSucceeded)), true);
    let decision = ready.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Succeeded, CsvReason::InstallSucceeded));
    assert_eq!(decision.requeue_after, Some(crate::csv::decide::REQUEUE_RESYNC));

    // A webhook configuration deleted by hand: back to InstallReady, which re-creates it.
    let mut lost = with_exposure_installed(exposed_world((CsvPhase::Installing, CsvReason::InstallSucceeded)), true);
    lost.webhooks.remove("mbackup.example.com");
    assert_eq!(phase_reason(&lost.decide()), (CsvPhase::InstallReady, CsvReason::InstallWaiting));

    // An existing configuration is updated in place, by its generated name.
    let mut again = with_exposure_installed(exposed_world((CsvPhase::InstallReady, CsvReason::InstallWaiting)), true);
    again.webhooks.remove("mbackup.example.com");
    let existing: Vec<Option<String>> = again
        .decide()
        .actions
        .iter()
        .filter_map(|a| match a {
            CsvAction::ApplyWebhook { existing, .. } => Some(existing.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(existing, [Some("vbackup.example.com-abcde".to_owned()), None]);
}

#[test]
fn certificates_are_rotated_before_they_expire() {
    let mut world = with_exposure_installed(exposed_world((CsvPhase::Succeeded, CsvReason::InstallSucceeded)), true);
    if let Some(status) = world.csv.status.as_mut() {
        status.certs_rotate_at = Some(Time(now() + SignedDuration::from_hours(1)));
    }
    assert_eq!(world.decide().status.as_ref().and_then(|s| s.phase.clone()), Some(CsvPhase::Succeeded));
    if let Some(status) = world.csv.status.as_mut() {
        status.certs_rotate_at = Some(Time(now() - SignedDuration::from_secs(1)));
    }
    assert_eq!(phase_reason(&world.decide()), (CsvPhase::InstallReady, CsvReason::NeedsCertRotation));
    // Not due by the status, but the stored pair could not serve (observe made fresh ones).
    if let Some(status) = world.csv.status.as_mut() {
        status.certs_rotate_at = Some(Time(now() + SignedDuration::from_hours(1)));
    }
    for cert in world.serving_certs.values_mut() {
        cert.fresh = true;
    }
    assert_eq!(phase_reason(&world.decide()), (CsvPhase::InstallReady, CsvReason::NeedsCertRotation));
}

#[test]
fn a_webhook_without_a_listed_deployment_is_an_invalid_strategy() {
    let mut world = exposed_world((CsvPhase::InstallReady, CsvReason::AllRequirementsMet));
    let mut value = serde_json::to_value(&world.csv).expect("json");
    value["spec"]["webhookdefinitions"][0]["deploymentName"] = serde_json::json!("nope");
    world.csv = serde_json::from_value(value).expect("csv");
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Failed, CsvReason::InvalidInstallStrategy));
    let message = decision.status.as_ref().and_then(|s| s.message.clone()).unwrap_or_default();
    assert!(message.contains("spec.webhookdefinitions[0]") && message.contains("\"nope\""), "{message}");
}

#[test]
fn a_serving_deployment_gets_secret_access_and_delegated_auth_rbac() {
    let world = exposed_world((CsvPhase::InstallReady, CsvReason::AllRequirementsMet));
    let decision = world.decide();
    let role = decision.actions.iter().find_map(|a| match a {
        CsvAction::ApplyRole(r) => Some(r),
        _ => None,
    });
    let role = role.expect("a Role for the certificate Secret");
    assert_eq!(role.metadata.name.as_deref(), Some("etcd-operator-service-cert"));
    let rules = role.rules.clone().unwrap_or_default();
    assert_eq!(rules[0].resource_names, Some(vec!["etcd-operator-service-cert".to_owned()]));
    let bindings: Vec<(Option<String>, String, String)> = decision
        .actions
        .iter()
        .filter_map(|a| match a {
            CsvAction::ApplyRoleBinding(b) => Some((b.metadata.namespace.clone(), b.name_any(), b.role_ref.name.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        bindings,
        [
            (Some(NS.to_owned()), "etcd-operator-service-cert".to_owned(), "etcd-operator-service-cert".to_owned()),
            (
                Some("kube-system".to_owned()),
                "etcd-operator-service-auth-reader".to_owned(),
                "extension-apiserver-authentication-reader".to_owned()
            ),
        ]
    );
    let delegator = decision.actions.iter().find_map(|a| match a {
        CsvAction::ApplyClusterRoleBinding(b) => Some(b),
        _ => None,
    });
    let delegator = delegator.expect("auth-delegator binding");
    assert_eq!(delegator.name_any(), "etcd-operator-service-system:auth-delegator");
    assert_eq!(delegator.role_ref.name, "system:auth-delegator");
    let subject = &delegator.subjects.as_deref().unwrap_or_default()[0];
    assert_eq!((subject.name.as_str(), subject.namespace.as_deref()), ("etcd-operator", Some(NS)));
    assert!(delegator.labels().contains_key(keys::OWNER_LABEL), "deleted by owner labels with the CSV");
}

#[test]
fn configurations_of_removed_webhook_descriptions_are_deleted() {
    let mut world = with_exposure_installed(exposed_world((CsvPhase::InstallReady, CsvReason::InstallWaiting)), true);
    world.webhooks.insert(
        "gone.example.com".to_owned(),
        crate::csv::decide::ExistingWebhook {
            kind: "ValidatingWebhookConfiguration".into(),
            name: "gone.example.com-xyz".into(),
            ca_bundle: None,
        },
    );
    let deleted: Vec<CsvAction> = world
        .decide()
        .actions
        .into_iter()
        .filter(|a| matches!(a, CsvAction::DeleteWebhook { .. }))
        .collect();
    assert_eq!(
        deleted,
        [CsvAction::DeleteWebhook {
            kind: "ValidatingWebhookConfiguration".into(),
            name: "gone.example.com-xyz".into()
        }]
    );
}

#[test]
fn webhook_descriptions_must_have_unique_names_and_leave_olm_alone() {
    let cases = [
        (
            serde_json::json!({"generateName": "vbackup.example.com"}),
            "CSV contains repeated WebhookDescription name",
        ),
        (
            serde_json::json!({"generateName": "all.example.com", "rules": [{"apiGroups": ["*"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]}),
            "webhook rules cannot include all groups",
        ),
        (
            serde_json::json!({"generateName": "olm.example.com", "rules": [{"apiGroups": ["operators.coreos.com"], "apiVersions": ["v1alpha1"], "operations": ["CREATE"], "resources": ["subscriptions"]}]}),
            "webhook rules cannot include the OLM group",
        ),
        (
            serde_json::json!({"generateName": "hooks.example.com", "rules": [{"apiGroups": ["admissionregistration.k8s.io"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["validatingwebhookconfigurations"]}]}),
            "webhook rules cannot include MutatingWebhookConfiguration or ValidatingWebhookConfiguration resources",
        ),
    ];
    for (extra, message) in cases {
        let mut world = exposed_world((CsvPhase::Pending, CsvReason::RequirementsUnknown));
        let mut value = serde_json::to_value(&world.csv).expect("json");
        let mut hook = value["spec"]["webhookdefinitions"][0].clone();
        for (k, v) in extra.as_object().expect("object") {
            hook[k] = v.clone();
        }
        value["spec"]["webhookdefinitions"].as_array_mut().expect("array").push(hook);
        world.csv = serde_json::from_value(value).expect("csv");
        let decision = world.decide();
        assert_eq!(phase_reason(&decision), (CsvPhase::Failed, CsvReason::InvalidWebhookDescription), "{message}");
        assert_eq!(decision.status.as_ref().and_then(|s| s.message.as_deref()), Some(message));
        // Stays Failed until the CSV is fixed.
        world.csv.status = decision.status.clone();
        assert_eq!(phase_reason(&world.decide()), (CsvPhase::Failed, CsvReason::InvalidWebhookDescription));
    }
}

fn api_service_owned_by(world: &mut World, owner: crate::csv::decide::OwnerLabels) {
    world.api_services.insert(
        "v1.example.com".to_owned(),
        crate::csv::decide::ExistingApiService {
            available: true,
            ca_bundle: None,
            owner,
        },
    );
}

#[test]
fn an_apiservice_of_another_csv_or_of_nobody_is_not_adopted() {
    // Not labelled by OLM at all: upstream refuses to take it over.
    let mut world = exposed_world((CsvPhase::Pending, CsvReason::RequirementsUnknown));
    api_service_owned_by(&mut world, crate::csv::decide::OwnerLabels::default());
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Failed, CsvReason::OwnerConflict));
    let message = decision.status.as_ref().and_then(|s| s.message.clone()).unwrap_or_default();
    assert!(message.starts_with("unable to adopt APIService v1.example.com: it exists without OLM owner labels"), "{message}");

    // Owned by an unrelated CSV: the message names it.
    let mut world = exposed_world((CsvPhase::Pending, CsvReason::RequirementsUnknown));
    api_service_owned_by(&mut world, csv_owner("backup-operator.v1.0.0"));
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Failed, CsvReason::OwnerConflict));
    let message = decision.status.as_ref().and_then(|s| s.message.clone()).unwrap_or_default();
    assert!(message.contains(&format!("owned by ClusterServiceVersion {NS}/backup-operator.v1.0.0")), "{message}");
    assert!(!decision.actions.iter().any(|a| matches!(a, CsvAction::ApplyApiService(_))), "never overwritten");

    // Failed with the conflict still there: stays (no reinstall loop); it is re-checked when
    // the APIService changes.
    world.csv.status = decision.status.clone();
    let again = world.decide();
    assert_eq!(phase_reason(&again), (CsvPhase::Failed, CsvReason::OwnerConflict));
    assert!(again.events.is_empty());
    assert!(!again.actions.iter().any(|a| matches!(a, CsvAction::ApplyApiService(_))));

    // The conflict is gone (the APIService was deleted): the CSV installs again.
    world.api_services.clear();
    assert_ne!(world.decide().status.and_then(|s| s.reason), Some(CsvReason::OwnerConflict));
}

#[test]
fn an_apiservice_of_the_replaced_csv_is_adopted() {
    let mut world = exposed_world((CsvPhase::Pending, CsvReason::RequirementsUnknown));
    let mut old = with_phase(etcd(), CsvPhase::Replacing, CsvReason::BeingReplaced);
    old.metadata.name = Some("etcdoperator.v0.9.2".into());
    world.csv.spec.replaces = Some("etcdoperator.v0.9.2".into());
    world.peers = vec![old];
    api_service_owned_by(&mut world, csv_owner("etcdoperator.v0.9.2"));
    // Requirements met and installing in the same pass: taken over by applying it with this
    // CSV's labels, Service and CA.
    let ca = world.serving_certs["etcd-operator"].ca_pem.clone();
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Installing, CsvReason::InstallSucceeded));
    let applied = decision.actions.iter().find_map(|a| match a {
        CsvAction::ApplyApiService(api) => Some(api),
        _ => None,
    });
    let applied = applied.expect("the APIService is applied");
    assert!(crate::metadata::owned_by(applied.labels(), &world.csv), "{:?}", applied.labels());
    let spec = applied.spec.as_ref().expect("spec");
    assert_eq!(spec.ca_bundle.as_ref().map(|b| b.0.clone()), Some(ca.into_bytes()));
    assert_eq!(spec.service.as_ref().and_then(|s| s.name.as_deref()), Some("etcd-operator-service"));

    // Still labelled for the old CSV after the install: applied again (not a conflict).
    let mut installing = with_exposure_installed(exposed_world((CsvPhase::Installing, CsvReason::InstallSucceeded)), true);
    installing.csv.spec.replaces = Some("etcdoperator.v0.9.2".into());
    installing.peers = world.peers.clone();
    if let Some(api) = installing.api_services.get_mut("v1.example.com") {
        api.owner = csv_owner("etcdoperator.v0.9.2");
    }
    assert_eq!(phase_reason(&installing.decide()), (CsvPhase::InstallReady, CsvReason::InstallWaiting));
}

#[test]
fn an_owned_apiservice_needs_its_deployment_in_the_strategy() {
    let mut world = exposed_world((CsvPhase::Pending, CsvReason::RequirementsUnknown));
    let decision = world.decide();
    let owned = decision
        .status
        .as_ref()
        .and_then(|s| s.requirement_status.as_deref().cloned())
        .unwrap_or_default()
        .into_iter()
        .find(|r| r.kind == "APIService")
        .expect("owned APIService entry");
    assert_eq!((owned.name.as_str(), owned.status), ("v1.example.com", StatusReason::DeploymentFound));
    let mut value = serde_json::to_value(&world.csv).expect("json");
    value["spec"]["apiservicedefinitions"]["owned"][0]["deploymentName"] = serde_json::json!("nope");
    world.csv = serde_json::from_value(value).expect("csv");
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Pending, CsvReason::RequirementsNotMet));
    let owned = decision.status.and_then(|s| s.requirement_status).unwrap_or_default();
    assert!(owned.iter().any(|r| r.kind == "APIService" && r.status == StatusReason::DeploymentNotFound), "{owned:?}");
}

#[test]
fn a_lost_apiservice_fails_the_succeeded_csv_then_is_reinstalled() {
    let mut world = with_exposure_installed(exposed_world((CsvPhase::Succeeded, CsvReason::InstallSucceeded)), true);
    assert_eq!(phase_reason(&world.decide()), (CsvPhase::Succeeded, CsvReason::InstallSucceeded));
    world.api_services.clear();
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Failed, CsvReason::ApiServiceResourceIssue));
    assert_eq!(decision.status.as_ref().and_then(|s| s.message.as_deref()), Some("APIService v1.example.com not found"));

    // Failed with it still missing: Pending to reinstall, with upstream's reason.
    world.csv.status = decision.status.clone();
    let decision = world.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Pending, CsvReason::ApiServiceResourcesNeedReinstall));
    world.csv.status = decision.status.clone();
    assert_eq!(phase_reason(&world.decide()), (CsvPhase::Installing, CsvReason::InstallSucceeded));

    // Taken by another operator meanwhile: stays Failed, nothing reinstalled over it.
    let mut taken = with_exposure_installed(exposed_world((CsvPhase::Succeeded, CsvReason::InstallSucceeded)), true);
    if let Some(api) = taken.api_services.get_mut("v1.example.com") {
        api.owner = csv_owner("backup-operator.v1.0.0");
    }
    let decision = taken.decide();
    assert_eq!(phase_reason(&decision), (CsvPhase::Failed, CsvReason::ApiServiceResourceIssue));
    taken.csv.status = decision.status.clone();
    let again = taken.decide();
    assert_eq!(phase_reason(&again), (CsvPhase::Failed, CsvReason::ApiServiceResourceIssue));
    assert!(!again.actions.iter().any(|a| matches!(a, CsvAction::ApplyApiService(_))));
}
