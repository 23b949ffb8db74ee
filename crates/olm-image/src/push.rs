//! Building and pushing bundle and catalog images without Docker: one gzip layer made
//! reproducibly from a directory (sorted entries, zero times and owners), an OCI config whose
//! labels are upstream's (a bundle's annotations; a catalog's configs directory), an OCI
//! manifest, pushed with oci-client. The same directory always gives the same digest.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::Path;

use oci_client::RegistryOperation;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use crate::bundle::{MANIFESTS_LABEL, METADATA_LABEL};
use crate::catalog::{CONFIGS_LABEL, PARSED_LABEL, PARSED_PATH};
use crate::pull::parse;
use crate::{Credentials, ImageClient, ImageError};

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
const OCI_LAYER_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

/// A built image, before pushing.
#[derive(Clone, Debug)]
pub struct BuiltImage {
    layer: Vec<u8>,
    config: Vec<u8>,
    manifest: Vec<u8>,
    /// The manifest's digest: the image's identity.
    pub digest: String,
}

/// Build a bundle image from a bundle directory (`manifests/` and `metadata/`): refused, naming
/// the file, when the directory does not render as a bundle.
pub fn build_bundle(dir: &Path) -> Result<BuiltImage, ImageError> {
    let local = |err: &dyn std::fmt::Display| ImageError::local(dir.display(), err);
    if !olm_catalog::render::is_bundle_dir(dir) {
        return Err(local(&"not a bundle directory: it needs manifests/ and metadata/ (with metadata/annotations.yaml)"));
    }
    let rendered = olm_catalog::render::render_bundle_dir(dir, &Default::default()).map_err(|err| local(&err))?;
    let mut labels = annotations(dir).map_err(|err| local(&err))?;
    labels.insert(MANIFESTS_LABEL.into(), "manifests/".into());
    labels.insert(METADATA_LABEL.into(), "metadata/".into());
    tracing::debug!(bundle = %rendered.name, package = %rendered.package, "building a bundle image");
    build(&[(dir.join("manifests"), "manifests"), (dir.join("metadata"), "metadata")], &[], labels, "olm bundle push")
}

/// Build a catalog image from a file-based catalog directory (served from `/configs`).
pub fn build_catalog(dir: &Path) -> Result<BuiltImage, ImageError> {
    let local = |err: &dyn std::fmt::Display| ImageError::local(dir.display(), err);
    let (documents, mut problems) = olm_catalog::load::load_fbc_documents(dir).map_err(|err| local(&err))?;
    // The catalog already parsed, beside /configs, when its files load without a problem (a
    // catalog with problems is parsed from /configs, so they are found the same way; a
    // warning, such as a directory link not followed, changes nothing) and it is not so large
    // that shipping it twice would crowd a puller's unpack limit.
    let parsed = if problems.iter().all(|p| p.warning) { Some(olm_catalog::parsed::write(&documents, dir).map_err(|err| local(&err))?) } else { None };
    let (catalog, build_problems) = olm_catalog::Catalog::build(documents);
    problems.extend(build_problems);
    if catalog.packages().is_empty() {
        let first = problems.first().map(ToString::to_string).unwrap_or_else(|| "no olm.package".into());
        return Err(local(&format!("not a file-based catalog with at least one package: {first}")));
    }
    let labels = BTreeMap::from([(CONFIGS_LABEL.to_owned(), "/configs".to_owned())]);
    let files: Vec<(&str, Vec<u8>)> = parsed.filter(|bytes| bytes.len() as u64 <= MAX_PARSED_BYTES).map(|bytes| (PARSED_PATH, bytes)).into_iter().collect();
    build(&[(dir.to_owned(), "configs")], &files, labels, "olm catalog push")
}

/// The largest parsed form `olm catalog push` ships: it doubles what a puller unpacks.
const MAX_PARSED_BYTES: u64 = 256 << 20;

impl ImageClient {
    /// Push a built image to `image` (a tag); returns `registry/repository@digest`.
    pub async fn push(&self, built: &BuiltImage, image: &str, creds: &Credentials) -> Result<String, ImageError> {
        let reference = parse(image)?;
        let registry = reference.resolve_registry().to_owned();
        let auth = self.auth_for(creds, &registry);
        let client = self.client(&registry, &auth);
        let oci = |err| ImageError::from_oci(image, &registry, err);
        client
            .auth(&reference, &auth, RegistryOperation::Push)
            .await
            .map_err(oci)?;
        for blob in [&built.layer, &built.config] {
            let digest = sha256(blob);
            if !client.blob_exists(&reference, &digest).await.map_err(oci)? {
                client.push_blob(&reference, blob.clone(), &digest).await.map_err(oci)?;
            }
        }
        client
            .push_manifest_raw(&reference, built.manifest.clone(), http::HeaderValue::from_static(OCI_MANIFEST))
            .await
            .map_err(oci)?;
        Ok(format!("{}/{}@{}", reference.registry(), reference.repository(), built.digest))
    }
}

/// The `annotations` map of `metadata/annotations.yaml` (or .yml/.json), as labels.
fn annotations(dir: &Path) -> Result<BTreeMap<String, String>, String> {
    for name in ["annotations.yaml", "annotations.yml", "annotations.json"] {
        let path = dir.join("metadata").join(name);
        if !path.is_file() {
            continue;
        }
        let docs = olm_catalog::load::parse_file(&path).map_err(|err| err.to_string())?;
        let map = docs.first().and_then(|d| d.get("annotations")).and_then(Value::as_object);
        return Ok(map
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
            .collect());
    }
    Err("metadata/annotations.yaml is missing".into())
}

/// One layer holding each `(source directory, path in the image)` and each `(path in the
/// image, content)` file, its config and manifest. With the parsed catalog among the files,
/// the label [`PARSED_LABEL`] names it and this layer's digest: a loader trusts it only while
/// this layer is the image's last, so nothing can have changed /configs since it was written.
fn build(dirs: &[(std::path::PathBuf, &str)], files: &[(&str, Vec<u8>)], mut labels: BTreeMap<String, String>, created_by: &str) -> Result<BuiltImage, ImageError> {
    let mut builder = tar::Builder::new(Vec::new());
    for (source, target) in dirs {
        let walker = olm_catalog::walk::Walker::new(source).map_err(|err| ImageError::local(source.display(), err))?;
        append_dir(&mut builder, &walker, source, target)?;
    }
    for (path, data) in files {
        if let Some((dir, _)) = path.rsplit_once('/') {
            builder.append_data(&mut header(tar::EntryType::Directory, 0), format!("{dir}/"), std::io::empty()).map_err(|err| ImageError::local(dir, err))?;
        }
        builder.append_data(&mut header(tar::EntryType::Regular, data.len()), path, data.as_slice()).map_err(|err| ImageError::local(path, err))?;
    }
    let tar = builder.into_inner().map_err(|err| ImageError::local("layer", err))?;
    let diff_id = sha256(&tar);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&tar).map_err(|err| ImageError::local("layer", err))?;
    let layer = gz.finish().map_err(|err| ImageError::local("layer", err))?;
    if files.iter().any(|(path, _)| *path == PARSED_PATH) {
        labels.insert(PARSED_LABEL.to_owned(), format!("/{PARSED_PATH}@{}", sha256(&layer)));
    }
    let config = serde_json::to_vec(&json!({
        "architecture": "amd64", "os": "linux",
        "config": {"Labels": labels},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created_by": created_by}],
    }))
    .map_err(|err| ImageError::local("config", err))?;
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": sha256(&config), "size": config.len()},
        "layers": [{"mediaType": OCI_LAYER_GZIP, "digest": sha256(&layer), "size": layer.len()}],
    }))
    .map_err(|err| ImageError::local("manifest", err))?;
    let digest = sha256(&manifest);
    Ok(BuiltImage { layer, config, manifest, digest })
}

/// Append `source`'s regular files and directories under `target`, sorted, with zero times and
/// owners so that the layer's digest depends on content only. The directory is listed by
/// olm-catalog's walker, as every catalog loader lists it: a directory link is not followed
/// (its target is packed under its own path), and a link leaving the directory or a FIFO
/// refuses the push, named — nothing outside the directory goes into the image.
fn append_dir(builder: &mut tar::Builder<Vec<u8>>, walker: &olm_catalog::walk::Walker, source: &Path, target: &str) -> Result<(), ImageError> {
    use olm_catalog::walk::EntryKind;
    let local = |path: &Path, err: &dyn std::fmt::Display| ImageError::local(path.display(), err);
    builder
        .append_data(&mut header(tar::EntryType::Directory, 0), format!("{target}/"), std::io::empty())
        .map_err(|err| local(source, &err))?;
    for entry in walker.list(source).map_err(|err| local(source, &err))? {
        match entry.kind {
            EntryKind::Dir => append_dir(builder, walker, &entry.path, &format!("{target}/{}", entry.name))?,
            EntryKind::File { .. } => {
                let data = std::fs::read(&entry.path).map_err(|err| local(&entry.path, &err))?;
                builder
                    .append_data(&mut header(tar::EntryType::Regular, data.len()), format!("{target}/{}", entry.name), data.as_slice())
                    .map_err(|err| local(&entry.path, &err))?;
            }
            EntryKind::LinkedDir { .. } => {}
            EntryKind::Refused(problem) => {
                let fix = problem.fix.as_deref().map(|f| format!(" (fix: {f})")).unwrap_or_default();
                return Err(ImageError::local(entry.path.display(), format!("{}{fix}", problem.message)));
            }
        }
    }
    Ok(())
}

/// A tar header of a directory or a file of `size` bytes, with zero times and owners so that a
/// layer's digest depends on content only.
fn header(kind: tar::EntryType, size: usize) -> tar::Header {
    let mut header = tar::Header::new_ustar();
    header.set_entry_type(kind);
    header.set_mode(if kind == tar::EntryType::Directory { 0o755 } else { 0o644 });
    header.set_size(size as u64);
    header.set_mtime(0);
    header
}

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_catalog_builds_the_same_digest_and_bad_input_names_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("catalog.yaml"),
            "schema: olm.package\nname: p\ndefaultChannel: c\n---\nschema: olm.channel\npackage: p\nname: c\nentries: [{name: p.v1}]\n---\nschema: olm.bundle\nname: p.v1\npackage: p\nimage: r/p:1\nproperties: [{type: olm.package, value: {packageName: p, version: 1.0.0}}]\n",
        )
        .unwrap();
        let a = build_catalog(dir.path()).unwrap();
        let b = build_catalog(dir.path()).unwrap();
        assert_eq!(a.digest, b.digest);
        // A link to the directory itself is not followed (no endless layer), so it changes
        // nothing; a link out of it refuses the push, named.
        std::os::unix::fs::symlink(".", dir.path().join("self")).unwrap();
        assert_eq!(build_catalog(dir.path()).unwrap().digest, a.digest);
        std::os::unix::fs::symlink("/", dir.path().join("root")).unwrap();
        let err = build_catalog(dir.path()).unwrap_err().to_string();
        assert!(err.contains("root") && err.contains("outside"), "{err}");
        let empty = tempfile::tempdir().unwrap();
        let err = build_catalog(empty.path()).unwrap_err().to_string();
        assert!(err.contains(&empty.path().display().to_string()), "{err}");
        let err = build_bundle(dir.path()).unwrap_err().to_string();
        assert!(err.contains("manifests/ and metadata/"), "{err}");
    }
}
