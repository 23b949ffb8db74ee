//! Webhooks declared by a CSV against the real local control plane: a serving certificate in
//! `<deployment>-service-cert`, a Service, the certificate mounted into the Deployment, and a
//! ValidatingWebhookConfiguration trusting the generated CA (watched: a deleted one comes back
//! at once); all removed with the CSV. Owned APIServices: csv_apiservice.rs (briefly, since an
//! APIService whose pods never serve — kwok runs no containers — disturbs API discovery).

use olm_e2e::controllers;

use std::time::Duration;

use controllers::{create_csv_with_permissions, create_own_namespace_group, edit_csv, load_csv, setup, wait_phase};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use olm_api::keys;
use olm_api::v1::operator_group::OperatorGroup;
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use serde_json::json;

const ETCD: &str = "etcd-0.9.4/etcdoperator.v0.9.4.clusterserviceversion.yaml";
const CSV_NAME: &str = "etcdoperator.v0.9.4";
const TIMEOUT: Duration = Duration::from_secs(90);

#[tokio::test]
async fn a_csv_webhook_gets_a_serving_certificate_and_a_configuration() -> anyhow::Result<()> {
    let (cluster, _admin) = setup().await?;
    let _apis = controllers::ETCD_APIS.read().await;
    let client = cluster.client();
    let ns = cluster.namespace("csv-webhook").await?;
    let name = ns.name().to_owned();

    create_own_namespace_group(&ns, "etcd-og").await?;
    // A webhook on an API nobody uses, failing open: harmless to the shared control plane.
    let generate_name = format!("vetcd.{name}.example.com");
    let csv = edit_csv(&load_csv(ETCD, &name)?, |value| {
        value["spec"]["webhookdefinitions"] = json!([{
            "generateName": generate_name, "type": "ValidatingAdmissionWebhook", "deploymentName": "etcd-operator",
            "containerPort": 9443, "webhookPath": "/validate-etcdcluster", "sideEffects": "None",
            "admissionReviewVersions": ["v1"], "failurePolicy": "Ignore",
            "rules": [{"apiGroups": ["nothing.example.com"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["nothings"]}],
        }]);
        // As flink-kubernetes-operator does: an init container reads the pair from the
        // `apiservice-cert` volume OLM adds (upstream adds it for webhooks too); the API server
        // refuses the Deployment if the volume is missing.
        let deployment = &mut value["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"];
        deployment["initContainers"] = json!([{"name": "import-cert", "image": "busybox",
            "volumeMounts": [{"name": "apiservice-cert", "mountPath": "/certs"}]}]);
    })?;
    create_csv_with_permissions(&ns, &csv, false).await?;
    wait_phase(&ns, CSV_NAME, "Succeeded", Some("InstallSucceeded"), TIMEOUT).await?;

    let csvs: Api<ClusterServiceVersion> = ns.api();
    let status = csvs.get(CSV_NAME).await?.status.unwrap_or_default();
    let (updated, rotate) = (status.certs_last_updated.map(|t| t.0), status.certs_rotate_at.map(|t| t.0));
    let (Some(updated), Some(rotate)) = (updated, rotate) else {
        anyhow::bail!("certsLastUpdated/certsRotateAt not set: {updated:?} {rotate:?}");
    };
    assert!(rotate > updated, "rotation after generation");

    let secrets: Api<Secret> = ns.api();
    let secret = secrets.get("etcd-operator-service-cert").await?;
    let data = secret.data.clone().unwrap_or_default();
    let mut data_keys: Vec<&String> = data.keys().collect();
    data_keys.sort();
    assert_eq!(data_keys, ["olmCAKey", "tls.crt", "tls.key"]);
    let ca = data["olmCAKey"].0.clone();
    assert!(String::from_utf8_lossy(&ca).starts_with("-----BEGIN CERTIFICATE-----"));

    let services: Api<Service> = ns.api();
    let service = services.get("etcd-operator-service").await?;
    let ports: Vec<i32> = service.spec.as_ref().and_then(|s| s.ports.clone()).unwrap_or_default().iter().map(|p| p.port).collect();
    assert_eq!(ports, [9443]);

    let deployments: Api<Deployment> = ns.api();
    let dep = deployments.get("etcd-operator").await?;
    let pod = dep.spec.as_ref().and_then(|s| s.template.spec.clone()).unwrap_or_default();
    let mounted = pod.containers[0]
        .volume_mounts
        .iter()
        .flatten()
        .any(|m| m.mount_path == "/tmp/k8s-webhook-server/serving-certs");
    assert!(mounted, "{:?}", pod.containers[0].volume_mounts);
    let volume_names: Vec<&str> = pod.volumes.iter().flatten().map(|v| v.name.as_str()).collect();
    assert!(volume_names.contains(&"apiservice-cert") && volume_names.contains(&"webhook-cert"), "{volume_names:?}");
    let secret_volume = pod
        .volumes
        .iter()
        .flatten()
        .filter_map(|v| v.secret.as_ref())
        .any(|s| s.secret_name.as_deref() == Some("etcd-operator-service-cert"));
    assert!(secret_volume, "{:?}", pod.volumes);

    let configs: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let owned = ListParams::default().labels(&format!(
        "{}={CSV_NAME},{}={name}",
        keys::OWNER_LABEL,
        keys::OWNER_NAMESPACE_LABEL
    ));
    let found = configs.list(&owned).await?.items;
    assert_eq!(found.len(), 1, "{:?}", found.iter().map(|c| c.name_any()).collect::<Vec<_>>());
    let config = &found[0];
    assert!(config.name_any().starts_with(&format!("{generate_name}-")), "{}", config.name_any());
    let Some(hook) = config.webhooks.as_deref().and_then(<[_]>::first) else {
        anyhow::bail!("webhook configuration {} has no webhooks", config.name_any());
    };
    assert_eq!(hook.client_config.ca_bundle.as_ref().map(|b| b.0.clone()), Some(ca));
    let service_ref = hook.client_config.service.as_ref().expect("service reference");
    assert_eq!((service_ref.name.as_str(), service_ref.namespace.as_str()), ("etcd-operator-service", name.as_str()));
    assert_eq!(service_ref.path.as_deref(), Some("/validate-etcdcluster"));
    let groups: Api<OperatorGroup> = ns.api();
    let og_uid = groups.get("etcd-og").await?.uid().unwrap_or_default();
    // As upstream: the namespaces labelled with the group's uid (empty value).
    let selector = hook.namespace_selector.as_ref().and_then(|s| s.match_labels.clone());
    assert_eq!(selector, Some([(format!("olm.operatorgroup.uid/{og_uid}"), String::new())].into()));

    // Deleted by hand: put back (same fixed name, a new object).
    configs.delete(&config.name_any(), &DeleteParams::default()).await?;
    let old_uid = config.uid().unwrap_or_default();
    ns.wait_for("the webhook configuration to come back", TIMEOUT, &["clusterserviceversions"], || {
        let configs = configs.clone();
        let owned = owned.clone();
        let old_uid = old_uid.clone();
        async move {
            let items = configs.list(&owned).await.map_err(|e| e.to_string())?.items;
            let recreated = items.iter().filter(|c| c.uid().unwrap_or_default() != old_uid).count();
            match (recreated, items.len()) {
                (1, 1) => Ok(Some(())),
                (_, found) => Err(format!("{found} found, {recreated} of them new")),
            }
        }
    })
    .await?;
    wait_phase(&ns, CSV_NAME, "Succeeded", None, TIMEOUT).await?;

    // A certificate Secret someone overwrites (here: a certificate for another host, as an
    // expired or foreign CA would be) is noticed at once and replaced: new certificates, the
    // webhook's caBundle follows, the CSV back to Succeeded.
    let before = secrets.get("etcd-operator-service-cert").await?.data.unwrap_or_default();
    let foreign = json!({"data": {"olmCAKey": base64_of(b"not a certificate")}});
    secrets.patch("etcd-operator-service-cert", &PatchParams::default(), &Patch::Merge(&foreign)).await?;
    ns.wait_for("the overwritten serving certificate to be replaced", TIMEOUT, &["clusterserviceversions", "secrets"], || {
        let (secrets, before) = (secrets.clone(), before.clone());
        async move {
            let data = secrets.get("etcd-operator-service-cert").await.map_err(|e| e.to_string())?.data.unwrap_or_default();
            let ca = data.get("olmCAKey").map(|b| b.0.clone()).unwrap_or_default();
            let replaced = ca.starts_with(b"-----BEGIN CERTIFICATE-----") && Some(&ca) != before.get("olmCAKey").map(|b| &b.0);
            Ok::<_, String>(replaced.then_some(()))
        }
    })
    .await?;
    wait_phase(&ns, CSV_NAME, "Succeeded", None, TIMEOUT).await?;
    let new_ca = secrets.get("etcd-operator-service-cert").await?.data.unwrap_or_default()["olmCAKey"].0.clone();
    ns.wait_for("the webhook's caBundle to follow the new CA", TIMEOUT, &["clusterserviceversions"], || {
        let (configs, owned, new_ca) = (configs.clone(), owned.clone(), new_ca.clone());
        async move {
            let items = configs.list(&owned).await.map_err(|e| e.to_string())?.items;
            let bundle = items.first().and_then(|c| c.webhooks.as_ref()?.first()?.client_config.ca_bundle.clone()).map(|b| b.0);
            Ok::<_, String>((bundle.as_ref() == Some(&new_ca)).then_some(()))
        }
    })
    .await?;

    // Delegated-auth RBAC for the serving Deployment, outside the namespace.
    let cluster_bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    let kube_system_bindings: Api<RoleBinding> = Api::namespaced(client.clone(), "kube-system");
    let delegator = cluster_bindings.get("etcd-operator-service-system:auth-delegator").await?;
    assert_eq!(delegator.role_ref.name, "system:auth-delegator");
    assert_eq!(delegator.labels().get(keys::OWNER_NAMESPACE_LABEL), Some(&name));
    let reader = kube_system_bindings.get("etcd-operator-service-auth-reader").await?;
    assert_eq!(reader.role_ref.name, "extension-apiserver-authentication-reader");

    // Deleting the CSV removes the (cluster-scoped) configuration.
    csvs.delete(CSV_NAME, &DeleteParams::default()).await?;
    ns.wait_for("the webhook configuration to be deleted with the CSV", TIMEOUT, &["clusterserviceversions"], || {
        let configs = configs.clone();
        let owned = owned.clone();
        async move {
            let items = configs.list(&owned).await.map_err(|e| e.to_string())?.items;
            if items.is_empty() { Ok(Some(())) } else { Err(format!("{} left", items.len())) }
        }
    })
    .await?;
    assert!(cluster_bindings.get_opt("etcd-operator-service-system:auth-delegator").await?.is_none());
    assert!(kube_system_bindings.get_opt("etcd-operator-service-auth-reader").await?.is_none());
    ns.cleanup().await?;
    Ok(())
}

fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
