//! A file-based catalog already parsed: its documents as compact JSON, one per line, each with
//! the file it came from. Parsing YAML is most of a catalog's load (the real 13 MiB community
//! catalog: ~210 ms as YAML, ~30 ms in this form), so `olm catalog push` ships this form
//! beside `/configs`, as opm ships a pre-built cache, and a loader reads it instead. It holds
//! exactly what [`crate::load::load_fbc_documents`] returns for a catalog without problems; a
//! catalog with problems is not written in this form, so they are always found the same way.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::CatalogError;
use crate::model::Document;

/// One line: a document and its file, relative to the catalog's root.
#[derive(Serialize)]
struct LineOut<'a> {
    source: Option<String>,
    document: &'a Value,
}

#[derive(Deserialize)]
struct LineIn {
    source: Option<String>,
    document: Value,
}

/// `documents` (loaded from `root`) in the parsed form.
pub fn write(documents: &[Document], root: &Path) -> Result<Vec<u8>, CatalogError> {
    let mut out = Vec::new();
    for doc in documents {
        let source = doc.source.as_deref().map(|p| p.strip_prefix(root).unwrap_or(p).to_string_lossy().into_owned());
        serde_json::to_writer(&mut out, &LineOut { source, document: &doc.value })
            .map_err(|err| CatalogError::Parse { path: root.to_path_buf(), message: format!("cannot write the parsed catalog: {err}") })?;
        out.push(b'\n');
    }
    Ok(out)
}

/// The documents of a parsed form (`bytes`, read from `path`), their files under `root`, in
/// the order written. Lines are parsed on every core, in chunks.
pub fn read(bytes: &[u8], path: &Path, root: &Path) -> Result<Vec<Document>, CatalogError> {
    const CHUNK: usize = 256 << 10;
    let mut chunks = Vec::new();
    let mut start = 0;
    while start < bytes.len() {
        let mut end = (start + CHUNK).min(bytes.len());
        // Cut after a newline, which JSON text never holds unescaped.
        while end < bytes.len() && bytes[end - 1] != b'\n' {
            end += 1;
        }
        chunks.push((start, &bytes[start..end]));
        start = end;
    }
    let parsed = crate::parallel::parallel_map(&chunks, |(offset, chunk)| {
        let refused = |message: String| CatalogError::Parse { path: path.to_path_buf(), message: format!("not a parsed catalog (in the lines after byte {offset}): {message}") };
        // Text checked once here, so the parser need not check each string again.
        let text = std::str::from_utf8(chunk).map_err(|err| refused(err.to_string()))?;
        let mut sources: HashMap<String, Arc<Path>> = HashMap::new();
        let mut documents = Vec::new();
        for line in serde_json::Deserializer::from_str(text).into_iter::<LineIn>() {
            let line = line.map_err(|err| refused(err.to_string()))?;
            let source = line.source.map(|s| sources.entry(s).or_insert_with_key(|s| Arc::from(root.join(s).as_path())).clone());
            documents.push(Document { value: line.document, source });
        }
        Ok::<_, CatalogError>(documents)
    });
    let mut documents = Vec::new();
    for chunk in parsed {
        documents.extend(chunk?);
    }
    Ok(documents)
}

/// Reads the parsed form at `path` of the catalog at `root`.
pub fn read_file(path: &Path, root: &Path) -> Result<Vec<Document>, CatalogError> {
    let bytes = std::fs::read(path).map_err(|source| CatalogError::Io { path: PathBuf::from(path), source })?;
    read(&bytes, path, root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_catalog_reads_back_as_the_same_documents_from_the_same_files() {
        // The bundled catalog: YAML.
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../catalogs/community").canonicalize().expect("catalogs/community");
        let (documents, problems) = crate::load::load_fbc_documents(&root).expect("the catalog loads");
        assert!(problems.is_empty(), "{problems:?}");
        let bytes = write(&documents, &root).expect("written");
        assert_eq!(bytes.iter().filter(|b| **b == b'\n').count(), documents.len(), "a line a document");
        let elsewhere = Path::new("/unpacked/configs");
        let back = read(&bytes, Path::new("catalog.jsonl"), elsewhere).expect("read back");
        assert_eq!(back.len(), documents.len());
        for (a, b) in documents.iter().zip(&back) {
            assert_eq!(a.value, b.value);
            let relative = a.source.as_deref().and_then(|p| p.strip_prefix(&root).ok()).expect("a file under the root");
            assert_eq!(b.source.as_deref(), Some(elsewhere.join(relative).as_path()), "the file, under the new root");
        }
    }

    #[test]
    fn a_damaged_line_is_refused_naming_the_file() {
        let err = read(b"{\"source\":null,\"document\":{}}\n{\"sour", Path::new("/x/catalog.jsonl"), Path::new("/x")).expect_err("refused");
        assert!(err.to_string().starts_with("/x/catalog.jsonl: not a parsed catalog"), "{err}");
    }
}
