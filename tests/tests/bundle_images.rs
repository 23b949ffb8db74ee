//! Operators from images, as every published catalog delivers them: the real etcd bundles are
//! pushed to a real registry with `olm bundle push`, a file-based catalog that names them by
//! digest and inlines nothing is pushed with `olm catalog push`, and a CatalogSource with
//! `spec.image` and a Subscription install and upgrade etcd from them. The failures a cluster
//! admin meets (registry down, image missing, credentials missing) are explained on the
//! CatalogSource and the Subscription, and hurt nothing else.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use base64::Engine as _;
use kube::Api;
use kube::api::{Patch, PatchParams};
use olm_api::v1alpha1::catalog_source::CatalogSource;
use olm_api::v1alpha1::install_plan::InstallPlan;
use olm_api::v1alpha1::subscription::{Subscription, SubscriptionConditionType};
use olm_e2e::controllers::{self, create_from_yaml};
use olm_e2e::{images, journey, olm};
use olm_testkit::TestNamespace;
use olm_testkit::RegistryOptions;
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(120);
const OBJECTS: &[&str] = &["subscriptions", "installplans", "csvs", "catalogsources"];
const VERSIONS: [&str; 3] = ["0.9.0", "0.9.2", "0.9.4"];

fn bundle_dir(version: &str) -> std::path::PathBuf {
    images::etcd_bundle_dir(version)
}

/// Push the etcd bundles of [`VERSIONS`] to `registry`; their digest references by CSV name.
fn push_bundles(registry: &str, extra: &[&str]) -> anyhow::Result<BTreeMap<String, String>> {
    let mut pushed = BTreeMap::new();
    for version in VERSIONS {
        let mut args = vec!["bundle", "push"];
        let dir = bundle_dir(version);
        let dir = dir.to_str().context("path")?;
        let target = format!("{registry}/etcd-bundle:{version}");
        args.extend([dir, target.as_str()]);
        args.extend(extra);
        let reference = olm(&args)?.trim().to_owned();
        assert!(reference.starts_with(&format!("{registry}/etcd-bundle@sha256:")), "{reference}");
        pushed.insert(format!("etcdoperator.v{version}"), reference);
    }
    Ok(pushed)
}

/// A file-based catalog in `dir` with the etcd package, the channel `singlenamespace-alpha` up
/// to `head` (a replaces chain) and each bundle rendered by `olm catalog render` with its
/// image and only an `olm.csv.metadata`: what a published catalog carries.
fn write_catalog(dir: &Path, images: &BTreeMap<String, String>, head: &str) -> anyhow::Result<()> {
    let mut docs = vec![json!({"schema": "olm.package", "name": "etcd", "defaultChannel": "singlenamespace-alpha"})];
    let mut entries = Vec::new();
    let mut previous: Option<String> = None;
    for version in VERSIONS {
        let name = format!("etcdoperator.v{version}");
        let mut entry = json!({"name": name});
        if let Some(previous) = &previous {
            entry["replaces"] = json!(previous);
        }
        entries.push(entry);
        let image = images.get(&name).context("pushed bundle")?;
        let rendered = olm(&[
            "catalog",
            "render",
            bundle_dir(version).to_str().context("path")?,
            "--image",
            image,
            "--migrate-level",
            "bundle-object-to-csv-metadata",
            "-o",
            "json",
        ])?;
        docs.push(serde_json::from_str(&rendered).context("rendered bundle")?);
        previous = Some(name);
        if version == head {
            break;
        }
    }
    docs.push(json!({"schema": "olm.channel", "package": "etcd", "name": "singlenamespace-alpha", "entries": entries}));
    std::fs::create_dir_all(dir)?;
    let text: Vec<String> = docs.iter().map(Value::to_string).collect();
    let text = text.join("\n");
    assert!(!text.contains("olm.bundle.object"), "the catalog inlines no manifest");
    std::fs::write(dir.join("catalog.json"), text)?;
    Ok(())
}

/// The message of the Subscription's condition `type_` once it is True.
async fn wait_condition(ns: &TestNamespace, sub: &str, type_: SubscriptionConditionType) -> anyhow::Result<String> {
    journey::condition_true(ns, sub, type_, TIMEOUT).await
}


#[tokio::test]
async fn etcd_installs_and_upgrades_from_bundle_images_referenced_by_digest() -> anyhow::Result<()> {
    let _apis = controllers::ETCD_APIS.read().await;
    let (cluster, _) = controllers::setup().await?;
    let registry = olm_testkit::registry(RegistryOptions::new()).await?;
    let addr = registry.addr().to_owned();
    let images = push_bundles(&addr, &[])?;
    let work = tempfile::tempdir()?;
    write_catalog(&work.path().join("v1"), &images, "0.9.2")?;
    let catalog_image = format!("{addr}/etcd-catalog:latest");
    let first = olm(&["catalog", "push", work.path().join("v1").to_str().context("path")?, &catalog_image])?;

    let ns = cluster.namespace("bundle-images").await?;
    controllers::create_own_namespace_group(&ns, "etcd").await?;
    create_from_yaml(
        &ns,
        &format!(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: etcd-images\nspec:\n  sourceType: grpc\n  image: {catalog_image}\n  updateStrategy:\n    registryPoll:\n      interval: 2s\n"
        ),
    )
    .await?;
    create_from_yaml(&ns, &images::etcd_subscription("etcd", "etcd-images", ns.name(), "etcdoperator.v0.9.0")).await?;

    // 0.9.0 → 0.9.2, both from bundle images: the CSV carries the bundle's Deployment.
    let v092 = journey::csv_succeeded(&ns, "etcdoperator.v0.9.2", TIMEOUT).await?;
    let strategy = serde_json::to_value(&v092.spec.install)?;
    assert_eq!(strategy["spec"]["deployments"][0]["name"], json!("etcd-operator"), "{strategy}");
    journey::csv_replaced(&ns, "etcdoperator.v0.9.0", TIMEOUT).await?;
    journey::at_latest(&ns, "etcd", "etcdoperator.v0.9.2", TIMEOUT).await?;
    let catalogs: Api<CatalogSource> = ns.api();
    let status = catalogs.get("etcd-images").await?.status.unwrap_or_default();
    assert_eq!(status.connection_state.map(|c| c.last_observed_state).as_deref(), Some("READY"));
    // Read by OLM itself: `registryService` says the registry is there (clients wait for it),
    // naming the protocol only, since there is no registry Pod or Service.
    let service = status.registry_service.context("registryService set once the catalog is read")?;
    assert_eq!((service.protocol.as_deref(), service.service_name.as_deref()), (Some("grpc"), None));

    // A new catalog image on the same tag is picked up within a poll interval, and the
    // Subscription upgrades to the new head.
    write_catalog(&work.path().join("v2"), &images, "0.9.4")?;
    let pushed = Instant::now();
    let second = olm(&["catalog", "push", work.path().join("v2").to_str().context("path")?, &catalog_image])?;
    assert_ne!(first, second, "a different catalog is a different digest");
    journey::csv_succeeded(&ns, "etcdoperator.v0.9.4", TIMEOUT).await?;
    eprintln!("new catalog image pushed → etcdoperator.v0.9.4 Succeeded: {:?}", pushed.elapsed());
    journey::csv_replaced(&ns, "etcdoperator.v0.9.2", TIMEOUT).await?;
    journey::at_latest(&ns, "etcd", "etcdoperator.v0.9.4", TIMEOUT).await?;
    let plans: Api<InstallPlan> = ns.api();
    let paths: Vec<String> = plans
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .flat_map(|p| p.status.and_then(|s| s.bundle_lookups).unwrap_or_default())
        .map(|l| l.path)
        .collect();
    assert!(paths.contains(&images["etcdoperator.v0.9.4"]), "bundle lookups name the image by digest: {paths:?}");
    ns.cleanup().await?;
    Ok(())
}

#[tokio::test]
async fn image_failures_are_explained_and_hurt_only_themselves() -> anyhow::Result<()> {
    let _apis = controllers::ETCD_APIS.read().await;
    let (cluster, _) = controllers::setup().await?;
    let open = olm_testkit::registry(RegistryOptions::new()).await?;
    let guarded = olm_testkit::registry(RegistryOptions::new().htpasswd("olm", "s3cret")).await?;
    let work = tempfile::tempdir()?;

    // A catalog whose bundles live on the open registry, except 0.9.2's, which names an image
    // nobody pushed (0.9.0 is fine, so the first install works and the upgrade fails).
    let mut images = push_bundles(open.addr(), &[])?;
    let missing = format!("{}/etcd-bundle@sha256:{}", open.addr(), "0".repeat(64));
    images.insert("etcdoperator.v0.9.2".into(), missing.clone());
    write_catalog(&work.path().join("missing"), &images, "0.9.2")?;
    let missing_catalog = format!("{}/etcd-catalog:missing", open.addr());
    olm(&["catalog", "push", work.path().join("missing").to_str().context("path")?, &missing_catalog])?;
    // A catalog whose 0.9.0 lives on a registry that is down.
    let mut down = images.clone();
    down.insert("etcdoperator.v0.9.0".into(), format!("127.0.0.1:1/etcd-bundle@sha256:{}", "1".repeat(64)));
    write_catalog(&work.path().join("down"), &down, "0.9.0")?;
    let down_catalog = format!("{}/etcd-catalog:down", open.addr());
    olm(&["catalog", "push", work.path().join("down").to_str().context("path")?, &down_catalog])?;
    // A good catalog on the registry that needs credentials.
    let auth = work.path().join("auth.json");
    let token = base64::engine::general_purpose::STANDARD.encode("olm:s3cret");
    std::fs::write(&auth, json!({"auths": {guarded.addr(): {"auth": token}}}).to_string())?;
    let auth_arg = auth.to_str().context("path")?;
    let guarded_images = push_bundles(guarded.addr(), &["--auth-file", auth_arg])?;
    write_catalog(&work.path().join("guarded"), &guarded_images, "0.9.0")?;
    let guarded_catalog = format!("{}/etcd-catalog:v1", guarded.addr());
    olm(&["catalog", "push", work.path().join("guarded").to_str().context("path")?, &guarded_catalog, "--auth-file", auth_arg])?;

    let ns = cluster.namespace("image-failures").await?;
    controllers::create_own_namespace_group(&ns, "etcd").await?;
    for (name, image) in [("missing", &missing_catalog), ("down", &down_catalog), ("guarded", &guarded_catalog)] {
        create_from_yaml(&ns, &images::catalog_source(name, image)).await?;
    }

    // Without credentials the guarded catalog says what to do.
    let refused = images::catalog_refused(&ns, "guarded", TIMEOUT).await?;
    assert!(refused.contains(&guarded_catalog) && refused.contains("spec.secrets"), "{refused}");

    // The bundle image of the registry that is down: named, with the registry.
    create_from_yaml(&ns, &images::etcd_subscription("from-down", "down", ns.name(), "etcdoperator.v0.9.0")).await?;
    let message = wait_condition(&ns, "from-down", SubscriptionConditionType::BundleUnpackFailed).await?;
    assert!(message.contains("cannot reach registry 127.0.0.1:1") && message.contains("etcdoperator.v0.9.0"), "{message}");
    ns.kubectl(&["delete", "subscription", "from-down"]).await?;

    // 0.9.0 installs from the missing catalog; the upgrade to 0.9.2 cannot find its image.
    create_from_yaml(&ns, &images::etcd_subscription("from-missing", "missing", ns.name(), "etcdoperator.v0.9.0")).await?;
    let message = wait_condition(&ns, "from-missing", SubscriptionConditionType::BundleUnpackFailed).await?;
    assert!(message.contains(&format!("image {missing} was not found")), "{message}");
    // The installed operator is untouched by the failing upgrade.
    journey::csv_succeeded(&ns, "etcdoperator.v0.9.0", TIMEOUT).await?;

    // With the pull secret, the guarded catalog is read.
    images::create_pull_secret(&ns, "guarded-pull", guarded.addr(), "olm", "s3cret").await?;
    let catalogs: Api<CatalogSource> = ns.api();
    catalogs
        .patch("guarded", &PatchParams::default(), &Patch::Merge(json!({"spec": {"secrets": ["guarded-pull"]}})))
        .await?;
    ns.wait_for("CatalogSource guarded READY with its pull secret", TIMEOUT, OBJECTS, || {
        let catalogs = catalogs.clone();
        async move {
            let status = catalogs.get("guarded").await.map_err(|e| e.to_string())?.status;
            let state = status.and_then(|s| s.connection_state).map(|c| c.last_observed_state);
            Ok::<_, String>((state.as_deref() == Some("READY")).then_some(()))
        }
    })
    .await?;
    ns.cleanup().await?;
    Ok(())
}

/// A one-bundle catalog image for the real bundle at `tests/testdata/real-bundles/<relative>`,
/// pushed to `registry`; returns the catalog image.
fn push_single_bundle_catalog(registry: &str, relative: &str, package: &str, channel: &str, work: &Path) -> anyhow::Result<String> {
    let dir = olm_e2e::repo().join("tests/testdata/real-bundles").join(relative);
    let dir = dir.to_str().context("path")?;
    let image = olm(&["bundle", "push", dir, &format!("{registry}/{package}-bundle:latest")])?.trim().to_owned();
    let bundle: Value = serde_json::from_str(&olm(&[
        "catalog",
        "render",
        dir,
        "--image",
        &image,
        "--migrate-level",
        "bundle-object-to-csv-metadata",
        "-o",
        "json",
    ])?)?;
    let name = bundle["name"].as_str().context("bundle name")?.to_owned();
    let docs = [
        json!({"schema": "olm.package", "name": package, "defaultChannel": channel}),
        json!({"schema": "olm.channel", "package": package, "name": channel, "entries": [{"name": name}]}),
        bundle,
    ];
    let fbc = work.join(package);
    std::fs::create_dir_all(&fbc)?;
    std::fs::write(fbc.join("catalog.json"), docs.iter().map(Value::to_string).collect::<Vec<_>>().join("\n"))?;
    let catalog = format!("{registry}/{package}-catalog:latest");
    olm(&["catalog", "push", fbc.to_str().context("path")?, &catalog])?;
    Ok(catalog)
}

#[tokio::test]
async fn a_real_bundle_whose_crd_is_v1beta1_installs() -> anyhow::Result<()> {
    // Its operator supports AllNamespaces only; its copies reach every namespace.
    let _apis = controllers::ETCD_APIS.write().await;
    let (cluster, _) = controllers::setup().await?;
    let registry = olm_testkit::registry(RegistryOptions::new()).await?;
    let work = tempfile::tempdir()?;
    let catalog = push_single_bundle_catalog(registry.addr(), "aws-efs-operator/0.0.2", "aws-efs-operator", "stable", work.path())?;
    let ns = cluster.namespace("v1beta1-crd").await?;
    create_from_yaml(&ns, "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata:\n  name: all\nspec: {}\n").await?;
    create_from_yaml(
        &ns,
        &format!("apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: efs\nspec:\n  sourceType: grpc\n  image: {catalog}\n"),
    )
    .await?;
    create_from_yaml(
        &ns,
        &format!(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata:\n  name: efs\nspec:\n  source: efs\n  sourceNamespace: {}\n  name: aws-efs-operator\n  channel: stable\n",
            ns.name()
        ),
    )
    .await?;
    journey::csv_succeeded(&ns, "aws-efs-operator.v0.0.2", TIMEOUT).await?;
    // The CRD is served as v1, its printer columns and status subresource kept.
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(cluster.client());
    let crd = crds.get("sharedvolumes.aws-efs.managed.openshift.io").await?;
    let version = crd.spec.versions.first().context("a version")?;
    assert_eq!(version.name, "v1alpha1");
    assert!(version.subresources.as_ref().is_some_and(|s| s.status.is_some()));
    let columns: Vec<&str> = version.additional_printer_columns.iter().flatten().map(|c| c.json_path.as_str()).collect();
    assert!(columns.contains(&".spec.fileSystemID"), "{columns:?}");
    ns.cleanup().await?;
    crds.delete("sharedvolumes.aws-efs.managed.openshift.io", &Default::default()).await?;
    Ok(())
}

/// A bundle image that takes seconds to pull is said on the Subscription (`BundleUnpacking`,
/// naming the image) until its plan is written, and the condition goes with the install; the
/// OperatorGroup's bundle-unpack-timeout stops a pull that takes longer, saying so.
#[tokio::test]
async fn a_slow_bundle_pull_is_said_until_the_plan_is_written_and_the_unpack_timeout_is_honoured() -> anyhow::Result<()> {
    let _apis = controllers::ETCD_APIS.read().await;
    let (cluster, _) = controllers::setup().await?;
    let registry = olm_testkit::registry(RegistryOptions::new()).await?;
    let slow = images::slow_proxy(registry.addr().to_owned(), Duration::from_secs(5)).await?;
    let work = tempfile::tempdir()?;
    let (catalog, image) = images::push_fresh_bundle_catalog(registry.addr(), &slow, work.path(), "slow-etcd")?;

    let ns = cluster.namespace("slow-pull").await?;
    controllers::create_own_namespace_group(&ns, "etcd").await?;
    create_from_yaml(&ns, &images::catalog_source("slow", &catalog)).await?;
    create_from_yaml(&ns, &images::etcd_subscription("etcd", "slow", ns.name(), "etcdoperator.v0.9.0")).await?;
    let message = wait_condition(&ns, "etcd", SubscriptionConditionType::BundleUnpacking).await?;
    assert!(message.contains("pulling bundle etcdoperator.v0.9.0") && message.contains(&image), "{message}");
    // As upstream, the Subscription refers meanwhile to its InstallPlan, whose bundle lookup
    // is pending on the image and which has no steps yet.
    let lookup = journey::referenced_plan_lookup(&ns, "etcd", TIMEOUT).await?;
    assert_eq!(lookup.path, image);
    let condition = lookup.conditions.unwrap_or_default().into_iter().next().context("a lookup condition")?;
    assert_eq!((condition.type_.as_str(), condition.status.as_str()), ("BundleLookupPending", "True"), "{condition:?}");
    assert!(condition.message.as_deref().is_some_and(|m| m.contains(&image)), "{condition:?}");
    journey::csv_succeeded(&ns, "etcdoperator.v0.9.0", TIMEOUT).await?;
    let plans: Api<InstallPlan> = ns.api();
    let plan = plans.list(&Default::default()).await?.items;
    assert_eq!(plan.len(), 1, "the plan that waited is the plan that installed");
    let status = plan[0].status.clone().context("plan status")?;
    assert!(status.plan.is_some_and(|steps| !steps.is_empty()));
    assert!(status.bundle_lookups.unwrap_or_default().iter().all(|l| l.conditions.is_none()), "the lookup is done");
    let subs: Api<Subscription> = ns.api();
    let conditions = subs.get("etcd").await?.status.and_then(|s| s.conditions).unwrap_or_default();
    assert!(!conditions.iter().any(|c| c.type_ == SubscriptionConditionType::BundleUnpacking), "{conditions:?}");

    // The same, with an OperatorGroup that allows 2 s: the pull is stopped and said so. (Its
    // own slow proxy: OLM keeps its connections to the first one open.)
    let slower = images::slow_proxy(registry.addr().to_owned(), Duration::from_secs(5)).await?;
    let (catalog, _) = images::push_fresh_bundle_catalog(registry.addr(), &slower, work.path(), "slower-etcd")?;
    let ns2 = cluster.namespace("unpack-timeout").await?;
    create_from_yaml(
        &ns2,
        &format!(
            "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata:\n  name: etcd\n  annotations:\n    operatorframework.io/bundle-unpack-timeout: 2s\nspec:\n  targetNamespaces: [{}]\n",
            ns2.name()
        ),
    )
    .await?;
    create_from_yaml(&ns2, &images::catalog_source("slow", &catalog)).await?;
    create_from_yaml(&ns2, &images::etcd_subscription("etcd", "slow", ns2.name(), "etcdoperator.v0.9.0")).await?;
    let failed = wait_condition(&ns2, "etcd", SubscriptionConditionType::BundleUnpackFailed).await?;
    assert!(failed.contains("did not finish within 2s") && failed.contains("bundle-unpack-timeout"), "{failed}");
    let failed_plan = journey::referenced_plan_failed(&ns2, "etcd", TIMEOUT).await?;
    assert!(failed_plan.contains("did not finish within 2s"), "{failed_plan}");
    ns.cleanup().await?;
    ns2.cleanup().await?;
    Ok(())
}

/// A catalog server (gRPC `address`, as `opm serve` or a registry Pod would be) whose catalog
/// names the bundle by image with only `olm.csv.metadata`: GetBundle answers with a CSV
/// synthesized from that metadata, and the CRDs are only in the image. The bundle is pulled and
/// installed whole — CRDs first — as upstream's unpack would. (Before, the synthesized CSV was
/// taken for the bundle: no CRD was created and the CSV waited for them for ever.)
#[tokio::test]
async fn an_image_only_bundle_from_a_catalog_server_is_pulled_whole() -> anyhow::Result<()> {
    let _apis = controllers::ETCD_APIS.read().await;
    let (cluster, _) = controllers::setup().await?;
    let registry = olm_testkit::registry(RegistryOptions::new()).await?;
    let images = push_bundles(registry.addr(), &[])?;
    let work = tempfile::tempdir()?;
    write_catalog(&work.path().join("catalog"), &images, "0.9.4")?;
    let server = controllers::catalog_server("images", work.path().join("catalog"), false).await?;
    let address = server.grpc_addrs.get("images").map(ToString::to_string).context("gRPC address")?;

    let ns = cluster.namespace("bundle-from-server").await?;
    controllers::create_own_namespace_group(&ns, "etcd").await?;
    create_from_yaml(
        &ns,
        &format!("apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: served\nspec:\n  sourceType: grpc\n  address: {address}\n"),
    )
    .await?;
    create_from_yaml(&ns, &images::etcd_subscription("etcd", "served", ns.name(), "etcdoperator.v0.9.4")).await?;
    journey::csv_succeeded(&ns, "etcdoperator.v0.9.4", TIMEOUT).await?;
    let plans: Api<InstallPlan> = ns.api();
    let plan = plans.list(&Default::default()).await?.items.into_iter().next().context("an InstallPlan")?;
    let status = plan.status.context("plan status")?;
    let kinds: Vec<String> = status.plan.iter().flatten().map(|step| format!("{}/{}", step.resource.kind, step.resource.name)).collect();
    for crd in ["etcdclusters", "etcdbackups", "etcdrestores"] {
        let wanted = format!("CustomResourceDefinition/{crd}.etcd.database.coreos.com");
        assert!(kinds.contains(&wanted), "the plan creates {wanted}: {kinds:?}");
    }
    let paths: Vec<String> = status.bundle_lookups.unwrap_or_default().into_iter().map(|l| l.path).collect();
    assert_eq!(paths, vec![images["etcdoperator.v0.9.4"].clone()], "pulled from its image");
    ns.cleanup().await?;
    Ok(())
}
