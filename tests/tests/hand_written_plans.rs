//! InstallPlans whose `status.plan` a client wrote by hand, as upstream's e2e suite and other
//! tools write them: approved, Automatic, steps naming their API as upstream's executor reads
//! them (`version: apiextensions.k8s.io/v1` and no group). OLM applies them and completes the
//! plan; a CRD applied for a CSV says so in an `operatorframework.io/installed-alongside-<hash>`
//! annotation, one for each CSV that installed it and still exists.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use olm_api::v1alpha1::install_plan::{InstallPlan, InstallPlanPhase};
use olm_e2e::controllers::{self, create_from_yaml};
use olm_testkit::TestNamespace;
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(60);

/// Create the approved plan `name` and write its status by hand: one step applying `manifest`
/// (a `kind` of `group`/`version`) for the CSV `resolving`.
async fn write_hand_written_plan(ns: &TestNamespace, name: &str, resolving: &str, (group, version, kind): (&str, &str, &str), manifest: &serde_json::Value) -> anyhow::Result<()> {
    create_from_yaml(
        ns,
        &format!("apiVersion: operators.coreos.com/v1alpha1\nkind: InstallPlan\nmetadata:\n  name: {name}\nspec:\n  approval: Automatic\n  approved: true\n  clusterServiceVersionNames: []\n"),
    )
    .await?;
    let plans: Api<InstallPlan> = ns.api();
    let status = json!({"status": {"phase": "Installing", "catalogSources": [], "plan": [{
        "resolving": resolving, "status": "Unknown",
        "resource": {"name": manifest["metadata"]["name"], "version": version, "kind": kind, "group": group,
                     "sourceName": "", "sourceNamespace": "", "manifest": manifest.to_string()}}]}});
    plans.patch_status(name, &PatchParams::default(), &Patch::Merge(&status)).await?;
    Ok(())
}

/// [`write_hand_written_plan`] (no group named) and wait until the plan is Complete.
async fn run_hand_written_plan(ns: &TestNamespace, name: &str, resolving: &str, kind: &str, version: &str, manifest: &serde_json::Value) -> anyhow::Result<()> {
    write_hand_written_plan(ns, name, resolving, ("", version, kind), manifest).await?;
    wait_complete(ns, name).await
}

/// Wait until the plan `name` is Complete (an error once it Failed).
async fn wait_complete(ns: &TestNamespace, name: &str) -> anyhow::Result<()> {
    let plans: Api<InstallPlan> = ns.api();
    ns.wait_for(&format!("InstallPlan {name} Complete"), TIMEOUT, &["installplans"], || {
        let plans = plans.clone();
        async move {
            let plan = plans.get(name).await.map_err(|e| e.to_string())?;
            let status = plan.status.unwrap_or_default();
            match status.phase {
                InstallPlanPhase::Complete => Ok(Some(())),
                InstallPlanPhase::Failed => Err(format!("failed: {:?}", status.message)),
                _ => Ok(None),
            }
        }
    })
    .await?;
    Ok(())
}

#[tokio::test]
async fn a_hand_written_crd_step_is_applied_and_says_which_csvs_it_came_with() -> anyhow::Result<()> {
    let (cluster, _) = controllers::setup().await?;
    let ns = cluster.namespace("hand-plan").await?;
    let namespace = ns.name().to_owned();
    controllers::create_own_namespace_group(&ns, "og").await?;
    let group = format!("{}.hand.olm.test", namespace.rsplit('-').next().unwrap_or("x"));
    let crd_name = format!("tests.{group}");
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": crd_name},
        "spec": {"group": group, "scope": "Cluster",
                 "names": {"plural": "tests", "singular": "test", "kind": "Test", "listKind": "TestList"},
                 "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}}}]}});
    run_hand_written_plan(&ns, "test-plan", "test-csv", "CustomResourceDefinition", "apiextensions.k8s.io/v1", &crd).await?;
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.client());
    let alongside = |crd: &CustomResourceDefinition| {
        let mut values: Vec<String> = crd
            .annotations()
            .iter()
            .filter(|(k, _)| k.starts_with("operatorframework.io/installed-alongside-"))
            .map(|(_, v)| v.clone())
            .collect();
        values.sort();
        values
    };
    assert_eq!(alongside(&crds.get(&crd_name).await?), vec![format!("{namespace}/test-csv")]);

    // A second plan for another CSV (which exists) applies the same CRD: both are named. The
    // first CSV never existed, so it is dropped, as upstream drops CSVs that are gone.
    create_from_yaml(
        &ns,
        "apiVersion: operators.coreos.com/v1alpha1\nkind: ClusterServiceVersion\nmetadata:\n  name: test-csv-two\nspec:\n  displayName: two\n  install:\n    strategy: deployment\n    spec:\n      deployments: []\n",
    )
    .await?;
    run_hand_written_plan(&ns, "test-plan-two", "test-csv-two", "CustomResourceDefinition", "apiextensions.k8s.io/v1", &crd).await?;
    assert_eq!(alongside(&crds.get(&crd_name).await?), vec![format!("{namespace}/test-csv-two")]);
    run_hand_written_plan(&ns, "test-plan-three", "test-csv-three", "CustomResourceDefinition", "apiextensions.k8s.io/v1", &crd).await?;
    assert_eq!(
        alongside(&crds.get(&crd_name).await?),
        vec![format!("{namespace}/test-csv-three"), format!("{namespace}/test-csv-two")],
        "the CSV that exists is kept beside the new one"
    );

    // A Service step (core group, no CSV to resolve): applied too.
    let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "test-service", "namespace": namespace},
        "spec": {"type": "ClusterIP", "ports": [{"port": 12345}]}});
    run_hand_written_plan(&ns, "test-plan-service", "", "Service", "v1", &service).await?;

    crds.delete(&crd_name, &DeleteParams::default()).await?;
    ns.cleanup().await?;
    Ok(())
}

/// A step of a kind the cluster does not serve (upstream's e2e suite writes a
/// VerticalPodAutoscaler) waits in Installing with upstream's words, retried for the retry
/// window as the API may be on its way; a kind the cluster serves but OLM does not install from
/// bundles fails at once, naming it.
#[tokio::test]
async fn a_step_of_an_api_the_cluster_does_not_serve_is_retried_with_upstreams_message() -> anyhow::Result<()> {
    let (cluster, _) = controllers::setup().await?;
    let ns = cluster.namespace("hand-plan-missing").await?;
    controllers::create_own_namespace_group(&ns, "og").await?;
    let plans: Api<InstallPlan> = ns.api();
    let write = |name: &'static str, group: &'static str, kind: &'static str| {
        let manifest = json!({"apiVersion": format!("{group}/v1"), "kind": kind, "metadata": {"name": "my.thing"}});
        let ns = &ns;
        async move { write_hand_written_plan(ns, name, "test-csv", (group, "v1", kind), &manifest).await }
    };
    let status_of = |name: &'static str, want: InstallPlanPhase, what: &'static str| {
        let plans = plans.clone();
        ns.wait_for(what, TIMEOUT, &["installplans"], move || {
            let (plans, want) = (plans.clone(), want.clone());
            async move {
                let status = plans.get(name).await.map_err(|e| e.to_string())?.status.unwrap_or_default();
                Ok::<_, String>((status.phase == want && status.message.is_some()).then_some(status))
            }
        })
    };
    write("missing-api", "verticalpodautoscalers.autoscaling.k8s.io", "VerticalPodAutoscaler").await?;
    let waiting = status_of("missing-api", InstallPlanPhase::Installing, "the plan of a missing API Installing, with a message").await?;
    let message = waiting.message.unwrap_or_default();
    assert!(
        message.contains("api-server resource not found installing VerticalPodAutoscaler my.thing: GroupVersionKind verticalpodautoscalers.autoscaling.k8s.io/v1, Kind=VerticalPodAutoscaler not found on the cluster"),
        "{message}"
    );
    write("served-kind", "batch", "CronJob").await?;
    let failed = status_of("served-kind", InstallPlanPhase::Failed, "the plan of a served but unsupported kind Failed").await?;
    let message = failed.message.unwrap_or_default();
    assert!(message.contains("is a CronJob (batch/v1), which OLM does not install from bundles"), "{message}");
    ns.cleanup().await?;
    Ok(())
}

/// A hand-written step naming a ClusterServiceVersion as owner without its uid (as upstream's
/// e2e suite writes it) waits while that CSV does not exist, and completes once it does, with
/// the uid filled in.
#[tokio::test]
async fn a_step_owned_by_a_csv_named_without_uid_waits_for_it() -> anyhow::Result<()> {
    use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
    let (cluster, _) = controllers::setup().await?;
    let ns = cluster.namespace("hand-plan-owner").await?;
    controllers::create_own_namespace_group(&ns, "og").await?;
    // No apiVersion or kind: upstream's suite serializes a typed object without them.
    let owned = json!({
        "metadata": {"name": "test-owned", "ownerReferences": [{"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion", "name": "test-owner", "uid": ""}]}});
    let plans: Api<InstallPlan> = ns.api();
    let waiting = tokio::spawn({
        let ns_name = ns.name().to_owned();
        let plans = plans.clone();
        async move {
            // Meanwhile: Installing, saying which owner it waits for.
            let deadline = std::time::Instant::now() + TIMEOUT;
            loop {
                if let Ok(plan) = plans.get("owned-plan").await {
                    let status = plan.status.unwrap_or_default();
                    let message = status.message.unwrap_or_default();
                    if status.phase == InstallPlanPhase::Installing && message.contains(&format!("owner ClusterServiceVersion {ns_name}/test-owner does not exist")) {
                        return Ok(());
                    }
                }
                if std::time::Instant::now() > deadline {
                    return Err(anyhow::anyhow!("the plan never said it waits for its owner"));
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    });
    let completed = run_hand_written_plan(&ns, "owned-plan", "", "ConfigMap", "v1", &owned);
    let create_owner = async {
        waiting.await??;
        create_from_yaml(
            &ns,
            "apiVersion: operators.coreos.com/v1alpha1\nkind: ClusterServiceVersion\nmetadata:\n  name: test-owner\nspec:\n  displayName: owner\n  install:\n    strategy: deployment\n    spec:\n      deployments: []\n",
        )
        .await
    };
    let (completed, created) = tokio::join!(completed, create_owner);
    created?;
    completed?;
    let csv: ClusterServiceVersion = ns.api().get("test-owner").await?;
    let cm: k8s_openapi::api::core::v1::ConfigMap = ns.api().get("test-owned").await?;
    let owners = cm.metadata.owner_references.unwrap_or_default();
    assert_eq!(owners.first().map(|o| o.uid.clone()), csv.metadata.uid, "the owner's uid filled in");
    ns.cleanup().await?;
    Ok(())
}

/// A step whose object has a field the cluster's schema for its kind does not declare (a
/// ServiceMonitor newer than the cluster's CRD, as loki-operator 0.11.0's against
/// prometheus-operator 0.56's) is written without it, as upstream writes it: the plan
/// completes, and its Event names the field. Server-side apply alone refused the object.
#[tokio::test]
async fn a_field_the_clusters_schema_lacks_is_left_out_and_named() -> anyhow::Result<()> {
    use k8s_openapi::api::events::v1::Event;
    use kube::api::{ApiResource, DynamicObject, ListParams};
    let (cluster, _) = controllers::setup().await?;
    let ns = cluster.namespace("hand-plan-pruned").await?;
    controllers::create_own_namespace_group(&ns, "og").await?;
    // ServiceMonitor's CRD as an older prometheus-operator's, without serviceDiscoveryRole,
    // unless the cluster has one (the conformance suite's, from 0.56.3, lacks it too).
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.client());
    let crd_name = "servicemonitors.monitoring.coreos.com";
    let made_here = crds.get_opt(crd_name).await?.is_none();
    if made_here {
        let open = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
        let crd: CustomResourceDefinition = serde_json::from_value(json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": crd_name},
            "spec": {"group": "monitoring.coreos.com", "scope": "Namespaced",
                     "names": {"plural": "servicemonitors", "singular": "servicemonitor", "kind": "ServiceMonitor", "listKind": "ServiceMonitorList"},
                     "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                         "spec": {"type": "object", "properties": {"selector": open, "endpoints": {"type": "array", "items": open}}}}}}}]}}))?;
        crds.create(&Default::default(), &crd).await?;
    }
    let manifest = json!({"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor", "metadata": {"name": "metrics"},
        "spec": {"selector": {}, "endpoints": [{"port": "metrics"}], "serviceDiscoveryRole": "EndpointSlice"}});
    // Until the CRD is served the step waits (the plan stays Installing), then completes.
    write_hand_written_plan(&ns, "pruned", "test-csv", ("monitoring.coreos.com", "v1", "ServiceMonitor"), &manifest).await?;
    wait_complete(&ns, "pruned").await?;
    let monitors: Api<DynamicObject> = Api::namespaced_with(cluster.client(), ns.name(), &ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk("monitoring.coreos.com", "v1", "ServiceMonitor")));
    let written = monitors.get("metrics").await?;
    assert_eq!(written.data["spec"]["endpoints"], json!([{"port": "metrics"}]), "what the schema declares is written");
    assert!(written.data["spec"].get("serviceDiscoveryRole").is_none(), "{:?}", written.data);
    let events: Api<Event> = ns.api();
    let notes: Vec<String> = events
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("FieldsNotInSchema"))
        .filter_map(|e| e.note)
        .collect();
    assert!(
        notes.iter().any(|n| n.contains(".spec.serviceDiscoveryRole") && n.contains("ServiceMonitor")),
        "no Event naming the field left out: {notes:?}"
    );
    ns.cleanup().await?;
    if made_here {
        crds.delete(crd_name, &DeleteParams::default()).await?;
    }
    Ok(())
}
