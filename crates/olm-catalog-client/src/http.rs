//! Our catalog server's HTTP API: `<catalog url>/api/v1/all` streams the catalog as FBC JSON.

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use olm_resolver::CatalogKey;

use super::{CatalogContent, ClientError, FETCH_TIMEOUT, Location, answer_within};

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
    list_within(FETCH_TIMEOUT, url, key, priority).await
}

/// [`list`], each answer within `limit`.
async fn list_within(limit: Duration, url: &str, key: CatalogKey, priority: i32) -> Result<CatalogContent, ClientError> {
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
    let response = answer_within(limit, url, async {
        client.get(uri).await.map_err(|err| ClientError::Connect {
            address: url.to_owned(),
            message: err.to_string(),
        })
    })
    .await?;
    let status = response.status();
    let read_error = |message: String| ClientError::Call {
        address: url.to_owned(),
        call: "GET /api/v1/all".into(),
        message,
        retryable: true,
    };
    // Frame by frame, each within the time limit: a big catalog takes as long as it keeps coming.
    let mut stream = Limited::new(response.into_body(), MAX_BODY_BYTES);
    let mut body = Vec::new();
    while let Some(frame) = answer_within(limit, url, async { stream.frame().await.transpose().map_err(|err| read_error(err.to_string())) }).await? {
        if let Ok(data) = frame.into_data() {
            body.extend_from_slice(&data);
        }
    }
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

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// A catalog server on the loopback that sends `parts` of the catalog as HTTP chunks, waiting
    /// `pause` before each. Its URL.
    async fn slow_server(parts: Vec<String>, pause: Duration) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/catalogs/slow", listener.local_addr().expect("address"));
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.expect("accept");
            let mut request = [0u8; 1024];
            let _ = socket.read(&mut request).await;
            let head = "HTTP/1.1 200 OK\r\ncontent-type: application/jsonl\r\ntransfer-encoding: chunked\r\n\r\n";
            socket.write_all(head.as_bytes()).await.expect("head");
            for part in parts {
                tokio::time::sleep(pause).await;
                let chunk = format!("{:x}\r\n{part}\r\n", part.len());
                if socket.write_all(chunk.as_bytes()).await.is_err() {
                    return; // the client gave up
                }
            }
            let _ = socket.write_all(b"0\r\n\r\n").await;
        });
        url
    }

    fn catalog_parts() -> Vec<String> {
        [
            r#"{"schema":"olm.package","name":"demo","defaultChannel":"stable"}"#,
            r#"{"schema":"olm.channel","package":"demo","name":"stable","entries":[{"name":"demo.v1"}]}"#,
            r#"{"schema":"olm.bundle","name":"demo.v1","package":"demo","image":"r/demo:1","properties":[{"type":"olm.package","value":{"packageName":"demo","version":"1.0.0"}}]}"#,
        ]
        .iter()
        .map(|doc| format!("{doc}\n"))
        .collect()
    }

    // A limit of 1 s stands for FETCH_TIMEOUT's minute: the test takes seconds.
    #[tokio::test]
    async fn a_catalog_that_keeps_sending_is_read_however_long_it_takes_and_one_that_stops_is_not() {
        let limit = Duration::from_secs(1);
        let url = slow_server(catalog_parts(), limit * 6 / 10).await;
        let content = list_within(limit, &url, CatalogKey::new("slow", "olm"), 0).await.expect("read whole, over 1.8 × the limit");
        assert_eq!(content.counts(), (1, 1));

        let url = slow_server(catalog_parts(), limit * 3 / 2).await;
        let err = list_within(limit, &url, CatalogKey::new("slow", "olm"), 0).await.expect_err("stalled");
        assert_eq!(err.category(), "CatalogTimeout");
        assert_eq!(err.to_string(), format!("catalog {} did not answer within 1s", base(&url)));
    }
}
