//! Docker's token authentication in front of a test registry: [`token_auth_front`] listens on a
//! loopback port and answers every registry request without a valid bearer token with
//! `401` and `WWW-Authenticate: Bearer realm=…,service=…,scope=…`; its `/token` endpoint hands
//! out a token for the right Basic credentials (as Docker Hub's, Quay's or Harbor's token
//! services do); requests that carry the token are forwarded to the registry behind it. The
//! CNCF registry's own `token` auth needs a signing PKI; the client side of the protocol is the
//! same either way, and this front counts what it saw so a test can tell the flow happened.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use base64::Engine as _;
use http_body_util::{BodyExt as _, Full, combinators::BoxBody};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

use crate::{Result, TestkitError};

/// The `service` the front names in its challenges.
pub const TOKEN_SERVICE: &str = "olm-testkit-registry";

/// What the front has seen.
#[derive(Debug, Default)]
pub struct TokenAuthCounts {
    /// Tokens handed out.
    pub granted: AtomicUsize,
    /// Token requests refused (no or wrong credentials).
    pub refused: AtomicUsize,
    /// Registry requests answered with a challenge.
    pub challenged: AtomicUsize,
    /// Registry requests forwarded with a valid token.
    pub forwarded: AtomicUsize,
}

/// A running front; it stops when dropped.
#[derive(Debug)]
pub struct TokenAuthFront {
    addr: String,
    counts: Arc<TokenAuthCounts>,
    task: tokio::task::JoinHandle<()>,
}

impl TokenAuthFront {
    /// `127.0.0.1:PORT`: the registry host of image references that go through the front.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// What it has seen so far.
    pub fn counts(&self) -> &TokenAuthCounts {
        &self.counts
    }
}

impl Drop for TokenAuthFront {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Front {
    addr: String,
    upstream: String,
    basic: String,
    token: String,
    counts: Arc<TokenAuthCounts>,
}

/// Start a token-auth front for the plain-HTTP registry at `upstream` (`host:port`), granting
/// tokens to `username`/`password`.
pub async fn token_auth_front(upstream: &str, username: &str, password: &str) -> Result<TokenAuthFront> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| TestkitError::Registry(format!("token front: cannot listen: {e}")))?;
    let addr = listener
        .local_addr()
        .map_err(|e| TestkitError::Registry(format!("token front: {e}")))?
        .to_string();
    let counts = Arc::new(TokenAuthCounts::default());
    let front = Arc::new(Front {
        addr: addr.clone(),
        upstream: upstream.to_owned(),
        basic: base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}")),
        token: crate::random_name("token"),
        counts: counts.clone(),
    });
    let task = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let front = front.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let front = front.clone();
                    async move { Ok::<_, Infallible>(front.answer(req).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(TokenAuthFront { addr, counts, task })
}

type Body = BoxBody<Bytes, hyper::Error>;

fn text(status: StatusCode, body: &str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_owned())).map_err(|never| match never {}).boxed());
    *response.status_mut() = status;
    response
}

impl Front {
    async fn answer(&self, req: Request<Incoming>) -> Response<Body> {
        let authorization = req
            .headers()
            .get(hyper::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        if req.uri().path() == "/token" {
            if authorization == format!("Basic {}", self.basic) {
                self.counts.granted.fetch_add(1, Ordering::SeqCst);
                let body = format!(r#"{{"token": "{0}", "access_token": "{0}", "expires_in": 300}}"#, self.token);
                let mut response = text(StatusCode::OK, &body);
                response
                    .headers_mut()
                    .insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("application/json"));
                return response;
            }
            self.counts.refused.fetch_add(1, Ordering::SeqCst);
            return text(StatusCode::UNAUTHORIZED, r#"{"details": "incorrect username or password"}"#);
        }
        if authorization != format!("Bearer {}", self.token) {
            self.counts.challenged.fetch_add(1, Ordering::SeqCst);
            let path = req.uri().path();
            let repository = path
                .strip_prefix("/v2/")
                .and_then(|rest| ["/manifests/", "/blobs/", "/tags/"].iter().find_map(|m| rest.split_once(m)))
                .map(|(repo, _)| repo.to_owned());
            let mut challenge = format!(r#"Bearer realm="http://{}/token",service="{TOKEN_SERVICE}""#, self.addr);
            if let Some(repository) = repository {
                challenge.push_str(&format!(r#",scope="repository:{repository}:pull""#));
            }
            let mut response = text(
                StatusCode::UNAUTHORIZED,
                r#"{"errors": [{"code": "UNAUTHORIZED", "message": "authentication required"}]}"#,
            );
            if let Ok(value) = hyper::header::HeaderValue::from_str(&challenge) {
                response.headers_mut().insert(hyper::header::WWW_AUTHENTICATE, value);
            }
            return response;
        }
        self.counts.forwarded.fetch_add(1, Ordering::SeqCst);
        match self.forward(req).await {
            Ok(response) => response,
            Err(message) => text(StatusCode::BAD_GATEWAY, &message),
        }
    }

    /// The request, without its token, to the registry behind (one connection per request).
    async fn forward(&self, mut req: Request<Incoming>) -> std::result::Result<Response<Body>, String> {
        req.headers_mut().remove(hyper::header::AUTHORIZATION);
        if let Ok(host) = hyper::header::HeaderValue::from_str(&self.upstream) {
            req.headers_mut().insert(hyper::header::HOST, host);
        }
        let stream = tokio::net::TcpStream::connect(&self.upstream)
            .await
            .map_err(|e| format!("cannot reach {}: {e}", self.upstream))?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| format!("handshake with {}: {e}", self.upstream))?;
        tokio::spawn(connection);
        let response = sender.send_request(req).await.map_err(|e| format!("{}: {e}", self.upstream))?;
        Ok(response.map(http_body_util::BodyExt::boxed))
    }
}
