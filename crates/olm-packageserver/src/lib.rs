//! The PackageManifest API (`packages.operators.coreos.com/v1`), served as an aggregated API
//! behind the APIService `v1.packages.operators.coreos.com`.
//!
//! Layers: [`manifest`] (catalog model → PackageManifest, pure), [`selector`] (label and field
//! selectors), [`store`] (per-catalog packages, namespace visibility, warnings), [`http`]
//! (discovery, list/get/Table/icon; no Kubernetes client), [`openapi`] (its documents),
//! [`serve`] (HTTPS with front-proxy client certificates), and [`cluster`] (the Kubernetes side: CatalogSources →
//! store, SubjectAccessReview authorization, the front-proxy CA, the serving certificate).
//!
//! Entry point: [`cluster::run`] with a [`cluster::Config`].

pub mod cluster;
pub mod error;
pub mod http;
pub mod manifest;
pub mod openapi;
pub mod selector;
pub mod serve;
pub mod store;

pub use error::Error;
