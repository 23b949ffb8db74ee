//! Serving certificates for what an operator serves to the API server (admission and conversion
//! webhooks, APIServices): generating a CA and a pair for a Service, knowing when a stored pair
//! must be replaced, reading it from and writing it to its Secret, mounting it into the pods. One
//! place for OLM v0's CSV controller and OLM v1's ClusterExtension controller; [`generate`]
//! draws fresh keys, the rest is pure.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::DeploymentSpec;
use k8s_openapi::api::core::v1::{KeyToPath, Secret, SecretVolumeSource, Volume, VolumeMount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::{SignedDuration, Timestamp, tz::TimeZone};
use sha2::{Digest, Sha256};

/// Secret key holding the CA certificate (upstream's name).
pub const CA_KEY: &str = "olmCAKey";
/// Pod-template annotation with the CA hash: pods roll when the certificates change.
pub const CA_HASH_ANNOTATION: &str = "olmcahash";
/// How long generated certificates are valid (upstream: two years).
pub const CERT_VALIDITY: Duration = Duration::from_secs(730 * 24 * 3600);
/// Certificates are rotated this long before they expire.
pub const ROTATE_BEFORE: Duration = Duration::from_secs(24 * 3600);
/// Where APIService servers read their pair (files apiserver.crt / apiserver.key).
pub const APISERVICE_CERT_DIR: &str = "/apiserver.local.config/certificates";
/// Where controller-runtime webhook servers read their pair (tls.crt / tls.key).
pub const WEBHOOK_CERT_DIR: &str = "/tmp/k8s-webhook-server/serving-certs";
const APISERVICE_VOLUME: &str = "apiservice-cert";
const WEBHOOK_VOLUME: &str = "webhook-cert";

/// What a Deployment serves, hence which certificate mounts it gets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CertUses {
    /// It backs an owned APIService.
    pub api_service: bool,
    /// It backs an admission webhook.
    pub webhook: bool,
}

/// A CA and the serving pair it signed, PEM encoded.
#[derive(Clone, PartialEq, Eq)]
pub struct ServingCert {
    /// The CA certificate (the `caBundle`).
    pub ca_pem: String,
    /// The serving certificate.
    pub cert_pem: String,
    /// The serving private key.
    pub key_pem: String,
    /// Generated in this pass (not yet stored in the Secret).
    pub fresh: bool,
}

impl std::fmt::Debug for ServingCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServingCert")
            .field("ca_hash", &self.ca_hash())
            .field("fresh", &self.fresh)
            .finish_non_exhaustive()
    }
}

impl ServingCert {
    /// A short hash of the CA certificate.
    pub fn ca_hash(&self) -> String {
        hex::encode(Sha256::digest(self.ca_pem.as_bytes()))
    }
}

/// Certificate generation failed (rcgen refused the parameters, or a host name is malformed).
#[derive(Debug, thiserror::Error)]
#[error("cannot generate the serving certificate for Service {service}: {reason}")]
pub struct CertError {
    /// The Service the certificate is for.
    pub service: String,
    /// What olm-pki said.
    pub reason: String,
}

/// The Service name for a Deployment (dots become dashes, as upstream).
pub fn service_name(deployment: &str) -> String {
    format!("{}-service", deployment.replace('.', "-"))
}

/// The Secret holding the serving pair of a Deployment's Service.
pub fn secret_name(deployment: &str) -> String {
    format!("{}-cert", service_name(deployment))
}

/// Whether stored certificates must be replaced: missing, or due for rotation at `now`.
pub fn needs_rotation(stored: Option<&ServingCert>, rotate_at: Option<Timestamp>, now: Timestamp) -> bool {
    stored.is_none() || rotate_at.is_none_or(|at| at <= now)
}

/// Whether stored certificates can still serve `service` in `namespace` at `now`: the CA and
/// the serving certificate parse, are valid, are not within [`ROTATE_BEFORE`] of expiring, and
/// the certificate names the Service's host. Anything else (a Secret someone overwrote, a CA
/// that expired while OLM was down) is replaced, as upstream's rotation check does.
pub fn usable(stored: &ServingCert, service: &str, namespace: &str, now: Timestamp) -> bool {
    let (Some(ca), Some(cert)) = (olm_pki::inspect_pem(&stored.ca_pem), olm_pki::inspect_pem(&stored.cert_pem)) else {
        return false;
    };
    let at = now.as_second();
    let margin = i64::try_from(ROTATE_BEFORE.as_secs()).unwrap_or(i64::MAX);
    let host = format!("{service}.{namespace}.svc");
    [&ca, &cert].iter().all(|c| c.valid_at(at) && at < c.not_after.saturating_sub(margin)) && cert.names.iter().any(|n| *n == host)
}

/// The rotation time of certificates generated at `generated`.
pub fn rotate_at(generated: Timestamp) -> Timestamp {
    let validity = SignedDuration::try_from(CERT_VALIDITY.saturating_sub(ROTATE_BEFORE)).unwrap_or(SignedDuration::ZERO);
    generated.saturating_add(validity).unwrap_or(generated)
}

/// Generate a CA and a serving pair for `service` in `namespace`, valid from a day before `now`
/// for [`CERT_VALIDITY`], for the Service's in-cluster host names.
pub fn generate(service: &str, namespace: &str, now: Timestamp) -> Result<ServingCert, CertError> {
    use olm_pki::{CertificateAuthority, Date, Leaf, Subject, Usage, Validity};
    let err = |e: olm_pki::PkiError| CertError {
        service: format!("{namespace}/{service}"),
        reason: e.reason,
    };
    let day_of = |ts: Timestamp| {
        let date = ts.to_zoned(TimeZone::UTC).date();
        Date::new(i32::from(date.year()), date.month().unsigned_abs(), date.day().unsigned_abs())
    };
    let day = SignedDuration::from_hours(24);
    let lifetime = SignedDuration::try_from(CERT_VALIDITY).unwrap_or(SignedDuration::ZERO);
    let validity = Validity {
        not_before: day_of(now.saturating_sub(day).unwrap_or(now)),
        not_after: day_of(now.saturating_add(lifetime).unwrap_or(now)),
    };

    let ca_subject = Subject::new(format!("olm-selfsigned-{service}")).with_organizations(["Red Hat, Inc."]);
    let ca = CertificateAuthority::new(&ca_subject, validity).map_err(err)?;
    let hosts = vec![
        service.to_owned(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ];
    let cert = ca
        .issue(&Leaf {
            subject: Subject::new(hosts[2].clone()),
            names: hosts,
            usage: Usage::Server,
            key_encipherment: true,
            validity,
        })
        .map_err(err)?;
    Ok(ServingCert {
        ca_pem: ca.cert_pem().to_owned(),
        cert_pem: cert.cert_pem,
        key_pem: cert.key_pem,
        fresh: true,
    })
}

/// The pair stored in a Secret rendered by [`render_secret`], if complete.
pub fn from_secret(secret: &Secret) -> Option<ServingCert> {
    let data = secret.data.as_ref()?;
    let text = |key: &str| {
        data.get(key)
            .and_then(|v| String::from_utf8(v.0.clone()).ok())
            .filter(|s| !s.is_empty())
    };
    Some(ServingCert {
        ca_pem: text(CA_KEY)?,
        cert_pem: text("tls.crt")?,
        key_pem: text("tls.key")?,
        fresh: false,
    })
}

/// The Secret data of a pair: `tls.crt`, `tls.key` and the CA under [`CA_KEY`] (upstream's keys).
pub fn secret_data(cert: &ServingCert) -> BTreeMap<String, ByteString> {
    let bytes = |s: &str| ByteString(s.as_bytes().to_vec());
    BTreeMap::from([
        ("tls.crt".to_owned(), bytes(&cert.cert_pem)),
        ("tls.key".to_owned(), bytes(&cert.key_pem)),
        (CA_KEY.to_owned(), bytes(&cert.ca_pem)),
    ])
}

/// Mount the serving pair into every container of a Deployment and annotate the pod template
/// with the CA hash (so the spec hash, and the pods, change with the certificates). Both
/// volumes, `apiservice-cert` and `webhook-cert`, whatever the Deployment serves, as upstream
/// does: real operators rely on it (flink-kubernetes-operator serves webhooks only, and its
/// init container reads the pair from `apiservice-cert`).
pub fn mount_certs(spec: &mut DeploymentSpec, deployment: &str, uses: CertUses, cert: &ServingCert) {
    let secret = secret_name(deployment);
    let template_meta = spec.template.metadata.get_or_insert_with(ObjectMeta::default);
    template_meta
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(CA_HASH_ANNOTATION.to_owned(), cert.ca_hash());
    let Some(pod) = spec.template.spec.as_mut() else {
        return;
    };
    let item = |key: &str, path: &str| KeyToPath {
        key: key.to_owned(),
        path: path.to_owned(),
        mode: None,
    };
    if !uses.api_service && !uses.webhook {
        return;
    }
    let wanted = [
        (
            Volume {
                name: APISERVICE_VOLUME.to_owned(),
                secret: Some(SecretVolumeSource {
                    secret_name: Some(secret.clone()),
                    items: Some(vec![item("tls.crt", "apiserver.crt"), item("tls.key", "apiserver.key")]),
                    ..Default::default()
                }),
                ..Default::default()
            },
            VolumeMount {
                name: APISERVICE_VOLUME.to_owned(),
                mount_path: APISERVICE_CERT_DIR.to_owned(),
                ..Default::default()
            },
        ),
        (
            Volume {
                name: WEBHOOK_VOLUME.to_owned(),
                secret: Some(SecretVolumeSource {
                    secret_name: Some(secret.clone()),
                    items: Some(vec![item("tls.crt", "tls.crt"), item("tls.key", "tls.key")]),
                    ..Default::default()
                }),
                ..Default::default()
            },
            VolumeMount {
                name: WEBHOOK_VOLUME.to_owned(),
                mount_path: WEBHOOK_CERT_DIR.to_owned(),
                ..Default::default()
            },
        ),
    ];
    for (volume, mount) in wanted {
        let volumes = pod.volumes.get_or_insert_with(Vec::new);
        volumes.retain(|v| v.name != volume.name);
        volumes.push(volume);
        for container in &mut pod.containers {
            let mounts = container.volume_mounts.get_or_insert_with(Vec::new);
            mounts.retain(|m| m.name != mount.name && m.mount_path != mount.mount_path);
            mounts.push(mount.clone());
        }
    }
}
