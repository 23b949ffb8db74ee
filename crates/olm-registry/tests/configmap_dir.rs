//! A ConfigMap catalog mounted as a volume, served over gRPC: what the registry pod of a
//! ConfigMap catalog runs (`olm catalog serve --catalog NAME=/registry`, made by the
//! CatalogSource controller with `olm run --configmap-server-image`).

use olm_registry::ServeConfig;
use olm_registry_api::pb;
use olm_registry_api::pb::registry_client::RegistryClient;

const PACKAGES: &str = "- packageName: Legacy\n  channels:\n  - name: stable\n    currentCSV: legacy.v2\n";
const CSVS: &str = r#"
- apiVersion: operators.coreos.com/v1alpha1
  kind: ClusterServiceVersion
  metadata: {name: legacy.v1}
  spec:
    version: 1.0.0
    customresourcedefinitions:
      owned: [{name: gadgets.legacy.io, version: v1, kind: Gadget}]
- apiVersion: operators.coreos.com/v1alpha1
  kind: ClusterServiceVersion
  metadata: {name: legacy.v2}
  spec:
    version: 2.0.0
    replaces: legacy.v1
    customresourcedefinitions:
      owned: [{name: gadgets.legacy.io, version: v1, kind: Gadget}]
"#;
const CRDS: &str = "- apiVersion: apiextensions.k8s.io/v1\n  kind: CustomResourceDefinition\n  metadata: {name: gadgets.legacy.io}\n  spec: {group: legacy.io}\n";

/// The ConfigMap's keys as the kubelet mounts them: links into a hidden `..data` directory.
fn mounted() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("..2026_12_07_22_00_00.000000001");
    std::fs::create_dir(&data).expect("data dir");
    for (key, text) in [("packages", PACKAGES), ("clusterServiceVersions", CSVS), ("customResourceDefinitions", CRDS)] {
        std::fs::write(data.join(key), text).expect("write");
        std::os::unix::fs::symlink(format!("..data/{key}"), dir.path().join(key)).expect("link");
    }
    std::os::unix::fs::symlink(data.file_name().expect("name"), dir.path().join("..data")).expect("link");
    dir
}

#[tokio::test]
async fn a_mounted_configmap_is_served_over_grpc_as_upstreams_configmap_server_serves_it() {
    let dir = mounted();
    let mut config = ServeConfig::new(vec![("legacy".into(), dir.path().to_path_buf())]);
    config.grpc_addrs = vec![("legacy".into(), "127.0.0.1:0".parse().expect("address"))];
    let server = olm_registry::start(config).await.expect("server starts");
    let mut client = RegistryClient::connect(format!("http://{}", server.grpc_addrs["legacy"])).await.expect("gRPC connect");

    let mut packages = client.list_packages(pb::ListPackageRequest {}).await.expect("ListPackages").into_inner();
    let mut names = Vec::new();
    while let Some(package) = packages.message().await.expect("stream") {
        names.push(package.name);
    }
    // Not a DNS-1123 label: opm would refuse it in a file-based catalog; upstream's ConfigMap
    // registry serves it, and so does this.
    assert_eq!(names, ["Legacy"]);
    let package = client.get_package(pb::GetPackageRequest { name: "Legacy".into() }).await.expect("GetPackage").into_inner();
    assert_eq!((package.default_channel_name.as_str(), package.channels[0].csv_name.as_str()), ("stable", "legacy.v2"));

    let bundle = client
        .get_bundle(pb::GetBundleRequest { pkg_name: "Legacy".into(), channel_name: "stable".into(), csv_name: "legacy.v2".into() })
        .await
        .expect("GetBundle")
        .into_inner();
    let csv: serde_json::Value = serde_json::from_str(&bundle.csv_json).expect("CSV JSON");
    assert_eq!(csv["metadata"]["name"], "legacy.v2");
    assert!(bundle.object.iter().any(|o| o.contains("gadgets.legacy.io") && o.contains("CustomResourceDefinition")), "the owned CRD goes with the bundle");
    server.shutdown();
}
