//! Reading (and writing) manifests as YAML, with errors that say where the problem is.
//!
//! Every error names its origin (a file path or a label the caller chose) and, as far as
//! can be known, the line and column and the field path (`spec.installModes[0].type`).
//! Nothing here panics on input.
//!
//! Limits: serde-saphyr's default budget (64 levels of nesting, 250 000 nodes, 1 000 000
//! events per document) applies to each document; multi-document input is read with
//! `max_documents` raised to [`MAX_DOCUMENTS`] (the library default is 1 024).

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::{Deserialize as _, DeserializeOwned};
use serde_json::Value;

/// The most documents a multi-document stream may hold.
pub const MAX_DOCUMENTS: usize = 100_000;

/// A manifest could not be read or did not match its type.
#[derive(Debug, thiserror::Error)]
pub enum YamlError {
    /// The file could not be read. (The cause is part of the message, not a `source()`, so
    /// that `{:#}` chains do not print it twice.)
    #[error("{}: cannot read: {cause}", path.display())]
    Read { path: PathBuf, cause: std::io::Error },
    /// The text is not valid YAML, or a document does not match the expected type.
    #[error("{0}")]
    Invalid(Box<InvalidDocument>),
    /// A value could not be written as YAML.
    #[error("cannot write YAML: {0}")]
    Write(String),
}

impl YamlError {
    /// PascalCase category, for metrics and Event reasons.
    pub fn category(&self) -> &'static str {
        match self {
            YamlError::Read { .. } => "ManifestReadFailed",
            YamlError::Invalid(_) => "InvalidManifest",
            YamlError::Write(_) => "ManifestWriteFailed",
        }
    }

    /// Whether trying again could help (only a failed read might).
    pub fn is_retryable(&self) -> bool {
        matches!(self, YamlError::Read { cause, .. } if cause.kind() == std::io::ErrorKind::Interrupted)
    }

    /// Details of an invalid document.
    pub fn invalid(&self) -> Option<&InvalidDocument> {
        match self {
            YamlError::Invalid(details) => Some(details),
            _ => None,
        }
    }
}

/// Where and why a document is invalid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidDocument {
    /// The file path or caller-supplied label.
    pub origin: String,
    /// The 1-based document index, for multi-document input.
    pub document: Option<usize>,
    /// 1-based line and column, when known.
    pub line: Option<u64>,
    pub column: Option<u64>,
    /// The field path (`spec.installModes[0].type`), when the problem is in a field.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for InvalidDocument {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.origin)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        if let Some(document) = self.document {
            write!(f, " (document {document})")?;
        }
        f.write_str(": ")?;
        if let Some(field) = &self.field {
            write!(f, "field `{field}`: ")?;
        }
        f.write_str(&self.message)
    }
}

fn invalid(origin: &str, document: Option<usize>, field: &str, message: String, position: Option<(u64, u64)>) -> YamlError {
    let (field, message) = split_nested_path(field, message);
    let message = strip_location_suffix(&message).to_owned();
    YamlError::Invalid(Box::new(InvalidDocument {
        origin: origin.to_owned(),
        document,
        line: position.map(|p| p.0),
        column: position.map(|p| p.1),
        field,
        message,
    }))
}

/// Our own nested deserialisers (see `unknown`) report `inner.path: message`; join that with
/// the outer path so the user sees one field path.
fn split_nested_path(outer: &str, message: String) -> (Option<String>, String) {
    let outer = if outer.is_empty() || outer == "." || outer == "?" { None } else { Some(outer.to_owned()) };
    let Some((inner, rest)) = message.split_once(": ") else {
        return (outer, message);
    };
    let looks_like_path = !inner.is_empty()
        && inner.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '[' | ']' | '_' | '-' | '/' | '$'));
    if !looks_like_path {
        return (outer, message);
    }
    let joined = match outer {
        Some(outer) => format!("{outer}.{inner}"),
        None => inner.to_owned(),
    };
    // Nested wrappers may each add a segment.
    split_nested_path(&joined, rest.to_owned())
}

/// The message of a serde-saphyr error without its location decoration, and its position.
fn saphyr_parts(err: &serde_saphyr::Error) -> (String, Option<(u64, u64)>) {
    let position = err.location().map(|l| (l.line(), l.column())).filter(|(line, _)| *line > 0);
    let rendered = err.without_snippet().to_string();
    let mut message = rendered.lines().next().unwrap_or_default().trim();
    message = message.strip_prefix("error: ").unwrap_or(message);
    if let Some((line, column)) = position {
        let prefix = format!("line {line} column {column}: ");
        message = message.strip_prefix(prefix.as_str()).unwrap_or(message);
    }
    (message.to_owned(), position)
}

/// serde-saphyr faults a quote that is never closed at the first following line not indented
/// past its key, which names neither the quote nor the cause. When `message` is that fault at
/// `position`, and no quote closes the scalar, say where it opens instead. Linear: one parse of
/// the text before the fault (it ends inside the scalar, so the parser names the opening) and
/// one scan for the closing quote (the catalog loader's `text.rs` does the same).
fn name_unclosed_quote(text: &str, message: String, position: Option<(u64, u64)>) -> (String, Option<(u64, u64)>) {
    let Some((line, _)) = position.filter(|_| message.contains("multiline quoted scalar")) else {
        return (message, position);
    };
    let starts: Vec<usize> = std::iter::once(0).chain(text.match_indices('\n').map(|(i, _)| i + 1)).collect();
    let opening = starts.get(line as usize - 1).and_then(|&fault| {
        let options = serde_saphyr::options! { budget: serde_saphyr::budget! { max_documents: MAX_DOCUMENTS } };
        let err = serde_saphyr::from_multiple_with_options::<Value>(text[..fault].trim_end(), options).err()?;
        let loc = err.location().filter(|_| err.to_string().contains("unclosed quote"))?;
        let line_start = *starts.get((loc.line() as usize).checked_sub(1)?)?;
        let (offset, quote) = text[line_start..].char_indices().nth((loc.column() as usize).checked_sub(1)?)?;
        matches!(quote, '\'' | '"').then_some((loc.line(), loc.column(), line_start + offset, quote))
    });
    let Some((open_line, open_column, open, quote)) = opening else {
        return (message, position);
    };
    let bytes = text.as_bytes();
    let mut i = open + 1;
    let mut end = "the end of the text".to_owned();
    let mut current_line = open_line;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' if quote == '"' => i += 1,
            b'\'' if quote == '\'' && bytes.get(i + 1) == Some(&b'\'') => i += 1,
            b'\'' if quote == '\'' => return (message, position),
            b'"' if quote == '"' => return (message, position),
            b'\n' => {
                current_line += 1;
                let next = &bytes[i + 1..];
                let marker = next.starts_with(b"---") || next.starts_with(b"...");
                if marker && matches!(next.get(3), None | Some(b' ' | b'\t' | b'\r' | b'\n')) {
                    end = format!("the document ends at line {current_line}");
                    break;
                }
            }
            _ => {}
        }
        i += 1;
    }
    let kind = if quote == '\'' { "single-quoted" } else { "double-quoted" };
    (format!("the {kind} value opened here is never closed before {end}; add the closing {quote}"), Some((open_line, open_column)))
}

/// serde-saphyr appends ` at line N, column M` to messages; the position is reported
/// separately, so drop it from the text.
fn strip_location_suffix(message: &str) -> &str {
    match message.rfind(" at line ") {
        Some(index) if message[index + 9..].chars().all(|c| c.is_ascii_digit() || matches!(c, ',' | ' ') || c.is_ascii_alphabetic()) => &message[..index],
        _ => message,
    }
}

/// A YAML node tree with positions, built only to locate a field named in an error.
enum LocatedNode {
    Map(Vec<(String, serde_saphyr::Spanned<LocatedNode>)>),
    Seq(Vec<serde_saphyr::Spanned<LocatedNode>>),
    Leaf,
}

impl<'de> serde::Deserialize<'de> for LocatedNode {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct NodeVisitor;
        impl<'de> serde::de::Visitor<'de> for NodeVisitor {
            type Value = LocatedNode;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any YAML node")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<LocatedNode, A::Error> {
                let mut entries = Vec::new();
                while let Some(key) = map.next_key::<KeyText>()? {
                    entries.push((key.0, map.next_value()?));
                }
                Ok(LocatedNode::Map(entries))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<LocatedNode, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(LocatedNode::Seq(items))
            }
            fn visit_bool<E>(self, _: bool) -> Result<LocatedNode, E> { Ok(LocatedNode::Leaf) }
            fn visit_i64<E>(self, _: i64) -> Result<LocatedNode, E> { Ok(LocatedNode::Leaf) }
            fn visit_u64<E>(self, _: u64) -> Result<LocatedNode, E> { Ok(LocatedNode::Leaf) }
            fn visit_f64<E>(self, _: f64) -> Result<LocatedNode, E> { Ok(LocatedNode::Leaf) }
            fn visit_str<E>(self, _: &str) -> Result<LocatedNode, E> { Ok(LocatedNode::Leaf) }
            fn visit_unit<E>(self) -> Result<LocatedNode, E> { Ok(LocatedNode::Leaf) }
            fn visit_none<E>(self) -> Result<LocatedNode, E> { Ok(LocatedNode::Leaf) }
            fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<LocatedNode, D::Error> {
                LocatedNode::deserialize(d)
            }
        }
        deserializer.deserialize_any(NodeVisitor)
    }
}

/// A mapping key as text (non-string keys are rendered, never rejected).
struct KeyText(String);

impl<'de> serde::Deserialize<'de> for KeyText {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Ok(KeyText(match value {
            Value::String(s) => s,
            other => other.to_string(),
        }))
    }
}

/// Splits `spec.installModes[2].type` into keys and indices.
fn path_segments(path: &str) -> Vec<Result<String, usize>> {
    let mut out = Vec::new();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let mut rest = part;
        if let Some(open) = rest.find('[') {
            if open > 0 {
                out.push(Ok(rest[..open].to_owned()));
            }
            rest = &rest[open..];
            while let Some(stripped) = rest.strip_prefix('[') {
                let Some(close) = stripped.find(']') else { break };
                match stripped[..close].parse() {
                    Ok(index) => out.push(Err(index)),
                    Err(_) => out.push(Ok(stripped[..close].to_owned())),
                }
                rest = &stripped[close + 1..];
            }
        } else {
            out.push(Ok(rest.to_owned()));
        }
    }
    out
}

/// The position of the deepest node of `path` that exists in `text`.
fn locate(text: &str, path: &str) -> Option<(u64, u64)> {
    let root: serde_saphyr::Spanned<LocatedNode> = serde_saphyr::from_str(text).ok()?;
    let mut node = &root;
    for segment in path_segments(path) {
        let next = match (&node.value, segment) {
            (LocatedNode::Map(entries), Ok(key)) => entries.iter().find(|(k, _)| *k == key).map(|(_, v)| v),
            (LocatedNode::Seq(items), Err(index)) => items.get(index),
            _ => None,
        };
        match next {
            Some(next) => node = next,
            None => break,
        }
    }
    let location = node.referenced;
    (location.line() > 0).then(|| (location.line(), location.column()))
}

/// Parses one YAML document into `T`. `origin` names the input in errors.
pub fn from_str<T: DeserializeOwned>(text: &str, origin: &str) -> Result<T, YamlError> {
    let mut failed_at: Option<String> = None;
    let outcome = serde_saphyr::with_deserializer_from_str(text, |deserializer| {
        let mut track = serde_path_to_error::Track::new();
        let result = T::deserialize(serde_path_to_error::Deserializer::new(deserializer, &mut track));
        if result.is_err() {
            failed_at = Some(track.path().to_string());
        }
        result
    });
    outcome.map_err(|err| {
        let (message, position) = saphyr_parts(&err);
        let (message, position) = name_unclosed_quote(text, message, position);
        let error = invalid(origin, None, failed_at.as_deref().unwrap_or_default(), message, position);
        // Errors found inside a buffered sub-object carry that object's position; point at
        // the field itself when it can be found.
        match error {
            YamlError::Invalid(mut details) => {
                if let Some(field) = &details.field
                    && let Some((line, column)) = locate(text, field)
                {
                    details.line = Some(line);
                    details.column = Some(column);
                }
                YamlError::Invalid(details)
            }
            other => other,
        }
    })
}

/// Reads and parses one YAML document from a file.
pub fn from_path<T: DeserializeOwned>(path: impl AsRef<Path>) -> Result<T, YamlError> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).map_err(|cause| YamlError::Read { path: path.to_owned(), cause })?;
    from_str(&text, &path.display().to_string())
}

/// Parses every non-empty document of a `---`-separated stream into `T`.
pub fn all_from_str<T: DeserializeOwned>(text: &str, origin: &str) -> Result<Vec<T>, YamlError> {
    let options = serde_saphyr::options! {
        budget: serde_saphyr::budget! { max_documents: MAX_DOCUMENTS },
    };
    let documents: Vec<Value> = serde_saphyr::from_multiple_with_options(text, options).map_err(|err| {
        let (message, position) = saphyr_parts(&err);
        let (message, position) = name_unclosed_quote(text, message, position);
        invalid(origin, None, "", message, position)
    })?;
    documents
        .into_iter()
        .filter(|document| !document.is_null())
        .enumerate()
        .map(|(index, document)| from_value(document, origin, Some(index + 1)))
        .collect()
}

/// Reads and parses every document of a multi-document file.
pub fn all_from_path<T: DeserializeOwned>(path: impl AsRef<Path>) -> Result<Vec<T>, YamlError> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).map_err(|cause| YamlError::Read { path: path.to_owned(), cause })?;
    all_from_str(&text, &path.display().to_string())
}

/// Converts an already parsed JSON value into `T`, naming the failing field.
pub fn from_value<T: DeserializeOwned>(value: Value, origin: &str, document: Option<usize>) -> Result<T, YamlError> {
    let mut track = serde_path_to_error::Track::new();
    T::deserialize(serde_path_to_error::Deserializer::new(value, &mut track))
        .map_err(|err| invalid(origin, document, &track.path().to_string(), err.to_string(), None))
}

/// Writes one value as a YAML document.
pub fn to_string<T: Serialize>(value: &T) -> Result<String, YamlError> {
    serde_saphyr::to_string(value).map_err(|err| YamlError::Write(err.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_paths_are_joined() {
        let (field, message) = split_nested_path("spec", "installModes[0].type: unknown variant `X`".to_owned());
        assert_eq!(field.as_deref(), Some("spec.installModes[0].type"));
        assert_eq!(message, "unknown variant `X`");
        let (field, message) = split_nested_path("spec", "invalid type: string \"a\", expected i32".to_owned());
        assert_eq!(field.as_deref(), Some("spec"), "a message with spaces before ':' is not a path");
        assert_eq!(message, "invalid type: string \"a\", expected i32");
        let (field, _) = split_nested_path("?", "x".to_owned());
        assert_eq!(field, None);
    }

    #[test]
    fn paths_split_into_keys_and_indices() {
        assert_eq!(
            path_segments("spec.install.spec.deployments[0].spec"),
            vec![Ok("spec".into()), Ok("install".into()), Ok("spec".into()), Ok("deployments".into()), Err(0), Ok("spec".into())]
        );
        assert_eq!(path_segments("a[1][2]"), vec![Ok("a".into()), Err(1), Err(2)]);
        assert_eq!(path_segments(""), Vec::<Result<String, usize>>::new());
    }

    #[test]
    fn locate_finds_the_deepest_existing_node() {
        let text = "spec:\n  modes:\n  - type: A\n  - type: B\n";
        assert_eq!(locate(text, "spec.modes[1].type"), Some((4, 11)));
        assert_eq!(locate(text, "spec.modes[7].type").map(|p| p.0), Some(3), "falls back to the nearest existing node (the list)");
        assert_eq!(locate("not: [valid", "not"), None);
    }

    #[test]
    fn an_unclosed_quote_is_named_where_it_opens() {
        let mut text = String::from("kind: A\n---\nkind: B\nname: 'abc\n");
        for i in 0..500 {
            text.push_str(&format!("---\nkind: C\nname: c{i}\n"));
        }
        let err = all_from_str::<Value>(&text, "stream.yaml").unwrap_err();
        let details = err.invalid().expect("invalid");
        assert_eq!((details.line, details.column), (Some(4), Some(7)), "{err}");
        assert!(err.to_string().contains("never closed"), "{err}");
        let err = from_str::<Value>("a: 1\nb: \"x\nc: 2\n", "one.yaml").unwrap_err();
        assert!(err.to_string().starts_with("one.yaml:2:4: "), "{err}");
    }

    #[test]
    fn location_suffixes_are_stripped() {
        assert_eq!(strip_location_suffix("missing field `x` at line 3, column 1"), "missing field `x`");
        assert_eq!(strip_location_suffix("plain"), "plain");
    }
}
