//! The File-Based Catalog loader on one file, YAML or JSON, by the path the catalog server
//! takes (`load_fbc`: UTF-8 check, document-by-document parse, lenient YAML repairs,
//! nesting and size budgets, the model and opm's validation): any bytes neither panic nor
//! take unbounded time or memory, and every problem reads as a sentence. A catalog that
//! loads is queried the way the resolver and the server do (channel heads, upgrade paths,
//! blobs).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Catalog files are named *.yaml or *.json; the loader reads both by their content.
    let path = olm_fuzz::write(olm_fuzz::scratch_dir(), "catalog.yaml", data);
    match olm_catalog::load::load_fbc(&path) {
        Ok((catalog, problems)) => {
            for p in &problems {
                olm_fuzz::check_message(&p.message);
                let _ = p.to_string();
            }
            for package in catalog.packages() {
                let _ = package.default_head();
                let _ = package.newest_bundle();
                for channel in package.channels() {
                    if channel.head().is_some() {
                        let _ = channel.replaces_chain().count();
                        for entry in channel.entries() {
                            let _ = channel.path_to_head(&entry.name, None);
                            let _ = channel.successors(&entry.name, None);
                        }
                    }
                }
                for bundle in package.bundles() {
                    let _ = bundle.csv_metadata();
                    let _ = bundle.constraints().count();
                    let _ = bundle.required_packages().count();
                }
            }
            for meta in catalog.canonical_metas() {
                let _ = meta.blob.len();
            }
        }
        Err(e) => olm_fuzz::check_catalog_error(&e),
    }
});
