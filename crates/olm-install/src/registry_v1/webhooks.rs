//! A registry+v1 bundle's webhooks as OLM v1 renders them, with serving certificates from
//! olm-rs's own CA (upstream v1.11 needs cert-manager for the same): for each Deployment that
//! serves a webhook, a TLS Secret and a Service in front of it, the pair mounted into its pods;
//! a Validating- or MutatingWebhookConfiguration per admission webhook (named after its
//! `generateName`, limited to the watched namespace unless it watches all), and a CRD's
//! `spec.conversion` per conversion webhook. The bundle checks are upstream's, in its words.

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine as _;
use serde_json::{Value, json};

use super::RenderError;
use crate::serving_cert::{CertUses, ServingCert, mount_certs, secret_data, secret_name, service_name};

/// One `spec.webhookdefinitions` entry, as much as rendering needs.
pub(super) struct Webhook<'a> {
    kind: &'a str,
    generate_name: &'a str,
    deployment: &'a str,
    /// The Service port (`containerPort`, 443 when absent).
    port: i64,
    target_port: Value,
    definition: &'a Value,
}

/// The webhook definitions of `csv`.
pub(super) fn definitions(csv: &Value) -> Vec<Webhook<'_>> {
    csv.pointer("/spec/webhookdefinitions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|definition| {
            let text = |key: &str| definition.get(key).and_then(Value::as_str).unwrap_or_default();
            let port = definition.get("containerPort").and_then(Value::as_i64).unwrap_or(443);
            Webhook {
                kind: text("type"),
                generate_name: text("generateName"),
                deployment: text("deploymentName"),
                port,
                target_port: definition.get("targetPort").cloned().unwrap_or_else(|| json!(port)),
                definition,
            }
        })
        .collect()
}

/// The Deployments of `csv` that serve a webhook: each needs a serving certificate.
pub fn deployments(csv: &Value) -> BTreeSet<String> {
    definitions(csv).iter().map(|w| w.deployment.to_owned()).filter(|d| !d.is_empty()).collect()
}

/// Upstream's checks of the webhook definitions against the rest of the bundle.
pub(super) fn check(csv_name: &str, webhooks: &[Webhook<'_>], deployments: &BTreeSet<&str>, owned_crds: &BTreeSet<String>, modes: &BTreeSet<String>) -> Result<(), RenderError> {
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for hook in webhooks {
        if !deployments.contains(hook.deployment) {
            problems.push(format!("webhook of type '{}' with name '{}' references non-existent deployment '{}'", hook.kind, hook.generate_name, hook.deployment));
        }
        if !seen.insert((hook.kind, hook.generate_name)) {
            problems.push(format!("duplicate webhook '{}' of type '{}'", hook.generate_name, hook.kind));
        }
        if hook.kind == "ConversionWebhook" {
            if modes.iter().any(|m| m != "AllNamespaces") {
                problems.push(format!(
                    "bundle contains conversion webhook {:?} and supports install modes [{}] - conversion webhooks are only supported for bundles that only support AllNamespaces install mode",
                    hook.generate_name,
                    modes.iter().cloned().collect::<Vec<_>>().join(" ")
                ));
            }
            for crd in hook.definition.get("conversionCRDs").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
                if !owned_crds.contains(crd) {
                    problems.push(format!("conversion webhook '{}' references custom resource definition '{crd}' not owned bundle", hook.generate_name));
                }
            }
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(RenderError::Invalid(format!("invalid bundle {csv_name}: {}; fix the bundle", problems.join("; "))))
}

/// Render what the webhooks need into `objects` (CRDs get their conversion; Deployments their
/// certificate mounts) and return the new objects (Secrets, Services, webhook configurations).
pub(super) fn render(
    webhooks: &[Webhook<'_>],
    install: &str,
    watch: Option<&str>,
    certs: &BTreeMap<String, ServingCert>,
    crds: &mut [Value],
    deployments: &mut [Value],
) -> Result<Vec<Value>, RenderError> {
    let mut out = Vec::new();
    let serving: BTreeSet<&str> = webhooks.iter().map(|w| w.deployment).collect();
    for name in &serving {
        let cert = certs.get(*name).ok_or_else(|| RenderError::Invalid(format!("no serving certificate for deployment {name}")))?;
        let Some(deployment) = deployments.iter_mut().find(|d| d.pointer("/metadata/name").and_then(Value::as_str) == Some(name)) else { continue };
        let spec = deployment.get("spec").cloned().unwrap_or_default();
        let selector = spec.pointer("/selector/matchLabels").cloned().unwrap_or_else(|| json!({}));
        let mut typed: k8s_openapi::api::apps::v1::DeploymentSpec = serde_json::from_value(spec)
            .map_err(|err| RenderError::Invalid(format!("deployment {name} of the install strategy is not a valid Deployment spec: {err}")))?;
        mount_certs(&mut typed, name, CertUses { api_service: false, webhook: true }, cert);
        deployment["spec"] = serde_json::to_value(&typed).unwrap_or_default();
        let data: BTreeMap<String, String> = secret_data(cert).into_iter().map(|(k, v)| (k, base64::engine::general_purpose::STANDARD.encode(v.0))).collect();
        out.push(json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                        "metadata": {"name": secret_name(name), "namespace": install}, "data": data}));
        let mut ports: BTreeMap<i64, Value> = BTreeMap::new();
        for hook in webhooks.iter().filter(|w| w.deployment == *name) {
            ports.entry(hook.port).or_insert_with(|| hook.target_port.clone());
        }
        let ports: Vec<Value> = ports.into_iter().map(|(port, target)| json!({"name": port.to_string(), "port": port, "targetPort": target, "protocol": "TCP"})).collect();
        out.push(json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": service_name(name), "namespace": install},
                        "spec": {"selector": selector, "ports": ports}}));
    }
    for hook in webhooks {
        let Some(cert) = certs.get(hook.deployment) else { continue };
        let ca_bundle = base64::engine::general_purpose::STANDARD.encode(cert.ca_pem.as_bytes());
        let path = hook.definition.get("webhookPath").cloned().unwrap_or_else(|| json!("/"));
        let service = json!({"namespace": install, "name": service_name(hook.deployment), "path": path, "port": hook.port});
        let client = json!({"service": service, "caBundle": ca_bundle});
        match hook.kind {
            "ValidatingAdmissionWebhook" | "MutatingAdmissionWebhook" => {
                let mut webhook = json!({"name": hook.generate_name, "clientConfig": client});
                for key in ["rules", "failurePolicy", "matchPolicy", "objectSelector", "sideEffects", "timeoutSeconds", "admissionReviewVersions"] {
                    if let Some(value) = hook.definition.get(key).filter(|v| !v.is_null()) {
                        webhook[key] = value.clone();
                    }
                }
                if let Some(ns) = watch {
                    webhook["namespaceSelector"] = json!({"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": [ns]}]});
                }
                let kind = if hook.kind == "MutatingAdmissionWebhook" {
                    if let Some(value) = hook.definition.get("reinvocationPolicy").filter(|v| !v.is_null()) {
                        webhook["reinvocationPolicy"] = value.clone();
                    }
                    "MutatingWebhookConfiguration"
                } else {
                    "ValidatingWebhookConfiguration"
                };
                out.push(json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
                                "metadata": {"name": hook.generate_name.trim_end_matches('-')}, "webhooks": [webhook]}));
            }
            "ConversionWebhook" => {
                let versions = hook.definition.get("admissionReviewVersions").cloned().unwrap_or_else(|| json!(["v1"]));
                for name in hook.definition.get("conversionCRDs").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
                    let Some(crd) = crds.iter_mut().find(|c| c.pointer("/metadata/name").and_then(Value::as_str) == Some(name)) else { continue };
                    if crd.pointer("/spec/preserveUnknownFields").and_then(Value::as_bool) == Some(true) {
                        return Err(RenderError::Invalid(format!(
                            "custom resource definition '{name}' must have .spec.preserveUnknownFields set to false to let API Server call webhook to do the conversion"
                        )));
                    }
                    crd["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {"clientConfig": client.clone(), "conversionReviewVersions": versions}});
                }
            }
            other => {
                return Err(RenderError::Invalid(format!("webhook '{}' has type {other:?}: it must be ValidatingAdmissionWebhook, MutatingAdmissionWebhook or ConversionWebhook; fix the bundle", hook.generate_name)));
            }
        }
    }
    Ok(out)
}
