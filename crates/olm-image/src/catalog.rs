//! A catalog image → its file-based catalog: the directory the label
//! `operators.operatorframework.io.index.configs.v1` names (`/configs` by default), unpacked
//! into a scratch directory the caller loads. An image that carries a SQLite database instead
//! is refused with the way to migrate it.

use std::path::PathBuf;

use crate::{Credentials, ImageClient, ImageError};

/// The label naming a catalog image's FBC directory.
pub const CONFIGS_LABEL: &str = "operators.operatorframework.io.index.configs.v1";
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
        let scratch = self.scratch()?;
        self.unpack(&pulled, &[&configs], scratch.path()).await?;
        let root = scratch.path().join(&configs);
        if !root.is_dir() {
            return Err(ImageError::BadContent {
                image: image.to_owned(),
                message: format!(
                    "it has no /{configs} directory: a catalog image carries its file-based catalog there (label {CONFIGS_LABEL})"
                ),
            });
        }
        Ok(CatalogImage { image: image.to_owned(), digest: pulled.digest, root, _scratch: scratch })
    }
}
