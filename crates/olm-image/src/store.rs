//! The on-disk cache of pulled images, content-addressed: blobs under `blobs/sha256/<hex>`
//! (written to a temporary file and renamed, so a reader never sees half a blob), and for each
//! image digest a record of its manifest and config under `images/<hex>.json`. A digest-pinned
//! reference found here never touches the network. The blobs are bounded in total size: the
//! least recently used go first.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::ImageError;

/// What is kept of a pulled image besides its layers.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ImageRecord {
    /// The manifest's digest.
    pub digest: String,
    /// The layers, in order: (digest, media type, size).
    pub layers: Vec<(String, String, u64)>,
    /// The config's labels.
    pub labels: std::collections::BTreeMap<String, String>,
}

/// The cache directory.
#[derive(Debug)]
pub struct BlobStore {
    root: PathBuf,
    max_bytes: u64,
    // Eviction walks the directory; one at a time is enough.
    evicting: Mutex<()>,
}

impl BlobStore {
    /// A store at `root` (created) holding at most `max_bytes` of blobs.
    pub fn open(root: &Path, max_bytes: u64) -> Result<BlobStore, ImageError> {
        for dir in [root.join("blobs/sha256"), root.join("images"), root.join("tmp")] {
            std::fs::create_dir_all(&dir).map_err(|err| ImageError::local(dir.display(), err))?;
        }
        Ok(BlobStore {
            root: root.to_owned(),
            max_bytes,
            evicting: Mutex::new(()),
        })
    }

    /// The cache's directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where the blob `digest` lives (whether or not it is there).
    pub fn blob_path(&self, digest: &str) -> Result<PathBuf, String> {
        Ok(self.root.join("blobs/sha256").join(hex_of(digest)?))
    }

    /// Whether the blob is cached; marks it used.
    pub fn has_blob(&self, digest: &str) -> bool {
        let Ok(path) = self.blob_path(digest) else {
            return false;
        };
        touch(&path)
    }

    /// A fresh temporary file in the cache's directory (same file system as the blobs).
    pub fn temp_file(&self) -> Result<tempfile::NamedTempFile, ImageError> {
        let dir = self.root.join("tmp");
        tempfile::NamedTempFile::new_in(&dir).map_err(|err| ImageError::local(dir.display(), err))
    }

    /// Move a verified temporary file into place as blob `digest`.
    pub fn commit_blob(&self, digest: &str, file: tempfile::NamedTempFile) -> Result<PathBuf, ImageError> {
        let path = self.blob_path(digest).map_err(|err| ImageError::local(self.root.display(), err))?;
        file.persist(&path)
            .map_err(|err| ImageError::local(path.display(), err.error))?;
        Ok(path)
    }

    /// The record of image `digest`, when cached.
    pub fn record(&self, digest: &str) -> Option<ImageRecord> {
        let path = self.root.join("images").join(format!("{}.json", hex_of(digest).ok()?));
        let record: ImageRecord = serde_json::from_slice(&std::fs::read(&path).ok()?).ok()?;
        // A record is only good while all its layers are still there.
        record.layers.iter().all(|(d, _, _)| self.has_blob(d)).then_some(record)
    }

    /// Remember image `digest` (also under `alias`, the digest of the index it was chosen from).
    pub fn put_record(&self, record: &ImageRecord, alias: Option<&str>) -> Result<(), ImageError> {
        let text = serde_json::to_vec(record).map_err(|err| ImageError::local(self.root.display(), err))?;
        for digest in std::iter::once(record.digest.as_str()).chain(alias) {
            let hex = hex_of(digest).map_err(|err| ImageError::local(self.root.display(), err))?;
            let mut file = self.temp_file()?;
            std::io::Write::write_all(&mut file, &text).map_err(|err| ImageError::local(file.path().display(), err))?;
            let path = self.root.join("images").join(format!("{hex}.json"));
            file.persist(&path).map_err(|err| ImageError::local(path.display(), err.error))?;
        }
        Ok(())
    }

    /// Delete the least recently used blobs until the total is within the bound, never one of
    /// `keep` (the image being pulled now).
    pub fn evict(&self, keep: &[String]) {
        let _guard = self.evicting.lock().unwrap_or_else(|p| p.into_inner());
        let dir = self.root.join("blobs/sha256");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return;
        };
        let mut blobs: Vec<(SystemTime, u64, PathBuf)> = entries
            .filter_map(Result::ok)
            .filter_map(|e| {
                let meta = e.metadata().ok()?;
                Some((meta.modified().ok()?, meta.len(), e.path()))
            })
            .collect();
        let mut total: u64 = blobs.iter().map(|b| b.1).sum();
        if total <= self.max_bytes {
            return;
        }
        blobs.sort_by_key(|b| b.0);
        let kept: Vec<&str> = keep.iter().filter_map(|d| hex_of(d).ok()).collect();
        for (_, size, path) in blobs {
            if total <= self.max_bytes {
                break;
            }
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if kept.contains(&name) {
                continue;
            }
            if std::fs::remove_file(&path).is_ok() {
                tracing::debug!(blob = %name, size, "evicted from the image cache");
                total -= size;
            }
        }
    }
}

/// Mark a file as just used (its mtime is the LRU clock); false when it is not there.
fn touch(path: &Path) -> bool {
    match std::fs::File::options().append(true).open(path) {
        Ok(file) => {
            let _ = file.set_modified(SystemTime::now());
            true
        }
        Err(_) => false,
    }
}

/// The hex part of a `sha256:<64 hex>` digest; anything else is refused (it names a path).
pub fn hex_of(digest: &str) -> Result<&str, String> {
    match digest.strip_prefix("sha256:") {
        Some(hex) if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()) => Ok(hex),
        _ => Err(format!("{digest:?} is not a sha256 digest")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    fn digest(n: u8) -> String {
        format!("sha256:{}", hex::encode([n; 32]))
    }

    #[test]
    fn least_recently_used_blobs_go_first_and_kept_ones_stay() {
        let dir = tempfile::tempdir().unwrap();
        let store = BlobStore::open(dir.path(), 250).unwrap();
        for n in 1..=3u8 {
            let mut file = store.temp_file().unwrap();
            file.write_all(&[n; 100]).unwrap();
            let path = store.commit_blob(&digest(n), file).unwrap();
            let when = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(u64::from(n) * 1000);
            std::fs::File::options().append(true).open(&path).unwrap().set_modified(when).unwrap();
        }
        // Blob 1 is the oldest but in use; blob 2 goes.
        store.evict(&[digest(1)]);
        assert!(store.blob_path(&digest(1)).unwrap().exists());
        assert!(!store.blob_path(&digest(2)).unwrap().exists());
        assert!(store.has_blob(&digest(3)));
    }

    #[test]
    fn records_need_their_layers_and_digests_must_be_sha256() {
        let dir = tempfile::tempdir().unwrap();
        let store = BlobStore::open(dir.path(), 1 << 20).unwrap();
        let record = ImageRecord { digest: digest(9), layers: vec![(digest(1), "t".into(), 1)], labels: Default::default() };
        store.put_record(&record, Some(&digest(8))).unwrap();
        assert!(store.record(&digest(9)).is_none(), "its layer is missing");
        let mut file = store.temp_file().unwrap();
        file.write_all(b"x").unwrap();
        store.commit_blob(&digest(1), file).unwrap();
        assert_eq!(store.record(&digest(8)).unwrap().digest, digest(9));
        assert!(hex_of("sha256:../../etc/passwd").is_err());
        assert!(hex_of(&digest(1).to_uppercase()).is_err());
    }
}
