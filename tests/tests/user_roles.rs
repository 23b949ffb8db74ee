//! People use OLM through Kubernetes' own roles (#21): manifests/04-rbac-users.yaml aggregates
//! OLM's kinds into `admin`, `edit` and `view`, as upstream's aggregate-olm-edit/-view do, plus
//! approving InstallPlans. Here a cluster admin sets a namespace up (its catalog and
//! OperatorGroup) and binds three people in it; each then acts as themselves (kubectl `--as`,
//! impersonation): the namespace admin subscribes with Manual approval, approves the plan and
//! removes the operator; the editor may not create an OperatorGroup or CatalogSource (that would
//! make them a cluster admin, SECURITY.md); the viewer reads everything and may change nothing.

use olm_e2e::controllers;

use std::time::Duration;

use anyhow::Context as _;
use controllers::{create_own_namespace_group, etcd_catalog_server};
use kube::ResourceExt;
use olm_api::v1alpha1::install_plan::{InstallPlan, InstallPlanPhase};
use olm_testkit::TestNamespace;

const TIMEOUT: Duration = Duration::from_secs(120);
const OBJECTS: &[&str] = &["subscriptions", "installplans", "clusterserviceversions", "catalogsources", "operatorgroups"];

/// kubectl in `ns` as `user`; the error (with kubectl's message) when it is refused.
async fn kubectl_as(ns: &TestNamespace, user: &str, args: &[&str], input: Option<&str>) -> anyhow::Result<String> {
    let mut all = vec!["--as", user];
    all.extend_from_slice(args);
    let out = match input {
        Some(input) => ns.kubectl_with_input(&all, input).await?,
        None => ns.kubectl(&all).await?,
    };
    Ok(out.stdout)
}

/// `user` is refused `args`, by RBAC.
async fn refused(ns: &TestNamespace, user: &str, args: &[&str], input: Option<&str>) -> anyhow::Result<()> {
    match kubectl_as(ns, user, args, input).await {
        Ok(out) => anyhow::bail!("{user} may `kubectl {}`: {out}", args.join(" ")),
        Err(err) => {
            let message = format!("{err:#}");
            anyhow::ensure!(message.contains("forbidden"), "{user}: `kubectl {}` failed, but not for RBAC: {message}", args.join(" "));
            Ok(())
        }
    }
}

#[tokio::test]
async fn namespace_admins_subscribe_approve_and_uninstall_and_viewers_only_read() -> anyhow::Result<()> {
    let (cluster, _) = controllers::setup().await?;
    let _apis = controllers::ETCD_APIS.read().await;
    let server = etcd_catalog_server(true).await?;
    let ns = cluster.namespace("user-roles").await?;
    let name = ns.name().to_owned();
    let roles = olm_e2e::repo().join("manifests/04-rbac-users.yaml");
    cluster.kubectl(&["apply", "--server-side", "-f", &roles.display().to_string()]).await?;

    // The cluster admin's part: the namespace's catalog and OperatorGroup, and who is who.
    let address = server.grpc_addrs.get("community").context("gRPC address of community")?.to_string();
    ns.kubectl_with_input(
        &["create", "-f", "-"],
        &format!("apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: community\nspec:\n  sourceType: grpc\n  address: \"{address}\"\n"),
    )
    .await?;
    create_own_namespace_group(&ns, "og").await?;
    for (user, role) in [("alice", "admin"), ("eve", "edit"), ("bob", "view")] {
        ns.kubectl(&["create", "rolebinding", &format!("{user}-{role}"), &format!("--clusterrole={role}"), &format!("--user={user}")]).await?;
    }
    // kube-controller-manager aggregates the rules into admin/edit/view.
    ns.wait_for("OLM's rules aggregated into admin, edit and view", TIMEOUT, OBJECTS, || {
        let ns = &ns;
        async move {
            let mut all = true;
            for (user, verb, resource) in [("alice", "patch", "installplans"), ("eve", "create", "subscriptions"), ("bob", "list", "clusterserviceversions")] {
                all &= kubectl_as(ns, user, &["auth", "can-i", verb, resource], None).await.is_ok();
            }
            Ok::<_, String>(all.then_some(()))
        }
    })
    .await?;

    // The namespace admin subscribes, with Manual approval.
    kubectl_as(
        &ns,
        "alice",
        &["create", "-f", "-"],
        Some(&format!(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata:\n  name: etcd\nspec:\n  source: community\n  sourceNamespace: {name}\n  name: etcd\n  channel: singlenamespace-alpha\n  installPlanApproval: Manual\n"
        )),
    )
    .await?;
    let plans: kube::Api<InstallPlan> = ns.api();
    let plan = ns
        .wait_for("an InstallPlan waiting for approval", TIMEOUT, OBJECTS, || {
            let plans = plans.clone();
            async move {
                let items = plans.list(&Default::default()).await.map_err(|e| e.to_string())?.items;
                Ok::<_, String>(items.into_iter().find(|p| p.status.as_ref().is_some_and(|s| s.phase == InstallPlanPhase::RequiresApproval)))
            }
        })
        .await?
        .name_any();

    // The viewer reads all of it, and may neither approve nor subscribe.
    let seen = kubectl_as(&ns, "bob", &["get", "subscriptions,installplans,catalogsources,operatorgroups", "-o", "name"], None).await?;
    for expected in ["subscription.operators.coreos.com/etcd", &format!("installplan.operators.coreos.com/{plan}"), "catalogsource.operators.coreos.com/community", "operatorgroup.operators.coreos.com/og"] {
        anyhow::ensure!(seen.contains(expected), "bob (view) does not see {expected}: {seen}");
    }
    let approve = ["patch", "installplan", plan.as_str(), "--type", "merge", "-p", r#"{"spec":{"approved":true}}"#];
    refused(&ns, "bob", &approve, None).await?;
    refused(&ns, "bob", &["delete", "subscription", "etcd"], None).await?;

    // The editor may not choose the namespaces or the catalog that OLM's rights go to.
    refused(&ns, "eve", &["create", "-f", "-"], Some("apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata:\n  name: mine\nspec: {}\n")).await?;
    refused(
        &ns,
        "eve",
        &["create", "-f", "-"],
        Some("apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: mine\nspec:\n  sourceType: grpc\n  address: 127.0.0.1:1\n"),
    )
    .await?;

    // The admin approves; the operator installs; everybody bound sees it.
    kubectl_as(&ns, "alice", &approve, None).await?;
    controllers::wait_csv_succeeded(&ns, "etcdoperator.v0.9.4", TIMEOUT, OBJECTS).await?;
    let csvs = kubectl_as(&ns, "bob", &["get", "csv", "-o", "name"], None).await?;
    anyhow::ensure!(csvs.contains("etcdoperator.v0.9.4"), "bob (view) does not see the CSV: {csvs}");

    // The admin uninstalls: the Subscription, then the CSV, whose Deployment goes with it.
    kubectl_as(&ns, "alice", &["delete", "subscription", "etcd"], None).await?;
    kubectl_as(&ns, "alice", &["delete", "csv", "etcdoperator.v0.9.4"], None).await?;
    let deployments: kube::Api<k8s_openapi::api::apps::v1::Deployment> = ns.api();
    ns.wait_for("the operator's Deployment removed with its CSV", TIMEOUT, OBJECTS, || {
        let deployments = deployments.clone();
        async move {
            let left = deployments.list(&Default::default()).await.map_err(|e| e.to_string())?.items;
            Ok::<_, String>(left.is_empty().then_some(()))
        }
    })
    .await?;

    ns.cleanup().await?;
    server.shutdown();
    Ok(())
}
