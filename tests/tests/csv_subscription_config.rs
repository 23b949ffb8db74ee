//! `Subscription.spec.config` reaches the operator Deployments the CSV controller renders, and
//! a config edit rolls them; against the real local control plane with the etcd 0.9.4 bundle.

use olm_e2e::controllers;

use std::time::Duration;

use controllers::{create_csv_with_permissions, create_own_namespace_group, deployment_available, load_csv, setup, wait_phase};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use olm_api::keys;
use olm_api::v1alpha1::subscription::Subscription;
use serde_json::json;

const ETCD: &str = "etcd-0.9.4/etcdoperator.v0.9.4.clusterserviceversion.yaml";
const CSV_NAME: &str = "etcdoperator.v0.9.4";
const TIMEOUT: Duration = Duration::from_secs(90);

/// The value of env `name` in the etcd-operator container, the pod nodeSelector, the spec-hash
/// label and whether the Deployment is Available.
struct Seen {
    env: Option<String>,
    node_selector: Option<std::collections::BTreeMap<String, String>>,
    hash: Option<String>,
    available: bool,
}

fn seen(dep: &Deployment, env_name: &str) -> Seen {
    let pod = dep.spec.as_ref().and_then(|s| s.template.spec.as_ref());
    let env = pod
        .and_then(|p| p.containers.iter().find(|c| c.name == "etcd-operator"))
        .and_then(|c| c.env.as_ref())
        .and_then(|env| env.iter().find(|e| e.name == env_name))
        .and_then(|e| e.value.clone());
    Seen {
        env,
        node_selector: pod.and_then(|p| p.node_selector.clone()),
        hash: dep.labels().get(keys::DEPLOYMENT_SPEC_HASH_LABEL).cloned(),
        available: deployment_available(dep),
    }
}

async fn deployment_with_env(ns: &olm_testkit::TestNamespace, value: &str) -> anyhow::Result<Deployment> {
    let api: Api<Deployment> = ns.api();
    let what = format!("etcd-operator to run with FOO={value} and nodeSelector type=kwok, Available");
    let found = ns
        .wait_for(&what, TIMEOUT, &["deployment/etcd-operator", "subscriptions", "clusterserviceversions"], || {
            let api = api.clone();
            async move {
                let Some(dep) = api.get_opt("etcd-operator").await.map_err(|e| e.to_string())? else {
                    return Err("deployment not found".to_owned());
                };
                let s = seen(&dep, "FOO");
                let selector_ok = s.node_selector.as_ref().and_then(|n| n.get("type")).map(String::as_str) == Some("kwok");
                let rolled_out = dep.status.as_ref().and_then(|st| st.observed_generation) >= dep.metadata.generation;
                if s.env.as_deref() == Some(value) && selector_ok && s.available && rolled_out {
                    Ok(Some(dep))
                } else {
                    Err(format!("FOO={:?}, nodeSelector={:?}, available={}", s.env, s.node_selector, s.available))
                }
            }
        })
        .await?;
    Ok(found)
}

/// A Subscription whose `status.installedCSV` names the installed etcd CSV contributes its
/// `spec.config` (env, nodeSelector, annotations) to the operator Deployment; changing the
/// config rolls the Deployment (new spec hash) and the CSV returns to Succeeded.
#[tokio::test]
async fn subscription_config_is_applied_to_the_operator_deployment() -> anyhow::Result<()> {
    let (cluster, _admin) = setup().await?;
    let _apis = controllers::ETCD_APIS.read().await;
    let ns = cluster.namespace("csv-sub-config").await?;
    let name = ns.name().to_owned();

    create_own_namespace_group(&ns, "etcd-og").await?;
    let csv = load_csv(ETCD, &name)?;
    create_csv_with_permissions(&ns, &csv, false).await?;
    wait_phase(&ns, CSV_NAME, "Succeeded", Some("InstallSucceeded"), TIMEOUT).await?;
    let deployments: Api<Deployment> = ns.api();
    let before = seen(&deployments.get("etcd-operator").await?, "FOO");
    assert_eq!(before.env, None, "no config yet");

    // The Subscription as the catalog operator leaves it once the CSV is installed.
    let subscriptions: Api<Subscription> = ns.api();
    let subscription: Subscription = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "Subscription",
        "metadata": {"name": "etcd", "namespace": name},
        "spec": {
            "name": "etcd", "channel": "singlenamespace-alpha",
            "source": "no-such-catalog", "sourceNamespace": name,
            "config": {
                "env": [{"name": "FOO", "value": "bar"}],
                "nodeSelector": {"type": "kwok"},
                "annotations": {"example.com/team": "storage"},
            },
        },
    }))?;
    subscriptions.create(&PostParams::default(), &subscription).await?;
    let status = json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "status": {"installedCSV": CSV_NAME, "currentCSV": CSV_NAME, "lastUpdated": "2026-01-01T00:00:00Z"},
    });
    subscriptions
        .patch_status("etcd", &PatchParams::apply("csv-config-test").force(), &Patch::Apply(&status))
        .await?;

    let configured = deployment_with_env(&ns, "bar").await?;
    let configured_seen = seen(&configured, "FOO");
    assert_ne!(configured_seen.hash, before.hash, "the config is part of the spec hash");
    assert_eq!(configured.annotations().get("example.com/team").map(String::as_str), Some("storage"));
    let template_annotations = configured
        .spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.annotations.clone())
        .unwrap_or_default();
    assert_eq!(template_annotations.get("example.com/team").map(String::as_str), Some("storage"));
    assert_eq!(template_annotations.get(keys::TARGET_NAMESPACES_ANNOTATION), Some(&name));
    wait_phase(&ns, CSV_NAME, "Succeeded", None, TIMEOUT).await?;

    // A config edit rolls the Deployment.
    let edit = json!({"spec": {"config": {"env": [{"name": "FOO", "value": "baz"}]}}});
    subscriptions.patch("etcd", &PatchParams::default(), &Patch::Merge(&edit)).await?;
    let rolled = deployment_with_env(&ns, "baz").await?;
    let rolled_seen = seen(&rolled, "FOO");
    assert_ne!(rolled_seen.hash, configured_seen.hash, "a new spec hash");
    assert!(rolled.metadata.generation > configured.metadata.generation, "the Deployment spec was updated");
    wait_phase(&ns, CSV_NAME, "Succeeded", None, TIMEOUT).await?;

    ns.cleanup().await?;
    Ok(())
}
