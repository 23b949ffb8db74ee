//! The controllers of OLM v1's API (`olm.operatorframework.io/v1`), on the same engine as v0's:
//! the image puller and catalog reader (`olm-catalog-client`, `olm-image`), the generic runtime
//! (`olm-runtime`), and the catalog HTTP server (`olm-registry`, handed in as a
//! [`CatalogPublisher`]: [`served_by`]). A manager runs them beside v0's through [`V1Controllers`], an
//! [`olm_runtime::ControllerSet`].
//!
//! - [`clustercatalog`]: a ClusterCatalog's image pulled, polled, and its content served;
//! - [`clusterextension`]: a package installed from what the ClusterCatalogs serve, as plain
//!   objects (v0's resolver, puller and the installer floor `olm-install`).

pub mod clustercatalog;
pub mod clusterextension;
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

/// The catalog server's set ([`olm_registry::CatalogSet`]) as the publisher.
pub fn served_by(catalogs: olm_registry::CatalogSet) -> Arc<dyn CatalogPublisher> {
    Arc::new(Served(catalogs))
}

/// The ClusterCatalog content server (`olm run --cluster-catalog-addr`): the catalog server's
/// HTTP API (catalogd's `/catalogs/NAME/api/v1/all` and `/api/v1/metas`, and ours) over what
/// the ClusterCatalog controller publishes. Returns the server and its publisher.
pub async fn serve_catalogs(addr: std::net::SocketAddr) -> Result<(olm_registry::RunningServer, Arc<dyn CatalogPublisher>), olm_registry::RegistryError> {
    let config = olm_registry::ServeConfig { http_addr: Some(addr), reload_interval: None, published: true, ..olm_registry::ServeConfig::new(Vec::new()) };
    let server = olm_registry::start(config).await?;
    let publisher = served_by(server.catalogs.clone());
    Ok((server, publisher))
}

#[derive(Debug)]
struct Served(olm_registry::CatalogSet);

impl CatalogPublisher for Served {
    fn publish(&self, name: &str, catalog: &olm_catalog::Catalog) {
        self.0.publish(name, catalog.clone(), std::time::Duration::ZERO);
    }

    fn withdraw(&self, name: &str) {
        self.0.withdraw(name);
    }
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
    /// The namespace OLM runs in, which holds ClusterExtensions' revision records.
    pub namespace: String,
}

impl ControllerSet for V1Controllers {
    fn names(&self) -> Vec<&'static str> {
        vec![clustercatalog::NAME, clusterextension::NAME]
    }

    fn start(&self, wiring: Wiring<'_>) -> Vec<tokio::task::JoinHandle<()>> {
        let catalogs = wiring.caches.watch(
            kube::Api::<olm_api::olmv1::ClusterCatalog>::all(wiring.client.clone()),
            kube::runtime::watcher::Config::default(),
        );
        let extensions = wiring.caches.watch(
            kube::Api::<olm_api::olmv1::ClusterExtension>::all(wiring.client.clone()),
            kube::runtime::watcher::Config::default(),
        );
        // What the ClusterCatalog controller serves is what ClusterExtensions resolve against.
        let served = Arc::new(std::sync::Mutex::new(std::collections::HashMap::new()));
        let catalog_state = clustercatalog::ClusterCatalogState {
            catalogs: catalogs.clone(),
            held: served.clone(),
            images: self.images.clone(),
            publisher: self.publisher.clone(),
            base_url: self.base_url.trim_end_matches('/').to_owned(),
        };
        // What a ClusterExtension installed, watched by its owner label: one deleted is put back
        // at once (upstream's drift repair), not at the next resync.
        let owned = || kube::runtime::watcher::Config::default().labels(&format!("{}={}", clusterextension::OWNER_KIND_LABEL, clusterextension::OWNER_KIND));
        let installed = clusterextension::Installed {
            deployments: wiring.caches.watch(kube::Api::all(wiring.client.clone()), owned()),
            services: wiring.caches.watch(kube::Api::all(wiring.client.clone()), owned()),
            service_accounts: wiring.caches.watch(kube::Api::all(wiring.client.clone()), owned()),
            config_maps: wiring.caches.watch_trimmed(kube::Api::all(wiring.client.clone()), owned(), |map: &mut k8s_openapi::api::core::v1::ConfigMap| {
                map.data = None;
                map.binary_data = None;
            }),
        };
        let extension_state = clusterextension::ClusterExtensionState { extensions, catalogs, served, installed, memory: Default::default(), namespace: self.namespace.clone() };
        vec![
            tokio::spawn(clustercatalog::run(context(&wiring, clustercatalog::NAME, catalog_state), wiring.shutdown.signal())),
            tokio::spawn(clusterextension::run(context(&wiring, clusterextension::NAME, extension_state), wiring.shutdown.signal())),
        ]
    }
}

/// A controller's context on the manager's client, metrics and leadership.
fn context<S>(wiring: &Wiring<'_>, name: &'static str, state: S) -> Arc<ControllerContext<S>> {
    Arc::new(ControllerContext::new((FIELD_MANAGER_PREFIX, name), wiring.client.clone(), wiring.metrics.clone(), wiring.leadership.clone(), state))
}
