//! Extracting the wanted directories of an image's layers (`manifests/` and `metadata/` of a
//! bundle, the `configs` directory of a catalog) into a scratch directory, in layer order with
//! whiteouts applied, and nothing else: an entry that climbs out with `..` is refused, links and
//! devices are never created, and the files and bytes read are bounded, so a hostile image can
//! neither write outside its directory nor fill the disk or the memory.

use std::io::{self, Read};
use std::path::{Path, PathBuf};

use crate::ImageError;

/// Bounds of one unpack.
#[derive(Clone, Copy, Debug)]
pub struct UnpackLimits {
    /// Tar entries read over all layers.
    pub max_entries: usize,
    /// Bytes read after decompression over all layers.
    pub max_bytes: u64,
}

/// One layer blob on disk.
#[derive(Clone, Debug)]
pub struct LayerFile {
    /// The blob.
    pub path: PathBuf,
    /// Its digest (named in errors).
    pub digest: String,
}

/// What an unpack wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UnpackStats {
    /// Regular files written.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
}

/// Extract the entries of `layers` under one of `wanted` (relative directories such as
/// `manifests` or `catalog/configs`) into `dest`.
pub fn unpack(image: &str, layers: &[LayerFile], wanted: &[&str], dest: &Path, limits: UnpackLimits) -> Result<UnpackStats, ImageError> {
    let wanted: Vec<Vec<String>> = wanted
        .iter()
        .map(|w| w.split('/').filter(|c| !c.is_empty() && *c != ".").map(str::to_owned).collect())
        .collect();
    let mut budget = Budget { entries: 0, bytes: 0, limits };
    let mut stats = UnpackStats::default();
    for layer in layers {
        let bad = |message: String| ImageError::BadContent {
            image: image.to_owned(),
            message: format!("layer {}: {message}", layer.digest),
        };
        let file = std::fs::File::open(&layer.path).map_err(|err| ImageError::local(layer.path.display(), err))?;
        let reader = decompressed(io::BufReader::new(file)).map_err(|err| bad(err.to_string()))?;
        let counted = Counted { inner: reader, read: 0, limit: limits.max_bytes.saturating_sub(budget.bytes) };
        let mut archive = tar::Archive::new(counted);
        let entries = archive.entries().map_err(|err| bad(format!("not a tar archive: {err}")))?;
        for entry in entries {
            let mut entry = entry.map_err(|err| too_large_or(image, &budget, err, &bad))?;
            budget.entries += 1;
            if budget.entries > limits.max_entries {
                return Err(ImageError::TooLarge {
                    image: image.to_owned(),
                    what: "the number of files in its layers".into(),
                    size: budget.entries as u64,
                    limit: limits.max_entries as u64,
                });
            }
            let raw = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
            let parts = components(&raw).map_err(|message| bad(format!("tar entry {raw:?} {message}")))?;
            let Some(name) = parts.last() else { continue };
            // Whiteouts delete what earlier layers wrote.
            if let Some(hidden) = name.strip_prefix(".wh.") {
                let parent = &parts[..parts.len() - 1];
                if !selected(&wanted, parent, true) {
                    continue;
                }
                let dir = dest.join(parent.join("/"));
                if hidden == ".wh..opq" {
                    if let Ok(children) = std::fs::read_dir(&dir) {
                        for child in children.filter_map(Result::ok) {
                            remove(&child.path());
                        }
                    }
                } else {
                    remove(&dir.join(hidden));
                }
                continue;
            }
            if !selected(&wanted, &parts, false) {
                continue;
            }
            let target = dest.join(parts.join("/"));
            match entry.header().entry_type() {
                tar::EntryType::Directory => {
                    std::fs::create_dir_all(&target).map_err(|err| ImageError::local(target.display(), err))?;
                }
                tar::EntryType::Regular | tar::EntryType::Continuous => {
                    if let Some(parent) = target.parent() {
                        std::fs::create_dir_all(parent).map_err(|err| ImageError::local(parent.display(), err))?;
                    }
                    if target.is_dir() {
                        remove(&target);
                    }
                    let mut out = std::fs::File::create(&target).map_err(|err| ImageError::local(target.display(), err))?;
                    let written = io::copy(&mut entry, &mut out).map_err(|err| too_large_or(image, &budget, err, &bad))?;
                    stats.files += 1;
                    stats.bytes += written;
                }
                // Links and devices are never needed by bundles or catalogs, and a link is
                // the classic way out of the scratch directory: skipped.
                other => tracing::debug!(image, entry = %raw, kind = ?other, "skipped a tar entry that is not a file or directory"),
            }
        }
        budget.bytes += archive.into_inner().read;
    }
    Ok(stats)
}

struct Budget {
    entries: usize,
    bytes: u64,
    limits: UnpackLimits,
}

/// An I/O error from reading a layer: over the byte budget, or broken content.
fn too_large_or(image: &str, budget: &Budget, err: io::Error, bad: &dyn Fn(String) -> ImageError) -> ImageError {
    if err.kind() == io::ErrorKind::FileTooLarge {
        ImageError::TooLarge {
            image: image.to_owned(),
            what: "its layers, uncompressed,".into(),
            size: budget.limits.max_bytes.saturating_add(1),
            limit: budget.limits.max_bytes,
        }
    } else {
        bad(format!("cannot read: {err}"))
    }
}

/// The path's components without `.` and empty ones; `..` is refused. A leading `/` is the
/// image's root, as container runtimes read it.
fn components(raw: &str) -> Result<Vec<&str>, String> {
    let mut out = Vec::new();
    for part in raw.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err("climbs out of the image's directory with `..`".into()),
            part if part.contains('\\') || part.contains('\0') => return Err("has a backslash or NUL in its name".into()),
            part => out.push(part),
        }
    }
    Ok(out)
}

/// Whether `parts` is inside one of `wanted` (or, for a parent directory of a whiteout, is or
/// contains one).
fn selected(wanted: &[Vec<String>], parts: &[&str], parent: bool) -> bool {
    wanted.iter().any(|w| {
        let inside = parts.len() >= w.len() && w.iter().zip(parts).all(|(a, b)| a == b);
        inside || (parent && w.len() > parts.len() && w.iter().zip(parts).all(|(a, b)| a == b))
    })
}

fn remove(path: &Path) {
    let result = if path.is_dir() { std::fs::remove_dir_all(path) } else { std::fs::remove_file(path) };
    if let Err(err) = result
        && err.kind() != io::ErrorKind::NotFound
    {
        tracing::debug!(path = %path.display(), %err, "cannot apply a whiteout");
    }
}

/// The layer's tar stream: gzip, zstd or plain tar, told by the first bytes.
fn decompressed(mut reader: io::BufReader<std::fs::File>) -> io::Result<Box<dyn Read>> {
    use io::BufRead as _;
    let head = reader.fill_buf()?;
    if head.starts_with(&[0x1f, 0x8b]) {
        Ok(Box::new(flate2::read::MultiGzDecoder::new(reader)))
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        let decoder = ruzstd::decoding::StreamingDecoder::new(reader)
            .map_err(|err| io::Error::new(io::ErrorKind::InvalidData, format!("bad zstd stream: {err}")))?;
        Ok(Box::new(decoder))
    } else {
        Ok(Box::new(reader))
    }
}

/// Counts what is read and fails once over `limit`.
struct Counted<R> {
    inner: R,
    read: u64,
    limit: u64,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        if self.read > self.limit {
            return Err(io::Error::new(io::ErrorKind::FileTooLarge, "over the unpack limit"));
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: UnpackLimits = UnpackLimits { max_entries: 100, max_bytes: 1 << 20 };

    /// A gzip layer with `files` as (path, content); a `None` content makes a symlink to /etc.
    fn layer(dir: &Path, name: &str, files: &[(&str, Option<&[u8]>)]) -> LayerFile {
        let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast()));
        for (path, content) in files {
            let mut header = tar::Header::new_gnu();
            match content {
                Some(data) => {
                    header.set_size(data.len() as u64);
                    header.set_entry_type(tar::EntryType::Regular);
                    header.set_mode(0o644);
                    // set_path refuses `..`; write the name bytes as a hostile tool would.
                    header.as_gnu_mut().unwrap().name[..path.len()].copy_from_slice(path.as_bytes());
                    header.set_cksum();
                    builder.append(&header, *data).unwrap();
                }
                None => {
                    header.set_entry_type(tar::EntryType::Symlink);
                    header.set_size(0);
                    builder.append_link(&mut header, path, "/etc").unwrap();
                }
            }
        }
        let bytes = builder.into_inner().unwrap().finish().unwrap();
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        LayerFile { path, digest: format!("sha256:{name}") }
    }

    #[test]
    fn wanted_directories_are_extracted_in_layer_order_with_whiteouts() {
        let dir = tempfile::tempdir().unwrap();
        let l1 = layer(dir.path(), "l1", &[("manifests/a.yaml", Some(b"a")), ("manifests/b.yaml", Some(b"b")), ("bin/sh", Some(b"elf"))]);
        let l2 = layer(dir.path(), "l2", &[("manifests/.wh.b.yaml", Some(b"")), ("./metadata/annotations.yaml", Some(b"m"))]);
        let dest = dir.path().join("out");
        let stats = unpack("img", &[l1, l2], &["manifests", "metadata"], &dest, LIMITS).unwrap();
        assert_eq!(stats.files, 3);
        assert_eq!(std::fs::read(dest.join("manifests/a.yaml")).unwrap(), b"a");
        assert!(!dest.join("manifests/b.yaml").exists(), "whited out by the second layer");
        assert!(dest.join("metadata/annotations.yaml").exists());
        assert!(!dest.join("bin").exists(), "not wanted");
    }

    #[test]
    fn an_entry_climbing_out_is_refused_and_links_are_not_created() {
        let dir = tempfile::tempdir().unwrap();
        let evil = layer(dir.path(), "evil", &[("manifests/../../escaped", Some(b"x"))]);
        let dest = dir.path().join("out");
        let err = unpack("reg/evil:1", &[evil], &["manifests"], &dest, LIMITS).unwrap_err();
        assert_eq!(err.category(), "ImageContentInvalid");
        let text = err.to_string();
        assert!(text.contains("reg/evil:1") && text.contains("manifests/../../escaped") && text.contains("sha256:evil"), "{text}");
        assert!(!dir.path().join("escaped").exists());
        let link = layer(dir.path(), "link", &[("manifests/etc", None)]);
        unpack("img", &[link], &["manifests"], &dest, LIMITS).unwrap();
        assert!(std::fs::symlink_metadata(dest.join("manifests/etc")).is_err());
    }

    #[test]
    fn bytes_and_entries_are_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let big = vec![0u8; 4096];
        let l = layer(dir.path(), "big", &[("manifests/big", Some(&big))]);
        let small = UnpackLimits { max_entries: 100, max_bytes: 2048 };
        let err = unpack("img", std::slice::from_ref(&l), &["manifests"], &dir.path().join("o1"), small).unwrap_err();
        assert_eq!(err.category(), "ImageTooLarge", "{err}");
        let few = UnpackLimits { max_entries: 1, max_bytes: 1 << 20 };
        let l = layer(dir.path(), "many", &[("manifests/a", Some(b"a")), ("manifests/b", Some(b"b"))]);
        let err = unpack("img", &[l], &["manifests"], &dir.path().join("o2"), few).unwrap_err();
        assert!(err.to_string().contains("number of files"), "{err}");
    }
}
