//! The Operator API (`operators.coreos.com/v1` Operator) on the real control plane: after a
//! Subscription installs the real etcd bundle, `kubectl get operators` lists `etcd.<namespace>`
//! and its `status.components` names what belongs to it — the Subscription, its InstallPlan,
//! the CSV (with its phase as condition), the CRDs, the ServiceAccount, the RBAC and the
//! Deployment. What a user labels joins and leaves it; a deleted Operator whose components
//! remain comes back, as upstream's does.

use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use olm_api::v1::operator::Operator;
use olm_api::v1alpha1::subscription::Subscription;
use olm_e2e::controllers::{self, create_from_yaml, etcd_catalog_server};
use olm_testkit::TestNamespace;
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(120);
const OBJECTS: &[&str] = &["operators", "subscriptions", "installplans", "csvs"];

/// `(kind, namespace, name)` of every component the Operator lists.
fn components(operator: &Operator) -> Vec<(String, String, String)> {
    operator
        .component_refs()
        .iter()
        .map(|r| {
            (
                r.object.kind.clone().unwrap_or_default(),
                r.object.namespace.clone().unwrap_or_default(),
                r.object.name.clone().unwrap_or_default(),
            )
        })
        .collect()
}

/// Wait until the Operator `name` exists and `check` accepts it.
async fn operator_where(ns: &TestNamespace, name: &str, what: &str, check: impl Fn(&Operator) -> bool) -> anyhow::Result<Operator> {
    let api: Api<Operator> = Api::all(ns.cluster().client());
    let check = &check;
    Ok(ns.wait_for(&format!("Operator {name}: {what}"), TIMEOUT, OBJECTS, || {
        let api = api.clone();
        async move {
            let operator = api.get_opt(name).await.map_err(|e| e.to_string())?;
            Ok::<_, String>(operator.filter(|o| check(o)))
        }
    })
    .await?)
}

fn lists(operator: &Operator, kind: &str, namespace: &str, name: &str) -> bool {
    components(operator).iter().any(|(k, n, m)| k == kind && n == namespace && m == name)
}

#[tokio::test]
async fn an_installed_operator_lists_its_components() -> anyhow::Result<()> {
    let (cluster, _) = controllers::setup().await?;
    let server = etcd_catalog_server(true).await?;
    let address = server.grpc_addrs.get("community").context("gRPC address of community")?.to_string();
    let ns = install_etcd(&cluster, "operator-api", &address).await?;
    let namespace = ns.name().to_owned();
    let sub: Subscription = ns.api().get("etcd").await?;
    let plan = sub.status.as_ref().and_then(|s| s.install_plan_ref.as_ref()).context("the Subscription names its plan")?.name.clone().unwrap_or_default();

    // The Operator of the package in this namespace, with what belongs to it.
    let name = format!("etcd.{namespace}");
    let expected = [
        ("Subscription", namespace.as_str(), "etcd"),
        ("InstallPlan", namespace.as_str(), plan.as_str()),
        ("ClusterServiceVersion", namespace.as_str(), "etcdoperator.v0.9.4"),
        ("ServiceAccount", namespace.as_str(), "etcd-operator"),
        ("Deployment", namespace.as_str(), "etcd-operator"),
        ("CustomResourceDefinition", "", "etcdclusters.etcd.database.coreos.com"),
        ("CustomResourceDefinition", "", "etcdbackups.etcd.database.coreos.com"),
        ("CustomResourceDefinition", "", "etcdrestores.etcd.database.coreos.com"),
    ];
    // While other installs keep Operators busy, a status may wait (`operator::pacing`): the
    // wait is for the CSV listed as Succeeded too.
    let csv_succeeded = |op: &Operator| {
        op.component_refs().iter().any(|r| {
            r.object.kind.as_deref() == Some("ClusterServiceVersion") && r.conditions.iter().flatten().any(|c| c.type_ == "Succeeded")
        })
    };
    let operator = operator_where(&ns, &name, "lists the Subscription, plan, CSV (Succeeded), CRDs, ServiceAccount and Deployment", |op| {
        expected.iter().all(|(kind, ns, n)| lists(op, kind, ns, n)) && lists_kind(op, "Role") && lists_kind(op, "RoleBinding") && csv_succeeded(op)
    })
    .await?;
    let selector = serde_json::to_value(operator.status.as_ref().and_then(|s| s.components.as_ref()).and_then(|c| c.label_selector.as_ref()))?;
    assert_eq!(selector, json!({"matchExpressions": [{"key": format!("operators.coreos.com/{name}"), "operator": "Exists"}]}));
    let csv_ref = operator
        .component_refs()
        .iter()
        .find(|r| r.object.kind.as_deref() == Some("ClusterServiceVersion"))
        .context("the CSV is listed")?;
    let phase = csv_ref.conditions.iter().flatten().map(|c| c.type_.as_str()).collect::<Vec<_>>();
    assert_eq!(phase, ["Succeeded"], "the CSV's phase is its condition");
    assert_eq!(csv_ref.object.api_version.as_deref(), Some("operators.coreos.com/v1alpha1"));

    // The shared CRDs carry the Operator's label too (`kubectl operator uninstall --delete-all`
    // finds them there once the CSV is gone). The Operator lists its CSV's CRDs by ownership,
    // and the CSV may succeed while its plan's share of a busy CRD (other tests install etcd
    // meanwhile) is parked for the next write: the label is there once the plan is Complete.
    plans_complete(&ns).await?;
    let crd_labels = cluster.kubectl(&["get", "crd", "etcdclusters.etcd.database.coreos.com", "-o", "jsonpath={.metadata.labels}"]).await?.stdout;
    assert!(crd_labels.contains(&format!("operators.coreos.com/{name}")), "{crd_labels}");

    // `kubectl get operators` lists it.
    let listed = cluster.kubectl(&["get", "operators"]).await?.stdout;
    assert!(listed.contains(&name), "kubectl get operators:\n{listed}");

    // A ServiceAccount a user labels joins the Operator, and leaves it when unlabelled.
    let label = format!("operators.coreos.com/{name}");
    let accounts: Api<ServiceAccount> = ns.api();
    let mut helper = ServiceAccount::default();
    helper.metadata.name = Some("helper".into());
    helper.metadata.labels = Some([(label.clone(), String::new())].into());
    accounts.create(&PostParams::default(), &helper).await?;
    operator_where(&ns, &name, "lists the labelled ServiceAccount helper", |op| lists(op, "ServiceAccount", &namespace, "helper")).await?;
    accounts
        .patch("helper", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {label.as_str(): null}}})))
        .await?;
    operator_where(&ns, &name, "no longer lists the unlabelled ServiceAccount helper", |op| {
        !lists(op, "ServiceAccount", &namespace, "helper") && lists(op, "ServiceAccount", &namespace, "etcd-operator")
    })
    .await?;

    // Deleted while its components remain, the Operator comes back.
    let operators: Api<Operator> = Api::all(ns.cluster().client());
    let uid = operator.uid();
    operators.delete(&name, &DeleteParams::default()).await?;
    let again = operator_where(&ns, &name, "created again, with its components", |op| op.uid() != uid && lists(op, "Subscription", &namespace, "etcd")).await?;
    assert!(again.metadata.deletion_timestamp.is_none());

    ns.cleanup().await?;
    Ok(())
}

/// Install the etcd operator into a new namespace from the catalog server at `address`; the
/// namespace, once its CSV Succeeded.
async fn install_etcd(cluster: &olm_testkit::TestCluster, prefix: &str, address: &str) -> anyhow::Result<TestNamespace> {
    let ns = cluster.namespace(prefix).await?;
    let namespace = ns.name().to_owned();
    create_from_yaml(
        &ns,
        &format!("apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata:\n  name: og\nspec:\n  targetNamespaces: [{namespace}]\n"),
    )
    .await?;
    create_from_yaml(
        &ns,
        &format!("apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: community\nspec:\n  sourceType: grpc\n  address: \"{address}\"\n"),
    )
    .await?;
    create_from_yaml(
        &ns,
        &format!(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata:\n  name: etcd\nspec:\n  source: community\n  sourceNamespace: {namespace}\n  name: etcd\n  channel: singlenamespace-alpha\n  installPlanApproval: Automatic\n"
        ),
    )
    .await?;
    controllers::wait_csv_succeeded(&ns, "etcdoperator.v0.9.4", TIMEOUT, OBJECTS).await?;
    Ok(ns)
}

/// Waits until every InstallPlan of `ns` is Complete.
async fn plans_complete(ns: &TestNamespace) -> anyhow::Result<()> {
    use olm_api::v1alpha1::install_plan::{InstallPlan, InstallPlanPhase};
    let plans: Api<InstallPlan> = ns.api();
    ns.wait_for("its InstallPlan Complete", TIMEOUT, OBJECTS, || {
        let plans = plans.clone();
        async move {
            let list = plans.list(&Default::default()).await.map_err(|e| e.to_string())?;
            let complete = !list.items.is_empty()
                && list.items.iter().all(|p| p.status.as_ref().is_some_and(|s| s.phase == InstallPlanPhase::Complete));
            Ok::<_, String>(complete.then_some(()))
        }
    })
    .await?;
    Ok(())
}

/// The field managers that own `label` on the object `managed` describes.
fn label_owners(managed: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry], label: &str) -> Vec<String> {
    let field = format!("f:{label}");
    managed
        .iter()
        .filter(|entry| {
            entry.fields_v1.as_ref().and_then(|f| f.0.pointer("/f:metadata/f:labels")).and_then(|labels| labels.get(&field)).is_some()
        })
        .map(|entry| entry.manager.clone().unwrap_or_default())
        .collect()
}

#[tokio::test]
async fn a_shared_crd_keeps_every_installs_label_in_the_plans_own_write() -> anyhow::Result<()> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let (cluster, _) = controllers::setup().await?;
    let server = etcd_catalog_server(true).await?;
    let address = server.grpc_addrs.get("community").context("gRPC address of community")?.to_string();
    // At the same time: their plans may share one write of each CRD.
    let (first, second, third) = tokio::try_join!(
        install_etcd(&cluster, "shared-crd-a", &address),
        install_etcd(&cluster, "shared-crd-b", &address),
        install_etcd(&cluster, "shared-crd-c", &address),
    )?;
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.client());
    for ns in [&first, &second, &third] {
        // A CSV may succeed while its plan's share of a busy CRD is parked for the next write
        // (`crd_writes`): the plan is Complete once its share is on the CRD.
        plans_complete(ns).await?;
        let label = format!("operators.coreos.com/etcd.{}", ns.name());
        let crd = crds.get("etcdclusters.etcd.database.coreos.com").await?;
        assert!(crd.labels().contains_key(&label), "the shared CRD carries {label}: {:?}", crd.labels());
        let alongside = format!("{}/etcdoperator.v0.9.4", ns.name());
        assert!(
            crd.annotations().iter().any(|(k, v)| k.starts_with("operatorframework.io/installed-alongside-") && *v == alongside),
            "the shared CRD says it was installed alongside {alongside}: {:?}",
            crd.annotations()
        );
        // The plan applied the label with the CRD (one write per install), and the second
        // install's apply kept the first's: the Operator controller had nothing to add.
        let owners = label_owners(crd.metadata.managed_fields.as_deref().unwrap_or_default(), &label);
        assert!(owners.iter().any(|m| m == "olm/installplan"), "{label} is applied by the plans: owned by {owners:?}");
        assert!(!owners.iter().any(|m| m == "olm/operator"), "{label} needed no second write: owned by {owners:?}");
    }
    for ns in [first, second, third] {
        ns.cleanup().await?;
    }
    Ok(())
}

fn lists_kind(operator: &Operator, kind: &str) -> bool {
    components(operator).iter().any(|(k, _, _)| k == kind)
}

/// Twelve installs of one operator at once make its CRDs busy (`crd_writes::BUSY_SHARES`): a
/// plan may park its share of a CRD for the next write instead of writing it. Every plan still
/// completes, and every CRD ends with every install's label and installed-alongside annotation.
#[tokio::test]
async fn a_burst_of_installs_leaves_every_install_on_the_shared_crds() -> anyhow::Result<()> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let (cluster, _) = controllers::setup().await?;
    let server = etcd_catalog_server(true).await?;
    let address = server.grpc_addrs.get("community").context("gRPC address of community")?.to_string();
    let prefixes: Vec<String> = (0..12).map(|i| format!("crd-burst-{i}")).collect();
    let installs = prefixes.iter().map(|prefix| install_etcd(&cluster, prefix, &address));
    let namespaces = futures::future::try_join_all(installs).await?;
    for ns in &namespaces {
        plans_complete(ns).await?;
    }
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.client());
    for name in ["etcdclusters.etcd.database.coreos.com", "etcdbackups.etcd.database.coreos.com", "etcdrestores.etcd.database.coreos.com"] {
        let crd = crds.get(name).await?;
        for ns in &namespaces {
            let label = format!("operators.coreos.com/etcd.{}", ns.name());
            assert!(crd.labels().contains_key(&label), "{name} carries {label}");
            let alongside = format!("{}/etcdoperator.v0.9.4", ns.name());
            assert!(
                crd.annotations().iter().any(|(k, v)| k.starts_with("operatorframework.io/installed-alongside-") && *v == alongside),
                "{name} says it was installed alongside {alongside}"
            );
        }
    }
    for ns in namespaces {
        ns.cleanup().await?;
    }
    Ok(())
}
