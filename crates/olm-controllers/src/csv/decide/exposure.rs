//! The decision part of the operator's exposure (APIServices, admission and conversion webhooks,
//! with their serving certificates): what to apply, what conflicts, what is missing or stale.
//! Rendering and certificate generation are in `csv::certs`.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::ResourceExt;
use olm_api::v1alpha1::cluster_service_version::{CsvPhase, WebhookAdmissionType};

use super::{CsvAction, Observed};
use crate::csv::api_registration;
use crate::csv::certs::{self, cert_deployments};
use crate::csv::deployment::DeploymentProblem;

/// The objects that expose the operator's APIServices and webhooks, in apply order: Secrets
/// and Services first (the Deployments mount and sit behind them), then APIServices and
/// webhook configurations (which send traffic to them).
pub(super) fn exposure_actions(
    observed: &Observed<'_>,
    namespace_selector: Option<&LabelSelector>,
) -> (Vec<CsvAction>, Vec<CsvAction>) {
    let csv = observed.csv;
    let mut before = Vec::new();
    let mut after = Vec::new();
    let deployments: BTreeMap<&str, &k8s_openapi::api::apps::v1::DeploymentSpec> = csv
        .spec
        .install
        .spec
        .iter()
        .flat_map(|s| s.deployments.iter().map(|d| (d.name.as_str(), &*d.spec)))
        .collect();
    for name in cert_deployments(csv).keys() {
        let (Some(cert), Some(spec)) = (observed.serving_certs.get(name), deployments.get(name.as_str())) else {
            continue;
        };
        before.push(CsvAction::ApplySecret(Box::new(certs::render_secret(csv, name, cert))));
        before.push(CsvAction::ApplyService(Box::new(certs::render_service(csv, name, spec))));
        let (role, binding, delegator, reader) = api_registration::render_cert_rbac(csv, name, spec);
        before.push(CsvAction::ApplyRole(Box::new(role)));
        before.push(CsvAction::ApplyRoleBinding(Box::new(binding)));
        before.push(CsvAction::ApplyClusterRoleBinding(Box::new(delegator)));
        before.push(CsvAction::ApplyRoleBinding(Box::new(reader)));
    }
    // Configurations of descriptions the CSV no longer has (or whose type changed) go.
    for (generate_name, existing) in observed.webhooks {
        let still_declared = csv.spec.webhooks().iter().any(|hook| {
            hook.generate_name == *generate_name
                && match hook.type_ {
                    WebhookAdmissionType::ValidatingAdmissionWebhook => existing.kind == "ValidatingWebhookConfiguration",
                    WebhookAdmissionType::MutatingAdmissionWebhook => existing.kind == "MutatingWebhookConfiguration",
                    _ => false,
                }
        });
        if !still_declared {
            after.push(CsvAction::DeleteWebhook {
                kind: existing.kind.clone(),
                name: existing.name.clone(),
            });
        }
    }
    let annotations = observed.subscription_config.and_then(|c| c.annotations.as_ref());
    for api in csv.spec.owned_api_services() {
        let Some(cert) = api.deployment_name.as_ref().and_then(|d| observed.serving_certs.get(d)) else {
            continue;
        };
        after.push(CsvAction::ApplyApiService(Box::new(api_registration::render_api_service(csv, api, cert, annotations))));
    }
    for hook in csv.spec.webhooks() {
        let Some(cert) = hook.deployment_name.as_ref().and_then(|d| observed.serving_certs.get(d)) else {
            continue;
        };
        if hook.type_ == WebhookAdmissionType::ConversionWebhook {
            let conversion = api_registration::render_conversion(csv, hook, cert);
            for crd in hook.conversion_crds.iter().flatten() {
                after.push(CsvAction::ApplyCrdConversion {
                    crd: crd.clone(),
                    conversion: Box::new(conversion.clone()),
                });
            }
            continue;
        }
        if let Some(config) = api_registration::render_webhook(csv, hook, cert, namespace_selector.cloned()) {
            let existing = observed
                .webhooks
                .get(&hook.generate_name)
                .filter(|w| w.kind == config.kind())
                .map(|w| w.name.clone());
            after.push(CsvAction::ApplyWebhook {
                existing,
                config: Box::new(config),
            });
        }
    }
    (before, after)
}

/// Why the conversion webhooks cannot be configured (upstream's messages), if they cannot: the
/// description itself, or a listed CRD that preserves unknown fields.
pub(super) fn conversion_problem(observed: &Observed<'_>) -> Option<String> {
    let csv = observed.csv;
    if let Some(problem) = api_registration::conversion_description_problem(csv) {
        return Some(problem);
    }
    let conversions = csv.spec.webhooks().iter().filter(|h| h.type_ == WebhookAdmissionType::ConversionWebhook);
    for crd in conversions.flat_map(|h| h.conversion_crds.iter().flatten()) {
        if observed.facts.crds.get(crd).is_some_and(|c| c.preserve_unknown_fields) {
            return Some(format!(
                "crd.Spec.PreserveUnknownFields must be false to let API Server call webhook to do the conversion (CRD {crd})"
            ));
        }
    }
    None
}

/// An owned APIService that exists but may not be taken over, with what to do about it.
/// Upstream's rule: only one labelled as owned by a ClusterServiceVersion of this namespace that
/// is this CSV, the one it replaces, or one being replaced or deleted.
pub(super) fn api_service_conflict(observed: &Observed<'_>) -> Option<String> {
    let csv = observed.csv;
    let own_ns = csv.namespace().unwrap_or_default();
    for api in csv.spec.owned_api_services() {
        let name = api.api_service_name();
        let Some(found) = observed.api_services.get(&name) else {
            continue;
        };
        let owner = &found.owner;
        if owner.kind.is_empty() || owner.namespace.is_empty() || owner.name.is_empty() {
            return Some(format!(
                "unable to adopt APIService {name}: it exists without OLM owner labels (olm.owner, olm.owner.namespace, olm.owner.kind); delete it, or label it as owned by ClusterServiceVersion {own_ns}/{}",
                csv.name_any()
            ));
        }
        if owner.kind != "ClusterServiceVersion" {
            return Some(format!(
                "unable to adopt APIService {name}: it is owned by {} {}/{}",
                owner.kind, owner.namespace, owner.name
            ));
        }
        let same_ns = owner.namespace == own_ns;
        let is_me = same_ns && owner.name == csv.name_any();
        let replaced_by_me = same_ns
            && csv.spec.replaces.as_deref() == Some(owner.name.as_str())
            && observed.peers.iter().any(|p| p.name_any() == owner.name);
        let leaving = same_ns
            && observed.peers.iter().any(|p| {
                p.name_any() == owner.name && matches!(p.phase(), Some(CsvPhase::Replacing | CsvPhase::Deleting))
            });
        if !(is_me || replaced_by_me || leaving) {
            return Some(format!(
                "unable to adopt APIService {name}: it is owned by ClusterServiceVersion {}/{}, which this CSV ({own_ns}/{}) does not replace",
                owner.namespace,
                owner.name,
                csv.name_any()
            ));
        }
    }
    None
}

/// The owned APIServices' first problem that applying them again fixes (missing, stale CA,
/// adoptable but not yet adopted) or that nothing fixes (owned by someone else), and the
/// first one that is only not Available yet.
pub(super) fn api_service_problems(observed: &Observed<'_>) -> (Option<DeploymentProblem>, Option<DeploymentProblem>) {
    let csv = observed.csv;
    let mut waiting = None;
    for api in csv.spec.owned_api_services() {
        let name = api.api_service_name();
        let ca = api
            .deployment_name
            .as_ref()
            .and_then(|d| observed.serving_certs.get(d))
            .map(|c| c.ca_pem.as_bytes().to_vec());
        let broken = match observed.api_services.get(&name) {
            None => Some(DeploymentProblem::Updated(format!("APIService {name} not found"))),
            // Adoptable ones are taken over by applying them again; others are a conflict.
            Some(found) if !found.owner.is(csv) => Some(match api_service_conflict(observed) {
                Some(conflict) => DeploymentProblem::Unrecoverable(conflict),
                None => DeploymentProblem::Updated(format!("APIService {name} is to be adopted")),
            }),
            Some(found) if found.ca_bundle != ca => Some(DeploymentProblem::Updated(format!("APIService {name} has a stale caBundle"))),
            Some(found) if !found.available => {
                waiting.get_or_insert(DeploymentProblem::Waiting(format!("waiting for APIService {name} to become Available")));
                None
            }
            Some(_) => None,
        };
        if broken.is_some() {
            return (broken, None);
        }
    }
    (None, waiting)
}

/// The first problem with the owned APIServices and webhooks: missing or with a stale CA
/// (re-apply), or an APIService not Available yet (wait).
pub(super) fn exposure_problem(observed: &Observed<'_>) -> Option<DeploymentProblem> {
    let csv = observed.csv;
    let ca_of = |deployment: Option<&String>| {
        deployment
            .and_then(|d| observed.serving_certs.get(d))
            .map(|c| c.ca_pem.as_bytes().to_vec())
    };
    let (broken, waiting) = api_service_problems(observed);
    if broken.is_some() {
        return broken;
    }
    for hook in csv.spec.webhooks() {
        if hook.type_ == WebhookAdmissionType::ConversionWebhook {
            let Some(cert) = hook.deployment_name.as_ref().and_then(|d| observed.serving_certs.get(d)) else {
                continue;
            };
            let want = api_registration::render_conversion(csv, hook, cert);
            for crd in hook.conversion_crds.iter().flatten() {
                let found = observed.facts.crds.get(crd).and_then(|c| c.conversion.as_ref());
                if !api_registration::conversion_matches(found, &want) {
                    return Some(DeploymentProblem::Updated(format!(
                        "CRD {crd} does not use the conversion webhook of {} with the current CA",
                        hook.generate_name
                    )));
                }
            }
            continue;
        }
        match observed.webhooks.get(&hook.generate_name) {
            None => {
                return Some(DeploymentProblem::Updated(format!(
                    "webhook configuration for {} not found",
                    hook.generate_name
                )));
            }
            Some(found) if found.ca_bundle != ca_of(hook.deployment_name.as_ref()) => {
                return Some(DeploymentProblem::Updated(format!(
                    "webhook configuration {} has a stale caBundle",
                    found.name
                )));
            }
            Some(_) => {}
        }
    }
    waiting
}
