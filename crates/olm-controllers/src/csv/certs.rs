//! Owned APIServices and admission webhooks: serving certificates and the objects that expose
//! the operator (Secret, Service, APIService, Validating/MutatingWebhookConfiguration), and the
//! certificate mounts of its Deployments. Rendering is pure; [`generate`] draws fresh keys.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, ServiceReference as WebhookServiceReference, ValidatingWebhook,
    ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::apps::v1::DeploymentSpec;
use k8s_openapi::api::core::v1::{
    KeyToPath, Secret, SecretVolumeSource, Service, ServicePort, ServiceSpec, Volume, VolumeMount,
};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, ServiceReference as CrdServiceReference, WebhookClientConfig as CrdWebhookClientConfig,
    WebhookConversion,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::{SignedDuration, Timestamp, tz::TimeZone};
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

use crate::metadata::{owner_labels, owner_reference};

/// Secret key holding the CA certificate (upstream's name).
pub const CA_KEY: &str = "olmCAKey";
/// Pod-template annotation with the CA hash: pods roll when the certificates change.
pub const CA_HASH_ANNOTATION: &str = "olmcahash";
/// How long generated certificates are valid (upstream: two years).
pub const CERT_VALIDITY: Duration = Duration::from_secs(730 * 24 * 3600);
/// Certificates are rotated this long before they expire.
pub const ROTATE_BEFORE: Duration = Duration::from_secs(24 * 3600);
/// Where APIService servers read their pair (files apiserver.crt / apiserver.key).
pub const APISERVICE_CERT_DIR: &str = "/apiserver.local.config/certificates";
/// Where controller-runtime webhook servers read their pair (tls.crt / tls.key).
pub const WEBHOOK_CERT_DIR: &str = "/tmp/k8s-webhook-server/serving-certs";
const APISERVICE_VOLUME: &str = "apiservice-cert";
const WEBHOOK_VOLUME: &str = "webhook-cert";

/// What a Deployment serves, hence which certificate mounts it gets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CertUses {
    /// It backs an owned APIService.
    pub api_service: bool,
    /// It backs an admission webhook.
    pub webhook: bool,
}

/// A CA and the serving pair it signed, PEM encoded.
#[derive(Clone, PartialEq, Eq)]
pub struct ServingCert {
    /// The CA certificate (the `caBundle`).
    pub ca_pem: String,
    /// The serving certificate.
    pub cert_pem: String,
    /// The serving private key.
    pub key_pem: String,
    /// Generated in this pass (not yet stored in the Secret).
    pub fresh: bool,
}

impl std::fmt::Debug for ServingCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServingCert")
            .field("ca_hash", &self.ca_hash())
            .field("fresh", &self.fresh)
            .finish_non_exhaustive()
    }
}

impl ServingCert {
    /// A short hash of the CA certificate.
    pub fn ca_hash(&self) -> String {
        hex::encode(Sha256::digest(self.ca_pem.as_bytes()))
    }
}

/// Certificate generation failed (rcgen refused the parameters, or a host name is malformed).
#[derive(Debug, thiserror::Error)]
#[error("cannot generate the serving certificate for Service {service}: {reason}")]
pub struct CertError {
    /// The Service the certificate is for.
    pub service: String,
    /// What olm-pki said.
    pub reason: String,
}

/// The Service name for a Deployment (dots become dashes, as upstream).
pub fn service_name(deployment: &str) -> String {
    format!("{}-service", deployment.replace('.', "-"))
}

/// The Secret holding the serving pair of a Deployment's Service.
pub fn secret_name(deployment: &str) -> String {
    format!("{}-cert", service_name(deployment))
}

/// The Deployments that need serving certificates, by name.
pub fn cert_deployments(csv: &ClusterServiceVersion) -> BTreeMap<String, CertUses> {
    let mut uses: BTreeMap<String, CertUses> = BTreeMap::new();
    for api in csv.spec.owned_api_services() {
        if let Some(name) = api.deployment_name.as_deref().filter(|n| !n.is_empty()) {
            uses.entry(name.to_owned()).or_default().api_service = true;
        }
    }
    // Admission and conversion webhooks alike are served over TLS with the generated pair.
    for hook in csv.spec.webhooks() {
        if let Some(name) = hook.deployment_name.as_deref().filter(|n| !n.is_empty()) {
            uses.entry(name.to_owned()).or_default().webhook = true;
        }
    }
    uses
}

/// Problems with the APIService and webhook descriptions that no retry fixes.
pub fn invalid_descriptions(csv: &ClusterServiceVersion) -> Option<String> {
    let deployments: BTreeSet<&str> = csv.spec.strategy_deployment_names().collect();
    for (index, api) in csv.spec.owned_api_services().iter().enumerate() {
        match api.deployment_name.as_deref() {
            Some(name) if deployments.contains(name) => {}
            other => {
                return Some(format!(
                    "spec.apiservicedefinitions.owned[{index}] ({}) names deployment {other:?}, which spec.install.spec.deployments does not list",
                    api.api_service_name()
                ));
            }
        }
    }
    for (index, hook) in csv.spec.webhooks().iter().enumerate() {
        if hook.generate_name.is_empty() {
            return Some(format!("spec.webhookdefinitions[{index}].generateName is empty"));
        }
        match hook.deployment_name.as_deref() {
            Some(name) if deployments.contains(name) => {}
            other => {
                return Some(format!(
                    "spec.webhookdefinitions[{index}] ({}) names deployment {other:?}, which spec.install.spec.deployments does not list",
                    hook.generate_name
                ));
            }
        }
    }
    None
}

/// Whether stored certificates must be replaced: missing, or due for rotation at `now`.
pub fn needs_rotation(stored: Option<&ServingCert>, rotate_at: Option<Timestamp>, now: Timestamp) -> bool {
    stored.is_none() || rotate_at.is_none_or(|at| at <= now)
}

/// The rotation time of certificates generated at `generated`.
pub fn rotate_at(generated: Timestamp) -> Timestamp {
    let validity = SignedDuration::try_from(CERT_VALIDITY.saturating_sub(ROTATE_BEFORE)).unwrap_or(SignedDuration::ZERO);
    generated.saturating_add(validity).unwrap_or(generated)
}

/// Generate a CA and a serving pair for `service` in `namespace`, valid from a day before `now`
/// for [`CERT_VALIDITY`], for the Service's in-cluster host names.
pub fn generate(service: &str, namespace: &str, now: Timestamp) -> Result<ServingCert, CertError> {
    use olm_pki::{CertificateAuthority, Date, Leaf, Subject, Usage, Validity};
    let err = |e: olm_pki::PkiError| CertError {
        service: format!("{namespace}/{service}"),
        reason: e.reason,
    };
    let day_of = |ts: Timestamp| {
        let date = ts.to_zoned(TimeZone::UTC).date();
        Date::new(i32::from(date.year()), date.month().unsigned_abs(), date.day().unsigned_abs())
    };
    let day = SignedDuration::from_hours(24);
    let lifetime = SignedDuration::try_from(CERT_VALIDITY).unwrap_or(SignedDuration::ZERO);
    let validity = Validity {
        not_before: day_of(now.saturating_sub(day).unwrap_or(now)),
        not_after: day_of(now.saturating_add(lifetime).unwrap_or(now)),
    };

    let ca_subject = Subject::new(format!("olm-selfsigned-{service}")).with_organizations(["Red Hat, Inc."]);
    let ca = CertificateAuthority::new(&ca_subject, validity).map_err(err)?;
    let hosts = vec![
        service.to_owned(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ];
    let cert = ca
        .issue(&Leaf {
            subject: Subject::new(hosts[2].clone()),
            names: hosts,
            usage: Usage::Server,
            key_encipherment: true,
            validity,
        })
        .map_err(err)?;
    Ok(ServingCert {
        ca_pem: ca.cert_pem().to_owned(),
        cert_pem: cert.cert_pem,
        key_pem: cert.key_pem,
        fresh: true,
    })
}

/// The pair stored in a Secret rendered by [`render_secret`], if complete.
pub fn from_secret(secret: &Secret) -> Option<ServingCert> {
    let data = secret.data.as_ref()?;
    let text = |key: &str| {
        data.get(key)
            .and_then(|v| String::from_utf8(v.0.clone()).ok())
            .filter(|s| !s.is_empty())
    };
    Some(ServingCert {
        ca_pem: text(CA_KEY)?,
        cert_pem: text("tls.crt")?,
        key_pem: text("tls.key")?,
        fresh: false,
    })
}

fn meta(csv: &ClusterServiceVersion, name: &str, namespaced: bool) -> ObjectMeta {
    let mut labels = owner_labels(csv);
    labels.insert(keys::MANAGED_LABEL.to_owned(), "true".to_owned());
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: if namespaced { csv.namespace() } else { None },
        labels: Some(labels),
        // Cluster-scoped objects cannot point at a namespaced owner; they go by owner labels.
        owner_references: namespaced.then(|| vec![owner_reference(csv)]),
        ..Default::default()
    }
}

/// The TLS Secret `<deployment>-service-cert` (tls.crt, tls.key and the CA under `olmCAKey`).
pub fn render_secret(csv: &ClusterServiceVersion, deployment: &str, cert: &ServingCert) -> Secret {
    let bytes = |s: &str| ByteString(s.as_bytes().to_vec());
    Secret {
        metadata: meta(csv, &secret_name(deployment), true),
        type_: Some("kubernetes.io/tls".to_owned()),
        data: Some(BTreeMap::from([
            ("tls.crt".to_owned(), bytes(&cert.cert_pem)),
            ("tls.key".to_owned(), bytes(&cert.key_pem)),
            (CA_KEY.to_owned(), bytes(&cert.ca_pem)),
        ])),
        ..Default::default()
    }
}

/// The ports the Deployment's Service exposes: 443 to each APIService's container port, and
/// each webhook's container port to its target port.
pub fn service_ports(csv: &ClusterServiceVersion, deployment: &str) -> Vec<ServicePort> {
    let mut ports: BTreeMap<i32, IntOrString> = BTreeMap::new();
    for api in csv.spec.owned_api_services() {
        if api.deployment_name.as_deref() == Some(deployment) {
            ports.entry(443).or_insert(IntOrString::Int(api.container_port.unwrap_or(443)));
        }
    }
    for hook in csv.spec.webhooks() {
        if hook.deployment_name.as_deref() == Some(deployment) {
            let target = hook.target_port.clone().unwrap_or(IntOrString::Int(hook.port()));
            ports.entry(hook.port()).or_insert(target);
        }
    }
    ports
        .into_iter()
        .map(|(port, target)| ServicePort {
            name: Some(port.to_string()),
            port,
            target_port: Some(target),
            protocol: Some("TCP".to_owned()),
            ..Default::default()
        })
        .collect()
}

/// The Service `<deployment>-service` selecting the Deployment's pods.
pub fn render_service(csv: &ClusterServiceVersion, deployment: &str, spec: &DeploymentSpec) -> Service {
    Service {
        metadata: meta(csv, &service_name(deployment), true),
        spec: Some(ServiceSpec {
            selector: spec.selector.match_labels.clone(),
            ports: Some(service_ports(csv, deployment)),
            ..Default::default()
        }),
        status: None,
    }
}

/// Mount the serving pair into every container of a Deployment and annotate the pod template
/// with the CA hash (so the spec hash, and the pods, change with the certificates).
pub fn mount_certs(spec: &mut DeploymentSpec, deployment: &str, uses: CertUses, cert: &ServingCert) {
    let secret = secret_name(deployment);
    let template_meta = spec.template.metadata.get_or_insert_with(ObjectMeta::default);
    template_meta
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(CA_HASH_ANNOTATION.to_owned(), cert.ca_hash());
    let Some(pod) = spec.template.spec.as_mut() else {
        return;
    };
    let item = |key: &str, path: &str| KeyToPath {
        key: key.to_owned(),
        path: path.to_owned(),
        mode: None,
    };
    let mut wanted: Vec<(Volume, VolumeMount)> = Vec::new();
    if uses.api_service {
        wanted.push((
            Volume {
                name: APISERVICE_VOLUME.to_owned(),
                secret: Some(SecretVolumeSource {
                    secret_name: Some(secret.clone()),
                    items: Some(vec![item("tls.crt", "apiserver.crt"), item("tls.key", "apiserver.key")]),
                    ..Default::default()
                }),
                ..Default::default()
            },
            VolumeMount {
                name: APISERVICE_VOLUME.to_owned(),
                mount_path: APISERVICE_CERT_DIR.to_owned(),
                ..Default::default()
            },
        ));
    }
    if uses.webhook {
        wanted.push((
            Volume {
                name: WEBHOOK_VOLUME.to_owned(),
                secret: Some(SecretVolumeSource {
                    secret_name: Some(secret.clone()),
                    items: Some(vec![item("tls.crt", "tls.crt"), item("tls.key", "tls.key")]),
                    ..Default::default()
                }),
                ..Default::default()
            },
            VolumeMount {
                name: WEBHOOK_VOLUME.to_owned(),
                mount_path: WEBHOOK_CERT_DIR.to_owned(),
                ..Default::default()
            },
        ));
    }
    for (volume, mount) in wanted {
        let volumes = pod.volumes.get_or_insert_with(Vec::new);
        volumes.retain(|v| v.name != volume.name);
        volumes.push(volume);
        for container in &mut pod.containers {
            let mounts = container.volume_mounts.get_or_insert_with(Vec::new);
            mounts.retain(|m| m.name != mount.name && m.mount_path != mount.mount_path);
            mounts.push(mount.clone());
        }
    }
}

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

/// The namespaces a webhook of an operator in `group` sees: nothing selected for all
/// namespaces, else the namespaces the OperatorGroup controller labelled with the group's uid.
pub fn namespace_selector(group: &OperatorGroup, targets: &[String]) -> Option<LabelSelector> {
    if targets.iter().any(String::is_empty) {
        return None;
    }
    Some(LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: format!("{}{}", keys::OPERATOR_GROUP_UID_LABEL_PREFIX, group.uid().unwrap_or_default()),
            operator: "Exists".to_owned(),
            values: None,
        }]),
        match_labels: None,
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
