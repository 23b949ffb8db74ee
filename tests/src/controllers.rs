//! OLM's controllers in-process against the shared test control plane: CRDs, one controller
//! manager per test binary, the etcd catalog on a catalog server, CSV fixtures and the RBAC for
//! their declared permissions, and waits that show the objects when they time out.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use olm_api::v1::operator_group::{OperatorGroup, OperatorGroupSpec};
use olm_api::v1alpha1::cluster_service_version::{ClusterServiceVersion, CsvPhase};
use olm_testkit::{TestCluster, TestNamespace};

/// Field manager of the test setup's server-side applies.
const SETUP_MANAGER: &str = "olm-controllers-tests";

/// A file of the controllers' test data (`crates/olm-controllers/testdata`), shared with their unit tests.
pub fn testdata(relative: &str) -> PathBuf {
    crate::repo().join("crates/olm-controllers/testdata").join(relative)
}

/// Apply (server-side, idempotent) the OLM CRDs and the etcd CRDs, and wait until Established.
pub async fn install_crds(client: &Client) -> anyhow::Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut crds = olm_api::crds::all().context("generate OLM CRDs")?;
    for file in [
        "etcd-0.9.4/etcdclusters.etcd.database.coreos.com.crd.yaml",
        "etcd-0.9.4/etcdbackups.etcd.database.coreos.com.crd.yaml",
        "etcd-0.9.4/etcdrestores.etcd.database.coreos.com.crd.yaml",
    ] {
        let crd: CustomResourceDefinition = olm_api::yaml::from_path(testdata(file)).with_context(|| file.to_owned())?;
        crds.push(crd);
    }
    let params = PatchParams::apply(SETUP_MANAGER).force();
    for crd in &crds {
        let name = crd.name_any();
        let mut crd = crd.clone();
        crd.metadata.managed_fields = None;
        crd.metadata.resource_version = None;
        api.patch(&name, &params, &Patch::Apply(&crd))
            .await
            .with_context(|| format!("apply CRD {name}"))?;
    }
    for crd in &crds {
        let name = crd.name_any();
        olm_testkit::wait_for(&format!("CRD {name} Established"), Duration::from_secs(60), || {
            let api = api.clone();
            let name = name.clone();
            async move {
                let crd = api.get(&name).await.map_err(|e| e.to_string())?;
                let established = crd
                    .status
                    .and_then(|s| s.conditions)
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True");
                Ok::<_, String>(established.then_some(()))
            }
        })
        .await?;
    }
    Ok(())
}

/// Two OperatorGroups whose targets intersect may not provide the same API
/// (InterOperatorGroupOwnerConflict), and an all-namespaces group intersects every namespace.
/// Tests that install the etcd APIs in a namespaced group hold this for reading; a test that
/// installs them for all namespaces holds it for writing, so they never overlap.
pub static ETCD_APIS: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// The controllers run once per test binary, on their own runtime thread (a `ScopedManager` never stopped), so every test (each
/// on its own tokio runtime) talks to the same long-lived manager. Holds its admin address.
static MANAGER: tokio::sync::OnceCell<std::net::SocketAddr> = tokio::sync::OnceCell::const_new();

/// Make sure the control plane runs, the CRDs exist and the controllers run. Returns the cluster
/// and the admin server address of the in-process manager.
pub async fn setup() -> anyhow::Result<(TestCluster, std::net::SocketAddr)> {
    let cluster = cluster_with_crds().await?;
    let kubeconfig = cluster.kubeconfig();
    let addr = *MANAGER.get_or_try_init(|| start_manager(kubeconfig)).await?;
    Ok((cluster, addr))
}

/// The control plane with the CRDs installed, without the shared manager: for suites that run
/// controllers of their own (`faults::ScopedManager`).
pub async fn cluster_with_crds() -> anyhow::Result<TestCluster> {
    init_logging();
    let cluster = olm_testkit::cluster().await?;
    install_crds(&cluster.client()).await?;
    Ok(cluster)
}

async fn start_manager(kubeconfig: PathBuf) -> anyhow::Result<std::net::SocketAddr> {
    let manager = crate::faults::ScopedManager::start_with(kubeconfig, None, true).await?;
    let addr = manager.admin_addr.context("admin server address")?;
    // Runs for the rest of the test process: never stopped.
    std::mem::forget(manager);
    Ok(addr)
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("olm_controllers=info"));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_test_writer().try_init();
}

/// A CSV from testdata, placed in `namespace`.
pub fn load_csv(relative: &str, namespace: &str) -> anyhow::Result<ClusterServiceVersion> {
    let mut csv: ClusterServiceVersion = olm_api::yaml::from_path(testdata(relative))?;
    csv.metadata.namespace = Some(namespace.to_owned());
    Ok(csv)
}

pub async fn create_csv(ns: &TestNamespace, csv: &ClusterServiceVersion) -> anyhow::Result<ClusterServiceVersion> {
    let api: Api<ClusterServiceVersion> = ns.api();
    api.create(&PostParams::default(), csv)
        .await
        .with_context(|| format!("create CSV {}", csv.name_any()))
}

/// A copy of `csv` changed as JSON: tests reshape fields (owned APIs, webhooks, install modes)
/// that would be long-winded to build with the typed API.
pub fn edit_csv(csv: &ClusterServiceVersion, edit: impl FnOnce(&mut serde_json::Value)) -> anyhow::Result<ClusterServiceVersion> {
    let mut value = serde_json::to_value(csv).context("CSV as JSON")?;
    edit(&mut value);
    serde_json::from_value(value).context("edited CSV")
}

/// Grant the CSV's permissions (see [`grant_permissions`]) in the test namespace, then create
/// it there: what an InstallPlan does before the CSV controller takes over.
pub async fn create_csv_with_permissions(
    ns: &TestNamespace,
    csv: &ClusterServiceVersion,
    cluster_wide: bool,
) -> anyhow::Result<ClusterServiceVersion> {
    grant_permissions(&ns.cluster().client(), csv, ns.name(), cluster_wide).await?;
    create_csv(ns, csv).await
}

/// The OperatorGroup `group_name` targeting only `namespace` (the OwnNamespace install mode).
pub fn own_namespace_group(group_name: &str, namespace: &str) -> OperatorGroup {
    OperatorGroup::new(
        group_name,
        OperatorGroupSpec {
            target_namespaces: Some(vec![namespace.to_owned()]),
            ..Default::default()
        },
    )
}

/// Create [`own_namespace_group`] in the test namespace.
pub async fn create_own_namespace_group(ns: &TestNamespace, group_name: &str) -> anyhow::Result<OperatorGroup> {
    let groups: Api<OperatorGroup> = ns.api();
    groups
        .create(&PostParams::default(), &own_namespace_group(group_name, ns.name()))
        .await
        .with_context(|| format!("create OperatorGroup {group_name}"))
}

/// The CSV's `status.message`, empty when it has none.
pub async fn csv_message(ns: &TestNamespace, name: &str) -> anyhow::Result<String> {
    let csvs: Api<ClusterServiceVersion> = ns.api();
    Ok(csvs.get(name).await?.status.and_then(|s| s.message).unwrap_or_default())
}

/// Wait until the object `name` of `api` no longer exists (deleted, or garbage-collected).
/// `objects` are shown with the namespace's events if it never goes.
pub async fn wait_gone<K>(ns: &TestNamespace, what: &str, api: &Api<K>, name: &str, objects: &[&str]) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + k8s_openapi::serde::de::DeserializeOwned + std::fmt::Debug,
{
    ns.wait_for(what, TIMEOUT_GONE, objects, || {
        let api = api.clone();
        async move {
            match api.get_opt(name).await.map_err(|e| e.to_string())? {
                None => Ok(Some(())),
                Some(_) => Err(format!("{name} still present")),
            }
        }
    })
    .await?;
    Ok(())
}

/// How long [`wait_gone`] waits: deletion and garbage collection take a few seconds here.
const TIMEOUT_GONE: Duration = Duration::from_secs(90);

/// Whether the Deployment reports condition Available=True.
pub fn deployment_available(dep: &Deployment) -> bool {
    dep.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Available" && c.status == "True"))
}

/// Wait until the CSV `name` exists and is Succeeded (for CSVs an InstallPlan creates, which
/// may not exist yet when the wait begins). `objects` are shown if it never gets there.
pub async fn wait_csv_succeeded(ns: &TestNamespace, name: &str, timeout: Duration, objects: &[&str]) -> anyhow::Result<()> {
    let api: Api<ClusterServiceVersion> = ns.api();
    ns.wait_for(&format!("CSV {name} Succeeded"), timeout, objects, || {
        let api = api.clone();
        async move {
            let csv = api.get_opt(name).await.map_err(|e| e.to_string())?;
            Ok::<_, String>(csv.filter(|c| c.phase() == Some(&CsvPhase::Succeeded)).map(|_| ()))
        }
    })
    .await?;
    Ok(())
}

/// What the InstallPlan would create: the CSV's ServiceAccounts, a Role/RoleBinding with its
/// namespaced rules (a ClusterRole/Binding when `cluster_wide`), and a ClusterRole/Binding with
/// its cluster rules; all labelled with the CSV as owner, as the InstallPlan does.
pub async fn grant_permissions(client: &Client, csv: &ClusterServiceVersion, namespace: &str, cluster_wide: bool) -> anyhow::Result<()> {
    let strategy = csv.spec.install.spec.clone().context("CSV has an install strategy")?;
    let params = PatchParams::apply(SETUP_MANAGER).force();
    let sa_api: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let mut accounts: Vec<String> = strategy
        .permissions
        .iter()
        .flatten()
        .chain(strategy.cluster_permissions.iter().flatten())
        .map(|p| p.service_account_name.clone())
        .collect();
    accounts.sort();
    accounts.dedup();
    for sa in &accounts {
        let account = ServiceAccount {
            metadata: ObjectMeta {
                name: Some(sa.clone()),
                namespace: Some(namespace.to_owned()),
                ..Default::default()
            },
            ..Default::default()
        };
        sa_api
            .patch(sa, &params, &Patch::Apply(&account))
            .await
            .with_context(|| format!("apply SA {sa}"))?;
    }
    let subject = |sa: &str| Subject {
        kind: "ServiceAccount".into(),
        name: sa.to_owned(),
        namespace: Some(namespace.to_owned()),
        api_group: None,
    };
    let owner = Some(std::collections::BTreeMap::from([
        (olm_api::keys::OWNER_LABEL.to_owned(), csv.name_any()),
        (olm_api::keys::OWNER_NAMESPACE_LABEL.to_owned(), namespace.to_owned()),
        (olm_api::keys::OWNER_KIND_LABEL.to_owned(), "ClusterServiceVersion".to_owned()),
    ]));
    let rules_of = |p: &olm_api::v1alpha1::cluster_service_version::StrategyDeploymentPermissions| -> Vec<PolicyRule> {
        p.rules.iter().map(|r| (**r).clone()).collect()
    };
    for (index, perm) in strategy.permissions.iter().flatten().enumerate() {
        let name = format!("{}-{index}", csv.name_any());
        if cluster_wide {
            cluster_grant(
                client,
                &format!("{namespace}-{name}"),
                rules_of(perm),
                subject(&perm.service_account_name),
                owner.clone(),
            )
            .await?;
        } else {
            let role_api: Api<Role> = Api::namespaced(client.clone(), namespace);
            let role = Role {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    namespace: Some(namespace.to_owned()),
                    labels: owner.clone(),
                    ..Default::default()
                },
                rules: Some(rules_of(perm)),
            };
            role_api.patch(&name, &params, &Patch::Apply(&role)).await.context("apply Role")?;
            let binding_api: Api<RoleBinding> = Api::namespaced(client.clone(), namespace);
            let binding = RoleBinding {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    namespace: Some(namespace.to_owned()),
                    labels: owner.clone(),
                    ..Default::default()
                },
                role_ref: RoleRef {
                    api_group: Some("rbac.authorization.k8s.io".into()),
                    kind: "Role".into(),
                    name: name.clone(),
                },
                subjects: Some(vec![subject(&perm.service_account_name)]),
            };
            binding_api
                .patch(&name, &params, &Patch::Apply(&binding))
                .await
                .context("apply RoleBinding")?;
        }
    }
    for (index, perm) in strategy.cluster_permissions.iter().flatten().enumerate() {
        let name = format!("{namespace}-{}-cluster-{index}", csv.name_any());
        cluster_grant(client, &name, rules_of(perm), subject(&perm.service_account_name), owner.clone()).await?;
    }
    Ok(())
}

async fn cluster_grant(
    client: &Client,
    name: &str,
    rules: Vec<PolicyRule>,
    subject: Subject,
    labels: Option<std::collections::BTreeMap<String, String>>,
) -> anyhow::Result<()> {
    let params = PatchParams::apply(SETUP_MANAGER).force();
    let role_api: Api<ClusterRole> = Api::all(client.clone());
    let role = ClusterRole {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: labels.clone(),
            ..Default::default()
        },
        rules: Some(rules),
        aggregation_rule: None,
    };
    role_api
        .patch(name, &params, &Patch::Apply(&role))
        .await
        .context("apply ClusterRole")?;
    let binding_api: Api<ClusterRoleBinding> = Api::all(client.clone());
    let binding = ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels,
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "ClusterRole".into(),
            name: name.to_owned(),
        },
        subjects: Some(vec![subject]),
    };
    binding_api
        .patch(name, &params, &Patch::Apply(&binding))
        .await
        .context("apply ClusterRoleBinding")?;
    Ok(())
}

/// The phase and reason of a CSV, or None when it has no status yet.
pub async fn phase_of(api: &Api<ClusterServiceVersion>, name: &str) -> Result<Option<(String, String, String)>, String> {
    let csv = api.get_opt(name).await.map_err(|e| e.to_string())?;
    Ok(csv.and_then(|c| c.status).map(|s| {
        (
            s.phase.map(|p| p.as_str().to_owned()).unwrap_or_default(),
            s.reason.map(|r| r.as_str().to_owned()).unwrap_or_default(),
            s.message.unwrap_or_default(),
        )
    }))
}

/// Wait until the CSV shows `phase` (and `reason`, when given).
pub async fn wait_phase(ns: &TestNamespace, name: &str, phase: &str, reason: Option<&str>, timeout: Duration) -> anyhow::Result<()> {
    let api: Api<ClusterServiceVersion> = ns.api();
    let what = format!("CSV {name} to reach {phase}{}", reason.map(|r| format!("/{r}")).unwrap_or_default());
    let csv_ref = format!("clusterserviceversion/{name}");
    let objects = [csv_ref.as_str(), "deployments", "operatorgroups"];
    ns.wait_for(&what, timeout, &objects, || {
        let api = api.clone();
        async move {
            match phase_of(&api, name).await? {
                Some((p, r, _)) if p == phase && reason.is_none_or(|want| want == r) => Ok(Some(())),
                Some((p, r, m)) => Err(format!("phase {p}, reason {r}: {m}")),
                None => Err("no status yet".to_owned()),
            }
        }
    })
    .await?;
    Ok(())
}

/// The etcd fixture catalog (rendered from the community-operators bundles) served as
/// "community" on loopback gRPC, and over loopback HTTP too when `with_http`.
pub async fn etcd_catalog_server(with_http: bool) -> anyhow::Result<olm_registry::RunningServer> {
    catalog_server("community", crate::repo().join("crates/olm-registry/testdata/catalog/etcd"), with_http).await
}

/// The File-Based Catalog `dir` served as `name` on loopback gRPC (and HTTP when `with_http`),
/// without reloads: what a CatalogSource's `address` points at.
pub async fn catalog_server(name: &str, dir: std::path::PathBuf, with_http: bool) -> anyhow::Result<olm_registry::RunningServer> {
    let mut config = olm_registry::ServeConfig::new(vec![(name.into(), dir)]);
    if with_http {
        config.http_addr = Some("127.0.0.1:0".parse()?);
    }
    config.grpc_addrs = vec![(name.into(), "127.0.0.1:0".parse()?)];
    config.reload_interval = None;
    Ok(olm_registry::start(config).await?)
}

/// `kubectl create -f -` of `yaml` in the test namespace.
pub async fn create_from_yaml(ns: &TestNamespace, yaml: &str) -> anyhow::Result<()> {
    ns.kubectl_with_input(&["create", "-f", "-"], yaml).await?;
    Ok(())
}

/// GET a path from the admin server.
pub async fn admin_get(addr: std::net::SocketAddr, path: &str) -> anyhow::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream
        .write_all(format!("GET {path} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n").as_bytes())
        .await?;
    let mut out = String::new();
    stream.read_to_string(&mut out).await?;
    Ok(out)
}

/// A ServiceAccount with a Role (and binding) holding `rules` (YAML list items) in the namespace.
pub async fn service_account_with_role(ns: &TestNamespace, sa: &str, role: &str, rules: &str) -> anyhow::Result<()> {
    if ns.kubectl(&["get", "serviceaccount", sa]).await.is_err() {
        create_from_yaml(ns, &format!("apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: {sa}\n")).await?;
    }
    create_from_yaml(
        ns,
        &format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: {role}\nrules:\n{rules}---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: {role}\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: {role}\nsubjects:\n- kind: ServiceAccount\n  name: {sa}\n  namespace: {}\n",
            ns.name()
        ),
    )
    .await
}

/// A ClusterRole with `rules` bound to `sa` of `ns`, named after the namespace (removed by the test).
pub async fn grant_cluster_wide(ns: &TestNamespace, sa: &str, suffix: &str, rules: &str) -> anyhow::Result<String> {
    let name = format!("{}-{suffix}", ns.name());
    ns.cluster()
        .kubectl_with_input(
            &["create", "-f", "-"],
            &format!(
                "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: {name}\nrules:\n{rules}---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: {name}\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: {name}\nsubjects:\n- kind: ServiceAccount\n  name: {sa}\n  namespace: {}\n",
                ns.name()
            ),
        )
        .await?;
    Ok(name)
}
