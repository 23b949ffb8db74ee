//! The CatalogSource controller: reads each catalog (gRPC address, image, ConfigMap, or the
//! HTTP API of an OLM catalog server) into the shared [`olm_catalog_client::CatalogCache`], keeps it fresh
//! (`updateStrategy.registryPoll.interval`, bounded retry while it is down) and reports
//! `status.connectionState`.
//!
//! HTTP catalogs (our extension, upstream-compatible schema): `sourceType: grpc` with
//! `spec.address: http://<server>/catalogs/<name>` reads `<address>/api/v1/all` from an OLM
//! catalog server (`olm catalog serve`). Upstream OLM would treat such an address as an
//! unreachable gRPC target, so the same object is harmless there.

pub mod decide;
pub mod reconcile;
pub mod registry_pod;
pub mod state;

pub use reconcile::{CatalogSourceState, NAME, run};
