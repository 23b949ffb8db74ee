//! Canonical document texts (`Blob`) and property value texts (`JsonText`).

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

/// The canonical text of a catalog document, held LZ4-compressed when that pays.
///
/// A catalog's memory is mostly these texts (CSV metadata: CRD descriptions, examples,
/// long descriptions), and each is read only when served; compressed they take about a
/// third of the bytes, and decompressing one costs microseconds. Short texts, and texts
/// that do not compress, are kept as they are.
#[derive(Clone)]
pub struct Blob(BlobRepr);

#[derive(Clone)]
enum BlobRepr {
    Plain(Arc<str>),
    Lz4 { len: u32, bytes: Arc<[u8]> },
    /// Compressed with the text of `dict` as LZ4's dictionary: the versions of one
    /// operator repeat most of each other's text (descriptions, CRD descriptions,
    /// examples), which compressing each alone cannot use. `dict` is never itself
    /// compressed this way, so reading a blob decompresses at most two.
    Lz4Dict { len: u32, bytes: Arc<[u8]>, dict: Arc<Blob> },
}

impl Blob {
    /// Texts shorter than this are not worth a decompression on every read.
    const COMPRESS_FROM: usize = 1024;

    /// Hold `text`, compressed when that saves at least an eighth of it.
    pub fn new(text: &str) -> Blob {
        if text.len() >= Self::COMPRESS_FROM
            && let Ok(len) = u32::try_from(text.len())
        {
            let compressed = lz4_flex::block::compress(text.as_bytes());
            if compressed.len() <= text.len() - text.len() / 8 {
                return Blob(BlobRepr::Lz4 { len, bytes: Arc::from(compressed) });
            }
        }
        Blob(BlobRepr::Plain(Arc::from(text)))
    }

    /// Hold `text` compressed against `reference` (whose plain text is `reference_text`),
    /// when that saves at least an eighth of it; `reference` must come from [`Blob::new`].
    pub(super) fn against(text: &str, reference: &Arc<Blob>, reference_text: &str) -> Blob {
        if matches!(reference.0, BlobRepr::Lz4Dict { .. }) {
            return Blob::new(text);
        }
        if text.len() >= Self::COMPRESS_FROM
            && let Ok(len) = u32::try_from(text.len())
        {
            let compressed = lz4_flex::block::compress_with_dict(text.as_bytes(), reference_text.as_bytes());
            if compressed.len() <= text.len() - text.len() / 8 {
                return Blob(BlobRepr::Lz4Dict { len, bytes: Arc::from(compressed), dict: reference.clone() });
            }
        }
        Blob::new(text)
    }

    /// Length of the text (not of its compressed form).
    pub fn len(&self) -> usize {
        match &self.0 {
            BlobRepr::Plain(text) => text.len(),
            BlobRepr::Lz4 { len, .. } | BlobRepr::Lz4Dict { len, .. } => *len as usize,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held in memory for the text.
    pub fn stored_len(&self) -> usize {
        match &self.0 {
            BlobRepr::Plain(text) => text.len(),
            BlobRepr::Lz4 { bytes, .. } | BlobRepr::Lz4Dict { bytes, .. } => bytes.len(),
        }
    }

    /// The text, decompressed when held compressed.
    pub fn text(&self) -> Cow<'_, str> {
        match &self.0 {
            BlobRepr::Plain(text) => Cow::Borrowed(text),
            BlobRepr::Lz4 { len, bytes } => {
                // Only `Blob::new` makes these, from valid UTF-8, so neither step fails;
                // were memory ever corrupted, an empty text fails JSON parsing loudly
                // downstream instead of aborting the server.
                let decoded = lz4_flex::block::decompress(bytes, *len as usize).unwrap_or_default();
                Cow::Owned(String::from_utf8(decoded).unwrap_or_default())
            }
            BlobRepr::Lz4Dict { len, bytes, dict } => {
                let dict = dict.text();
                let decoded = lz4_flex::block::decompress_with_dict(bytes, *len as usize, dict.as_bytes()).unwrap_or_default();
                Cow::Owned(String::from_utf8(decoded).unwrap_or_default())
            }
        }
    }

    /// `start..end` of the text.
    fn slice(&self, start: usize, end: usize) -> Cow<'_, str> {
        match self.text() {
            Cow::Borrowed(text) => Cow::Borrowed(text.get(start..end).unwrap_or_default()),
            Cow::Owned(text) => Cow::Owned(text.get(start..end).unwrap_or_default().to_string()),
        }
    }

    pub(super) fn is_compressed(&self) -> bool {
        !matches!(self.0, BlobRepr::Plain(_))
    }

    /// Whether the text is held compressed against another blob's.
    #[cfg(test)]
    pub(super) fn has_dictionary(&self) -> bool {
        matches!(self.0, BlobRepr::Lz4Dict { .. })
    }

    /// The compressed bytes, which identify a compressed blob (clones share them).
    fn compressed_bytes(&self) -> Option<&Arc<[u8]>> {
        match &self.0 {
            BlobRepr::Plain(_) => None,
            BlobRepr::Lz4 { bytes, .. } | BlobRepr::Lz4Dict { bytes, .. } => Some(bytes),
        }
    }
}

impl PartialEq for Blob {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.text() == other.text()
    }
}
impl Eq for Blob {}

impl fmt::Debug for Blob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Blob")
            .field("len", &self.len())
            .field("stored", &self.stored_len())
            .finish()
    }
}

impl fmt::Display for Blob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text())
    }
}

/// The reference text of each package while its documents are read in order: the first
/// bundle of a package is held as it is, and its later bundles are compressed against it
/// (see `BlobRepr::Lz4Dict`). One per file (or per package) being read: the plain
/// reference texts are kept only while reading.
#[derive(Default)]
pub(crate) struct Dictionaries(std::collections::HashMap<String, (Arc<Blob>, String)>);

impl Dictionaries {
    /// The blob of a bundle document of `package` whose canonical text is `text`.
    pub(crate) fn bundle_blob(&mut self, package: &str, text: &str) -> Blob {
        match self.0.get(package) {
            Some((reference, reference_text)) => Blob::against(text, reference, reference_text),
            None => {
                let blob = Blob::new(text);
                if text.len() >= Blob::COMPRESS_FROM {
                    self.0.insert(package.to_owned(), (Arc::new(blob.clone()), text.to_owned()));
                }
                blob
            }
        }
    }
}

/// Compact JSON text of a property value. Large values share their bundle's blob
/// instead of holding a copy; read the text with [`JsonText::text`].
#[derive(Clone)]
pub struct JsonText(pub(super) JsonTextRepr);

#[derive(Clone)]
pub(super) enum JsonTextRepr {
    Owned(Box<str>),
    Shared {
        blob: Blob,
        start: u32,
        end: u32,
    },
}

impl JsonText {
    pub(super) fn owned(text: String) -> JsonText {
        JsonText(JsonTextRepr::Owned(text.into_boxed_str()))
    }

    /// The text at `start..end` of `blob`, whose text is `plain`: shared when long,
    /// copied when short. A compressed blob is shared only for values that make most of
    /// it (a CSV's metadata), so reading a small value never decompresses a whole document.
    pub(super) fn from_blob(blob: &Blob, plain: &str, start: usize, end: usize) -> Option<JsonText> {
        let text = plain.get(start..end)?;
        let share_from = if blob.is_compressed() { Blob::COMPRESS_FROM } else { 64 };
        if text.len() >= share_from && end <= u32::MAX as usize {
            Some(JsonText(JsonTextRepr::Shared {
                blob: blob.clone(),
                start: start as u32,
                end: end as u32,
            }))
        } else {
            Some(JsonText::owned(text.to_string()))
        }
    }

    /// The JSON text.
    pub fn text(&self) -> Cow<'_, str> {
        match &self.0 {
            JsonTextRepr::Owned(s) => Cow::Borrowed(s),
            JsonTextRepr::Shared { blob, start, end } => blob.slice(*start as usize, *end as usize),
        }
    }

    /// The texts of `values`, decompressing each blob they share once (a bundle's values
    /// share its blob: reading each alone would decompress the whole document each time).
    pub fn texts_of<'a>(values: impl IntoIterator<Item = &'a JsonText>) -> Vec<Cow<'a, str>> {
        let mut decompressed: Option<(&Arc<[u8]>, String)> = None;
        let mut texts = Vec::new();
        for value in values {
            let JsonTextRepr::Shared { blob, start, end } = &value.0 else {
                texts.push(value.text());
                continue;
            };
            let Some(bytes) = blob.compressed_bytes() else {
                texts.push(value.text());
                continue;
            };
            if decompressed.as_ref().is_none_or(|(held, _)| !Arc::ptr_eq(held, bytes)) {
                decompressed = Some((bytes, blob.text().into_owned()));
            }
            let text = decompressed.as_ref().map_or("", |(_, text)| text.get(*start as usize..*end as usize).unwrap_or_default());
            texts.push(Cow::Owned(text.to_owned()));
        }
        texts
    }

    /// Length of the JSON text.
    pub fn len(&self) -> usize {
        match &self.0 {
            JsonTextRepr::Owned(s) => s.len(),
            JsonTextRepr::Shared { start, end, .. } => (*end - *start) as usize,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl PartialEq for JsonText {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.text() == other.text()
    }
}
impl Eq for JsonText {}

impl fmt::Debug for JsonText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.text(), f)
    }
}

impl fmt::Display for JsonText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text())
    }
}
