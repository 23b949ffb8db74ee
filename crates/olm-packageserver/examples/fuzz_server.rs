//! The package server's HTTPS API over one catalog directory, without a cluster, for the
//! schema fuzzing of fuzz/http/run.sh: the same router and TLS layer as `olm packageserver`,
//! with a front-proxy CA of its own instead of the cluster's, and every caller allowed.
//!
//!   cargo run -p olm-packageserver --example fuzz_server -- DIR ADDR CERT_DIR
//!
//! Writes into CERT_DIR `serving-ca.pem` (to verify the server), `client.pem` and
//! `client-key.pem` (the front proxy's client certificate: present it and send
//! `X-Remote-User`, as kube-apiserver does), then prints `listening on https://ADDR` and
//! serves until killed. DIR's packages are served from CatalogSource `olm/community` (visible
//! in every namespace); a second CatalogSource, `team-a/broken`, is failing, so lists in
//! team-a carry a warning.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use olm_packageserver::http::{AllowAll, Authentication, router};
use olm_packageserver::serve::{HttpsServer, RequestHeaderConfig, self_signed};
use olm_pki::{CertificateAuthority, Date, Leaf, Subject, Usage, Validity};

// The store the API tests use.
#[path = "../tests/support/fixture.rs"]
mod fixture;

const FRONT_PROXY_CN: &str = "front-proxy-client";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, addr, cert_dir] = args.as_slice() else {
        return Err("usage: fuzz_server DIR ADDR CERT_DIR".into());
    };
    let addr: SocketAddr = addr.parse().map_err(|e| format!("ADDR {addr:?} is not host:port: {e}"))?;
    let cert_dir = PathBuf::from(cert_dir);
    std::fs::create_dir_all(&cert_dir)?;

    let (catalog, problems) = olm_catalog::load::load_fbc(std::path::Path::new(dir)).map_err(|e| format!("catalog {dir}: {e}"))?;
    if !problems.is_empty() {
        eprintln!("catalog {dir} has {} problem(s); the packages that have none are served", problems.len());
    }
    let store = fixture::store_with(&catalog);

    let (serving_ca, serving) = self_signed(&[addr.ip().to_string(), "localhost".into()])?;
    let validity = Validity { not_before: Date::new(1975, 1, 1), not_after: Date::new(2036, 1, 1) };
    let front_proxy_ca = CertificateAuthority::new(&Subject::new("fuzz-front-proxy-ca"), validity)?;
    let client = front_proxy_ca.issue(&Leaf {
        subject: Subject::new(FRONT_PROXY_CN),
        names: vec![],
        usage: Usage::Client,
        key_encipherment: false,
        validity,
    })?;
    std::fs::write(cert_dir.join("serving-ca.pem"), serving_ca)?;
    std::fs::write(cert_dir.join("client.pem"), client.cert_pem)?;
    std::fs::write(cert_dir.join("client-key.pem"), client.key_pem)?;

    let requestheader =
        RequestHeaderConfig { client_ca_pem: front_proxy_ca.cert_pem().to_owned(), allowed_names: vec![FRONT_PROXY_CN.into()] };
    let server = HttpsServer::bind(addr, &serving, Some(&requestheader)).await?;
    let app = router(store, Arc::new(AllowAll), Authentication::RequestHeader);
    println!("listening on https://{}", server.local_addr().unwrap_or(addr));
    server.serve(app, std::future::pending()).await;
    Ok(())
}
