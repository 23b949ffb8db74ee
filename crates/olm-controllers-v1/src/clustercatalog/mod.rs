//! The ClusterCatalog controller: pulls a catalog image in-process (the v0 CatalogSource's
//! puller and File-Based Catalog reader), polls its tag every `pollIntervalMinutes`, and serves
//! the content through the catalog HTTP API at `status.urls.base` (`/api/v1/all`,
//! `/api/v1/metas`). A bad image or catalog is confined to its ClusterCatalog and said in its
//! `Progressing` condition; content already served stays served until new content replaces it.
//!
//! [`decide`] is pure (what to pull, the status); [`reconcile`] observes, pulls and writes.

pub mod decide;
mod reconcile;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::jiff::Timestamp;
use olm_api::olmv1::ClusterCatalog;
use olm_catalog_client::CatalogContent;
use olm_runtime::Cache;

pub use reconcile::run;

/// Controller name: metric label, field manager `olm/clustercatalog`.
pub const NAME: &str = "clustercatalog";

/// What the ClusterCatalog controller reads and holds.
#[derive(Clone)]
pub struct ClusterCatalogState {
    pub catalogs: Cache<ClusterCatalog>,
    /// What this process unpacked and serves, and the last failure, per catalog name.
    pub held: Arc<Mutex<HashMap<String, Memory>>>,
    pub images: Arc<olm_image::ImageClient>,
    pub publisher: Arc<dyn crate::CatalogPublisher>,
    /// The catalog server's URL (no trailing slash).
    pub base_url: String,
}

/// What this process knows of one ClusterCatalog between reconciles.
#[derive(Clone, Debug, Default)]
pub struct Memory {
    /// The content being served.
    pub held: Option<Held>,
    /// The last attempt to pull, when it failed.
    pub failure: Option<Failure>,
}

/// Content unpacked from an image and served.
#[derive(Clone, Debug)]
pub struct Held {
    /// `spec.source.image.ref` it was pulled for.
    pub image: String,
    /// The image by digest (`status.resolvedSource.image.ref`).
    pub resolved: String,
    pub digest: String,
    /// When this digest was unpacked (`status.lastUnpacked`).
    pub unpacked_at: Timestamp,
    /// When the registry last confirmed the tag (a poll that found the same digest).
    pub polled_at: Timestamp,
    /// The content, for the ClusterExtension controller's resolution.
    pub content: Arc<CatalogContent>,
}

/// A pull that failed.
#[derive(Clone, Debug, PartialEq)]
pub struct Failure {
    /// `spec.source.image.ref` it was for.
    pub image: String,
    /// What to tell the user (the image, the registry, what it answered).
    pub message: String,
    /// Whether only a change (of the spec, the image or the registry) can help: `Blocked`
    /// rather than `Retrying`.
    pub blocked: bool,
    pub at: Timestamp,
    /// Failures in a row.
    pub attempts: u32,
}
