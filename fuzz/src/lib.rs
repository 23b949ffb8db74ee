//! Helpers shared by the fuzz targets: a scratch directory for targets whose code under
//! test reads files, splitting one input into several files, and the check that an error
//! message is a sentence and not a Rust debug dump.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// A directory of this process's own, made once (on tmpfs when there is one: targets
/// write files on every execution).
pub fn scratch_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let base = if Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
        let dir = base.join(format!("olm-fuzz-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch directory can be made");
        dir
    })
}

/// Write `bytes` to `dir/name`, making `dir`.
pub fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    std::fs::create_dir_all(dir).expect("scratch directory can be made");
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("scratch file can be written");
    path
}

/// The separator between the files of one input (`\n%%\n`), for targets that read several.
pub const SEPARATOR: &[u8] = b"\n%%\n";

/// `data` cut at each [`SEPARATOR`] into at most `n` parts (the last keeps the rest);
/// missing parts are empty.
pub fn split_parts(data: &[u8], n: usize) -> Vec<&[u8]> {
    let mut parts = Vec::with_capacity(n);
    let mut rest = data;
    while parts.len() + 1 < n {
        match rest.windows(SEPARATOR.len()).position(|w| w == SEPARATOR) {
            Some(at) => {
                parts.push(&rest[..at]);
                rest = &rest[at + SEPARATOR.len()..];
            }
            None => break,
        }
    }
    parts.push(rest);
    while parts.len() < n {
        parts.push(&[]);
    }
    parts
}

/// Panics (a finding) when an error message is empty or starts like `{:?}` output of an
/// enum or struct (`Message("…")`, `Error { … }`): errors are shown to people as they are.
/// Only the start is checked: messages quote the input, which may hold anything.
pub fn check_message(message: &str) {
    assert!(!message.trim().is_empty(), "empty error message");
    let ident_len = message
        .char_indices()
        .find(|&(_, c)| !(c.is_ascii_alphanumeric() || c == '_'))
        .map_or(message.len(), |(i, _)| i);
    let (ident, after) = message.split_at(ident_len);
    let debug_like = ident.starts_with(|c: char| c.is_ascii_uppercase())
        && ["(\"", "([", "({", " { "].iter().any(|p| after.starts_with(p));
    assert!(!debug_like, "error message looks like a Rust debug dump: {message}");
}

/// [`check_message`] on every problem of a catalog error (its `Display` starts with the
/// path, so the messages themselves are checked).
pub fn check_catalog_error(error: &olm_catalog::CatalogError) {
    let _ = error.to_string();
    for p in error.problems() {
        check_message(&p.message);
    }
}

/// A small CSV, for targets that fuzz what surrounds one: `name` replaces `replaces`.
pub fn csv_yaml(name: &str, version: &str, replaces: Option<&str>) -> String {
    let replaces = replaces.map(|r| format!("  replaces: {r}\n")).unwrap_or_default();
    format!(
        "apiVersion: operators.coreos.com/v1alpha1
kind: ClusterServiceVersion
metadata:
  name: {name}
  annotations:
    olm.skipRange: '<{version}'
spec:
  version: {version}
{replaces}  displayName: etcd
  installModes:
  - {{type: OwnNamespace, supported: true}}
  - {{type: AllNamespaces, supported: false}}
  customresourcedefinitions:
    owned:
    - {{name: etcdclusters.etcd.database.coreos.com, version: v1beta2, kind: EtcdCluster}}
    required:
    - {{name: backups.example.com, version: v1, kind: Backup}}
  relatedImages:
  - {{name: etcd, image: quay.io/coreos/etcd-operator@sha256:c0301e4686c3ed4206e370b42de5a3bd2229b9fb4906cf85f3f30650424abec2}}
"
    )
}
