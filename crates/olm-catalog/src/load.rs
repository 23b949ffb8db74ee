//! Reading files: YAML/JSON document streams and File-Based Catalog directories.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use crate::error::{CatalogError, Problem};
use crate::model::{Catalog, Document};
use crate::parallel::parallel_map;
use crate::walk::{WalkLimits, Walker};
pub use crate::text::{MAX_NESTING_DEPTH, parse_manifest_text};

pub use crate::walk::{MAX_DIR_DEPTH, MAX_FILE_BYTES};

/// Read a file as UTF-8 text, refusing files over [`MAX_FILE_BYTES`].
pub fn read_text(path: &Path) -> Result<String, CatalogError> {
    let meta = fs::metadata(path).map_err(|source| CatalogError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    // Checked before opening: opening a FIFO blocks until a writer comes.
    crate::walk::check_regular(path, &meta)?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(CatalogError::TooLarge {
            path: path.to_path_buf(),
            message: format!(
                "file is {} bytes, more than the {MAX_FILE_BYTES} allowed",
                meta.len()
            ),
        });
    }
    let bytes = fs::read(path).map_err(|source| CatalogError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    String::from_utf8(bytes).map_err(|e| CatalogError::Parse {
        path: path.to_path_buf(),
        message: format!(
            "file is not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ),
    })
}

/// Parse one file into documents.
pub fn parse_file(path: &Path) -> Result<Vec<Value>, CatalogError> {
    // Warnings about repaired text name the file.
    let _file = tracing::warn_span!("read", file = %path.display()).entered();
    let text = read_text(path)?;
    parse_manifest_text(&text).map_err(|message| CatalogError::Parse {
        path: path.to_path_buf(),
        message,
    })
}

/// Read and parse one file, handing each document to `f` as soon as it is parsed, so
/// only one document's tree is alive at a time instead of the whole file's (catalog
/// files hold hundreds of bundles; their trees are several times the file's size).
/// A YAML stream is parsed one document at a time, split before each document-start
/// marker (`---` at the start of a line followed by white space), which YAML forbids
/// inside any scalar, so the documents are the same as from parsing the whole stream.
/// A JSON stream is read value by value. Whenever a piece fails to parse, the whole
/// file is parsed as one stream instead, so repairs and error messages are exactly
/// those of [`parse_file`].
pub(crate) fn parse_file_each<R>(path: &Path, mut f: impl FnMut(Value) -> R) -> Result<Vec<R>, CatalogError> {
    let text = read_text(path)?;
    let trimmed = text.trim_start_matches(|c: char| c.is_whitespace() || c == '\u{feff}');
    if trimmed.starts_with('{') {
        // A JSON stream is read one value at a time; on an error the whole-file parse
        // below produces the message.
        let mut out = Vec::new();
        let stream = serde_json::Deserializer::from_str(trimmed).into_iter::<Value>();
        let mut failed = false;
        for item in stream {
            match item {
                Ok(Value::Null) => {}
                Ok(value) => out.push(f(value)),
                Err(_) => {
                    failed = true;
                    break;
                }
            }
        }
        if !failed {
            return Ok(out);
        }
    } else {
        let pieces = yaml_document_pieces(&text);
        if pieces.len() > 1 {
            let mut out = Vec::new();
            let whole_stream_needed = pieces.into_iter().any(|piece| match parse_manifest_text(piece) {
                Ok(values) => {
                    out.extend(values.into_iter().map(&mut f));
                    false
                }
                Err(_) => true,
            });
            if !whole_stream_needed {
                return Ok(out);
            }
        }
    }
    let values = parse_manifest_text(&text).map_err(|message| CatalogError::Parse {
        path: path.to_path_buf(),
        message,
    })?;
    Ok(values.into_iter().map(f).collect())
}

/// `text` cut before every line that starts a YAML document (`---` then white space or
/// the end of the line or text). The first piece is what precedes the first marker.
fn yaml_document_pieces(text: &str) -> Vec<&str> {
    let mut starts = vec![0];
    for (newline, _) in text.match_indices("\n---") {
        let start = newline + 1;
        let after = text.as_bytes().get(start + 3);
        if matches!(after, None | Some(b' ' | b'\t' | b'\r' | b'\n')) {
            starts.push(start);
        }
    }
    starts.push(text.len());
    starts.windows(2).filter_map(|w| text.get(w[0]..w[1])).collect()
}

/// Every file below `root` that an FBC loader parses, by the rules of [`crate::walk`]:
/// lexical order, `.indexignore` rules applied, `.indexignore` files themselves skipped.
/// A `root` that is a file is that file.
pub fn fbc_files(root: &Path) -> Result<(Vec<PathBuf>, Vec<Problem>), CatalogError> {
    fbc_files_within(root, WalkLimits::default())
}

/// [`fbc_files`] with chosen limits.
pub fn fbc_files_within(root: &Path, limits: WalkLimits) -> Result<(Vec<PathBuf>, Vec<Problem>), CatalogError> {
    let meta = fs::metadata(root).map_err(|source| CatalogError::Io {
        path: root.to_path_buf(),
        source,
    })?;
    if !meta.is_dir() {
        crate::walk::check_regular(root, &meta)?;
        return Ok((vec![root.to_path_buf()], Vec::new()));
    }
    Ok(Walker::with_limits(root, limits)?.fbc_files())
}

/// Load the documents of a File-Based Catalog directory (or a single file),
/// collecting a problem for every file that cannot be read or parsed.
/// Files are parsed in parallel; the result is in lexical file order.
pub fn load_fbc_documents(root: &Path) -> Result<(Vec<Document>, Vec<Problem>), CatalogError> {
    let (files, mut problems) = fbc_files(root)?;
    let results = parallel_map(&files, |path| parse_file(path));
    let mut documents = Vec::new();
    for (path, result) in files.iter().zip(results) {
        match result {
            Ok(values) => {
                let source: Arc<Path> = Arc::from(path.as_path());
                documents.extend(values.into_iter().map(|value| Document {
                    value,
                    source: Some(source.clone()),
                }));
            }
            Err(e) => problems.extend(e.problems()),
        }
    }
    Ok((documents, problems))
}

/// Load and build a File-Based Catalog leniently: the catalog plus every problem.
/// Each file is parsed and turned into blobs and typed objects on a worker thread,
/// document by document, so only one document's JSON tree per thread is alive at a
/// time; the largest files go first, while little is kept yet. Both keep the peak of
/// the heap, and with it what glibc malloc leaves resident after the load, low.
pub fn load_fbc(root: &Path) -> Result<(Catalog, Vec<Problem>), CatalogError> {
    let (files, mut problems) = fbc_files(root)?;
    let results = parallel_map_largest_first(&files, |path| {
        let source: Arc<Path> = Arc::from(path);
        let mut dictionaries = crate::model::Dictionaries::default();
        parse_file_each(path, |value| {
            crate::model::prepare_document(
                Document {
                    value,
                    source: Some(source.clone()),
                },
                &mut dictionaries,
            )
        })
    });
    let mut prepared = Vec::new();
    for result in results {
        match result {
            Ok(mut items) => prepared.append(&mut items),
            Err(e) => problems.extend(e.problems()),
        }
    }
    let (catalog, mut more) = crate::model::assemble_prepared(prepared);
    problems.append(&mut more);
    Ok((catalog, problems))
}

/// [`parallel_map`] over files, starting the largest first: parse time grows with
/// size, and one big file picked up last would leave the other cores idle while it
/// is parsed. Results are in the order of `files`.
fn parallel_map_largest_first<R: Send>(files: &[PathBuf], f: impl Fn(&Path) -> R + Sync) -> Vec<R> {
    let mut order: Vec<(u64, usize)> = files
        .iter()
        .enumerate()
        .map(|(i, path)| (fs::metadata(path).map(|m| m.len()).unwrap_or(0), i))
        .collect();
    order.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let results = parallel_map(&order, |&(_, i)| (i, f(&files[i])));
    let mut slots: Vec<Option<R>> = (0..files.len()).map(|_| None).collect();
    for (i, r) in results {
        slots[i] = Some(r);
    }
    // `order` is a permutation of the indices, so every slot is filled.
    slots.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_pieces_start_at_document_markers_only() {
        let text = "# head\n---\nschema: a\nd: |\n  ---x\n---   \nschema: b\ns: '--- not a marker'\n---\n---\nschema: c\n--- {schema: d}\n----\n";
        let pieces = yaml_document_pieces(text);
        assert_eq!(
            pieces,
            vec![
                "# head\n",
                "---\nschema: a\nd: |\n  ---x\n",
                "---   \nschema: b\ns: '--- not a marker'\n",
                "---\n",
                "---\nschema: c\n",
                "--- {schema: d}\n----\n",
            ]
        );
        assert_eq!(pieces.concat(), text);
        assert_eq!(yaml_document_pieces("schema: x\n"), vec!["schema: x\n"]);
        assert_eq!(yaml_document_pieces("---\na: 1\n---"), vec!["---\na: 1\n", "---"]);
    }

    /// What `parse_file_each` hands out equals what `parse_file` returns, including for
    /// files that only parse as a whole (a repaired under-indented quoted line inside a
    /// document) and for errors.
    #[test]
    fn document_by_document_parse_equals_whole_file_parse() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [
            ("plain.yaml", "---\nschema: olm.package\nname: a\n---\nschema: olm.bundle\nname: a.v1\nv: 1.0\nt: true\n...\n---\n---\nschema: x\nlist:\n- ---\n- |\n  ---\n"),
            ("first-without-marker.yaml", "schema: olm.package\nname: a\n---\nschema: olm.channel\nname: c\n"),
            ("repair.yaml", "---\nschema: a\n---\nschema: b\ndescription: \"first line\nsecond line\"\n"),
            ("json.json", "{\"schema\": \"a\"}\nnull {\"schema\": \"b\"}\n"),
            ("bad.json", "{\"schema\": \"a\"}\n{\"schema\": \n"),
            ("bad.yaml", "---\nschema: a\n---\nschema: [b\n"),
        ];
        for (name, text) in cases {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            let whole = parse_file(&path).map_err(|e| e.to_string());
            let each = parse_file_each(&path, |v| v).map_err(|e| e.to_string());
            assert_eq!(each, whole, "{name}");
        }
        assert!(parse_file(&dir.path().join("bad.yaml")).is_err());
        assert_eq!(parse_file(&dir.path().join("plain.yaml")).unwrap().len(), 3);
    }
}
