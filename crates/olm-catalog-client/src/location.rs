//! Where a CatalogSource's content is: the one answer to that question ([`Location`]), for the
//! CatalogSource controller (which reads the content and reports on it) and the package server
//! (which reads the same content for PackageManifests), both through [`crate::read`]; which
//! catalog it is ([`key`], [`priority`]); and how often to read it again.

use std::time::Duration;

use kube::ResourceExt;
use olm_api::duration::parse_go_duration;
use olm_api::v1alpha1::catalog_source::{CatalogSource, DEFAULT_REGISTRY_POLL_INTERVAL, SourceType};
use olm_resolver::CatalogKey;

/// First retry delay after a failed read; doubles up to [`MAX_RETRY`].
pub const FIRST_RETRY: Duration = Duration::from_secs(1);
/// Longest retry delay of a failing catalog.
pub const MAX_RETRY: Duration = Duration::from_secs(60);

/// Where a catalog's content is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// `spec.address` that is not a URL: an operator-registry gRPC server (`host:port`).
    Grpc(String),
    /// `spec.address` that is an `http://` or `https://` URL, as written: one catalog on an OLM
    /// catalog server, read from `<url>/api/v1/all` (a trailing `/` of the URL dropped).
    Http(String),
    /// `spec.image`: a catalog image, pulled and read by OLM itself. Upstream runs a registry Pod
    /// for it, which needs a node to run on and seconds to start; reading the image's
    /// file-based catalog in-process needs neither.
    Image(String),
    /// `spec.configMap`: a legacy ConfigMap in the catalog's namespace, by name.
    ConfigMap(String),
}

impl Location {
    /// Where the spec of `catalog` says its content is, or the SpecInvalidError message.
    pub fn of(catalog: &CatalogSource) -> Result<Location, String> {
        let spec = &catalog.spec;
        let non_empty = |v: &Option<String>| v.as_deref().map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned);
        match &spec.source_type {
            SourceType::Grpc => {
                // As upstream, the image wins when both are set.
                if let Some(image) = non_empty(&spec.image) {
                    Ok(Location::Image(image))
                } else if let Some(address) = non_empty(&spec.address) {
                    Ok(Location::from_address(&address))
                } else {
                    Err("sourceType grpc needs spec.image or spec.address (host:port of a registry server, or the http:// URL of a catalog on an OLM catalog server)".into())
                }
            }
            SourceType::ConfigMap | SourceType::Internal => match non_empty(&spec.config_map) {
                Some(name) => Ok(Location::ConfigMap(name)),
                None => Err(format!(
                    "sourceType {} needs spec.configMap (the name of a ConfigMap in this namespace)",
                    spec.source_type.as_str()
                )),
            },
            SourceType::Other(other) => Err(format!("unknown sourcetype: {other} (spec.sourceType must be grpc, configmap or internal)")),
        }
    }

    /// The location `spec.address` names: an `http://`/`https://` URL is an HTTP catalog,
    /// anything else a gRPC `host:port`.
    pub fn from_address(address: &str) -> Location {
        let address = address.trim();
        if address.starts_with("http://") || address.starts_with("https://") {
            Location::Http(address.to_owned())
        } else {
            Location::Grpc(address.to_owned())
        }
    }

    /// Whether the content is on a catalog server that answers (gRPC or HTTP), which
    /// [`crate::probe`] can ask between two reads.
    pub fn is_server(&self) -> bool {
        matches!(self, Location::Grpc(_) | Location::Http(_))
    }

    /// The address, URL, image or ConfigMap name, as the spec gives it.
    pub fn as_str(&self) -> &str {
        match self {
            Location::Grpc(s) | Location::Http(s) | Location::Image(s) | Location::ConfigMap(s) => s,
        }
    }
}

/// Which catalog `catalog` is, for the content cache and the resolver.
pub fn key(catalog: &CatalogSource) -> CatalogKey {
    CatalogKey::new(catalog.name_any(), catalog.namespace().unwrap_or_default())
}

/// `spec.priority` (0 when absent), held to the range of an `i32`.
pub fn priority(catalog: &CatalogSource) -> i32 {
    catalog
        .spec
        .priority
        .map(|p| i32::try_from(p).unwrap_or(if p < 0 { i32::MIN } else { i32::MAX }))
        .unwrap_or(0)
}

/// The refresh interval and, when the spec's value is unusable, the InvalidIntervalError message.
pub fn poll_interval(catalog: &CatalogSource) -> (Duration, Option<String>) {
    match catalog.spec.poll_interval() {
        None => (DEFAULT_REGISTRY_POLL_INTERVAL, None),
        Some(text) => match parse_go_duration(text.trim()) {
            Ok(d) if d >= Duration::from_secs(1) => (d, None),
            _ => (
                DEFAULT_REGISTRY_POLL_INTERVAL,
                Some(format!(
                    "spec.updateStrategy.registryPoll.interval {text:?} is not a duration of at least 1s like \"10m\" or \"1h30m\"; polling every 15m instead"
                )),
            ),
        },
    }
}

/// Bounded exponential retry delay after `failures` failed reads.
pub fn retry_delay(failures: u32) -> Duration {
    olm_runtime::backoff::exponential(failures, FIRST_RETRY, MAX_RETRY)
}

#[cfg(test)]
mod tests {
    use super::*;
    use olm_api::v1alpha1::catalog_source::CatalogSourceSpec;

    fn catalog(yaml: &str) -> CatalogSource {
        let spec: CatalogSourceSpec = serde_json::from_value(serde_json::from_str::<serde_json::Value>(yaml).expect("json")).expect("spec");
        let mut c = CatalogSource::new("community.v1", spec);
        c.metadata.namespace = Some("olm".into());
        c
    }

    #[test]
    fn the_spec_names_one_location_or_says_what_is_missing() {
        assert_eq!(
            Location::of(&catalog(r#"{"sourceType":"grpc","address":"127.0.0.1:50051"}"#)),
            Ok(Location::Grpc("127.0.0.1:50051".into()))
        );
        assert_eq!(
            Location::of(&catalog(r#"{"sourceType":"grpc","address":"x:1","image":"quay.io/c:1"}"#)),
            Ok(Location::Image("quay.io/c:1".into()))
        );
        assert_eq!(
            Location::of(&catalog(r#"{"sourceType":"grpc","address":" http://127.0.0.1:8080/catalogs/community/ "}"#)),
            Ok(Location::Http("http://127.0.0.1:8080/catalogs/community/".into()))
        );
        assert_eq!(
            Location::of(&catalog(r#"{"sourceType":"configmap","configMap":"legacy"}"#)),
            Ok(Location::ConfigMap("legacy".into()))
        );
        assert_eq!(
            Location::of(&catalog(r#"{"sourceType":"internal","configMap":"legacy"}"#)),
            Ok(Location::ConfigMap("legacy".into()))
        );
        let err = Location::of(&catalog(r#"{"sourceType":"grpc"}"#)).unwrap_err();
        assert!(err.contains("spec.image or spec.address"), "{err}");
        let err = Location::of(&catalog(r#"{"sourceType":"configmap"}"#)).unwrap_err();
        assert!(err.contains("spec.configMap"), "{err}");
        let err = Location::of(&catalog(r#"{"sourceType":"goose"}"#)).unwrap_err();
        assert!(err.starts_with("unknown sourcetype: goose"), "{err}");
    }

    #[test]
    fn http_urls_and_grpc_addresses_are_told_apart() {
        assert_eq!(
            Location::from_address("http://127.0.0.1:8080/catalogs/community/"),
            Location::Http("http://127.0.0.1:8080/catalogs/community/".into())
        );
        assert_eq!(Location::from_address("https://c.example/catalogs/c"), Location::Http("https://c.example/catalogs/c".into()));
        assert_eq!(Location::from_address("community.olm.svc:50051"), Location::Grpc("community.olm.svc:50051".into()));
        assert!(Location::from_address("community.olm.svc:50051").is_server());
        assert!(!Location::Image("quay.io/c:1".into()).is_server());
    }

    #[test]
    fn priorities_are_held_to_an_i32() {
        let with = |priority: i64| {
            let mut c = catalog(r#"{"sourceType":"grpc","image":"i"}"#);
            c.spec.priority = Some(priority);
            super::priority(&c)
        };
        assert_eq!((with(-5), with(i64::MAX), with(i64::MIN)), (-5, i32::MAX, i32::MIN));
        assert_eq!(key(&catalog(r#"{"sourceType":"grpc","image":"i"}"#)), CatalogKey::new("community.v1", "olm"));
    }

    #[test]
    fn an_invalid_interval_falls_back() {
        let c = catalog(r#"{"sourceType":"grpc","image":"i","updateStrategy":{"registryPoll":{"interval":"often"}}}"#);
        let (interval, error) = poll_interval(&c);
        assert_eq!(interval, DEFAULT_REGISTRY_POLL_INTERVAL);
        assert!(error.expect("reported").contains("\"often\""));
        // A Go duration of at least a second (spaces around it ignored), or the default and why.
        for (written, expected, reported) in [
            ("15m", Duration::from_secs(900), false),
            (" 1h30m ", Duration::from_secs(5400), false),
            ("1s", Duration::from_secs(1), false),
            ("500ms", DEFAULT_REGISTRY_POLL_INTERVAL, true),
            ("10", DEFAULT_REGISTRY_POLL_INTERVAL, true),
            ("-5m", DEFAULT_REGISTRY_POLL_INTERVAL, true),
            ("1d", DEFAULT_REGISTRY_POLL_INTERVAL, true),
        ] {
            let spec = serde_json::json!({"sourceType": "grpc", "image": "i", "updateStrategy": {"registryPoll": {"interval": written}}});
            let (interval, error) = poll_interval(&catalog(&spec.to_string()));
            assert_eq!((interval, error.is_some()), (expected, reported), "{written:?}");
        }
    }

    #[test]
    fn retries_back_off_to_a_bound() {
        assert_eq!(retry_delay(1), FIRST_RETRY);
        assert_eq!(retry_delay(3), Duration::from_secs(4));
        assert_eq!(retry_delay(30), MAX_RETRY);
    }
}
