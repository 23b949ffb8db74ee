//! Why an image could not be pulled, unpacked or pushed: one sentence naming the image, the
//! registry and the cause, and what to do; a category for Events and metrics; whether waiting
//! can help.

use oci_client::errors::{OciDistributionError, OciErrorCode};

/// An image operation that failed.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// The reference does not parse.
    #[error("{image:?} is not a valid image reference: {message}")]
    InvalidReference {
        /// The reference as written.
        image: String,
        /// What the parser said.
        message: String,
    },
    /// Nothing answered, or the connection broke.
    #[error(
        "cannot reach registry {registry} for image {image}: {message}; check that the registry is up and reachable from OLM, and for a plain-HTTP or self-signed registry that OLM's registry configuration names it"
    )]
    Unreachable {
        /// The image.
        image: String,
        /// Its registry host.
        registry: String,
        /// What the transport said.
        message: String,
    },
    /// The registry has no such repository, tag or digest.
    #[error("image {image} was not found in registry {registry} ({message}); check the image's name, tag or digest where it is referenced")]
    NotFound {
        /// The image.
        image: String,
        /// Its registry host.
        registry: String,
        /// What the registry said.
        message: String,
    },
    /// The registry wants credentials, or refused the ones given.
    #[error(
        "registry {registry} refused access to image {image} ({message}); put a pull secret (kubernetes.io/dockerconfigjson) with credentials for {registry} in the CatalogSource's spec.secrets or in the imagePullSecrets of its namespace's default ServiceAccount"
    )]
    Unauthorized {
        /// The image.
        image: String,
        /// Its registry host.
        registry: String,
        /// What the registry said.
        message: String,
    },
    /// Content did not hash to the digest that names it.
    #[error("image {image} from registry {registry}: {what} does not match its digest ({message}); the registry served corrupt or tampered content")]
    DigestMismatch {
        /// The image.
        image: String,
        /// Its registry host.
        registry: String,
        /// Which part (manifest, layer sha256:…).
        what: String,
        /// Expected and actual digests.
        message: String,
    },
    /// Over one of the limits.
    #[error(
        "image {image} is too large: {what} is {size} bytes, over the limit of {limit} bytes; ask its publisher for a smaller image, or, if it is trusted, raise OLM's limits (`olm run --image-max-layer-bytes`)"
    )]
    TooLarge {
        /// The image.
        image: String,
        /// Which part.
        what: String,
        /// Its size (or the size reached when reading stopped).
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The whole pull took too long.
    #[error("pulling image {image} from registry {registry} did not finish within {seconds}s; the registry is slow or the image large: try again later or raise the unpack timeout")]
    Timeout {
        /// The image.
        image: String,
        /// Its registry host.
        registry: String,
        /// The limit.
        seconds: u64,
    },
    /// Unsafe or unreadable content: a tar entry escaping its directory, a broken layer, an
    /// unsupported media type.
    #[error("image {image} has unusable content: {message}")]
    BadContent {
        /// The image.
        image: String,
        /// What is wrong, naming the entry or layer.
        message: String,
    },
    /// Not a registry+v1 bundle.
    #[error("image {image} is not an operator bundle: {message}")]
    NotABundle {
        /// The image.
        image: String,
        /// Why (no manifests/, no annotations…).
        message: String,
    },
    /// A catalog image in the deprecated SQLite format.
    #[error(
        "catalog image {image} holds a SQLite database ({label}), not a file-based catalog; OLM serves file-based catalogs only: convert it with `opm migrate {image} ./catalog` and build a catalog image from the result (`olm catalog push ./catalog IMAGE`)"
    )]
    SqliteCatalog {
        /// The image.
        image: String,
        /// The label that says so.
        label: String,
    },
    /// The registry answered with another error.
    #[error("registry {registry} failed for image {image}: {message}")]
    Registry {
        /// The image.
        image: String,
        /// Its registry host.
        registry: String,
        /// What it said.
        message: String,
        /// Whether asking again can help (5xx, 429).
        retryable: bool,
    },
    /// The local cache or a local file could not be read or written.
    #[error("{path}: {message}")]
    Local {
        /// The file or directory.
        path: String,
        /// What failed.
        message: String,
    },
}

impl ImageError {
    /// PascalCase category: the Event reason and metric label.
    pub fn category(&self) -> &'static str {
        match self {
            ImageError::InvalidReference { .. } => "InvalidImageReference",
            ImageError::Unreachable { .. } => "RegistryUnreachable",
            ImageError::NotFound { .. } => "ImageNotFound",
            ImageError::Unauthorized { .. } => "ImageUnauthorized",
            ImageError::DigestMismatch { .. } => "ImageDigestMismatch",
            ImageError::TooLarge { .. } => "ImageTooLarge",
            ImageError::Timeout { .. } => "ImagePullTimeout",
            ImageError::BadContent { .. } => "ImageContentInvalid",
            ImageError::NotABundle { .. } => "NotABundleImage",
            ImageError::SqliteCatalog { .. } => "SqliteCatalogImage",
            ImageError::Registry { .. } => "RegistryError",
            ImageError::Local { .. } => "ImageCacheError",
        }
    }

    /// Whether trying again later can succeed without anybody changing anything.
    pub fn retryable(&self) -> bool {
        match self {
            ImageError::Unreachable { .. } | ImageError::Timeout { .. } | ImageError::Local { .. } => true,
            ImageError::Registry { retryable, .. } => *retryable,
            _ => false,
        }
    }

    pub(crate) fn local(path: impl std::fmt::Display, err: impl std::fmt::Display) -> ImageError {
        ImageError::Local {
            path: path.to_string(),
            message: err.to_string(),
        }
    }

    /// Classify an oci-client error for `image` on `registry`.
    pub(crate) fn from_oci(image: &str, registry: &str, err: OciDistributionError) -> ImageError {
        let image = image.to_owned();
        let registry = registry.to_owned();
        match err {
            OciDistributionError::RegistryError { envelope, .. } => {
                let message = envelope
                    .errors
                    .iter()
                    .map(|e| format!("{}: {}", code_name(&e.code), e.message))
                    .collect::<Vec<_>>()
                    .join("; ");
                let codes: Vec<&OciErrorCode> = envelope.errors.iter().map(|e| &e.code).collect();
                if codes.iter().any(|c| matches!(c, OciErrorCode::Unauthorized | OciErrorCode::Denied)) {
                    ImageError::Unauthorized { image, registry, message }
                } else if codes.iter().any(|c| {
                    matches!(
                        c,
                        OciErrorCode::ManifestUnknown
                            | OciErrorCode::NameUnknown
                            | OciErrorCode::BlobUnknown
                            | OciErrorCode::NotFound
                            | OciErrorCode::ManifestBlobUnknown
                    )
                }) {
                    ImageError::NotFound { image, registry, message }
                } else {
                    let retryable = codes.iter().any(|c| matches!(c, OciErrorCode::Toomanyrequests));
                    ImageError::Registry { image, registry, message, retryable }
                }
            }
            OciDistributionError::ServerError { code, message, .. } => match code {
                401 | 403 => ImageError::Unauthorized { image, registry, message: format!("HTTP {code}") },
                404 => ImageError::NotFound { image, registry, message: format!("HTTP {code}") },
                _ => ImageError::Registry {
                    image,
                    registry,
                    message: format!("HTTP {code}: {}", message.trim()),
                    retryable: code >= 500 || code == 429,
                },
            },
            OciDistributionError::UnauthorizedError { .. } => ImageError::Unauthorized {
                image,
                registry,
                message: "HTTP 401".into(),
            },
            OciDistributionError::AuthenticationFailure(message) => ImageError::Unauthorized { image, registry, message },
            OciDistributionError::ImageManifestNotFoundError(message) => ImageError::NotFound { image, registry, message },
            OciDistributionError::DigestError(err) => ImageError::DigestMismatch {
                image,
                registry,
                what: "content".into(),
                message: err.to_string(),
            },
            OciDistributionError::RequestError(err) => {
                let message = error_chain(&err);
                let status = err.status().map(|s| s.as_u16());
                if let Some(code @ (401 | 403)) = status {
                    ImageError::Unauthorized { image, registry, message: format!("HTTP {code}") }
                } else if status == Some(404) {
                    ImageError::NotFound { image, registry, message: "HTTP 404".into() }
                } else if let Some(code) = status {
                    ImageError::Registry { image, registry, message: format!("HTTP {code}"), retryable: code >= 500 || code == 429 }
                } else if err.is_timeout() {
                    ImageError::Unreachable { image, registry, message: format!("timed out: {message}") }
                } else if err.is_connect() || err.is_request() {
                    ImageError::Unreachable { image, registry, message }
                } else {
                    ImageError::Registry { image, registry, message, retryable: true }
                }
            }
            OciDistributionError::IncompatibleLayerMediaTypeError(media)
            | OciDistributionError::UnsupportedMediaTypeError(media) => ImageError::BadContent {
                image,
                message: format!("media type {media} is not supported"),
            },
            OciDistributionError::IoError(err) => ImageError::Local {
                path: format!("image cache for {image}"),
                message: err.to_string(),
            },
            other => ImageError::Registry {
                image,
                registry,
                message: error_chain(&other),
                retryable: false,
            },
        }
    }
}

/// The registry's code as the spec writes it (`MANIFEST_UNKNOWN`).
fn code_name(code: &OciErrorCode) -> String {
    serde_json::to_value(code)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("{code:?}"))
}

/// An error and its sources as one line (`a: b: c`), without repeating a source that its
/// parent already quotes.
pub fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(next) = source {
        let line = next.to_string();
        if !text.contains(&line) {
            text.push_str(": ");
            text.push_str(&line);
        }
        source = next.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use oci_client::errors::{OciEnvelope, OciError};

    fn envelope(code: OciErrorCode) -> OciDistributionError {
        OciDistributionError::RegistryError {
            envelope: OciEnvelope {
                errors: vec![OciError {
                    code,
                    message: "said the registry".into(),
                    detail: serde_json::Value::Null,
                }],
            },
            url: "http://r/v2/x/manifests/y".into(),
        }
    }

    #[test]
    fn registry_answers_are_classified_and_name_image_and_registry() {
        let err = ImageError::from_oci("r:5000/x:y", "r:5000", envelope(OciErrorCode::ManifestUnknown));
        assert_eq!(err.category(), "ImageNotFound");
        assert!(err.to_string().contains("image r:5000/x:y was not found in registry r:5000"), "{err}");
        let err = ImageError::from_oci("r:5000/x:y", "r:5000", envelope(OciErrorCode::Unauthorized));
        assert_eq!(err.category(), "ImageUnauthorized");
        assert!(err.to_string().contains("spec.secrets"), "{err}");
        let err = ImageError::from_oci("r:5000/x:y", "r:5000", envelope(OciErrorCode::Toomanyrequests));
        assert!(err.retryable());
        let err = ImageError::from_oci(
            "r:5000/x:y",
            "r:5000",
            OciDistributionError::ServerError { code: 503, url: "u".into(), message: "busy ".into() },
        );
        assert_eq!((err.category(), err.retryable()), ("RegistryError", true));
    }
}
