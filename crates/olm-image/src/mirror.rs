//! A catalog whose bundles are inline (`olm.bundle.object`) made into what published catalogs
//! are: each bundle built into a bundle image and pushed, the catalog rewritten to name it by
//! digest and to carry only `olm.csv.metadata`, and pushed as a catalog image. `olm dev up`
//! serves its bundled catalog this way; `olm catalog push --push-bundles-to` gives it to users.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

use crate::{Credentials, ImageClient, ImageError};

/// What a mirror pushed.
#[derive(Clone, Debug, Default)]
pub struct Mirrored {
    /// The catalog image, by digest.
    pub catalog: String,
    /// Each bundle pushed: (bundle name, image by digest).
    pub bundles: Vec<(String, String)>,
}

/// Push every inline bundle of the file-based catalog `dir` as an image under `bundle_repo`
/// (`REGISTRY/PREFIX`: bundle `B` of package `P` goes to `REGISTRY/PREFIX/P:B`), then the
/// catalog, rewritten to name them by digest, to `catalog_image`.
pub async fn push_catalog_with_bundles(
    client: &ImageClient,
    dir: &Path,
    catalog_image: &str,
    bundle_repo: &str,
    creds: &Credentials,
) -> Result<Mirrored, ImageError> {
    let local = |err: &dyn std::fmt::Display| ImageError::local(dir.display(), err);
    let (documents, problems) = olm_catalog::load::load_fbc_documents(dir).map_err(|err| local(&err))?;
    if let Some(problem) = problems.first() {
        return Err(local(problem));
    }
    let mut docs: Vec<Value> = documents.into_iter().map(|d| d.value).collect();
    let channels = channels_by_bundle(&docs);
    let defaults: BTreeMap<String, String> = docs
        .iter()
        .filter(|d| d["schema"] == "olm.package")
        .filter_map(|d| Some((d["name"].as_str()?.to_owned(), d["defaultChannel"].as_str()?.to_owned())))
        .collect();
    let scratch = client.scratch()?;
    let mut mirrored = Mirrored::default();
    for doc in docs.iter_mut().filter(|d| d["schema"] == "olm.bundle") {
        let (Some(name), Some(package)) = (doc["name"].as_str().map(str::to_owned), doc["package"].as_str().map(str::to_owned)) else {
            continue;
        };
        let objects: Vec<Value> = crate::bundle::bundle_objects(doc)
            .iter()
            .filter_map(|text| serde_json::from_str(text).ok())
            .collect();
        if objects.is_empty() {
            continue;
        }
        let bundle_dir = scratch.path().join(&name);
        let channels = channels.get(&(package.clone(), name.clone())).cloned().unwrap_or_default();
        write_bundle_dir(&bundle_dir, &package, &channels, defaults.get(&package), &objects)
            .map_err(|err| ImageError::local(bundle_dir.display(), err))?;
        let built = crate::build_bundle(&bundle_dir)?;
        let pushed = client.push(&built, &format!("{bundle_repo}/{package}:{}", tag_of(&name)), creds).await?;
        let csv = objects.iter().find(|o| o["kind"] == "ClusterServiceVersion").cloned().unwrap_or(Value::Null);
        rewrite(doc, &pushed, &csv);
        mirrored.bundles.push((name, pushed));
    }
    let out = scratch.path().join("catalog");
    std::fs::create_dir_all(&out).map_err(|err| ImageError::local(out.display(), err))?;
    let text: Vec<String> = docs.iter().map(Value::to_string).collect();
    std::fs::write(out.join("catalog.json"), text.join("\n")).map_err(|err| ImageError::local(out.display(), err))?;
    let built = crate::build_catalog(&out)?;
    mirrored.catalog = client.push(&built, catalog_image, creds).await?;
    Ok(mirrored)
}

/// The channels that list each (package, bundle).
fn channels_by_bundle(docs: &[Value]) -> BTreeMap<(String, String), Vec<String>> {
    let mut out: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for channel in docs.iter().filter(|d| d["schema"] == "olm.channel") {
        let (Some(package), Some(name)) = (channel["package"].as_str(), channel["name"].as_str()) else {
            continue;
        };
        for entry in channel["entries"].as_array().into_iter().flatten() {
            if let Some(bundle) = entry["name"].as_str() {
                out.entry((package.to_owned(), bundle.to_owned())).or_default().push(name.to_owned());
            }
        }
    }
    out
}

/// A registry+v1 bundle directory: one manifest file per object, and the annotations.
fn write_bundle_dir(dir: &Path, package: &str, channels: &[String], default: Option<&String>, objects: &[Value]) -> std::io::Result<()> {
    let manifests = dir.join("manifests");
    let metadata = dir.join("metadata");
    std::fs::create_dir_all(&manifests)?;
    std::fs::create_dir_all(&metadata)?;
    for (i, object) in objects.iter().enumerate() {
        let kind = object["kind"].as_str().unwrap_or("object").to_ascii_lowercase();
        let name = object["metadata"]["name"].as_str().unwrap_or("unnamed");
        let file = format!("{i:02}-{kind}-{}.json", name.replace(['/', '\\'], "_"));
        std::fs::write(manifests.join(file), serde_json::to_vec_pretty(object)?)?;
    }
    let channels = if channels.is_empty() { "stable".to_owned() } else { channels.join(",") };
    let mut annotations = json!({
        "operators.operatorframework.io.bundle.mediatype.v1": "registry+v1",
        "operators.operatorframework.io.bundle.manifests.v1": "manifests/",
        "operators.operatorframework.io.bundle.metadata.v1": "metadata/",
        "operators.operatorframework.io.bundle.package.v1": package,
        "operators.operatorframework.io.bundle.channels.v1": channels,
    });
    if let Some(default) = default {
        annotations["operators.operatorframework.io.bundle.channel.default.v1"] = json!(default);
    }
    std::fs::write(metadata.join("annotations.json"), serde_json::to_vec_pretty(&json!({"annotations": annotations}))?)
}

/// The bundle document as a published catalog has it: the image by digest, the CSV's
/// metadata instead of the manifests.
fn rewrite(doc: &mut Value, image: &str, csv: &Value) {
    doc["image"] = json!(image);
    if let Some(properties) = doc["properties"].as_array_mut() {
        properties.retain(|p| p["type"] != "olm.bundle.object" && p["type"] != "olm.csv.metadata");
        if !csv.is_null() {
            properties.push(json!({"type": "olm.csv.metadata", "value": olm_catalog::render::csv_metadata(csv)}));
        }
    }
}

/// A tag from a bundle name: tags allow `[A-Za-z0-9_.-]`, at most 128 characters.
fn tag_of(name: &str) -> String {
    let tag: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') { c } else { '-' })
        .take(128)
        .collect();
    tag.trim_start_matches(['.', '-']).to_owned()
}
