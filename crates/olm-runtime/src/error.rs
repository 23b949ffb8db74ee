//! The error type every controller returns from `reconcile`.
//!
//! Each variant knows whether a retry can help (`retryable`) and has a PascalCase `category`,
//! which is the failure-metric label, the Event reason and the `error.category` log field.

use k8s_openapi::api::core::v1::ObjectReference;

/// A reconcile failure.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A request to the API server failed. Shown as one sentence: what we were doing and what
    /// the API server said (never the client's debug form of its answer).
    #[error("{action}: {}", api_message(source))]
    Api {
        /// What we were doing, e.g. "apply Deployment ns/etcd-operator".
        action: String,
        /// The object a refused write was for: `error_policy` puts a Warning Event on it, so
        /// `kubectl describe` shows why it is not what OLM wants it to be.
        regarding: Option<Box<ObjectReference>>,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// An object we read does not have the shape we need; the message names the field to fix.
    #[error("{kind} {name}: {message}")]
    InvalidObject {
        /// Kind of the object, e.g. "ClusterServiceVersion".
        kind: &'static str,
        /// `namespace/name` of the object.
        name: String,
        /// What is wrong and what to change.
        message: String,
    },
    /// A value could not be turned into JSON (a bug, not bad input).
    #[error("cannot serialize {what}: {source}")]
    Serialize {
        /// What was being serialized.
        what: String,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
    /// A watch cache the reconcile reads from has not finished its initial list yet.
    #[error("the watch cache for {0} has not synced yet")]
    CacheNotSynced(&'static str),
}

impl Error {
    /// Wrap a client error with what we were doing.
    pub fn api(action: impl Into<String>, source: kube::Error) -> Self {
        Error::Api {
            action: action.into(),
            regarding: None,
            source,
        }
    }

    /// A failed write of `regarding` (create, apply, status): like [`Error::api`], and the
    /// failure is also reported as an Event on that object.
    pub fn write(action: impl Into<String>, regarding: ObjectReference, source: kube::Error) -> Self {
        Error::Api {
            action: action.into(),
            regarding: Some(Box::new(regarding)),
            source,
        }
    }

    /// The object whose write the API server refused, when the error is such a refusal.
    /// Races (a conflict, an object deleted meanwhile) are not refusals: the next pass sorts
    /// them out, and reporting them would only be noise.
    pub fn refused_write(&self) -> Option<&ObjectReference> {
        match self {
            Error::Api { regarding, source, .. } if !matches!(api_status_code(source), Some(404 | 409)) => regarding.as_deref(),
            _ => None,
        }
    }

    /// Whether trying again later can succeed without anybody changing anything.
    pub fn retryable(&self) -> bool {
        match self {
            Error::Api { source, .. } => api_error_retryable(source),
            Error::InvalidObject { .. } | Error::Serialize { .. } => false,
            Error::CacheNotSynced(_) => true,
        }
    }

    /// PascalCase category: metric label, Event reason, log field.
    pub fn category(&self) -> &'static str {
        match self {
            Error::Api { source, .. } => match api_status_code(source) {
                Some(403) => "ApiForbidden",
                Some(404) => "ApiNotFound",
                Some(409) => "ApiConflict",
                Some(400 | 422) => "ApiInvalid",
                Some(413) => "ApiRequestTooLarge",
                Some(429) => "ApiThrottled",
                Some(code) if code >= 500 => "ApiServerError",
                // Any other refusal of the request itself (405, 415, …).
                Some(_) => "ApiRefused",
                // No answer: transport or TLS.
                None => "ApiUnavailable",
            },
            Error::InvalidObject { .. } => "InvalidObject",
            Error::Serialize { .. } => "SerializationFailed",
            Error::CacheNotSynced(_) => "CacheNotSynced",
        }
    }
}

/// The HTTP status of an API error, when the server answered.
pub fn api_status_code(err: &kube::Error) -> Option<u16> {
    match err {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

/// What the API server said, as one readable sentence: its message and its reason (e.g.
/// `etcdserver: request is too large (InternalError, HTTP 500)`); for an error without an
/// answer (transport, TLS), the client's own message.
pub fn api_message(err: &kube::Error) -> String {
    match err {
        kube::Error::Api(status) => {
            let message = status.message.trim();
            let message = if message.is_empty() { "no message" } else { message };
            if status.reason.is_empty() {
                format!("{message} (HTTP {})", status.code)
            } else {
                format!("{message} ({}, HTTP {})", status.reason, status.code)
            }
        }
        other => other.to_string(),
    }
}

/// Whether the API server said the object does not exist.
pub fn is_not_found(err: &kube::Error) -> bool {
    api_status_code(err) == Some(404)
}

fn api_error_retryable(err: &kube::Error) -> bool {
    match api_status_code(err) {
        // The request itself is wrong or not allowed: the same request fails again.
        Some(400 | 403 | 405 | 413 | 415 | 422) => false,
        // Conflicts, missing objects (caches lag), throttling and server errors clear up.
        Some(_) => true,
        // Transport errors: the server may come back.
        None => true,
    }
}

/// Result alias for reconcile code.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16) -> Error {
        Error::api(
            "apply Deployment ns/x",
            kube::Error::Api(Box::new(kube::core::Status::failure("boom", "Reason").with_code(code))),
        )
    }

    #[test]
    fn categories_and_retryability_follow_the_status_code() {
        assert_eq!(api_error(409).category(), "ApiConflict");
        assert!(api_error(409).retryable());
        assert_eq!(api_error(403).category(), "ApiForbidden");
        assert!(!api_error(403).retryable());
        assert_eq!(api_error(422).category(), "ApiInvalid");
        assert!(!api_error(422).retryable());
        assert_eq!(api_error(503).category(), "ApiServerError");
        assert_eq!(api_error(413).category(), "ApiRequestTooLarge");
        assert!(!api_error(413).retryable());
        assert_eq!(api_error(415).category(), "ApiRefused");
        assert!(api_error(503).retryable());
        let invalid = Error::InvalidObject {
            kind: "ClusterServiceVersion",
            name: "ns/x".into(),
            message: "spec.install.strategy must be \"deployment\"".into(),
        };
        assert_eq!(invalid.category(), "InvalidObject");
        assert!(!invalid.retryable());
        assert!(invalid.to_string().contains("spec.install.strategy"));
    }

    #[test]
    fn an_api_error_reads_as_one_sentence() {
        let err = Error::api(
            "write the status of InstallPlan ns/install-x",
            kube::Error::Api(Box::new(
                kube::core::Status::failure("etcdserver: request is too large", "InternalError").with_code(500),
            )),
        );
        assert_eq!(
            err.to_string(),
            "write the status of InstallPlan ns/install-x: etcdserver: request is too large (InternalError, HTTP 500)"
        );
        assert!(err.retryable());
        assert_eq!(err.category(), "ApiServerError");
        assert!(err.refused_write().is_none(), "not a write");
        let write = |code: u16| {
            let status = kube::core::Status::failure("refused", "Reason").with_code(code);
            Error::write("write the status of InstallPlan ns/x", ObjectReference::default(), kube::Error::Api(Box::new(status)))
        };
        assert!(write(422).refused_write().is_some());
        assert!(write(500).refused_write().is_some());
        assert!(write(409).refused_write().is_none(), "a race, not a refusal");
    }
}
