//! Errors of the catalog server.

use std::path::PathBuf;

/// Something that kept the server from starting or a catalog from loading.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The catalog directory could not be read or parsed, or it failed validation.
    #[error("catalog {catalog:?} at {dir}: {message}")]
    InvalidCatalog { catalog: String, dir: PathBuf, message: String },
    /// A listen address could not be bound.
    #[error("cannot listen on {addr} for {what}: {source}")]
    Bind { what: String, addr: String, source: std::io::Error },
    /// The serve configuration is inconsistent (e.g. a gRPC address for an unknown catalog).
    #[error("invalid server configuration: {0}")]
    Config(String),
    /// A server task failed while running.
    #[error("{what} server failed: {message}")]
    Serve { what: String, message: String },
}

impl RegistryError {
    /// PascalCase category, used as a metric label and in logs.
    pub fn category(&self) -> &'static str {
        match self {
            RegistryError::InvalidCatalog { .. } => "InvalidCatalog",
            RegistryError::Bind { .. } => "BindFailed",
            RegistryError::Config(_) => "InvalidConfig",
            RegistryError::Serve { .. } => "ServeFailed",
        }
    }

    /// Whether trying again later (without changing anything) can succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            // A catalog edit in progress may become valid; a busy port may be freed.
            RegistryError::InvalidCatalog { .. } | RegistryError::Bind { .. } => true,
            RegistryError::Config(_) => false,
            RegistryError::Serve { .. } => true,
        }
    }
}
