//! The HTTP surface of the aggregated API: discovery, OpenAPI, list/get (JSON or
//! `meta.k8s.io` Table), the icon subresource, and health. No Kubernetes client here: identity
//! comes from the connection layer ([`Identity`] request extension) and decisions from an
//! [`Authorizer`].

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::SystemTime;

use axum::Router;
use axum::Extension;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use base64::Engine as _;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use olm_api::packages::v1::{API_VERSION, GROUP, PLURAL, PackageManifest, PackageManifestSpec, PackageManifestStatus, VERSION};
use serde_json::{Value, json};

use crate::selector::{parse_field_selector, parse_label_selector};
use crate::store::Store;

/// Who is asking, as the front proxy (kube-apiserver) told us.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Identity {
    /// `X-Remote-User`.
    pub user: String,
    /// `X-Remote-Group` (repeated).
    pub groups: Vec<String>,
    /// `X-Remote-Extra-<key>`.
    pub extra: HashMap<String, Vec<String>>,
}

/// Set on each request by the connection layer: whether the peer proved it is the front proxy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrontProxy(pub bool);

/// What a request wants to do, for authorization.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Attributes {
    /// `get` or `list`.
    pub verb: &'static str,
    /// Namespace, empty for a cluster-wide list.
    pub namespace: String,
    /// `icon` or empty.
    pub subresource: String,
    /// Object name, empty for a list.
    pub name: String,
}

/// A future returned by an [`Authorizer`].
pub type AuthorizeFuture<'a> = Pin<Box<dyn Future<Output = Result<bool, String>> + Send + 'a>>;

/// Decides whether `identity` may do `attributes` (SubjectAccessReview in a cluster).
pub trait Authorizer: Send + Sync + 'static {
    /// `Ok(true)`: allowed; `Ok(false)`: denied; `Err`: could not decide (answered 500 so the
    /// client retries, never allowed by default).
    fn authorize<'a>(&'a self, identity: &'a Identity, attributes: &'a Attributes) -> AuthorizeFuture<'a>;
}

/// Allows everything: for tests and for `--authorization=none` on a private loopback.
#[derive(Debug, Default)]
pub struct AllowAll;

impl Authorizer for AllowAll {
    fn authorize<'a>(&'a self, _: &'a Identity, _: &'a Attributes) -> AuthorizeFuture<'a> {
        Box::pin(async { Ok(true) })
    }
}

/// How requests are authenticated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Authentication {
    /// Only requests from the front proxy (client certificate from the requestheader CA)
    /// with an `X-Remote-User` are served.
    RequestHeader,
    /// Trust `X-Remote-*` headers from anyone (tests over plain HTTP on loopback only).
    TrustHeaders,
}

#[derive(Clone)]
struct AppState {
    store: Arc<Store>,
    authorizer: Arc<dyn Authorizer>,
    authentication: Authentication,
}

/// The router of the whole server.
pub fn router(store: Arc<Store>, authorizer: Arc<dyn Authorizer>, authentication: Authentication) -> Router {
    let state = AppState { store, authorizer, authentication };
    let gv = format!("/apis/{GROUP}/{VERSION}");
    Router::new()
        .route("/healthz", get(healthz))
        .route("/livez", get(healthz))
        .route("/readyz", get(readyz))
        .route("/apis", get(api_group_list))
        .route(&format!("/apis/{GROUP}"), get(api_group))
        .route(&gv, get(api_resource_list))
        .route(&format!("{gv}/{PLURAL}"), get(list_all))
        .route(&format!("{gv}/namespaces/{{namespace}}/{PLURAL}"), get(list_namespaced))
        .route(&format!("{gv}/namespaces/{{namespace}}/{PLURAL}/{{name}}"), get(get_one))
        .route(&format!("{gv}/namespaces/{{namespace}}/{PLURAL}/{{name}}/icon"), get(get_icon))
        .route("/openapi/v2", get(|| async { json_response(StatusCode::OK, &crate::openapi::v2(), &[]) }))
        .route("/openapi/v3", get(|| async { json_response(StatusCode::OK, &crate::openapi::v3_index(), &[]) }))
        .route(&format!("/openapi/v3/apis/{GROUP}/{VERSION}"), get(|| async { json_response(StatusCode::OK, &crate::openapi::v3(), &[]) }))
        .fallback(not_found)
        .with_state(state)
}

fn status_error(code: StatusCode, reason: &str, message: String, details: Option<Value>) -> Response {
    let mut body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code.as_u16(),
    });
    if let Some(details) = details {
        body["details"] = details;
    }
    json_response(code, &body, &[])
}

fn json_response(code: StatusCode, body: &impl serde::Serialize, warnings: &[String]) -> Response {
    let text = serde_json::to_vec(body).unwrap_or_default();
    let mut response = (code, text).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    add_warnings(&mut response, warnings);
    response
}

fn add_warnings(response: &mut Response, warnings: &[String]) {
    for w in warnings {
        // RFC 7234 warn-code 299, the form kube-apiserver uses and kubectl prints.
        let text: String = w.chars().map(|c| if c == '"' || c.is_control() { '\'' } else { c }).collect();
        if let Ok(value) = HeaderValue::from_str(&format!("299 - \"{text}\"")) {
            response.headers_mut().append(header::WARNING, value);
        }
    }
}

async fn not_found(request: Request) -> Response {
    status_error(StatusCode::NOT_FOUND, "NotFound", format!("the server could not find the requested resource ({})", request.uri().path()), None)
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(state): State<AppState>) -> Response {
    if state.store.is_synced() {
        "ok".into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "CatalogSources not listed yet").into_response()
    }
}

fn group_json() -> Value {
    json!({
        "name": GROUP,
        "versions": [{"groupVersion": API_VERSION, "version": VERSION}],
        "preferredVersion": {"groupVersion": API_VERSION, "version": VERSION},
    })
}

async fn api_group_list() -> Response {
    let mut group = group_json();
    group["kind"] = json!("APIGroup");
    json_response(StatusCode::OK, &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [group_json()]}), &[])
}

async fn api_group() -> Response {
    let mut group = group_json();
    group["kind"] = json!("APIGroup");
    group["apiVersion"] = json!("v1");
    json_response(StatusCode::OK, &group, &[])
}

async fn api_resource_list() -> Response {
    let body = json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": API_VERSION,
        "resources": [
            {"name": PLURAL, "singularName": "packagemanifest", "namespaced": true, "kind": "PackageManifest",
             "verbs": ["get", "list"], "categories": ["olm"]},
            {"name": format!("{PLURAL}/icon"), "singularName": "", "namespaced": true, "kind": "PackageManifest",
             "verbs": ["get"]},
        ],
    });
    json_response(StatusCode::OK, &body, &[])
}

/// Identity of the request, or the response refusing it.
// The error is the HTTP response itself, built once per refused request.
#[allow(clippy::result_large_err)]
fn identity(state: &AppState, request_headers: &HeaderMap, front_proxy: Option<FrontProxy>) -> Result<Identity, Response> {
    let trusted = match state.authentication {
        Authentication::TrustHeaders => true,
        Authentication::RequestHeader => front_proxy == Some(FrontProxy(true)),
    };
    let user = request_headers.get("x-remote-user").and_then(|v| v.to_str().ok()).unwrap_or_default();
    if !trusted || user.is_empty() {
        return Err(status_error(
            StatusCode::UNAUTHORIZED,
            "Unauthorized",
            "Unauthorized: requests must come through the Kubernetes API server (front-proxy client certificate and X-Remote-User)".into(),
            None,
        ));
    }
    let groups = request_headers
        .get_all("x-remote-group")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(str::to_owned)
        .collect();
    let mut extra: HashMap<String, Vec<String>> = HashMap::new();
    for (name, value) in request_headers {
        if let Some(key) = name.as_str().strip_prefix("x-remote-extra-")
            && let Ok(v) = value.to_str()
        {
            extra.entry(key.to_owned()).or_default().push(v.to_owned());
        }
    }
    Ok(Identity { user: user.to_owned(), groups, extra })
}

/// The request's headers and the connection's front-proxy verdict.
type Caller = (HeaderMap, Option<Extension<FrontProxy>>);

async fn authorize(state: &AppState, caller: &Caller, attributes: Attributes) -> Result<(), Response> {
    let who = identity(state, &caller.0, caller.1.as_ref().map(|e| e.0))?;
    match state.authorizer.authorize(&who, &attributes).await {
        Ok(true) => Ok(()),
        Ok(false) => {
            let scope = if attributes.namespace.is_empty() {
                "at the cluster scope".to_owned()
            } else {
                format!("in the namespace \"{}\"", attributes.namespace)
            };
            let resource = if attributes.subresource.is_empty() { PLURAL.to_owned() } else { format!("{PLURAL}/{}", attributes.subresource) };
            let target = if attributes.name.is_empty() {
                format!("{PLURAL}.{GROUP}")
            } else {
                format!("{PLURAL}.{GROUP} \"{}\"", attributes.name)
            };
            Err(status_error(
                StatusCode::FORBIDDEN,
                "Forbidden",
                format!(
                    "{target} is forbidden: User \"{}\" cannot {} resource \"{resource}\" in API group \"{GROUP}\" {scope}",
                    who.user, attributes.verb
                ),
                Some(json!({"name": attributes.name, "group": GROUP, "kind": PLURAL})),
            ))
        }
        Err(message) => Err(status_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalError",
            format!("cannot authorize the request, try again: {message}"),
            None,
        )),
    }
}

/// Which representation the client asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wanted {
    Object,
    /// `meta.k8s.io` Table of that version (`v1` or `v1beta1`).
    Table(&'static str),
}

fn wanted(headers: &HeaderMap) -> Wanted {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or_default();
    for item in accept.split(',') {
        let params: Vec<&str> = item.split(';').map(str::trim).collect();
        let has = |p: &str| params.iter().any(|x| x.eq_ignore_ascii_case(p));
        if has("as=Table") && has("g=meta.k8s.io") {
            if has("v=v1") {
                return Wanted::Table("v1");
            }
            if has("v=v1beta1") {
                return Wanted::Table("v1beta1");
            }
        }
    }
    Wanted::Object
}

/// `5s`, `3m`, `2d`: kubectl's short age, computed here as kube-apiserver does for Tables.
fn age(created: Option<SystemTime>, now: SystemTime) -> String {
    let Some(created) = created else { return "<unknown>".into() };
    let secs = now.duration_since(created).map(|d| d.as_secs()).unwrap_or(0);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 600 => format!("{}m{}s", s / 60, s % 60),
        s if s < 3 * 3600 => format!("{}m", s / 60),
        s if s < 8 * 3600 => format!("{}h{}m", s / 3600, (s % 3600) / 60),
        s if s < 48 * 3600 => format!("{}h", s / 3600),
        s if s < 8 * 86400 => format!("{}d{}h", s / 86400, (s % 86400) / 3600),
        s if s < 365 * 86400 => format!("{}d", s / 86400),
        s => format!("{}y{}d", s / (365 * 86400), (s % (365 * 86400)) / 86400),
    }
}

fn created(manifest: &PackageManifest) -> Option<SystemTime> {
    let ts = manifest.metadata.creation_timestamp.as_ref()?;
    let ms = ts.0.as_millisecond();
    let ms = u64::try_from(ms).ok()?;
    SystemTime::UNIX_EPOCH.checked_add(std::time::Duration::from_millis(ms))
}

/// A PackageManifest as shown in a namespace, serialized without copying its status.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ManifestView<'a> {
    api_version: &'a str,
    kind: &'a str,
    metadata: ObjectMeta,
    spec: &'a PackageManifestSpec,
    status: &'a PackageManifestStatus,
}

impl<'a> ManifestView<'a> {
    fn new(m: &'a PackageManifest, namespace: &str) -> ManifestView<'a> {
        let mut metadata = m.metadata.clone();
        metadata.namespace = Some(namespace.to_owned());
        ManifestView { api_version: &m.api_version, kind: &m.kind, metadata, spec: &m.spec, status: &m.status }
    }
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ListView<'a> {
    api_version: &'static str,
    kind: &'static str,
    metadata: Value,
    items: Vec<ManifestView<'a>>,
}

fn table(version: &str, items: &[(&PackageManifest, &str)], include_object: &str) -> Value {
    let now = SystemTime::now();
    let rows: Vec<Value> = items
        .iter()
        .map(|&(m, namespace)| {
            let object = match include_object {
                "None" => Value::Null,
                "Object" => serde_json::to_value(ManifestView::new(m, namespace)).unwrap_or(Value::Null),
                _ => {
                    let mut metadata = m.metadata.clone();
                    metadata.namespace = Some(namespace.to_owned());
                    json!({
                        "kind": "PartialObjectMetadata",
                        "apiVersion": format!("meta.k8s.io/{version}"),
                        "metadata": serde_json::to_value(&metadata).unwrap_or(Value::Null),
                    })
                }
            };
            json!({
                "cells": [m.metadata.name.clone().unwrap_or_default(), m.status.catalog_source_display_name, age(created(m), now)],
                "object": object,
            })
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": format!("meta.k8s.io/{version}"),
        "metadata": {"resourceVersion": ""},
        "columnDefinitions": [
            {"name": "Name", "type": "string", "format": "name", "description": "Name of the package (metadata.name)", "priority": 0},
            {"name": "Catalog", "type": "string", "format": "", "description": "Display name of the CatalogSource the package comes from", "priority": 0},
            {"name": "Age", "type": "date", "format": "", "description": "Age of the CatalogSource (metadata.creationTimestamp)", "priority": 0},
        ],
        "rows": rows,
    })
}

fn query_flag(query: &HashMap<String, String>, key: &str) -> bool {
    query.get(key).is_some_and(|v| v.is_empty() || v == "true" || v == "1")
}

async fn list_all(
    State(state): State<AppState>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    front: Option<Extension<FrontProxy>>,
) -> Response {
    list(state, None, query, (headers, front)).await
}

async fn list_namespaced(
    State(state): State<AppState>,
    Path(namespace): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    front: Option<Extension<FrontProxy>>,
) -> Response {
    list(state, Some(namespace), query, (headers, front)).await
}

async fn list(state: AppState, namespace: Option<String>, query: HashMap<String, String>, caller: Caller) -> Response {
    if query_flag(&query, "watch") {
        return status_error(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            "packagemanifests cannot be watched (as upstream): list them again to see changes".into(),
            None,
        );
    }
    let attributes = Attributes { verb: "list", namespace: namespace.clone().unwrap_or_default(), subresource: String::new(), name: String::new() };
    if let Err(response) = authorize(&state, &caller, attributes).await {
        return response;
    }
    let labels = match parse_label_selector(query.get("labelSelector").map(String::as_str).unwrap_or_default()) {
        Ok(s) => s,
        Err(message) => return status_error(StatusCode::BAD_REQUEST, "BadRequest", format!("unable to parse requirement: {message}"), None),
    };
    let fields = match parse_field_selector(query.get("fieldSelector").map(String::as_str).unwrap_or_default()) {
        Ok(s) => s,
        Err(message) => return status_error(StatusCode::BAD_REQUEST, "BadRequest", message, None),
    };
    let empty = std::collections::BTreeMap::new();
    let listing = state.store.list(namespace.as_deref(), |m| {
        fields.matches(m.metadata.name.as_deref().unwrap_or_default()) && labels.matches(m.metadata.labels.as_ref().unwrap_or(&empty))
    });
    for w in &listing.warnings {
        tracing::debug!(warning = %w, "partial packagemanifest list");
    }
    match wanted(&caller.0) {
        Wanted::Table(version) => {
            let rows: Vec<(&PackageManifest, &str)> = listing.items.iter().map(|i| (i.stored(), i.namespace.as_str())).collect();
            let body = table(version, &rows, query.get("includeObject").map(String::as_str).unwrap_or("Metadata"));
            json_response(StatusCode::OK, &body, &listing.warnings)
        }
        Wanted::Object => {
            let body = ListView {
                api_version: API_VERSION,
                kind: "PackageManifestList",
                metadata: json!({"resourceVersion": ""}),
                items: listing.items.iter().map(|i| ManifestView::new(i.stored(), &i.namespace)).collect(),
            };
            json_response(StatusCode::OK, &body, &listing.warnings)
        }
    }
}

fn not_found_package(name: &str, namespace: &str, warnings: &[String]) -> Response {
    let mut response = status_error(
        StatusCode::NOT_FOUND,
        "NotFound",
        format!("{PLURAL}.{GROUP} \"{name}\" not found"),
        Some(json!({"name": name, "group": GROUP, "kind": PLURAL})),
    );
    if warnings.is_empty() {
        tracing::debug!(%name, %namespace, "package not found");
    }
    add_warnings(&mut response, warnings);
    response
}

async fn get_one(
    State(state): State<AppState>,
    Path((namespace, name)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    front: Option<Extension<FrontProxy>>,
) -> Response {
    let caller: Caller = (headers, front);
    let attributes = Attributes { verb: "get", namespace: namespace.clone(), subresource: String::new(), name: name.clone() };
    if let Err(response) = authorize(&state, &caller, attributes).await {
        return response;
    }
    let (served, warnings) = state.store.get(&namespace, &name);
    let Some(served) = served else {
        return not_found_package(&name, &namespace, &warnings);
    };
    // Icons are only sent when asked for (`?icons=true`), so `-o yaml` stays readable and
    // lists stay small; the icon subresource gives the image itself.
    let manifest = if query_flag(&query, "icons") { served.with_icons() } else { served.manifest };
    let body = match wanted(&caller.0) {
        Wanted::Table(version) => {
            let namespace = manifest.metadata.namespace.clone().unwrap_or_default();
            table(version, &[(&manifest, namespace.as_str())], query.get("includeObject").map(String::as_str).unwrap_or("Metadata"))
        }
        Wanted::Object => serde_json::to_value(&manifest).unwrap_or(Value::Null),
    };
    json_response(StatusCode::OK, &body, &[])
}

/// Shown when the package has no icon (a grey square).
const DEFAULT_ICON_SVG: &str = r##"<svg xmlns="http://www.w3.org/2000/svg" width="64" height="64" viewBox="0 0 64 64"><rect width="64" height="64" rx="8" fill="#d2d2d2"/></svg>"##;

async fn get_icon(
    State(state): State<AppState>,
    Path((namespace, name)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    front: Option<Extension<FrontProxy>>,
) -> Response {
    let caller: Caller = (headers, front);
    let attributes = Attributes { verb: "get", namespace: namespace.clone(), subresource: "icon".into(), name: name.clone() };
    if let Err(response) = authorize(&state, &caller, attributes).await {
        return response;
    }
    let (served, warnings) = state.store.get(&namespace, &name);
    let Some(served) = served else {
        return not_found_package(&name, &namespace, &warnings);
    };
    let etag = served.icon_etag();
    if caller.0.contains_key(header::IF_NONE_MATCH) && query.contains_key("resourceVersion") {
        return StatusCode::NOT_MODIFIED.into_response();
    }
    let (bytes, media_type, etag) = match served.default_icon() {
        Some(icon) => match base64::engine::general_purpose::STANDARD.decode(icon.base64_data.trim()) {
            Ok(bytes) => (bytes, icon.media_type.clone(), etag),
            Err(_) => (DEFAULT_ICON_SVG.as_bytes().to_vec(), "image/svg+xml".into(), String::new()),
        },
        None => (DEFAULT_ICON_SVG.as_bytes().to_vec(), "image/svg+xml".into(), String::new()),
    };
    let mut response = (StatusCode::OK, bytes).into_response();
    if let Ok(v) = HeaderValue::from_str(&media_type) {
        response.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    if !etag.is_empty()
        && let Ok(v) = HeaderValue::from_str(&etag)
    {
        response.headers_mut().insert(header::ETAG, v);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_accept_is_recognised() {
        let mut h = HeaderMap::new();
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"),
        );
        assert_eq!(wanted(&h), Wanted::Table("v1"));
        h.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        assert_eq!(wanted(&h), Wanted::Object);
    }

    #[test]
    fn ages_read_like_kubectl() {
        let now = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        let ago = |s: u64| age(Some(now - std::time::Duration::from_secs(s)), now);
        assert_eq!(ago(5), "5s");
        assert_eq!(ago(300), "5m0s");
        assert_eq!(ago(3600), "60m");
        assert_eq!(ago(5 * 3600), "5h0m");
        assert_eq!(ago(3 * 86400), "3d0h");
        assert_eq!(age(None, now), "<unknown>");
    }
}
