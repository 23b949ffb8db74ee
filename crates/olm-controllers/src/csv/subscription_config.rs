//! `Subscription.spec.config` applied to an operator Deployment (pure), with upstream's merge
//! rules: env (same name overwritten), envFrom (appended unless present), volumes and
//! volumeMounts (same name overwritten), tolerations (appended unless present), resources
//! (replace every container's), nodeSelector (replaces), affinity (per sub-field: unset keeps,
//! set replaces), annotations (added to the Deployment and its pod template). `selector` is in
//! the API but, as upstream, not applied.
//!
//! The CSV controller calls [`apply_config`] (csv/deployment.rs) with the config of the
//! Subscription whose `status.installedCSV` names the CSV when it renders Deployments.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Affinity, Container, PodSpec};
use olm_api::v1alpha1::subscription::SubscriptionConfig;

fn merge_by_name<T: Clone>(target: &mut Vec<T>, additions: &[T], name: impl Fn(&T) -> &str) {
    for item in additions {
        match target.iter().position(|t| name(t) == name(item)) {
            Some(i) => target[i] = item.clone(),
            None => target.push(item.clone()),
        }
    }
}

fn apply_to_container(container: &mut Container, config: &SubscriptionConfig) {
    if let Some(env) = &config.env {
        merge_by_name(container.env.get_or_insert_with(Vec::new), env, |e| e.name.as_str());
    }
    if let Some(env_from) = &config.env_from {
        let list = container.env_from.get_or_insert_with(Vec::new);
        for source in env_from {
            if !list.contains(source) {
                list.push(source.clone());
            }
        }
    }
    if let Some(mounts) = &config.volume_mounts {
        merge_by_name(container.volume_mounts.get_or_insert_with(Vec::new), mounts, |m| m.name.as_str());
    }
    if let Some(resources) = &config.resources {
        container.resources = Some(resources.clone());
    }
}

fn merge_affinity(target: &mut Option<Affinity>, config: &Affinity) {
    let current = target.get_or_insert_with(Affinity::default);
    if let Some(node) = &config.node_affinity {
        current.node_affinity = Some(node.clone()).filter(|n| *n != Default::default());
    }
    if let Some(pod) = &config.pod_affinity {
        current.pod_affinity = Some(pod.clone()).filter(|p| *p != Default::default());
    }
    if let Some(anti) = &config.pod_anti_affinity {
        current.pod_anti_affinity = Some(anti.clone()).filter(|p| *p != Default::default());
    }
    if *current == Affinity::default() {
        *target = None;
    }
}

fn apply_to_pod(pod: &mut PodSpec, config: &SubscriptionConfig) {
    for container in pod.containers.iter_mut().chain(pod.init_containers.iter_mut().flatten()) {
        apply_to_container(container, config);
    }
    if let Some(volumes) = &config.volumes {
        merge_by_name(pod.volumes.get_or_insert_with(Vec::new), volumes, |v| v.name.as_str());
    }
    if let Some(tolerations) = &config.tolerations {
        let list = pod.tolerations.get_or_insert_with(Vec::new);
        for toleration in tolerations {
            if !list.contains(toleration) {
                list.push(toleration.clone());
            }
        }
    }
    if let Some(selector) = &config.node_selector {
        pod.node_selector = Some(selector.clone());
    }
    if let Some(affinity) = &config.affinity {
        merge_affinity(&mut pod.affinity, affinity);
    }
}

/// Apply `config` to `deployment` in place.
pub fn apply_config(deployment: &mut Deployment, config: &SubscriptionConfig) {
    if let Some(annotations) = &config.annotations {
        let meta = deployment.metadata.annotations.get_or_insert_with(Default::default);
        meta.extend(annotations.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    let Some(spec) = deployment.spec.as_mut() else {
        return;
    };
    if let Some(annotations) = &config.annotations {
        let template_meta = spec.template.metadata.get_or_insert_with(Default::default);
        template_meta
            .annotations
            .get_or_insert_with(Default::default)
            .extend(annotations.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    if let Some(pod) = spec.template.spec.as_mut() {
        apply_to_pod(pod, config);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment() -> Deployment {
        serde_json::from_value(json!({
            "metadata": {"name": "etcd-operator"},
            "spec": {"selector": {}, "template": {"spec": {
                "containers": [{"name": "etcd-operator", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                                 "resources": {"limits": {"cpu": "1"}}}],
                "tolerations": [{"key": "t", "operator": "Exists"}],
                "nodeSelector": {"old": "x"},
                "affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []}},
            }}}
        }))
        .expect("deployment")
    }

    #[test]
    fn config_is_merged_with_upstream_rules() {
        let config: SubscriptionConfig = serde_json::from_value(json!({
            "env": [{"name": "B", "value": "20"}, {"name": "C", "value": "3"}],
            "envFrom": [{"configMapRef": {"name": "proxy"}}],
            "volumes": [{"name": "certs", "emptyDir": {}}],
            "volumeMounts": [{"name": "certs", "mountPath": "/certs"}],
            "tolerations": [{"key": "t", "operator": "Exists"}, {"key": "u", "operator": "Exists"}],
            "resources": {"requests": {"memory": "64Mi"}},
            "nodeSelector": {"new": "y"},
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}},
            "annotations": {"team": "a"},
        }))
        .expect("config");
        let mut d = deployment();
        apply_config(&mut d, &config);
        let value = serde_json::to_value(&d).expect("json");
        let pod = &value["spec"]["template"]["spec"];
        let c = &pod["containers"][0];
        assert_eq!(
            c["env"],
            json!([{"name": "A", "value": "1"}, {"name": "B", "value": "20"}, {"name": "C", "value": "3"}])
        );
        assert_eq!(c["envFrom"], json!([{"configMapRef": {"name": "proxy"}}]));
        assert_eq!(c["volumeMounts"], json!([{"name": "certs", "mountPath": "/certs"}]));
        assert_eq!(c["resources"], json!({"requests": {"memory": "64Mi"}}));
        assert_eq!(pod["volumes"][0]["name"], json!("certs"));
        assert_eq!(pod["tolerations"].as_array().map(Vec::len), Some(2), "no duplicate toleration");
        assert_eq!(pod["nodeSelector"], json!({"new": "y"}));
        assert!(pod["affinity"]["nodeAffinity"].is_object());
        assert!(pod["affinity"]["podAffinity"].is_object(), "unset sub-fields are kept");
        assert_eq!(value["metadata"]["annotations"]["team"], json!("a"));
        assert_eq!(value["spec"]["template"]["metadata"]["annotations"]["team"], json!("a"));
    }

    #[test]
    fn an_empty_config_changes_nothing() {
        let mut d = deployment();
        apply_config(&mut d, &SubscriptionConfig::default());
        assert_eq!(d, deployment());
    }
}
