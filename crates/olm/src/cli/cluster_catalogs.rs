//! The ClusterCatalog content server of `olm run`: the catalog server's HTTP API (catalogd's
//! `/catalogs/NAME/api/v1/all` and `/api/v1/metas`, and ours) over the catalogs the
//! ClusterCatalog controller publishes.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use olm_controllers_v1::CatalogPublisher;
use olm_registry::{CatalogSet, RunningServer, ServeConfig};

/// The catalog server's set, as the controller's publisher.
#[derive(Debug)]
struct Published(CatalogSet);

impl CatalogPublisher for Published {
    fn publish(&self, name: &str, catalog: &olm_catalog::Catalog) {
        self.0.publish(name, catalog.clone(), Duration::ZERO);
    }

    fn withdraw(&self, name: &str) {
        self.0.withdraw(name);
    }
}

/// Start serving on `addr`; returns the server and the publisher that fills it.
pub async fn serve(addr: SocketAddr) -> anyhow::Result<(RunningServer, Arc<dyn CatalogPublisher>)> {
    let config = ServeConfig { http_addr: Some(addr), reload_interval: None, published: true, ..ServeConfig::new(Vec::new()) };
    let server = olm_registry::start(config).await.with_context(|| format!("cannot serve ClusterCatalog content on {addr}"))?;
    let publisher: Arc<dyn CatalogPublisher> = Arc::new(Published(server.catalogs.clone()));
    Ok((server, publisher))
}
