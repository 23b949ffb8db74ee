//! Bundle and catalog images from OCI registries, for OLM's catalog access.
//!
//! - [`ImageClient`] pulls an image (oci-client: Docker Registry HTTP API v2, OCI and Docker
//!   manifests and indexes, anonymous, basic and token auth) into a content-addressed cache
//!   on disk ([`store`]), bounded by [`Limits`] at every step: descriptor sizes before a
//!   byte is read, digests after, tar entries and bytes while unpacking ([`unpack`]).
//! - [`bundle`] reads a bundle image's manifests through the catalog model's renderer;
//!   [`catalog`] unpacks a catalog image's file-based catalog.
//! - [`push`] builds bundle and catalog images from directories and pushes them; [`mirror`]
//!   turns a catalog with inline bundles into bundle images and a digest-only catalog image.
//! - [`auth`] reads pull secrets; [`hosts`] says how to reach each registry host.
//!
//! No Kubernetes here: the controllers read Secrets and pass [`Credentials`].

pub mod auth;
pub mod bundle;
pub mod catalog;
mod error;
pub mod hosts;
pub mod mirror;
mod pull;
pub mod push;
pub mod store;
pub mod unpack;

pub use auth::Credentials;
pub use bundle::BundleImage;
pub use catalog::CatalogImage;
pub use error::{ImageError, error_chain};
pub use hosts::{HostConfig, RegistryConfig};
pub use pull::{ImageClient, Limits, PulledImage, pinned};
pub use push::{BuiltImage, build_bundle, build_catalog};
