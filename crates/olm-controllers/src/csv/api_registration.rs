//! The objects that point the API server at an operator's serving Service: the APIService of
//! an owned API, Validating/MutatingWebhookConfigurations, a CRD's conversion webhook, and the
//! RBAC that lets the Service's certificate be read; with the checks of the CSV's webhook and
//! APIService descriptions. Pure; the certificate itself comes from [`super::certs`].

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, ServiceReference as WebhookServiceReference, ValidatingWebhook,
    ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::apps::v1::DeploymentSpec;
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, ServiceReference as CrdServiceReference, WebhookClientConfig as CrdWebhookClientConfig,
    WebhookConversion,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::{
    APIService, APIServiceSpec, ServiceReference as ApiServiceReference,
};
use kube::ResourceExt;
use olm_api::keys;
use olm_api::v1::operator_group::OperatorGroup;
use olm_api::v1alpha1::cluster_service_version::{
    ApiServiceDescription, ClusterServiceVersion, InstallModeType, WebhookAdmissionType, WebhookDescription,
};
use sha2::{Digest, Sha256};


use super::certs::{ServingCert, meta, secret_name, service_name};

/// The APIService `<version>.<group>` served by the Deployment's Service.
pub fn render_api_service(
    csv: &ClusterServiceVersion,
    api: &ApiServiceDescription,
    cert: &ServingCert,
    annotations: Option<&BTreeMap<String, String>>,
) -> APIService {
    let deployment = api.deployment_name.as_deref().unwrap_or_default();
    let mut metadata = meta(csv, &api.api_service_name(), false);
    metadata.annotations = annotations.filter(|a| !a.is_empty()).cloned();
    APIService {
        metadata,
        spec: Some(APIServiceSpec {
            group: Some(api.group.clone()),
            version: Some(api.version.clone()),
            service: Some(ApiServiceReference {
                namespace: csv.namespace(),
                name: Some(service_name(deployment)),
                port: Some(443),
            }),
            ca_bundle: Some(ByteString(cert.ca_pem.as_bytes().to_vec())),
            group_priority_minimum: 2000,
            version_priority: 15,
            insecure_skip_tls_verify: None,
        }),
        status: None,
    }
}

/// The namespaces a webhook of an operator in `group` sees, as upstream's
/// `OperatorGroup.NamespaceLabelSelector` says: a group naming target namespaces selects the
/// namespaces the OperatorGroup controller labelled `olm.operatorgroup.uid/<uid>` (empty value);
/// a group with a namespace selector uses that selector as it is; a group with neither (all
/// namespaces) selects nothing, which is every namespace.
pub fn namespace_selector(group: &OperatorGroup) -> Option<LabelSelector> {
    if group.spec.target_namespaces.as_deref().is_none_or(<[String]>::is_empty) {
        return group.spec.selector.clone();
    }
    Some(LabelSelector {
        match_labels: Some([(group.namespace_label_key().unwrap_or_default(), String::new())].into()),
        match_expressions: None,
    })
}

/// A webhook configuration rendered from one description.
#[derive(Clone, Debug, PartialEq)]
pub enum WebhookConfig {
    /// `ValidatingAdmissionWebhook`.
    Validating(Box<ValidatingWebhookConfiguration>),
    /// `MutatingAdmissionWebhook`.
    Mutating(Box<MutatingWebhookConfiguration>),
}

impl WebhookConfig {
    /// The description's generateName (label `olm.webhook-description-generate-name`).
    pub fn generate_name(&self) -> &str {
        let labels = match self {
            WebhookConfig::Validating(c) => c.labels(),
            WebhookConfig::Mutating(c) => c.labels(),
        };
        labels
            .get(keys::WEBHOOK_DESCRIPTION_GENERATE_NAME_LABEL)
            .map(String::as_str)
            .unwrap_or_default()
    }

    /// The kind.
    pub fn kind(&self) -> &'static str {
        match self {
            WebhookConfig::Validating(_) => "ValidatingWebhookConfiguration",
            WebhookConfig::Mutating(_) => "MutatingWebhookConfiguration",
        }
    }
}

/// `<generateName>-<hash of the CSV's namespace and name>`, at most 253 characters.
pub fn webhook_config_name(csv: &ClusterServiceVersion, generate_name: &str) -> String {
    let owner = format!("{}/{}", csv.namespace().unwrap_or_default(), csv.name_any());
    let digest = hex::encode(Sha256::digest(owner.as_bytes()));
    let base: String = generate_name.chars().take(253 - 11).collect();
    format!("{base}-{}", &digest[..10])
}

/// The configuration for one admission webhook description (`None` for conversion webhooks,
/// which configure CRDs instead). Named by [`webhook_config_name`] and labelled with
/// the owner and the description's generateName, so the existing one is found again.
pub fn render_webhook(
    csv: &ClusterServiceVersion,
    hook: &WebhookDescription,
    cert: &ServingCert,
    namespace_selector: Option<LabelSelector>,
) -> Option<WebhookConfig> {
    let deployment = hook.deployment_name.as_deref().unwrap_or_default();
    let mut metadata = meta(csv, "", false);
    // A fixed name (upstream uses generateName) makes creation idempotent: a pass that runs
    // before the previous one's object is listed cannot create a second configuration.
    metadata.name = Some(webhook_config_name(csv, &hook.generate_name));
    metadata.generate_name = None;
    if let Some(labels) = metadata.labels.as_mut() {
        labels.insert(keys::WEBHOOK_DESCRIPTION_GENERATE_NAME_LABEL.to_owned(), hook.generate_name.clone());
    }
    let client_config = WebhookClientConfig {
        ca_bundle: Some(ByteString(cert.ca_pem.as_bytes().to_vec())),
        service: Some(WebhookServiceReference {
            namespace: csv.namespace().unwrap_or_default(),
            name: service_name(deployment),
            path: hook.webhook_path.clone(),
            port: Some(hook.port()),
        }),
        url: None,
    };
    let review_versions = hook.admission_review_versions.clone().unwrap_or_else(|| vec!["v1".to_owned()]);
    let side_effects = hook.side_effects.clone().unwrap_or_else(|| "None".to_owned());
    match hook.type_ {
        WebhookAdmissionType::ValidatingAdmissionWebhook => {
            Some(WebhookConfig::Validating(Box::new(ValidatingWebhookConfiguration {
                metadata,
                webhooks: Some(vec![ValidatingWebhook {
                    name: hook.generate_name.clone(),
                    client_config,
                    rules: hook.rules.clone(),
                    failure_policy: hook.failure_policy.clone(),
                    match_policy: hook.match_policy.clone(),
                    object_selector: hook.object_selector.clone(),
                    namespace_selector,
                    side_effects,
                    timeout_seconds: hook.timeout_seconds,
                    admission_review_versions: review_versions,
                    match_conditions: None,
                }]),
            })))
        }
        WebhookAdmissionType::MutatingAdmissionWebhook => {
            Some(WebhookConfig::Mutating(Box::new(MutatingWebhookConfiguration {
                metadata,
                webhooks: Some(vec![MutatingWebhook {
                    name: hook.generate_name.clone(),
                    client_config,
                    rules: hook.rules.clone(),
                    failure_policy: hook.failure_policy.clone(),
                    match_policy: hook.match_policy.clone(),
                    object_selector: hook.object_selector.clone(),
                    namespace_selector,
                    side_effects,
                    timeout_seconds: hook.timeout_seconds,
                    admission_review_versions: review_versions,
                    reinvocation_policy: hook.reinvocation_policy.clone(),
                    match_conditions: None,
                }]),
            })))
        }
        _ => None,
    }
}

/// The RBAC a Deployment serving with OLM certificates gets, as upstream: read access to its
/// certificate Secret, `system:auth-delegator` (delegated authentication and authorization),
/// and `extension-apiserver-authentication-reader` in kube-system. The kube-system binding and
/// the ClusterRoleBinding carry only owner labels (no cross-namespace ownerReference) and are
/// deleted by those labels with the CSV.
pub fn render_cert_rbac(
    csv: &ClusterServiceVersion,
    deployment: &str,
    spec: &DeploymentSpec,
) -> (Role, RoleBinding, ClusterRoleBinding, RoleBinding) {
    let namespace = csv.namespace().unwrap_or_default();
    let service_account = spec
        .template
        .spec
        .as_ref()
        .and_then(|p| p.service_account_name.clone())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".to_owned());
    let subjects = Some(vec![Subject {
        kind: "ServiceAccount".to_owned(),
        name: service_account,
        namespace: Some(namespace),
        api_group: None,
    }]);
    let secret = secret_name(deployment);
    let service = service_name(deployment);
    let role_ref = |kind: &str, name: &str| RoleRef {
        api_group: Some("rbac.authorization.k8s.io".to_owned()),
        kind: kind.to_owned(),
        name: name.to_owned(),
    };
    let role = Role {
        metadata: meta(csv, &secret, true),
        rules: Some(vec![PolicyRule {
            verbs: vec!["get".to_owned()],
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["secrets".to_owned()]),
            resource_names: Some(vec![secret.clone()]),
            ..Default::default()
        }]),
    };
    let binding = RoleBinding {
        metadata: meta(csv, &secret, true),
        role_ref: role_ref("Role", &secret),
        subjects: subjects.clone(),
    };
    let delegator = ClusterRoleBinding {
        metadata: meta(csv, &format!("{service}-system:auth-delegator"), false),
        role_ref: role_ref("ClusterRole", "system:auth-delegator"),
        subjects: subjects.clone(),
    };
    let mut reader_meta = meta(csv, &format!("{service}-auth-reader"), false);
    reader_meta.namespace = Some("kube-system".to_owned());
    let reader = RoleBinding {
        metadata: reader_meta,
        role_ref: role_ref("Role", "extension-apiserver-authentication-reader"),
        subjects,
    };
    (role, binding, delegator, reader)
}

/// Upstream's test for operators that may own a conversion webhook: AllNamespaces is not
/// declared unsupported and no other install mode is declared supported. (A CRD's conversion
/// is cluster-wide, so only one installation of the operator may serve it.)
pub fn supports_only_all_namespaces(csv: &ClusterServiceVersion) -> bool {
    csv.spec.install_modes().iter().all(|mode| {
        if mode.type_ == InstallModeType::AllNamespaces {
            mode.supported
        } else {
            !mode.supported
        }
    })
}

/// What makes a conversion webhook description impossible to configure, judged from the CSV
/// alone, with upstream's messages: the install-mode restriction, an empty `conversionCRDs`,
/// or a listed CRD the CSV does not own.
pub fn conversion_description_problem(csv: &ClusterServiceVersion) -> Option<String> {
    for hook in csv.spec.webhooks() {
        if hook.type_ != WebhookAdmissionType::ConversionWebhook {
            continue;
        }
        if !supports_only_all_namespaces(csv) {
            return Some(
                "unable to manage conversion webhook: CSVs with conversion webhooks must support only AllNamespaces".to_owned(),
            );
        }
        let crds = hook.conversion_crds.as_deref().unwrap_or_default();
        if crds.is_empty() {
            return Some(format!(
                "unable to manage conversion webhook: conversion webhook must have at least one CRD specified (spec.webhookdefinitions {} lists no conversionCRDs)",
                hook.generate_name
            ));
        }
        for crd in crds {
            if !csv.spec.owned_crds().iter().any(|owned| owned.name == *crd) {
                return Some(format!(
                    "csv {} does not own CRD {crd} (listed in the conversionCRDs of spec.webhookdefinitions {})",
                    csv.name_any(),
                    hook.generate_name
                ));
            }
        }
    }
    None
}

/// The `spec.conversion` a CRD listed by a conversion webhook description gets: strategy
/// Webhook, calling the Deployment's Service at `webhookPath` (default `/`) on the container
/// port, trusting the generated CA, with the description's review versions (default `v1`).
pub fn render_conversion(csv: &ClusterServiceVersion, hook: &WebhookDescription, cert: &ServingCert) -> CustomResourceConversion {
    let deployment = hook.deployment_name.as_deref().unwrap_or_default();
    CustomResourceConversion {
        strategy: "Webhook".to_owned(),
        webhook: Some(WebhookConversion {
            client_config: Some(CrdWebhookClientConfig {
                ca_bundle: Some(ByteString(cert.ca_pem.as_bytes().to_vec())),
                service: Some(CrdServiceReference {
                    namespace: csv.namespace().unwrap_or_default(),
                    name: service_name(deployment),
                    path: Some(hook.webhook_path.clone().unwrap_or_else(|| "/".to_owned())),
                    port: Some(hook.port()),
                }),
                url: None,
            }),
            conversion_review_versions: hook
                .admission_review_versions
                .clone()
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| vec!["v1".to_owned()]),
        }),
    }
}

/// Whether a CRD's `spec.conversion` is the one [`render_conversion`] produced (fields the API
/// server defaults are compared with their defaults).
pub fn conversion_matches(found: Option<&CustomResourceConversion>, want: &CustomResourceConversion) -> bool {
    let Some(found) = found else {
        return false;
    };
    let client = |c: &CustomResourceConversion| c.webhook.as_ref().and_then(|w| w.client_config.clone());
    let versions = |c: &CustomResourceConversion| c.webhook.as_ref().map(|w| w.conversion_review_versions.clone());
    let service = |c: &CustomResourceConversion| {
        client(c).and_then(|cc| cc.service).map(|s| (s.namespace, s.name, s.path, s.port.unwrap_or(443)))
    };
    found.strategy == want.strategy
        && service(found) == service(want)
        && client(found).and_then(|c| c.ca_bundle) == client(want).and_then(|c| c.ca_bundle)
        && client(found).and_then(|c| c.url).is_none()
        && versions(found) == versions(want)
}

/// Upstream's checks of the webhook descriptions (reason InvalidWebhookDescription): unique
/// generateNames, and rules that leave OLM's own API group and the webhook configuration
/// resources alone (an operator's webhook must not be able to block OLM or other webhooks).
pub fn webhook_description_problem(csv: &ClusterServiceVersion) -> Option<String> {
    let mut names = BTreeSet::new();
    for hook in csv.spec.webhooks() {
        if !names.insert(hook.generate_name.as_str()) {
            return Some("CSV contains repeated WebhookDescription name".to_owned());
        }
        for rule in hook.rules.iter().flatten() {
            let groups = rule.api_groups.as_deref().unwrap_or_default();
            if groups.iter().any(|g| g == "*") {
                return Some("webhook rules cannot include all groups".to_owned());
            }
            if groups.iter().any(|g| g == "operators.coreos.com") {
                return Some("webhook rules cannot include the OLM group".to_owned());
            }
            if groups.iter().any(|g| g == "admissionregistration.k8s.io") {
                let protected = [
                    "*",
                    "MutatingWebhookConfiguration",
                    "ValidatingWebhookConfiguration",
                    "mutatingwebhookconfigurations",
                    "validatingwebhookconfigurations",
                ];
                if rule.resources.iter().flatten().any(|r| protected.contains(&r.as_str())) {
                    return Some(
                        "webhook rules cannot include MutatingWebhookConfiguration or ValidatingWebhookConfiguration resources"
                            .to_owned(),
                    );
                }
            }
        }
    }
    None
}
