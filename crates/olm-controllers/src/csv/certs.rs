//! Serving certificates of a CSV's owned APIServices and admission webhooks: which Deployments
//! need one, the Secret that holds one, the Service in front of the Deployment. Generating,
//! rotating and mounting a pair is `olm_install::serving_cert`, shared with OLM v1. The objects
//! that point the API server at the Service are in [`super::api_registration`].

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::DeploymentSpec;
use k8s_openapi::api::core::v1::{Secret, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;
use olm_api::keys;
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
pub use olm_install::serving_cert::{
    APISERVICE_CERT_DIR, CA_HASH_ANNOTATION, CA_KEY, CERT_VALIDITY, CertError, CertUses, ROTATE_BEFORE, ServingCert, WEBHOOK_CERT_DIR,
    from_secret, generate, mount_certs, needs_rotation, rotate_at, secret_name, service_name, usable,
};

use crate::metadata::{owner_labels, owner_reference};

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

pub(super) fn meta(csv: &ClusterServiceVersion, name: &str, namespaced: bool) -> ObjectMeta {
    let mut labels = owner_labels(csv);
    labels.extend(crate::metadata::component_labels(csv));
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
    Secret {
        metadata: meta(csv, &secret_name(deployment), true),
        type_: Some("kubernetes.io/tls".to_owned()),
        data: Some(olm_install::serving_cert::secret_data(cert)),
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

