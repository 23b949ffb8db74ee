//! Reading a served catalog directory into a model, whatever its format.

use std::path::Path;

use olm_catalog::render::RenderOptions;
use olm_catalog::{Catalog, Problem};

/// Load the catalog in `dir` leniently: the model plus every problem found.
/// File-Based Catalogs, legacy package manifests and bundle directories are all
/// accepted (format detection is olm-catalog's); bundle directories keep every
/// manifest, so gRPC clients get the CSV and objects as from `opm serve`.
/// The error case is a directory that cannot be read at all.
pub fn load_catalog_dir(dir: &Path) -> Result<(Catalog, Vec<Problem>), String> {
    if !dir.exists() {
        return Err(format!("{} does not exist; pass an existing catalog directory", dir.display()));
    }
    olm_catalog::source::load_catalog_lenient(dir, &RenderOptions::default())
        .map(|(_, catalog, problems)| (catalog, problems))
        .map_err(|e| e.to_string())
}
