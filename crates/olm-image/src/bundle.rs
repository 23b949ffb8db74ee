//! A bundle image → the bundle's manifests: pulled, its `manifests/` and `metadata/`
//! directories (or those its labels name) unpacked, and rendered by the catalog model exactly
//! as a bundle directory on disk is, so that an image-only bundle installs like an inline one.

use base64::Engine as _;
use olm_catalog::render::render_bundle_dir;
use olm_catalog::{ObjectMode, RenderOptions};
use serde_json::Value;

use crate::{Credentials, ImageClient, ImageError};

/// The label naming the manifests directory of a bundle image.
pub const MANIFESTS_LABEL: &str = "operators.operatorframework.io.bundle.manifests.v1";
/// The label naming the metadata directory of a bundle image.
pub const METADATA_LABEL: &str = "operators.operatorframework.io.bundle.metadata.v1";

/// The content of a bundle image.
#[derive(Clone, Debug)]
pub struct BundleImage {
    /// The reference pulled.
    pub image: String,
    /// The image manifest's digest.
    pub digest: String,
    /// The CSV's name.
    pub name: String,
    /// The package its annotations name.
    pub package: String,
    /// The CSV as JSON text.
    pub csv_json: String,
    /// Every manifest as JSON text (the CSV included), in the bundle's file order.
    pub objects: Vec<String>,
}

impl ImageClient {
    /// Pull and read the bundle image `image`.
    pub async fn bundle(&self, image: &str, creds: &Credentials) -> Result<BundleImage, ImageError> {
        let pulled = self.pull(image, creds).await?;
        let dir_of = |label: &str, default: &str| {
            pulled
                .labels
                .get(label)
                .map(|v| v.trim_matches('/').to_owned())
                .filter(|v| !v.is_empty() && !v.split('/').any(|c| c == ".."))
                .unwrap_or_else(|| default.to_owned())
        };
        let manifests = dir_of(MANIFESTS_LABEL, "manifests");
        let metadata = dir_of(METADATA_LABEL, "metadata");
        let scratch = self.scratch()?;
        let unpacked = scratch.path().join("content");
        self.unpack(&pulled, &[&manifests, &metadata], &unpacked).await?;
        let not_a_bundle = |message: String| ImageError::NotABundle { image: image.to_owned(), message };
        // The renderer reads `manifests/` and `metadata/`: move labelled directories there.
        let bundle_dir = scratch.path().join("bundle");
        for (from, to) in [(&manifests, "manifests"), (&metadata, "metadata")] {
            let source = unpacked.join(from);
            if !source.is_dir() {
                return Err(not_a_bundle(format!(
                    "it has no /{from} directory (a registry+v1 bundle image has /manifests and /metadata, or labels {MANIFESTS_LABEL} and {METADATA_LABEL} naming them)"
                )));
            }
            std::fs::create_dir_all(&bundle_dir).map_err(|err| ImageError::local(bundle_dir.display(), err))?;
            std::fs::rename(&source, bundle_dir.join(to)).map_err(|err| ImageError::local(source.display(), err))?;
        }
        let options = RenderOptions { objects: ObjectMode::BundleObjects, image: Some(image.to_owned()) };
        let rendered = tokio::task::spawn_blocking(move || render_bundle_dir(&bundle_dir, &options))
            .await
            .map_err(|err| ImageError::local("render task", err))?
            // The renderer names its scratch path; the user knows the image.
            .map_err(|err| not_a_bundle(err.to_string().replace(&scratch.path().join("bundle").display().to_string(), "")))?;
        let objects = bundle_objects(&rendered.document);
        let csv_json = objects
            .iter()
            .find(|o| serde_json::from_str::<Value>(o).is_ok_and(|v| v.get("kind").and_then(Value::as_str) == Some("ClusterServiceVersion")))
            .cloned()
            .ok_or_else(|| not_a_bundle("its manifests have no ClusterServiceVersion".into()))?;
        Ok(BundleImage {
            image: image.to_owned(),
            digest: pulled.digest,
            name: rendered.name,
            package: rendered.package,
            csv_json,
            objects,
        })
    }
}

/// The JSON text of each `olm.bundle.object` of an `olm.bundle` document.
pub(crate) fn bundle_objects(document: &Value) -> Vec<String> {
    document
        .get("properties")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|p| p.get("type").and_then(Value::as_str) == Some("olm.bundle.object"))
        .filter_map(|p| p.get("value")?.get("data")?.as_str())
        .filter_map(|data| base64::engine::general_purpose::STANDARD.decode(data).ok())
        .filter_map(|bytes| String::from_utf8(bytes).ok())
        .collect()
}
