//! The `deployment` install strategy, pure part: the Deployments a CSV wants, their spec hash,
//! drift detection and health.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::EnvVar;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use olm_api::keys;
use olm_api::v1alpha1::cluster_service_version::{ClusterServiceVersion, StrategyDeploymentSpec};
use olm_api::v1alpha1::subscription::{Subscription, SubscriptionConfig, SubscriptionStatus};
use serde_json::Value;

use crate::metadata::{hash_json, owner_labels, owner_reference};
use super::subscription_config::apply_config;

/// The Subscription whose config applies to `csv`: in its namespace, the one whose
/// `status.installedCSV` names it, else the one whose `status.currentCSV` does.
pub fn subscription_for<'a>(
    csv: &ClusterServiceVersion,
    subscriptions: &[&'a Subscription],
) -> Option<&'a Subscription> {
    let name = csv.name_any();
    let namespace = csv.namespace();
    let naming = |pick: fn(&SubscriptionStatus) -> Option<&String>| {
        subscriptions
            .iter()
            .copied()
            .filter(|s| s.namespace() == namespace)
            .find(|s| s.status.as_ref().and_then(pick).is_some_and(|n| *n == name))
    };
    naming(|st| st.installed_csv.as_ref()).or_else(|| naming(|st| st.current_csv.as_ref()))
}

/// What the watch cache keeps of an operator Deployment: everything but its pod spec (most of
/// its decoded size). Drift is told without it: a pod spec OLM wrote, or read and found as
/// wanted, is remembered by the Deployment's generation ([`VerifiedSpecs`]); any later change
/// to the spec bumps the generation, and only then is the Deployment read whole again.
pub fn trim_cached_deployment(deployment: &mut Deployment) {
    if let Some(spec) = deployment.spec.as_mut() {
        // The template's metadata too: its annotations are every CSV annotation, and the spec
        // hash label covers them.
        spec.template = Default::default();
    }
}

/// Whether `deployment` is a cached copy without its pod spec ([`trim_cached_deployment`]).
/// The API server never stores a Deployment without one.
pub fn is_trimmed(deployment: &Deployment) -> bool {
    deployment
        .spec
        .as_ref()
        .is_some_and(|spec| spec.template.spec.is_none())
}

/// The generation of every operator Deployment whose spec holds what its CSV wants, by uid:
/// written after OLM applies one and after a full read passes the drift check.
#[derive(Clone, Default)]
pub struct VerifiedSpecs(Arc<Mutex<HashMap<String, i64>>>);

impl VerifiedSpecs {
    /// Whether `deployment`'s spec is the one verified (same uid, same generation).
    pub fn holds(&self, deployment: &Deployment) -> bool {
        let (Some(uid), Some(generation)) = (
            deployment.metadata.uid.as_ref(),
            deployment.metadata.generation,
        ) else {
            return false;
        };
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(uid)
            == Some(&generation)
    }

    /// Remember `deployment`'s spec, as it is at its generation, as verified.
    pub fn remember(&self, deployment: &Deployment) {
        if let (Some(uid), Some(generation)) = (
            deployment.metadata.uid.clone(),
            deployment.metadata.generation,
        ) {
            self.0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(uid, generation);
        }
    }

    /// Forget the Deployments whose uid `live` does not accept (deleted ones); run when the
    /// memory holds more entries than `bound`.
    pub fn prune(&self, bound: usize, live: impl Fn(&str) -> bool) {
        let mut verified = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if verified.len() > bound {
            verified.retain(|uid, _| live(uid));
        }
    }
}

/// Annotations never copied onto pod templates: client-side apply bookkeeping can be larger
/// than what an annotation on a Deployment may hold, and means nothing to the operator.
const NOT_PROPAGATED_ANNOTATIONS: &[&str] = &["kubectl.kubernetes.io/last-applied-configuration"];

/// The Deployment OLM applies for one strategy entry of `csv`, with the `spec.config` of the
/// Subscription that installed it (if any) applied before the spec hash is taken, so a config
/// change rolls the Deployment.
pub fn desired_deployment(
    csv: &ClusterServiceVersion,
    entry: &StrategyDeploymentSpec,
    config: Option<&SubscriptionConfig>,
    certs: Option<(super::certs::CertUses, &super::certs::ServingCert)>,
) -> Deployment {
    let mut spec = (*entry.spec).clone();
    spec.revision_history_limit = Some(1);

    // Every CSV annotation reaches the pods: this is how the OperatorGroup annotations
    // (olm.targetNamespaces, ...) get to the operator through the downward API.
    let template_meta = spec.template.metadata.get_or_insert_with(ObjectMeta::default);
    let template_annotations = template_meta.annotations.get_or_insert_with(BTreeMap::new);
    for (key, value) in csv.annotations() {
        if !NOT_PROPAGATED_ANNOTATIONS.contains(&key.as_str()) {
            template_annotations.insert(key.clone(), value.clone());
        }
    }

    if let Some(pod) = spec.template.spec.as_mut() {
        for container in &mut pod.containers {
            let env = container.env.get_or_insert_with(Vec::new);
            env.retain(|e| e.name != keys::OPERATOR_CONDITION_NAME_ENV);
            env.push(EnvVar {
                name: keys::OPERATOR_CONDITION_NAME_ENV.to_owned(),
                value: Some(csv.name_any()),
                value_from: None,
            });
        }
    }

    // Config annotations land on the Deployment and its pod template; apply it on a scratch
    // Deployment to reuse the Subscription rules, then keep what it changed.
    let mut config_annotations = None;
    if let Some(config) = config {
        let mut scratch = Deployment {
            spec: Some(spec),
            ..Default::default()
        };
        apply_config(&mut scratch, config);
        config_annotations = scratch.metadata.annotations;
        spec = scratch.spec.unwrap_or_default();
    }

    if let Some((uses, cert)) = certs {
        super::certs::mount_certs(&mut spec, &entry.name, uses, cert);
    }

    let mut labels = entry.label.clone().unwrap_or_default();
    labels.extend(owner_labels(csv));
    labels.extend(crate::metadata::component_labels(csv));
    labels.insert(keys::MANAGED_LABEL.to_owned(), "true".to_owned());
    let hash = hash_json(&serde_json::to_value(&spec).unwrap_or(Value::Null));
    labels.insert(keys::DEPLOYMENT_SPEC_HASH_LABEL.to_owned(), hash);

    Deployment {
        metadata: ObjectMeta {
            name: Some(entry.name.clone()),
            namespace: csv.namespace(),
            labels: Some(labels),
            annotations: config_annotations,
            owner_references: Some(vec![owner_reference(csv)]),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    }
}

/// Whether every field of `wanted` is present with the same value in `actual`. Objects may have
/// extra keys (server defaults); every element of a wanted list must match some element of the
/// actual list (others may add elements, e.g. an injected sidecar, without counting as drift).
/// A wanted empty value matches an absent field: the API server drops empty strings, lists,
/// maps, `false` and `0` of `omitempty` fields (a CSV's `env: [{name: X, value: ""}]` is stored
/// as `{name: X}`), and reading that as drift rolled the Deployment "back" after every restart.
pub fn json_contains(actual: &Value, wanted: &Value) -> bool {
    match (actual, wanted) {
        (_, Value::Null) => true,
        (Value::Object(a), Value::Object(w)) => w
            .iter()
            .all(|(key, wv)| a.get(key).map_or(is_empty_value(wv), |av| json_contains(av, wv))),
        (Value::Array(a), Value::Array(w)) => w.iter().all(|wv| a.iter().any(|av| json_contains(av, wv))),
        (a, w) => a == w,
    }
}

/// What Go's `omitempty` leaves out of an object the API server stores.
fn is_empty_value(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

/// What is wrong with an installed Deployment (upstream's strategy error reasons).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeploymentProblem {
    /// The Deployment does not exist.
    Missing(String),
    /// Pod template annotations from the CSV are missing or different.
    AnnotationsMissing(String),
    /// The spec differs from what the CSV asks for (hand edit, or the CSV changed).
    Updated(String),
    /// Not (yet) available; retrying can help.
    Waiting(String),
    /// Will not become available (progress deadline exceeded).
    Unrecoverable(String),
}

impl DeploymentProblem {
    /// Human message.
    pub fn message(&self) -> &str {
        match self {
            DeploymentProblem::Missing(m)
            | DeploymentProblem::AnnotationsMissing(m)
            | DeploymentProblem::Updated(m)
            | DeploymentProblem::Waiting(m)
            | DeploymentProblem::Unrecoverable(m) => m,
        }
    }

    /// Whether the fix is to apply the Deployment again.
    pub fn needs_apply(&self) -> bool {
        matches!(
            self,
            DeploymentProblem::Missing(_) | DeploymentProblem::AnnotationsMissing(_) | DeploymentProblem::Updated(_)
        )
    }
}

/// Compare an installed Deployment with the desired one: existence, annotations, spec hash and
/// spec content (so a hand edit is noticed even when the hash label was left alone).
pub fn check_drift(desired: &Deployment, actual: Option<&Deployment>) -> Result<(), DeploymentProblem> {
    let name = desired.name_any();
    let Some(actual) = actual else {
        return Err(DeploymentProblem::Missing(format!("deployment {name} not found")));
    };
    let wanted_hash = desired.labels().get(keys::DEPLOYMENT_SPEC_HASH_LABEL);
    if is_trimmed(actual) {
        // The reconcile passes a trimmed Deployment only when its spec is verified at this
        // generation (see `VerifiedSpecs`): the spec is what was applied for this hash, which
        // covers the pod template's annotations too.
        return match actual.labels().get(keys::DEPLOYMENT_SPEC_HASH_LABEL) == wanted_hash {
            true => Ok(()),
            false => Err(DeploymentProblem::Updated(format!(
                "deployment {name} has an outdated spec hash, updating it"
            ))),
        };
    }
    let wanted_annotations = desired
        .spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.annotations.clone())
        .unwrap_or_default();
    let actual_annotations = actual
        .spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.annotations.clone())
        .unwrap_or_default();
    for (key, value) in &wanted_annotations {
        if actual_annotations.get(key) != Some(value) {
            return Err(DeploymentProblem::AnnotationsMissing(format!(
                "annotations on deployment {name} don't match: expected {key}={value:?}"
            )));
        }
    }
    if actual.labels().get(keys::DEPLOYMENT_SPEC_HASH_LABEL) != wanted_hash {
        return Err(DeploymentProblem::Updated(format!(
            "deployment {name} has an outdated spec hash, updating it"
        )));
    }
    let wanted_spec = serde_json::to_value(&desired.spec).unwrap_or(Value::Null);
    let actual_spec = serde_json::to_value(&actual.spec).unwrap_or(Value::Null);
    if !json_contains(&actual_spec, &wanted_spec) {
        return Err(DeploymentProblem::Updated(format!(
            "deployment {name} was changed outside OLM, rolling it back"
        )));
    }
    Ok(())
}

/// How strictly a Deployment's health is judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Health {
    /// While installing or upgrading: as `kubectl rollout status`, every updated replica
    /// available (the Available condition alone holds while a new replica cannot start).
    Rollout,
    /// Once installed: as upstream judges a Succeeded CSV, no outdated replica and the
    /// Available condition; a pod lost within `maxUnavailable` is no failure.
    Installed,
}

/// Whether an installed Deployment is rolled out and Available.
pub fn check_health(actual: &Deployment, health: Health) -> Result<(), DeploymentProblem> {
    let name = actual.name_any();
    let generation = actual.metadata.generation.unwrap_or(0);
    let Some(status) = actual.status.as_ref() else {
        return Err(DeploymentProblem::Waiting(format!(
            "waiting for deployment {name} to report status"
        )));
    };
    // The generation first, as `kubectl rollout status`: a deadline passed by the previous
    // spec (the version being replaced, or rolled back from) says nothing of this one.
    if status.observed_generation.unwrap_or(0) < generation {
        return Err(DeploymentProblem::Waiting(format!(
            "waiting for deployment {name} spec update to be observed"
        )));
    }
    let conditions = status.conditions.as_deref().unwrap_or_default();
    if conditions
        .iter()
        .any(|c| c.type_ == "Progressing" && c.reason.as_deref() == Some("ProgressDeadlineExceeded"))
    {
        return Err(DeploymentProblem::Unrecoverable(format!(
            "deployment {name} exceeded its progress deadline"
        )));
    }
    let replicas = actual.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let updated = status.updated_replicas.unwrap_or(0);
    if health == Health::Rollout && updated < replicas {
        return Err(DeploymentProblem::Waiting(format!(
            "waiting for deployment {name} rollout to finish: {updated} out of {replicas} new replicas have been updated"
        )));
    }
    // As `kubectl rollout status` (and upstream) judge a rollout: the old replicas gone and the
    // new ones available, not only the Deployment's Available condition, which an old replica
    // still satisfies while the new one cannot start.
    let total = status.replicas.unwrap_or(0);
    if total > updated {
        return Err(DeploymentProblem::Waiting(format!(
            "waiting for deployment {name} rollout to finish: {} old replicas are pending termination",
            total - updated
        )));
    }
    let available_updated = status.available_replicas.unwrap_or(0);
    if health == Health::Rollout && available_updated < updated {
        return Err(DeploymentProblem::Waiting(format!(
            "waiting for deployment {name} rollout to finish: {available_updated} of {updated} updated replicas are available"
        )));
    }
    let available = conditions.iter().any(|c| c.type_ == "Available" && c.status == "True");
    if !available {
        let available_replicas = status.available_replicas.unwrap_or(0);
        return Err(DeploymentProblem::Waiting(format!(
            "waiting for deployment {name} to become ready: {available_replicas} of {replicas} updated replicas are available"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_rollout_whose_new_replica_cannot_start_is_not_healthy_while_the_old_one_serves() {
        let rollout = |status: serde_json::Value| -> Deployment {
            serde_json::from_value(json!({
                "metadata": {"name": "op", "generation": 2},
                "spec": {"replicas": 1, "selector": {}, "template": {}},
                "status": status,
            }))
            .expect("a deployment")
        };
        let available = json!([{"type": "Available", "status": "True"}]);
        // The new pod is Pending (no node for it); the old one still makes the Deployment Available.
        let stuck = rollout(json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 1, "availableReplicas": 1, "conditions": available}));
        for health in [Health::Rollout, Health::Installed] {
            assert!(matches!(check_health(&stuck, health), Err(DeploymentProblem::Waiting(m)) if m.contains("1 old replicas are pending termination")));
        }
        let unready = rollout(json!({"observedGeneration": 2, "replicas": 1, "updatedReplicas": 1, "availableReplicas": 0, "conditions": available}));
        assert!(matches!(check_health(&unready, Health::Rollout), Err(DeploymentProblem::Waiting(m)) if m.contains("0 of 1 updated replicas are available")));
        let done = rollout(json!({"observedGeneration": 2, "replicas": 1, "updatedReplicas": 1, "availableReplicas": 1, "conditions": available}));
        assert!(check_health(&done, Health::Rollout).is_ok());
    }

    #[test]
    fn a_passed_progress_deadline_counts_only_for_the_spec_it_was_passed_by() {
        let deployment = |observed: i64| -> Deployment {
            serde_json::from_value(json!({
                "metadata": {"name": "op", "generation": 3},
                "spec": {"replicas": 1, "selector": {}, "template": {}},
                "status": {"observedGeneration": observed, "replicas": 1, "updatedReplicas": 0, "conditions": [
                    {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}
                ]},
            }))
            .expect("a deployment")
        };
        // The spec of the version that failed, then a new spec applied (a rollback) that the
        // Deployment controller has not seen yet: waiting, not failed.
        assert!(matches!(check_health(&deployment(3), Health::Rollout), Err(DeploymentProblem::Unrecoverable(m)) if m == "deployment op exceeded its progress deadline"));
        assert!(matches!(check_health(&deployment(2), Health::Rollout), Err(DeploymentProblem::Waiting(m)) if m.contains("spec update to be observed")));
    }

    #[test]
    fn an_installed_deployment_that_loses_a_pod_within_max_unavailable_stays_healthy() {
        // Two replicas, one pod deleted: its replacement is not ready yet, the Deployment still
        // Available (maxUnavailable 1). Upstream keeps such a CSV Succeeded.
        let deployment: Deployment = serde_json::from_value(json!({
            "metadata": {"name": "op", "generation": 1},
            "spec": {"replicas": 2, "selector": {}, "template": {}},
            "status": {"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 1,
                       "conditions": [{"type": "Available", "status": "True"}]},
        }))
        .expect("a deployment");
        assert!(check_health(&deployment, Health::Installed).is_ok());
        assert!(check_health(&deployment, Health::Rollout).is_err(), "still rolling out while installing");
    }

    #[test]
    fn contains_ignores_defaults_and_extra_list_elements() {
        let actual = json!({"replicas": 1, "template": {"spec": {"containers": [
            {"name": "a", "image": "x", "imagePullPolicy": "IfNotPresent"},
            {"name": "sidecar", "image": "y"}]}}});
        assert!(json_contains(&actual, &json!({"template": {"spec": {"containers": [{"name": "a", "image": "x"}]}}})));
        assert!(!json_contains(&actual, &json!({"template": {"spec": {"containers": [{"name": "a", "image": "z"}]}}})));
        assert!(!json_contains(&actual, &json!({"replicas": 2})));
    }

    #[test]
    fn an_empty_wanted_value_matches_the_field_the_api_server_left_out() {
        // aws-efs-operator 0.0.8's CSV: `{name: WATCH_NAMESPACE, value: ""}`, stored without `value`.
        let actual = json!({"template": {"spec": {"containers": [{"name": "a", "env": [{"name": "WATCH_NAMESPACE"}]}]}}});
        let wanted = |value: Value| json!({"template": {"spec": {"containers": [{"name": "a", "env": [{"name": "WATCH_NAMESPACE", "value": value}]}]}}});
        assert!(json_contains(&actual, &wanted(json!(""))));
        for empty in [json!(false), json!(0), json!([]), json!({})] {
            assert!(json_contains(&actual, &wanted(empty)));
        }
        // A value that is not empty is still drift when it is missing.
        assert!(!json_contains(&actual, &wanted(json!("ns1"))));
        assert!(!json_contains(&actual, &wanted(json!(true))));
    }

    fn deployment(uid: &str, generation: i64, image: &str) -> Deployment {
        serde_json::from_value(json!({
            "metadata": {"name": "op", "uid": uid, "generation": generation,
                         "labels": {keys::DEPLOYMENT_SPEC_HASH_LABEL: "h1"}},
            "spec": {"selector": {}, "template": {"metadata": {"annotations": {"a": "1"}},
                     "spec": {"containers": [{"name": "op", "image": image}]}}}
        }))
        .unwrap()
    }

    #[test]
    fn a_trimmed_deployment_keeps_its_spec_hash_but_not_its_pod_template() {
        let mut cached = deployment("u1", 3, "op:1");
        trim_cached_deployment(&mut cached);
        assert!(is_trimmed(&cached));
        assert_eq!(
            cached
                .labels()
                .get(keys::DEPLOYMENT_SPEC_HASH_LABEL)
                .map(String::as_str),
            Some("h1")
        );
        assert!(!is_trimmed(&deployment("u1", 3, "op:1")));
    }

    #[test]
    fn a_verified_spec_holds_until_the_generation_or_the_object_changes() {
        let verified = VerifiedSpecs::default();
        let applied = deployment("u1", 3, "op:1");
        assert!(
            !verified.holds(&applied),
            "nothing is verified before it is remembered"
        );
        verified.remember(&applied);
        assert!(verified.holds(&deployment("u1", 3, "op:1")));
        assert!(
            !verified.holds(&deployment("u1", 4, "op:1")),
            "someone changed the spec"
        );
        assert!(
            !verified.holds(&deployment("u2", 3, "op:1")),
            "a recreated Deployment is another object"
        );
        verified.prune(0, |uid| uid != "u1");
        assert!(!verified.holds(&applied), "pruned once deleted");
    }

    #[test]
    fn drift_of_a_trimmed_deployment_is_told_by_its_spec_hash() {
        let desired = deployment("", 0, "op:1");
        let mut cached = deployment("u1", 3, "op:2");
        trim_cached_deployment(&mut cached);
        assert_eq!(check_drift(&desired, Some(&cached)), Ok(()));
        let mut other_hash = cached.clone();
        other_hash
            .labels_mut()
            .insert(keys::DEPLOYMENT_SPEC_HASH_LABEL.into(), "h2".into());
        assert!(matches!(
            check_drift(&desired, Some(&other_hash)),
            Err(DeploymentProblem::Updated(_))
        ));
        // Read whole, the changed image is drift.
        assert!(matches!(
            check_drift(&desired, Some(&deployment("u1", 3, "op:2"))),
            Err(DeploymentProblem::Updated(_))
        ));
    }
}
