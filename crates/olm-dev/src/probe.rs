//! Minimal blocking HTTP(S) GET on loopback for health checks: no HTTP client library needed for
//! one request line and one status line.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::ClientConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, IpAddr as PkiIpAddr, ServerName};

/// A TLS client configuration trusting only the CA in `ca_file`.
pub(crate) fn tls_config(ca_file: &Path) -> Result<Arc<ClientConfig>, String> {
    let ca = CertificateDer::from_pem_file(ca_file)
        .map_err(|e| format!("cannot read CA certificate {}: {e}", ca_file.display()))?;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(ca)
        .map_err(|e| format!("bad CA certificate {}: {e}", ca_file.display()))?;
    let config =
        ClientConfig::builder_with_provider(rustls::crypto::ring::default_provider().into())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
    Ok(Arc::new(config))
}

/// GETs `path` from `127.0.0.1:port` and returns the status code and body (body decoding is not
/// needed: health endpoints answer with a short `ok`).
pub(crate) fn get(
    port: u16,
    path: &str,
    tls: Option<&Arc<ClientConfig>>,
) -> Result<(u16, String), String> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut tcp = TcpStream::connect_timeout(&addr, Duration::from_secs(1))
        .map_err(|e| format!("connect {addr}: {e}"))?;
    let timeout = Some(Duration::from_secs(3));
    let _ = tcp.set_read_timeout(timeout);
    let _ = tcp.set_write_timeout(timeout);
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUser-Agent: olm-dev\r\nAccept: */*\r\nConnection: close\r\n\r\n"
    );
    let mut response = Vec::new();
    let read_result = match tls {
        None => {
            tcp.write_all(request.as_bytes())
                .map_err(|e| format!("send to {addr}: {e}"))?;
            tcp.read_to_end(&mut response)
        }
        Some(config) => {
            let name =
                ServerName::IpAddress(PkiIpAddr::from(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST)));
            let mut conn = rustls::ClientConnection::new(config.clone(), name)
                .map_err(|e| format!("TLS to {addr}: {e}"))?;
            let mut stream = rustls::Stream::new(&mut conn, &mut tcp);
            stream
                .write_all(request.as_bytes())
                .map_err(|e| format!("TLS to {addr}: {e}"))?;
            stream.read_to_end(&mut response)
        }
    };
    // Servers may close without a TLS close_notify; whatever arrived is still a valid answer.
    if let Err(e) = read_result
        && response.is_empty()
    {
        return Err(format!("read from {addr}: {e}"));
    }
    let text = String::from_utf8_lossy(&response);
    let status_line = text.lines().next().unwrap_or("");
    let code = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse::<u16>().ok())
        .ok_or_else(|| format!("no HTTP status line from {addr}: {status_line:?}"))?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.trim().to_string())
        .unwrap_or_default();
    Ok((code, body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn plain_http_status_and_body() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut buf = [0u8; 1024];
            let _ = conn.read(&mut buf).unwrap();
            conn.write_all(
                b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 9\r\n\r\nnot ready",
            )
            .unwrap();
        });
        let (code, body) = get(port, "/healthz", None).unwrap();
        server.join().unwrap();
        assert_eq!(code, 503);
        assert_eq!(body, "not ready");
    }

    #[test]
    fn closed_port_is_an_error() {
        let port = {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let err = get(port, "/healthz", None).unwrap_err();
        assert!(err.contains("connect"), "{err}");
    }
}
