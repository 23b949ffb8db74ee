//! A bundle directory's metadata: the input is `metadata/annotations.yaml`, then
//! `metadata/dependencies.yaml`, then `metadata/properties.yaml`, separated by lines `%%`,
//! beside a fixed CSV in `manifests/`. Rendering the bundle (annotations, `olm.package.required`,
//! `olm.gvk.required`, `olm.constraint` with CEL, `olm.label` ...) and building a catalog
//! of it neither panics nor takes unbounded work, and every error reads as a sentence.
#![no_main]

use libfuzzer_sys::fuzz_target;
use olm_catalog::{Catalog, RenderOptions};

fuzz_target!(|data: &[u8]| {
    let root = olm_fuzz::scratch_dir().join("bundles");
    let bundle = root.join("bundle");
    let metadata = bundle.join("metadata");
    let manifests = bundle.join("manifests");
    if !manifests.is_dir() {
        let csv = olm_fuzz::csv_yaml("etcdoperator.v0.9.4", "0.9.4", Some("etcdoperator.v0.9.2"));
        olm_fuzz::write(&manifests, "etcdoperator.clusterserviceversion.yaml", csv.as_bytes());
    }
    let parts = olm_fuzz::split_parts(data, 3);
    for (name, part) in ["annotations.yaml", "dependencies.yaml", "properties.yaml"].iter().zip(&parts) {
        olm_fuzz::write(&metadata, name, part);
    }
    let (documents, problems) = olm_catalog::render::render_bundle_dirs(&root, &[bundle], &RenderOptions::default());
    for p in &problems {
        olm_fuzz::check_message(&p.message);
    }
    let (catalog, problems) = Catalog::build(documents);
    for p in &problems {
        olm_fuzz::check_message(&p.message);
    }
    for bundle in catalog.bundles() {
        let _ = bundle.constraints().count();
        let _ = bundle.required_gvks().count();
    }
});
