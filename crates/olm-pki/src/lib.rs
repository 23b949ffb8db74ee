//! Certificate authorities and the certificates they issue, generated in-process with rcgen
//! (ECDSA P-256, PEM encoded): the one place OLM makes certificates. Callers keep their policy
//! (names, validity, where the PEM goes); this crate keeps the X.509 profile:
//!
//! - a CA: `basicConstraints CA:TRUE` (no path length), key usages keyCertSign, cRLSign and
//!   digitalSignature;
//! - a leaf: `basicConstraints CA:FALSE`, digitalSignature (and keyEncipherment when asked),
//!   extended key usage serverAuth or clientAuth, an authority key identifier, and subject
//!   alternative names checked to be IP addresses or DNS names.
//!
//! Subjects are written organization(s) first, then the common name (as Go's `crypto/x509` does).
//! [`inspect_pem`] and [`inspect_der`] read back what a certificate says about itself.

mod inspect;

use std::net::IpAddr;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};

pub use inspect::{CertInfo, inspect_der, inspect_pem};

/// Generating a key or certificate failed (rcgen refused the parameters, or a name is malformed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot generate the {what}: {reason}")]
pub struct PkiError {
    /// What was being generated: `CA <common name>`, `certificate <common name>`, `key pair`.
    pub what: String,
    /// Why it failed.
    pub reason: String,
}

/// Shorthand for results of this crate.
pub type Result<T, E = PkiError> = std::result::Result<T, E>;

fn pki_error(what: &str, err: impl std::fmt::Display) -> PkiError {
    PkiError {
        what: what.to_string(),
        reason: err.to_string(),
    }
}

/// A calendar day; certificate validity starts and ends at its midnight, UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Date {
    pub year: i32,
    /// 1 to 12.
    pub month: u8,
    /// 1 to the month's length.
    pub day: u8,
}

impl Date {
    pub const fn new(year: i32, month: u8, day: u8) -> Self {
        Date { year, month, day }
    }

    fn is_valid(self) -> bool {
        let leap = (self.year % 4 == 0 && self.year % 100 != 0) || self.year % 400 == 0;
        let days = match self.month {
            1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
            4 | 6 | 9 | 11 => 30,
            2 if leap => 29,
            2 => 28,
            _ => return false,
        };
        (1..=days).contains(&self.day) && (-9999..=9999).contains(&self.year)
    }
}

/// The period a certificate is valid: from midnight UTC of `not_before` to midnight UTC of
/// `not_after`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validity {
    pub not_before: Date,
    pub not_after: Date,
}

impl Validity {
    fn apply(self, params: &mut CertificateParams, what: &str) -> Result<()> {
        for date in [self.not_before, self.not_after] {
            if !date.is_valid() {
                return Err(pki_error(what, format!("{date:?} is not a calendar date")));
            }
        }
        if self.not_after < self.not_before {
            return Err(pki_error(what, format!("validity ends ({:?}) before it starts ({:?})", self.not_after, self.not_before)));
        }
        let day = |d: Date| rcgen::date_time_ymd(d.year, d.month, d.day);
        params.not_before = day(self.not_before);
        params.not_after = day(self.not_after);
        Ok(())
    }
}

/// A certificate's subject: common name and organizations (Kubernetes reads a client
/// certificate's user from CN and its groups from O).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    pub common_name: String,
    pub organizations: Vec<String>,
}

impl Subject {
    /// A subject with only a common name.
    pub fn new(common_name: impl Into<String>) -> Self {
        Subject {
            common_name: common_name.into(),
            organizations: Vec::new(),
        }
    }

    /// The same subject with `organizations`.
    pub fn with_organizations<S: Into<String>>(mut self, organizations: impl IntoIterator<Item = S>) -> Self {
        self.organizations = organizations.into_iter().map(Into::into).collect();
        self
    }

    fn distinguished_name(&self) -> DistinguishedName {
        let mut dn = DistinguishedName::new();
        for org in &self.organizations {
            dn.push(DnType::OrganizationName, org.as_str());
        }
        dn.push(DnType::CommonName, self.common_name.as_str());
        dn
    }
}

/// What a leaf certificate authenticates (its extended key usage).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    /// A TLS server (`serverAuth`).
    Server,
    /// A TLS client (`clientAuth`).
    Client,
}

/// A leaf certificate to issue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leaf {
    pub subject: Subject,
    /// Subject alternative names: IP addresses or DNS names (a leading `*` label allowed).
    pub names: Vec<String>,
    pub usage: Usage,
    /// Also allow keyEncipherment (upstream OLM's serving pairs carry it; meaningless for ECDSA
    /// keys, kept so the certificates read as before).
    pub key_encipherment: bool,
    pub validity: Validity,
}

/// A PEM certificate and its PEM (PKCS#8) private key.
#[derive(Clone, PartialEq, Eq)]
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

/// A key pair in PEM: the PKCS#8 private key and the SubjectPublicKeyInfo public key.
#[derive(Clone, PartialEq, Eq)]
pub struct KeyPairPem {
    pub private_pem: String,
    pub public_pem: String,
}

impl std::fmt::Debug for KeyPairPem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyPairPem")
            .field("public_pem", &self.public_pem)
            .finish_non_exhaustive()
    }
}

/// A fresh ECDSA P-256 key pair (e.g. for signing service-account tokens).
pub fn key_pair() -> Result<KeyPairPem> {
    let key = KeyPair::generate().map_err(|e| pki_error("key pair", e))?;
    Ok(KeyPairPem {
        private_pem: key.serialize_pem(),
        public_pem: key.public_key_pem(),
    })
}

/// A self-signed certificate authority that issues server and client certificates.
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

impl CertificateAuthority {
    /// A new self-signed CA with a fresh key.
    pub fn new(subject: &Subject, validity: Validity) -> Result<Self> {
        let what = format!("CA {}", subject.common_name);
        let mut params = CertificateParams::default();
        validity.apply(&mut params, &what)?;
        params.distinguished_name = subject.distinguished_name();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().map_err(|e| pki_error(&what, e))?;
        let cert = params.self_signed(&key).map_err(|e| pki_error(&what, e))?;
        Ok(CertificateAuthority {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            issuer: Issuer::new(params, key),
        })
    }

    /// A CA written earlier (e.g. by [`CertificateAuthority::new`] into files), from its PEM
    /// certificate and PEM private key, so that certificates issued later chain to the same root.
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Self> {
        let key = KeyPair::from_pem(key_pem).map_err(|e| pki_error("CA key", e))?;
        let issuer =
            Issuer::from_ca_cert_pem(cert_pem, key).map_err(|e| pki_error("CA certificate", e))?;
        Ok(CertificateAuthority {
            issuer,
            cert_pem: cert_pem.to_string(),
            key_pem: key_pem.to_string(),
        })
    }

    /// The CA certificate (what clients trust: a `caBundle`, `ca.crt`).
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The CA's private key.
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    /// A certificate for `leaf` with a fresh key, signed by this CA.
    pub fn issue(&self, leaf: &Leaf) -> Result<IssuedCert> {
        let what = format!("certificate {}", leaf.subject.common_name);
        let mut params = CertificateParams::default();
        leaf.validity.apply(&mut params, &what)?;
        params.distinguished_name = leaf.subject.distinguished_name();
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        if leaf.key_encipherment {
            params.key_usages.push(KeyUsagePurpose::KeyEncipherment);
        }
        params.extended_key_usages = vec![match leaf.usage {
            Usage::Server => ExtendedKeyUsagePurpose::ServerAuth,
            Usage::Client => ExtendedKeyUsagePurpose::ClientAuth,
        }];
        params.use_authority_key_identifier_extension = true;
        params.subject_alt_names = leaf
            .names
            .iter()
            .map(|n| san(n, &what))
            .collect::<Result<Vec<_>>>()?;
        let key = KeyPair::generate().map_err(|e| pki_error(&what, e))?;
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(|e| pki_error(&what, e))?;
        Ok(IssuedCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
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

#[cfg(test)]
mod tests;
