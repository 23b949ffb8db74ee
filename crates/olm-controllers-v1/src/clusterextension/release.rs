//! The revision record stored as upstream operator-controller stores its installs: a Helm release
//! in the chunked-Secrets format of helm-operator-plugins (an index Secret of type
//! `operatorframework.io/index.v1`, named `sh.helm.release.v1.<extension>.v<revision>`, labelled
//! `owner=operator-controller,name=<extension>,status=deployed`, whose `chunk` is the gzipped
//! release JSON; a release over one chunk continues in `operatorframework.io/chunk.v1` Secrets the
//! index lists in `extraChunks`), in OLM's own namespace. So upstream's tools read what olm-rs
//! installed (its e2e suite lists an extension's objects from the release's `manifest`), and a
//! release upstream wrote is read back as a record. olm-rs's own record rides in the release
//! JSON under `olmRevision`, which Helm's decoder ignores.

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};

use super::decide::InstalledBundle;
use super::record::{ObjectRef, Record, owner_reference};

/// The `owner` label of upstream's release Secrets (its storage driver's owner).
pub const OWNER: &str = "operator-controller";
pub const INDEX_TYPE: &str = "operatorframework.io/index.v1";
pub const CHUNK_TYPE: &str = "operatorframework.io/chunk.v1";
/// Upstream's chunk size: a Secret's 1 MiB less room for its metadata.
const CHUNK_SIZE: usize = (1024 - 8) * 1024;
/// Upstream reads and writes at most this many chunks.
const MAX_CHUNKS: usize = 11;
const RECORD_KEY: &str = "olmRevision";
/// The release labels upstream writes (`internal/operator-controller/labels`).
const BUNDLE_NAME: &str = "olm.operatorframework.io/bundle-name";
const BUNDLE_VERSION: &str = "olm.operatorframework.io/bundle-version";
const BUNDLE_REFERENCE: &str = "olm.operatorframework.io/bundle-reference";
const PACKAGE_NAME: &str = "olm.operatorframework.io/package-name";

/// The index Secret's name (Helm's storage key) for one revision of `extension`.
pub fn key(extension: &str, revision: u64) -> String {
    format!("sh.helm.release.v1.{extension}.v{revision}")
}

/// The label selector of `extension`'s deployed release index.
pub fn deployed_selector(extension: &str) -> String {
    format!("owner={OWNER},type=index,name={extension},status=deployed")
}

/// The label selector of every Secret of `extension`'s releases (index and chunks).
pub fn all_selector(extension: &str) -> String {
    format!("owner={OWNER},name={extension}")
}

/// The Secrets of `record` as a deployed release, index first: `applied` are the objects as
/// applied (the release's manifest), `install_namespace` the release's namespace.
pub fn secrets(record: &Record, applied: &[Value], extension: &str, uid: &str, namespace: &str, install_namespace: &str, now: &str) -> Result<Vec<Secret>, String> {
    let manifest: String = applied
        .iter()
        .map(|object| serde_saphyr::to_string(object).map(|text| format!("---\n{text}")))
        .collect::<Result<_, _>>()
        .map_err(|err| format!("cannot write an applied object as YAML: {err}"))?;
    let labels = bundle_labels(&record.bundle);
    let release = json!({
        "name": extension,
        "info": {"first_deployed": now, "last_deployed": now, "deleted": "", "description": if record.revision == 1 { "Install complete" } else { "Upgrade complete" }, "status": "deployed"},
        "chart": {"metadata": {"apiVersion": "v2", "name": record.bundle.package, "version": record.bundle.version}},
        "config": {},
        "manifest": manifest,
        "version": record.revision,
        "namespace": install_namespace,
        "labels": labels,
        RECORD_KEY: record,
    });
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder
        .write_all(release.to_string().as_bytes())
        .and_then(|()| encoder.finish())
        .map_err(|err| format!("cannot compress the release: {err}"))
        .and_then(|data| chunked(record, &data, extension, uid, namespace))
}

fn chunked(record: &Record, data: &[u8], extension: &str, uid: &str, namespace: &str) -> Result<Vec<Secret>, String> {
    let key = key(extension, record.revision);
    let chunks: Vec<&[u8]> = data.chunks(CHUNK_SIZE).collect();
    if chunks.len() > MAX_CHUNKS {
        return Err(format!(
            "the record of revision {} is {} bytes compressed, over the {MAX_CHUNKS} Secrets of {CHUNK_SIZE} bytes a release may take (upstream's limit too)",
            record.revision,
            data.len()
        ));
    }
    let names: Vec<String> = chunks[1..].iter().map(|chunk| format!("{key}-{}", chunk_hash(chunk))).collect();
    let secret = |name: &str, kind: &str, labels: BTreeMap<String, String>, data: BTreeMap<String, ByteString>| Secret {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some(labels),
            owner_references: Some(vec![owner_reference(extension, uid)]),
            ..Default::default()
        },
        type_: Some(kind.to_owned()),
        immutable: Some(kind == CHUNK_TYPE),
        data: Some(data),
        ..Default::default()
    };
    let label = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect::<BTreeMap<_, _>>();
    let revision = record.revision.to_string();
    let safe_key = label_safe(&key);
    let index_labels = label(&[("owner", OWNER), ("type", "index"), ("name", extension), ("version", &revision), ("status", "deployed"), ("key", &safe_key)]);
    let index_data = BTreeMap::from([
        ("chunk".to_owned(), ByteString(chunks.first().copied().unwrap_or_default().to_vec())),
        ("extraChunks".to_owned(), ByteString(serde_json::to_vec(&names).unwrap_or_default())),
    ]);
    let mut out = vec![secret(&key, INDEX_TYPE, index_labels, index_data)];
    for (name, chunk) in names.iter().zip(&chunks[1..]) {
        // `name` too, unlike upstream's chunks: the extension's Secrets are found by one selector.
        let labels = label(&[("owner", OWNER), ("type", "chunk"), ("name", extension), ("key", &safe_key)]);
        out.push(secret(name, CHUNK_TYPE, labels, BTreeMap::from([("chunk".to_owned(), ByteString(chunk.to_vec()))])));
    }
    Ok(out)
}

/// The chunk Secret names an index lists, in order.
pub fn extra_chunks(index: &Secret) -> Result<Vec<String>, String> {
    match index.data.as_ref().and_then(|d| d.get("extraChunks")) {
        None => Ok(Vec::new()),
        Some(names) => serde_json::from_slice(&names.0).map_err(|err| format!("its extraChunks is not a list of Secret names: {err}")),
    }
}

/// A deployed release as read: its record, and its manifest (the objects as applied, YAML) to
/// apply again when no catalog serves the bundle any more.
#[derive(Debug, Clone, PartialEq)]
pub struct Deployed {
    pub record: Record,
    pub manifest: String,
}

/// The release an index (and its chunks) holds: olm-rs's own record, or, for a release upstream
/// wrote, the bundle from its labels and the objects of its manifest.
pub fn read(index: &Secret, extra: &[Secret]) -> Result<Deployed, String> {
    let mut data = Vec::new();
    for secret in std::iter::once(index).chain(extra) {
        let name = secret.metadata.name.as_deref().unwrap_or_default();
        let chunk = secret.data.as_ref().and_then(|d| d.get("chunk")).ok_or_else(|| format!("Secret {name} has no chunk"))?;
        data.extend_from_slice(&chunk.0);
    }
    let mut text = String::new();
    flate2::read::GzDecoder::new(data.as_slice()).read_to_string(&mut text).map_err(|err| format!("its chunks are not a gzipped release: {err}"))?;
    let mut release: Value = serde_json::from_str(&text).map_err(|err| format!("the release is not JSON: {err}"))?;
    let manifest = match release.get_mut("manifest").map(Value::take) {
        Some(Value::String(manifest)) => manifest,
        _ => String::new(),
    };
    if let Some(record) = release.get_mut(RECORD_KEY).map(Value::take) {
        let record = serde_json::from_value(record).map_err(|err| format!("its {RECORD_KEY} is not a revision record: {err}"))?;
        return Ok(Deployed { record, manifest });
    }
    // Written by upstream's operator-controller.
    let labels = release.get("labels").cloned().unwrap_or_default();
    let label = |key: &str| labels.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
    let objects = olm_catalog::load::parse_manifest_text(&manifest).map_err(|err| format!("its manifest cannot be read: {err}"))?;
    let namespace = release.get("namespace").and_then(Value::as_str).unwrap_or_default();
    let mut objects: Vec<ObjectRef> = objects.iter().map(ObjectRef::of).collect();
    // Helm leaves a namespaced object's namespace to the release's; which kinds are namespaced
    // is not known here, so only the kinds a registry+v1 bundle renders cluster-wide keep none.
    const CLUSTER_KINDS: [&str; 5] = ["CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "Namespace", "APIService"];
    for object in objects.iter_mut().filter(|o| o.namespace.is_empty() && !CLUSTER_KINDS.contains(&o.kind.as_str())) {
        object.namespace = namespace.to_owned();
    }
    let record = Record {
        revision: release.get("version").and_then(Value::as_u64).unwrap_or(1),
        bundle: InstalledBundle { package: label(PACKAGE_NAME), name: label(BUNDLE_NAME), version: label(BUNDLE_VERSION), image: label(BUNDLE_REFERENCE) },
        objects,
        live_spec: Vec::new(),
    };
    Ok(Deployed { record, manifest })
}

fn bundle_labels(bundle: &InstalledBundle) -> BTreeMap<&'static str, &str> {
    BTreeMap::from([(BUNDLE_NAME, bundle.name.as_str()), (BUNDLE_VERSION, bundle.version.as_str()), (BUNDLE_REFERENCE, bundle.image.as_str()), (PACKAGE_NAME, bundle.package.as_str())])
}

/// A key as a label value: itself when it fits, else 63 hex digits of its SHA-256 (upstream's).
fn label_safe(key: &str) -> String {
    if key.len() <= 63 {
        return key.to_owned();
    }
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(key.as_bytes()))[..63].to_owned()
}

/// Upstream's chunk name suffix: FNV-1a 64 of the chunk, big-endian, in base32 with the alphabet
/// `a–z1–6` and no padding.
fn chunk_hash(data: &[u8]) -> String {
    use std::hash::Hasher as _;
    let mut hasher = fnv::FnvHasher::default();
    hasher.write(data);
    let mut spec = data_encoding::Specification::new();
    spec.symbols.push_str("abcdefghijklmnopqrstuvwxyz123456");
    // The specification is constant and valid: an error here is a bug in these two lines.
    spec.encoding().map(|base32| base32.encode(&hasher.finish().to_be_bytes())).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(revision: u64) -> Record {
        Record {
            revision,
            bundle: InstalledBundle { package: "etcd".into(), name: "etcdoperator.v0.9.4".into(), version: "0.9.4".into(), image: "r/etcd@sha256:ab".into() },
            objects: vec![
                ObjectRef { api_version: "v1".into(), kind: "ServiceAccount".into(), namespace: "etcd".into(), name: "etcd-operator".into() },
                ObjectRef { api_version: "rbac.authorization.k8s.io/v1".into(), kind: "ClusterRole".into(), namespace: String::new(), name: "etcd-x".into() },
            ],
            live_spec: Vec::new(),
        }
    }

    fn applied() -> Vec<Value> {
        vec![
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "etcd-operator", "namespace": "etcd"}}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "etcd-x"}, "rules": []}),
        ]
    }

    /// What upstream's e2e suite does with the index: gunzip `chunk`, decode the release, read
    /// the manifest's objects.
    fn manifest_of(index: &Secret) -> Vec<Value> {
        let mut text = String::new();
        flate2::read::GzDecoder::new(index.data.as_ref().unwrap()["chunk"].0.as_slice()).read_to_string(&mut text).unwrap();
        let release: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(release["name"], "etcd");
        assert_eq!(release["info"]["status"], "deployed");
        olm_catalog::load::parse_manifest_text(release["manifest"].as_str().unwrap()).unwrap()
    }

    #[test]
    fn a_record_is_a_release_upstreams_tools_read_and_olm_reads_back() {
        let secrets = secrets(&record(2), &applied(), "etcd", "uid-1", "olm", "etcd", "2026-12-07T18:00:00Z").unwrap();
        assert_eq!(secrets.len(), 1, "a small release is one index Secret");
        let index = &secrets[0];
        assert_eq!(index.metadata.name.as_deref(), Some("sh.helm.release.v1.etcd.v2"));
        assert_eq!(index.type_.as_deref(), Some(INDEX_TYPE));
        let labels = index.metadata.labels.as_ref().unwrap();
        for (k, v) in [("name", "etcd"), ("status", "deployed"), ("owner", OWNER), ("type", "index"), ("version", "2")] {
            assert_eq!(labels.get(k).map(String::as_str), Some(v), "label {k}");
        }
        assert_eq!(index.metadata.owner_references.as_ref().unwrap()[0].kind, "ClusterExtension");
        assert_eq!(manifest_of(index), applied());
        let deployed = read(index, &[]).unwrap();
        assert_eq!(deployed.record, record(2));
        assert_eq!(olm_catalog::load::parse_manifest_text(&deployed.manifest).unwrap(), applied(), "the manifest, to apply again without a catalog");
    }

    #[test]
    fn a_release_upstream_wrote_is_read_as_a_record() {
        let manifest = "---\n# Source: x\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: etcd-operator\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: etcd-x\n";
        let release = json!({"name": "etcd", "version": 2, "namespace": "etcd", "manifest": manifest, "info": {"status": "deployed"},
            "labels": {BUNDLE_NAME: "etcdoperator.v0.9.4", BUNDLE_VERSION: "0.9.4", BUNDLE_REFERENCE: "r/etcd@sha256:ab", PACKAGE_NAME: "etcd"}});
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(release.to_string().as_bytes()).unwrap();
        let index = Secret {
            data: Some(BTreeMap::from([("chunk".to_owned(), ByteString(encoder.finish().unwrap())), ("extraChunks".to_owned(), ByteString(b"[]".to_vec()))])),
            ..Default::default()
        };
        assert_eq!(read(&index, &[]).unwrap().record, record(2));
    }

    #[test]
    fn a_large_release_is_chunked_and_read_across_its_chunks() {
        // Content that compresses to over two chunks (26 letters: under 5 bits each).
        let mut state = 1u64;
        let noise: String = (0..(CHUNK_SIZE * 5))
            .map(|_| {
                state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                char::from(b'a' + (state >> 59) as u8)
            })
            .collect();
        let mut objects = applied();
        objects.push(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big", "namespace": "etcd"}, "data": {"noise": noise}}));
        let secrets = secrets(&record(1), &objects, "etcd", "uid-1", "olm", "etcd", "2026-12-07T18:00:00Z").unwrap();
        assert!(secrets.len() >= 3, "{} Secrets", secrets.len());
        let names = extra_chunks(&secrets[0]).unwrap();
        assert_eq!(names.iter().map(String::as_str).collect::<Vec<_>>(), secrets[1..].iter().map(|s| s.metadata.name.as_deref().unwrap()).collect::<Vec<_>>());
        assert!(secrets[1..].iter().all(|s| s.type_.as_deref() == Some(CHUNK_TYPE) && s.immutable == Some(true)));
        assert_eq!(read(&secrets[0], &secrets[1..]).unwrap().record, record(1));
        let partial = read(&secrets[0], &secrets[1..2]);
        assert!(partial.is_err(), "a missing chunk is an error, not a record: {} Secrets, {partial:?}", secrets.len());
    }

    #[test]
    fn chunk_names_and_long_keys_are_upstreams() {
        // FNV-1a 64 of "" is cbf29ce484222325; in upstream's base32 alphabet: 13 characters.
        assert_eq!(chunk_hash(b"").len(), 13);
        assert_ne!(chunk_hash(b"a"), chunk_hash(b"b"));
        let long = key(&"x".repeat(60), 1);
        assert_eq!(label_safe(&long).len(), 63);
        assert_eq!(label_safe("sh.helm.release.v1.etcd.v1"), "sh.helm.release.v1.etcd.v1");
    }
}
