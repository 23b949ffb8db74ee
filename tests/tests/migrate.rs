//! `olm migrate` (issue #54) on the real control plane, against the `olm run` binary: etcd,
//! installed by OLM v0 from a Subscription for all namespaces with a custom resource of its
//! own, becomes an OLM v1 ClusterExtension in place — the same Deployment (uid and generation:
//! no pod restarted), the same pods, the same CRD and custom resource, every object now the
//! extension's and none left with OLM v0's labels — then upgrades through the extension's
//! version. A dry run changes nothing (the API server's audit log shows no write); what v1 cannot express is refused with what to do. Two
//! operators migrated with `--all`, the run killed after each step in turn (and OLM once), are
//! finished by a rerun with nothing claimed by both OLM v0 and v1 at any stop. `--all` stops
//! at the first Subscription it must refuse, saying what it migrated before it.

use std::process::Output;
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use olm_api::olmv1::{ClusterCatalog, ClusterExtension};
use olm_api::v1::operator_group::OperatorGroup;
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use olm_api::v1alpha1::subscription::Subscription;
use olm_e2e::controllers::{self, create_from_yaml};
use olm_e2e::olmv1::OlmRun;
use olm_e2e::{images, journey, olm};
use olm_testkit::{RegistryOptions, TestCluster, TestNamespace, wait_for};
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(180);
const ETCD_CRDS: [&str; 3] = ["etcdclusters.etcd.database.coreos.com", "etcdbackups.etcd.database.coreos.com", "etcdrestores.etcd.database.coreos.com"];

/// One test at a time: each runs an `olm run` of its own (two would both reconcile every
/// object), and ClusterExtensions are cluster-scoped.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn migrate(cluster: &TestCluster, args: &[&str]) -> anyhow::Result<Output> {
    let kubeconfig = format!("--kubeconfig={}", cluster.kubeconfig().display());
    Ok(std::process::Command::new(olm_e2e::olm_bin()).arg("migrate").args(args).arg(&kubeconfig).output()?)
}

/// A kubeconfig for the cluster as a ServiceAccount of olm-dev's audited namespace bound to
/// cluster-admin (every right: what it does not do, it chose not to), and that account's user
/// name: the API server's audit log records each of its requests.
async fn audited_kubeconfig(cluster: &TestCluster, dir: &std::path::Path) -> anyhow::Result<(std::path::PathBuf, String)> {
    let ns = olm_dev::AUDITED_NAMESPACE;
    let account = olm_testkit::random_name("migrate-dry-run");
    let _ = cluster.kubectl(&["create", "namespace", ns]).await;
    cluster.kubectl(&["create", "serviceaccount", &account, "-n", ns]).await?;
    cluster.kubectl(&["create", "clusterrolebinding", &account, "--clusterrole=cluster-admin", &format!("--serviceaccount={ns}:{account}")]).await?;
    let token = cluster.kubectl(&["create", "token", &account, "-n", ns]).await?;
    let mut config = kube::config::Kubeconfig::read_from(cluster.kubeconfig())?;
    for named in &mut config.auth_infos {
        named.auth_info = Some(kube::config::AuthInfo { token: Some(token.stdout.trim().to_owned().into()), ..Default::default() });
    }
    let path = dir.join("audited.kubeconfig");
    std::fs::write(&path, serde_json::to_string(&config)?)?;
    Ok((path, format!("system:serviceaccount:{ns}:{account}")))
}

/// `verb resource/name` of each request `user` made after `from` bytes of the audit log.
fn audited_requests(cluster: &TestCluster, user: &str, from: u64) -> anyhow::Result<Vec<String>> {
    let log = std::fs::read(cluster.layout().audit_log())?;
    let new = String::from_utf8_lossy(log.get(usize::try_from(from)?..).unwrap_or_default()).into_owned();
    Ok(new
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|event| event.pointer("/user/username").and_then(|u| u.as_str()) == Some(user))
        .map(|event| {
            let field = |pointer: &str| event.pointer(pointer).and_then(|v| v.as_str()).unwrap_or_default().to_owned();
            format!("{} {}/{}", field("/verb"), field("/objectRef/resource"), field("/objectRef/name"))
        })
        .collect())
}

fn text(output: &Output) -> (String, String) {
    (String::from_utf8_lossy(&output.stdout).into_owned(), String::from_utf8_lossy(&output.stderr).into_owned())
}

fn etcd_clusters() -> ApiResource {
    ApiResource {
        group: "etcd.database.coreos.com".into(),
        version: "v1beta2".into(),
        api_version: "etcd.database.coreos.com/v1beta2".into(),
        kind: "EtcdCluster".into(),
        plural: "etcdclusters".into(),
    }
}

/// What must not change across the migration.
#[derive(Debug, PartialEq)]
struct Running {
    deployment_uid: Option<String>,
    deployment_generation: Option<i64>,
    pod_uids: Vec<String>,
    crd_uid: Option<String>,
    custom_resource: (Option<String>, Option<String>),
}

async fn running(cluster: &TestCluster, ns: &TestNamespace) -> anyhow::Result<Running> {
    let deployment = Api::<Deployment>::namespaced(cluster.client(), ns.name()).get("etcd-operator").await?;
    let mut pod_uids: Vec<String> = Api::<Pod>::namespaced(cluster.client(), ns.name())
        .list(&ListParams::default().labels("name=etcd-operator-alm-owned"))
        .await?
        .items
        .iter()
        .filter_map(|p| p.metadata.uid.clone())
        .collect();
    pod_uids.sort();
    let crd = Api::<CustomResourceDefinition>::all(cluster.client()).get(ETCD_CRDS[0]).await?;
    let cr = Api::<DynamicObject>::namespaced_with(cluster.client(), ns.name(), &etcd_clusters()).get("example").await?;
    Ok(Running {
        deployment_uid: deployment.metadata.uid,
        deployment_generation: deployment.metadata.generation,
        pod_uids,
        crd_uid: crd.metadata.uid,
        custom_resource: (cr.metadata.uid, cr.metadata.resource_version),
    })
}

#[tokio::test]
async fn etcd_moves_from_a_subscription_to_a_cluster_extension_in_place_then_upgrades_through_it() -> anyhow::Result<()> {
    let _alone = ONE_AT_A_TIME.lock().await;
    let cluster = controllers::cluster_with_crds().await?;
    // OLM v0 suites on this shared control plane leave etcd's CRDs; this test's v0 install
    // must be the one that created them.
    let mut args = vec!["delete", "--ignore-not-found", "--wait=true"];
    let crds: Vec<String> = ETCD_CRDS.iter().map(|c| format!("customresourcedefinitions/{c}")).collect();
    args.extend(crds.iter().map(String::as_str));
    cluster.kubectl(&args).await?;
    // What a failed earlier run left (cluster-scoped, so not gone with its namespace).
    let extensions: Api<ClusterExtension> = Api::all(cluster.client());
    for left in extensions.list(&ListParams::default()).await?.items.iter().filter(|e| e.name_any().starts_with("migrated-etcd-")) {
        let _ = extensions.delete(&left.name_any(), &DeleteParams::default()).await;
    }
    let registry = olm_testkit::registry(RegistryOptions::new()).await?;
    let work = tempfile::tempdir()?;
    let _olm = OlmRun::start(&cluster, &work.path().join("cache")).await?;
    let ns = cluster.namespace("migrate").await?;

    // OLM v0: etcd 0.9.2 for all namespaces, Manual approval (the starting version approved by
    // olm-rs's annotation), from a catalog image.
    let image = format!("{}/migrate-catalog:v1", registry.addr());
    olm(&["catalog", "push", olm_e2e::repo().join("crates/olm-registry/testdata/catalog").to_str().context("path")?, &image])?;
    // A ClusterCatalog of the CatalogSource's name is made: a name of this run's own.
    let source = olm_testkit::random_name("etcd-catalog");
    create_from_yaml(&ns, &images::catalog_source(&source, &image)).await?;
    create_from_yaml(&ns, "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata:\n  name: global\nspec: {}\n").await?;
    create_from_yaml(
        &ns,
        &format!(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata:\n  name: etcd\n  annotations:\n    olm-rs.io/auto-approve-starting-csv: \"true\"\nspec:\n  source: {source}\n  sourceNamespace: {}\n  name: etcd\n  channel: clusterwide-alpha\n  startingCSV: etcdoperator.v0.9.2-clusterwide\n  installPlanApproval: Manual\n",
            ns.name(),
        ),
    )
    .await?;
    journey::csv_succeeded(&ns, "etcdoperator.v0.9.2-clusterwide", TIMEOUT).await?;
    ns.kubectl_with_input(
        &["create", "-f", "-"],
        "apiVersion: etcd.database.coreos.com/v1beta2\nkind: EtcdCluster\nmetadata:\n  name: example\nspec:\n  size: 3\n  version: 3.2.13\n",
    )
    .await?;
    wait_for("the operator's pod", TIMEOUT, || async {
        let pods = Api::<Pod>::namespaced(cluster.client(), ns.name()).list(&ListParams::default().labels("name=etcd-operator-alm-owned")).await?;
        anyhow::Ok((!pods.items.is_empty()).then_some(()))
    })
    .await?;
    let before = running(&cluster, &ns).await?;
    let subs: Api<Subscription> = Api::namespaced(cluster.client(), ns.name());
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(cluster.client(), ns.name());
    let name = olm_testkit::random_name("migrated-etcd");
    let ns_flag = format!("--namespace={}", ns.name());
    let name_flag = format!("--name={name}");

    // Manual approval has no v1 counterpart: refused, with what to do.
    let refused = migrate(&cluster, &["etcd", &ns_flag, &name_flag, "--dry-run"])?;
    let (_, stderr) = text(&refused);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("installPlanApproval: Manual") && stderr.contains("--pin"), "{stderr}");

    // A dry run prints the plan and changes nothing.
    // What a migration writes (annotations, labels, the spec); the status is OLM's, which may
    // write it meanwhile (the audit log below proves the dry run writes nothing at all).
    let users_part = |meta: &kube::api::ObjectMeta, spec: serde_json::Value| (meta.annotations.clone(), meta.labels.clone(), spec);
    let sub = subs.get("etcd").await?;
    let sub_before = users_part(&sub.metadata, serde_json::to_value(&sub.spec)?);
    let csv = csvs.get("etcdoperator.v0.9.2-clusterwide").await?;
    let csv_before = users_part(&csv.metadata, serde_json::to_value(&csv.spec)?);
    let unnamed = migrate(&cluster, &[&ns_flag, "--dry-run"])?;
    assert!(!unnamed.status.success() && text(&unnamed).1.contains("--all"), "{:?}", text(&unnamed));
    // --all: every Subscription of the namespace (here the one).
    let dry = migrate(&cluster, &["--all", &ns_flag, &name_flag, "--pin", "--dry-run"])?;
    let (stdout, stderr) = text(&dry);
    assert!(dry.status.success(), "{stdout}{stderr}");
    for expected in [
        format!("create ClusterCatalog {source} for {image}"),
        format!("create ClusterExtension {name}: package etcd version 0.9.2-clusterwide in namespace {}", ns.name()),
        format!("Deployment {}/etcd-operator", ns.name()),
        format!("CustomResourceDefinition {} (its objects untouched)", ETCD_CRDS[0]),
        format!("Subscription {}/etcd", ns.name()),
        format!("OperatorGroup {}/global", ns.name()),
        "then keep ClusterExtension".to_owned(),
    ] {
        assert!(stdout.contains(&expected), "{expected:?} in the plan:\n{stdout}");
    }
    // The API server's own record: the same dry run, as a user whose requests the audit log
    // keeps, reads and writes nothing.
    let (audited, audited_user) = audited_kubeconfig(&cluster, work.path()).await?;
    let log_size = std::fs::metadata(cluster.layout().audit_log()).map(|m| m.len()).unwrap_or(0);
    let as_audited = format!("--kubeconfig={}", audited.display());
    let dry_audited = std::process::Command::new(olm_e2e::olm_bin())
        .args(["migrate", "--all", &ns_flag, &name_flag, "--pin", "--dry-run", &as_audited])
        .output()?;
    assert!(dry_audited.status.success(), "{:?}", text(&dry_audited));
    let requests = audited_requests(&cluster, &audited_user, log_size)?;
    let account = audited_user.rsplit(':').next().unwrap_or_default();
    cluster.kubectl(&["delete", "clusterrolebinding", account]).await?;
    cluster.kubectl(&["delete", "serviceaccount", account, "-n", olm_dev::AUDITED_NAMESPACE]).await?;
    assert!(
        requests.iter().any(|r| r.starts_with("get subscriptions/etcd")) && requests.iter().any(|r| r.starts_with("list clusterextensions")),
        "the audit log records the dry run's reads (restart the test cluster if its API server runs with an older audit policy): {requests:#?}"
    );
    let writes: Vec<&String> = requests.iter().filter(|r| !r.starts_with("get ") && !r.starts_with("list ") && !r.starts_with("watch ")).collect();
    assert!(writes.is_empty(), "the dry run wrote: {writes:#?}");
    eprintln!("the dry run made {} requests, all reads", requests.len());
    let sub = subs.get("etcd").await?;
    assert_eq!(users_part(&sub.metadata, serde_json::to_value(&sub.spec)?), sub_before, "the dry run changed the Subscription");
    let csv = csvs.get("etcdoperator.v0.9.2-clusterwide").await?;
    assert_eq!(users_part(&csv.metadata, serde_json::to_value(&csv.spec)?), csv_before, "the dry run changed the CSV");
    assert!(extensions.get_opt(&name).await?.is_none(), "the dry run created the ClusterExtension");

    // The migration.
    let done = migrate(&cluster, &["etcd", &ns_flag, &name_flag, "--pin", "--yes"])?;
    let (stdout, stderr) = text(&done);
    assert!(done.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains(&format!("Subscription {}/etcd is ClusterExtension {name} now", ns.name())), "{stdout}");

    let after = running(&cluster, &ns).await?;
    assert_eq!(after, before, "the operator, its pods, its CRD and its custom resource are the same objects, unchanged");
    let extension = extensions.get(&name).await?;
    assert_eq!(extension.status.as_ref().and_then(|s| s.install.as_ref()).map(|i| i.bundle.version.clone()).as_deref(), Some("0.9.2-clusterwide"));
    assert_eq!(extension.spec.source.catalog.as_ref().and_then(|c| c.version.clone()).as_deref(), Some("0.9.2-clusterwide"), "--pin keeps the version");
    let origin = extension.conditions().iter().find(|c| c.type_ == "MigratedFromOLMv0").cloned().context("the MigratedFromOLMv0 condition")?;
    assert_eq!(origin.status, "True");
    assert!(
        origin.message.contains(&format!("Subscription {}/etcd", ns.name())) && origin.message.contains("etcdoperator.v0.9.2-clusterwide"),
        "{}",
        origin.message
    );
    let deployment = Api::<Deployment>::namespaced(cluster.client(), ns.name()).get("etcd-operator").await?;
    let labels = deployment.labels();
    assert_eq!(labels.get("olm.operatorframework.io/owner-name"), Some(&name));
    assert!(!labels.keys().any(|k| k.starts_with("olm.owner") || k.starts_with("operators.coreos.com/")), "OLM v0's labels left: {labels:?}");
    let owners: Vec<_> = deployment.owner_references().iter().map(|o| o.kind.clone()).collect();
    assert_eq!(owners, ["ClusterExtension"]);
    let crd = Api::<CustomResourceDefinition>::all(cluster.client()).get(ETCD_CRDS[0]).await?;
    assert_eq!(crd.labels().get("olm.operatorframework.io/owner-name"), Some(&name));
    // OLM v0's objects are gone, and nothing carries its labels for the CSV.
    assert!(subs.get_opt("etcd").await?.is_none());
    wait_for("the CSV gone", TIMEOUT, || async { anyhow::Ok(csvs.get_opt("etcdoperator.v0.9.2-clusterwide").await?.is_none().then_some(())) }).await?;
    assert!(Api::<OperatorGroup>::namespaced(cluster.client(), ns.name()).get_opt("global").await?.is_none());
    let v0_labelled = "olm.owner=etcdoperator.v0.9.2-clusterwide";
    assert!(Api::<ClusterRole>::all(cluster.client()).list(&ListParams::default().labels(v0_labelled)).await?.items.is_empty());
    assert!(Api::<ClusterRoleBinding>::all(cluster.client()).list(&ListParams::default().labels(v0_labelled)).await?.items.is_empty());
    assert!(Api::<ClusterCatalog>::all(cluster.client()).get_opt(&source).await?.is_some());
    let events = Api::<Event>::namespaced(cluster.client(), "default")
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await?;
    assert!(
        events.items.iter().any(|e| e.reason.as_deref() == Some("MigratedFromOLMv0") && e.message.as_deref().is_some_and(|m| m.contains("etcdoperator.v0.9.2-clusterwide"))),
        "an Event names what it came from; olm migrate said:\n{stderr}"
    );

    // An upgrade through the extension's version: now v1's own pod template.
    extensions
        .patch(&name, &PatchParams::default(), &Patch::Merge(json!({"spec": {"source": {"catalog": {"version": "0.9.4-clusterwide"}}}})))
        .await?;
    wait_for("0.9.4 installed through the extension", TIMEOUT, || async {
        let extension = extensions.get(&name).await?;
        anyhow::Ok(extension.status.and_then(|s| s.install).filter(|i| i.bundle.version == "0.9.4-clusterwide").map(drop))
    })
    .await?;
    let upgraded = Api::<Deployment>::namespaced(cluster.client(), ns.name()).get("etcd-operator").await?;
    assert_eq!(upgraded.metadata.uid, before.deployment_uid);
    assert_ne!(upgraded.metadata.generation, before.deployment_generation, "the new bundle's pod template rolled out");
    let cr = Api::<DynamicObject>::namespaced_with(cluster.client(), ns.name(), &etcd_clusters()).get("example").await?;
    assert_eq!(cr.metadata.uid, before.custom_resource.0, "the custom resource survives the upgrade");

    extensions.delete(&name, &DeleteParams::default()).await?;
    let _ = Api::<ClusterCatalog>::all(cluster.client()).delete(&source, &DeleteParams::default()).await;
    Ok(())
}

/// Every object OLM v0 or v1 installed for `csv_prefix`'s operator in `ns`, as `Kind name`
/// with the worlds that claim it: OLM v0 by its `olm.owner` label or a CSV owner reference,
/// OLM v1 by its `olm.operatorframework.io/owner-name` label or a ClusterExtension owner.
async fn claims(cluster: &TestCluster, ns: &str, package: &str, group: &str) -> anyhow::Result<Vec<(String, bool, bool)>> {
    fn of(kind: &str, meta: &kube::api::ObjectMeta) -> (String, bool, bool) {
        let labels = meta.labels.clone().unwrap_or_default();
        let owners = meta.owner_references.clone().unwrap_or_default();
        let v0 = labels.contains_key("olm.owner") || owners.iter().any(|o| o.kind == "ClusterServiceVersion");
        let v1 = labels.contains_key("olm.operatorframework.io/owner-name") || owners.iter().any(|o| o.kind == "ClusterExtension");
        (format!("{kind} {}", meta.name.clone().unwrap_or_default()), v0, v1)
    }
    let client = cluster.client();
    let mut found = Vec::new();
    let deployment = Api::<Deployment>::namespaced(client.clone(), ns).get(&format!("{package}-operator")).await?;
    found.push(of("Deployment", &deployment.metadata));
    let account = Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(client.clone(), ns).get(package).await?;
    found.push(of("ServiceAccount", &account.metadata));
    let crd = Api::<CustomResourceDefinition>::all(client.clone()).get(&format!("widgets.{group}")).await?;
    found.push(of("CustomResourceDefinition", &crd.metadata));
    for role in Api::<ClusterRole>::all(client.clone()).list(&ListParams::default()).await?.items {
        let rules = serde_json::to_string(&role.rules)?;
        // Not the aggregated ones (admin, edit, view gather every role's rules), nor OLM v0's
        // roles per API, which its CRD owns (they stay with it: checked after the migration).
        let of_the_crd = role.owner_references().iter().any(|o| o.kind == "CustomResourceDefinition");
        if rules.contains(group) && role.aggregation_rule.is_none() && !of_the_crd {
            found.push(of("ClusterRole", &role.metadata));
        }
    }
    Ok(found)
}

/// A catalog image of widget packages named `packages` (API group `<package>.example.com`
/// each), an image of this run's own (an earlier run's ClusterCatalog of it would be reused),
/// its CatalogSource in `ns` and an OperatorGroup for all namespaces; the CatalogSource's name.
async fn widget_packages_in(ns: &TestNamespace, registry: &str, work: &std::path::Path, packages: &[&str]) -> anyhow::Result<String> {
    let catalog_dir = work.join("catalog");
    std::fs::create_dir_all(&catalog_dir)?;
    let documents: String = packages.iter().map(|p| olm_e2e::olmv1::widget_package(p, &format!("{p}.example.com"))).collect();
    std::fs::write(catalog_dir.join("catalog.json"), documents)?;
    let image = format!("{registry}/{}:v1", olm_testkit::random_name("migrate-widgets"));
    olm(&["catalog", "push", catalog_dir.to_str().context("path")?, &image])?;
    let source = olm_testkit::random_name("widgets-catalog");
    create_from_yaml(ns, &images::catalog_source(&source, &image)).await?;
    create_from_yaml(ns, "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata:\n  name: global\nspec: {}\n").await?;
    Ok(source)
}

/// `olm migrate --all` of two operators, stopped by SIGKILL at each of its steps in turn (and
/// once with OLM itself killed and started again while the extension adopts): after every stop
/// no object is claimed by both OLM v0 and OLM v1, and a last rerun finishes — both operators
/// are extensions, the same Deployments, CRDs and custom resources, OLM v0's objects gone,
/// each migration recorded once.
#[tokio::test]
async fn an_interrupted_migration_of_several_subscriptions_is_finished_by_a_rerun() -> anyhow::Result<()> {
    let _alone = ONE_AT_A_TIME.lock().await;
    let cluster = controllers::cluster_with_crds().await?;
    let registry = olm_testkit::registry(RegistryOptions::new()).await?;
    let work = tempfile::tempdir()?;
    let cache = work.path().join("cache");
    let mut olm_run = OlmRun::start(&cluster, &cache).await?;
    let ns = cluster.namespace("migrate-stops").await?;

    // Two operators of one catalog, each with an API group of this run's own.
    let packages: Vec<(String, String)> = ["gadget", "gizmo"]
        .iter()
        .map(|p| {
            let package = olm_testkit::random_name(p);
            let group = format!("{package}.example.com");
            (package, group)
        })
        .collect();
    let names: Vec<&str> = packages.iter().map(|(package, _)| package.as_str()).collect();
    let source = widget_packages_in(&ns, registry.addr(), work.path(), &names).await?;
    for (package, _) in &packages {
        create_from_yaml(
            &ns,
            &format!(
                "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata:\n  name: {package}\nspec:\n  source: {source}\n  sourceNamespace: {}\n  name: {package}\n  channel: stable\n",
                ns.name()
            ),
        )
        .await?;
    }
    let mut before = Vec::new();
    for (package, group) in &packages {
        journey::csv_succeeded(&ns, &format!("{package}.v2.0.0"), TIMEOUT).await?;
        let widgets = ApiResource { group: group.clone(), version: "v1".into(), api_version: format!("{group}/v1"), kind: "Widget".into(), plural: "widgets".into() };
        let widget: DynamicObject = serde_json::from_value(json!({"apiVersion": format!("{group}/v1"), "kind": "Widget", "metadata": {"name": "mine"}, "spec": {"size": 3}}))?;
        let widget = Api::<DynamicObject>::namespaced_with(cluster.client(), ns.name(), &widgets).create(&Default::default(), &widget).await?;
        let deployment = Api::<Deployment>::namespaced(cluster.client(), ns.name()).get(&format!("{package}-operator")).await?;
        let crd = Api::<CustomResourceDefinition>::all(cluster.client()).get(&format!("widgets.{group}")).await?;
        before.push((deployment.metadata.uid, deployment.metadata.generation, crd.metadata.uid, widget.metadata.uid, widget.metadata.resource_version));
    }

    let (gadget, gizmo) = (&packages[0].0, &packages[1].0);
    let n = ns.name();
    // Each run is stopped at the first line it prints that no earlier run printed: the end of
    // a step not reached before (SIGKILL as soon as it is read, so the next step may have
    // begun), until a run ends by itself.
    let kubeconfig = format!("--kubeconfig={}", cluster.kubeconfig().display());
    let mut printed = std::collections::BTreeSet::new();
    let mut stops = Vec::new();
    loop {
        let mut child = tokio::process::Command::new(olm_e2e::olm_bin())
            .args(["migrate", "--all", &format!("--namespace={n}"), "--yes", &kubeconfig])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(child.stderr.take().context("stderr")?));
        let stop = tokio::time::timeout(TIMEOUT, async {
            while let Some(line) = lines.next_line().await? {
                if printed.insert(line.clone()) {
                    return anyhow::Ok(Some(line));
                }
            }
            anyhow::Ok(None)
        })
        .await
        .context("olm migrate neither printed a new line nor ended")??;
        child.start_kill()?;
        let _ = child.wait().await;
        let Some(stop) = stop else { break };
        if stop.starts_with(&format!("ClusterExtension {gizmo} is there")) {
            // OLM itself stops while the extension adopts, and starts again.
            drop(olm_run);
            olm_run = OlmRun::start(&cluster, &cache).await?;
        }
        for (package, group) in &packages {
            for (object, v0, v1) in claims(&cluster, n, package, group).await? {
                assert!(!(v0 && v1), "stopped after {stop:?}: {object} is claimed by OLM v0 and OLM v1");
            }
        }
        stops.push(stop);
    }
    eprintln!("olm migrate stopped {} times, after:\n{}", stops.len(), stops.join("\n"));
    for step in [
        format!("OLM v0 leaves Subscription {n}/{gadget}"),
        format!("ClusterExtension {gadget} is there"),
        format!("deleted Subscription {gadget}"),
        format!("ClusterExtension {gizmo} is there"),
        format!("ClusterExtension {gizmo} has adopted version 2.0.0"),
        format!("deleted Subscription {gizmo}"),
    ] {
        assert!(stops.iter().any(|s| s.starts_with(&step)), "a run was stopped after {step:?}: {stops:#?}");
    }

    // The last rerun finishes (named: the last stop may leave no Subscription for --all).
    let done = migrate(&cluster, &[gizmo.as_str(), &format!("--namespace={n}"), "--yes"])?;
    let (stdout, stderr) = text(&done);
    assert!(done.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains(&format!("Subscription {n}/{gizmo} is ClusterExtension {gizmo} now")), "{stdout}{stderr}");

    let extensions: Api<ClusterExtension> = Api::all(cluster.client());
    let operators: Api<olm_api::v1::operator::Operator> = Api::all(cluster.client());
    for ((package, group), before) in packages.iter().zip(&before) {
        let extension = extensions.get(package).await?;
        assert_eq!(extension.status.as_ref().and_then(|s| s.install.as_ref()).map(|i| i.bundle.version.clone()).as_deref(), Some("2.0.0"));
        assert_eq!(extension.spec.source.catalog.as_ref().and_then(|c| c.version.clone()), None, "an Automatic Subscription's extension follows its channel");
        let deployment = Api::<Deployment>::namespaced(cluster.client(), n).get(&format!("{package}-operator")).await?;
        let crd = Api::<CustomResourceDefinition>::all(cluster.client()).get(&format!("widgets.{group}")).await?;
        let widgets = ApiResource { group: group.clone(), version: "v1".into(), api_version: format!("{group}/v1"), kind: "Widget".into(), plural: "widgets".into() };
        let widget = Api::<DynamicObject>::namespaced_with(cluster.client(), n, &widgets).get("mine").await?;
        assert_eq!(
            &(deployment.metadata.uid, deployment.metadata.generation, crd.metadata.uid, widget.metadata.uid, widget.metadata.resource_version),
            before,
            "{package}: the Deployment (uid, generation), the CRD and the custom resource are unchanged"
        );
        for (object, v0, v1) in claims(&cluster, n, package, group).await? {
            assert!(v1 && !v0, "{object} is OLM v1's alone (v0 {v0}, v1 {v1})");
        }
        let api_admin = Api::<ClusterRole>::all(cluster.client()).get(&format!("widgets.{group}-v1-admin")).await?;
        assert_eq!(api_admin.labels().get("rbac.authorization.k8s.io/aggregate-to-admin").map(String::as_str), Some("true"), "users keep access to the API");
        assert!(Api::<Subscription>::namespaced(cluster.client(), n).get_opt(package).await?.is_none());
        assert!(Api::<ClusterServiceVersion>::namespaced(cluster.client(), n).get_opt(&format!("{package}.v2.0.0")).await?.is_none());
        assert!(operators.get_opt(&olm_api::keys::operator_name(package, n)).await?.is_none(), "OLM v0's Operator object of {package} is gone");
        let events = Api::<Event>::namespaced(cluster.client(), "default")
            .list(&ListParams::default().fields(&format!("involvedObject.name={package},reason=MigratedFromOLMv0")))
            .await?;
        assert_eq!(events.items.len(), 1, "{package}: one Event records the migration, whatever the stops: {:?}", events.items.iter().map(|e| &e.message).collect::<Vec<_>>());
    }
    assert!(Api::<OperatorGroup>::namespaced(cluster.client(), n).get_opt("global").await?.is_none());

    for (package, _) in &packages {
        extensions.delete(package, &DeleteParams::default()).await?;
    }
    let _ = Api::<ClusterCatalog>::all(cluster.client()).delete(&source, &DeleteParams::default()).await;
    Ok(())
}

/// `olm migrate --all` migrates the namespace's Subscriptions one after another and stops at
/// the first it must refuse, saying why, what to do and which were migrated before it; the
/// refused one and the OperatorGroup it still uses stay OLM v0's, untouched.
#[tokio::test]
async fn migrating_all_stops_at_the_first_refusal_saying_what_was_migrated_before_it() -> anyhow::Result<()> {
    let _alone = ONE_AT_A_TIME.lock().await;
    let cluster = controllers::cluster_with_crds().await?;
    let registry = olm_testkit::registry(RegistryOptions::new()).await?;
    let work = tempfile::tempdir()?;
    let _olm = OlmRun::start(&cluster, &work.path().join("cache")).await?;
    let ns = cluster.namespace("migrate-refusal").await?;
    // "aa-…" sorts before "zz-…": the first is migrated, the second (Manual approval, no
    // --pin) refused.
    let first = olm_testkit::random_name("aa");
    let second = olm_testkit::random_name("zz");
    let source = widget_packages_in(&ns, registry.addr(), work.path(), &[&first, &second]).await?;
    for (package, approval) in [(&first, "Automatic"), (&second, "Manual")] {
        create_from_yaml(
            &ns,
            &format!(
                "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata:\n  name: {package}\n  annotations:\n    olm-rs.io/auto-approve-starting-csv: \"true\"\nspec:\n  source: {source}\n  sourceNamespace: {}\n  name: {package}\n  channel: stable\n  startingCSV: {package}.v2.0.0\n  installPlanApproval: {approval}\n",
                ns.name()
            ),
        )
        .await?;
    }
    for package in [&first, &second] {
        journey::csv_succeeded(&ns, &format!("{package}.v2.0.0"), TIMEOUT).await?;
    }

    let n = ns.name();
    let stopped = migrate(&cluster, &["--all", &format!("--namespace={n}"), "--yes"])?;
    let (stdout, stderr) = text(&stopped);
    assert_eq!(stopped.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.contains(&format!("Subscription {n}/{first} is ClusterExtension {first} now")), "{stdout}{stderr}");
    assert!(stderr.contains("installPlanApproval: Manual") && stderr.contains("--pin"), "why and what to do: {stderr}");
    assert!(stderr.contains(&format!("stopped at Subscription {n}/{second}; migrated before it: {first}")), "{stderr}");

    let extensions: Api<ClusterExtension> = Api::all(cluster.client());
    assert!(extensions.get_opt(&first).await?.is_some());
    assert!(extensions.get_opt(&second).await?.is_none(), "the refused one is not migrated");
    let sub = Api::<Subscription>::namespaced(cluster.client(), n).get(&second).await?;
    assert!(!sub.annotations().contains_key(olm_api::keys::MIGRATING_TO_ANNOTATION), "the refused Subscription is left to OLM v0");
    let csv = Api::<ClusterServiceVersion>::namespaced(cluster.client(), n).get(&format!("{second}.v2.0.0")).await?;
    assert!(!csv.annotations().contains_key(olm_api::keys::MIGRATING_TO_ANNOTATION));
    assert!(Api::<OperatorGroup>::namespaced(cluster.client(), n).get_opt("global").await?.is_some(), "the OperatorGroup stays: the refused Subscription uses it");

    extensions.delete(&first, &DeleteParams::default()).await?;
    let _ = Api::<ClusterCatalog>::all(cluster.client()).delete(&source, &DeleteParams::default()).await;
    Ok(())
}
