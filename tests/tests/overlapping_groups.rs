//! One operator installed for all namespaces from two namespaces at once (as happens when a
//! package is the dependency of another in one namespace and subscribed to directly in a second).
//! The two installs must not corrupt each other: the first one runs, its copy is never written
//! over the second's CSV nor the second's CSV over the copy, the second fails with upstream's
//! InterOperatorGroupOwnerConflict naming the first's group, and both namespaces finish
//! deleting (no OLM finalizer outlives the controller that removes it).
//!
//! A binary of its own: an all-namespaces install copies its CSV into every namespace of the
//! cluster, which other suites' namespaces must not see.

use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::{Api, ResourceExt};
use olm_api::keys;
use olm_api::v1alpha1::cluster_service_version::{ClusterServiceVersion, CsvPhase, CsvReason};
use olm_api::v1alpha1::subscription::{Subscription, SubscriptionConditionType};
use olm_e2e::controllers::{self, create_from_yaml};
use olm_e2e::widget::{subscribe_to_widgets, widget_csv};
use olm_testkit::TestNamespace;
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(120);
const OBJECTS: &[&str] = &["subscriptions", "installplans", "csvs", "operatorgroups"];

/// An all-namespaces OperatorGroup, a ConfigMap catalog serving `widget.v1.0.0` (all-namespaces
/// capable) and a Subscription to it, in `ns`.
async fn install_for_all_namespaces(ns: &TestNamespace, random: &str) -> anyhow::Result<()> {
    create_from_yaml(ns, "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata:\n  name: global\nspec: {}\n").await?;
    let mut csv = widget_csv("1.0.0", None, random);
    csv["spec"]["installModes"] = json!([{"type": "OwnNamespace", "supported": true}, {"type": "SingleNamespace", "supported": true},
                                         {"type": "MultiNamespace", "supported": false}, {"type": "AllNamespaces", "supported": true}]);
    subscribe_to_widgets(ns, random, "widget.v1.0.0", vec![csv], None).await
}

/// `widget.v1.0.0` in `ns` once `check` accepts it.
async fn wait_widget(ns: &TestNamespace, what: &str, check: impl Fn(&ClusterServiceVersion) -> bool + Clone) -> anyhow::Result<ClusterServiceVersion> {
    let csvs: Api<ClusterServiceVersion> = ns.api();
    Ok(ns
        .wait_for(what, TIMEOUT, OBJECTS, || {
            let (csvs, check) = (csvs.clone(), check.clone());
            async move {
                let csv = csvs.get_opt("widget.v1.0.0").await.map_err(|e| e.to_string())?;
                Ok::<_, String>(csv.filter(|c| check(c)))
            }
        })
        .await?)
}

fn copied_from(csv: &ClusterServiceVersion) -> Option<&str> {
    csv.labels().get(keys::COPIED_FROM_LABEL).map(String::as_str)
}

fn phase_reason(csv: &ClusterServiceVersion) -> (Option<&CsvPhase>, Option<&CsvReason>) {
    let status = csv.status.as_ref();
    (status.and_then(|s| s.phase.as_ref()), status.and_then(|s| s.reason.as_ref()))
}

/// Delete `ns` through the test kit (which waits for OLM to release its CSVs), then wait until
/// the namespace itself is gone: nothing of OLM's may keep it Terminating.
async fn delete_and_wait_gone(cluster: &olm_testkit::TestCluster, ns: TestNamespace) -> anyhow::Result<()> {
    let name = ns.name().to_owned();
    ns.cleanup().await?;
    let namespaces: Api<Namespace> = Api::all(cluster.client());
    olm_testkit::wait_for(&format!("namespace {name} to finish deleting"), TIMEOUT, || {
        let namespaces = namespaces.clone();
        let name = name.clone();
        async move {
            match namespaces.get_opt(&name).await.map_err(|e| e.to_string())? {
                None => Ok(Some(())),
                Some(left) => Err(format!("still there: {:?}", left.status.and_then(|s| s.conditions))),
            }
        }
    })
    .await?;
    Ok(())
}

#[tokio::test]
async fn two_all_namespaces_installs_of_one_operator_keep_apart_and_both_namespaces_delete() -> anyhow::Result<()> {
    let (cluster, _) = controllers::setup().await?;
    let first = cluster.namespace("overlap-a").await?;
    let second = cluster.namespace("overlap-b").await?;
    let random = first.name().rsplit('-').next().unwrap_or("x").to_owned();

    // The first install runs, and copies its CSV into the second namespace.
    install_for_all_namespaces(&first, &random).await?;
    wait_widget(&first, "the first install Succeeded", |c| phase_reason(c).0 == Some(&CsvPhase::Succeeded) && copied_from(c).is_none())
        .await?;
    let first_name = first.name().to_owned();
    wait_widget(&second, "the first install's copy in the second namespace", move |c| copied_from(c) == Some(first_name.as_str())).await?;

    // The second install's CSV replaces the copy, is its own (no copy label), and fails naming the
    // group that already provides its API to every namespace.
    install_for_all_namespaces(&second, &random).await?;
    let refused = wait_widget(&second, "the second install failed with InterOperatorGroupOwnerConflict", |c| {
        copied_from(c).is_none() && phase_reason(c) == (Some(&CsvPhase::Failed), Some(&CsvReason::InterOperatorGroupOwnerConflict))
    })
    .await?;
    let message = refused.status.as_ref().and_then(|s| s.message.clone()).unwrap_or_default();
    assert!(message.contains(&format!("OperatorGroup {}/global", first.name())), "{message}");
    assert!(refused.finalizers().iter().any(|f| f == keys::CSV_CLEANUP_FINALIZER));
    // The Subscription says it too, in the CSV's words.
    let subs: Api<Subscription> = second.api();
    let said = second
        .wait_for("the second Subscription says its CSV failed", TIMEOUT, OBJECTS, || {
            let subs = subs.clone();
            async move {
                let status = subs.get("widget").await.map_err(|e| e.to_string())?.status.unwrap_or_default();
                let failed = status.conditions.iter().flatten().find(|c| c.type_ == SubscriptionConditionType::InstalledCsvFailed).cloned();
                Ok::<_, String>(failed)
            }
        })
        .await?;
    assert_eq!(said.reason.as_deref(), Some("InterOperatorGroupOwnerConflict"));
    assert!(said.message.as_deref().unwrap_or_default().contains(&format!("OperatorGroup {}/global", first.name())), "{said:?}");

    // It stays that way: the first install neither copies over it nor fails.
    let csvs_first: Api<ClusterServiceVersion> = first.api();
    let csvs_second: Api<ClusterServiceVersion> = second.api();
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let mine = csvs_second.get("widget.v1.0.0").await?;
        assert_eq!(copied_from(&mine), None, "the second namespace's CSV became a copy: {:?}", mine.metadata.labels);
        assert_eq!(mine.uid(), refused.uid(), "the second namespace's CSV was replaced");
        let running = csvs_first.get("widget.v1.0.0").await?;
        assert_eq!(phase_reason(&running).0, Some(&CsvPhase::Succeeded), "{:?}", running.status);
    }

    // Both namespaces finish deleting, the refused install's first.
    delete_and_wait_gone(&cluster, second).await?;
    delete_and_wait_gone(&cluster, first).await?;
    cluster.kubectl(&["delete", "crd", &format!("widgets.{random}.olm.test"), "--wait=false"]).await?;
    Ok(())
}
