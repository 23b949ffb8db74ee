//! Certificates and keys for the local control plane (olm-pki: ECDSA P-256, PEM): which files,
//! which names, and the validity policy.

use std::net::Ipv4Addr;
use std::time::{SystemTime, UNIX_EPOCH};

use olm_pki::{Date, Leaf, PkiError, Subject, Usage, Validity};

use crate::error::{DevError, Result};
use crate::layout::{FIRST_SERVICE_IP, Layout, create_dir_all, write_private};

/// A PEM certificate and its PEM (PKCS#8) private key.
pub use olm_pki::IssuedCert;

/// A small certificate authority that issues server and client certificates. Used for the
/// control plane and by tests that need a host HTTPS server trusted through a `caBundle`.
/// [`olm_pki::CertificateAuthority`] with the control plane's policy: every certificate is
/// valid from a year ago to ten years ahead; leaves allow digitalSignature only.
#[derive(Debug)]
pub struct CertificateAuthority(olm_pki::CertificateAuthority);

fn dev_error(err: PkiError) -> DevError {
    DevError::Pki {
        what: err.what,
        reason: err.reason,
    }
}

/// Validity from a year ago (clock skew between tools never matters) to ten years ahead.
fn validity() -> Validity {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    // Year granularity is enough here; 365.2425 days per Gregorian year.
    let year = 1970 + (secs as f64 / (365.2425 * 86400.0)) as i32;
    Validity {
        not_before: Date::new(year - 1, 1, 1),
        not_after: Date::new(year + 10, 1, 1),
    }
}

impl CertificateAuthority {
    /// A new self-signed CA.
    pub fn new(common_name: &str) -> Result<Self> {
        olm_pki::CertificateAuthority::new(&Subject::new(common_name), validity())
            .map(CertificateAuthority)
            .map_err(dev_error)
    }

    /// The cluster CA of `layout` (`pki/ca.crt`, `pki/ca.key`), to issue more certificates
    /// that the API server and kubelets trust.
    pub fn cluster_ca(layout: &Layout) -> Result<Self> {
        let read = |name: &str| {
            let path = layout.pki_file(name);
            std::fs::read_to_string(&path).map_err(|e| DevError::io("read", &path, e))
        };
        olm_pki::CertificateAuthority::from_pem(&read("ca.crt")?, &read("ca.key")?)
            .map(CertificateAuthority)
            .map_err(dev_error)
    }

    pub fn cert_pem(&self) -> &str {
        self.0.cert_pem()
    }

    pub fn key_pem(&self) -> &str {
        self.0.key_pem()
    }

    fn issue(
        &self,
        common_name: &str,
        organizations: &[&str],
        names: &[&str],
        usage: Usage,
    ) -> Result<IssuedCert> {
        self.0
            .issue(&Leaf {
                subject: Subject::new(common_name).with_organizations(organizations.iter().copied()),
                names: names.iter().map(|n| n.to_string()).collect(),
                usage,
                key_encipherment: false,
                validity: validity(),
            })
            .map_err(dev_error)
    }

    /// A TLS server certificate for the given DNS names and IP addresses.
    pub fn issue_server(&self, common_name: &str, names: &[&str]) -> Result<IssuedCert> {
        self.issue(common_name, &[], names, Usage::Server)
    }

    /// A TLS client certificate; Kubernetes reads the user from CN and groups from O.
    pub fn issue_client(&self, common_name: &str, groups: &[&str]) -> Result<IssuedCert> {
        self.issue(common_name, groups, &[], Usage::Client)
    }
}

/// Every file in `pki/`. Regenerated together when any is missing.
pub const PKI_FILES: [&str; 15] = [
    "ca.crt",
    "ca.key",
    "apiserver.crt",
    "apiserver.key",
    "admin.crt",
    "admin.key",
    "front-proxy-ca.crt",
    "front-proxy-ca.key",
    "front-proxy-client.crt",
    "front-proxy-client.key",
    "components.crt",
    "components.key",
    "sa.key",
    "sa.pub",
    "README.txt",
];

/// Subject alternative names of the API server's serving certificate.
pub fn apiserver_names() -> Vec<String> {
    let first_service_ip = Ipv4Addr::from(FIRST_SERVICE_IP).to_string();
    vec![
        "localhost".into(),
        "kubernetes".into(),
        "kubernetes.default".into(),
        "kubernetes.default.svc".into(),
        "kubernetes.default.svc.cluster.local".into(),
        "127.0.0.1".into(),
        first_service_ip,
    ]
}

/// The user name in the admin client certificate.
pub const ADMIN_USER: &str = "olm-dev-admin";
/// The CN the API server presents to aggregated API servers; listed in `--requestheader-allowed-names`.
pub const FRONT_PROXY_CLIENT_NAME: &str = "front-proxy-client";

/// Writes the certificates unless they all exist already. Returns whether new ones were made.
pub fn ensure_pki(layout: &Layout) -> Result<bool> {
    let dir = layout.pki_dir();
    if PKI_FILES.iter().all(|f| dir.join(f).is_file()) {
        return Ok(false);
    }
    create_dir_all(&dir)?;
    let ca = CertificateAuthority::new("olm-dev-ca")?;
    let names = apiserver_names();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let apiserver = ca.issue_server("kube-apiserver", &names)?;
    let admin = ca.issue_client(ADMIN_USER, &["system:masters"])?;
    let components = ca.issue_server("olm-dev-components", &["localhost", "127.0.0.1"])?;
    let front_proxy_ca = CertificateAuthority::new("olm-dev-front-proxy-ca")?;
    let front_proxy_client = front_proxy_ca.issue_client(FRONT_PROXY_CLIENT_NAME, &[])?;
    let sa_key = olm_pki::key_pair().map_err(|e| DevError::Pki {
        what: "service-account key".into(),
        reason: e.reason,
    })?;

    let files: [(&str, &str); 14] = [
        ("ca.crt", ca.cert_pem()),
        ("ca.key", ca.key_pem()),
        ("apiserver.crt", &apiserver.cert_pem),
        ("apiserver.key", &apiserver.key_pem),
        ("admin.crt", &admin.cert_pem),
        ("admin.key", &admin.key_pem),
        ("front-proxy-ca.crt", front_proxy_ca.cert_pem()),
        ("front-proxy-ca.key", front_proxy_ca.key_pem()),
        ("front-proxy-client.crt", &front_proxy_client.cert_pem),
        ("front-proxy-client.key", &front_proxy_client.key_pem),
        ("components.crt", &components.cert_pem),
        ("components.key", &components.key_pem),
        ("sa.key", &sa_key.private_pem),
        ("sa.pub", &sa_key.public_pem),
    ];
    for (name, content) in files {
        write_private(&dir.join(name), content)?;
    }
    write_private(
        &dir.join("README.txt"),
        "Generated by `olm dev cluster up`. Delete this directory (or run `olm dev cluster down --purge`) to regenerate.\n\
         ca: cluster CA (serving, client and components certs); front-proxy-ca: aggregation client CA;\n\
         sa.key/sa.pub: service-account token signing keys. etcd listens on plain HTTP on 127.0.0.1 only.\n",
    )?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::client::danger::ServerCertVerifier;
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

    #[test]
    fn issued_server_certificate_verifies_against_its_ca() {
        let ca = CertificateAuthority::new("test-ca").unwrap();
        let server = ca
            .issue_server("svc", &["svc.ns.svc", "127.0.0.1"])
            .unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(ca.cert_pem().as_bytes()).unwrap())
            .unwrap();
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            roots.into(),
            rustls::crypto::ring::default_provider().into(),
        )
        .build()
        .unwrap();
        let leaf = CertificateDer::from_pem_slice(server.cert_pem.as_bytes()).unwrap();
        let now = UnixTime::now();
        for name in ["svc.ns.svc", "127.0.0.1"] {
            verifier
                .verify_server_cert(&leaf, &[], &ServerName::try_from(name).unwrap(), &[], now)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        assert!(
            verifier
                .verify_server_cert(
                    &leaf,
                    &[],
                    &ServerName::try_from("other.ns.svc").unwrap(),
                    &[],
                    now
                )
                .is_err()
        );
    }

    #[test]
    fn pki_is_written_once() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout {
            cache_dir: dir.path().join("cache"),
            state_dir: dir.path().join("state"),
            ports: Default::default(),
            host_ports: Default::default(),
        };
        assert!(ensure_pki(&layout).unwrap());
        let first = std::fs::read_to_string(layout.pki_file("ca.crt")).unwrap();
        assert!(!ensure_pki(&layout).unwrap());
        assert_eq!(
            first,
            std::fs::read_to_string(layout.pki_file("ca.crt")).unwrap()
        );
        assert!(
            std::fs::read_to_string(layout.pki_file("sa.pub"))
                .unwrap()
                .contains("PUBLIC KEY")
        );
    }

    #[test]
    fn bad_dns_name_is_reported() {
        let ca = CertificateAuthority::new("test-ca").unwrap();
        let err = ca.issue_server("x", &["not a name"]).unwrap_err();
        assert_eq!(err.category(), "CertificateError");
    }
}
