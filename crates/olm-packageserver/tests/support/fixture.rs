//! The package server's store as its API tests and the schema-fuzzing server use it: `catalog`
//! served as CatalogSource olm/community, and a catalog team-a/broken that cannot be reached.

use std::collections::HashMap;
use std::sync::Arc;

use olm_packageserver::manifest::{CatalogInfo, build};
use olm_packageserver::store::Store;

pub fn store_with(catalog: &olm_catalog::Catalog) -> Arc<Store> {
    let info = CatalogInfo {
        name: "community".into(),
        namespace: "olm".into(),
        display_name: "Community Operators".into(),
        publisher: "OLM".into(),
        ..Default::default()
    };
    let (served, _) = build(&info, catalog, &HashMap::new());
    let store = Arc::new(Store::new("olm"));
    store.set_packages(info, served);
    store.set_error(
        CatalogInfo { name: "broken".into(), namespace: "team-a".into(), ..Default::default() },
        "cannot connect to catalog 10.0.0.1:50051".into(),
    );
    store.mark_synced();
    store
}
