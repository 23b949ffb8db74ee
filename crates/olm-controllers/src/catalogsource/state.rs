//! The CatalogSource controller's context, which its modules share.

use std::sync::Arc;

use olm_api::v1alpha1::catalog_source::CatalogSource;
use olm_catalog_client::CatalogCache;
use olm_image::ImageClient;
use olm_runtime::Cache;

/// What the CatalogSource controller reads and fills.
#[derive(Clone)]
pub struct CatalogSourceState {
    /// Every CatalogSource.
    pub catalogs: Cache<CatalogSource>,
    /// The content cache shared with the Subscription and InstallPlan controllers.
    pub content: CatalogCache,
    /// The catalog-operator metrics.
    pub metrics: crate::catalog_metrics::CatalogMetrics,
    /// Pulls catalog and bundle images, through one cache.
    pub images: Arc<ImageClient>,
    /// The image of ConfigMap catalogs' registry pods; none are made without it
    /// (`super::registry_pod`).
    pub configmap_server_image: Option<String>,
}
