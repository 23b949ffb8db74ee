//! The controllers of OLM v1's API (`olm.operatorframework.io/v1`), on the same engine as v0's:
//! the image puller and catalog reader (`olm-catalog-client`, `olm-image`), the generic runtime
//! (`olm-runtime`), and the catalog HTTP server, which the binary hands in as a
//! [`CatalogPublisher`]. A manager runs them beside v0's through [`V1Controllers`], an
//! [`olm_runtime::ControllerSet`].
//!
//! - [`clustercatalog`]: a ClusterCatalog's image pulled, polled, and its content served.

pub mod clustercatalog;
pub mod conditions;

use std::sync::Arc;

use olm_runtime::{ControllerContext, ControllerSet, Wiring};

/// Field manager prefix: `olm/<controller>`, as v0's controllers.
pub const FIELD_MANAGER_PREFIX: &str = "olm";

/// Where ClusterCatalog content goes to be served: the catalog HTTP server (`olm-registry`'s
/// `CatalogSet` in the binary), or a recorder in tests.
pub trait CatalogPublisher: std::fmt::Debug + Send + Sync {
    /// Serve `catalog` as `name` from now on, replacing what was served under it.
    fn publish(&self, name: &str, catalog: &olm_catalog::Catalog);
    /// Stop serving `name`.
    fn withdraw(&self, name: &str);
}

/// The v1 controllers and what they need from the process.
#[derive(Debug, Clone)]
pub struct V1Controllers {
    /// Pulls catalog images (the same client, cache and registry settings as v0's).
    pub images: Arc<olm_image::ImageClient>,
    /// Serves unpacked catalogs.
    pub publisher: Arc<dyn CatalogPublisher>,
    /// The URL the catalog server answers on, without a trailing slash
    /// (`status.urls.base` is `<base>/catalogs/<name>`).
    pub base_url: String,
}

impl ControllerSet for V1Controllers {
    fn names(&self) -> Vec<&'static str> {
        vec![clustercatalog::NAME]
    }

    fn start(&self, wiring: Wiring<'_>) -> Vec<tokio::task::JoinHandle<()>> {
        let catalogs = wiring.caches.watch(
            kube::Api::<olm_api::olmv1::ClusterCatalog>::all(wiring.client.clone()),
            kube::runtime::watcher::Config::default(),
        );
        let state = clustercatalog::ClusterCatalogState {
            catalogs,
            held: Default::default(),
            images: self.images.clone(),
            publisher: self.publisher.clone(),
            base_url: self.base_url.trim_end_matches('/').to_owned(),
        };
        let ctx = Arc::new(ControllerContext::new(
            (FIELD_MANAGER_PREFIX, clustercatalog::NAME),
            wiring.client.clone(),
            wiring.metrics.clone(),
            wiring.leadership.clone(),
            state,
        ));
        vec![tokio::spawn(clustercatalog::run(ctx, wiring.shutdown.signal()))]
    }
}
