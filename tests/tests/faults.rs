//! Faults in the middle of an install, on the local control plane (issue #20): the API server
//! killed while an InstallPlan applies its steps, the catalog server killed between resolution
//! and the bundle fetch, a 409 Conflict on the first status write of every kind, watches that
//! expire (410) and list again, and the controllers killed between two steps of a plan. Each
//! install must converge to the CSV Succeeded with one InstallPlan, one CSV and one of each
//! object it owns, and say what is wrong while it cannot.
//!
//! The controllers run per test (`faults::ScopedManager`, with a fault-injecting client), not
//! the suite-wide manager; the tests take turns (`SERIAL`): one kills the shared API server.

use std::time::Duration;

use anyhow::Context as _;
use http::Method;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{DeleteParams, ListParams};
use kube::{Api, ResourceExt};
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use olm_api::v1alpha1::install_plan::InstallPlan;
use olm_api::v1alpha1::subscription::{Subscription, SubscriptionConditionType};
use olm_dev::Component;
use olm_e2e::controllers::{self, create_from_yaml};
use olm_e2e::faults::{Faults, ScopedManager};
use olm_e2e::journey;
use olm_testkit::{TestCluster, TestNamespace};

const TIMEOUT: Duration = Duration::from_secs(120);
const OBJECTS: &[&str] = &["subscriptions", "installplans", "csvs", "catalogsources", "operatorgroups", "deployments"];
const HEAD: &str = "etcdoperator.v0.9.4";

/// One test at a time: each runs controllers of its own, and one kills the API server.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// An OwnNamespace OperatorGroup, a CatalogSource "community" at `address`, and (when
/// `starting` is given) a Subscription "etcd" to singlenamespace-alpha from that CSV.
async fn subscribe(ns: &TestNamespace, address: &str, starting: Option<&str>) -> anyhow::Result<()> {
    let name = ns.name();
    create_from_yaml(
        ns,
        &format!(
            "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata:\n  name: og\nspec:\n  targetNamespaces: [{name}]\n---\n\
             apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: community\nspec:\n  sourceType: grpc\n  address: \"{address}\"\n"
        ),
    )
    .await?;
    if let Some(starting) = starting {
        create_subscription(ns, starting).await?;
    }
    Ok(())
}

async fn create_subscription(ns: &TestNamespace, starting: &str) -> anyhow::Result<()> {
    create_from_yaml(
        ns,
        &format!(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata:\n  name: etcd\nspec:\n  source: community\n  sourceNamespace: {}\n  name: etcd\n  channel: singlenamespace-alpha\n  startingCSV: {starting}\n  installPlanApproval: Automatic\n",
            ns.name()
        ),
    )
    .await
}

/// What a user would notice as a duplicate or a leftover: exactly the CSV `csv`, no CSV
/// named by two InstallPlans, and one ServiceAccount, Role, RoleBinding and Deployment for
/// each the CSV declares.
async fn assert_installed_once(ns: &TestNamespace, csv: &str) -> anyhow::Result<()> {
    let csvs: Vec<ClusterServiceVersion> = ns.api().list(&ListParams::default()).await?.items;
    let names: Vec<String> = csvs.iter().map(|c| c.name_any()).collect();
    anyhow::ensure!(names == [csv], "expected only CSV {csv}, found {names:?}");

    let plans: Vec<InstallPlan> = ns.api().list(&ListParams::default()).await?.items;
    let mut planned: Vec<String> = plans.iter().flat_map(|p| p.spec.cluster_service_version_names.clone()).collect();
    planned.sort();
    let mut distinct = planned.clone();
    distinct.dedup();
    anyhow::ensure!(planned == distinct, "a CSV was planned twice: {planned:?} over {} InstallPlans", plans.len());

    let strategy = csvs[0].spec.install.spec.clone().context("the CSV's install strategy")?;
    let owned = ListParams::default().labels(&format!("{}={csv}", olm_api::keys::OWNER_LABEL));
    let roles = ns.api::<Role>().list(&owned).await?.items.len();
    let bindings = ns.api::<RoleBinding>().list(&owned).await?.items.len();
    let permissions = strategy.permissions.iter().flatten().count();
    anyhow::ensure!(
        roles == permissions && bindings == permissions,
        "{permissions} permission sets but {roles} Roles and {bindings} RoleBindings owned by {csv}"
    );
    let deployments: Vec<String> = ns.api::<Deployment>().list(&ListParams::default()).await?.items.iter().map(|d| d.name_any()).collect();
    let declared: Vec<String> = strategy.deployments.iter().map(|d| d.name.clone()).collect();
    anyhow::ensure!(deployments == declared, "Deployments {deployments:?}, the CSV declares {declared:?}");
    let accounts: Vec<String> = ns.api::<ServiceAccount>().list(&ListParams::default()).await?.items.iter().map(|a| a.name_any()).collect();
    for permission in strategy.permissions.iter().flatten() {
        let count = accounts.iter().filter(|a| **a == permission.service_account_name).count();
        anyhow::ensure!(count == 1, "ServiceAccount {} exists {count} times: {accounts:?}", permission.service_account_name);
    }
    Ok(())
}

/// Writes the controllers sent for objects in `ns`.
fn writes_in(faults: &Faults, ns: &TestNamespace) -> Vec<String> {
    let marker = format!("/namespaces/{}/", ns.name());
    faults
        .writes()
        .into_iter()
        .filter(|c| c.path.contains(&marker))
        .map(|c| format!("{} {}", c.method, c.path))
        .collect()
}

/// The statuses of the namespace's Subscription and CatalogSource, as YAML.
async fn statuses(ns: &TestNamespace) -> anyhow::Result<String> {
    let out = ns.kubectl(&["get", "subscriptions,catalogsources", "-o", "jsonpath={range .items[*]}{.kind} {.status}{\"\\n\"}{end}"]).await?;
    Ok(out.stdout)
}

async fn setup(prefix: &str) -> anyhow::Result<(TestCluster, TestNamespace)> {
    let cluster = controllers::cluster_with_crds().await?;
    let ns = cluster.namespace(prefix).await?;
    Ok((cluster, ns))
}

fn grpc_address(server: &olm_registry::RunningServer) -> anyhow::Result<String> {
    Ok(server.grpc_addrs.get("community").context("gRPC address of community")?.to_string())
}

async fn in_blocking<T: Send + 'static>(work: impl FnOnce() -> anyhow::Result<T> + Send + 'static) -> anyhow::Result<T> {
    tokio::task::spawn_blocking(work).await.context("blocking task")?
}

#[tokio::test]
async fn an_install_survives_the_api_server_dying_in_the_middle_of_its_plan() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let (cluster, ns) = setup("fault-apiserver").await?;
    let server = controllers::etcd_catalog_server(false).await?;
    let faults = Faults::default();
    let _manager = ScopedManager::start(cluster.kubeconfig(), Some(faults.clone())).await?;
    // The ServiceAccount is a step of the plan's second round: the CRDs and the CSV are written.
    let marker = format!("/namespaces/{}/serviceaccounts/", ns.name());
    let reached = faults.hold(move |c| c.method == Method::PATCH && c.path.contains(&marker));
    subscribe(&ns, &grpc_address(&server)?, Some(HEAD)).await?;
    let held = tokio::time::timeout(TIMEOUT, reached).await.context("no ServiceAccount step was written")??;

    let layout = olm_testkit::test_layout()?;
    let killed_layout = layout.clone();
    let pid = in_blocking(move || Ok(olm_dev::kill_component(&killed_layout, Component::ApiServer)?)).await?;
    anyhow::ensure!(pid.is_some(), "the API server was not running");
    // The held write goes on into a dead API server, and so does everything else for a while.
    faults.release();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let took = in_blocking(move || Ok(olm_dev::restart_component(&layout, Component::ApiServer)?)).await?;
    println!("API server killed at {} {}, down for {:.1}s", held.method, held.path, 5.0 + took.as_secs_f32());

    journey::csv_succeeded(&ns, HEAD, TIMEOUT).await?;
    assert_installed_once(&ns, HEAD).await?;
    drop(server);
    ns.cleanup().await?;
    Ok(())
}

#[tokio::test]
async fn a_catalog_server_dying_before_the_bundle_fetch_is_said_and_then_recovered() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let (cluster, ns) = setup("fault-catalog").await?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let address = format!("127.0.0.1:{port}");
    let catalog = olm_e2e::repo().join("crates/olm-registry/testdata/catalog/etcd");
    let serve = || -> anyhow::Result<std::process::Child> {
        Ok(std::process::Command::new(olm_e2e::olm_bin())
            .args(["catalog", "serve", "--http-addr", "none", "--reload-interval", "0"])
            .arg("--catalog")
            .arg(format!("community={}", catalog.display()))
            .args(["--grpc-addr", &address])
            .stderr(std::process::Stdio::null())
            .spawn()?)
    };
    let mut server = serve()?;
    let _manager = ScopedManager::start(cluster.kubeconfig(), None).await?;
    subscribe(&ns, &address, None).await?;
    let sources: Api<olm_api::v1alpha1::catalog_source::CatalogSource> = ns.api();
    ns.wait_for("CatalogSource community READY", TIMEOUT, OBJECTS, || {
        let sources = sources.clone();
        async move {
            let source = sources.get("community").await.map_err(|e| e.to_string())?;
            let state = source.status.and_then(|s| s.connection_state).map(|c| c.last_observed_state).unwrap_or_default();
            Ok::<_, String>((state == "READY").then_some(()))
        }
    })
    .await?;

    // The catalog's listing is read (resolution can run from it); its server dies before any
    // bundle's manifests are fetched.
    server.kill()?;
    server.wait()?;
    create_subscription(&ns, HEAD).await?;
    let message = journey::condition_true(&ns, "etcd", SubscriptionConditionType::ResolutionFailed, TIMEOUT).await?;
    assert!(
        message.contains(HEAD) && message.contains("community"),
        "the Subscription should name the bundle it cannot read and the catalog: {message}"
    );
    let unhealthy = journey::condition_true(&ns, "etcd", SubscriptionConditionType::CatalogSourcesUnhealthy, TIMEOUT).await?;
    println!("while the catalog server is down: ResolutionFailed: {message}\nCatalogSourcesUnhealthy: {unhealthy}");
    let plans: Vec<InstallPlan> = ns.api().list(&ListParams::default()).await?.items;
    assert!(plans.is_empty(), "no InstallPlan without the bundle's manifests: {:?}", plans.iter().map(|p| p.name_any()).collect::<Vec<_>>());

    let mut server = serve()?;
    journey::csv_succeeded(&ns, HEAD, TIMEOUT).await?;
    let sub: Subscription = ns.api().get("etcd").await?;
    let status = sub.status.unwrap_or_default();
    assert!(
        status.condition(&SubscriptionConditionType::ResolutionFailed).is_none_or(|c| c.status != olm_api::common::ConditionStatus::True),
        "ResolutionFailed should be cleared once the bundle is read"
    );
    assert_installed_once(&ns, HEAD).await?;
    server.kill()?;
    server.wait()?;
    ns.cleanup().await?;
    Ok(())
}

#[tokio::test]
async fn a_conflict_on_the_first_status_write_of_every_kind_is_retried() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let (cluster, ns) = setup("fault-conflict").await?;
    let server = controllers::etcd_catalog_server(false).await?;
    let faults = Faults::default();
    faults.conflict_on_status_writes();
    let _manager = ScopedManager::start(cluster.kubeconfig(), Some(faults.clone())).await?;
    // From 0.9.2: an install and an upgrade, so every kind writes its status more than once.
    subscribe(&ns, &grpc_address(&server)?, Some("etcdoperator.v0.9.2")).await?;
    // The head first: before 0.9.2 is made, "0.9.2 gone" already holds.
    journey::csv_succeeded(&ns, HEAD, TIMEOUT).await?;
    journey::csv_replaced(&ns, "etcdoperator.v0.9.2", TIMEOUT).await?;
    journey::at_latest(&ns, "etcd", HEAD, TIMEOUT).await?;
    assert_installed_once(&ns, HEAD).await?;
    let conflicts = faults.conflicts();
    for kind in ["subscriptions", "installplans", "clusterserviceversions", "catalogsources", "operatorgroups"] {
        assert!(conflicts.contains_key(kind), "no status write of {kind} got its 409: {conflicts:?}");
    }
    println!("409 answered once to the status writes of: {:?}", conflicts.keys().collect::<Vec<_>>());
    drop(server);
    ns.cleanup().await?;
    Ok(())
}

#[tokio::test]
async fn restarted_controllers_whose_watches_expire_relist_without_rewriting_anything() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let (cluster, ns) = setup("fault-relist").await?;
    let server = controllers::etcd_catalog_server(false).await?;
    let first = ScopedManager::start(cluster.kubeconfig(), None).await?;
    subscribe(&ns, &grpc_address(&server)?, Some(HEAD)).await?;
    journey::csv_succeeded(&ns, HEAD, TIMEOUT).await?;
    journey::at_latest(&ns, "etcd", HEAD, TIMEOUT).await?;
    // Let the last status writes land before the restart.
    tokio::time::sleep(Duration::from_secs(3)).await;
    drop(first);
    let statuses_before = statuses(&ns).await?;

    // A new process lists everything; every watch it opens then expires once and lists again.
    let faults = Faults::default();
    faults.expire_watches();
    let _second = ScopedManager::start(cluster.kubeconfig(), Some(faults.clone())).await?;
    tokio::time::sleep(Duration::from_secs(15)).await;
    let expired = faults.expired();
    for kind in ["subscriptions", "installplans", "clusterserviceversions", "catalogsources", "operatorgroups", "deployments"] {
        assert!(expired.contains_key(kind), "no watch of {kind} was expired: {expired:?}");
    }
    // The one write allowed: the CatalogSource's status records the new connection
    // (`lastConnect`), once per catalog, not once per Subscription.
    let writes: Vec<String> = writes_in(&faults, &ns).into_iter().filter(|w| !w.ends_with("/catalogsources/community/status")).collect();
    if !writes.is_empty() {
        let after = statuses(&ns).await?;
        panic!("a restart and relist over an installed operator rewrote: {writes:#?}\nstatuses before: {statuses_before}\nafter: {after}");
    }

    // The watches that replaced the expired ones work: a deleted Deployment comes back.
    let deployments: Api<Deployment> = ns.api();
    let name = deployments.list(&ListParams::default()).await?.items.first().context("the operator's Deployment")?.name_any();
    let uid = deployments.get(&name).await?.uid();
    deployments.delete(&name, &DeleteParams::default()).await?;
    ns.wait_for(&format!("Deployment {name} recreated"), TIMEOUT, OBJECTS, || {
        let deployments = deployments.clone();
        let name = name.clone();
        let uid = uid.clone();
        async move {
            let now = deployments.get_opt(&name).await.map_err(|e| e.to_string())?;
            Ok::<_, String>(now.filter(|d| d.uid() != uid).map(|_| ()))
        }
    })
    .await?;
    journey::csv_succeeded(&ns, HEAD, TIMEOUT).await?;
    println!("expired once and relisted: {:?}", expired.keys().collect::<Vec<_>>());
    drop(server);
    ns.cleanup().await?;
    Ok(())
}

#[tokio::test]
async fn controllers_killed_between_two_steps_finish_the_plan_once() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let (cluster, ns) = setup("fault-restart").await?;
    let server = controllers::etcd_catalog_server(false).await?;
    let faults = Faults::default();
    let first = ScopedManager::start(cluster.kubeconfig(), Some(faults.clone())).await?;
    // Roles come after the CRDs, the CSV and the ServiceAccounts: the plan is half applied.
    let marker = format!("/namespaces/{}/roles/", ns.name());
    let reached = faults.hold(move |c| c.method == Method::PATCH && c.path.contains(&marker));
    subscribe(&ns, &grpc_address(&server)?, Some(HEAD)).await?;
    let held = tokio::time::timeout(TIMEOUT, reached).await.context("no Role step was written")??;
    drop(first);
    let before: Vec<String> = writes_in(&faults, &ns);
    println!("killed at {} {} after {} writes in the namespace", held.method, held.path, before.len());

    let _second = ScopedManager::start(cluster.kubeconfig(), None).await?;
    journey::csv_succeeded(&ns, HEAD, TIMEOUT).await?;
    assert_installed_once(&ns, HEAD).await?;
    let plans: Vec<InstallPlan> = ns.api().list(&ListParams::default()).await?.items;
    assert_eq!(plans.len(), 1, "one InstallPlan: {:?}", plans.iter().map(|p| p.name_any()).collect::<Vec<_>>());
    drop(server);
    ns.cleanup().await?;
    Ok(())
}
