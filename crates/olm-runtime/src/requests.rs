//! Every request `olm run` sends to the API server, counted by verb and resource
//! (`olm_api_requests_total`): what an install costs the API server, and whether a restart
//! rewrites objects that did not change. Counted in the client (`client::build`), so nothing
//! is missed whichever controller or cache sends it.

use std::sync::OnceLock;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// get, list, watch, create, apply, patch, update, delete, deletecollection.
    pub verb: String,
    /// The resource's plural (`subscriptions`; `subscriptions/status` for a subresource).
    pub resource: String,
}

/// The process's request counters (one family: the client and the metrics registry share it).
pub fn api_requests() -> &'static Family<RequestLabels, Counter> {
    static REQUESTS: OnceLock<Family<RequestLabels, Counter>> = OnceLock::new();
    REQUESTS.get_or_init(Family::default)
}

/// A request as Kubernetes' audit log would name it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestKind {
    pub verb: &'static str,
    /// The plural, or the whole path when it is not a resource URL (`/version`).
    pub resource: String,
    pub subresource: Option<String>,
}

impl RequestKind {
    /// `method` on `path` (no query) with `query`.
    pub fn of(method: &http::Method, path: &str, query: Option<&str>) -> RequestKind {
        let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
        let after_version = match parts.first() {
            Some(&"api") => 2,
            Some(&"apis") => 3,
            _ => 0,
        };
        let mut rest: &[&str] = if after_version == 0 { &[] } else { parts.get(after_version..).unwrap_or_default() };
        if rest.len() >= 3 && rest[0] == "namespaces" {
            rest = &rest[2..];
        }
        let (resource, name, subresource) = match rest {
            [plural, tail @ ..] if !plural.is_empty() => ((*plural).to_owned(), tail.first().copied(), tail.get(1).map(|s| (*s).to_owned())),
            // Not a resource URL (`/version`, `/openapi/v2`): a read of that path.
            _ => (path.to_owned(), Some(""), None),
        };
        let watch = query.is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
        let verb = match (method.as_str(), name.is_some()) {
            ("GET", _) if watch => "watch",
            ("GET", true) => "get",
            ("GET", false) => "list",
            ("POST", _) => "create",
            ("PATCH", _) if query.is_some_and(|q| q.contains("fieldManager=")) => "apply",
            ("PATCH", _) => "patch",
            ("PUT", _) => "update",
            ("DELETE", true) => "delete",
            ("DELETE", false) => "deletecollection",
            _ => "other",
        };
        RequestKind { verb, resource, subresource }
    }

    /// Whether it changes something.
    pub fn is_write(&self) -> bool {
        matches!(self.verb, "create" | "apply" | "patch" | "update" | "delete" | "deletecollection")
    }
}

/// Count `request` in [`api_requests`].
pub fn count<B>(request: &http::Request<B>) {
    let kind = RequestKind::of(request.method(), request.uri().path(), request.uri().query());
    let resource = match &kind.subresource {
        Some(sub) => format!("{}/{sub}", kind.resource),
        None => kind.resource,
    };
    // `RUST_LOG=olm_runtime::requests=trace` lists every request: which objects a count is made of.
    tracing::trace!(verb = kind.verb, path = request.uri().path(), "API request");
    api_requests().get_or_create(&RequestLabels { verb: kind.verb.to_owned(), resource }).inc();
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    #[test]
    fn requests_are_named_like_the_audit_log_names_them() {
        let cases = [
            (Method::GET, "/apis/operators.coreos.com/v1alpha1/namespaces/a/subscriptions", Some("watch=true&resourceVersion=1"), "watch", "subscriptions", None),
            (Method::GET, "/apis/operators.coreos.com/v1alpha1/subscriptions", None, "list", "subscriptions", None),
            (Method::GET, "/api/v1/namespaces/a/configmaps/c", None, "get", "configmaps", None),
            (Method::GET, "/api/v1/namespaces/a", None, "get", "namespaces", None),
            (Method::PATCH, "/apis/operators.coreos.com/v1alpha1/namespaces/a/subscriptions/s/status", Some("fieldManager=olm%2Fsubscription&force=true"), "apply", "subscriptions", Some("status")),
            (Method::POST, "/apis/events.k8s.io/v1/namespaces/a/events", None, "create", "events", None),
            (Method::DELETE, "/apis/rbac.authorization.k8s.io/v1/clusterroles", Some("labelSelector=x"), "deletecollection", "clusterroles", None),
            (Method::GET, "/version", None, "get", "/version", None),
        ];
        for (method, path, query, verb, resource, sub) in cases {
            let kind = RequestKind::of(&method, path, query);
            assert_eq!((kind.verb, kind.resource.as_str(), kind.subresource.as_deref()), (verb, resource, sub), "{method} {path}");
        }
    }

    #[test]
    fn counted_requests_are_labelled_with_verb_and_resource() {
        let request = http::Request::patch("/apis/operators.coreos.com/v1alpha1/namespaces/z/installplans/p/status?fieldManager=olm").body(()).unwrap();
        count(&request);
        let labels = RequestLabels { verb: "apply".into(), resource: "installplans/status".into() };
        assert!(api_requests().get_or_create(&labels).get() >= 1);
    }
}
