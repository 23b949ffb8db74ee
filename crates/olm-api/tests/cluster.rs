//! The generated CRDs and the types against the real local control plane (kube-apiserver
//! 1.36 from `olm dev`): the apiserver accepts the schemas, keeps what a CSV says, enforces
//! the closed enums and defaults, and what it returns decodes into the types.

mod support;

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use olm_api::v1alpha1::{ClusterServiceVersion, CsvPhase};
use olm_testkit::TestCluster;
use serde_json::{Value, json};
use support::testdata;

const MANAGER: &str = "olm-api-tests";

async fn cluster_with_crds() -> TestCluster {
    let cluster = olm_testkit::cluster().await.expect("local control plane");
    let api: Api<CustomResourceDefinition> = Api::all(cluster.client());
    let params = PatchParams::apply(MANAGER).force();
    for crd in olm_api::crds::all().expect("generate CRDs") {
        let name = crd.name_any();
        api.patch(&name, &params, &Patch::Apply(&crd)).await.unwrap_or_else(|err| panic!("apply CRD {name}: {err}"));
    }
    for crd in olm_api::crds::all().expect("generate CRDs") {
        let name = crd.name_any();
        olm_testkit::wait_for(&format!("CRD {name} Established"), Duration::from_secs(60), || {
            let api = api.clone();
            let name = name.clone();
            async move {
                let crd = api.get(&name).await.map_err(|e| e.to_string())?;
                let conditions = crd.status.and_then(|s| s.conditions).unwrap_or_default();
                if let Some(bad) = conditions.iter().find(|c| c.type_ == "NonStructuralSchema" && c.status == "True") {
                    return Err(format!("{name} is not structural: {}", bad.message.clone().unwrap_or_default()));
                }
                Ok::<_, String>(conditions.iter().any(|c| c.type_ == "Established" && c.status == "True").then_some(()))
            }
        })
        .await
        .expect("CRD established");
    }
    cluster
}

fn etcd_csv_json() -> Value {
    let path = testdata().join("etcd/bundles/0.9.4/manifests/etcdoperator.v0.9.4.clusterserviceversion.yaml");
    olm_api::yaml::from_path(path).expect("fixture")
}

#[tokio::test]
async fn the_etcd_csv_survives_the_apiserver_unchanged() {
    let cluster = cluster_with_crds().await;
    let namespace = cluster.namespace("olm-api-csv").await.expect("namespace");
    let mut raw = etcd_csv_json();
    raw["metadata"]["namespace"] = json!(namespace.name());
    let csv: ClusterServiceVersion = serde_json::from_value(raw.clone()).expect("typed");
    let api: Api<ClusterServiceVersion> = namespace.api();
    api.patch("etcdoperator.v0.9.4", &PatchParams::apply(MANAGER), &Patch::Apply(&csv)).await.expect("server-side apply of the typed CSV");

    let stored = api.get("etcdoperator.v0.9.4").await.expect("read back typed");
    let stored_json = serde_json::to_value(&stored).expect("serialise");
    // Nothing pruned, nothing defaulted, nothing reformatted in the spec.
    assert_eq!(stored_json["spec"], raw["spec"], "{:#?}", support::json_diff(&raw["spec"], &stored_json["spec"]));
    // Every annotation kept (an OLM controller running against the same cluster may add its own).
    for (key, value) in raw["metadata"]["annotations"].as_object().expect("annotations") {
        assert_eq!(&stored_json["metadata"]["annotations"][key], value, "annotation {key}");
    }

    let table = namespace.kubectl(&["get", "csv"]).await.expect("kubectl get csv").stdout;
    let header: Vec<&str> = table.lines().next().unwrap_or_default().split_whitespace().collect();
    assert_eq!(header, ["NAME", "DISPLAY", "VERSION", "RELEASE", "REPLACES", "PHASE"], "{table}");
    assert!(table.contains("etcdoperator.v0.9.4") && table.contains("etcdoperator.v0.9.2"), "{table}");

    // Status is a subresource; an unknown phase written by someone else reads back verbatim.
    let status = json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "status": {"phase": "Frobnicating", "reason": "SomethingNew", "message": "from the future"}});
    // The patch response is the stored object right after this write (a controller running
    // against the same cluster may change the status a moment later).
    let stored = api
        .patch_status("etcdoperator.v0.9.4", &PatchParams::apply(MANAGER).force(), &Patch::Apply(&status))
        .await
        .expect("status patch");
    assert_eq!(stored.phase(), Some(&CsvPhase::Other("Frobnicating".into())));
    namespace.cleanup().await.expect("cleanup");
}

#[tokio::test]
async fn closed_enums_are_enforced_by_the_apiserver() {
    let cluster = cluster_with_crds().await;
    let namespace = cluster.namespace("olm-api-enum").await.expect("namespace");
    let mut raw = etcd_csv_json();
    raw["metadata"]["namespace"] = json!(namespace.name());
    raw["spec"]["installModes"][0]["type"] = json!("Bogus");
    let api: Api<DynamicObject> = Api::namespaced_with(cluster.client(), namespace.name(), &ApiResource::erase::<ClusterServiceVersion>(&()));
    let raw: DynamicObject = serde_json::from_value(raw).expect("object");
    let err = api.create(&PostParams::default(), &raw).await.expect_err("Bogus install mode is rejected");
    let message = err.to_string();
    assert!(message.contains("spec.installModes[0].type") && message.contains("Unsupported value"), "{message}");
    assert!(message.contains("\"OwnNamespace\""), "the accepted values are listed: {message}");

    // `spec.release` carries upstream's CEL rules.
    let mut with_release = etcd_csv_json();
    with_release["metadata"]["namespace"] = json!(namespace.name());
    with_release["spec"]["release"] = json!("01.build");
    let object: DynamicObject = serde_json::from_value(with_release.clone()).expect("object");
    let err = api.create(&PostParams::default(), &object).await.expect_err("leading zero in release");
    assert!(err.to_string().contains("numeric identifiers in release version must not have leading zeros"), "{err}");
    with_release["spec"]["release"] = json!("1.build-2");
    let object: DynamicObject = serde_json::from_value(with_release).expect("object");
    api.create(&PostParams::default(), &object).await.expect("a valid release is accepted");

    let sub = json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": "etcd", "namespace": namespace.name()},
        "spec": {"name": "etcd", "source": "operatorhubio-catalog", "sourceNamespace": "olm", "installPlanApproval": "manual"}});
    let subs: Api<DynamicObject> = Api::namespaced_with(cluster.client(), namespace.name(), &ApiResource::erase::<olm_api::v1alpha1::Subscription>(&()));
    let sub: DynamicObject = serde_json::from_value(sub).expect("object");
    let err = subs.create(&PostParams::default(), &sub).await.expect_err("lower-case approval is rejected");
    assert!(err.to_string().contains("spec.installPlanApproval"), "{err}");
    namespace.cleanup().await.expect("cleanup");
}

#[tokio::test]
async fn optional_specs_defaults_and_served_versions() {
    let cluster = cluster_with_crds().await;
    let namespace = cluster.namespace("olm-api-og").await.expect("namespace");

    // An OperatorGroup without spec: the apiserver defaults the upgrade strategy.
    let group = json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
        "metadata": {"name": "global", "namespace": namespace.name()}});
    let groups: Api<olm_api::v1::OperatorGroup> = namespace.api();
    let group: olm_api::v1::OperatorGroup = serde_json::from_value(group).expect("typed");
    groups.create(&PostParams::default(), &group).await.expect("create OperatorGroup without spec");
    let stored = groups.get("global").await.expect("read v1");
    assert_eq!(stored.spec.upgrade_strategy, Some(olm_api::v1::UpgradeStrategy::Default));
    // The same object through the served v1alpha2 version.
    let old: Api<olm_api::v1alpha2::OperatorGroup> = namespace.api();
    assert_eq!(old.get("global").await.expect("read v1alpha2").name_any(), "global");

    // OperatorCondition written as v1, read as v2 (the storage version).
    let v1: Api<olm_api::v1::OperatorCondition> = namespace.api();
    let mut condition = olm_api::v1::OperatorCondition::new("etcdoperator.v0.9.4", Default::default());
    condition.spec.deployments = Some(vec!["etcd-operator".into()]);
    v1.create(&PostParams::default(), &condition).await.expect("create v1 OperatorCondition");
    let v2: Api<olm_api::v2::OperatorCondition> = namespace.api();
    let stored = v2.get("etcdoperator.v0.9.4").await.expect("read as v2");
    assert_eq!(stored.spec.deployments.as_deref(), Some(&["etcd-operator".to_owned()][..]));

    // A cluster-scoped OLMConfig without spec (as in upstream's chart).
    let configs: Api<olm_api::v1::OLMConfig> = Api::all(cluster.client());
    let name = olm_testkit::random_name("olm-api-config");
    let config: olm_api::v1::OLMConfig = serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1", "kind": "OLMConfig", "metadata": {"name": name}})).expect("typed");
    configs.create(&PostParams::default(), &config).await.expect("create OLMConfig without spec");
    assert!(!configs.get(&name).await.expect("read").copied_csvs_disabled());
    configs.delete(&name, &DeleteParams::default()).await.expect("delete OLMConfig");
    namespace.cleanup().await.expect("cleanup");
}

#[tokio::test]
async fn every_fixture_csv_can_be_server_side_applied_from_its_typed_form() {
    // What an InstallPlan executor does with a bundle's CSV: parse, then apply the typed
    // object. Extra keys (`spec.skipRange`, `spec.support`, old RBAC fields) and explicit
    // nulls in the files must not make the apiserver refuse it.
    let cluster = cluster_with_crds().await;
    let namespace = cluster.namespace("olm-api-ssa").await.expect("namespace");
    let api: Api<ClusterServiceVersion> = namespace.api();
    let mut params = PatchParams::apply(MANAGER);
    params.dry_run = true;
    let mut files = support::files_under(&testdata().join("csvs"), ".yaml");
    files.extend(support::files_under(&testdata().join("etcd"), ".clusterserviceversion.yaml"));
    let mut refused = Vec::new();
    for file in &files {
        let mut csv: ClusterServiceVersion = olm_api::yaml::from_path(file).expect("fixture parses");
        csv.metadata.namespace = Some(namespace.name().to_owned());
        let name = csv.name_any();
        if let Err(err) = api.patch(&name, &params, &Patch::Apply(&csv)).await {
            refused.push(format!("{}: {err}", file.display()));
        }
    }
    assert!(files.len() > 150, "{}", files.len());
    assert!(refused.is_empty(), "{} of {} refused:\n{}", refused.len(), files.len(), refused.join("\n"));
    namespace.cleanup().await.expect("cleanup");
}
