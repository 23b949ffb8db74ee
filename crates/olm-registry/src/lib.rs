//! Catalog server: catalogd-compatible and own HTTP endpoints, and operator-registry's
//! gRPC API (`api.Registry`), over immutable catalog snapshots that reload when their
//! directories change.
//!
//! Entry point: [`server::start`] with a [`server::ServeConfig`]. The gRPC types and the model →
//! wire conversions live in `olm-registry-api`, shared with the clients.

pub mod error;
pub mod grpc;
mod grpc_incoming;
pub mod http;
pub mod loader;
pub mod metrics;
pub mod openapi;
pub mod reload;
pub mod server;
pub mod store;

pub use error::RegistryError;
pub use server::{GrpcLimits, RunningServer, ServeConfig, start};
pub use store::{CatalogSet, CatalogSnapshot, ServedCatalog, load_snapshot};
