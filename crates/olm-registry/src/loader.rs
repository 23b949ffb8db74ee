//! Reading a served catalog directory into a model, whatever its format.

use std::path::Path;

use olm_catalog::{Catalog, Problem};

/// Load the catalog in `dir` leniently: the model plus every problem found.
/// The error case is a directory that cannot be read at all.
pub fn load_catalog_dir(dir: &Path) -> Result<(Catalog, Vec<Problem>), String> {
    if !dir.exists() {
        return Err(format!("{} does not exist; pass an existing catalog directory", dir.display()));
    }
    olm_catalog::load::load_fbc(dir).map_err(|e| e.to_string())
}
