//! Certificates and keys for the local control plane, generated in-process with rcgen (ECDSA P-256).

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};

use crate::error::{DevError, Result};
use crate::layout::{FIRST_SERVICE_IP, Layout, create_dir_all};

/// A PEM certificate and its PEM (PKCS#8) private key.
#[derive(Clone)]
pub struct IssuedCert {
    pub cert_pem: String,
    pub key_pem: String,
}

impl std::fmt::Debug for IssuedCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuedCert")
            .field("cert_pem", &self.cert_pem)
            .finish_non_exhaustive()
    }
}

/// A small certificate authority that issues server and client certificates. Used for the
/// control plane and by tests that need a host HTTPS server trusted through a `caBundle`.
pub struct CertificateAuthority {
    issuer: Issuer<'static, KeyPair>,
    cert_pem: String,
    key_pem: String,
}

impl std::fmt::Debug for CertificateAuthority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertificateAuthority")
            .field("cert_pem", &self.cert_pem)
            .finish_non_exhaustive()
    }
}

fn pki_error(what: &str, err: impl std::fmt::Display) -> DevError {
    DevError::Pki {
        what: what.to_string(),
        reason: err.to_string(),
    }
}

/// Validity from a year ago (clock skew between tools never matters) to ten years ahead.
fn set_validity(params: &mut CertificateParams) {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    // Year granularity is enough here; 365.2425 days per Gregorian year.
    let year = 1970 + (secs as f64 / (365.2425 * 86400.0)) as i32;
    params.not_before = rcgen::date_time_ymd(year - 1, 1, 1);
    params.not_after = rcgen::date_time_ymd(year + 10, 1, 1);
}

fn distinguished_name(common_name: &str, organizations: &[&str]) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    for org in organizations {
        dn.push(DnType::OrganizationName, *org);
    }
    dn.push(DnType::CommonName, common_name);
    dn
}

/// Turns `localhost`, `127.0.0.1`, `svc.ns.svc` into DNS or IP subject alternative names.
fn san(name: &str, what: &str) -> Result<SanType> {
    Ok(match name.parse::<IpAddr>() {
        Ok(ip) => SanType::IpAddress(ip),
        Err(_) if !is_dns_name(name) => {
            return Err(pki_error(
                what,
                format!(
                    "{name:?} is neither an IP address nor a DNS name (letters, digits, '-', dot-separated labels)"
                ),
            ));
        }
        Err(_) => SanType::DnsName(
            name.to_string()
                .try_into()
                .map_err(|e| pki_error(what, format!("{name:?} is not a DNS name: {e}")))?,
        ),
    })
}

/// Dot-separated labels of letters, digits and '-' (a leading `*` label allowed for wildcards).
fn is_dns_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').enumerate().all(|(i, label)| {
            (i == 0 && label == "*")
                || (!label.is_empty()
                    && label.len() <= 63
                    && !label.starts_with('-')
                    && !label.ends_with('-')
                    && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
        })
}

impl CertificateAuthority {
    /// A new self-signed CA.
    pub fn new(common_name: &str) -> Result<Self> {
        let what = format!("CA {common_name}");
        let key = KeyPair::generate().map_err(|e| pki_error(&what, e))?;
        let mut params = CertificateParams::default();
        set_validity(&mut params);
        params.distinguished_name = distinguished_name(common_name, &[]);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).map_err(|e| pki_error(&what, e))?;
        let key_pem = key.serialize_pem();
        Ok(CertificateAuthority {
            cert_pem: cert.pem(),
            key_pem,
            issuer: Issuer::new(params, key),
        })
    }

    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    fn issue(
        &self,
        common_name: &str,
        organizations: &[&str],
        names: &[&str],
        usage: ExtendedKeyUsagePurpose,
    ) -> Result<IssuedCert> {
        let what = format!("certificate {common_name}");
        let key = KeyPair::generate().map_err(|e| pki_error(&what, e))?;
        let mut params = CertificateParams::default();
        set_validity(&mut params);
        params.distinguished_name = distinguished_name(common_name, organizations);
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![usage];
        params.use_authority_key_identifier_extension = true;
        params.subject_alt_names = names
            .iter()
            .map(|n| san(n, &what))
            .collect::<Result<Vec<_>>>()?;
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(|e| pki_error(&what, e))?;
        Ok(IssuedCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// A TLS server certificate for the given DNS names and IP addresses.
    pub fn issue_server(&self, common_name: &str, names: &[&str]) -> Result<IssuedCert> {
        self.issue(common_name, &[], names, ExtendedKeyUsagePurpose::ServerAuth)
    }

    /// A TLS client certificate; Kubernetes reads the user from CN and groups from O.
    pub fn issue_client(&self, common_name: &str, groups: &[&str]) -> Result<IssuedCert> {
        self.issue(
            common_name,
            groups,
            &[],
            ExtendedKeyUsagePurpose::ClientAuth,
        )
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
    let sa_key = KeyPair::generate().map_err(|e| pki_error("service-account key", e))?;

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
        ("sa.key", &sa_key.serialize_pem()),
        ("sa.pub", &sa_key.public_key_pem()),
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

/// Writes a file readable only by its owner (keys live next to certificates).
fn write_private(path: &Path, content: &str) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| DevError::io("create", path, e))?;
    file.write_all(content.as_bytes())
        .map_err(|e| DevError::io("write", path, e))
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
