//! An owned APIService that already exists, against the real local control plane: one that
//! belongs to another CSV is never taken over (the CSV fails with OwnerConflict); once it is
//! labelled for this CSV it is adopted (Service reference and CA bundle filled in) and deleted
//! with the CSV. Kept short: kwok pods serve nothing, and an unavailable APIService disturbs
//! API discovery (namespace deletion waits for it) until it is gone.

use olm_e2e::controllers;

use std::collections::BTreeMap;
use std::time::Duration;

use controllers::{create_csv_with_permissions, create_own_namespace_group, csv_message, edit_csv, load_csv, setup, wait_gone, wait_phase};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::{APIService, APIServiceSpec};
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use olm_api::keys;
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use serde_json::json;

const ETCD: &str = "etcd-0.9.4/etcdoperator.v0.9.4.clusterserviceversion.yaml";
const CSV_NAME: &str = "widget-apiserver.v1.0.0";
const TIMEOUT: Duration = Duration::from_secs(90);

fn owner_labels(name: &str, namespace: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (keys::OWNER_LABEL.to_owned(), name.to_owned()),
        (keys::OWNER_NAMESPACE_LABEL.to_owned(), namespace.to_owned()),
        (keys::OWNER_KIND_LABEL.to_owned(), "ClusterServiceVersion".to_owned()),
    ])
}

#[tokio::test]
async fn an_existing_apiservice_is_adopted_only_when_no_other_csv_owns_it() -> anyhow::Result<()> {
    let (cluster, _admin) = setup().await?;
    let client = cluster.client();
    let ns = cluster.namespace("csv-apiservice").await?;
    let name = ns.name().to_owned();
    let group = format!("{name}.example.com");
    let api_name = format!("v1alpha1.{group}");

    // Made earlier for another operator of the namespace (local: no Service behind it). That
    // operator's CSV exists: an APIService whose CSV does not is an orphan, and OLM deletes it.
    olm_e2e::controllers::create_from_yaml(
        &ns,
        "apiVersion: operators.coreos.com/v1alpha1\nkind: ClusterServiceVersion\nmetadata:\n  name: other-operator.v1.0.0\nspec:\n  displayName: other\n  install:\n    strategy: deployment\n    spec:\n      deployments: []\n",
    )
    .await?;
    let api_services: Api<APIService> = Api::all(client.clone());
    let existing = APIService {
        metadata: ObjectMeta {
            name: Some(api_name.clone()),
            labels: Some(owner_labels("other-operator.v1.0.0", &name)),
            ..Default::default()
        },
        spec: Some(APIServiceSpec {
            group: Some(group.clone()),
            version: Some("v1alpha1".into()),
            group_priority_minimum: 2000,
            version_priority: 15,
            ..Default::default()
        }),
        status: None,
    };
    api_services.create(&PostParams::default(), &existing).await?;

    create_own_namespace_group(&ns, "own").await?;
    let csv = edit_csv(&load_csv(ETCD, &name)?, |value| {
        value["metadata"]["name"] = json!(CSV_NAME);
        value["spec"]["customresourcedefinitions"] = json!({});
        value["spec"]["apiservicedefinitions"] = json!({"owned": [{
            "name": format!("widgets.{group}"), "group": group, "version": "v1alpha1", "kind": "Widget",
            "displayName": "Widget", "deploymentName": "etcd-operator", "containerPort": 8443,
        }]});
    })?;
    create_csv_with_permissions(&ns, &csv, false).await?;

    let result = async {
        wait_phase(&ns, CSV_NAME, "Failed", Some("OwnerConflict"), TIMEOUT).await?;
        let message = csv_message(&ns, CSV_NAME).await?;
        assert!(
            message.starts_with(&format!("unable to adopt APIService {api_name}"))
                && message.contains(&format!("{name}/other-operator.v1.0.0")),
            "{message}"
        );
        let untouched = api_services.get(&api_name).await?;
        assert_eq!(untouched.labels().get(keys::OWNER_LABEL).map(String::as_str), Some("other-operator.v1.0.0"));
        assert!(untouched.spec.as_ref().and_then(|s| s.service.as_ref()).is_none(), "not taken over");

        // Relabelled for this CSV (say, left from an earlier install of it): adopted, with
        // the operator's Service and the generated CA. The APIService watch notices at once.
        let relabel = json!({"metadata": {"labels": {keys::OWNER_LABEL: CSV_NAME}}});
        api_services.patch(&api_name, &PatchParams::default(), &Patch::Merge(&relabel)).await?;
        let secrets: Api<Secret> = ns.api();
        let adopted = ns
            .wait_for("the APIService to be adopted", TIMEOUT, &["clusterserviceversions"], || {
                let api_services = api_services.clone();
                let secrets = secrets.clone();
                let api_name = api_name.clone();
                async move {
                    let api = api_services.get(&api_name).await.map_err(|e| e.to_string())?;
                    let spec = api.spec.clone().unwrap_or_default();
                    let Some(service) = spec.service else {
                        return Err("no service reference yet".to_owned());
                    };
                    let secret = secrets.get_opt("etcd-operator-service-cert").await.map_err(|e| e.to_string())?;
                    let ca = secret.and_then(|s| s.data).and_then(|d| d.get("olmCAKey").map(|b| b.0.clone()));
                    if spec.ca_bundle.map(|b| b.0) != ca {
                        return Err("caBundle is not the generated CA yet".to_owned());
                    }
                    Ok(Some((service, api.labels().clone())))
                }
            })
            .await?;
        let (service, labels) = adopted;
        assert_eq!(
            (service.namespace.as_deref(), service.name.as_deref(), service.port),
            (Some(name.as_str()), Some("etcd-operator-service"), Some(443))
        );
        assert_eq!(labels.get(keys::OWNER_NAMESPACE_LABEL), Some(&name));

        // Deleted with the CSV.
        let csvs: Api<ClusterServiceVersion> = ns.api();
        csvs.delete(CSV_NAME, &DeleteParams::default()).await?;
        let what = "the adopted APIService to be deleted with the CSV";
        wait_gone(&ns, what, &api_services, &api_name, &["clusterserviceversions"]).await?;
        anyhow::Ok(())
    }
    .await;
    // Never leave an APIService behind: it would disturb discovery for everything else.
    match api_services.delete(&api_name, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => {}
        Err(err) => return Err(err.into()),
    }
    result?;
    ns.cleanup().await?;
    Ok(())
}
