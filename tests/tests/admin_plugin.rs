//! The cluster admin's commands (#22), run as kubectl runs a plugin: `kubectl olm …` finds
//! `kubectl-olm` (a link to the `olm` binary) on PATH. A real operator, koku-metrics-operator
//! from community-operators, pinned at 0.9.1 with Manual approval and
//! `olm-rs.io/auto-approve-starting-csv`: 0.9.1 goes in without approval, the upgrade to 0.9.2
//! waits; its preview (in the plan's annotation and from `kubectl olm plan show`) lists the
//! permission 0.9.2 adds; `kubectl olm status` says the upgrade waits and how to approve it;
//! `kubectl olm approve --yes` approves and follows it to Succeeded; `kubectl olm uninstall`
//! removes it and keeps the operand and CRD, and with `--delete-operands --delete-crds`
//! removes those too.

use olm_e2e::controllers;

use std::time::Duration;

use anyhow::Context as _;
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use olm_api::v1alpha1::install_plan::{InstallPlan, InstallPlanPhase};
use olm_e2e::journey::csv_succeeded;
use olm_e2e::admin::{KOKU_CRD, koku_catalog, kubectl_olm, plugin_dir, remove_koku_crd};
use olm_testkit::TestNamespace;

const TIMEOUT: Duration = Duration::from_secs(120);
const OBJECTS: &[&str] = &["subscriptions", "installplans", "clusterserviceversions"];
const OLD: &str = "koku-metrics-operator.v0.9.1";
const NEW: &str = "koku-metrics-operator.v0.9.2";
/// What 0.9.2 grants that 0.9.1 did not, as `kubectl olm plan show` spells it.
const ADDED: &str = "+ in the target namespaces, ServiceAccount koku-metrics-manager-role: get, list, patch, update, watch clusterserviceversions.operators.coreos.com";

/// A KokuMetricsConfig, from the CSV's alm-examples.
const OPERAND: &str = "apiVersion: koku-metrics-cfg.openshift.io/v1alpha1\nkind: KokuMetricsConfig\nmetadata:\n  name: sample\nspec:\n  authentication: {type: token}\n  packaging: {max_size_MB: 100}\n  prometheus_config: {}\n  source: {check_cycle: 1440, create_source: false, name: INSERT-SOURCE-NAME}\n  upload: {upload_cycle: 360, upload_toggle: true}\n";

/// Whether the namespace has no `kind` objects.
async fn none(ns: &TestNamespace, kind: &str) -> anyhow::Result<bool> {
    Ok(ns.kubectl(&["get", kind, "-o", "name"]).await?.stdout.trim().is_empty())
}

async fn waiting_plan(ns: &TestNamespace) -> anyhow::Result<InstallPlan> {
    let plans: Api<InstallPlan> = ns.api();
    Ok(ns.wait_for(&format!("a plan for {NEW} waiting for approval, with its preview"), TIMEOUT, OBJECTS, || {
        let plans = plans.clone();
        async move {
            let list = plans.list(&ListParams::default()).await.map_err(|e| e.to_string())?;
            Ok::<_, String>(list.items.into_iter().find(|p| {
                p.spec.cluster_service_version_names.contains(&NEW.to_owned())
                    && p.status.as_ref().is_some_and(|s| s.phase == InstallPlanPhase::RequiresApproval)
                    && p.annotations().contains_key(olm_api::keys::PREVIEW_ANNOTATION)
            }))
        }
    })
    .await?)
}

#[tokio::test]
async fn an_admin_previews_the_permissions_of_an_upgrade_and_approves_it_with_kubectl_olm() -> anyhow::Result<()> {
    let (cluster, _) = controllers::setup().await?;
    let work = tempfile::tempdir()?;
    koku_catalog(work.path(), &["0.9.1", "0.9.2"], |_, _| {})?;
    let server = controllers::catalog_server("koku", work.path().to_path_buf(), false).await?;
    let ns = cluster.namespace("admin-plugin").await?;
    let plugins = plugin_dir()?;
    remove_koku_crd(&cluster).await?;
    controllers::create_own_namespace_group(&ns, "admins").await?;
    let address = server.grpc_addrs.get("koku").context("gRPC address of koku")?.to_string();
    controllers::create_from_yaml(
        &ns,
        &format!(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: koku\nspec:\n  sourceType: grpc\n  address: \"{address}\"\n---\napiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata:\n  name: koku\n  annotations:\n    olm-rs.io/auto-approve-starting-csv: \"true\"\nspec:\n  source: koku\n  sourceNamespace: {name}\n  name: koku-metrics-operator\n  channel: alpha\n  startingCSV: {OLD}\n  installPlanApproval: Manual\n",
            name = ns.name()
        ),
    )
    .await?;

    // The pinned version goes in without approval; the upgrade waits, with its preview.
    csv_succeeded(&ns, OLD, TIMEOUT).await?;
    let plan = waiting_plan(&ns).await?;
    let preview: serde_json::Value = serde_json::from_str(&plan.annotations()[olm_api::keys::PREVIEW_ANNOTATION])?;
    let added = preview["permissions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["change"] == "added" && p["resource"] == "clusterserviceversions.operators.coreos.com")
        .with_context(|| format!("the preview annotation lists the CSV permissions 0.9.2 adds: {preview:#}"))?;
    assert_eq!(added["verbs"], serde_json::json!(["get", "list", "patch", "update", "watch"]));

    let plan_name = plan.name_any();
    let (code, out, err) = kubectl_olm(&cluster, plugins.path(), &["status", "koku", "-n", ns.name()])?;
    assert_eq!(code, 0, "{OLD} Succeeded is healthy, with an upgrade waiting: {out}{err}");
    assert!(out.contains(&format!("an upgrade to {NEW} waits for approval")), "{out}");
    assert!(out.contains(&format!("kubectl olm approve {plan_name} -n {}", ns.name())), "{out}");

    let (code, out, err) = kubectl_olm(&cluster, plugins.path(), &["plan", "show", &plan_name, "-n", ns.name()])?;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&format!("Upgrades {OLD} to {NEW} (version 0.9.2)")), "{out}");
    assert!(out.contains(ADDED), "{out}");
    assert!(out.contains("- container kube-rbac-proxy: gcr.io/kubebuilder/kube-rbac-proxy:v0.5.0"), "{out}");

    // Not a terminal, no --yes: nothing is approved.
    let (code, _, err) = kubectl_olm(&cluster, plugins.path(), &["approve", &plan_name, "-n", ns.name()])?;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("pass --yes"), "{err}");
    let plans: Api<InstallPlan> = ns.api();
    assert!(!plans.get(&plan_name).await?.spec.approved);

    let (code, out, err) = kubectl_olm(&cluster, plugins.path(), &["approve", &plan_name, "-n", ns.name(), "--yes"])?;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(ADDED) && out.contains(&format!("Installed: {NEW}.")), "{out}");
    assert!(err.contains(&format!("{NEW}: Succeeded")), "progress is shown while it waits: {err}");

    let (code, out, err) = kubectl_olm(&cluster, plugins.path(), &["status", "-n", ns.name(), "-o", "json"])?;
    assert_eq!(code, 0, "{out}{err}");
    let reports: serde_json::Value = serde_json::from_str(&out)?;
    assert_eq!((reports[0]["healthy"].as_bool(), reports[0]["verdict"].as_str()), (Some(true), Some("healthy")), "{out}");

    // Uninstall, keeping the operand and the CRD; then again, with both.
    ns.kubectl_with_input(&["create", "-f", "-"], OPERAND).await?;
    let (code, _, err) = kubectl_olm(&cluster, plugins.path(), &["uninstall", "koku", "-n", ns.name()])?;
    assert_eq!(code, 2, "no terminal, no --yes: {err}");
    let (code, out, err) = kubectl_olm(&cluster, plugins.path(), &["uninstall", "koku", "-n", ns.name(), "--yes"])?;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&format!("ClusterServiceVersion {NEW}, and with it")) && out.contains("Deployment koku-metrics-controller-manager"), "{out}");
    assert!(out.contains(&format!("Kept: 1 operand(s)")) && out.contains(&format!("KokuMetricsConfig {}/sample", ns.name())), "{out}");
    assert!(out.contains(&format!("Kept: CustomResourceDefinition {KOKU_CRD} (--delete-crds deletes it)")), "{out}");
    assert!(none(&ns, "subscriptions").await? && none(&ns, "clusterserviceversions").await? && none(&ns, "installplans").await?);
    assert!(none(&ns, "deployments").await?, "the operator's Deployment goes with its CSV");
    let left = cluster.kubectl(&["get", "clusterroles", "-l", &format!("olm.owner={NEW},olm.owner.namespace={}", ns.name()), "-o", "name"]).await?.stdout;
    assert!(left.trim().is_empty(), "cluster-scoped RBAC goes too: {left}");
    assert!(!none(&ns, "kokumetricsconfigs").await?, "the operand stays");
    let operator = format!("koku-metrics-operator.{}", ns.name());
    let listed = cluster.kubectl(&["get", "operator", &operator, "--ignore-not-found", "-o", "name"]).await?.stdout;
    assert!(listed.trim().is_empty(), "the Operator object goes once it lists nothing: {listed}");

    controllers::create_from_yaml(
        &ns,
        &format!("apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata:\n  name: koku\nspec:\n  source: koku\n  sourceNamespace: {}\n  name: koku-metrics-operator\n  channel: alpha\n", ns.name()),
    )
    .await?;
    csv_succeeded(&ns, NEW, TIMEOUT).await?;
    let (code, out, err) = kubectl_olm(&cluster, plugins.path(), &["uninstall", "koku", "-n", ns.name(), "--delete-operands", "--delete-crds", "--yes"])?;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&format!("KokuMetricsConfig {}/sample (operand)", ns.name())) && out.contains(&format!("  CustomResourceDefinition {KOKU_CRD}\n")), "{out}");
    assert!(none(&ns, "clusterserviceversions").await?);
    let crd = cluster.kubectl(&["get", "crd", KOKU_CRD, "--ignore-not-found", "-o", "name"]).await?.stdout;
    assert!(crd.trim().is_empty(), "the CRD was asked for and nobody else uses it: {crd}");
    ns.cleanup().await?;
    remove_koku_crd(&cluster).await?;
    Ok(())
}
