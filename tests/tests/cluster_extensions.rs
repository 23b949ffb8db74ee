//! OLM v1's ClusterExtension on the real control plane, against the `olm run` binary, as a
//! cluster admin uses it: a package installed from a ClusterCatalog as plain objects (no CSV),
//! owned and labelled as upstream's, upgraded through `spec.source.catalog.version` and removed
//! with the ClusterExtension; a downgrade the catalog does not allow, a version nobody offers, a
//! bundle that needs `watchNamespace` and an unsafe CRD upgrade each said in the status with what
//! to do, the installed revision running on meanwhile; what a new bundle drops, removed.

use std::time::Duration;

use anyhow::Context as _;
use kube::Api;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams};
use olm_api::olmv1::{ClusterCatalog, ClusterExtension};
use olm_e2e::controllers;
use olm_e2e::olm;
use olm_e2e::olmv1::{OlmRun, cluster_catalog, widget_catalog};
use olm_testkit::{RegistryOptions, TestCluster, wait_for};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(120);

/// One test at a time: each runs an `olm run` of its own, and ClusterExtensions and
/// ClusterCatalogs are cluster-scoped.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

struct Setup {
    cluster: TestCluster,
    catalog: String,
    extensions: Api<ClusterExtension>,
    _registry: olm_testkit::TestRegistry,
    _work: tempfile::TempDir,
    _olm: OlmRun,
}

impl Setup {
    /// A ClusterCatalog of the catalog directory `catalog_dir` (pushed as an image), served.
    async fn new(prefix: &str, catalog_dir: &std::path::Path) -> anyhow::Result<Setup> {
        let cluster = controllers::cluster_with_crds().await?;
        let registry = olm_testkit::registry(RegistryOptions::new()).await?;
        let work = tempfile::tempdir()?;
        let extensions: Api<ClusterExtension> = Api::all(cluster.client());
        let catalogs: Api<ClusterCatalog> = Api::all(cluster.client());
        // What a failed earlier run left.
        for extension in extensions.list(&Default::default()).await?.items {
            let name = kube::ResourceExt::name_any(&extension);
            if name.starts_with(&format!("{prefix}-")) {
                let _ = extensions.delete(&name, &DeleteParams::default()).await;
            }
        }
        let run = OlmRun::start(&cluster, &work.path().join("cache")).await?;
        let catalog = olm_testkit::random_name(prefix);
        let image = format!("{}/{prefix}-catalog:v1", registry.addr());
        olm(&["catalog", "push", catalog_dir.to_str().context("path")?, &image])?;
        cluster.kubectl_with_input(&["create", "-f", "-"], &cluster_catalog(&catalog, &image, None)).await?;
        wait_for(&format!("ClusterCatalog {catalog} Serving"), TIMEOUT, || async {
            let served = catalogs.get(&catalog).await?;
            anyhow::Ok(served.conditions().iter().any(|c| c.type_ == "Serving" && c.status == "True").then_some(()))
        })
        .await?;
        Ok(Setup { cluster, catalog, extensions, _registry: registry, _work: work, _olm: run })
    }

    /// Create a ClusterExtension of `package` installed into `namespace`; `catalog` is merged
    /// into `spec.source.catalog`, `spec` into `spec`.
    async fn create(&self, name: &str, namespace: &str, package: &str, catalog: Value, spec: Value) -> anyhow::Result<()> {
        let mut object = json!({
            "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension", "metadata": {"name": name},
            "spec": {"namespace": namespace, "source": {"sourceType": "Catalog", "catalog": {"packageName": package,
                     "selector": {"matchLabels": {"olm.operatorframework.io/metadata.name": self.catalog}}}}}
        });
        merge(&mut object["spec"]["source"]["catalog"], catalog);
        merge(&mut object["spec"], spec);
        self.extensions.create(&Default::default(), &serde_json::from_value(object)?).await?;
        Ok(())
    }

    async fn patch_catalog(&self, name: &str, catalog: Value) -> anyhow::Result<()> {
        let patch = json!({"spec": {"source": {"catalog": catalog}}});
        self.extensions.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
        Ok(())
    }

    /// Waits until the extension's status passes `check`.
    async fn wait(&self, name: &str, what: &str, check: impl Fn(&ClusterExtension) -> bool) -> anyhow::Result<ClusterExtension> {
        Ok(wait_for(&format!("ClusterExtension {name}: {what}"), TIMEOUT, || async {
            let extension = self.extensions.get(name).await?;
            anyhow::Ok(check(&extension).then_some(extension.clone()).or_else(|| {
                eprintln!("  {name}: {:?}", extension.conditions().iter().map(|c| (&c.type_, &c.status, &c.reason, &c.message)).collect::<Vec<_>>());
                None
            }))
        })
        .await?)
    }

    /// Waits until `bundle` is installed and nothing is left to do.
    async fn installed(&self, name: &str, bundle: &str) -> anyhow::Result<ClusterExtension> {
        self.wait(name, &format!("{bundle} installed"), |e| {
            installed_bundle(e).as_deref() == Some(bundle) && condition(e, "Progressing").is_some_and(|c| c.1 == "Succeeded")
        })
        .await
    }
}

fn merge(into: &mut Value, from: Value) {
    if let (Some(into), Value::Object(from)) = (into.as_object_mut(), from) {
        into.extend(from);
    }
}

/// (status, reason, message) of the condition `type_`.
fn condition(extension: &ClusterExtension, type_: &str) -> Option<(String, String, String)> {
    let c = extension.conditions().iter().find(|c| c.type_ == type_)?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone()))
}

fn installed_bundle(extension: &ClusterExtension) -> Option<String> {
    Some(extension.status.as_ref()?.install.as_ref()?.bundle.name.clone())
}

async fn get(cluster: &TestCluster, api_version: &str, kind: &str, plural: &str, namespace: Option<&str>, name: &str) -> anyhow::Result<Option<DynamicObject>> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let resource = kube::api::ApiResource::from_gvk_with_plural(&kube::core::GroupVersionKind::gvk(group, version, kind), plural);
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(cluster.client(), ns, &resource),
        None => Api::all_with(cluster.client(), &resource),
    };
    Ok(api.get_opt(name).await?)
}

fn label<'a>(object: &'a DynamicObject, key: &str) -> Option<&'a str> {
    object.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// The release of `extension` as upstream's e2e suite reads it (`listHelmReleaseResources`): the
/// one Secret in OLM's namespace labelled `name=<extension>,status=deployed` of type
/// `operatorframework.io/index.v1`, its `chunk` a gzipped Helm release. Its name and the
/// manifest's objects as (kind, namespace, name).
async fn deployed_release(cluster: &TestCluster, extension: &str) -> anyhow::Result<(String, Vec<(String, String, String)>)> {
    use std::io::Read as _;
    let namespace = olm_controllers::catalog_operator::global_namespace();
    let selector = format!("name={extension},status=deployed");
    let out = cluster.kubectl(&["get", "secrets", "-n", &namespace, "-l", &selector, "--field-selector", "type=operatorframework.io/index.v1", "-o", "json"]).await?.stdout;
    let list: Value = serde_json::from_str(&out)?;
    let items = list["items"].as_array().context("items")?;
    anyhow::ensure!(items.len() == 1, "one deployed release of {extension}, not {}: {out}", items.len());
    let chunk = items[0]["data"]["chunk"].as_str().context("data.chunk")?;
    use base64::Engine as _;
    let gzipped = base64::engine::general_purpose::STANDARD.decode(chunk)?;
    let mut text = String::new();
    flate2::read::GzDecoder::new(gzipped.as_slice()).read_to_string(&mut text)?;
    let release: Value = serde_json::from_str(&text)?;
    let objects = olm_catalog::load::parse_manifest_text(release["manifest"].as_str().context("manifest")?).map_err(anyhow::Error::msg)?;
    let text = |o: &Value, p: &str| o.pointer(p).and_then(Value::as_str).unwrap_or_default().to_owned();
    let objects = objects.iter().map(|o| (text(o, "/kind"), text(o, "/metadata/namespace"), text(o, "/metadata/name"))).collect();
    Ok((items[0]["metadata"]["name"].as_str().unwrap_or_default().to_owned(), objects))
}

/// Deletes `deployment` and waits (30 s) for the ClusterExtension to put it back: the new one.
async fn deleted_and_put_back(cluster: &TestCluster, ns: &olm_testkit::TestNamespace, deployment: &DynamicObject, what: &str) -> anyhow::Result<DynamicObject> {
    let (uid, name) = (deployment.metadata.uid.clone(), deployment.metadata.name.clone().unwrap_or_default());
    ns.kubectl(&["delete", "deployment", &name, "--wait=true"]).await?;
    let back = wait_for(what, Duration::from_secs(30), || async {
        let back = get(cluster, "apps/v1", "Deployment", "deployments", Some(ns.name()), &name).await?;
        anyhow::Ok(back.filter(|d| d.metadata.uid != uid))
    })
    .await?;
    Ok(back)
}

fn etcd_catalog() -> std::path::PathBuf {
    olm_e2e::repo().join("crates/olm-registry/testdata/catalog")
}

/// CRDs as OLM v0 suites on this shared control plane leave them (v0 never deletes a CRD; the
/// conformance suite installs real packages, Authorino among them): OLM v1 refuses to take over
/// what it did not install, as upstream's does, so they go first. Suites run one binary at a
/// time; none of v0's runs beside this one.
async fn without_crds(cluster: &TestCluster, crds: &[&str]) -> anyhow::Result<()> {
    let crds: Vec<String> = crds.iter().map(|c| format!("customresourcedefinitions/{c}")).collect();
    let mut args = vec!["delete", "--ignore-not-found", "--wait=true"];
    args.extend(crds.iter().map(String::as_str));
    cluster.kubectl(&args).await?;
    Ok(())
}

async fn without_etcd_crds(cluster: &TestCluster) -> anyhow::Result<()> {
    without_crds(cluster, &["etcdclusters.etcd.database.coreos.com", "etcdbackups.etcd.database.coreos.com", "etcdrestores.etcd.database.coreos.com"]).await
}

#[tokio::test]
async fn etcd_installs_as_plain_objects_upgrades_through_its_version_and_goes_with_its_extension() -> anyhow::Result<()> {
    let _alone = ONE_AT_A_TIME.lock().await;
    let setup = Setup::new("ext", &etcd_catalog()).await?;
    without_etcd_crds(&setup.cluster).await?;
    let ns = setup.cluster.namespace("ext-etcd").await?;
    let name = olm_testkit::random_name("ext");
    setup.create(&name, ns.name(), "etcd", json!({"channels": ["clusterwide-alpha"], "version": "0.9.2-clusterwide"}), json!({})).await?;

    let extension = setup.installed(&name, "etcdoperator.v0.9.2-clusterwide").await?;
    let (status, reason, message) = condition(&extension, "Installed").context("Installed")?;
    assert_eq!((status.as_str(), reason.as_str()), ("True", "Succeeded"));
    assert!(message.starts_with("Installed bundle ") && message.ends_with(" successfully"), "{message}");
    assert_eq!(condition(&extension, "Progressing").map(|c| c.2), Some("Desired state reached".to_owned()));
    assert_eq!(condition(&extension, "Deprecated").map(|c| (c.0, c.1)), Some(("False".to_owned(), "NotDeprecated".to_owned())));
    assert_eq!(extension.status.as_ref().and_then(|s| s.install.as_ref()).map(|i| i.bundle.version.clone()).as_deref(), Some("0.9.2-clusterwide"));

    // Plain objects, owned and labelled as upstream's; no CSV.
    let deployment = get(&setup.cluster, "apps/v1", "Deployment", "deployments", Some(ns.name()), "etcd-operator").await?.context("the operator's Deployment")?;
    assert_eq!(label(&deployment, "olm.operatorframework.io/owner-kind"), Some("ClusterExtension"));
    assert_eq!(label(&deployment, "olm.operatorframework.io/owner-name"), Some(name.as_str()));
    let owner = &deployment.metadata.owner_references.as_ref().context("ownerReferences")?[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("ClusterExtension", name.as_str()));
    let annotations = &deployment.data["spec"]["template"]["metadata"]["annotations"];
    assert_eq!(annotations["olm.targetNamespaces"], json!(""), "it watches all namespaces");
    assert_eq!(annotations["olm.operatorNamespace"], json!(ns.name()));
    let image_v2 = deployment.data["spec"]["template"]["spec"]["containers"][0]["image"].clone();
    let crd = get(&setup.cluster, "apiextensions.k8s.io/v1", "CustomResourceDefinition", "customresourcedefinitions", None, "etcdclusters.etcd.database.coreos.com").await?.context("the CRD")?;
    assert_eq!(label(&crd, "olm.operatorframework.io/owner-name"), Some(name.as_str()));
    let csvs = ns.kubectl(&["get", "clusterserviceversions", "-o", "name"]).await?.stdout;
    assert!(csvs.trim().is_empty(), "OLM v1 writes no CSV: {csvs}");
    // A deleted Deployment is put back at once (upstream's drift repair).
    deleted_and_put_back(&setup.cluster, &ns, &deployment, "the deleted Deployment put back").await?;
    let table = setup.cluster.kubectl(&["get", "clusterextension", &name]).await?.stdout;
    assert!(table.contains("etcdoperator.v0.9.2-clusterwide") && table.contains("0.9.2-clusterwide") && table.contains("True"), "kubectl's columns: {table}");
    // What was installed is recorded as upstream records it: a Helm release its tools read.
    let (release, objects) = deployed_release(&setup.cluster, &name).await?;
    assert_eq!(release, format!("sh.helm.release.v1.{name}.v1"));
    assert!(objects.contains(&("Deployment".into(), ns.name().into(), "etcd-operator".into())), "{objects:?}");
    assert!(objects.contains(&("CustomResourceDefinition".into(), String::new(), "etcdclusters.etcd.database.coreos.com".into())), "{objects:?}");

    // A downgrade the catalog does not allow: said, and the installed bundle stays.
    setup.patch_catalog(&name, json!({"version": "0.9.0"})).await?;
    let refused = setup
        .wait(&name, "the downgrade refused", |e| condition(e, "Progressing").is_some_and(|c| c.1 == "Retrying" && c.2.contains("0.9.0")))
        .await?;
    let message = condition(&refused, "Progressing").context("Progressing")?.2;
    assert!(
        message.starts_with("error upgrading from currently installed version \"0.9.2-clusterwide\": no bundles found for package \"etcd\" matching version \"0.9.0\""),
        "upstream's words: {message}"
    );
    assert!(message.contains("SelfCertified"), "and what to do: {message}");
    assert_eq!(installed_bundle(&refused).as_deref(), Some("etcdoperator.v0.9.2-clusterwide"));
    assert_eq!(condition(&refused, "Installed").map(|c| c.0), Some("True".to_owned()));

    // An upgrade along the channel.
    setup.patch_catalog(&name, json!({"version": "0.9.4-clusterwide"})).await?;
    setup.installed(&name, "etcdoperator.v0.9.4-clusterwide").await?;
    let deployment = get(&setup.cluster, "apps/v1", "Deployment", "deployments", Some(ns.name()), "etcd-operator").await?.context("Deployment")?;
    assert_ne!(deployment.data["spec"]["template"]["spec"]["containers"][0]["image"], image_v2, "the new bundle's operator image");
    // One release: the upgrade's replaced the first.
    assert_eq!(deployed_release(&setup.cluster, &name).await?.0, format!("sh.helm.release.v1.{name}.v2"));
    let all = setup.cluster.kubectl(&["get", "secrets", "-A", "-l", &format!("owner=operator-controller,name={name}"), "-o", "name"]).await?.stdout;
    assert_eq!(all.lines().count(), 1, "no release of an earlier revision left: {all}");

    // SelfCertified: the user vouches for a move the channel graph does not offer (here back to
    // 0.9.2), as upstream's "force update".
    setup.patch_catalog(&name, json!({"version": "0.9.2-clusterwide", "upgradeConstraintPolicy": "SelfCertified"})).await?;
    setup.installed(&name, "etcdoperator.v0.9.2-clusterwide").await?;

    // The catalog deleted: what is installed stays installed, and nothing is said to be wrong.
    let catalogs: Api<ClusterCatalog> = Api::all(setup.cluster.client());
    catalogs.delete(&setup.catalog, &DeleteParams::default()).await?;
    // A new generation, resolved with no catalog at all.
    setup.patch_catalog(&name, json!({"upgradeConstraintPolicy": "CatalogProvided"})).await?;
    let kept = setup.wait(&name, "kept without its catalog", |e| {
        e.metadata.generation == e.conditions().iter().find(|c| c.type_ == "Progressing").and_then(|c| c.observed_generation)
            && condition(e, "Progressing").is_some_and(|c| c.1 == "Succeeded")
    }).await?;
    assert_eq!(installed_bundle(&kept).as_deref(), Some("etcdoperator.v0.9.2-clusterwide"));
    let deployment = get(&setup.cluster, "apps/v1", "Deployment", "deployments", Some(ns.name()), "etcd-operator").await?.context("still running")?;
    // And still repaired: with no catalog to read the bundle from, a deleted Deployment is put
    // back from what the release recorded (upstream's "auto-healing after catalog deletion").
    let back = deleted_and_put_back(&setup.cluster, &ns, &deployment, "the deleted Deployment put back without a catalog").await?;
    let image = |d: &DynamicObject| d.data["spec"]["template"]["spec"]["containers"][0]["image"].clone();
    assert_eq!(image(&back), image(&deployment), "the installed bundle's, as it was");

    // Deleting the extension removes what it installed, as upstream's (the garbage collector).
    setup.extensions.delete(&name, &DeleteParams::default()).await?;
    wait_for("the operator's Deployment and CRD removed", TIMEOUT, || async {
        let deployment = get(&setup.cluster, "apps/v1", "Deployment", "deployments", Some(ns.name()), "etcd-operator").await?;
        let crd = get(&setup.cluster, "apiextensions.k8s.io/v1", "CustomResourceDefinition", "customresourcedefinitions", None, "etcdclusters.etcd.database.coreos.com").await?;
        anyhow::Ok((deployment.is_none() && crd.is_none()).then_some(()))
    })
    .await?;
    ns.cleanup().await?;
    Ok(())
}

#[tokio::test]
async fn refusals_say_what_to_change_and_a_fixed_spec_installs() -> anyhow::Result<()> {
    let _alone = ONE_AT_A_TIME.lock().await;
    let setup = Setup::new("refused", &etcd_catalog()).await?;
    without_etcd_crds(&setup.cluster).await?;
    let ns = setup.cluster.namespace("refused-etcd").await?;

    // etcd 0.9.4 supports OwnNamespace and SingleNamespace only: watchNamespace is required.
    let own = olm_testkit::random_name("refused");
    setup.create(&own, ns.name(), "etcd", json!({"channels": ["singlenamespace-alpha"]}), json!({})).await?;
    let stopped = setup.wait(&own, "InvalidConfiguration", |e| condition(e, "Progressing").is_some_and(|c| c.1 == "InvalidConfiguration")).await?;
    let (status, _, message) = condition(&stopped, "Progressing").context("Progressing")?;
    assert_eq!(status, "False", "only a change of the spec helps");
    assert!(message.contains("invalid ClusterExtension configuration: invalid configuration: required field \"watchNamespace\" is missing"), "{message}");
    assert!(message.contains(&format!("set spec.config.inline.watchNamespace to \"{}\"", ns.name())), "what to set: {message}");
    assert_eq!(condition(&stopped, "Installed").map(|c| (c.0, c.2)), Some(("False".to_owned(), "No bundle installed".to_owned())));
    let patch = json!({"spec": {"config": {"configType": "Inline", "inline": {"watchNamespace": ns.name()}}}});
    setup.extensions.patch(&own, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    setup.installed(&own, "etcdoperator.v0.9.4").await?;
    let roles = ns.kubectl(&["get", "roles", "-l", &format!("olm.operatorframework.io/owner-name={own}"), "-o", "name"]).await?.stdout;
    assert!(!roles.trim().is_empty(), "its permissions as a Role in the watched namespace");

    // An install namespace that does not exist yet: said, and installed once it is created.
    let later = format!("{}-later", ns.name());
    let waiting = olm_testkit::random_name("refused");
    setup.create(&waiting, &later, "etcd", json!({"channels": ["clusterwide-alpha"], "version": "0.9.4-clusterwide"}), json!({})).await?;
    let retrying = setup.wait(&waiting, "waiting for its namespace", |e| condition(e, "Progressing").is_some_and(|c| c.2.contains("does not exist"))).await?;
    let message = condition(&retrying, "Progressing").context("Progressing")?.2;
    assert!(message.contains(&format!("the install namespace \"{later}\" does not exist: create it")), "{message}");
    setup.cluster.kubectl(&["create", "namespace", &later]).await?;
    // etcd clusterwide and etcd per namespace provide the same CRDs: the first extension's
    // are not this one's, and it says so.
    let refused = setup.wait(&waiting, "the other extension's CRD refused", |e| condition(e, "Progressing").is_some_and(|c| c.2.contains("already exists"))).await?;
    let message = condition(&refused, "Progressing").context("Progressing")?.2;
    assert!(message.contains(&format!("it belongs to ClusterExtension {own}")), "whose it is: {message}");
    setup.extensions.delete(&waiting, &DeleteParams::default()).await?;
    setup.cluster.kubectl(&["delete", "namespace", &later, "--wait=false"]).await?;

    // A version nobody offers, and a package no catalog has.
    let version = olm_testkit::random_name("refused");
    setup.create(&version, ns.name(), "etcd", json!({"version": "9.9.9"}), json!({})).await?;
    let retrying = setup.wait(&version, "Retrying", |e| condition(e, "Progressing").is_some_and(|c| c.1 == "Retrying")).await?;
    let message = condition(&retrying, "Progressing").context("Progressing")?.2;
    assert!(message.starts_with("no bundles found for package \"etcd\" matching version \"9.9.9\""), "{message}");
    assert!(condition(&retrying, "BundleDeprecated").is_some_and(|c| c.0 == "Unknown" && c.1 == "Absent"), "nothing installed, nothing to judge");
    let package = olm_testkit::random_name("refused");
    setup.create(&package, ns.name(), "no-such-package", json!({}), json!({})).await?;
    let retrying = setup.wait(&package, "Retrying", |e| condition(e, "Progressing").is_some_and(|c| c.1 == "Retrying")).await?;
    let message = condition(&retrying, "Progressing").context("Progressing")?.2;
    assert!(message.contains("no bundles found for package \"no-such-package\"") && message.contains("check spec.source.catalog.packageName"), "{message}");

    // The good one was not disturbed.
    setup.installed(&own, "etcdoperator.v0.9.4").await?;
    for name in [&own, &version, &package] {
        setup.extensions.delete(name, &DeleteParams::default()).await?;
    }
    ns.cleanup().await?;
    Ok(())
}

#[tokio::test]
async fn an_unsafe_crd_upgrade_waits_with_the_old_revision_running_and_what_the_new_bundle_drops_goes() -> anyhow::Result<()> {
    let _alone = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir()?;
    widget_catalog(&dir.path().join("widget"), "ext.example.com")?;
    let setup = Setup::new("widget", &dir.path().join("widget")).await?;
    let ns = setup.cluster.namespace("widget-ext").await?;
    let name = olm_testkit::random_name("widget");
    setup.create(&name, ns.name(), "widget", json!({"version": "1.0.0"}), json!({})).await?;
    setup.installed(&name, "widget.v1.0.0").await?;
    assert!(get(&setup.cluster, "v1", "Service", "services", Some(ns.name()), "widget-metrics").await?.is_some(), "v1's Service");
    assert!(get(&setup.cluster, "v1", "ServiceAccount", "serviceaccounts", Some(ns.name()), "widget").await?.is_some(), "the account its permissions name");

    // A Widget the new schema refuses: the upgrade waits, and says which and why.
    ns.kubectl_with_input(&["apply", "-f", "-"], "apiVersion: ext.example.com/v1\nkind: Widget\nmetadata:\n  name: small\nspec: {}\n").await?;
    setup.patch_catalog(&name, json!({"version": "2.0.0"})).await?;
    let waiting = setup
        .wait(&name, "the CRD upgrade refused", |e| condition(e, "Progressing").is_some_and(|c| c.1 == "Retrying" && c.2.contains("validating upgrade for CRD")))
        .await?;
    let message = condition(&waiting, "Progressing").context("Progressing")?.2;
    assert!(message.starts_with("error for resolved bundle \"widget.v2.0.0\" with version \"2.0.0\": validating upgrade for CRD \"widgets.ext.example.com\""), "{message}");
    assert!(message.contains(&format!("{}/small", ns.name())) && message.contains("size"), "names the object and the field: {message}");
    assert!(message.contains("crdUpgradeSafety.enforcement: None"), "and how to skip the check: {message}");
    assert_eq!(installed_bundle(&waiting).as_deref(), Some("widget.v1.0.0"), "the old revision stays installed");
    let deployment = get(&setup.cluster, "apps/v1", "Deployment", "deployments", Some(ns.name()), "widget-operator").await?.context("Deployment")?;
    assert_eq!(deployment.data["spec"]["template"]["spec"]["containers"][0]["image"], json!("example.com/widget:1.0.0"), "nothing of v2 was applied");

    // Fixed: the upgrade goes through, and v1's Service, which v2 no longer has, goes.
    ns.kubectl(&["patch", "widgets.ext.example.com", "small", "--type=merge", "-p", "{\"spec\":{\"size\":3}}"]).await?;
    setup.installed(&name, "widget.v2.0.0").await?;
    let deployment = get(&setup.cluster, "apps/v1", "Deployment", "deployments", Some(ns.name()), "widget-operator").await?.context("Deployment")?;
    assert_eq!(deployment.data["spec"]["template"]["spec"]["containers"][0]["image"], json!("example.com/widget:2.0.0"));
    assert!(get(&setup.cluster, "v1", "Service", "services", Some(ns.name()), "widget-metrics").await?.is_none(), "dropped by v2: removed");
    let widget = get(&setup.cluster, "ext.example.com/v1", "Widget", "widgets", Some(ns.name()), "small").await?.context("the Widget")?;
    assert_eq!(widget.data["spec"]["size"], json!(3), "the user's object is untouched");

    setup.extensions.delete(&name, &DeleteParams::default()).await?;
    ns.cleanup().await?;
    Ok(())
}

#[tokio::test]
async fn the_named_service_account_installs_and_what_it_may_not_do_is_refused_by_name() -> anyhow::Result<()> {
    let _alone = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir()?;
    widget_catalog(&dir.path().join("widget"), "scoped.example.com")?;
    let setup = Setup::new("scoped", &dir.path().join("widget")).await?;
    let ns = setup.cluster.namespace("scoped-ext").await?;
    ns.kubectl_with_input(&["apply", "-f", "-"], "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: installer\n").await?;
    let name = olm_testkit::random_name("scoped");
    setup.create(&name, ns.name(), "widget", json!({"version": "1.0.0"}), json!({"serviceAccount": {"name": "installer"}})).await?;

    // The account holds nothing: OLM acts as it, so the API server refuses, and the status says
    // who may not do what and what to grant.
    let refused = setup.wait(&name, "refused", |e| condition(e, "Progressing").is_some_and(|c| c.1 == "Retrying" && c.2.contains("may not"))).await?;
    let message = condition(&refused, "Progressing").context("Progressing")?.2;
    assert!(message.contains(&format!("ServiceAccount {}/installer may not apply", ns.name())), "{message}");
    assert!(message.contains("grant it create and patch on "), "what to grant: {message}");
    eprintln!("refused: {message}");
    assert!(get(&setup.cluster, "apps/v1", "Deployment", "deployments", Some(ns.name()), "widget-operator").await?.is_none(), "nothing installed with OLM's own rights");

    // Granted what the bundle needs: installed, as the account.
    let binding = format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: {name}-installer\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: cluster-admin\nsubjects:\n- kind: ServiceAccount\n  name: installer\n  namespace: {}\n",
        ns.name()
    );
    setup.cluster.kubectl_with_input(&["apply", "-f", "-"], &binding).await?;
    setup.installed(&name, "widget.v1.0.0").await?;
    let deployment = get(&setup.cluster, "apps/v1", "Deployment", "deployments", Some(ns.name()), "widget-operator").await?.context("Deployment")?;
    let managers: Vec<String> = deployment.metadata.managed_fields.iter().flatten().filter_map(|m| m.manager.clone()).collect();
    assert!(managers.iter().any(|m| m == "olm/clusterextension"), "{managers:?}");

    setup.extensions.delete(&name, &DeleteParams::default()).await?;
    setup.cluster.kubectl(&["delete", "clusterrolebinding", &format!("{name}-installer"), "--ignore-not-found"]).await?;
    ns.cleanup().await?;
    Ok(())
}

/// Authorino, a real community operator (tests/testdata/real-bundles): its own conversion webhook,
/// AllNamespaces only. Installed at 0.12.0 from its bundle directories, upgraded to 0.13.0 along
/// its channel, removed with its extension.
#[tokio::test]
async fn a_real_operator_with_a_conversion_webhook_is_served_its_certificate_upgrades_and_goes() -> anyhow::Result<()> {
    let _alone = ONE_AT_A_TIME.lock().await;
    let bundles = olm_e2e::repo().join("tests/testdata/real-bundles/authorino-operator");
    let dir = tempfile::tempdir()?;
    let catalog = dir.path().join("authorino");
    std::fs::create_dir_all(&catalog)?;
    let rendered = olm(&["catalog", "render", "-o", "json", bundles.join("0.12.0").to_str().context("path")?, bundles.join("0.13.0").to_str().context("path")?])?;
    let head = [
        json!({"schema": "olm.package", "name": "authorino-operator", "defaultChannel": "stable"}),
        json!({"schema": "olm.channel", "package": "authorino-operator", "name": "stable",
               "entries": [{"name": "authorino-operator.v0.12.0"}, {"name": "authorino-operator.v0.13.0", "replaces": "authorino-operator.v0.12.0"}]}),
    ];
    std::fs::write(catalog.join("catalog.json"), format!("{}\n{rendered}", head.iter().map(Value::to_string).collect::<Vec<_>>().join("\n")))?;
    let setup = Setup::new("authorino", &catalog).await?;
    without_crds(&setup.cluster, &["authconfigs.authorino.kuadrant.io", "authorinos.operator.authorino.kuadrant.io"]).await?;
    // And the ClusterRoles its bundle ships, which the conformance suite's v0 installs leave.
    let roles = ["authorino-authconfig-editor-role", "authorino-authconfig-viewer-role", "authorino-manager-k8s-auth-role", "authorino-manager-role"];
    let mut args = vec!["delete", "clusterrole", "--ignore-not-found"];
    args.extend(roles);
    setup.cluster.kubectl(&args).await?;
    let ns = setup.cluster.namespace("authorino").await?;
    let name = olm_testkit::random_name("authorino");
    setup.create(&name, ns.name(), "authorino-operator", json!({"version": "0.12.0"}), json!({})).await?;
    setup.installed(&name, "authorino-operator.v0.12.0").await?;

    let crd_name = "authconfigs.authorino.kuadrant.io";
    let crd = get(&setup.cluster, "apiextensions.k8s.io/v1", "CustomResourceDefinition", "customresourcedefinitions", None, crd_name).await?.context("the CRD")?;
    let conversion = &crd.data["spec"]["conversion"];
    assert_eq!(conversion["strategy"], json!("Webhook"), "{conversion}");
    assert_eq!(conversion["webhook"]["clientConfig"]["service"]["namespace"], json!(ns.name()));
    assert_eq!(conversion["webhook"]["clientConfig"]["service"]["name"], json!("authorino-webhooks-service"));
    assert!(conversion["webhook"]["clientConfig"]["caBundle"].as_str().is_some_and(|ca| ca.len() > 100), "the CA of the serving certificate: {conversion}");
    let secret = get(&setup.cluster, "v1", "Secret", "secrets", Some(ns.name()), "authorino-webhooks-service-cert").await?.context("the serving certificate's Secret")?;
    let certificate = secret.data["data"]["tls.crt"].clone();
    assert!(certificate.is_string(), "{secret:?}");
    get(&setup.cluster, "v1", "Service", "services", Some(ns.name()), "authorino-webhooks-service").await?.context("the webhook's Service")?;
    let webhooks = get(&setup.cluster, "apps/v1", "Deployment", "deployments", Some(ns.name()), "authorino-webhooks").await?.context("the webhook Deployment")?;
    let volumes = &webhooks.data["spec"]["template"]["spec"]["volumes"];
    assert!(volumes.as_array().into_iter().flatten().any(|v| v["secret"]["secretName"] == "authorino-webhooks-service-cert"), "the pair is mounted: {volumes}");

    setup.patch_catalog(&name, json!({"version": "0.13.0"})).await?;
    setup.installed(&name, "authorino-operator.v0.13.0").await?;
    let secret = get(&setup.cluster, "v1", "Secret", "secrets", Some(ns.name()), "authorino-webhooks-service-cert").await?.context("Secret")?;
    assert_eq!(secret.data["data"]["tls.crt"], certificate, "a good certificate is kept across the upgrade (no pod restarts for it)");

    setup.extensions.delete(&name, &DeleteParams::default()).await?;
    wait_for("authorino's CRD removed with its extension", TIMEOUT, || async {
        let crd = get(&setup.cluster, "apiextensions.k8s.io/v1", "CustomResourceDefinition", "customresourcedefinitions", None, crd_name).await?;
        anyhow::Ok(crd.is_none().then_some(()))
    })
    .await?;
    ns.cleanup().await?;
    Ok(())
}
