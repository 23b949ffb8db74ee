//! HTTPS serving: the serving certificate, and client certificates checked against the
//! front-proxy (requestheader) CA so that `X-Remote-*` headers are trusted only from
//! kube-apiserver. Each request carries a [`FrontProxy`] extension with the verdict.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::RootCertStore;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt as _;

use crate::error::Error;
use crate::http::FrontProxy;

/// Who may act as the front proxy.
#[derive(Clone, Debug, Default)]
pub struct RequestHeaderConfig {
    /// PEM of the CA(s) that sign the front proxy's client certificate
    /// (`requestheader-client-ca-file` of `kube-system/extension-apiserver-authentication`).
    pub client_ca_pem: String,
    /// Allowed common names (`requestheader-allowed-names`); empty: any certificate of the CA.
    pub allowed_names: Vec<String>,
}

/// Serving certificate and key (PEM).
#[derive(Clone, Debug)]
pub struct ServingCert {
    /// Certificate chain.
    pub cert_pem: String,
    /// Private key.
    pub key_pem: String,
}

fn tls_config(serving: &ServingCert, requestheader: Option<&RequestHeaderConfig>) -> Result<rustls::ServerConfig, Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(serving.cert_pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| Error::Tls(format!("serving certificate is not PEM: {e}")))?;
    if certs.is_empty() {
        return Err(Error::Tls("serving certificate file holds no certificate".into()));
    }
    let key = PrivateKeyDer::from_pem_slice(serving.key_pem.as_bytes())
        .map_err(|e| Error::Tls(format!("serving key is not a PEM private key: {e}")))?;
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Tls(e.to_string()))?;
    let builder = match requestheader {
        Some(rh) => {
            let mut roots = RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(rh.client_ca_pem.as_bytes()) {
                let cert = cert.map_err(|e| Error::Tls(format!("requestheader client CA is not PEM: {e}")))?;
                roots.add(cert).map_err(|e| Error::Tls(format!("requestheader client CA unusable: {e}")))?;
            }
            // Unauthenticated connections are accepted (health probes); their requests get 401.
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .allow_unauthenticated()
                .build()
                .map_err(|e| Error::Tls(format!("requestheader client CA unusable: {e}")))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_single_cert(certs, key).map_err(|e| Error::Tls(format!("serving certificate and key do not match: {e}")))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// A bound HTTPS server.
pub struct HttpsServer {
    listener: TcpListener,
    acceptor: TlsAcceptor,
    allowed_names: Option<Vec<String>>,
}

impl HttpsServer {
    /// Bind `addr` with the serving certificate; `requestheader` enables front-proxy trust.
    pub async fn bind(addr: SocketAddr, serving: &ServingCert, requestheader: Option<&RequestHeaderConfig>) -> Result<HttpsServer, Error> {
        let config = tls_config(serving, requestheader)?;
        let listener = TcpListener::bind(addr).await.map_err(|e| Error::Bind { addr, message: e.to_string() })?;
        Ok(HttpsServer {
            listener,
            acceptor: TlsAcceptor::from(Arc::new(config)),
            allowed_names: requestheader.map(|r| r.allowed_names.clone()),
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Serve `router` until `shutdown` resolves.
    pub async fn serve(self, router: Router, shutdown: impl std::future::Future<Output = ()> + Send) {
        let HttpsServer { listener, acceptor, allowed_names } = self;
        let allowed_names = Arc::new(allowed_names);
        tokio::pin!(shutdown);
        loop {
            let accepted = tokio::select! {
                () = &mut shutdown => break,
                accepted = listener.accept() => accepted,
            };
            let Ok((tcp, _peer)) = accepted else {
                // Out of file descriptors and the like: do not spin.
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            };
            let acceptor = acceptor.clone();
            let router = router.clone();
            let allowed_names = allowed_names.clone();
            tokio::spawn(async move {
                let tls = match tokio::time::timeout(std::time::Duration::from_secs(10), acceptor.accept(tcp)).await {
                    Ok(Ok(tls)) => tls,
                    Ok(Err(err)) => {
                        tracing::debug!(error = %err, "TLS handshake failed");
                        return;
                    }
                    Err(_) => return,
                };
                let front_proxy = match (allowed_names.as_ref(), tls.get_ref().1.peer_certificates()) {
                    (Some(names), Some([leaf, ..])) => {
                        names.is_empty() || olm_pki::inspect_der(leaf).and_then(|info| info.common_name).is_some_and(|cn| names.contains(&cn))
                    }
                    _ => false,
                };
                let service = hyper::service::service_fn(move |mut request: hyper::Request<hyper::body::Incoming>| {
                    request.extensions_mut().insert(FrontProxy(front_proxy));
                    router.clone().oneshot(request.map(axum::body::Body::new))
                });
                if let Err(err) = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), service)
                    .await
                {
                    tracing::debug!(error = %err, "connection ended with an error");
                }
            });
        }
    }
}

/// A self-signed CA and a serving certificate for `names`, PEM: (ca, cert, key). Valid from
/// 1975-01-01 (rcgen's default start, kept) to 2036-01-01; the CN is the first name.
pub fn self_signed(names: &[String]) -> Result<(String, ServingCert), Error> {
    use olm_pki::{CertificateAuthority, Date, Leaf, Subject, Usage, Validity};
    let fail = |e: olm_pki::PkiError| Error::Tls(format!("cannot generate a certificate: {}", e.reason));
    let validity = Validity { not_before: Date::new(1975, 1, 1), not_after: Date::new(2036, 1, 1) };
    let ca = CertificateAuthority::new(&Subject::new("olm-packageserver-ca"), validity).map_err(fail)?;
    let cert = ca
        .issue(&Leaf {
            subject: Subject::new(names.first().cloned().unwrap_or_else(|| "packageserver".into())),
            names: names.to_vec(),
            usage: Usage::Server,
            key_encipherment: true,
            validity,
        })
        .map_err(fail)?;
    Ok((ca.cert_pem().to_owned(), ServingCert { cert_pem: cert.cert_pem, key_pem: cert.key_pem }))
}
