//! The HTTP API over a store filled from the etcd fixture catalog, as kube-apiserver's proxy
//! would call it (X-Remote-User headers), without a cluster.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use olm_packageserver::http::{AllowAll, Attributes, Authentication, AuthorizeFuture, Authorizer, FrontProxy, Identity, router};
use olm_packageserver::store::Store;
use serde_json::Value;
use tower::ServiceExt as _;

#[path = "support/fixture.rs"]
mod fixture;

fn store() -> Arc<Store> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/etcd");
    let (catalog, problems) = olm_catalog::load::load_fbc(&dir).expect("fixture loads");
    assert!(problems.is_empty());
    fixture::store_with(&catalog)
}

struct Response {
    status: StatusCode,
    headers: axum::http::HeaderMap,
    body: Vec<u8>,
}

impl Response {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
    fn warnings(&self) -> Vec<String> {
        self.headers.get_all("warning").iter().map(|v| v.to_str().unwrap_or_default().to_owned()).collect()
    }
}

async fn call_with(app: axum::Router, uri: &str, accept: Option<&str>, front_proxy: Option<bool>, user: Option<&str>) -> Response {
    let mut request = Request::builder().uri(uri);
    if let Some(a) = accept {
        request = request.header("accept", a);
    }
    if let Some(u) = user {
        request = request.header("x-remote-user", u).header("x-remote-group", "system:authenticated");
    }
    let mut request = request.body(Body::empty()).expect("request");
    if let Some(fp) = front_proxy {
        request.extensions_mut().insert(FrontProxy(fp));
    }
    let response = app.oneshot(request).await.expect("infallible");
    let status = response.status();
    let headers = response.headers().clone();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.expect("body").to_vec();
    Response { status, headers, body }
}

async fn call(uri: &str, accept: Option<&str>) -> Response {
    let app = router(store(), Arc::new(AllowAll), Authentication::RequestHeader);
    call_with(app, uri, accept, Some(true), Some("alice")).await
}

const BASE: &str = "/apis/packages.operators.coreos.com/v1";

#[tokio::test]
async fn list_in_a_namespace_shows_global_catalogs_there() {
    let r = call(&format!("{BASE}/namespaces/team-b/packagemanifests"), None).await;
    assert_eq!(r.status, StatusCode::OK);
    let list = r.json();
    assert_eq!(list["kind"], "PackageManifestList");
    assert_eq!(list["apiVersion"], "packages.operators.coreos.com/v1");
    let items = list["items"].as_array().expect("items");
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["metadata"]["name"], "etcd");
    assert_eq!(items[0]["metadata"]["namespace"], "team-b");
    assert_eq!(items[0]["status"]["catalogSourceNamespace"], "olm");
    assert_eq!(items[0]["status"]["defaultChannel"], "singlenamespace-alpha");
    let channels = items[0]["status"]["channels"].as_array().expect("channels");
    assert!(channels.iter().all(|c| c["currentCSVDesc"].get("icon").is_none()), "no icons in lists");
}

#[tokio::test]
async fn failing_catalog_gives_partial_results_and_a_warning() {
    let r = call(&format!("{BASE}/namespaces/team-a/packagemanifests"), None).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json()["items"].as_array().map(Vec::len), Some(1), "the global catalog still answers");
    let warnings = r.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].starts_with("299 - \"catalog team-a/broken cannot be read"), "{warnings:?}");
    // Namespaces that cannot see the broken catalog get no warning.
    assert!(call(&format!("{BASE}/namespaces/team-b/packagemanifests"), None).await.warnings().is_empty());
}

#[tokio::test]
async fn table_has_upstream_columns() {
    let r = call(&format!("{BASE}/namespaces/olm/packagemanifests"), Some("application/json;as=Table;v=v1;g=meta.k8s.io,application/json")).await;
    let table = r.json();
    assert_eq!(table["kind"], "Table");
    let columns: Vec<&str> = table["columnDefinitions"].as_array().expect("columns").iter().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(columns, ["Name", "Catalog", "Age"]);
    assert_eq!(table["rows"][0]["cells"][0], "etcd");
    assert_eq!(table["rows"][0]["cells"][1], "Community Operators");
    assert_eq!(table["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(table["rows"][0]["object"]["metadata"]["namespace"], "olm");
}

#[tokio::test]
async fn selectors_filter_and_bad_ones_are_rejected() {
    let names = |r: Response| -> Vec<String> {
        r.json()["items"].as_array().expect("items").iter().filter_map(|i| i["metadata"]["name"].as_str().map(str::to_owned)).collect()
    };
    let uri = |q: &str| format!("{BASE}/namespaces/olm/packagemanifests?{q}");
    assert_eq!(names(call(&uri("labelSelector=catalog%3Dcommunity"), None).await), ["etcd"]);
    assert_eq!(names(call(&uri("labelSelector=operatorframework.io%2Farch.amd64%3Dsupported"), None).await), ["etcd"]);
    assert!(names(call(&uri("labelSelector=catalog%3Dother"), None).await).is_empty());
    assert_eq!(names(call(&uri("fieldSelector=metadata.name%3Detcd"), None).await), ["etcd"]);
    assert!(names(call(&uri("fieldSelector=metadata.name%3Dnope"), None).await).is_empty());
    let bad = call(&uri("fieldSelector=status.packageName%3Detcd"), None).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert!(bad.json()["message"].as_str().unwrap_or_default().contains("field label not supported"));
    assert_eq!(call(&uri("labelSelector=a%20in%20b"), None).await.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn get_one_and_icons_only_on_request() {
    let r = call(&format!("{BASE}/namespaces/olm/packagemanifests/etcd"), None).await;
    assert_eq!(r.status, StatusCode::OK);
    let m = r.json();
    assert_eq!(m["kind"], "PackageManifest");
    assert!(m["status"]["channels"].as_array().expect("channels").iter().all(|c| c["currentCSVDesc"].get("icon").is_none()));
    let with = call(&format!("{BASE}/namespaces/olm/packagemanifests/etcd?icons=true"), None).await.json();
    assert!(with["status"]["channels"].as_array().expect("channels").iter().any(|c| c["currentCSVDesc"]["icon"][0]["mediatype"] == "image/png"));

    let icon = call(&format!("{BASE}/namespaces/olm/packagemanifests/etcd/icon"), None).await;
    assert_eq!(icon.status, StatusCode::OK);
    assert_eq!(icon.headers["content-type"], "image/png");
    assert!(icon.body.starts_with(b"\x89PNG"));
    assert!(icon.headers["etag"].to_str().unwrap_or_default().starts_with("\"etcd.singlenamespace-alpha.etcdoperator.v"));

    let missing = call(&format!("{BASE}/namespaces/olm/packagemanifests/nope"), None).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    let status = missing.json();
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "NotFound");
    assert_eq!(status["message"], "packagemanifests.packages.operators.coreos.com \"nope\" not found");
}

#[tokio::test]
async fn discovery_and_openapi() {
    let gl = call("/apis", None).await.json();
    assert_eq!(gl["groups"][0]["name"], "packages.operators.coreos.com");
    let rl = call(BASE, None).await.json();
    assert_eq!(rl["kind"], "APIResourceList");
    let resources = rl["resources"].as_array().expect("resources");
    assert_eq!(resources[0]["name"], "packagemanifests");
    assert_eq!(resources[0]["namespaced"], true);
    assert_eq!(resources[0]["verbs"], serde_json::json!(["get", "list"]));
    assert!(resources.iter().any(|r| r["name"] == "packagemanifests/icon"));
    let v2 = call("/openapi/v2", None).await.json();
    assert_eq!(v2["swagger"], "2.0");
    let defs = v2["definitions"].as_object().expect("definitions");
    assert!(defs.values().any(|d| d["x-kubernetes-group-version-kind"][0]["kind"] == "PackageManifest"));
    let v3 = call("/openapi/v3", None).await.json();
    let url = v3["paths"]["apis/packages.operators.coreos.com/v1"]["serverRelativeURL"].as_str().expect("v3 path").to_owned();
    assert_eq!(call(&url, None).await.json()["openapi"], "3.0.0");
}

#[tokio::test]
async fn unauthenticated_requests_are_refused_and_health_is_open() {
    let app = router(store(), Arc::new(AllowAll), Authentication::RequestHeader);
    let list = format!("{BASE}/namespaces/olm/packagemanifests");
    // Not from the front proxy: headers are not trusted.
    assert_eq!(call_with(app.clone(), &list, None, Some(false), Some("alice")).await.status, StatusCode::UNAUTHORIZED);
    // From the front proxy but without a user.
    assert_eq!(call_with(app.clone(), &list, None, Some(true), None).await.status, StatusCode::UNAUTHORIZED);
    assert_eq!(call_with(app.clone(), "/healthz", None, None, None).await.status, StatusCode::OK);
    assert_eq!(call_with(app, "/readyz", None, None, None).await.status, StatusCode::OK);
}

struct DenyAll;
impl Authorizer for DenyAll {
    fn authorize<'a>(&'a self, _: &'a Identity, _: &'a Attributes) -> AuthorizeFuture<'a> {
        Box::pin(async { Ok(false) })
    }
}

#[tokio::test]
async fn denied_requests_get_kubernetes_style_forbidden() {
    let app = router(store(), Arc::new(DenyAll), Authentication::RequestHeader);
    let r = call_with(app, &format!("{BASE}/namespaces/olm/packagemanifests/etcd"), None, Some(true), Some("bob")).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert_eq!(
        r.json()["message"],
        "packagemanifests.packages.operators.coreos.com \"etcd\" is forbidden: User \"bob\" cannot get resource \"packagemanifests\" in API group \"packages.operators.coreos.com\" in the namespace \"olm\""
    );
}

#[tokio::test]
async fn watch_is_refused_clearly() {
    let r = call(&format!("{BASE}/namespaces/olm/packagemanifests?watch=true"), None).await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
}
