//! Errors of the package server.

use std::net::SocketAddr;

/// Why the package server cannot start or keep running.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Certificates or keys are unusable.
    #[error("TLS: {0}")]
    Tls(String),
    /// The listen address is taken or not allowed.
    #[error("cannot listen on {addr}: {message}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// What the OS said.
        message: String,
    },
    /// A call to the Kubernetes API failed.
    #[error("Kubernetes API: {what}: {message}")]
    Kube {
        /// What was being done.
        what: String,
        /// The error.
        message: String,
        /// Whether asking again can help.
        retryable: bool,
    },
    /// The cluster is set up in a way the server cannot work with.
    #[error("{0}")]
    Config(String),
}

impl Error {
    /// PascalCase category (metric label, Event reason).
    pub fn category(&self) -> &'static str {
        match self {
            Error::Tls(_) => "TlsConfigInvalid",
            Error::Bind { .. } => "BindFailed",
            Error::Kube { .. } => "KubeApiError",
            Error::Config(_) => "ClusterConfigInvalid",
        }
    }

    /// Whether trying again later can succeed without anybody changing anything.
    pub fn retryable(&self) -> bool {
        match self {
            Error::Kube { retryable, .. } => *retryable,
            Error::Bind { .. } => true,
            Error::Tls(_) | Error::Config(_) => false,
        }
    }

    pub(crate) fn kube(what: impl Into<String>, err: &kube::Error) -> Error {
        let retryable = match err {
            kube::Error::Api(status) => status.code >= 500 || status.code == 429,
            _ => true,
        };
        Error::Kube { what: what.into(), message: err.to_string(), retryable }
    }
}
