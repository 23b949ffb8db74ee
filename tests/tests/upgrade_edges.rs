//! Upgrades that jump: the next bundle is reached by `skips` or an `olm.skipRange`, not by
//! `replaces`, as in most real channels. The new CSV must take over from the installed one
//! (its `spec.replaces` names it, whatever its manifest says), the old CSV must go, and the
//! Subscription must end at the head, with both CSVs checked along the way.

use std::time::Duration;

use kube::Api;
use olm_api::v1alpha1::cluster_service_version::{ClusterServiceVersion, CsvPhase};
use olm_api::v1alpha1::subscription::{Subscription, SubscriptionState};
use olm_e2e::controllers;
use olm_e2e::widget::{subscribe_to_widgets, widget_csv};
use olm_testkit::TestNamespace;
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(120);
const OBJECTS: &[&str] = &["subscriptions", "installplans", "csvs", "catalogsources"];

/// Serve `csvs` from a ConfigMap catalog in `ns`, subscribe from `widget.v1.0.0` (Automatic),
/// and check that the Subscription ends on `widget.v2.0.0` having replaced v1.
async fn walk_from_v1_to_v2(ns: &TestNamespace, random: &str, csvs: Vec<serde_json::Value>) -> anyhow::Result<()> {
    subscribe_and_reach_v2(ns, random, csvs, Some("widget.v1.0.0")).await
}

/// Serve `csvs` from a ConfigMap catalog in `ns`, subscribe (from `starting_csv`, or the head),
/// and check that the Subscription ends on `widget.v2.0.0`, having replaced what it started on.
async fn subscribe_and_reach_v2(
    ns: &TestNamespace,
    random: &str,
    csvs: Vec<serde_json::Value>,
    starting_csv: Option<&str>,
) -> anyhow::Result<()> {
    controllers::create_own_namespace_group(ns, "widgets").await?;
    subscribe_to_widgets(ns, random, "widget.v2.0.0", csvs, starting_csv).await?;

    // v2 succeeds, naming the CSV it replaced although its manifest does not.
    let csvs: Api<ClusterServiceVersion> = ns.api();
    let v2 = ns
        .wait_for("widget.v2.0.0 Succeeded", TIMEOUT, OBJECTS, || {
            let csvs = csvs.clone();
            async move {
                let csv = csvs.get_opt("widget.v2.0.0").await.map_err(|e| e.to_string())?;
                Ok::<_, String>(csv.filter(|c| c.status.as_ref().and_then(|s| s.phase.as_ref()) == Some(&CsvPhase::Succeeded)))
            }
        })
        .await?;
    if let Some(start) = starting_csv {
        assert_eq!(v2.spec.replaces.as_deref(), Some(start));
    }
    // v1 is replaced and removed, never left Failed beside it.
    ns.wait_for("widget.v1.0.0 to go", TIMEOUT, OBJECTS, || {
        let csvs = csvs.clone();
        async move {
            match csvs.get_opt("widget.v1.0.0").await.map_err(|e| e.to_string())? {
                None => Ok(Some(())),
                Some(v1) => {
                    let phase = v1.status.as_ref().and_then(|s| s.phase.clone());
                    if phase == Some(CsvPhase::Failed) {
                        Err(format!("widget.v1.0.0 failed: {:?}", v1.status.and_then(|s| s.message)))
                    } else {
                        Ok(None)
                    }
                }
            }
        }
    })
    .await?;
    // The Subscription is at the head, and says so.
    let subs: Api<Subscription> = ns.api();
    ns.wait_for("Subscription widget AtLatestKnown on widget.v2.0.0", TIMEOUT, OBJECTS, || {
        let subs = subs.clone();
        async move {
            let sub = subs.get("widget").await.map_err(|e| e.to_string())?;
            let status = sub.status.unwrap_or_default();
            Ok::<_, String>(
                (status.installed_csv.as_deref() == Some("widget.v2.0.0")
                    && status.state == Some(SubscriptionState::AtLatestKnown))
                .then_some(()),
            )
        }
    })
    .await?;
    Ok(())
}

async fn finish(cluster: &olm_testkit::TestCluster, ns: TestNamespace, random: &str) -> anyhow::Result<()> {
    ns.cleanup().await?;
    cluster
        .kubectl(&["delete", "crd", &format!("widgets.{random}.olm.test"), "--wait=false"])
        .await?;
    Ok(())
}

fn random_of(ns: &TestNamespace) -> String {
    ns.name().rsplit('-').next().unwrap_or("x").to_owned()
}

#[tokio::test]
async fn an_upgrade_through_skips_replaces_the_installed_csv() -> anyhow::Result<()> {
    let (cluster, _) = controllers::setup().await?;
    let ns = cluster.namespace("edge-skips").await?;
    let random = random_of(&ns);
    // v2 replaces v1.5 and skips v1: from v1 the resolver jumps straight to v2, whose manifest
    // names v1.5, not the CSV it really replaces.
    let mut v2 = widget_csv("2.0.0", Some("widget.v1.5.0"), &random);
    v2["spec"]["skips"] = json!(["widget.v1.0.0"]);
    let csvs = vec![widget_csv("1.0.0", None, &random), widget_csv("1.5.0", Some("widget.v1.0.0"), &random), v2];
    walk_from_v1_to_v2(&ns, &random, csvs).await?;
    finish(&cluster, ns, &random).await
}

#[tokio::test]
async fn a_head_whose_skip_range_covers_its_own_version_ends_at_latest_known() -> anyhow::Result<()> {
    let (cluster, _) = controllers::setup().await?;
    let ns = cluster.namespace("edge-range").await?;
    let random = random_of(&ns);
    // As real heads often do, v2's skipRange covers v1 and its own version too: once on v2,
    // the Subscription must be at the head, not "upgrading" to itself.
    let mut v2 = widget_csv("2.0.0", Some("widget.v1.0.0"), &random);
    v2["metadata"]["annotations"] = json!({"olm.skipRange": "<=2.0.0"});
    walk_from_v1_to_v2(&ns, &random, vec![widget_csv("1.0.0", None, &random), v2]).await?;
    finish(&cluster, ns, &random).await
}

/// Once at the head, no other CSV of the package is written: the Subscription stays on
/// `widget.v2.0.0`, the only CSV of the namespace, for a few of its resyncs.
async fn stays_on_v2(ns: &TestNamespace) -> anyhow::Result<()> {
    let csvs: Api<ClusterServiceVersion> = ns.api();
    let subs: Api<Subscription> = ns.api();
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let names: Vec<String> = csvs.list(&Default::default()).await?.items.iter().map(|c| c.metadata.name.clone().unwrap_or_default()).collect();
        assert_eq!(names, ["widget.v2.0.0"], "only the head may be installed");
        let status = subs.get("widget").await?.status.unwrap_or_default();
        assert_eq!(status.current_csv.as_deref(), Some("widget.v2.0.0"), "{status:?}");
        assert_eq!(status.state, Some(SubscriptionState::AtLatestKnown), "{status:?}");
    }
    Ok(())
}

/// Every bundle with an `olm.skipRange` that has no upper bound, as a real package ships them.
fn open_ended_channel(random: &str) -> Vec<serde_json::Value> {
    let ranged = |mut csv: serde_json::Value| {
        csv["metadata"]["annotations"] = json!({"olm.skipRange": ">=1.0.0"});
        csv
    };
    vec![
        ranged(widget_csv("1.0.0", None, random)),
        ranged(widget_csv("1.5.0", Some("widget.v1.0.0"), random)),
        ranged(widget_csv("2.0.0", Some("widget.v1.5.0"), random)),
    ]
}

#[tokio::test]
async fn an_open_ended_skip_range_walks_to_the_head_and_stays() -> anyhow::Result<()> {
    let (cluster, _) = controllers::setup().await?;
    let ns = cluster.namespace("edge-open").await?;
    let random = random_of(&ns);
    // Each range covers the newer bundles too: from v1 the walk jumps to v2, and from v2 it
    // must not go back to v1.5, whose range covers 2.0.0.
    walk_from_v1_to_v2(&ns, &random, open_ended_channel(&random)).await?;
    stays_on_v2(&ns).await?;
    finish(&cluster, ns, &random).await
}

#[tokio::test]
async fn an_open_ended_skip_range_installs_the_head_and_stays() -> anyhow::Result<()> {
    let (cluster, _) = controllers::setup().await?;
    let ns = cluster.namespace("edge-open-head").await?;
    let random = random_of(&ns);
    subscribe_and_reach_v2(&ns, &random, open_ended_channel(&random), None).await?;
    stays_on_v2(&ns).await?;
    finish(&cluster, ns, &random).await
}

#[tokio::test]
async fn an_unparsable_skip_range_is_ignored_and_said() -> anyhow::Result<()> {
    let (cluster, _) = controllers::setup().await?;
    let ns = cluster.namespace("edge-bad-range").await?;
    let random = random_of(&ns);
    // A real package writes `<v1.12.0`: blang's range syntax has no `v`. The package is served,
    // v2 is reached by its replaces, and the CatalogSource says what it ignored.
    let mut v2 = widget_csv("2.0.0", Some("widget.v1.0.0"), &random);
    v2["metadata"]["annotations"] = json!({"olm.skipRange": "<v2.0.0"});
    walk_from_v1_to_v2(&ns, &random, vec![widget_csv("1.0.0", None, &random), v2]).await?;
    let sources: Api<olm_api::v1alpha1::catalog_source::CatalogSource> = ns.api();
    let message = sources.get("widgets").await?.status.and_then(|s| s.message).unwrap_or_default();
    assert!(
        message.contains("widget.v2.0.0") && message.contains("skipRange \"<v2.0.0\" does not parse") && message.contains("ignored"),
        "the CatalogSource names the bundle and the range it ignored: {message}"
    );
    finish(&cluster, ns, &random).await
}

#[tokio::test]
async fn an_upgrade_the_group_cannot_run_is_not_taken_and_said() -> anyhow::Result<()> {
    let (cluster, _) = controllers::setup().await?;
    let ns = cluster.namespace("edge-modes").await?;
    let random = random_of(&ns);
    // As a real package drops OwnNamespace in a later version: v2 supports AllNamespaces only,
    // and this namespace's group targets its own namespace.
    let mut v2 = widget_csv("2.0.0", Some("widget.v1.0.0"), &random);
    v2["spec"]["installModes"] = json!([{"type": "OwnNamespace", "supported": false}, {"type": "SingleNamespace", "supported": false},
                                        {"type": "MultiNamespace", "supported": false}, {"type": "AllNamespaces", "supported": true}]);
    controllers::create_own_namespace_group(&ns, "widgets").await?;
    subscribe_to_widgets(&ns, &random, "widget.v2.0.0", vec![widget_csv("1.0.0", None, &random), v2], Some("widget.v1.0.0")).await?;
    // v1 keeps running, and the Subscription says which version needs which install mode.
    let subs: Api<Subscription> = ns.api();
    let message = ns
        .wait_for("BehindChannelHead: UnsupportedInstallMode", TIMEOUT, OBJECTS, || {
            let subs = subs.clone();
            async move {
                let status = subs.get("widget").await.map_err(|e| e.to_string())?.status.unwrap_or_default();
                let behind = status.conditions.iter().flatten().find(|c| {
                    c.type_ == olm_api::v1alpha1::subscription::SubscriptionConditionType::BehindChannelHead
                        && c.reason.as_deref() == Some("UnsupportedInstallMode")
                });
                Ok::<_, String>(behind.filter(|_| status.installed_csv.as_deref() == Some("widget.v1.0.0")).and_then(|c| c.message.clone()))
            }
        })
        .await?;
    assert!(
        message.contains("widget.v2.0.0, does not support the install mode OwnNamespace that OperatorGroup widgets asks for (it supports: AllNamespaces)"),
        "{message}"
    );
    controllers::wait_csv_succeeded(&ns, "widget.v1.0.0", TIMEOUT, OBJECTS).await?;
    let csvs: Api<ClusterServiceVersion> = ns.api();
    assert!(csvs.get_opt("widget.v2.0.0").await?.is_none(), "no CSV of a version the group cannot run");
    finish(&cluster, ns, &random).await
}
