use std::sync::Arc;

use rustls::client::danger::ServerCertVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

use super::*;

/// 2024-01-01T00:00:00Z and 2034-01-01T00:00:00Z.
const JAN_2024: i64 = 1_704_067_200;
const JAN_2034: i64 = 2_019_686_400;

fn decade() -> Validity {
    Validity {
        not_before: Date::new(2024, 1, 1),
        not_after: Date::new(2034, 1, 1),
    }
}

fn server(cn: &str, names: &[&str]) -> Leaf {
    Leaf {
        subject: Subject::new(cn),
        names: names.iter().map(|n| n.to_string()).collect(),
        usage: Usage::Server,
        key_encipherment: false,
        validity: decade(),
    }
}

fn der(pem: &str) -> CertificateDer<'static> {
    CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()
}

fn roots(ca: &CertificateAuthority) -> Arc<rustls::RootCertStore> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(der(ca.cert_pem())).unwrap();
    Arc::new(roots)
}

/// A time inside [`decade`].
fn in_decade() -> UnixTime {
    UnixTime::since_unix_epoch(std::time::Duration::from_secs((JAN_2024 + 86_400) as u64))
}

#[test]
fn server_certificate_verifies_for_its_names_only() {
    let ca = CertificateAuthority::new(&Subject::new("test-ca"), decade()).unwrap();
    let cert = ca.issue(&server("svc", &["svc.ns.svc", "127.0.0.1"])).unwrap();
    let verifier =
        rustls::client::WebPkiServerVerifier::builder_with_provider(roots(&ca), rustls::crypto::ring::default_provider().into())
            .build()
            .unwrap();
    let leaf = der(&cert.cert_pem);
    for name in ["svc.ns.svc", "127.0.0.1"] {
        verifier
            .verify_server_cert(&leaf, &[], &ServerName::try_from(name).unwrap(), &[], in_decade())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    let other = ServerName::try_from("other.ns.svc").unwrap();
    assert!(verifier.verify_server_cert(&leaf, &[], &other, &[], in_decade()).is_err());
    // Outside its validity the same certificate is refused.
    let later = UnixTime::since_unix_epoch(std::time::Duration::from_secs((JAN_2034 + 86_400) as u64));
    let name = ServerName::try_from("svc.ns.svc").unwrap();
    assert!(verifier.verify_server_cert(&leaf, &[], &name, &[], later).is_err());
}

#[test]
fn client_certificate_carries_user_and_groups() {
    let ca = CertificateAuthority::new(&Subject::new("test-ca"), decade()).unwrap();
    let leaf = Leaf {
        subject: Subject::new("admin").with_organizations(["system:masters"]),
        names: Vec::new(),
        usage: Usage::Client,
        key_encipherment: false,
        validity: decade(),
    };
    let cert = ca.issue(&leaf).unwrap();
    let verifier =
        rustls::server::WebPkiClientVerifier::builder_with_provider(roots(&ca), rustls::crypto::ring::default_provider().into())
            .build()
            .unwrap();
    verifier.verify_client_cert(&der(&cert.cert_pem), &[], in_decade()).unwrap();
    let info = inspect_pem(&cert.cert_pem).unwrap();
    assert_eq!(info.common_name.as_deref(), Some("admin"));
    assert_eq!(info.organizations, vec!["system:masters".to_string()]);
    assert!(info.names.is_empty());
    // A client certificate does not serve.
    let server_verifier =
        rustls::client::WebPkiServerVerifier::builder_with_provider(roots(&ca), rustls::crypto::ring::default_provider().into())
            .build()
            .unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    assert!(server_verifier.verify_server_cert(&der(&cert.cert_pem), &[], &name, &[], in_decade()).is_err());
}

#[test]
fn validity_runs_from_midnight_to_midnight_utc() {
    let ca = CertificateAuthority::new(&Subject::new("test-ca"), decade()).unwrap();
    let cert = ca.issue(&server("svc", &["localhost"])).unwrap();
    for pem in [ca.cert_pem(), cert.cert_pem.as_str()] {
        let info = inspect_pem(pem).unwrap();
        assert_eq!((info.not_before, info.not_after), (JAN_2024, JAN_2034));
        assert!(info.valid_at(JAN_2024));
        assert!(info.valid_at(JAN_2034));
        assert!(!info.valid_at(JAN_2024 - 1));
        assert!(!info.valid_at(JAN_2034 + 1));
    }
}

#[test]
fn ca_and_leaf_profiles() {
    let ca = CertificateAuthority::new(&Subject::new("test-ca").with_organizations(["Red Hat, Inc."]), decade()).unwrap();
    let ca_info = inspect_pem(ca.cert_pem()).unwrap();
    assert!(ca_info.is_ca);
    assert_eq!(ca_info.common_name.as_deref(), Some("test-ca"));
    assert_eq!(ca_info.organizations, vec!["Red Hat, Inc.".to_string()]);

    let mut leaf = server("svc.ns.svc", &["svc", "svc.ns", "svc.ns.svc", "::1"]);
    leaf.key_encipherment = true;
    let cert = ca.issue(&leaf).unwrap();
    let info = inspect_pem(&cert.cert_pem).unwrap();
    assert!(!info.is_ca);
    assert_eq!(info.common_name.as_deref(), Some("svc.ns.svc"));
    assert_eq!(info.names, vec!["svc", "svc.ns", "svc.ns.svc", "::1"]);

    let der = der(&cert.cert_pem);
    let (_, parsed) = x509_parser::parse_x509_certificate(der.as_ref()).unwrap();
    let usage = parsed.key_usage().unwrap().unwrap().value;
    assert!(usage.digital_signature() && usage.key_encipherment() && !usage.key_cert_sign());
    let eku = parsed.extended_key_usage().unwrap().unwrap().value;
    assert!(eku.server_auth && !eku.client_auth);
    let constraints = parsed.basic_constraints().unwrap().unwrap().value;
    assert!(!constraints.ca);
    assert!(
        parsed
            .extensions()
            .iter()
            .any(|e| e.oid == x509_parser::oid_registry::OID_X509_EXT_AUTHORITY_KEY_IDENTIFIER)
    );

    let ca_der = CertificateDer::from_pem_slice(ca.cert_pem().as_bytes()).unwrap();
    let (_, parsed_ca) = x509_parser::parse_x509_certificate(ca_der.as_ref()).unwrap();
    let usage = parsed_ca.key_usage().unwrap().unwrap().value;
    assert!(usage.key_cert_sign() && usage.crl_sign() && usage.digital_signature() && !usage.key_encipherment());

    let plain = ca.issue(&server("svc", &["svc"])).unwrap();
    let plain_der = CertificateDer::from_pem_slice(plain.cert_pem.as_bytes()).unwrap();
    let (_, parsed) = x509_parser::parse_x509_certificate(plain_der.as_ref()).unwrap();
    assert!(!parsed.key_usage().unwrap().unwrap().value.key_encipherment());
}

#[test]
fn bad_names_and_dates_are_reported() {
    let ca = CertificateAuthority::new(&Subject::new("test-ca"), decade()).unwrap();
    let err = ca.issue(&server("x", &["not a name"])).unwrap_err();
    assert_eq!(err.what, "certificate x");
    assert!(err.reason.contains("neither an IP address nor a DNS name"), "{err}");
    for name in ["", "-a.b", "a..b", "a_b.c", &"x".repeat(64)] {
        assert!(ca.issue(&server("x", &[name])).is_err(), "{name:?}");
    }
    assert!(ca.issue(&server("x", &["*.ns.svc", "a-b.c1", "10.0.0.1"])).is_ok());

    let bad = Validity {
        not_before: Date::new(2023, 2, 29),
        not_after: Date::new(2030, 1, 1),
    };
    let err = CertificateAuthority::new(&Subject::new("c"), bad).unwrap_err();
    assert_eq!(err.what, "CA c");
    let backwards = Validity {
        not_before: Date::new(2030, 1, 1),
        not_after: Date::new(2024, 2, 29),
    };
    assert!(CertificateAuthority::new(&Subject::new("c"), backwards).is_err());
}

#[test]
fn key_pair_is_pem() {
    let pair = key_pair().unwrap();
    assert!(pair.private_pem.contains("BEGIN PRIVATE KEY"));
    assert!(pair.public_pem.contains("BEGIN PUBLIC KEY"));
    assert!(!format!("{pair:?}").contains("PRIVATE"));
}

#[test]
fn garbage_is_not_a_certificate() {
    assert_eq!(inspect_pem("no certificate here"), None);
    assert_eq!(inspect_der(b"\x30\x03\x02\x01\x00"), None);
}
