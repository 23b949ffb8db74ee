//! Our catalog server's HTTP API: `<catalog url>/api/v1/all` streams the catalog as FBC JSON.

use std::collections::HashMap;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use olm_resolver::CatalogKey;

use super::{CatalogContent, ClientError, Location};

/// A catalog bigger than this is refused.
const MAX_BODY_BYTES: usize = 512 * 1024 * 1024;

/// The catalog's URL without the trailing `/` a spec may give it: `<base>/api/v1/all` is read,
/// and errors name the base.
pub(super) fn base(url: &str) -> &str {
    url.trim_end_matches('/')
}

/// `HEAD <url>/api/v1/all`: the server answers for this catalog, without sending it.
pub(super) async fn probe(url: &str) -> Result<(), ClientError> {
    let url = base(url);
    let uri: hyper::Uri = format!("{url}/api/v1/all").parse().map_err(|err| ClientError::Invalid {
        address: url.to_owned(),
        message: format!("spec.address is not a valid URL: {err}"),
    })?;
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let request = hyper::Request::head(uri).body(Empty::new()).map_err(|err| ClientError::Invalid {
        address: url.to_owned(),
        message: err.to_string(),
    })?;
    let response = client.request(request).await.map_err(|err| ClientError::Connect {
        address: url.to_owned(),
        message: err.to_string(),
    })?;
    if response.status().is_success() {
        Ok(())
    } else {
        Err(ClientError::Call {
            address: url.to_owned(),
            call: "HEAD /api/v1/all".into(),
            message: format!("HTTP {}", response.status()),
            retryable: true,
        })
    }
}

pub(super) async fn list(url: &str, key: CatalogKey, priority: i32) -> Result<CatalogContent, ClientError> {
    let url = base(url);
    let all = format!("{url}/api/v1/all");
    if all.starts_with("https://") {
        return Err(ClientError::Invalid {
            address: url.to_owned(),
            message: "https catalog URLs are not supported yet; use http:// (for example the catalog server on the node) or a gRPC address"
                .into(),
        });
    }
    let uri: hyper::Uri = all.parse().map_err(|err| ClientError::Invalid {
        address: url.to_owned(),
        message: format!("spec.address is not a valid URL: {err}"),
    })?;
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let response = client.get(uri).await.map_err(|err| ClientError::Connect {
        address: url.to_owned(),
        message: err.to_string(),
    })?;
    let status = response.status();
    let body = Limited::new(response.into_body(), MAX_BODY_BYTES)
        .collect()
        .await
        .map_err(|err| ClientError::Call {
            address: url.to_owned(),
            call: "GET /api/v1/all".into(),
            message: err.to_string(),
            retryable: true,
        })?
        .to_bytes();
    if !status.is_success() {
        return Err(ClientError::Call {
            address: url.to_owned(),
            call: "GET /api/v1/all".into(),
            message: format!("HTTP {status}: {}", String::from_utf8_lossy(&body[..body.len().min(300)])),
            retryable: status.is_server_error(),
        });
    }
    let text = String::from_utf8_lossy(&body);
    let values = olm_catalog::load::parse_manifest_text(&text).map_err(|message| ClientError::Invalid {
        address: url.to_owned(),
        message,
    })?;
    let documents = values
        .into_iter()
        .map(|value| olm_catalog::Document { value, source: None })
        .collect();
    CatalogContent::from_documents(key, priority, documents, Some(Location::Http(url.to_owned())), HashMap::new()).map_err(
        |message| ClientError::Invalid {
            address: url.to_owned(),
            message,
        },
    )
}
