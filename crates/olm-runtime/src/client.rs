//! The API client of `olm run`: kube's request stack (base URI, retries, credentials, extra
//! headers) over a connection pool that keeps few idle connections; every request is counted
//! (`requests`), and every warning of the API server logged and counted (`warnings`).

use std::time::Duration;

use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube::client::ConfigExt;
use kube::client::retry::RetryPolicy;
use tower::retry::RetryLayer;
use tower::{BoxError, ServiceBuilder};

/// Idle connections kept to the API server. Over HTTP/1.1 every concurrent request needs its
/// own connection; kube's default pool keeps every one of them for 90 s after a burst, each
/// with its TLS state and a read buffer grown to the largest response it carried (tens of
/// KiB): memory that grew with the burst, so with the number of namespaces.
const MAX_IDLE_CONNECTIONS: usize = 8;

/// How long an idle connection above is kept.
const IDLE_TIMEOUT: Duration = Duration::from_secs(15);

/// A client for `config` whose pool keeps at most [`MAX_IDLE_CONNECTIONS`] idle connections.
pub fn build(config: kube::Config) -> Result<kube::Client, kube::Error> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    // Without it a new connection's first request waits for the server's delayed ACK (40 ms
    // on Linux) behind the TLS handshake's last write: every burst of concurrent requests that
    // opens connections (an install's first steps) paid that.
    http.set_nodelay(true);
    let https = config.rustls_https_connector_with_connector(http)?;
    let mut connector = hyper_timeout::TimeoutConnector::new(https);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    let http_client: HttpClient<_, kube::client::Body> = HttpClient::builder(TokioExecutor::new())
        .pool_max_idle_per_host(MAX_IDLE_CONNECTIONS)
        .pool_idle_timeout(IDLE_TIMEOUT)
        .build(connector);
    let service = ServiceBuilder::new()
        .map_request(|request: http::Request<kube::client::Body>| {
            crate::requests::count(&request);
            request
        })
        .layer_fn(crate::warnings::CountWarnings::new)
        .layer(config.base_uri_layer())
        .option_layer(
            config
                .default_retry
                .then(|| RetryLayer::new(RetryPolicy::server_retry())),
        )
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(BoxError::from)
        .service(http_client);
    Ok(kube::Client::new(service, config.default_namespace))
}

/// The header the API server reads an impersonated user from.
const IMPERSONATE_USER: &str = "impersonate-user";

/// The user name of a ServiceAccount.
pub fn service_account_username(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// A client that sends every request of `base` as `user` (the `Impersonate-User` header): it
/// shares `base`'s connections and credentials, and the API server's own authorization and RBAC
/// escalation checks decide what it may do. For a ServiceAccount user the API server adds its
/// groups itself, so the caller needs `impersonate` on `serviceaccounts` only. `None` when
/// `user` cannot be a header value.
pub fn impersonating(base: &kube::Client, user: &str, default_namespace: &str) -> Option<kube::Client> {
    let user = http::HeaderValue::from_str(user).ok()?;
    let base = base.clone();
    let service = tower::service_fn(move |mut request: http::Request<kube::client::Body>| {
        let base = base.clone();
        request.headers_mut().insert(IMPERSONATE_USER, user.clone());
        async move { base.send(request).await }
    });
    Some(kube::Client::new(service, default_namespace.to_owned()))
}
