//! olm-image against a real registry (CNCF distribution, from olm-testkit): bundle and catalog
//! images pushed and pulled back, the cache that spares the network, credentials, TLS with
//! a custom CA, Docker token auth, zstd layers, image indexes, and hostile images (a tar entry climbing out, an oversized layer, a SQLite
//! catalog) refused with errors that name the image.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;

use oci_client::client::{ClientConfig, ClientProtocol, ImageLayer};
use oci_client::manifest::OciImageManifest;
use oci_client::secrets::RegistryAuth;
use olm_image::{Credentials, HostConfig, ImageClient, Limits, RegistryConfig};
use olm_testkit::RegistryOptions;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn etcd_bundle() -> PathBuf {
    repo().join("crates/olm-registry/testdata/bundles/etcd/0.9.4")
}

fn client(cache: &tempfile::TempDir, config: RegistryConfig, limits: Limits) -> ImageClient {
    ImageClient::new(cache.path(), config, limits).expect("image client")
}

/// Push a one-layer image built by hand (as a hostile or careless publisher would) with
/// oci-client itself.
async fn push_raw(registry: &str, repository: &str, layer: Vec<u8>, labels: BTreeMap<String, String>) -> String {
    push_layer(registry, repository, ImageLayer::oci_v1_gzip(layer, None), labels).await
}

/// [`push_raw`] with the layer as given (any media type).
async fn push_layer(registry: &str, repository: &str, layer: ImageLayer, labels: BTreeMap<String, String>) -> String {
    let oci = oci_client::Client::new(ClientConfig { protocol: ClientProtocol::Http, ..Default::default() });
    let reference: oci_client::Reference = format!("{registry}/{repository}:latest").parse().expect("reference");
    let config = serde_json::json!({"architecture": "amd64", "os": "linux", "config": {"Labels": labels}, "rootfs": {"type": "layers", "diff_ids": []}});
    let config = oci_client::client::Config::oci_v1(serde_json::to_vec(&config).expect("json"), None);
    let layers = [layer];
    let manifest = OciImageManifest::build(&layers, &config, None);
    oci.push(&reference, &layers, config, &RegistryAuth::Anonymous, Some(manifest)).await.expect("push");
    reference.whole()
}

/// A gzip tar layer with one file whose name is written byte for byte (`..` included).
fn layer_with(path: &str, content: &[u8]) -> Vec<u8> {
    layer_with_files(&[(path, content)])
}

/// [`layer_with`], with several files.
fn layer_with_files(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast()));
    for (path, content) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(content.len() as u64);
        header.set_entry_type(tar::EntryType::Regular);
        header.set_mode(0o644);
        header.as_gnu_mut().expect("gnu").name[..path.len()].copy_from_slice(path.as_bytes());
        header.set_cksum();
        builder.append(&header, *content).expect("append");
    }
    builder.into_inner().expect("tar").finish().expect("gzip")
}

#[tokio::test]
async fn a_bundle_image_round_trips_and_a_digest_is_pulled_once() {
    let registry = olm_testkit::registry(RegistryOptions::new()).await.expect("registry");
    let cache = tempfile::tempdir().expect("tempdir");
    let images = client(&cache, RegistryConfig::default(), Limits::default());
    let built = olm_image::build_bundle(&etcd_bundle()).expect("bundle image");
    let again = olm_image::build_bundle(&etcd_bundle()).expect("bundle image");
    assert_eq!(built.digest, again.digest, "builds are reproducible");
    let pushed = images
        .push(&built, &format!("{}/etcd-bundle:0.9.4", registry.addr()), &Credentials::anonymous())
        .await
        .expect("push");
    assert_eq!(pushed, format!("{}/etcd-bundle@{}", registry.addr(), built.digest));

    let bundle = images.bundle(&pushed, &Credentials::anonymous()).await.expect("pull");
    assert_eq!((bundle.name.as_str(), bundle.package.as_str()), ("etcdoperator.v0.9.4", "etcd"));
    assert_eq!(bundle.digest, built.digest);
    // The same objects as rendering the directory itself.
    let rendered = olm_catalog::render::render_bundle_dir(&etcd_bundle(), &Default::default()).expect("render");
    let inline = rendered.document["properties"]
        .as_array()
        .expect("properties")
        .iter()
        .filter(|p| p["type"] == "olm.bundle.object")
        .count();
    assert_eq!(bundle.objects.len(), inline);
    assert!(bundle.csv_json.contains("\"ClusterServiceVersion\""));

    // By digest, a second pull fetches nothing: the registry is only asked whether it still
    // serves that digest. Gone, it cannot say: nothing is served from the cache ...
    let cached = images.bundle(&pushed, &Credentials::anonymous()).await.expect("from the cache");
    assert_eq!(cached.objects, bundle.objects);
    drop(registry);
    let err = images.bundle(&pushed, &Credentials::anonymous()).await.unwrap_err();
    assert_eq!(err.category(), "RegistryUnreachable", "{err}");
    // ... unless the client trusts its cache (a disconnected cluster's choice).
    let trusting = client(&cache, RegistryConfig::default(), Limits::default()).trusting_cache(true);
    let cached = trusting.bundle(&pushed, &Credentials::anonymous()).await.expect("from the cache, trusted");
    assert_eq!(cached.objects, bundle.objects);
    // A tag needs the registry, and says which one is down.
    let err = images.pull(&pushed.replace(&format!("@{}", built.digest), ":0.9.4"), &Credentials::anonymous()).await.unwrap_err();
    assert_eq!(err.category(), "RegistryUnreachable", "{err}");
}

#[tokio::test]
async fn a_cached_digest_is_served_only_where_the_registry_serves_it() {
    // One digest, pulled once with credentials from a private repository, then named by other
    // catalogs: under a repository that does not hold it, and without the credentials.
    let registry = olm_testkit::registry(RegistryOptions::new().htpasswd("olm", "s3cret")).await.expect("registry");
    let cache = tempfile::tempdir().expect("tempdir");
    let images = client(&cache, RegistryConfig::default(), Limits::default());
    let creds = Credentials::anonymous().with(registry.addr(), "olm", "s3cret");
    let built = olm_image::build_bundle(&etcd_bundle()).expect("bundle image");
    let private = images.push(&built, &format!("{}/private/etcd:0.9.4", registry.addr()), &creds).await.expect("push");
    images.bundle(&private, &creds).await.expect("pulled with credentials, now cached");

    let elsewhere = format!("{}/public/etcd@{}", registry.addr(), built.digest);
    let err = images.bundle(&elsewhere, &creds).await.unwrap_err();
    assert_eq!(err.category(), "ImageNotFound", "{err}");
    assert!(err.to_string().contains(&elsewhere) && err.to_string().contains(registry.addr()), "{err}");
    let err = images.bundle(&private, &Credentials::anonymous()).await.unwrap_err();
    assert_eq!(err.category(), "ImageUnauthorized", "{err}");
    assert!(err.to_string().contains(&private), "{err}");
    // Where the registry serves it, the cache serves it.
    images.bundle(&private, &creds).await.expect("the same pull again");
}

#[tokio::test]
async fn credentials_missing_then_given() {
    let registry = olm_testkit::registry(RegistryOptions::new().htpasswd("olm", "s3cret")).await.expect("registry");
    let cache = tempfile::tempdir().expect("tempdir");
    let images = client(&cache, RegistryConfig::default(), Limits::default());
    let creds = Credentials::anonymous().with(registry.addr(), "olm", "s3cret");
    let built = olm_image::build_bundle(&etcd_bundle()).expect("bundle image");
    let target = format!("{}/private/etcd:0.9.4", registry.addr());
    let err = images.push(&built, &target, &Credentials::anonymous()).await.unwrap_err();
    assert_eq!(err.category(), "ImageUnauthorized", "{err}");
    let pushed = images.push(&built, &target, &creds).await.expect("push with credentials");
    let err = images.pull(&pushed, &Credentials::anonymous()).await.unwrap_err();
    assert_eq!(err.category(), "ImageUnauthorized", "{err}");
    assert!(err.to_string().contains(&pushed) && err.to_string().contains("spec.secrets"), "{err}");
    images.bundle(&pushed, &creds).await.expect("pull with credentials");
    // OLM's own credentials (the node's, `--registry-auth-file`) serve a pull whose catalog
    // names none for the registry.
    let node = tempfile::tempdir().expect("tempdir");
    client(&node, RegistryConfig::default(), Limits::default())
        .with_node_credentials(creds.clone())
        .bundle(&pushed, &Credentials::anonymous())
        .await
        .expect("pull with the node's credentials");
    let missing = format!("{}/private/etcd:9.9.9", registry.addr());
    let err = images.pull(&missing, &creds).await.unwrap_err();
    assert_eq!(err.category(), "ImageNotFound", "{err}");
    assert!(err.to_string().contains(&missing), "{err}");
}

#[tokio::test]
async fn a_registry_with_token_auth_hands_out_a_token_for_the_pull_secret() {
    let registry = olm_testkit::registry(RegistryOptions::new()).await.expect("registry");
    let front = olm_testkit::token_auth_front(registry.addr(), "robot", "t0ken-pass").await.expect("token front");
    let cache = tempfile::tempdir().expect("tempdir");
    let images = client(&cache, RegistryConfig::default(), Limits::default());
    let built = olm_image::build_bundle(&etcd_bundle()).expect("bundle image");
    images
        .push(&built, &format!("{}/team/etcd:0.9.4", registry.addr()), &Credentials::anonymous())
        .await
        .expect("push behind the front");
    let through_front = format!("{}/team/etcd@{}", front.addr(), built.digest);

    // Anonymous: challenged, no token, and the error says what to do.
    let err = images.bundle(&through_front, &Credentials::anonymous()).await.unwrap_err();
    assert_eq!(err.category(), "ImageUnauthorized", "{err}");
    assert!(err.to_string().contains(&through_front) && err.to_string().contains("spec.secrets"), "{err}");
    // Wrong password: the token service refuses it.
    let wrong = Credentials::anonymous().with(front.addr(), "robot", "nope");
    let err = images.bundle(&through_front, &wrong).await.unwrap_err();
    assert_eq!(err.category(), "ImageUnauthorized", "{err}");
    assert!(front.counts().refused.load(Ordering::SeqCst) >= 1, "the token service was asked: {:?}", front.counts());
    // The pull secret's credentials buy a token, and the token the content.
    let right = Credentials::anonymous().with(front.addr(), "robot", "t0ken-pass");
    let bundle = images.bundle(&through_front, &right).await.expect("pull with a token");
    assert_eq!(bundle.name, "etcdoperator.v0.9.4");
    let counts = front.counts();
    assert!(counts.granted.load(Ordering::SeqCst) >= 1 && counts.forwarded.load(Ordering::SeqCst) >= 3, "{counts:?}");
}

#[tokio::test]
async fn a_bundle_image_with_a_zstd_layer_is_read() {
    let registry = olm_testkit::registry(RegistryOptions::new()).await.expect("registry");
    let cache = tempfile::tempdir().expect("tempdir");
    let images = client(&cache, RegistryConfig::default(), Limits::default());
    let mut tar = tar::Builder::new(Vec::new());
    tar.append_dir_all("manifests", etcd_bundle().join("manifests")).expect("manifests");
    tar.append_dir_all("metadata", etcd_bundle().join("metadata")).expect("metadata");
    let tar = tar.into_inner().expect("tar");
    let zstd = ruzstd::encoding::compress_to_vec(tar.as_slice(), ruzstd::encoding::CompressionLevel::Fastest);
    assert_eq!(&zstd[..4], &[0x28, 0xb5, 0x2f, 0xfd], "a zstd frame");
    let layer = ImageLayer::new(zstd, "application/vnd.oci.image.layer.v1.tar+zstd".to_owned(), None);
    let labels = BTreeMap::from([
        (olm_image::bundle::MANIFESTS_LABEL.to_owned(), "manifests/".to_owned()),
        (olm_image::bundle::METADATA_LABEL.to_owned(), "metadata/".to_owned()),
    ]);
    let pushed = push_layer(registry.addr(), "etcd-zstd", layer, labels).await;
    let bundle = images.bundle(&pushed, &Credentials::anonymous()).await.expect("pull a zstd bundle");
    assert_eq!((bundle.name.as_str(), bundle.package.as_str()), ("etcdoperator.v0.9.4", "etcd"));
    assert!(bundle.objects.len() >= 2 && bundle.csv_json.contains("\"ClusterServiceVersion\""), "{:?}", bundle.objects.len());
}

#[tokio::test]
async fn an_image_index_resolves_to_its_linux_amd64_manifest() {
    let registry = olm_testkit::registry(RegistryOptions::new()).await.expect("registry");
    let cache = tempfile::tempdir().expect("tempdir");
    let images = client(&cache, RegistryConfig::default(), Limits::default());
    let built = olm_image::build_bundle(&etcd_bundle()).expect("bundle image");
    let amd64 = images
        .push(&built, &format!("{}/multi:amd64", registry.addr()), &Credentials::anonymous())
        .await
        .expect("push");
    // Listed first, for another platform: not a bundle at all.
    let arm64 = push_raw(registry.addr(), "multi", layer_with("etc/hostname", b"arm"), BTreeMap::new()).await;
    let oci = oci_client::Client::new(ClientConfig { protocol: ClientProtocol::Http, ..Default::default() });
    let mut entries = Vec::new();
    for (reference, arch) in [(&arm64, "arm64"), (&amd64, "amd64")] {
        let reference: oci_client::Reference = reference.parse().expect("reference");
        let (bytes, digest) = oci
            .pull_manifest_raw(&reference, &RegistryAuth::Anonymous, &[oci_client::manifest::OCI_IMAGE_MEDIA_TYPE])
            .await
            .expect("manifest");
        entries.push(serde_json::json!({
            "mediaType": oci_client::manifest::OCI_IMAGE_MEDIA_TYPE, "digest": digest, "size": bytes.len(),
            "platform": {"architecture": arch, "os": "linux"}
        }));
    }
    let index: oci_client::manifest::OciImageIndex = serde_json::from_value(serde_json::json!({
        "schemaVersion": 2, "mediaType": oci_client::manifest::OCI_IMAGE_INDEX_MEDIA_TYPE, "manifests": entries
    }))
    .expect("index");
    let tag: oci_client::Reference = format!("{}/multi:latest", registry.addr()).parse().expect("reference");
    oci.push_manifest_list(&tag, &RegistryAuth::Anonymous, index).await.expect("push the index");

    let bundle = images.bundle(&tag.whole(), &Credentials::anonymous()).await.expect("pull through the index");
    assert_eq!(bundle.name, "etcdoperator.v0.9.4");
    assert_eq!(bundle.digest, built.digest, "the linux/amd64 manifest was chosen");
}

#[tokio::test]
async fn a_registry_with_its_own_ca() {
    let registry = olm_testkit::registry(RegistryOptions::new().tls()).await.expect("registry");
    let cache = tempfile::tempdir().expect("tempdir");
    let built = olm_image::build_bundle(&etcd_bundle()).expect("bundle image");
    let target = format!("{}/etcd:0.9.4", registry.addr());
    // Loopback defaults to plain HTTP: configured as HTTPS without the CA, the certificate is refused.
    let untrusted = client(&cache, RegistryConfig::default().with_host(registry.addr(), HostConfig::default()), Limits::default());
    let err = untrusted.push(&built, &target, &Credentials::anonymous()).await.unwrap_err();
    assert_eq!(err.category(), "RegistryUnreachable", "{err}");
    let ca = registry.ca_pem().expect("ca").as_bytes().to_vec();
    let trusted = client(
        &cache,
        RegistryConfig::default().with_host(registry.addr(), HostConfig { ca_pem: Some(ca), ..HostConfig::default() }),
        Limits::default(),
    );
    let pushed = trusted.push(&built, &target, &Credentials::anonymous()).await.expect("push over TLS");
    trusted.bundle(&pushed, &Credentials::anonymous()).await.expect("pull over TLS");
}

#[tokio::test]
async fn hostile_and_unusable_images_are_refused_by_name() {
    let registry = olm_testkit::registry(RegistryOptions::new()).await.expect("registry");
    let cache = tempfile::tempdir().expect("tempdir");
    let images = client(&cache, RegistryConfig::default(), Limits::default());
    let anonymous = Credentials::anonymous();

    // A tar entry that climbs out of the scratch directory.
    let escape = push_raw(registry.addr(), "evil", layer_with("manifests/../../../escaped", b"x"), BTreeMap::new()).await;
    let err = images.bundle(&escape, &anonymous).await.unwrap_err();
    assert_eq!(err.category(), "ImageContentInvalid", "{err}");
    assert!(err.to_string().contains("manifests/../../../escaped") && err.to_string().contains(&escape), "{err}");
    assert!(!cache.path().join("escaped").exists() && !cache.path().parent().expect("parent").join("escaped").exists());

    // A layer over the limit is refused from its descriptor, before it is downloaded.
    // Bytes that do not compress (a linear congruential sequence), so the layer stays large.
    let noise: Vec<u8> = (0u64..64 << 10)
        .scan(7u64, |state, _| {
            *state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            Some((*state >> 56) as u8)
        })
        .collect();
    let big = push_raw(registry.addr(), "big", layer_with("manifests/big.yaml", &noise), BTreeMap::new()).await;
    let small = tempfile::tempdir().expect("tempdir");
    let limited = client(&small, RegistryConfig::default(), Limits { max_layer_bytes: 1024, ..Limits::default() });
    let err = limited.bundle(&big, &anonymous).await.unwrap_err();
    assert_eq!(err.category(), "ImageTooLarge", "{err}");
    assert!(err.to_string().contains("over the limit of 1024 bytes"), "{err}");

    // Not a bundle: no manifests directory.
    let empty = push_raw(registry.addr(), "notabundle", layer_with("etc/hostname", b"x"), BTreeMap::new()).await;
    let err = images.bundle(&empty, &anonymous).await.unwrap_err();
    assert_eq!(err.category(), "NotABundleImage", "{err}");
    assert!(err.to_string().contains("no /manifests directory"), "{err}");

    // A SQLite catalog image: how to migrate it.
    let labels = BTreeMap::from([(olm_image::catalog::DATABASE_LABEL.to_owned(), "/database/index.db".to_owned())]);
    let sqlite = push_raw(registry.addr(), "sqlite-index", layer_with("database/index.db", b"SQLite format 3"), labels).await;
    let err = images.catalog(&sqlite, &anonymous).await.unwrap_err();
    assert_eq!(err.category(), "SqliteCatalogImage", "{err}");
    assert!(err.to_string().contains("opm migrate"), "{err}");
}

#[tokio::test]
async fn a_catalog_image_round_trips_and_its_digest_follows_the_tag() {
    let registry = olm_testkit::registry(RegistryOptions::new()).await.expect("registry");
    let cache = tempfile::tempdir().expect("tempdir");
    let images = client(&cache, RegistryConfig::default(), Limits::default());
    let fbc = repo().join("crates/olm-registry/testdata/catalog/etcd");
    let built = olm_image::build_catalog(&fbc).expect("catalog image");
    let tag = format!("{}/catalog:latest", registry.addr());
    images.push(&built, &tag, &Credentials::anonymous()).await.expect("push");
    assert_eq!(images.digest_of(&tag, &Credentials::anonymous()).await.expect("digest"), built.digest);
    let unpacked = images.catalog(&tag, &Credentials::anonymous()).await.expect("pull");
    assert_eq!(
        std::fs::read(unpacked.root.join("catalog.json")).expect("catalog.json"),
        std::fs::read(fbc.join("catalog.json")).expect("source")
    );
    // The catalog already parsed comes with it, and reads as /configs loads.
    let parsed = unpacked.parsed.as_deref().expect("the parsed form of an image `olm catalog push` built");
    let (from_configs, problems) = olm_catalog::load::load_fbc_documents(&unpacked.root).expect("/configs loads");
    assert!(problems.is_empty(), "{problems:?}");
    let from_parsed = olm_catalog::parsed::read_file(parsed, &unpacked.root).expect("the parsed form reads");
    assert_eq!(from_parsed.iter().map(|d| (&d.value, d.source.clone())).collect::<Vec<_>>(), from_configs.iter().map(|d| (&d.value, d.source.clone())).collect::<Vec<_>>());
    // Under a label that names another layer than the image's last (as in an image built on
    // top of one of ours, whose /configs may have changed), it is not trusted.
    let labels = BTreeMap::from([
        (olm_image::catalog::CONFIGS_LABEL.to_owned(), "/configs".to_owned()),
        (olm_image::catalog::PARSED_LABEL.to_owned(), format!("/{}@sha256:{}", olm_image::catalog::PARSED_PATH, "0".repeat(64))),
    ]);
    let source = std::fs::read(fbc.join("catalog.json")).expect("source");
    let layer = layer_with_files(&[("configs/catalog.json", &source), (olm_image::catalog::PARSED_PATH, &std::fs::read(parsed).expect("the parsed form"))]);
    let layered = push_raw(registry.addr(), "layered-catalog", layer, labels).await;
    let unpacked = images.catalog(&layered, &Credentials::anonymous()).await.expect("pull");
    assert!(unpacked.parsed.is_none(), "another layer's parsed form is not used");
    // Another catalog on the same tag: the digest moves.
    let demo = olm_image::build_catalog(&repo().join("crates/olm-registry/testdata/catalog/demo")).expect("catalog image");
    images.push(&demo, &tag, &Credentials::anonymous()).await.expect("push");
    assert_eq!(images.digest_of(&tag, &Credentials::anonymous()).await.expect("digest"), demo.digest);
}

#[tokio::test]
async fn content_that_does_not_match_its_digest_is_refused() {
    let registry = olm_testkit::registry(RegistryOptions::new()).await.expect("registry");
    let cache = tempfile::tempdir().expect("tempdir");
    let images = client(&cache, RegistryConfig::default(), Limits::default());
    let built = olm_image::build_bundle(&etcd_bundle()).expect("bundle image");
    let pushed = images
        .push(&built, &format!("{}/etcd:0.9.4", registry.addr()), &Credentials::anonymous())
        .await
        .expect("push");
    // Corrupt the layer where the registry keeps it (distribution serves its files as they are).
    let fresh = tempfile::tempdir().expect("tempdir");
    let reader = client(&fresh, RegistryConfig::default(), Limits::default());
    let manifest = reader.pull(&pushed, &Credentials::anonymous()).await.expect("pull");
    let layer = manifest.layers[0].digest.trim_start_matches("sha256:").to_owned();
    let blob = registry
        .dir()
        .join("storage/docker/registry/v2/blobs/sha256")
        .join(&layer[..2])
        .join(&layer)
        .join("data");
    let mut bytes = std::fs::read(&blob).expect("the registry's blob file");
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&blob, bytes).expect("corrupt it");
    let again = tempfile::tempdir().expect("tempdir");
    let err = client(&again, RegistryConfig::default(), Limits::default())
        .bundle(&pushed, &Credentials::anonymous())
        .await
        .unwrap_err();
    assert_eq!(err.category(), "ImageDigestMismatch", "{err}");
    assert!(err.to_string().contains(&format!("layer sha256:{layer}")) && err.to_string().contains(&pushed), "{err}");
}

