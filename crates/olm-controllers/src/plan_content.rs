//! Step content kept out of a large InstallPlan (pure).
//!
//! A bundle of several real operators, or a bundle and the dependency resolved with it, can
//! carry megabytes of manifests (CRDs with big openAPI schemas). Inlined into `status.plan`,
//! the InstallPlan passes etcd's request limit (~1.5 MiB) and cannot be written at all. When
//! the inlined manifests would pass [`INLINE_LIMIT`], the largest go into ConfigMaps of the
//! plan's namespace instead — gzip-compressed `binaryData`, at most [`CONFIG_MAP_BYTES`] each,
//! owned by the plan (garbage collection removes them with it) and labelled
//! [`PLAN_LABEL`]`=<plan>` — and the step's `resource.manifest` holds a small
//! [`ContentReference`] to them, in the spirit of upstream's `UnpackedBundleReference`. The
//! InstallPlan controller [`resolve`]s the references when it applies the steps. Small plans
//! inline their manifests exactly as before.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use olm_api::v1alpha1::install_plan::Step;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Inlined manifests above this total are moved out. 256 KiB keeps every bundle seen in
/// real catalogs so far inline (etcd's plan is ~30 KiB; large single operators ~150 KiB) and
/// leaves a sixfold margin to etcd's 1.5 MiB: the plan also carries bundle lookups and
/// properties, and every pass of the InstallPlan controller rewrites the whole status, and
/// every controller's cache holds an unfinished plan whole, so a plan should stay small anyway.
pub const INLINE_LIMIT: usize = 256 * 1024;

/// Once content is moved out, the largest manifests go until the inlined rest is at most this,
/// so the plan ends well below [`INLINE_LIMIT`] (RBAC and ServiceAccounts, the small steps a
/// reader wants to see, stay inline).
pub const INLINE_TARGET: usize = 64 * 1024;

/// Compressed bytes per ConfigMap: base64 in the stored object makes 512 KiB of it, half of a
/// ConfigMap's 1 MiB limit, with room for metadata.
pub const CONFIG_MAP_BYTES: usize = 384 * 1024;

/// The label naming the InstallPlan a content ConfigMap belongs to.
pub const PLAN_LABEL: &str = "olm.installplan";

/// What a step's `resource.manifest` holds instead of a manifest that was moved out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContentReference {
    /// Always `ConfigMap`.
    pub kind: String,
    /// The (first) ConfigMap holding the manifest.
    pub name: String,
    /// Its namespace, the plan's.
    pub namespace: String,
    /// The CatalogSource the bundle came from.
    pub catalog_source_name: String,
    /// Its namespace.
    pub catalog_source_namespace: String,
    /// The gzip-compressed manifest is these `binaryData` entries, concatenated in order.
    pub parts: Vec<ContentPart>,
    /// Hex sha256 of the manifest, to tell a corrupt or replaced ConfigMap.
    pub sha256: String,
}

/// One `binaryData` entry of a ConfigMap.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContentPart {
    /// ConfigMap name.
    pub config_map: String,
    /// Key in its `binaryData`.
    pub key: String,
}

/// A ConfigMap to create for a plan: name and `binaryData`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContentConfigMap {
    /// Name, `<plan>-content-<n>`.
    pub name: String,
    /// Key → compressed bytes.
    pub data: BTreeMap<String, Vec<u8>>,
}

/// Why a step's content cannot be read back.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ContentError {
    /// Names the step, the ConfigMap and what to do.
    pub message: String,
    /// Whether reading again can help (a missing ConfigMap may be a moment's lag; a corrupt
    /// one stays corrupt).
    pub retryable: bool,
}

/// The reference a manifest is, if it is one. An inline manifest always has an `apiVersion`,
/// never `parts` and `sha256`, so the two cannot be confused.
pub fn reference_of(manifest: &str) -> Option<ContentReference> {
    if !manifest.contains("\"sha256\"") {
        return None;
    }
    serde_json::from_str::<ContentReference>(manifest)
        .ok()
        .filter(|r| r.kind == "ConfigMap" && !r.parts.is_empty())
}

fn manifest_len(step: &Step) -> usize {
    step.resource.manifest.as_ref().map_or(0, String::len)
}

fn gzip(bytes: &[u8]) -> Result<Vec<u8>, std::io::Error> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes)?;
    encoder.finish()
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Move the largest manifests of `steps` into ConfigMaps when the inlined total passes
/// [`INLINE_LIMIT`]; returns the ConfigMaps to create (none for a small plan, whose steps are
/// left untouched).
pub fn externalize(plan_name: &str, namespace: &str, steps: &mut [Step]) -> Result<Vec<ContentConfigMap>, String> {
    let total: usize = steps.iter().map(manifest_len).sum();
    if total <= INLINE_LIMIT {
        return Ok(Vec::new());
    }
    let mut by_size: Vec<usize> = (0..steps.len()).collect();
    by_size.sort_by_key(|&i| std::cmp::Reverse(manifest_len(&steps[i])));
    let mut inline = total;
    let mut moved = BTreeSet::new();
    for i in by_size {
        if inline <= INLINE_TARGET {
            break;
        }
        inline -= manifest_len(&steps[i]);
        moved.insert(i);
    }
    let name_of = |n: usize| format!("{plan_name}-content-{n}");
    let mut maps = vec![ContentConfigMap { name: name_of(0), data: BTreeMap::new() }];
    let mut room = CONFIG_MAP_BYTES;
    for i in moved {
        let step = &mut steps[i];
        let manifest = step.resource.manifest.take().unwrap_or_default();
        let compressed = gzip(manifest.as_bytes())
            .map_err(|err| format!("cannot compress the manifest of {} {}: {err}", step.resource.kind, step.resource.name))?;
        let mut parts = Vec::new();
        let mut rest = compressed.as_slice();
        while !rest.is_empty() {
            if room == 0 {
                maps.push(ContentConfigMap { name: name_of(maps.len()), data: BTreeMap::new() });
                room = CONFIG_MAP_BYTES;
            }
            let (piece, after) = rest.split_at(rest.len().min(room));
            room -= piece.len();
            rest = after;
            let key = format!("step-{i}.{}", parts.len());
            let Some(map) = maps.last_mut() else { break };
            map.data.insert(key.clone(), piece.to_vec());
            parts.push(ContentPart { config_map: map.name.clone(), key });
        }
        let reference = ContentReference {
            kind: "ConfigMap".into(),
            name: parts.first().map(|p| p.config_map.clone()).unwrap_or_default(),
            namespace: namespace.to_owned(),
            catalog_source_name: step.resource.source_name.clone(),
            catalog_source_namespace: step.resource.source_namespace.clone(),
            parts,
            sha256: sha256_hex(manifest.as_bytes()),
        };
        let text = serde_json::to_string(&reference).map_err(|err| format!("cannot write a content reference: {err}"))?;
        step.resource.manifest = Some(text);
    }
    maps.retain(|m| !m.data.is_empty());
    Ok(maps)
}

/// The ConfigMap object for `content`, owned by the InstallPlan `plan_name` (uid `plan_uid`).
pub fn config_map(content: &ContentConfigMap, namespace: &str, plan_name: &str, plan_uid: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(content.name.clone()),
            namespace: Some(namespace.to_owned()),
            labels: Some(BTreeMap::from([(PLAN_LABEL.to_owned(), plan_name.to_owned())])),
            owner_references: Some(vec![OwnerReference {
                api_version: "operators.coreos.com/v1alpha1".into(),
                kind: "InstallPlan".into(),
                name: plan_name.to_owned(),
                uid: plan_uid.to_owned(),
                controller: Some(false),
                block_owner_deletion: Some(false),
            }]),
            ..Default::default()
        },
        binary_data: Some(content.data.iter().map(|(k, v)| (k.clone(), ByteString(v.clone()))).collect()),
        immutable: Some(true),
        ..Default::default()
    }
}

/// The ConfigMaps the steps' references name.
pub fn referenced_config_maps(steps: &[Step]) -> BTreeSet<String> {
    steps
        .iter()
        .filter_map(|s| reference_of(s.resource.manifest.as_deref()?))
        .flat_map(|r| r.parts.into_iter().map(|p| p.config_map))
        .collect()
}

/// `steps` with every reference replaced by the manifest it names. `config_maps` holds the
/// `binaryData` of each referenced ConfigMap that was read, None for one that does not exist.
pub fn resolve(
    plan_name: &str,
    steps: &[Step],
    config_maps: &BTreeMap<String, Option<BTreeMap<String, ByteString>>>,
) -> Result<Vec<Step>, ContentError> {
    let mut out = steps.to_vec();
    for step in &mut out {
        let Some(reference) = step.resource.manifest.as_deref().and_then(reference_of) else { continue };
        let Some(first) = reference.parts.first() else { continue };
        let what = format!("{} {}", step.resource.kind, step.resource.name);
        let redo = format!("delete InstallPlan {plan_name} and the Subscription plans the install again");
        let mut compressed = Vec::new();
        for part in &reference.parts {
            let data = match config_maps.get(&part.config_map) {
                Some(Some(data)) => data,
                _ => {
                    return Err(ContentError {
                        message: format!(
                            "the manifest of {what} is kept in ConfigMap {}/{}, which does not exist (it belongs to InstallPlan {plan_name} and was deleted): {redo}",
                            reference.namespace, part.config_map
                        ),
                        retryable: true,
                    });
                }
            };
            let Some(bytes) = data.get(&part.key) else {
                return Err(corrupt(&what, &reference, part, "has no entry", &redo));
            };
            compressed.extend_from_slice(&bytes.0);
        }
        let mut manifest = String::new();
        flate2::read::GzDecoder::new(compressed.as_slice())
            .read_to_string(&mut manifest)
            .map_err(|_| corrupt(&what, &reference, first, "is not gzip-compressed text", &redo))?;
        if sha256_hex(manifest.as_bytes()) != reference.sha256 {
            return Err(corrupt(&what, &reference, first, "holds other content than the plan was made with", &redo));
        }
        step.resource.manifest = Some(manifest);
    }
    Ok(out)
}

fn corrupt(what: &str, reference: &ContentReference, part: &ContentPart, problem: &str, redo: &str) -> ContentError {
    ContentError {
        message: format!(
            "the manifest of {what} cannot be read from ConfigMap {}/{}: its binaryData {problem} for key {} (it was changed by hand?): {redo}",
            reference.namespace, part.config_map, part.key
        ),
        retryable: false,
    }
}

/// The executed `steps` (their statuses) with the references of `original` back in place of
/// the manifests they were resolved to, so the status written stays small.
pub fn keep_references(original: &[Step], mut steps: Vec<Step>) -> Vec<Step> {
    for (step, before) in steps.iter_mut().zip(original) {
        if before.resource.manifest.as_deref().is_some_and(|m| reference_of(m).is_some()) {
            step.resource.manifest.clone_from(&before.resource.manifest);
        }
    }
    steps
}

#[cfg(test)]
#[path = "plan_content_tests.rs"]
mod tests;
