//! Reading back what a certificate says about itself (x509-parser).

use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;

/// The parts of a certificate OLM looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertInfo {
    /// The subject's first common name.
    pub common_name: Option<String>,
    /// The subject's organizations.
    pub organizations: Vec<String>,
    /// DNS names and IP addresses among the subject alternative names.
    pub names: Vec<String>,
    /// Start of validity, seconds since the Unix epoch.
    pub not_before: i64,
    /// End of validity, seconds since the Unix epoch.
    pub not_after: i64,
    /// `basicConstraints CA:TRUE`.
    pub is_ca: bool,
}

impl CertInfo {
    /// Whether the certificate is valid at `unix_secs`.
    pub fn valid_at(&self, unix_secs: i64) -> bool {
        (self.not_before..=self.not_after).contains(&unix_secs)
    }
}

/// Reads a DER certificate; `None` when it is not one.
pub fn inspect_der(der: &[u8]) -> Option<CertInfo> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    Some(info(&cert))
}

/// Reads the first certificate of a PEM text; `None` when there is none.
pub fn inspect_pem(pem: &str) -> Option<CertInfo> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).ok()?;
    inspect_der(&pem.contents)
}

fn info(cert: &X509Certificate<'_>) -> CertInfo {
    let subject = cert.subject();
    let text = |attr: &x509_parser::x509::AttributeTypeAndValue<'_>| attr.as_str().ok().map(str::to_owned);
    let names = cert
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|ext| {
            ext.value
                .general_names
                .iter()
                .filter_map(|name| match name {
                    GeneralName::DNSName(dns) => Some((*dns).to_owned()),
                    GeneralName::IPAddress(bytes) => ip_text(bytes),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    CertInfo {
        common_name: subject.iter_common_name().next().and_then(text),
        organizations: subject.iter_organization().filter_map(text).collect(),
        names,
        not_before: cert.validity().not_before.timestamp(),
        not_after: cert.validity().not_after.timestamp(),
        is_ca: cert.is_ca(),
    }
}

fn ip_text(bytes: &[u8]) -> Option<String> {
    let ip: std::net::IpAddr = match bytes.len() {
        4 => <[u8; 4]>::try_from(bytes).ok()?.into(),
        16 => <[u8; 16]>::try_from(bytes).ok()?.into(),
        _ => return None,
    };
    Some(ip.to_string())
}
