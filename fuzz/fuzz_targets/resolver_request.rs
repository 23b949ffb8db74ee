//! The request file of `olm resolve --request`: parsing any bytes and checking the request
//! (namespace, catalogs, installed operators, Subscriptions) neither panics nor errs
//! without a message; a request that loads is resolved. Catalogs come from memory, never
//! from the disk: a catalog path ending in `etcd`, `deps` or `cel` is the resolver's
//! testdata catalog of that name, any other path is a catalog that cannot be read.
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use olm_catalog::{Catalog, CatalogError, ObjectMode, RenderOptions};
use olm_resolver::{CatalogKey, adapter, file, resolve};

fn catalogs() -> &'static [(&'static str, Catalog)] {
    static CATALOGS: OnceLock<Vec<(&'static str, Catalog)>> = OnceLock::new();
    CATALOGS.get_or_init(|| {
        let testdata = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../crates/olm-resolver/testdata");
        let options = RenderOptions { objects: ObjectMode::CsvMetadata, image: None };
        [("etcd", "etcd"), ("deps", "fbc-deps/catalog"), ("cel", "fbc-cel/catalog")]
            .into_iter()
            .map(|(name, dir)| {
                let (_, documents, _) =
                    olm_catalog::load_documents(&testdata.join(dir), &options).expect("testdata catalog loads");
                (name, Catalog::build(documents).0)
            })
            .collect()
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let catalogs = catalogs();
    let mut load = |path: &Path, key: CatalogKey, priority: i32| {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        match catalogs.iter().find(|(n, _)| *n == name) {
            Some((_, catalog)) => Ok((adapter::snapshot(catalog, key, priority), Vec::new())),
            None => Err(CatalogError::UnknownFormat { path: path.to_path_buf(), message: "no such catalog".into() }),
        }
    };
    match file::load_request_text(Path::new("/fuzz/request.yaml"), text, &mut load) {
        Ok(loaded) => {
            let resolution = resolve(&loaded.catalogs, &loaded.request);
            let output = file::Output::from_resolution(&resolution);
            for e in &output.errors {
                olm_fuzz::check_message(&e.message);
            }
        }
        Err(e) => {
            let message = e.to_string();
            olm_fuzz::check_message(&message);
            if let file::RequestError::Parse { message, .. } | file::RequestError::Invalid { message, .. } = &e {
                olm_fuzz::check_message(message);
            }
        }
    }
});
