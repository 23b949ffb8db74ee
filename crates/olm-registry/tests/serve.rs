//! The catalog server as a client sees it: HTTP and gRPC on loopback, over the etcd
//! (rendered from the real community-operators bundles) and demo fixture catalogs.
//!
//! Longer than ~600 lines: one suite over the running server's HTTP and gRPC APIs, a request per test.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::StatusCode;
use hyper::header::HeaderMap;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use olm_registry_api::pb::registry_client::RegistryClient;
use olm_registry_api::pb;
use olm_registry::{RunningServer, ServeConfig};
use serde_json::Value;
use tonic::transport::Channel;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/catalog")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

struct Harness {
    server: RunningServer,
    _dir: tempfile::TempDir,
    catalog_dir: PathBuf,
}

impl Harness {
    async fn start() -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let catalog_dir = dir.path().join("community");
        copy_dir(&fixture(), &catalog_dir);
        let mut config = ServeConfig::new(vec![("community".into(), catalog_dir.clone())]);
        config.http_addr = Some("127.0.0.1:0".parse().unwrap());
        config.grpc_addrs = vec![("community".into(), "127.0.0.1:0".parse().unwrap())];
        config.reload_interval = Some(Duration::from_millis(50));
        let server = olm_registry::start(config).await.expect("server starts");
        Harness { server, _dir: dir, catalog_dir }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.server.http_addr.unwrap())
    }

    async fn get(&self, path: &str, headers: &[(&str, &str)]) -> (StatusCode, HeaderMap, Vec<u8>) {
        self.request("GET", path, headers).await
    }

    async fn request(&self, method: &str, path: &str, headers: &[(&str, &str)]) -> (StatusCode, HeaderMap, Vec<u8>) {
        let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
        let mut req = hyper::Request::builder().method(method).uri(self.url(path));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = client.request(req.body(Empty::new()).unwrap()).await.expect("HTTP request");
        let (parts, body) = resp.into_parts();
        let bytes = body.collect().await.unwrap().to_bytes().to_vec();
        (parts.status, parts.headers, bytes)
    }

    async fn get_json(&self, path: &str) -> (StatusCode, Value) {
        let (status, headers, body) = self.get(path, &[]).await;
        assert!(
            headers.get("content-type").and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("application/json")),
            "{path}: content-type {:?}",
            headers.get("content-type")
        );
        (status, serde_json::from_slice(&body).expect("JSON body"))
    }

    async fn grpc(&self) -> RegistryClient<Channel> {
        let addr = self.server.grpc_addrs["community"];
        RegistryClient::connect(format!("http://{addr}")).await.expect("gRPC connect")
    }
}

fn jsonl(body: &[u8]) -> Vec<Value> {
    std::str::from_utf8(body)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is one JSON object"))
        .collect()
}

// ---- HTTP: our API ------------------------------------------------------------

#[tokio::test]
async fn package_endpoint_shows_etcd_channels_and_heads() {
    let h = Harness::start().await;
    let (status, pkg) = h.get_json("/api/v1/catalogs/community/packages/etcd").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(pkg["defaultChannel"], "singlenamespace-alpha");
    let heads: Vec<(String, String)> = pkg["channels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap().to_string(), c["currentCSV"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(
        heads,
        vec![
            ("alpha".to_string(), "etcdoperator.v0.6.1".to_string()),
            ("clusterwide-alpha".to_string(), "etcdoperator.v0.9.4-clusterwide".to_string()),
            ("singlenamespace-alpha".to_string(), "etcdoperator.v0.9.4".to_string()),
        ]
    );
    let single = &pkg["channels"][2];
    let desc = &single["currentCSVDesc"];
    assert_eq!(desc["displayName"], "etcd");
    assert_eq!(desc["version"], "0.9.4");
    assert_eq!(desc["provider"]["name"], "CNCF");
    assert!(desc["installModes"].as_array().is_some_and(|m| !m.is_empty()));
    assert!(desc["customresourcedefinitions"]["owned"].as_array().is_some_and(|o| o.len() == 3));
    assert!(desc["description"].as_str().is_some_and(|d| d.contains("etcd")));
    assert!(desc["icon"][0]["base64data"].as_str().is_some_and(|d| !d.is_empty()));
    let entries: Vec<&str> = single["entries"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(entries, ["etcdoperator.v0.9.4", "etcdoperator.v0.9.2", "etcdoperator.v0.9.0"], "newest first");
    assert_eq!(pkg["provider"]["name"], "CNCF");
}

#[tokio::test]
async fn package_list_catalog_list_and_bundle() {
    let h = Harness::start().await;
    let (status, list) = h.get_json("/api/v1/catalogs/community/packages").await;
    assert_eq!(status, StatusCode::OK);
    let names: Vec<&str> = list["packages"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["demo", "etcd"]);
    assert_eq!(list["packages"][1]["currentCSV"], "etcdoperator.v0.9.4");
    assert_eq!(list["packages"][0]["displayName"], "Demo Operator");

    let (status, catalogs) = h.get_json("/api/v1/catalogs").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(catalogs["catalogs"][0]["name"], "community");
    assert_eq!(catalogs["catalogs"][0]["packages"], 2);
    assert_eq!(catalogs["catalogs"][0]["bundles"], 9);

    let (status, bundle) = h.get_json("/api/v1/catalogs/community/bundles/etcdoperator.v0.9.2").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(bundle["package"], "etcd");
    assert_eq!(bundle["version"], "0.9.2");
    assert_eq!(bundle["channels"][0]["name"], "singlenamespace-alpha");
    assert_eq!(bundle["channels"][0]["replaces"], "etcdoperator.v0.9.0");
    assert_eq!(bundle["csv"]["kind"], "ClusterServiceVersion");
    assert_eq!(bundle["csvSynthesized"], false);
    let kinds: Vec<&str> = bundle["objects"].as_array().unwrap().iter().map(|o| o["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds.iter().filter(|k| **k == "CustomResourceDefinition").count(), 3);
    assert!(kinds.contains(&"ClusterServiceVersion"));

    // A csv.metadata-only bundle gets a synthesized CSV with the package icon.
    let (_, demo) = h.get_json("/api/v1/catalogs/community/bundles/demo.v2.0.0").await;
    assert_eq!(demo["csvSynthesized"], true);
    assert_eq!(demo["csv"]["spec"]["displayName"], "Demo Operator");
    assert_eq!(demo["csv"]["spec"]["icon"][0]["mediatype"], "image/svg+xml");
    assert_eq!(demo["channels"][0]["skipRange"], ">=1.0.0 <2.0.0");
}

#[tokio::test]
async fn deprecations_surface_in_the_package_view() {
    let h = Harness::start().await;
    let (_, pkg) = h.get_json("/api/v1/catalogs/community/packages/demo").await;
    let legacy = pkg["channels"].as_array().unwrap().iter().find(|c| c["name"] == "legacy").unwrap();
    assert_eq!(legacy["deprecation"]["message"], "legacy is no longer updated; use stable");
    assert_eq!(legacy["entries"][0]["deprecation"]["message"], "demo 1.0.0 loses widgets on restart; upgrade");
    let stable = pkg["channels"].as_array().unwrap().iter().find(|c| c["name"] == "stable").unwrap();
    assert_eq!(stable["currentCSV"], "demo.v2.0.0");
    // Without a CSV description, the package description is used.
    let (_, v1) = h.get_json("/api/v1/catalogs/community/bundles/demo.v1.0.0").await;
    assert_eq!(v1["csv"]["spec"]["description"], "Demo operator of the catalog server tests (package description).");
}

#[tokio::test]
async fn unknown_names_get_404_json_naming_what_exists() {
    let h = Harness::start().await;
    let (status, err) = h.get_json("/api/v1/catalogs/community/packages/etdc").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let message = err["error"].as_str().unwrap();
    assert!(message.contains("package \"etdc\" not found in catalog \"community\""), "{message}");
    assert!(message.contains("it has 2 package(s)"), "{message}");
    assert!(message.contains("/api/v1/catalogs/community/packages"), "{message}");
    assert_eq!(err["didYouMean"][0], "etcd");

    let (status, err) = h.get_json("/api/v1/catalogs/nope/packages").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(err["error"].as_str().unwrap().contains("catalog \"nope\" not found"));
    assert_eq!(err["catalogs"][0], "community");

    let (status, err) = h.get_json("/api/v1/catalogs/community/bundles/etcdoperator.v9").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(err["error"].as_str().unwrap().contains("bundle \"etcdoperator.v9\" not found"));

    let (status, err) = h.get_json("/catalogs/nope/api/v1/all").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(err["error"].as_str().unwrap().contains("catalog \"nope\""));

    let (status, err) = h.get_json("/no/such/endpoint").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(err["error"].as_str().unwrap().contains("/openapi.json"));

    // A name as long as a request allows is quoted cut short in the message.
    let long = "x".repeat(4000);
    let (status, err) = h.get_json(&format!("/api/v1/catalogs/community/bundles/{long}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let message = err["error"].as_str().unwrap();
    assert!(message.len() < 600 && message.contains("bundle \"xxx"), "{} characters: {message}", message.len());
}

#[tokio::test]
async fn etag_gives_304_and_gzip_is_negotiated() {
    let h = Harness::start().await;
    let path = "/api/v1/catalogs/community/packages/etcd";
    let (status, headers, body) = h.get(path, &[]).await;
    assert_eq!(status, StatusCode::OK);
    let etag = headers.get("etag").expect("ETag").to_str().unwrap().to_string();
    assert!(etag.starts_with('"') && !etag.starts_with("W/"), "strong ETag: {etag}");
    let (status, _, body304) = h.get(path, &[("if-none-match", &etag)]).await;
    assert_eq!(status, StatusCode::NOT_MODIFIED);
    assert!(body304.is_empty());
    let (status, _, _) = h.get(path, &[("if-none-match", "\"something-else\"")]).await;
    assert_eq!(status, StatusCode::OK);

    let (status, headers, gz) = h.get(path, &[("accept-encoding", "gzip")]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers.get("content-encoding").unwrap(), "gzip");
    let gz_etag = headers.get("etag").unwrap().to_str().unwrap().to_string();
    assert_ne!(gz_etag, etag, "the gzip variant has its own strong ETag");
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(&gz[..]).read_to_end(&mut plain).unwrap();
    assert_eq!(plain, body, "gzip body decodes to the identity body");
    let (status, _, _) = h.get(path, &[("accept-encoding", "gzip"), ("if-none-match", &gz_etag)]).await;
    assert_eq!(status, StatusCode::NOT_MODIFIED);

    // Small bodies are not compressed.
    let (_, headers, _) = h.get("/healthz", &[("accept-encoding", "gzip")]).await;
    assert!(headers.get("content-encoding").is_none());
}

// ---- HTTP: catalogd -------------------------------------------------------------

#[tokio::test]
async fn catalogd_all_and_metas() {
    let h = Harness::start().await;
    let (status, headers, body) = h.get("/catalogs/community/api/v1/all", &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers.get("content-type").unwrap(), "application/jsonl");
    assert_eq!(headers.get("content-length").unwrap().to_str().unwrap(), body.len().to_string());
    assert!(headers.get("last-modified").is_some());
    let blobs = jsonl(&body);
    assert_eq!(blobs.iter().filter(|b| b["schema"] == "olm.bundle").count(), 9);
    assert_eq!(blobs.iter().filter(|b| b["schema"] == "olm.package").count(), 2);
    assert!(blobs.iter().any(|b| b["schema"] == "example.custom"), "custom schemas are kept");
    // Canonical blobs: compact JSON with sorted keys.
    let first_line = std::str::from_utf8(&body).unwrap().lines().next().unwrap();
    assert!(!first_line.contains(": "), "compact");
    let keys: Vec<&String> = blobs[0].as_object().unwrap().keys().collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted);

    let (status, headers, head_body) = h.request("HEAD", "/catalogs/community/api/v1/all", &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert!(head_body.is_empty());
    assert_eq!(headers.get("content-length").unwrap().to_str().unwrap(), body.len().to_string());

    let (status, _, body) = h.get("/catalogs/community/api/v1/metas?schema=olm.channel&package=etcd", &[]).await;
    assert_eq!(status, StatusCode::OK);
    let names: Vec<String> = jsonl(&body).iter().map(|b| b["name"].as_str().unwrap().to_string()).collect();
    assert_eq!(names, ["alpha", "clusterwide-alpha", "singlenamespace-alpha"]);

    // `package` filters on the blob's package field: the olm.package blob has none.
    let (_, _, body) = h.get("/catalogs/community/api/v1/metas?package=etcd", &[]).await;
    assert!(jsonl(&body).iter().all(|b| b["schema"] != "olm.package"));
    let (_, _, body) = h.get("/catalogs/community/api/v1/metas?schema=olm.package&name=etcd", &[]).await;
    let blobs = jsonl(&body);
    assert_eq!(blobs.len(), 1);
    assert_eq!(blobs[0]["defaultChannel"], "singlenamespace-alpha");

    let (status, _, body) = h.get("/catalogs/community/api/v1/metas?schema=nothing", &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.is_empty());
    let (status, _, _) = h.get("/catalogs/community/api/v1/metas?foo=bar", &[]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _, _) = h.get("/catalogs/Not_Valid/api/v1/all", &[]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _, _) = h.request("POST", "/catalogs/community/api/v1/all", &[]).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);

    let (status, headers, gz) = h.get("/catalogs/community/api/v1/all", &[("accept-encoding", "gzip")]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers.get("content-encoding").unwrap(), "gzip");
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(&gz[..]).read_to_end(&mut plain).unwrap();
    // packages + channels + bundles + deprecations + custom blobs
    assert_eq!(jsonl(&plain).len(), 2 + 5 + 9 + 1 + 1);
}

#[tokio::test]
async fn health_ready_metrics_openapi() {
    let h = Harness::start().await;
    let (status, _, body) = h.get("/healthz", &[]).await;
    assert_eq!((status, body.as_slice()), (StatusCode::OK, b"ok\n".as_slice()));
    let (status, ready) = h.get_json("/readyz").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(ready["ready"], true);
    assert_eq!(ready["catalogs"][0]["lastReloadError"], Value::Null);

    h.get("/api/v1/catalogs/community/packages", &[]).await;
    let (status, _, body) = h.get("/metrics", &[]).await;
    assert_eq!(status, StatusCode::OK);
    let text = String::from_utf8(body).unwrap();
    assert!(text.contains("olm_registry_catalog_bundles{catalog=\"community\"} 9"), "{text}");
    assert!(text.contains("olm_registry_catalog_packages{catalog=\"community\"} 2"));
    assert!(text.contains("olm_registry_http_requests_total{route=\"/api/v1/catalogs/{catalog}/packages\",method=\"GET\",code=\"200\"} 1"), "{text}");
    assert!(text.contains("olm_registry_catalog_last_successful_reload_timestamp_seconds{catalog=\"community\"}"));

    let (status, doc) = h.get_json("/openapi.json").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(doc["openapi"], "3.0.3");
    for path in [
        "/catalogs/{catalog}/api/v1/all",
        "/catalogs/{catalog}/api/v1/metas",
        "/api/v1/catalogs",
        "/api/v1/catalogs/{catalog}/packages",
        "/api/v1/catalogs/{catalog}/packages/{package}",
        "/api/v1/catalogs/{catalog}/bundles/{bundle}",
    ] {
        assert!(doc["paths"].get(path).is_some(), "{path} documented");
    }
}

// ---- gRPC -------------------------------------------------------------------------

async fn collect<T>(mut stream: tonic::Streaming<T>) -> Vec<T> {
    let mut out = Vec::new();
    while let Some(item) = stream.message().await.expect("stream item") {
        out.push(item);
    }
    out
}

#[tokio::test]
async fn grpc_packages_and_bundles() {
    let h = Harness::start().await;
    let mut client = h.grpc().await;

    let names: Vec<String> =
        collect(client.list_packages(pb::ListPackageRequest {}).await.unwrap().into_inner()).await.into_iter().map(|p| p.name).collect();
    assert_eq!(names, ["demo", "etcd"]);

    let pkg = client.get_package(pb::GetPackageRequest { name: "etcd".into() }).await.unwrap().into_inner();
    assert_eq!(pkg.default_channel_name, "singlenamespace-alpha");
    let channels: Vec<(&str, &str)> = pkg.channels.iter().map(|c| (c.name.as_str(), c.csv_name.as_str())).collect();
    assert_eq!(
        channels,
        [
            ("alpha", "etcdoperator.v0.6.1"),
            ("clusterwide-alpha", "etcdoperator.v0.9.4-clusterwide"),
            ("singlenamespace-alpha", "etcdoperator.v0.9.4")
        ]
    );
    let err = client.get_package(pb::GetPackageRequest { name: "nope".into() }).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unknown);
    assert_eq!(err.message(), "package \"nope\" not found");

    let demo = client.get_package(pb::GetPackageRequest { name: "demo".into() }).await.unwrap().into_inner();
    let legacy = demo.channels.iter().find(|c| c.name == "legacy").unwrap();
    assert_eq!(legacy.deprecation.as_ref().unwrap().message, "legacy is no longer updated; use stable");

    let b = client
        .get_bundle(pb::GetBundleRequest {
            pkg_name: "etcd".into(),
            channel_name: "singlenamespace-alpha".into(),
            csv_name: "etcdoperator.v0.9.2".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(b.csv_name, "etcdoperator.v0.9.2");
    assert_eq!(b.channel_name, "singlenamespace-alpha");
    assert_eq!(b.version, "0.9.2");
    assert_eq!(b.bundle_path, "quay.io/operatorhubio/etcd:v0.9.2");
    assert!(b.replaces.is_empty() && b.skips.is_empty(), "GetBundle clears the edges");
    let csv: Value = serde_json::from_str(&b.csv_json).unwrap();
    assert_eq!(csv["metadata"]["name"], "etcdoperator.v0.9.2");
    assert_eq!(b.object.len(), 4);
    assert_eq!(b.provided_apis.len(), 3);
    assert!(b.properties.iter().any(|p| p.r#type == "olm.package" && p.value.contains("\"version\":\"0.9.2\"")));
    assert!(b.properties.iter().all(|p| p.r#type != "olm.bundle.object"), "bundle objects are not sent as properties");

    let err = client
        .get_bundle(pb::GetBundleRequest { pkg_name: "etcd".into(), channel_name: "alpha".into(), csv_name: "etcdoperator.v0.9.2".into() })
        .await
        .unwrap_err();
    assert_eq!(err.message(), "package \"etcd\", channel \"alpha\", bundle \"etcdoperator.v0.9.2\" not found");
    let err = client
        .get_bundle(pb::GetBundleRequest { pkg_name: "etcd".into(), channel_name: "beta".into(), csv_name: "x".into() })
        .await
        .unwrap_err();
    assert_eq!(err.message(), "package \"etcd\", channel \"beta\" not found");

    #[allow(deprecated)]
    let head = client
        .get_bundle_for_channel(pb::GetBundleInChannelRequest { pkg_name: "etcd".into(), channel_name: "clusterwide-alpha".into() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(head.csv_name, "etcdoperator.v0.9.4-clusterwide");
    assert_eq!(head.version, "0.9.4-clusterwide");

    // Synthesized CSV, dependencies and deprecation of a csv.metadata bundle.
    let v11 = client
        .get_bundle(pb::GetBundleRequest { pkg_name: "demo".into(), channel_name: "stable".into(), csv_name: "demo.v1.1.0".into() })
        .await
        .unwrap()
        .into_inner();
    let csv: Value = serde_json::from_str(&v11.csv_json).unwrap();
    assert_eq!(csv["kind"], "ClusterServiceVersion");
    assert_eq!(csv["spec"]["install"]["strategy"], "deployment");
    assert_eq!(v11.object, vec![v11.csv_json.clone()]);
    let deps: Vec<(&str, Value)> =
        v11.dependencies.iter().map(|d| (d.r#type.as_str(), serde_json::from_str(&d.value).unwrap())).collect();
    assert!(deps.contains(&("olm.gvk", serde_json::json!({"group": "etcd.database.coreos.com", "kind": "EtcdCluster", "version": "v1beta2"}))));
    assert!(deps.contains(&("olm.package", serde_json::json!({"packageName": "etcd", "version": ">=0.9.0"}))));
    assert_eq!(v11.required_apis.len(), 1);
    let v10 = client
        .get_bundle(pb::GetBundleRequest { pkg_name: "demo".into(), channel_name: "legacy".into(), csv_name: "demo.v1.0.0".into() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(v10.deprecation.unwrap().message, "demo 1.0.0 loses widgets on restart; upgrade");
}

#[tokio::test]
async fn grpc_list_bundles_is_one_entry_per_channel_membership() {
    let h = Harness::start().await;
    let mut client = h.grpc().await;
    let bundles = collect(client.list_bundles(pb::ListBundlesRequest {}).await.unwrap().into_inner()).await;
    // etcd: alpha 1 + clusterwide 3 + singlenamespace 3; demo: stable 3 + legacy 1.
    assert_eq!(bundles.len(), 11);
    let v090: Vec<&str> =
        bundles.iter().filter(|b| b.csv_name == "etcdoperator.v0.9.0").map(|b| b.channel_name.as_str()).collect();
    assert_eq!(v090, ["clusterwide-alpha", "singlenamespace-alpha"]);
    let v200 = bundles.iter().find(|b| b.csv_name == "demo.v2.0.0").unwrap();
    assert_eq!(v200.replaces, "demo.v1.1.0");
    assert_eq!(v200.skips, ["demo.v1.0.0"]);
    assert_eq!(v200.skip_range, ">=1.0.0 <2.0.0");
    assert!(bundles.iter().all(|b| b.csv_json.is_empty() && b.object.is_empty()), "content is omitted when the image is set");
}

#[tokio::test]
async fn grpc_replacements_and_providers() {
    let h = Harness::start().await;
    let mut client = h.grpc().await;

    let entries = collect(
        client.get_channel_entries_that_replace(pb::GetAllReplacementsRequest { csv_name: "etcdoperator.v0.9.0".into() }).await.unwrap().into_inner(),
    )
    .await;
    let mut got: Vec<(String, String)> = entries.iter().map(|e| (e.channel_name.clone(), e.bundle_name.clone())).collect();
    got.sort();
    assert_eq!(
        got,
        [
            ("clusterwide-alpha".to_string(), "etcdoperator.v0.9.2-clusterwide".to_string()),
            ("singlenamespace-alpha".to_string(), "etcdoperator.v0.9.2".to_string())
        ]
    );
    // A skip is reported with the entry's own replaces.
    let entries = collect(
        client.get_channel_entries_that_replace(pb::GetAllReplacementsRequest { csv_name: "demo.v1.0.0".into() }).await.unwrap().into_inner(),
    )
    .await;
    let got: Vec<(&str, &str)> = entries.iter().map(|e| (e.bundle_name.as_str(), e.replaces.as_str())).collect();
    assert_eq!(got, [("demo.v1.1.0", "demo.v1.0.0"), ("demo.v2.0.0", "demo.v1.1.0")]);
    let err = client.get_channel_entries_that_replace(pb::GetAllReplacementsRequest { csv_name: "x".into() }).await.unwrap_err();
    assert_eq!(err.message(), "no channel entries found that replace x");

    let b = client
        .get_bundle_that_replaces(pb::GetReplacementRequest {
            csv_name: "etcdoperator.v0.9.2".into(),
            pkg_name: "etcd".into(),
            channel_name: "singlenamespace-alpha".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(b.csv_name, "etcdoperator.v0.9.4");
    assert!(b.replaces.is_empty());
    let err = client
        .get_bundle_that_replaces(pb::GetReplacementRequest {
            csv_name: "etcdoperator.v0.9.4".into(),
            pkg_name: "etcd".into(),
            channel_name: "singlenamespace-alpha".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.message(), "no entry found for package \"etcd\", channel \"singlenamespace-alpha\"");

    let cluster = pb::GetAllProvidersRequest {
        group: "etcd.database.coreos.com".into(),
        version: "v1beta2".into(),
        kind: "EtcdCluster".into(),
        plural: String::new(),
    };
    let all = collect(client.get_channel_entries_that_provide(cluster.clone()).await.unwrap().into_inner()).await;
    assert_eq!(all.len(), 7, "every etcd channel membership provides EtcdCluster");
    let latest = collect(
        client
            .get_latest_channel_entries_that_provide(pb::GetLatestProvidersRequest {
                group: cluster.group.clone(),
                version: cluster.version.clone(),
                kind: cluster.kind.clone(),
                plural: String::new(),
            })
            .await
            .unwrap()
            .into_inner(),
    )
    .await;
    let mut heads: Vec<&str> = latest.iter().map(|e| e.bundle_name.as_str()).collect();
    heads.sort();
    assert_eq!(heads, ["etcdoperator.v0.6.1", "etcdoperator.v0.9.4", "etcdoperator.v0.9.4-clusterwide"]);

    // Skips of a head are extra entries (only when the skipped bundle is in the channel).
    let widgets = collect(
        client
            .get_latest_channel_entries_that_provide(pb::GetLatestProvidersRequest {
                group: "demo.example.com".into(),
                version: "v1".into(),
                kind: "Widget".into(),
                plural: String::new(),
            })
            .await
            .unwrap()
            .into_inner(),
    )
    .await;
    let got: Vec<(&str, &str, &str)> =
        widgets.iter().map(|e| (e.channel_name.as_str(), e.bundle_name.as_str(), e.replaces.as_str())).collect();
    assert_eq!(got, [("legacy", "demo.v1.0.0", ""), ("stable", "demo.v2.0.0", "demo.v1.1.0"), ("stable", "demo.v2.0.0", "demo.v1.0.0")]);

    let default = client
        .get_default_bundle_that_provides(pb::GetDefaultProviderRequest {
            group: cluster.group.clone(),
            version: cluster.version.clone(),
            kind: cluster.kind.clone(),
            plural: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((default.csv_name.as_str(), default.channel_name.as_str()), ("etcdoperator.v0.9.4", "singlenamespace-alpha"));

    let err = client
        .get_default_bundle_that_provides(pb::GetDefaultProviderRequest {
            group: "x".into(),
            version: "v1".into(),
            kind: "Y".into(),
            plural: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.message(), "no channel entries found that provide group:\"x\" version:\"v1\" kind:\"Y\"");
}

#[tokio::test]
async fn grpc_health_reports_registry_serving() {
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;
    let h = Harness::start().await;
    let addr = h.server.grpc_addrs["community"];
    let mut health = HealthClient::new(Channel::from_shared(format!("http://{addr}")).unwrap().connect().await.unwrap());
    for service in ["", "Registry"] {
        let resp = health
            .check(tonic_health::pb::HealthCheckRequest { service: service.into() })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(resp.status, ServingStatus::Serving as i32, "service {service:?}");
    }
}

#[tokio::test]
async fn grpc_experimental_custom_schemas() {
    use olm_registry_api::pb::experimental_registry_client::ExperimentalRegistryClient;
    let h = Harness::start().await;
    let addr = h.server.grpc_addrs["community"];
    let mut client = ExperimentalRegistryClient::connect(format!("http://{addr}")).await.unwrap();
    let request = || pb::ExperimentalListPackageCustomSchemasRequest { schema: "example.custom".into(), package_name: "demo".into() };
    let silent = collect(client.experimental_list_package_custom_schemas(request()).await.unwrap().into_inner()).await;
    assert!(silent.is_empty(), "no answer without the acknowledgement header");
    let mut req = tonic::Request::new(request());
    req.metadata_mut().insert("x-acknowledge-experimental", "true".parse().unwrap());
    let blobs = collect(client.experimental_list_package_custom_schemas(req).await.unwrap().into_inner()).await;
    assert_eq!(blobs.len(), 1);
    assert!(blobs[0].fields.contains_key("data"));
}

// ---- reload ---------------------------------------------------------------------

async fn wait_for<F: Fn() -> bool>(what: &str, check: F) {
    for _ in 0..200 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test]
async fn valid_edit_swaps_and_an_invalid_package_is_left_out_alone() {
    let h = Harness::start().await;
    let catalog = h.server.catalogs.get("community").unwrap();
    let first_hash = catalog.snapshot().unwrap().content_hash.clone();

    // Valid edit: the default channel of demo becomes legacy.
    let file = h.catalog_dir.join("demo/catalog.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, text.replace("defaultChannel: stable", "defaultChannel: legacy")).unwrap();
    wait_for("the valid edit to be served", || catalog.snapshot().unwrap().content_hash != first_hash).await;
    let (status, pkg) = h.get_json("/api/v1/catalogs/community/packages/demo").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(pkg["defaultChannel"], "legacy");
    let mut client = h.grpc().await;
    let demo = client.get_package(pb::GetPackageRequest { name: "demo".into() }).await.unwrap().into_inner();
    assert_eq!(demo.default_channel_name, "legacy");

    // Invalid edit: a channel entry of demo names a bundle that does not exist. demo is left
    // out with its problem; etcd is still served (opm would refuse the whole catalog).
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, text.replace("  - name: demo.v1.1.0\n", "  - name: demo.v1.1.0-missing\n")).unwrap();
    wait_for("demo to be left out", || catalog.snapshot().unwrap().left_out.iter().any(|l| l.package == "demo")).await;
    let (status, _) = h.get_json("/api/v1/catalogs/community/packages/demo").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, etcd) = h.get_json("/api/v1/catalogs/community/packages/etcd").await;
    assert_eq!(status, StatusCode::OK, "{etcd}");
    let answer = client.list_packages(pb::ListPackageRequest {}).await.unwrap();
    // gRPC clients are told which package is missing and why, beside the listing.
    let told = olm_registry_api::left_out::read(answer.metadata());
    assert!(told.get("demo").is_some_and(|why| why.contains("demo.v1.1.0-missing")), "{told:?}");
    let names: Vec<String> = collect(answer.into_inner()).await.into_iter().map(|p| p.name).collect();
    assert!(names.contains(&"etcd".to_owned()) && !names.contains(&"demo".to_owned()), "{names:?}");
    let (status, ready) = h.get_json("/readyz").await;
    assert_eq!(status, StatusCode::OK);
    let left_out = &ready["catalogs"][0]["leftOutPackages"];
    assert_eq!(left_out[0]["package"], "demo", "{ready}");
    assert!(left_out[0]["problems"][0].as_str().unwrap().contains("demo.v1.1.0-missing"), "{ready}");
    let (_, _, metrics) = h.get("/metrics", &[]).await;
    let metrics = String::from_utf8(metrics).unwrap();
    assert!(metrics.contains("olm_registry_catalog_left_out_packages{catalog=\"community\"} 1"), "{metrics}");

    // Fixing the file brings demo back.
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, text.replace("demo.v1.1.0-missing", "demo.v1.1.0")).unwrap();
    wait_for("the fix to bring demo back", || catalog.snapshot().unwrap().left_out.is_empty()).await;
    let (_, _, metrics) = h.get("/metrics", &[]).await;
    let metrics = String::from_utf8(metrics).unwrap();
    assert!(metrics.contains("olm_registry_catalog_left_out_packages{catalog=\"community\"} 0"), "{metrics}");
    let (status, _) = h.get_json("/api/v1/catalogs/community/packages/demo").await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn an_edit_that_breaks_every_package_keeps_the_last_good_snapshot() {
    let h = Harness::start().await;
    let catalog = h.server.catalogs.get("community").unwrap();
    let good = catalog.snapshot().unwrap().content_hash.clone();
    // Every file unreadable: nothing sound is left, so the last good snapshot stays.
    let mut files = Vec::new();
    for entry in walk(&h.catalog_dir) {
        let text = std::fs::read_to_string(&entry).unwrap();
        std::fs::write(&entry, "{ not: [valid\n").unwrap();
        files.push((entry, text));
    }
    wait_for("the broken edit to be reported", || catalog.status().last_error.is_some()).await;
    assert_eq!(catalog.snapshot().unwrap().content_hash, good, "the last good snapshot keeps serving");
    let (_, _, metrics) = h.get("/metrics", &[]).await;
    assert!(String::from_utf8(metrics).unwrap().contains("olm_registry_catalog_reload_errors_total{catalog=\"community\"}"));
    for (file, text) in files {
        std::fs::write(file, text).unwrap();
    }
    wait_for("the fix to clear the error", || catalog.status().last_error.is_none()).await;
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[tokio::test]
async fn a_catalog_that_never_loaded_is_not_ready() {
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(broken.join("catalog.yaml"), "schema: olm.package\nname: x\ndefaultChannel: missing\n").unwrap();
    let mut config = ServeConfig::new(vec![("broken".into(), broken.clone())]);
    config.http_addr = Some("127.0.0.1:0".parse().unwrap());
    config.grpc_addrs = vec![("broken".into(), "127.0.0.1:0".parse().unwrap())];
    config.reload_interval = None;
    let server = olm_registry::start(config).await.unwrap();
    let h = Harness { server, _dir: dir, catalog_dir: broken };
    let (status, ready) = h.get_json("/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(ready["ready"], false);
    assert!(ready["catalogs"][0]["lastReloadError"].as_str().is_some_and(|e| e.contains("missing")));
    let (status, err) = h.get_json("/api/v1/catalogs/broken/packages").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(err["error"].as_str().unwrap().contains("no loaded snapshot"));

    let mut client = RegistryClient::connect(format!("http://{}", h.server.grpc_addrs["broken"])).await.unwrap();
    let err = client.get_package(pb::GetPackageRequest { name: "x".into() }).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unavailable);

    use tonic_health::pb::health_client::HealthClient;
    let mut health = HealthClient::new(
        Channel::from_shared(format!("http://{}", h.server.grpc_addrs["broken"])).unwrap().connect().await.unwrap(),
    );
    let resp = health.check(tonic_health::pb::HealthCheckRequest { service: "Registry".into() }).await.unwrap().into_inner();
    assert_eq!(resp.status, tonic_health::pb::health_check_response::ServingStatus::NotServing as i32);

    h.server.shutdown();
    tokio::time::timeout(Duration::from_secs(15), h.server.wait()).await.expect("shuts down").expect("clean exit");
}

#[tokio::test]
async fn serves_a_directory_of_real_bundles() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/bundles");
    let mut config = ServeConfig::new(vec![("operators".into(), dir.clone())]);
    config.http_addr = Some("127.0.0.1:0".parse().unwrap());
    config.grpc_addrs = vec![("operators".into(), "127.0.0.1:0".parse().unwrap())];
    config.reload_interval = None;
    let server = olm_registry::start(config).await.unwrap();
    let status = server.catalogs.get("operators").unwrap().status();
    assert!(status.last_error.is_none(), "{:?}", status.last_error);
    let h = Harness { server, _dir: tempfile::tempdir().unwrap(), catalog_dir: dir };

    let (status, pkg) = h.get_json("/api/v1/catalogs/operators/packages/etcd").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(pkg["defaultChannel"], "singlenamespace-alpha");
    let heads: Vec<&str> = pkg["channels"].as_array().unwrap().iter().map(|c| c["currentCSV"].as_str().unwrap()).collect();
    assert_eq!(heads, ["etcdoperator.v0.6.1", "etcdoperator.v0.9.4-clusterwide", "etcdoperator.v0.9.4"]);

    let mut client = RegistryClient::connect(format!("http://{}", h.server.grpc_addrs["operators"])).await.unwrap();
    let b = client
        .get_bundle(pb::GetBundleRequest {
            pkg_name: "etcd".into(),
            channel_name: "clusterwide-alpha".into(),
            csv_name: "etcdoperator.v0.9.2-clusterwide".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let csv: Value = serde_json::from_str(&b.csv_json).unwrap();
    assert_eq!(csv["spec"]["replaces"], "etcdoperator.v0.9.0");
    assert_eq!(b.object.len(), 4, "CSV and three CRDs");
}

#[tokio::test]
async fn grpc_reflection_lists_the_registry_service() {
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    let h = Harness::start().await;
    let channel = Channel::from_shared(format!("http://{}", h.server.grpc_addrs["community"])).unwrap().connect().await.unwrap();
    let mut client = ServerReflectionClient::new(channel);
    let request = ServerReflectionRequest { host: String::new(), message_request: Some(MessageRequest::ListServices(String::new())) };
    let mut responses = client.server_reflection_info(futures::stream::iter([request])).await.unwrap().into_inner();
    let response = responses.message().await.unwrap().expect("one response");
    let Some(MessageResponse::ListServicesResponse(list)) = response.message_response else { panic!("unexpected {response:?}") };
    let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    assert!(names.contains(&"api.Registry".to_string()), "{names:?}");
    assert!(names.contains(&"grpc.health.v1.Health".to_string()), "{names:?}");

    // grpcurl then asks for the file of a symbol: the descriptor must resolve.
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::FileContainingSymbol("api.Registry".into())),
    };
    let mut responses = client.server_reflection_info(futures::stream::iter([request])).await.unwrap().into_inner();
    let response = responses.message().await.unwrap().expect("one response");
    assert!(matches!(response.message_response, Some(MessageResponse::FileDescriptorResponse(ref f)) if !f.file_descriptor_proto.is_empty()));
}

#[tokio::test]
async fn package_icon_is_served_as_an_image() {
    let h = Harness::start().await;
    let (status, headers, body) = h.get("/api/v1/catalogs/community/packages/demo/icon", &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers.get("content-type").unwrap(), "image/svg+xml");
    assert!(std::str::from_utf8(&body).unwrap().starts_with("<svg"));
    let (status, headers, body) = h.get("/api/v1/catalogs/community/packages/etcd/icon", &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers.get("content-type").unwrap(), "image/png");
    assert!(body.starts_with(b"\x89PNG"), "PNG signature");
    let (status, _) = h.get_json("/api/v1/catalogs/community/packages/nope/icon").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn several_catalogs_share_http_and_get_one_grpc_server_each() {
    let fixture_dir = fixture();
    let bundles_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/bundles");
    let mut config = ServeConfig::new(vec![("community".into(), fixture_dir.clone()), ("operators".into(), bundles_dir)]);
    config.http_addr = Some("127.0.0.1:0".parse().unwrap());
    config.grpc_addrs =
        vec![("community".into(), "127.0.0.1:0".parse().unwrap()), ("operators".into(), "127.0.0.1:0".parse().unwrap())];
    config.reload_interval = None;
    let server = olm_registry::start(config).await.unwrap();
    let h = Harness { server, _dir: tempfile::tempdir().unwrap(), catalog_dir: fixture_dir };

    let (_, list) = h.get_json("/api/v1/catalogs").await;
    let names: Vec<&str> = list["catalogs"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["community", "operators"]);

    for (catalog, expected) in [("community", vec!["demo", "etcd"]), ("operators", vec!["etcd"])] {
        let mut client = RegistryClient::connect(format!("http://{}", h.server.grpc_addrs[catalog])).await.unwrap();
        let got: Vec<String> =
            collect(client.list_packages(pb::ListPackageRequest {}).await.unwrap().into_inner()).await.into_iter().map(|p| p.name).collect();
        assert_eq!(got, expected, "gRPC of {catalog} serves only its own catalog");
    }

    let bad = ServeConfig {
        grpc_addrs: vec![("missing".into(), "127.0.0.1:0".parse().unwrap())],
        ..ServeConfig::new(vec![("community".into(), fixture())])
    };
    let err = olm_registry::start(bad).await.err().expect("unknown catalog in gRPC addresses is refused");
    assert!(err.to_string().contains("\"missing\""), "{err}");
}
