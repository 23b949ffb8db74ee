//! Bundle images that cannot be installed, through a CatalogSource as a cluster admin meets
//! them: content that does not match its digest, a tar entry climbing out of its directory, a
//! layer over OLM's size limit. Each fails only its own Subscription, with a condition that
//! names the bundle, the image and the cause; the namespace's other operator installs. And
//! pull secrets where upstream's unpack Pods found them: the imagePullSecrets of the
//! namespace's default ServiceAccount, picked up without touching the CatalogSource.

use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use olm_api::v1alpha1::subscription::SubscriptionConditionType;
use olm_e2e::controllers::{self, create_from_yaml};
use olm_e2e::widget::{widget_catalog, widget_crd, widget_csv};
use olm_e2e::{E2E_MAX_LAYER_BYTES, images, journey};
use olm_testkit::{RegistryOptions, TestNamespace};
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(120);
const OBJECTS: &[&str] = &["subscriptions", "installplans", "csvs", "catalogsources"];

/// The message of the Subscription's BundleUnpackFailed condition once it is True.
async fn unpack_failed(ns: &TestNamespace, sub: &str) -> anyhow::Result<String> {
    journey::condition_true(ns, sub, SubscriptionConditionType::BundleUnpackFailed, TIMEOUT).await
}

/// A namespace with an own-namespace OperatorGroup, a CatalogSource `bad` on `catalog` and a
/// Subscription `etcd` to it.
async fn subscribe(cluster: &olm_testkit::TestCluster, prefix: &str, catalog: &str) -> anyhow::Result<TestNamespace> {
    let ns = cluster.namespace(prefix).await?;
    controllers::create_own_namespace_group(&ns, "etcd").await?;
    create_from_yaml(&ns, &images::catalog_source("bad", catalog)).await?;
    create_from_yaml(&ns, &images::etcd_subscription("etcd", "bad", ns.name(), "etcdoperator.v0.9.0")).await?;
    Ok(ns)
}

#[tokio::test]
async fn corrupt_hostile_and_oversized_bundle_images_fail_only_their_own_subscription() -> anyhow::Result<()> {
    let _apis = controllers::ETCD_APIS.read().await;
    let (cluster, _) = controllers::setup().await?;
    let registry = olm_testkit::registry(RegistryOptions::new()).await?;
    let work = tempfile::tempdir()?;
    let etcd = images::etcd_bundle_dir("0.9.0");

    // Content that does not match its digest: a fresh bundle whose layer is then corrupted
    // where the registry keeps it.
    let (corrupt_catalog, corrupt_image) = images::push_fresh_bundle_catalog(registry.addr(), registry.addr(), work.path(), "corrupt-etcd")?;
    let reader = olm_image::ImageClient::new(&work.path().join("cache"), Default::default(), Default::default())?;
    let pulled = reader.pull(&corrupt_image, &olm_image::Credentials::anonymous()).await?;
    let layer = pulled.layers.first().context("a layer")?.digest.trim_start_matches("sha256:").to_owned();
    let blob = registry.dir().join("storage/docker/registry/v2/blobs/sha256").join(&layer[..2]).join(&layer).join("data");
    let mut bytes = std::fs::read(&blob)?;
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&blob, bytes)?;

    // A tar entry that climbs out of the bundle's directory.
    let escape_image = images::push_raw_bundle(
        registry.addr(),
        "escaping-etcd",
        images::raw_layer(&[("metadata/annotations.yaml", b"annotations: {}\n"), ("manifests/../../../escaped", b"x")])?,
    )
    .await?;
    let escape_catalog = images::push_etcd_catalog_naming(registry.addr(), work.path(), "escaping-etcd", &etcd, &escape_image, &[])?;

    // A layer one MiB over the controllers' limit (`--image-max-layer-bytes`).
    let size = usize::try_from(E2E_MAX_LAYER_BYTES)? + (1 << 20);
    let big_image =
        images::push_raw_bundle(registry.addr(), "huge-etcd", images::raw_layer(&[("manifests/huge.yaml", &images::noise(size))])?).await?;
    let big_catalog = images::push_etcd_catalog_naming(registry.addr(), work.path(), "huge-etcd", &etcd, &big_image, &[])?;

    let corrupt = subscribe(&cluster, "corrupt-bundle", &corrupt_catalog).await?;
    let escaping = subscribe(&cluster, "escaping-bundle", &escape_catalog).await?;
    let huge = subscribe(&cluster, "huge-bundle", &big_catalog).await?;
    // A neighbour in the namespace of the escaping bundle: another operator, from a sound
    // catalog, installs.
    let random = olm_testkit::random_name("faults").replace('-', "");
    let widgets = widget_catalog("widgets", "widget.v1.0.0", vec![widget_csv("1.0.0", None, &random)], vec![widget_crd(false, &random)]);
    let cms: Api<ConfigMap> = escaping.api();
    cms.create(&PostParams::default(), &serde_json::from_value(widgets)?).await?;
    create_from_yaml(
        &escaping,
        "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: widgets\nspec:\n  sourceType: configmap\n  configMap: widgets\n",
    )
    .await?;
    create_from_yaml(
        &escaping,
        &format!(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata:\n  name: widget\nspec:\n  source: widgets\n  sourceNamespace: {}\n  name: widget\n  channel: stable\n",
            escaping.name()
        ),
    )
    .await?;

    let message = unpack_failed(&corrupt, "etcd").await?;
    assert!(
        message.contains(&corrupt_image) && message.contains(&format!("layer sha256:{layer}")) && message.contains("does not match its digest"),
        "{message}"
    );
    // The InstallPlan says it too, as upstream's does when its unpack Job fails.
    let failed_plan = journey::referenced_plan_failed(&corrupt, "etcd", TIMEOUT).await?;
    assert!(failed_plan.contains(&corrupt_image) && failed_plan.contains("does not match its digest"), "{failed_plan}");
    let message = unpack_failed(&escaping, "etcd").await?;
    assert!(
        message.contains(&escape_image) && message.contains("manifests/../../../escaped") && message.contains("etcdoperator.v0.9.0"),
        "{message}"
    );
    let message = unpack_failed(&huge, "etcd").await?;
    assert!(
        message.contains(&big_image) && message.contains(&format!("over the limit of {E2E_MAX_LAYER_BYTES} bytes")) && message.contains("--image-max-layer-bytes"),
        "{message}"
    );
    // Nothing escaped next to the image cache, and the neighbour installed.
    assert!(!std::env::temp_dir().join("escaped").exists());
    journey::csv_succeeded(&escaping, "widget.v1.0.0", TIMEOUT).await?;
    for ns in [corrupt, escaping, huge] {
        ns.cleanup().await?;
    }
    Ok(())
}

#[tokio::test]
async fn the_default_service_account_s_pull_secrets_are_used_for_catalog_and_bundle_images() -> anyhow::Result<()> {
    let _apis = controllers::ETCD_APIS.read().await;
    let (cluster, _) = controllers::setup().await?;
    let guarded = olm_testkit::registry(RegistryOptions::new().htpasswd("olm", "s3cret")).await?;
    let work = tempfile::tempdir()?;
    let auth = work.path().join("auth.json");
    let token = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "olm:s3cret");
    std::fs::write(&auth, json!({"auths": {guarded.addr(): {"auth": token}}}).to_string())?;
    let auth = auth.to_str().context("path")?;
    // A bundle of its own (no cache holds it) and its catalog, both behind the credentials.
    let bundle = images::fresh_etcd_bundle(work.path(), "guarded-etcd")?;
    let image = olm_e2e::olm(&["bundle", "push", bundle.to_str().context("path")?, &format!("{}/guarded-etcd:latest", guarded.addr()), "--auth-file", auth])?
        .trim()
        .to_owned();
    let fbc = images::push_etcd_catalog_naming(guarded.addr(), work.path(), "guarded-etcd", &bundle, &image, &["--auth-file", auth])?;

    let ns = subscribe(&cluster, "account-pull-secrets", &fbc).await?;
    let refused = images::catalog_refused(&ns, "bad", TIMEOUT).await?;
    assert!(refused.contains("imagePullSecrets of its namespace's default ServiceAccount"), "{refused}");

    // The admin gives the namespace's default ServiceAccount a pull secret, as for any Pod.
    images::create_pull_secret(&ns, "registry-pull", guarded.addr(), "olm", "s3cret").await?;
    let accounts: Api<ServiceAccount> = ns.api();
    ns.wait_for("the default ServiceAccount", TIMEOUT, OBJECTS, || {
        let accounts = accounts.clone();
        async move { Ok::<_, String>(accounts.get_opt("default").await.map_err(|e| e.to_string())?.map(|_| ())) }
    })
    .await?;
    accounts
        .patch("default", &PatchParams::default(), &Patch::Merge(json!({"imagePullSecrets": [{"name": "registry-pull"}]})))
        .await?;
    // The catalog is read and the bundle pulled with it: etcd installs.
    journey::csv_succeeded(&ns, "etcdoperator.v0.9.0", TIMEOUT).await?;

    // OLM's cache now holds that digest. Another catalog, on an open registry, names the same
    // digest under a repository that does not hold it: nothing installs from the cache, and the
    // Subscription says which image and what its registry answered.
    let open = olm_testkit::registry(RegistryOptions::new()).await?;
    let digest = image.rsplit('@').next().context("the bundle image is named by digest")?;
    let borrowed = format!("{}/guarded-etcd@{digest}", open.addr());
    let catalog = images::push_etcd_catalog_naming(open.addr(), work.path(), "borrowed-etcd", &bundle, &borrowed, &[])?;
    let other = subscribe(&cluster, "borrowed-digest", &catalog).await?;
    let failed = unpack_failed(&other, "etcd").await?;
    assert!(failed.contains(&borrowed) && failed.contains(open.addr()), "{failed}");
    let csvs: Api<olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion> = other.api();
    assert!(csvs.get_opt("etcdoperator.v0.9.0").await?.is_none(), "installed from the cache of another catalog's pull");
    other.cleanup().await?;
    ns.cleanup().await?;
    Ok(())
}
