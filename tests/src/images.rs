//! Bundle and catalog images for the image suites: the etcd bundles pushed with
//! `olm bundle push`, one-bundle catalogs naming an image by digest pushed with
//! `olm catalog push`, images built by hand as a careless or hostile publisher would, and a
//! registry that is slow to answer.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use kube::Api;
use olm_api::v1alpha1::catalog_source::CatalogSource;
use olm_testkit::TestNamespace;
use serde_json::{Value, json};

use crate::olm;

/// The repository's etcd bundle of `version` (0.9.0, 0.9.2, 0.9.4).
pub fn etcd_bundle_dir(version: &str) -> PathBuf {
    crate::repo().join("crates/olm-registry/testdata/bundles/etcd").join(version)
}

/// A CatalogSource `name` reading the catalog image `image`.
pub fn catalog_source(name: &str, image: &str) -> String {
    format!("apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: {name}\nspec:\n  sourceType: grpc\n  image: {image}\n")
}

/// A Subscription `name` to etcd's singlenamespace-alpha channel of `source`, starting at
/// `starting`, approved automatically.
pub fn etcd_subscription(name: &str, source: &str, namespace: &str, starting: &str) -> String {
    format!(
        "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata:\n  name: {name}\nspec:\n  source: {source}\n  sourceNamespace: {namespace}\n  name: etcd\n  channel: singlenamespace-alpha\n  startingCSV: {starting}\n  installPlanApproval: Automatic\n"
    )
}

/// A TCP proxy to `upstream` that holds every new connection for `delay` before it forwards
/// it: a slow registry.
pub async fn slow_proxy(upstream: String, delay: Duration) -> anyhow::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?.to_string();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            let upstream = upstream.clone();
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(&upstream).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    Ok(addr)
}

/// A copy of the etcd 0.9.0 bundle in `work/name` with a file of its own, so that its image
/// has a digest no cache holds.
pub fn fresh_etcd_bundle(work: &Path, name: &str) -> anyhow::Result<PathBuf> {
    let bundle = work.join(name);
    for sub in ["manifests", "metadata"] {
        std::fs::create_dir_all(bundle.join(sub))?;
        for file in std::fs::read_dir(etcd_bundle_dir("0.9.0").join(sub))? {
            let file = file?.path();
            std::fs::copy(&file, bundle.join(sub).join(file.file_name().context("file name")?))?;
        }
    }
    std::fs::write(bundle.join("metadata/nonce.yaml"), format!("nonce: {}\n", olm_testkit::random_name(name)))?;
    Ok(bundle)
}

/// The etcd 0.9.0 bundle with a file of its own ([`fresh_etcd_bundle`]), pushed to `registry`, and a catalog image naming it as `via/…@digest`, pushed to `registry`.
/// Returns the catalog image and the bundle image as the catalog names it.
pub fn push_fresh_bundle_catalog(registry: &str, via: &str, work: &Path, name: &str) -> anyhow::Result<(String, String)> {
    let bundle = fresh_etcd_bundle(work, name)?;
    let pushed = olm(&["bundle", "push", bundle.to_str().context("path")?, &format!("{registry}/{name}:latest")])?.trim().to_owned();
    let image = pushed.replacen(registry, via, 1);
    let catalog = push_etcd_catalog_naming(registry, work, name, &bundle, &image, &[])?;
    Ok((catalog, image))
}

/// A catalog image `registry/{name}-catalog:latest` whose package etcd has one bundle: the
/// bundle directory `bundle` rendered with only its `olm.csv.metadata` and `image` as its
/// image, whatever that image really holds; `push_args` go to `olm catalog push`.
pub fn push_etcd_catalog_naming(registry: &str, work: &Path, name: &str, bundle: &Path, image: &str, push_args: &[&str]) -> anyhow::Result<String> {
    let rendered: Value = serde_json::from_str(&olm(&[
        "catalog", "render", bundle.to_str().context("path")?, "--image", image, "--migrate-level", "bundle-object-to-csv-metadata", "-o", "json",
    ])?)?;
    let docs = [
        json!({"schema": "olm.package", "name": "etcd", "defaultChannel": "singlenamespace-alpha"}),
        json!({"schema": "olm.channel", "package": "etcd", "name": "singlenamespace-alpha", "entries": [{"name": "etcdoperator.v0.9.0"}]}),
        rendered,
    ];
    let fbc = work.join(format!("{name}-catalog"));
    std::fs::create_dir_all(&fbc)?;
    std::fs::write(fbc.join("catalog.json"), docs.iter().map(Value::to_string).collect::<Vec<_>>().join("\n"))?;
    let catalog = format!("{registry}/{name}-catalog:latest");
    let mut args = vec!["catalog", "push", fbc.to_str().context("path")?, &catalog];
    args.extend(push_args);
    olm(&args)?;
    Ok(catalog)
}

/// A gzip tar layer of `files`, each name written byte for byte (`..` included).
pub fn raw_layer(files: &[(&str, &[u8])]) -> anyhow::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast()));
    for (path, content) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(content.len() as u64);
        header.set_entry_type(tar::EntryType::Regular);
        header.set_mode(0o644);
        let name = &mut header.as_gnu_mut().context("gnu header")?.name;
        anyhow::ensure!(path.len() <= name.len(), "{path} is too long for a plain tar name");
        name[..path.len()].copy_from_slice(path.as_bytes());
        header.set_cksum();
        builder.append(&header, *content)?;
    }
    Ok(builder.into_inner()?.finish()?)
}

/// `len` bytes that do not compress (a linear congruential sequence).
pub fn noise(len: usize) -> Vec<u8> {
    (0..len)
        .scan(7u64, |state, _| {
            *state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            Some((*state >> 56) as u8)
        })
        .collect()
}

/// Push a one-layer image with a bundle's labels, built by hand with oci-client (no check of
/// what the layer holds); returns `registry/repository@digest`.
pub async fn push_raw_bundle(registry: &str, repository: &str, layer: Vec<u8>) -> anyhow::Result<String> {
    use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
    let oci = oci_client::Client::new(ClientConfig { protocol: ClientProtocol::Http, ..Default::default() });
    let reference: oci_client::Reference = format!("{registry}/{repository}:latest").parse()?;
    let labels = BTreeMap::from([
        (olm_image::bundle::MANIFESTS_LABEL, "manifests/"),
        (olm_image::bundle::METADATA_LABEL, "metadata/"),
    ]);
    let config = json!({"architecture": "amd64", "os": "linux", "config": {"Labels": labels}, "rootfs": {"type": "layers", "diff_ids": []}});
    let config = Config::oci_v1(serde_json::to_vec(&config)?, None);
    let layers = [ImageLayer::oci_v1_gzip(layer, None)];
    let manifest = oci_client::manifest::OciImageManifest::build(&layers, &config, None);
    let anonymous = oci_client::secrets::RegistryAuth::Anonymous;
    oci.push(&reference, &layers, config, &anonymous, Some(manifest)).await?;
    let digest = oci.fetch_manifest_digest(&reference, &anonymous).await?;
    Ok(format!("{registry}/{repository}@{digest}"))
}

/// The CatalogSource `name`'s status message once it says a registry refused access.
pub async fn catalog_refused(ns: &TestNamespace, name: &str, timeout: Duration) -> anyhow::Result<String> {
    let catalogs: Api<CatalogSource> = ns.api();
    Ok(ns
        .wait_for(&format!("CatalogSource {name} refused access"), timeout, &["catalogsources"], || {
            let catalogs = catalogs.clone();
            async move {
                let status = catalogs.get(name).await.map_err(|e| e.to_string())?.status;
                Ok::<_, String>(status.and_then(|s| s.message).filter(|m| m.contains("refused access")))
            }
        })
        .await?)
}

/// `kubectl create secret docker-registry NAME` in `ns` for `registry`.
pub async fn create_pull_secret(ns: &TestNamespace, name: &str, registry: &str, username: &str, password: &str) -> anyhow::Result<()> {
    ns.kubectl(&[
        "create",
        "secret",
        "docker-registry",
        name,
        &format!("--docker-server={registry}"),
        &format!("--docker-username={username}"),
        &format!("--docker-password={password}"),
    ])
    .await?;
    Ok(())
}
