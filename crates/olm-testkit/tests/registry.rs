//! The test registry speaks the OCI distribution API: `/v2/` answers, a blob pushed is the blob
//! pulled (and deleted when asked), a manifest pushed makes a tag, htpasswd auth refuses a request without the credentials,
//! and the CA PEM it hands out is what verifies its TLS certificate (another CA's is refused).

use std::sync::Arc;

use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper::{HeaderMap, Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use olm_testkit::{
    CertificateAuthority, REALM, RegistryOptions, RegistryServer, TestkitError, registry,
};
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, ServerName};
use sha2::{Digest as _, Sha256};
use tokio::io::{AsyncRead, AsyncWrite};

type TestResult = Result<(), TestkitError>;

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

impl Reply {
    fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

/// A TLS client trusting only `ca_pem`.
fn tls_trusting(ca_pem: &str) -> tokio_rustls::TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca_pem.as_bytes()).expect("CA PEM"))
        .expect("CA certificate");
    let config = rustls::ClientConfig::builder_with_provider(
        rustls::crypto::ring::default_provider().into(),
    )
    .with_safe_default_protocol_versions()
    .expect("protocol versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

/// One HTTP/1.1 request to the registry on a new connection (over TLS when `tls` is given,
/// verifying the certificate for `server_name`).
async fn send(
    registry: &RegistryServer,
    tls: Option<(&tokio_rustls::TlsConnector, &str)>,
    method: Method,
    path: &str,
    headers: &[(&str, String)],
    body: Vec<u8>,
) -> Result<Reply, String> {
    let tcp = tokio::net::TcpStream::connect(registry.addr())
        .await
        .map_err(|e| format!("connect {}: {e}", registry.addr()))?;
    let io: Box<dyn Io> = match tls {
        None => Box::new(tcp),
        Some((connector, name)) => {
            let name = ServerName::try_from(name.to_owned()).map_err(|e| e.to_string())?;
            Box::new(
                connector
                    .connect(name, tcp)
                    .await
                    .map_err(|e| format!("TLS handshake: {e}"))?,
            )
        }
    };
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    let mut request = Request::builder()
        .method(method.clone())
        .uri(path)
        .header("host", registry.addr());
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let request = request
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| format!("{method} {path}: {e}"))?;
    let status = response.status();
    let headers = response.headers().clone();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok(Reply {
        status,
        headers,
        body,
    })
}

async fn get(registry: &RegistryServer, path: &str) -> Reply {
    send(registry, None, Method::GET, path, &[], Vec::new())
        .await
        .unwrap_or_else(|e| panic!("GET {path}: {e}"))
}

/// The path and query of an upload `Location` (distribution answers with an absolute URL).
fn location_path(location: &str, registry: &RegistryServer) -> String {
    location
        .strip_prefix(&registry.url())
        .unwrap_or(location)
        .to_owned()
}

#[tokio::test]
async fn plain_registry_answers_v2_and_round_trips_a_blob() -> TestResult {
    let registry = registry(RegistryOptions::new()).await?;
    assert!(
        registry.addr().starts_with("127.0.0.1:"),
        "{}",
        registry.addr()
    );
    assert_eq!(registry.url(), format!("http://{}", registry.addr()));

    let v2 = get(&registry, "/v2/").await;
    assert_eq!(v2.status, StatusCode::OK);
    assert_eq!(v2.header("docker-distribution-api-version"), "registry/2.0");

    // Monolithic upload: POST opens an upload, PUT with ?digest= closes it with the content.
    let blob = format!("olm-testkit blob for {}", registry.addr()).into_bytes();
    let digest = format!("sha256:{}", hex::encode(Sha256::digest(&blob)));
    let repository = "/v2/olm/testkit";
    let opened = send(
        &registry,
        None,
        Method::POST,
        &format!("{repository}/blobs/uploads/"),
        &[],
        Vec::new(),
    )
    .await
    .expect("POST upload");
    assert_eq!(opened.status, StatusCode::ACCEPTED, "{:?}", opened.body);
    let upload = location_path(opened.header("location"), &registry);
    assert!(
        upload.starts_with(&format!("{repository}/blobs/uploads/")),
        "{upload}"
    );

    // A digest that does not match the content is refused, and the upload can still complete.
    let wrong = format!("sha256:{}", hex::encode(Sha256::digest(b"something else")));
    let separator = if upload.contains('?') { '&' } else { '?' };
    let octets = || vec![("content-type", "application/octet-stream".to_owned())];
    let refused = send(
        &registry,
        None,
        Method::PUT,
        &format!("{upload}{separator}digest={wrong}"),
        &octets(),
        blob.clone(),
    )
    .await
    .expect("PUT");
    assert_eq!(
        refused.status,
        StatusCode::BAD_REQUEST,
        "{}",
        String::from_utf8_lossy(&refused.body)
    );

    let opened = send(
        &registry,
        None,
        Method::POST,
        &format!("{repository}/blobs/uploads/"),
        &[],
        Vec::new(),
    )
    .await
    .expect("POST upload");
    let upload = location_path(opened.header("location"), &registry);
    let separator = if upload.contains('?') { '&' } else { '?' };
    let put = send(
        &registry,
        None,
        Method::PUT,
        &format!("{upload}{separator}digest={digest}"),
        &octets(),
        blob.clone(),
    )
    .await
    .expect("PUT");
    assert_eq!(
        put.status,
        StatusCode::CREATED,
        "{}",
        String::from_utf8_lossy(&put.body)
    );
    assert_eq!(put.header("docker-content-digest"), digest);

    let pulled = get(&registry, &format!("{repository}/blobs/{digest}")).await;
    assert_eq!(pulled.status, StatusCode::OK);
    assert_eq!(pulled.body.as_ref(), blob.as_slice());
    assert_eq!(pulled.header("docker-content-digest"), digest);
    let missing = get(&registry, &format!("{repository}/blobs/{wrong}")).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);

    // An image manifest naming the blob as its config makes a tag and a listed repository.
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digest, "size": blob.len()},
        "layers": [],
    });
    let oci = vec![(
        "content-type",
        "application/vnd.oci.image.manifest.v1+json".to_owned(),
    )];
    let pushed = send(
        &registry,
        None,
        Method::PUT,
        &format!("{repository}/manifests/v1"),
        &oci,
        manifest.to_string().into_bytes(),
    )
    .await
    .expect("PUT manifest");
    assert_eq!(
        pushed.status,
        StatusCode::CREATED,
        "{}",
        String::from_utf8_lossy(&pushed.body)
    );
    let tags: serde_json::Value = serde_json::from_slice(
        &get(&registry, &format!("{repository}/tags/list"))
            .await
            .body,
    )
    .expect("tags JSON");
    assert_eq!(tags["tags"], serde_json::json!(["v1"]), "{tags}");
    let catalog: serde_json::Value =
        serde_json::from_slice(&get(&registry, "/v2/_catalog").await.body).expect("catalog JSON");
    assert_eq!(
        catalog["repositories"],
        serde_json::json!(["olm/testkit"]),
        "{catalog}"
    );

    // storage.delete.enabled: a blob can be deleted.
    let deleted = send(
        &registry,
        None,
        Method::DELETE,
        &format!("{repository}/blobs/{digest}"),
        &[],
        Vec::new(),
    )
    .await
    .expect("DELETE");
    assert_eq!(
        deleted.status,
        StatusCode::ACCEPTED,
        "{}",
        String::from_utf8_lossy(&deleted.body)
    );
    assert_eq!(
        get(&registry, &format!("{repository}/blobs/{digest}"))
            .await
            .status,
        StatusCode::NOT_FOUND
    );

    // Dropping it stops the process, then removes its directory.
    let (addr, dir, pid) = (
        registry.addr().to_owned(),
        registry.dir().to_path_buf(),
        registry.pid(),
    );
    assert!(dir.join("config.yml").is_file());
    drop(registry);
    assert!(!dir.exists(), "{} is left behind", dir.display());
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "registry pid {pid} still runs"
    );
    assert!(
        tokio::net::TcpStream::connect(&addr).await.is_err(),
        "{addr} still answers"
    );
    Ok(())
}

#[tokio::test]
async fn htpasswd_registry_wants_the_credentials() -> TestResult {
    let registry = registry(RegistryOptions::new().htpasswd("olm", "s3cret pass")).await?;
    let credentials = registry.credentials().expect("credentials").clone();
    assert_eq!(credentials.username, "olm");

    let anonymous = get(&registry, "/v2/").await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
    let challenge = anonymous.header("www-authenticate");
    assert!(
        challenge.starts_with("Basic ") && challenge.contains(&format!("realm=\"{REALM}\"")),
        "{challenge}"
    );

    let mut wrong = credentials.clone();
    wrong.password.push('x');
    let refused = send(
        &registry,
        None,
        Method::GET,
        "/v2/",
        &[("authorization", wrong.basic_auth())],
        Vec::new(),
    )
    .await
    .expect("GET");
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);

    let allowed = send(
        &registry,
        None,
        Method::GET,
        "/v2/",
        &[("authorization", credentials.basic_auth())],
        Vec::new(),
    )
    .await
    .expect("GET");
    assert_eq!(allowed.status, StatusCode::OK);
    Ok(())
}

#[tokio::test]
async fn tls_registry_is_verified_by_its_ca_pem() -> TestResult {
    let registry = registry(RegistryOptions::new().tls()).await?;
    assert_eq!(registry.url(), format!("https://{}", registry.addr()));
    let ca_pem = registry
        .ca_pem()
        .expect("a TLS registry has a CA")
        .to_owned();
    assert_eq!(
        std::fs::read_to_string(registry.ca_file().expect("CA file")).expect("read CA file"),
        ca_pem
    );
    let trusted = tls_trusting(&ca_pem);
    for name in ["127.0.0.1", "localhost"] {
        let reply = send(
            &registry,
            Some((&trusted, name)),
            Method::GET,
            "/v2/",
            &[],
            Vec::new(),
        )
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(reply.status, StatusCode::OK, "{name}");
    }

    let other_ca = CertificateAuthority::new("not-the-registry-ca").expect("CA");
    let untrusted = tls_trusting(other_ca.cert_pem());
    let err = send(
        &registry,
        Some((&untrusted, "localhost")),
        Method::GET,
        "/v2/",
        &[],
        Vec::new(),
    )
    .await
    .err()
    .expect("another CA does not verify the registry");
    assert!(err.contains("TLS handshake"), "{err}");
    // Nor does plain HTTP reach it.
    let plain = send(&registry, None, Method::GET, "/v2/", &[], Vec::new()).await;
    assert!(plain.map(|r| r.status != StatusCode::OK).unwrap_or(true));
    Ok(())
}
