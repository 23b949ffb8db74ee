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
use olm_catalog::{Catalog, Package};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use tower_http::compression::CompressionLayer;
use tower_http::compression::predicate::{NotForContentType, Predicate, SizeAbove};
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;

use olm_registry_api::convert;
use crate::store::{CatalogSet, CatalogSnapshot, ServedCatalog};

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
    let names: Vec<&str> = state.catalogs.names().collect();
    let mut err = ApiError::new(
        StatusCode::NOT_FOUND,
        format!(
            "catalog {name:?} not found; this server serves {} catalog(s): {}; list them at /api/v1/catalogs",
            names.len(),
            names.join(", ")
        ),
    )
    .with("catalog", name)
    .with("catalogs", names.clone());
    let close = suggestions(name, names.into_iter());
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
            "package {package:?} not found in catalog {catalog_name:?}; it has {count} package(s), list them at /api/v1/catalogs/{catalog_name}/packages"
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
    out.insert("directory".into(), Value::String(catalog.dir.display().to_string()));
    out.insert("ready".into(), Value::Bool(snapshot.is_some()));
    if let Some(s) = &snapshot {
        let (packages, channels, bundles) = s.catalog.counts();
        out.insert("packages".into(), packages.into());
        out.insert("channels".into(), channels.into());
        out.insert("bundles".into(), bundles.into());
        out.insert("contentHash".into(), Value::String(s.content_hash.clone()));
        out.insert("loadedAt".into(), Value::String(httpdate::fmt_http_date(s.loaded_at)));
        out.insert("loadMillis".into(), json!(s.load_duration.as_secs_f64() * 1000.0));
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
    let catalogs: Vec<Value> = state.catalogs.iter().map(|c| catalog_status(c)).collect();
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

// ---- catalogd-compatible endpoints -------------------------------------------

/// catalogd accepts only DNS-1123 subdomain catalog names.
fn dns1123_subdomain_error(name: &str) -> Option<String> {
    if name.is_empty() || name.len() > 253 {
        return Some("must be 1 to 253 characters".into());
    }
    for label in name.split('.') {
        let bytes = label.as_bytes();
        let ok = !bytes.is_empty()
            && bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
            && bytes[0].is_ascii_alphanumeric()
            && bytes[bytes.len() - 1].is_ascii_alphanumeric();
        if !ok {
            return Some("must consist of lower case alphanumeric characters, '-' or '.', and start and end with an alphanumeric character".into());
        }
    }
    None
}

fn catalogd_catalog(state: &AppState, name: &str) -> Result<Arc<CatalogSnapshot>, ApiError> {
    if let Some(why) = dns1123_subdomain_error(name) {
        return Err(ApiError::new(StatusCode::BAD_REQUEST, format!("invalid catalog name {name:?}: {why}")).with("catalog", name));
    }
    served(state, name).map(|(_, s)| s)
}

async fn catalogd_all(State(state): State<AppState>, Path(name): Path<String>, headers: HeaderMap, uri: Uri) -> Response {
    let snapshot = match catalogd_catalog(&state, &name) {
        Ok(s) => s,
        Err(e) => return e.into_response(),
    };
    let count = snapshot.catalog.all_metas().len();
    let len = snapshot.all_len;
    jsonl_response(&headers, &uri, snapshot, MetaSelection::All { count }, len)
}

#[derive(Debug, Default)]
struct MetasQuery {
    schema: Option<String>,
    package: Option<String>,
    name: Option<String>,
}

fn parse_metas_query(raw: &HashMap<String, String>) -> Result<MetasQuery, ApiError> {
    let mut q = MetasQuery::default();
    for (key, value) in raw {
        let value = (!value.is_empty()).then(|| value.clone());
        match key.as_str() {
            "schema" => q.schema = value,
            "package" => q.package = value,
            "name" => q.name = value,
            other => {
                return Err(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    format!("unknown query parameter {other:?}; the metas endpoint accepts only schema, package and name"),
                )
                .with("parameter", other))
            }
        }
    }
    Ok(q)
}

async fn catalogd_metas(
    State(state): State<AppState>,
    Path(name): Path<String>,
    Query(raw): Query<HashMap<String, String>>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let snapshot = match catalogd_catalog(&state, &name) {
        Ok(s) => s,
        Err(e) => return e.into_response(),
    };
    let query = match parse_metas_query(&raw) {
        Ok(q) => q,
        Err(e) => return e.into_response(),
    };
    // Exact-match filters, empty = any (catalogd); blobs are referenced by position so
    // the body streams them from the snapshot without copying the catalog.
    let mut indices = Vec::new();
    let mut len = 0u64;
    for (i, meta) in snapshot.catalog.all_metas().iter().enumerate() {
        let matches = query.schema.as_deref().is_none_or(|s| meta.schema == s)
            && query.package.as_deref().is_none_or(|p| meta.package == p)
            && query.name.as_deref().is_none_or(|n| meta.name == n);
        if matches {
            indices.push(i as u32);
            len += meta.blob.len() as u64;
        }
    }
    jsonl_response(&headers, &uri, snapshot.clone(), MetaSelection::Some(indices), len)
}

/// Which blobs a JSON-lines body carries.
enum MetaSelection {
    All { count: usize },
    Some(Vec<u32>),
}

fn jsonl_response(headers: &HeaderMap, uri: &Uri, snapshot: Arc<CatalogSnapshot>, selection: MetaSelection, len: u64) -> Response {
    let etag = snapshot_etag(&snapshot, uri);
    let loaded_at = snapshot.loaded_at;
    if none_match(headers, &etag) || not_modified_since(headers, loaded_at) {
        return not_modified(&etag, Some(loaded_at));
    }
    let indices = match selection {
        MetaSelection::All { count } => (0..count as u32).collect(),
        MetaSelection::Some(v) => v,
    };
    let body = JsonLinesBody { snapshot, indices, next: 0, remaining: len };
    let mut resp = Response::new(Body::new(body));
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/jsonl"));
    insert_header(&mut resp, header::ETAG, &etag);
    insert_header(&mut resp, header::LAST_MODIFIED, &httpdate::fmt_http_date(loaded_at));
    resp
}

/// Streams canonical blobs of a snapshot in chunks of about 64 KiB; its exact size is
/// known up front, so clients get a Content-Length.
struct JsonLinesBody {
    snapshot: Arc<CatalogSnapshot>,
    indices: Vec<u32>,
    next: usize,
    remaining: u64,
}

const CHUNK_BYTES: usize = 64 * 1024;

impl http_body::Body for JsonLinesBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        if this.next >= this.indices.len() {
            return Poll::Ready(None);
        }
        let metas = this.snapshot.catalog.all_metas();
        let mut chunk = BytesMut::with_capacity(CHUNK_BYTES);
        while this.next < this.indices.len() && (chunk.is_empty() || chunk.len() < CHUNK_BYTES) {
            if let Some(meta) = metas.get(this.indices[this.next] as usize) {
                chunk.extend_from_slice(meta.blob.text().as_bytes());
            }
            this.next += 1;
        }
        this.remaining = this.remaining.saturating_sub(chunk.len() as u64);
        Poll::Ready(Some(Ok(http_body::Frame::data(chunk.freeze()))))
    }

    fn is_end_stream(&self) -> bool {
        self.next >= self.indices.len()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.remaining)
    }
}

// ---- our API -----------------------------------------------------------------

async fn list_catalogs(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let catalogs: Vec<Value> = state
        .catalogs
        .iter()
        .map(|c| {
            let mut v = catalog_status(c);
            if let Value::Object(map) = &mut v {
                map.insert("links".into(), catalog_links(&c.name));
            }
            v
        })
        .collect();
    hashed_json(&headers, &json!({"catalogs": catalogs}))
}

fn catalog_links(name: &str) -> Value {
    json!({
        "packages": format!("/api/v1/catalogs/{name}/packages"),
        "all": format!("/catalogs/{name}/api/v1/all"),
        "metas": format!("/catalogs/{name}/api/v1/metas"),
    })
}

async fn get_catalog(State(state): State<AppState>, Path(name): Path<String>, headers: HeaderMap) -> Response {
    match state.catalogs.get(&name) {
        Some(c) => {
            let mut v = catalog_status(c);
            if let Value::Object(map) = &mut v {
                map.insert("links".into(), catalog_links(&c.name));
            }
            hashed_json(&headers, &v)
        }
        None => unknown_catalog(&state, &name).into_response(),
    }
}

/// Head bundle of a package's default channel (else of its first channel) and its CSV.
fn package_csv(pkg: &Package) -> Option<Value> {
    let bundle = pkg.default_head().or_else(|| {
        pkg.channels().iter().find_map(|c| c.head()).and_then(|h| pkg.bundle(&h.name))
    })?;
    convert::bundle_csv(pkg, bundle).map(|(csv, _)| csv)
}

async fn list_packages(State(state): State<AppState>, Path(name): Path<String>, headers: HeaderMap, uri: Uri) -> Response {
    let snapshot = match served(&state, &name) {
        Ok((_, s)) => s,
        Err(e) => return e.into_response(),
    };
    catalog_json(&headers, &uri, &snapshot, || {
        let packages: Vec<Value> = snapshot
            .catalog
            .packages()
            .iter()
            .map(|pkg| {
                let csv = package_csv(pkg);
                let spec = csv.as_ref().and_then(|c| c.get("spec"));
                let mut out = Map::new();
                out.insert("name".into(), Value::String(pkg.name.clone()));
                out.insert(
                    "displayName".into(),
                    spec.and_then(|s| s.get("displayName")).cloned().unwrap_or_else(|| Value::String(String::new())),
                );
                out.insert("defaultChannel".into(), Value::String(pkg.default_channel.clone()));
                let head = pkg.default_channel().and_then(|c| c.head()).map(|h| h.name.clone());
                out.insert("currentCSV".into(), head.map(Value::String).unwrap_or(Value::Null));
                if let Some(b) = pkg.default_head() {
                    out.insert("version".into(), Value::String(convert::bundle_version(b)));
                }
                out.insert("provider".into(), spec.and_then(|s| s.get("provider")).cloned().unwrap_or_else(|| json!({})));
                out.insert("channels".into(), pkg.channels().iter().map(|c| Value::String(c.name.clone())).collect());
                if let Some(d) = &pkg.deprecation {
                    out.insert("deprecation".into(), json!({"message": d}));
                }
                out.insert("link".into(), Value::String(format!("/api/v1/catalogs/{name}/packages/{}", pkg.name)));
                Value::Object(out)
            })
            .collect();
        Ok(json!({"catalog": name, "packages": packages}))
    })
}

async fn get_package(State(state): State<AppState>, Path((name, package)): Path<(String, String)>, headers: HeaderMap, uri: Uri) -> Response {
    let snapshot = match served(&state, &name) {
        Ok((_, s)) => s,
        Err(e) => return e.into_response(),
    };
    catalog_json(&headers, &uri, &snapshot, || {
        let catalog = &snapshot.catalog;
        let pkg = catalog.package(&package).ok_or_else(|| unknown_package(&name, catalog, &package))?;
        Ok(package_manifest(&name, pkg))
    })
}

/// The package icon as an image (like packageserver's `icon` subresource): the
/// `olm.package` icon, else the first icon of the default channel head's CSV.
async fn get_icon(State(state): State<AppState>, Path((name, package)): Path<(String, String)>, headers: HeaderMap, uri: Uri) -> Response {
    use base64::Engine as _;
    let snapshot = match served(&state, &name) {
        Ok((_, s)) => s,
        Err(e) => return e.into_response(),
    };
    let catalog = &snapshot.catalog;
    let Some(pkg) = catalog.package(&package) else {
        return unknown_package(&name, catalog, &package).into_response();
    };
    let icon = pkg.icon.as_ref().map(|i| (i.base64data.clone(), i.mediatype.clone())).or_else(|| {
        let csv = package_csv(pkg)?;
        let first = csv.pointer("/spec/icon/0")?;
        Some((first.get("base64data")?.as_str()?.to_string(), first.get("mediatype")?.as_str()?.to_string()))
    });
    let decoded = icon.and_then(|(data, media)| {
        let compact: String = data.chars().filter(|c| !c.is_ascii_whitespace()).collect();
        base64::engine::general_purpose::STANDARD.decode(compact).ok().map(|bytes| (bytes, media))
    });
    let Some((bytes, media)) = decoded.filter(|(b, _)| !b.is_empty()) else {
        return ApiError::new(StatusCode::NOT_FOUND, format!("package {package:?} in catalog {name:?} has no icon"))
            .with("catalog", name.as_str())
            .with("package", package.as_str())
            .into_response();
    };
    let etag = snapshot_etag(&snapshot, &uri);
    if none_match(&headers, &etag) {
        return not_modified(&etag, Some(snapshot.loaded_at));
    }
    let mut resp = Response::new(Body::from(bytes));
    let media = if media.is_empty() { "application/octet-stream".to_string() } else { media };
    insert_header(&mut resp, header::CONTENT_TYPE, &media);
    insert_header(&mut resp, header::ETAG, &etag);
    resp
}

/// The PackageManifest-like view of a package: packageserver's `status` fields.
fn package_manifest(catalog_name: &str, pkg: &Package) -> Value {
    let mut channels = Vec::new();
    let mut provider: Option<Value> = None;
    // Channels often share a head; its description (CRD descriptors can be megabytes)
    // is built once.
    let mut descriptions: HashMap<&str, Value> = HashMap::new();
    for ch in pkg.channels() {
        let head = ch.head().and_then(|h| pkg.bundle(&h.name));
        let description = match head {
            Some(b) => descriptions
                .entry(b.name.as_str())
                .or_insert_with(|| {
                    convert::bundle_csv(pkg, b).map(|(c, _)| convert::csv_description(&c, true)).unwrap_or_else(|| json!({}))
                })
                .clone(),
            None => json!({}),
        };
        if (ch.name == pkg.default_channel || provider.is_none())
            && let Some(p) = description.get("provider") {
                provider = Some(p.clone());
            }
        let mut entries: Vec<(&olm_catalog::Bundle, Value)> = ch
            .entries()
            .iter()
            .filter_map(|e| pkg.bundle(&e.name))
            .filter(|b| !b.has_deprecated_property())
            .map(|b| {
                let mut entry = Map::new();
                entry.insert("name".into(), Value::String(b.name.clone()));
                entry.insert("version".into(), Value::String(convert::bundle_version(b)));
                if let Some(d) = &b.deprecation {
                    entry.insert("deprecation".into(), json!({"message": d}));
                }
                (b, Value::Object(entry))
            })
            .collect();
        // Newest first, as packageserver lists them.
        entries.sort_by(|a, b| b.0.cmp_version(a.0));
        let mut out = Map::new();
        out.insert("name".into(), Value::String(ch.name.clone()));
        out.insert("currentCSV".into(), Value::String(ch.head().map(|h| h.name.clone()).unwrap_or_default()));
        out.insert("currentCSVDesc".into(), description);
        if let Some(d) = &ch.deprecation {
            out.insert("deprecation".into(), json!({"message": d}));
        }
        out.insert("entries".into(), Value::Array(entries.into_iter().map(|(_, v)| v).collect()));
        channels.push(Value::Object(out));
    }
    let mut out = Map::new();
    out.insert("name".into(), Value::String(pkg.name.clone()));
    out.insert("packageName".into(), Value::String(pkg.name.clone()));
    out.insert("catalog".into(), Value::String(catalog_name.to_string()));
    out.insert("defaultChannel".into(), Value::String(pkg.default_channel.clone()));
    out.insert("provider".into(), provider.unwrap_or_else(|| json!({})));
    if let Some(d) = &pkg.deprecation {
        out.insert("deprecation".into(), json!({"message": d}));
    }
    out.insert("channels".into(), Value::Array(channels));
    Value::Object(out)
}

async fn get_bundle(
    State(state): State<AppState>,
    Path((name, bundle)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let snapshot = match served(&state, &name) {
        Ok((_, s)) => s,
        Err(e) => return e.into_response(),
    };
    catalog_json(&headers, &uri, &snapshot, || {
        let catalog = &snapshot.catalog;
        let wanted_package = query.get("package").filter(|p| !p.is_empty());
        if let Some(p) = wanted_package
            && catalog.package(p).is_none() {
                return Err(unknown_package(&name, catalog, p));
            }
        let matches: Vec<&olm_catalog::Bundle> =
            catalog.bundles_named(&bundle).filter(|b| wanted_package.is_none_or(|p| b.package == *p)).collect();
        match matches.as_slice() {
            [] => {
                let mut err = ApiError::new(
                    StatusCode::NOT_FOUND,
                    format!(
                        "bundle {bundle:?} not found in catalog {name:?}; bundle names are listed per channel at /api/v1/catalogs/{name}/packages/<package>"
                    ),
                )
                .with("catalog", name.as_str())
                .with("bundle", bundle.as_str());
                let close = suggestions(&bundle, catalog.bundles().map(|b| b.name.as_str()));
                if !close.is_empty() {
                    err = err.with("didYouMean", close);
                }
                Err(err)
            }
            [one] => {
                let pkg = catalog.package(&one.package).ok_or_else(|| unknown_package(&name, catalog, &one.package))?;
                Ok(bundle_view(pkg, one))
            }
            several => {
                let packages: Vec<&str> = several.iter().map(|b| b.package.as_str()).collect();
                Err(ApiError::new(
                    StatusCode::CONFLICT,
                    format!("bundle name {bundle:?} exists in several packages ({}); add ?package=<name>", packages.join(", ")),
                )
                .with("packages", packages))
            }
        }
    })
}

/// A bundle with its channel memberships, properties and manifests.
fn bundle_view(pkg: &Package, bundle: &olm_catalog::Bundle) -> Value {
    let channels: Vec<Value> = pkg
        .channels()
        .iter()
        .filter_map(|ch| ch.entry(&bundle.name).map(|e| (ch, e)))
        .map(|(ch, e)| {
            let mut out = Map::new();
            out.insert("name".into(), Value::String(ch.name.clone()));
            out.insert("head".into(), Value::Bool(ch.head().is_some_and(|h| h.name == bundle.name)));
            if let Some(r) = &e.replaces {
                out.insert("replaces".into(), Value::String(r.clone()));
            }
            if !e.skips.is_empty() {
                out.insert("skips".into(), e.skips.clone().into());
            }
            if let Some(r) = &e.skip_range {
                out.insert("skipRange".into(), Value::String(r.clone()));
            }
            Value::Object(out)
        })
        .collect();
    let properties: Vec<Value> = bundle.properties.iter().map(|p| p.to_json()).collect();
    let related: Vec<Value> = bundle.related_images.iter().map(|r| json!({"name": r.name, "image": r.image})).collect();
    let mut out = Map::new();
    out.insert("name".into(), Value::String(bundle.name.clone()));
    out.insert("package".into(), Value::String(bundle.package.clone()));
    out.insert("version".into(), Value::String(convert::bundle_version(bundle)));
    if let Some(r) = &bundle.release {
        out.insert("release".into(), Value::String(r.clone()));
    }
    out.insert("image".into(), Value::String(bundle.image.clone()));
    out.insert("channels".into(), Value::Array(channels));
    if let Some(d) = &bundle.deprecation {
        out.insert("deprecation".into(), json!({"message": d}));
    }
    out.insert("properties".into(), Value::Array(properties));
    out.insert("relatedImages".into(), Value::Array(related));
    match convert::bundle_csv(pkg, bundle) {
        Some((csv, synthesized)) => {
            out.insert("csv".into(), csv);
            out.insert("csvSynthesized".into(), Value::Bool(synthesized));
        }
        None => {
            out.insert("csv".into(), Value::Null);
        }
    }
    out.insert("objects".into(), Value::Array(bundle.objects.clone()));
    Value::Object(out)
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

    #[test]
    fn catalog_names_follow_dns1123_subdomain() {
        assert!(dns1123_subdomain_error("community").is_none());
        assert!(dns1123_subdomain_error("a.b-c").is_none());
        assert!(dns1123_subdomain_error("Bad").is_some());
        assert!(dns1123_subdomain_error("-x").is_some());
        assert!(dns1123_subdomain_error("").is_some());
    }
}
