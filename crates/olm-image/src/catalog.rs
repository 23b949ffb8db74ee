//! A catalog image → its file-based catalog: the directory the label
//! `operators.operatorframework.io.index.configs.v1` names (`/configs` by default), unpacked
//! into a scratch directory the caller loads. An image that carries a SQLite database instead
//! is refused with the way to migrate it.

use std::path::PathBuf;

use crate::{Credentials, ImageClient, ImageError};

/// The label naming a catalog image's FBC directory.
pub const CONFIGS_LABEL: &str = "operators.operatorframework.io.index.configs.v1";
/// The label of a catalog image `olm catalog push` built: where its catalog is, already parsed
/// (`olm_catalog::parsed`), and the digest of the layer holding both it and /configs.
pub const PARSED_LABEL: &str = "io.olm-rs.catalog.parsed.v1";
/// Where `olm catalog push` puts the parsed catalog in the image.
pub const PARSED_PATH: &str = "olm-rs/catalog.jsonl";
/// The label of the deprecated SQLite catalog images.
pub const DATABASE_LABEL: &str = "operators.operatorframework.io.index.database.v1";

/// An unpacked catalog image; the directory is removed when this is dropped.
#[derive(Debug)]
pub struct CatalogImage {
    /// The reference pulled.
    pub image: String,
    /// The image manifest's digest.
    pub digest: String,
    /// The FBC root.
    pub root: PathBuf,
    /// The catalog already parsed, when the image carries it and it is the image's own (see
    /// [`PARSED_LABEL`]).
    pub parsed: Option<PathBuf>,
    _scratch: tempfile::TempDir,
}

impl ImageClient {
    /// Pull `image` and unpack its file-based catalog.
    pub async fn catalog(&self, image: &str, creds: &Credentials) -> Result<CatalogImage, ImageError> {
        let pulled = self.pull(image, creds).await?;
        let configs = match pulled.labels.get(CONFIGS_LABEL) {
            Some(dir) => dir.trim_matches('/').to_owned(),
            None => match pulled.labels.get(DATABASE_LABEL) {
                Some(db) => {
                    return Err(ImageError::SqliteCatalog {
                        image: image.to_owned(),
                        label: format!("{DATABASE_LABEL}={db}"),
                    });
                }
                None => "configs".to_owned(),
            },
        };
        if configs.is_empty() || configs.split('/').any(|c| c == "..") {
            return Err(ImageError::BadContent {
                image: image.to_owned(),
                message: format!("label {CONFIGS_LABEL} names {configs:?}, which is not a directory inside the image"),
            });
        }
        // The parsed form is trusted only while its layer is the image's last: an image built
        // on top of it may have changed /configs.
        let parsed = pulled.labels.get(PARSED_LABEL).and_then(|label| {
            let (path, layer) = label.split_once('@')?;
            let path = path.trim_matches('/');
            let own = pulled.layers.last().is_some_and(|last| last.digest == layer) && !path.is_empty() && !path.split('/').any(|c| c == "..");
            own.then(|| path.to_owned())
        });
        let scratch = self.scratch()?;
        let mut wanted = vec![configs.as_str()];
        wanted.extend(parsed.as_deref());
        self.unpack(&pulled, &wanted, scratch.path()).await?;
        let root = scratch.path().join(&configs);
        if !root.is_dir() {
            return Err(ImageError::BadContent {
                image: image.to_owned(),
                message: format!(
                    "it has no /{configs} directory: a catalog image carries its file-based catalog there (label {CONFIGS_LABEL})"
                ),
            });
        }
        let parsed = parsed.map(|p| scratch.path().join(p)).filter(|p| p.is_file());
        Ok(CatalogImage { image: image.to_owned(), digest: pulled.digest, root, parsed, _scratch: scratch })
    }
}
