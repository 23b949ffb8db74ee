//! A conversion webhook declared by a CSV, against the real local control plane: the CRDs it
//! lists get `spec.conversion` strategy Webhook pointing at the operator's Service with the
//! generated CA; a hand edit is put back; deleting the CSV (nothing replaces it) sets the
//! conversion back to None. The CRD has a single version, so the API server never calls the
//! webhook (kwok pods serve nothing).

use olm_e2e::controllers;

use std::time::Duration;

use controllers::{create_csv_with_permissions, create_own_namespace_group, csv_message, edit_csv, load_csv, setup, wait_phase};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{CustomResourceConversion, CustomResourceDefinition};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use olm_api::v1::operator_group::{OperatorGroup, OperatorGroupSpec};
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use serde_json::json;

const ETCD: &str = "etcd-0.9.4/etcdoperator.v0.9.4.clusterserviceversion.yaml";
/// Distinct names: the all-namespaces operator of one test is copied into the other's namespace.
const CSV_NAME: &str = "widget-operator.v1.0.0";
const MODES_CSV_NAME: &str = "widget-modes.v1.0.0";
const TIMEOUT: Duration = Duration::from_secs(90);

/// A single-version CRD of a group unique to the test namespace.
fn widget_crd(group: &str) -> anyhow::Result<CustomResourceDefinition> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widgets.{group}")},
        "spec": {
            "group": group, "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                          "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}],
        },
    }))?)
}

/// Create [`widget_crd`] for the group `<namespace>.example.com`: returns the CRD API, the
/// group and the CRD's name.
async fn create_widget_crd(
    client: &kube::Client,
    namespace: &str,
) -> anyhow::Result<(Api<CustomResourceDefinition>, String, String)> {
    let group = format!("{namespace}.example.com");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = widget_crd(&group)?;
    let crd_name = crd.name_any();
    crds.create(&PostParams::default(), &crd).await?;
    Ok((crds, group, crd_name))
}

async fn conversion_of(crds: &Api<CustomResourceDefinition>, name: &str) -> Result<CustomResourceConversion, String> {
    let crd = crds.get(name).await.map_err(|e| e.to_string())?;
    Ok(crd.spec.conversion.unwrap_or_default())
}

#[tokio::test]
async fn a_conversion_webhook_configures_the_crds_it_lists() -> anyhow::Result<()> {
    let (cluster, _admin) = setup().await?;
    let ns = cluster.namespace("csv-conversion").await?;
    let name = ns.name().to_owned();
    let (crds, group, crd_name) = create_widget_crd(&cluster.client(), &name).await?;

    // An all-namespaces group: operators with conversion webhooks support nothing else.
    let groups: Api<OperatorGroup> = ns.api();
    groups
        .create(&PostParams::default(), &OperatorGroup::new("global", OperatorGroupSpec::default()))
        .await?;
    let csv = edit_csv(&load_csv(ETCD, &name)?, |value| {
        value["metadata"]["name"] = json!(CSV_NAME);
        value["spec"]["customresourcedefinitions"] = json!({"owned": [
            {"name": crd_name, "version": "v1", "kind": "Widget", "displayName": "Widget"},
        ]});
        value["spec"]["installModes"] = json!([
            {"type": "OwnNamespace", "supported": false}, {"type": "SingleNamespace", "supported": false},
            {"type": "MultiNamespace", "supported": false}, {"type": "AllNamespaces", "supported": true},
        ]);
        value["spec"]["webhookdefinitions"] = json!([{
            "generateName": format!("cwidget.{group}"), "type": "ConversionWebhook", "deploymentName": "etcd-operator",
            "containerPort": 9443, "webhookPath": "/convert", "admissionReviewVersions": ["v1"],
            "conversionCRDs": [crd_name],
        }]);
    })?;
    create_csv_with_permissions(&ns, &csv, false).await?;
    wait_phase(&ns, CSV_NAME, "Succeeded", Some("InstallSucceeded"), TIMEOUT).await?;

    let secrets: Api<Secret> = ns.api();
    let ca = secrets.get("etcd-operator-service-cert").await?.data.unwrap_or_default()["olmCAKey"].0.clone();
    let conversion = conversion_of(&crds, &crd_name).await.map_err(anyhow::Error::msg)?;
    assert_eq!(conversion.strategy, "Webhook");
    let webhook = conversion.webhook.expect("a webhook");
    assert_eq!(webhook.conversion_review_versions, ["v1"]);
    let client_config = webhook.client_config.expect("a client config");
    assert_eq!(client_config.ca_bundle.map(|b| b.0), Some(ca));
    let service = client_config.service.expect("a service reference");
    assert_eq!(
        (service.namespace.as_str(), service.name.as_str(), service.path.as_deref(), service.port),
        (name.as_str(), "etcd-operator-service", Some("/convert"), Some(9443))
    );

    // Set back to None by hand: the CRD watch brings the webhook back.
    let reset = json!({"spec": {"conversion": {"strategy": "None", "webhook": null}}});
    crds.patch(&crd_name, &PatchParams::default(), &Patch::Merge(&reset)).await?;
    ns.wait_for("the conversion webhook to be configured again", TIMEOUT, &["clusterserviceversions"], || {
        let crds = crds.clone();
        let crd_name = crd_name.clone();
        async move {
            let conversion = conversion_of(&crds, &crd_name).await?;
            if conversion.strategy == "Webhook" { Ok(Some(())) } else { Err(format!("strategy {}", conversion.strategy)) }
        }
    })
    .await?;
    wait_phase(&ns, CSV_NAME, "Succeeded", None, TIMEOUT).await?;

    // Deleted, and nothing replaces it: the CRD must not keep calling a webhook that is gone.
    let csvs: Api<ClusterServiceVersion> = ns.api();
    csvs.delete(CSV_NAME, &DeleteParams::default()).await?;
    ns.wait_for("the conversion to go back to None", TIMEOUT, &["clusterserviceversions"], || {
        let crds = crds.clone();
        let crd_name = crd_name.clone();
        async move {
            let conversion = conversion_of(&crds, &crd_name).await?;
            match (conversion.strategy.as_str(), conversion.webhook) {
                ("None", None) => Ok(Some(())),
                (strategy, webhook) => Err(format!("strategy {strategy}, webhook {webhook:?}")),
            }
        }
    })
    .await?;
    crds.delete(&crd_name, &DeleteParams::default()).await?;
    ns.cleanup().await?;
    Ok(())
}

#[tokio::test]
async fn a_conversion_webhook_of_an_operator_that_supports_more_than_all_namespaces_fails_the_install() -> anyhow::Result<()> {
    let (cluster, _admin) = setup().await?;
    let ns = cluster.namespace("csv-conversion-modes").await?;
    let name = ns.name().to_owned();
    let (crds, group, crd_name) = create_widget_crd(&cluster.client(), &name).await?;
    create_own_namespace_group(&ns, "own").await?;
    let csv = edit_csv(&load_csv(ETCD, &name)?, |value| {
        value["metadata"]["name"] = json!(MODES_CSV_NAME);
        value["spec"]["customresourcedefinitions"] = json!({"owned": [
            {"name": crd_name, "version": "v1", "kind": "Widget", "displayName": "Widget"},
        ]});
        value["spec"]["webhookdefinitions"] = json!([{
            "generateName": format!("cwidget.{group}"), "type": "ConversionWebhook", "deploymentName": "etcd-operator",
            "containerPort": 9443, "admissionReviewVersions": ["v1"], "conversionCRDs": [crd_name],
        }]);
    })?;
    create_csv_with_permissions(&ns, &csv, false).await?;
    wait_phase(&ns, MODES_CSV_NAME, "Failed", Some("InstallComponentFailed"), TIMEOUT).await?;
    let message = csv_message(&ns, MODES_CSV_NAME).await?;
    assert_eq!(
        message,
        "install strategy failed: unable to manage conversion webhook: CSVs with conversion webhooks must support only AllNamespaces"
    );
    let conversion = conversion_of(&crds, &crd_name).await.map_err(anyhow::Error::msg)?;
    assert_eq!(conversion.strategy, "None", "the CRD is left alone");
    crds.delete(&crd_name, &DeleteParams::default()).await?;
    ns.cleanup().await?;
    Ok(())
}
