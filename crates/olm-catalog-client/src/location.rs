//! Where a CatalogSource's content is: the one answer to that question, for the CatalogSource
//! controller (which reads the content and reports on it) and the package server (which reads
//! the same content for PackageManifests); and how often to read it again.

use std::time::Duration;

use olm_api::duration::parse_go_duration;
use olm_api::v1alpha1::catalog_source::{CatalogSource, DEFAULT_REGISTRY_POLL_INTERVAL, SourceType};

use crate::SourceLocation;

/// First retry delay after a failed read; doubles up to [`MAX_RETRY`].
pub const FIRST_RETRY: Duration = Duration::from_secs(1);
/// Longest retry delay of a failing catalog.
pub const MAX_RETRY: Duration = Duration::from_secs(60);

/// Where the spec says the content is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// `spec.address` (gRPC `host:port`, or an `http(s)://` URL of our catalog server).
    Address(String),
    /// `spec.image`: a catalog image, pulled and served by OLM itself (no registry Pod).
    Image(String),
    /// `spec.configMap`.
    ConfigMap(String),
}

/// The source of `catalog`, or the SpecInvalidError message.
pub fn source(catalog: &CatalogSource) -> Result<Source, String> {
    let spec = &catalog.spec;
    let non_empty = |v: &Option<String>| v.as_deref().map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned);
    match &spec.source_type {
        SourceType::Grpc => {
            // As upstream, the image wins when both are set.
            if let Some(image) = non_empty(&spec.image) {
                Ok(Source::Image(image))
            } else if let Some(address) = non_empty(&spec.address) {
                Ok(Source::Address(address))
            } else {
                Err("sourceType grpc needs spec.image or spec.address (host:port of a registry server, or the http:// URL of a catalog on an OLM catalog server)".into())
            }
        }
        SourceType::ConfigMap | SourceType::Internal => match non_empty(&spec.config_map) {
            Some(name) => Ok(Source::ConfigMap(name)),
            None => Err(format!(
                "sourceType {} needs spec.configMap (the name of a ConfigMap in this namespace)",
                spec.source_type.as_str()
            )),
        },
        SourceType::Other(other) => Err(format!("unknown sourcetype: {other} (spec.sourceType must be grpc, configmap or internal)")),
    }
}

/// Where to read a CatalogSource's content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// A catalog server: gRPC `host:port`, or the HTTP URL of one catalog.
    Remote(SourceLocation),
    /// A catalog image (`spec.image`), pulled from its registry.
    Image(String),
    /// A legacy ConfigMap in the catalog's namespace, by name.
    ConfigMap(String),
}

/// Where the content of a catalog is read from, for its `source`. A catalog image is pulled
/// by OLM itself: upstream runs a registry Pod for it, which needs a node to run on and
/// seconds to start; reading the image's file-based catalog in-process needs neither.
pub fn location(source: &Source) -> Location {
    match source {
        Source::Address(address) => Location::Remote(SourceLocation::from_address(address)),
        Source::Image(image) => Location::Image(image.clone()),
        Source::ConfigMap(name) => Location::ConfigMap(name.clone()),
    }
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
    fn the_spec_names_one_source_or_says_what_is_missing() {
        assert_eq!(
            source(&catalog(r#"{"sourceType":"grpc","address":"127.0.0.1:50051"}"#)),
            Ok(Source::Address("127.0.0.1:50051".into()))
        );
        assert_eq!(
            source(&catalog(r#"{"sourceType":"grpc","address":"x:1","image":"quay.io/c:1"}"#)),
            Ok(Source::Image("quay.io/c:1".into()))
        );
        let err = source(&catalog(r#"{"sourceType":"grpc"}"#)).unwrap_err();
        assert!(err.contains("spec.image or spec.address"), "{err}");
        let err = source(&catalog(r#"{"sourceType":"configmap"}"#)).unwrap_err();
        assert!(err.contains("spec.configMap"), "{err}");
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
    fn each_source_has_its_location() {
        let image = catalog(r#"{"sourceType":"grpc","image":"quay.io/c:1"}"#);
        assert_eq!(location(&source(&image).expect("valid")), Location::Image("quay.io/c:1".into()));
        let address = catalog(r#"{"sourceType":"grpc","address":"http://127.0.0.1:8080/catalogs/community/"}"#);
        assert_eq!(
            location(&source(&address).expect("valid")),
            Location::Remote(SourceLocation::Http("http://127.0.0.1:8080/catalogs/community".into()))
        );
    }

    #[test]
    fn retries_back_off_to_a_bound() {
        assert_eq!(retry_delay(1), FIRST_RETRY);
        assert_eq!(retry_delay(3), Duration::from_secs(4));
        assert_eq!(retry_delay(30), MAX_RETRY);
    }
}
