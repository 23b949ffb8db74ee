//! The legacy package-manifest loader: the input is `etcd.package.yaml`, beside two fixed
//! version directories (0.9.0, and 0.9.2 replacing it). Finding the package manifest,
//! rendering the package (channels, currentCSV, defaultChannel) and building a catalog of
//! it neither panics nor takes unbounded work, and every error reads as a sentence.
#![no_main]

use libfuzzer_sys::fuzz_target;
use olm_catalog::{Catalog, RenderOptions};

fuzz_target!(|data: &[u8]| {
    let package = olm_fuzz::scratch_dir().join("etcd");
    if !package.join("0.9.2").is_dir() {
        let old = olm_fuzz::csv_yaml("etcdoperator.v0.9.0", "0.9.0", None);
        olm_fuzz::write(&package.join("0.9.0"), "etcdoperator.v0.9.0.clusterserviceversion.yaml", old.as_bytes());
        let new = olm_fuzz::csv_yaml("etcdoperator.v0.9.2", "0.9.2", Some("etcdoperator.v0.9.0"));
        olm_fuzz::write(&package.join("0.9.2"), "etcdoperator.v0.9.2.clusterserviceversion.yaml", new.as_bytes());
    }
    olm_fuzz::write(&package, "etcd.package.yaml", data);
    match olm_catalog::render::render_package_manifest_dir(&package, &RenderOptions::default()) {
        Ok((documents, problems)) => {
            for p in &problems {
                olm_fuzz::check_message(&p.message);
            }
            let (_catalog, problems) = Catalog::build(documents);
            for p in &problems {
                olm_fuzz::check_message(&p.message);
            }
        }
        Err(e) => olm_fuzz::check_catalog_error(&e),
    }
});
