//! HTTP API: catalogd-compatible catalog content, our package/bundle views, health,
//! readiness, metrics and the OpenAPI document.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use axum::Router;
use axum::body::Body;
use axum::extract::{MatchedPath, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use bytes::{Bytes, BytesMut};
use olm_catalog::quote::quoted;
use olm_catalog::{Catalog, Package};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use tower_http::compression::CompressionLayer;
use tower_http::compression::predicate::{NotForContentType, Predicate, SizeAbove};
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;

use olm_registry_api::convert;
use crate::store::{CatalogSet, CatalogSnapshot, ServedCatalog};

mod api;
mod catalogd;

use api::{get_bundle, get_catalog, get_icon, get_package, list_catalogs, list_packages};
use catalogd::{catalogd_all, catalogd_metas};

/// Limits applied to every HTTP request.
#[derive(Debug, Clone)]
pub struct HttpLimits {
    /// Largest request body accepted (every endpoint is read-only, so this is small).
    pub max_body_bytes: usize,
    /// Time allowed to produce the response headers.
    pub request_timeout: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits { max_body_bytes: 64 * 1024, request_timeout: Duration::from_secs(30) }
    }
}

#[derive(Clone)]
struct AppState {
    catalogs: CatalogSet,
}

/// Responses smaller than this are not worth compressing (gzhttp's default in catalogd).
const MIN_GZIP_BYTES: u64 = 1024;

/// The HTTP application: every route with its middleware.
pub fn router(catalogs: CatalogSet, limits: &HttpLimits) -> Router {
    let state = AppState { catalogs };
    let compress_when = SizeAbove::new(MIN_GZIP_BYTES).and(NotForContentType::GRPC).and(NotForContentType::IMAGES);
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(openapi))
        .route("/catalogs/{catalog}/api/v1/all", get(catalogd_all))
        .route("/catalogs/{catalog}/api/v1/metas", get(catalogd_metas))
        .route("/api/v1/catalogs", get(list_catalogs))
        .route("/api/v1/catalogs/{catalog}", get(get_catalog))
        .route("/api/v1/catalogs/{catalog}/packages", get(list_packages))
        .route("/api/v1/catalogs/{catalog}/packages/{package}", get(get_package))
        .route("/api/v1/catalogs/{catalog}/packages/{package}/icon", get(get_icon))
        .route("/api/v1/catalogs/{catalog}/bundles/{bundle}", get(get_bundle))
        .route_layer(middleware::from_fn_with_state(state.clone(), track_metrics))
        .fallback(not_found_route)
        .with_state(state)
        .layer(RequestBodyLimitLayer::new(limits.max_body_bytes))
        .layer(TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, limits.request_timeout))
        .layer(CompressionLayer::new().gzip(true).no_br().no_deflate().no_zstd().compress_when(compress_when))
        .layer(middleware::map_response(etag_for_encoding))
}

// ---- errors -----------------------------------------------------------------

/// A JSON error answer: `{"error": "...", ...details}`.
#[derive(Debug)]
struct ApiError {
    status: StatusCode,
    body: Map<String, Value>,
}

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        let mut body = Map::new();
        body.insert("error".into(), Value::String(message.into()));
        ApiError { status, body }
    }
    fn with(mut self, key: &str, value: impl Into<Value>) -> ApiError {
        self.body.insert(key.into(), value.into());
        self
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut resp = (self.status, axum::Json(Value::Object(self.body))).into_response();
        resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        resp
    }
}

/// Up to five known names closest to `wanted` (substring or small edit distance).
fn suggestions<'a>(wanted: &str, known: impl Iterator<Item = &'a str>) -> Vec<String> {
    let wanted_lower = wanted.to_lowercase();
    let mut scored: Vec<(usize, &str)> = known
        .filter_map(|k| {
            let lower = k.to_lowercase();
            let distance = edit_distance(&wanted_lower, &lower);
            let close = distance <= 2.max(wanted.len() / 4);
            let contains = !wanted_lower.is_empty() && (lower.contains(&wanted_lower) || wanted_lower.contains(&lower));
            (close || contains).then_some((distance, k))
        })
        .collect();
    scored.sort();
    scored.into_iter().take(5).map(|(_, k)| k.to_string()).collect()
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let current = row[j + 1];
            row[j + 1] = if ca == *cb { prev } else { 1 + prev.min(row[j]).min(row[j + 1]) };
            prev = current;
        }
    }
    row[b.len()]
}

fn unknown_catalog(state: &AppState, name: &str) -> ApiError {
    let names = state.catalogs.names();
    let mut err = ApiError::new(
        StatusCode::NOT_FOUND,
        format!(
            "catalog {} not found; this server serves {} catalog(s): {}; list them at /api/v1/catalogs",
            quoted(name),
            names.len(),
            names.join(", ")
        ),
    )
    .with("catalog", name)
    .with("catalogs", names.clone());
    let close = suggestions(name, names.iter().map(String::as_str));
    if !close.is_empty() {
        err = err.with("didYouMean", close);
    }
    err
}

/// The catalog and its current snapshot, or the 404/503 to answer.
fn served(state: &AppState, name: &str) -> Result<(Arc<ServedCatalog>, Arc<CatalogSnapshot>), ApiError> {
    let catalog = state.catalogs.get(name).ok_or_else(|| unknown_catalog(state, name))?;
    match catalog.snapshot() {
        Some(snapshot) => Ok((catalog.clone(), snapshot)),
        None => {
            let status = catalog.status();
            let why = status.last_error.unwrap_or_else(|| "the first load has not finished".into());
            Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("catalog {name:?} has no loaded snapshot yet: {why}"),
            )
            .with("catalog", name))
        }
    }
}

fn unknown_package(catalog_name: &str, catalog: &Catalog, package: &str) -> ApiError {
    let count = catalog.packages().len();
    let mut err = ApiError::new(
        StatusCode::NOT_FOUND,
        format!(
            "package {} not found in catalog {catalog_name:?}; it has {count} package(s), list them at /api/v1/catalogs/{catalog_name}/packages",
            quoted(package)
        ),
    )
    .with("catalog", catalog_name)
    .with("package", package)
    .with("packageCount", count);
    let close = suggestions(package, catalog.packages().iter().map(|p| p.name.as_str()));
    if !close.is_empty() {
        err = err.with("didYouMean", close);
    }
    err
}

async fn not_found_route(uri: Uri) -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, format!("no endpoint at {}; the endpoints are described at /openapi.json", uri.path()))
        .with("path", uri.path())
}

// ---- metrics, ETags, conditional requests -----------------------------------

async fn track_metrics(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = request.extensions().get::<MatchedPath>().map(|p| p.as_str().to_string()).unwrap_or_else(|| "unmatched".into());
    let method = request.method().to_string();
    let response = next.run(request).await;
    state.catalogs.metrics.observe_http(&route, &method, response.status().as_u16(), started.elapsed());
    response
}

/// A strong ETag names exact bytes, so a gzip-encoded variant gets its own tag
/// (`"<tag>-gzip"`); If-None-Match accepts either form.
async fn etag_for_encoding(mut response: Response) -> Response {
    let gzip = response.headers().get(header::CONTENT_ENCODING).is_some_and(|v| v.as_bytes() == b"gzip");
    if gzip
        && let Some(tag) = response.headers().get(header::ETAG).and_then(|v| v.to_str().ok()) {
            let tagged = format!("{}-gzip\"", tag.trim_end_matches('"'));
            if let Ok(value) = HeaderValue::from_str(&tagged) {
                response.headers_mut().insert(header::ETAG, value);
            }
        }
    response
}

/// Strong ETag of a response that is a pure function of the snapshot and the request URI.
fn snapshot_etag(snapshot: &CatalogSnapshot, uri: &Uri) -> String {
    let mut hasher = Sha256::new();
    hasher.update(snapshot.content_hash.as_bytes());
    hasher.update([0]);
    hasher.update(uri.path_and_query().map(|p| p.as_str()).unwrap_or("").as_bytes());
    format!("\"{}\"", &hex::encode(hasher.finalize())[..32])
}

fn body_etag(body: &[u8]) -> String {
    format!("\"{}\"", &hex::encode(Sha256::digest(body))[..32])
}

/// Whether If-None-Match names `etag` (or `*`).
fn none_match(headers: &HeaderMap, etag: &str) -> bool {
    let Some(value) = headers.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let bare = etag.trim_matches('"');
    value.split(',').map(str::trim).any(|candidate| {
        let candidate = candidate.trim_start_matches("W/").trim_matches('"');
        candidate == "*" || candidate == bare || candidate.strip_suffix("-gzip") == Some(bare)
    })
}

/// If-Modified-Since is honoured only when If-None-Match is absent (RFC 9110).
fn not_modified_since(headers: &HeaderMap, modified: SystemTime) -> bool {
    if headers.contains_key(header::IF_NONE_MATCH) {
        return false;
    }
    let Some(since) = headers.get(header::IF_MODIFIED_SINCE).and_then(|v| v.to_str().ok()).and_then(|s| httpdate::parse_http_date(s).ok())
    else {
        return false;
    };
    // HTTP dates have one-second resolution.
    let modified_secs = modified.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let since_secs = since.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    modified_secs <= since_secs
}

fn not_modified(etag: &str, last_modified: Option<SystemTime>) -> Response {
    let mut resp = StatusCode::NOT_MODIFIED.into_response();
    insert_header(&mut resp, header::ETAG, etag);
    if let Some(t) = last_modified {
        insert_header(&mut resp, header::LAST_MODIFIED, &httpdate::fmt_http_date(t));
    }
    resp
}

fn insert_header(resp: &mut Response, name: header::HeaderName, value: &str) {
    if let Ok(v) = HeaderValue::from_str(value) {
        resp.headers_mut().insert(name, v);
    }
}

/// A JSON answer for a catalog-scoped endpoint, with ETag/Last-Modified, answering
/// 304 without building the body when the client's copy is current.
fn catalog_json(headers: &HeaderMap, uri: &Uri, snapshot: &CatalogSnapshot, build: impl FnOnce() -> Result<Value, ApiError>) -> Response {
    let etag = snapshot_etag(snapshot, uri);
    if none_match(headers, &etag) || not_modified_since(headers, snapshot.loaded_at) {
        return not_modified(&etag, Some(snapshot.loaded_at));
    }
    let key = uri.path_and_query().map(|p| p.as_str()).unwrap_or("");
    let body = match snapshot.responses.get(key) {
        Some(body) => body,
        None => match build() {
            Ok(value) => {
                let body = Bytes::from(serde_json::to_vec(&value).unwrap_or_default());
                snapshot.responses.put(key, body.clone());
                body
            }
            Err(e) => return e.into_response(),
        },
    };
    let mut resp = Response::new(Body::from(body));
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    insert_header(&mut resp, header::ETAG, &etag);
    insert_header(&mut resp, header::LAST_MODIFIED, &httpdate::fmt_http_date(snapshot.loaded_at));
    resp
}

/// JSON whose ETag is the hash of the body itself (for answers spanning catalogs).
fn hashed_json(headers: &HeaderMap, value: &Value) -> Response {
    let body = serde_json::to_vec(value).unwrap_or_default();
    let etag = body_etag(&body);
    if none_match(headers, &etag) {
        return not_modified(&etag, None);
    }
    let mut resp = Response::new(Body::from(body));
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    insert_header(&mut resp, header::ETAG, &etag);
    resp
}

// ---- health, readiness, metrics, OpenAPI ------------------------------------

async fn healthz() -> &'static str {
    "ok\n"
}

fn catalog_status(catalog: &ServedCatalog) -> Value {
    let status = catalog.status();
    let snapshot = catalog.snapshot();
    let mut out = Map::new();
    out.insert("name".into(), Value::String(catalog.name.clone()));
    if let Some(dir) = &catalog.dir {
        out.insert("directory".into(), Value::String(dir.display().to_string()));
    }
    out.insert("ready".into(), Value::Bool(snapshot.is_some()));
    if let Some(s) = &snapshot {
        let (packages, channels, bundles) = s.catalog.counts();
        out.insert("packages".into(), packages.into());
        out.insert("channels".into(), channels.into());
        out.insert("bundles".into(), bundles.into());
        out.insert("contentHash".into(), Value::String(s.content_hash.clone()));
        out.insert("loadedAt".into(), Value::String(httpdate::fmt_http_date(s.loaded_at)));
        out.insert("loadMillis".into(), json!(s.load_duration.as_secs_f64() * 1000.0));
        let left_out: Vec<Value> = s
            .left_out
            .iter()
            .map(|l| json!({"package": l.package, "problems": l.problems.iter().map(ToString::to_string).collect::<Vec<_>>()}))
            .collect();
        out.insert("leftOutPackages".into(), Value::Array(left_out));
        out.insert("problems".into(), json!(s.unattributed));
    }
    if let Some(t) = status.last_success_at {
        out.insert("lastSuccessfulReload".into(), Value::String(httpdate::fmt_http_date(t)));
    }
    out.insert("lastReloadError".into(), status.last_error.map(Value::String).unwrap_or(Value::Null));
    if let Some(t) = status.last_error_at {
        out.insert("lastReloadErrorAt".into(), Value::String(httpdate::fmt_http_date(t)));
    }
    out.insert("reloadErrors".into(), status.errors.into());
    Value::Object(out)
}

async fn readyz(State(state): State<AppState>) -> Response {
    let ready = state.catalogs.all_loaded();
    let catalogs: Vec<Value> = state.catalogs.iter().map(|c| catalog_status(&c)).collect();
    let body = json!({"ready": ready, "catalogs": catalogs});
    let status = if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    let mut resp = (status, axum::Json(body)).into_response();
    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

async fn metrics(State(state): State<AppState>) -> Response {
    let mut resp = state.catalogs.metrics.encode().into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    resp
}

async fn openapi(headers: HeaderMap) -> Response {
    hashed_json(&headers, &crate::openapi::document())
}


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_and_suggestions() {
        assert_eq!(edit_distance("etcd", "etcd"), 0);
        assert_eq!(edit_distance("etc", "etcd"), 1);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        let known = ["etcd", "prometheus", "strimzi-kafka-operator"];
        assert_eq!(suggestions("etdc", known.iter().copied()), vec!["etcd".to_string()]);
        assert_eq!(suggestions("kafka", known.iter().copied()), vec!["strimzi-kafka-operator".to_string()]);
        assert!(suggestions("zzzzzzzz", known.iter().copied()).is_empty());
    }

    #[test]
    fn if_none_match_accepts_plain_gzip_and_star() {
        let mut headers = HeaderMap::new();
        headers.insert(header::IF_NONE_MATCH, HeaderValue::from_static("\"abc-gzip\""));
        assert!(none_match(&headers, "\"abc\""));
        headers.insert(header::IF_NONE_MATCH, HeaderValue::from_static("\"x\", W/\"abc\""));
        assert!(none_match(&headers, "\"abc\""));
        headers.insert(header::IF_NONE_MATCH, HeaderValue::from_static("*"));
        assert!(none_match(&headers, "\"abc\""));
        headers.insert(header::IF_NONE_MATCH, HeaderValue::from_static("\"abd\""));
        assert!(!none_match(&headers, "\"abc\""));
    }

}
