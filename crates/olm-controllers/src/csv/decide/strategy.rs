//! The install strategy: its validity, the Deployments it asks for, and what keeps the
//! installed ones from being healthy.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::Deployment;
use kube::ResourceExt;
use olm_api::v1alpha1::cluster_service_version::{ClusterServiceVersion, INSTALL_STRATEGY_DEPLOYMENT};
use olm_api::v1alpha1::subscription::SubscriptionConfig;

use super::Observed;
use super::exposure::exposure_problem;
use crate::csv::certs::{ServingCert, cert_deployments};
use crate::csv::deployment::{DeploymentProblem, Health, check_drift, check_health, desired_deployment};

/// Problems with `spec.install` that no retry fixes.
pub(super) fn invalid_strategy(csv: &ClusterServiceVersion) -> Option<String> {
    if csv.spec.install.strategy != INSTALL_STRATEGY_DEPLOYMENT {
        return Some(format!(
            "spec.install.strategy is {:?}; the only supported strategy is \"deployment\"",
            csv.spec.install.strategy
        ));
    }
    let Some(details) = csv.spec.install.spec.as_ref() else {
        return Some("spec.install.spec is missing: it must list the deployments to create".into());
    };
    let mut names = BTreeSet::new();
    for (index, deployment) in details.deployments.iter().enumerate() {
        if deployment.name.is_empty() {
            return Some(format!("spec.install.spec.deployments[{index}].name is empty"));
        }
        if !names.insert(deployment.name.as_str()) {
            return Some(format!(
                "spec.install.spec.deployments[{index}].name {:?} is used twice",
                deployment.name
            ));
        }
        if deployment.spec.template.spec.is_none() {
            return Some(format!(
                "spec.install.spec.deployments[{index}] ({}) has no spec.template.spec",
                deployment.name
            ));
        }
    }
    None
}

/// The Deployments the strategy asks for, with the Subscription's `spec.config` applied and
/// the serving certificates mounted.
pub fn desired_deployments(
    csv: &ClusterServiceVersion,
    config: Option<&SubscriptionConfig>,
    certs: &BTreeMap<String, ServingCert>,
) -> Vec<Deployment> {
    let uses = cert_deployments(csv);
    csv.spec
        .install
        .spec
        .iter()
        .flat_map(|details| details.deployments.iter())
        .map(|entry| {
            let mount = uses.get(&entry.name).copied().zip(certs.get(&entry.name));
            desired_deployment(csv, entry, config, mount)
        })
        .collect()
}

/// The first problem of the installed strategy: drift before health (judged as `health`).
pub(super) fn strategy_problem(observed: &Observed<'_>, desired: &[Deployment], health: Health) -> Option<DeploymentProblem> {
    let drift = desired
        .iter()
        .find_map(|want| check_drift(want, observed.deployments.get(&want.name_any())).err());
    if drift.is_some() {
        return drift;
    }
    let health = desired
        .iter()
        .filter_map(|want| observed.deployments.get(&want.name_any()))
        .find_map(|actual| check_health(actual, health).err());
    match (health, exposure_problem(observed)) {
        (_, Some(problem)) if problem.needs_apply() => Some(problem),
        (Some(problem), _) => Some(problem),
        (None, other) => other,
    }
}
