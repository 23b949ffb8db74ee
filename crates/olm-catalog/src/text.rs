//! Text → JSON values: concatenated JSON objects or multi-document YAML, parsed
//! leniently (as Go's YAML parser accepts) and within fixed budgets.

use serde_json::Value;

/// YAML/JSON nesting limit per document.
pub const MAX_NESTING_DEPTH: usize = 128;

fn yaml_options(duplicate_keys: serde_saphyr::DuplicateKeyPolicy) -> serde_saphyr::Options {
    serde_saphyr::options! {
        duplicate_keys: duplicate_keys,
        budget: serde_saphyr::budget! {
            max_documents: 1_000_000,
            max_nodes: 50_000_000,
            max_events: 200_000_000,
            max_total_scalar_bytes: 1024 * 1024 * 1024,
            max_depth: MAX_NESTING_DEPTH,
        },
        with_snippet: false,
    }
}

/// Parse a stream of documents: concatenated JSON objects when the first
/// non-whitespace character is `{`, otherwise multi-document YAML. Empty and null
/// documents are skipped.
pub fn parse_manifest_text(text: &str) -> Result<Vec<Value>, String> {
    let trimmed = text.trim_start_matches(|c: char| c.is_whitespace() || c == '\u{feff}');
    if trimmed.starts_with('{') {
        let mut out = Vec::new();
        let stream = serde_json::Deserializer::from_str(trimmed).into_iter::<Value>();
        for (i, item) in stream.enumerate() {
            match item {
                Ok(Value::Null) => {}
                Ok(v) => out.push(v),
                Err(e) => return Err(format!("invalid JSON in document {}: {e}", i + 1)),
            }
        }
        return Ok(out);
    }
    if trimmed.is_empty() {
        return Ok(Vec::new());
    }
    let docs = parse_yaml_lenient(text)?;
    let docs: Vec<Value> = docs.into_iter().filter(|d| !d.is_null()).collect();
    for (i, d) in docs.iter().enumerate() {
        if depth_exceeds(d, MAX_NESTING_DEPTH) {
            return Err(format!(
                "document {} is nested deeper than {MAX_NESTING_DEPTH} levels",
                i + 1
            ));
        }
    }
    Ok(docs)
}

/// Most parses spent repairing under-indented quoted scalars in one file: each repair of a
/// scalar costs two parses, so the total work stays a bounded multiple of the file's size
/// however many scalars need it: 128 times the file, at least 4 MiB and at most 64 MiB of
/// parsing (a 1 MiB CRD gets 32 repairs). A flat 64 MiB let a 22 KB file found by fuzzing
/// cost 3,000 times its size (a second of CPU per file for a hostile catalog).
fn repair_parse_budget(len: usize) -> usize {
    let len = len.max(1);
    (len.saturating_mul(128).clamp(4 << 20, 64 << 20) / len).clamp(8, 2000)
}

/// Parse multi-document YAML. Go's YAML parser (what opm uses) accepts
/// continuation lines of multi-line quoted scalars that are not indented past
/// their key, which YAML 1.2 and our parser reject; real published CRDs contain
/// them. Such a line's leading whitespace is not part of the value, so we indent
/// the scalar's under-indented lines and parse again (bounded). A quote that is
/// never closed is an error naming where it opens.
fn parse_yaml_lenient(text: &str) -> Result<Vec<Value>, String> {
    let mut owned: Option<String> = None;
    let mut duplicates = serde_saphyr::DuplicateKeyPolicy::Error;
    let mut parses_left = repair_parse_budget(text.len());
    let mut first_repair: Option<u64> = None;
    loop {
        let current = owned.as_deref().unwrap_or(text);
        let e = match serde_saphyr::from_multiple_with_options::<Value>(current, yaml_options(duplicates)) {
            Ok(docs) => return Ok(docs),
            Err(e) => e,
        };
        let message = e.to_string();
        let location = e.location();
        // Go's YAML decoding (opm's, OLM's) takes the last of a repeated key; so do
        // we, and say so.
        if message.contains("duplicate mapping key") && matches!(duplicates, serde_saphyr::DuplicateKeyPolicy::Error) {
            let key = message
                .split("duplicate mapping key: ")
                .nth(1)
                .and_then(|rest| rest.split(',').next())
                .unwrap_or("?");
            let at = location.map(|l| format!(" at line {} column {}", l.line(), l.column())).unwrap_or_default();
            tracing::warn!("YAML key {key:?} is repeated{at}: the last value is used, as Go's YAML decoding does");
            duplicates = serde_saphyr::DuplicateKeyPolicy::LastWins;
            continue;
        }
        let line = match location {
            Some(loc) if message.contains("multiline quoted scalar") && loc.line() > 0 => loc.line(),
            _ => return Err(yaml_error(&e)),
        };
        let first = *first_repair.get_or_insert(line);
        if parses_left < 2 {
            return Err(format!(
                "invalid YAML: too many under-indented lines in multi-line quoted values (the first at line {first}); indent each continuation line past its key"
            ));
        }
        parses_left -= 2;
        owned = Some(indent_quoted_scalar(current, line, duplicates)?);
    }
}

/// `text` with the quoted scalar that continues on (1-based) `line` re-indented: each of its
/// continuation lines starts past the opening quote's column. Finds the opening quote by
/// parsing the text before `line` (it ends inside the scalar, so the parser names where
/// it opens) and the closing one by a scan: two linear passes per scalar. Falls back to
/// indenting `line` alone by one column when the opening cannot be found.
fn indent_quoted_scalar(text: &str, line: u64, duplicates: serde_saphyr::DuplicateKeyPolicy) -> Result<String, String> {
    let starts = line_starts(text);
    let Some(&fault_start) = starts.get(line as usize - 1) else {
        return Err(format!("invalid YAML at line {line}: invalid indentation in multiline quoted scalar"));
    };
    // Without its trailing line breaks, or the parser would fault on their indentation again.
    let before = text[..fault_start].trim_end();
    let opening = serde_saphyr::from_multiple_with_options::<Value>(before, yaml_options(duplicates))
        .err()
        .filter(|e| e.to_string().contains("unclosed quote"))
        .and_then(|e| e.location())
        .and_then(|loc| {
            let line_start = *starts.get((loc.line() as usize).checked_sub(1)?)?;
            let (offset, quote) = text[line_start..].char_indices().nth((loc.column() as usize).checked_sub(1)?)?;
            matches!(quote, '\'' | '"').then_some((loc.line(), loc.column(), line_start + offset, quote))
        });
    let Some((open_line, open_column, open_offset, quote)) = opening else {
        let mut lines: Vec<&str> = text.split('\n').collect();
        let fixed = format!(" {}", lines[line as usize - 1]);
        lines[line as usize - 1] = &fixed;
        return Ok(lines.join("\n"));
    };
    let close = closing_quote(text, open_offset, quote).map_err(|end| {
        let kind = if quote == '\'' { "single-quoted" } else { "double-quoted" };
        format!("invalid YAML at line {open_line} column {open_column}: the {kind} value opened here is never closed before {end}; add the closing {quote}")
    })?;
    let min_indent = open_column as usize;
    let mut out = String::with_capacity(text.len() + 1024);
    let first_continuation = starts.partition_point(|&s| s <= open_offset);
    let last_continuation = starts.partition_point(|&s| s <= close);
    out.push_str(&text[..starts.get(first_continuation).copied().unwrap_or(text.len())]);
    for index in first_continuation..last_continuation {
        let end = starts.get(index + 1).copied().unwrap_or(text.len());
        let this = &text[starts[index]..end];
        let spaces = this.len() - this.trim_start_matches(' ').len();
        if !this.trim().is_empty() && spaces < min_indent {
            out.extend(std::iter::repeat_n(' ', min_indent - spaces));
        }
        out.push_str(this);
    }
    if let Some(&rest) = starts.get(last_continuation) {
        out.push_str(&text[rest..]);
    }
    Ok(out)
}

/// Byte offsets where lines start.
fn line_starts(text: &str) -> Vec<usize> {
    std::iter::once(0).chain(text.match_indices('\n').map(|(i, _)| i + 1)).filter(|&i| i <= text.len()).collect()
}

/// The offset of the quote closing the scalar opened at `open`, or what ends it first: the
/// end of the text or a document marker (`---` / `...` at the start of a line).
fn closing_quote(text: &str, open: usize, quote: char) -> Result<usize, String> {
    let bytes = text.as_bytes();
    let mut i = open + 1;
    let mut line = 1 + bytes[..open].iter().filter(|&&b| b == b'\n').count();
    while i < bytes.len() {
        match bytes[i] {
            b'\\' if quote == '"' => i += 1,
            b'\'' if quote == '\'' => {
                if bytes.get(i + 1) == Some(&b'\'') {
                    i += 1;
                } else {
                    return Ok(i);
                }
            }
            b'"' if quote == '"' => return Ok(i),
            b'\n' => {
                line += 1;
                let next = &bytes[i + 1..];
                let marker = next.starts_with(b"---") || next.starts_with(b"...");
                if marker && matches!(next.get(3), None | Some(b' ' | b'\t' | b'\r' | b'\n')) {
                    return Err(format!("the document ends at line {line}"));
                }
            }
            _ => {}
        }
        i += 1;
    }
    Err("the end of the file".into())
}

fn yaml_error(e: &serde_saphyr::Error) -> String {
    let detail = one_line(&e.to_string());
    match e.location() {
        Some(loc) if !detail.contains("line ") => format!(
            "invalid YAML at line {} column {}: {detail}",
            loc.line(),
            loc.column()
        ),
        _ => format!("invalid YAML: {detail}"),
    }
}

fn depth_exceeds(v: &Value, limit: usize) -> bool {
    if limit == 0 {
        return true;
    }
    match v {
        Value::Array(a) => a.iter().any(|x| depth_exceeds(x, limit - 1)),
        Value::Object(o) => o.values().any(|x| depth_exceeds(x, limit - 1)),
        _ => false,
    }
}

fn one_line(s: &str) -> String {
    let mut out = String::new();
    for (i, line) in s.lines().filter(|l| !l.trim().is_empty()).enumerate() {
        if i > 0 {
            out.push_str(" | ");
        }
        out.push_str(line.trim_end());
    }
    out
}

/// The manifests of an `olm.bundle.object` value's `data` (base64 of JSON or YAML).
pub(crate) fn bundle_object_docs(data: &str) -> Result<Vec<Value>, String> {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.trim().as_bytes())
        .map_err(|e| format!("olm.bundle.object data is not valid base64: {e}"))?;
    let text = String::from_utf8(bytes).map_err(|_| "olm.bundle.object data is not UTF-8 text".to_string())?;
    parse_manifest_text(&text).map_err(|e| format!("olm.bundle.object does not decode: {e}"))
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_repeated_key_is_accepted_and_the_last_value_used_as_go_does() {
        let docs = super::parse_manifest_text("metadata:\n  name: a\n  name: b\nkind: X\n").expect("accepted");
        assert_eq!(docs[0]["metadata"]["name"], serde_json::json!("b"));
    }

    use super::*;

    #[test]
    fn yaml_quirks() {
        let docs = parse_manifest_text(
            "---\nschema: x\ncreatedAt: 2025-06-24T14:07:09\neq: =\nv: 1.0\n---\n---\nschema: yy\n",
        )
        .unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(
            docs[0]["createdAt"],
            Value::String("2025-06-24T14:07:09".into())
        );
        assert_eq!(docs[0]["eq"], Value::String("=".into()));
        assert_eq!(docs[1]["schema"], "yy");
    }

    #[test]
    fn under_indented_quoted_lines_are_repaired_as_go_reads_them() {
        let text = "a:\n  b: 'one\ntwo\n    three'\n  c: \"x\ny \\\" z\n\n w\"\nd: 'p\nq'\n";
        let docs = parse_manifest_text(text).unwrap();
        assert_eq!(docs[0]["a"]["b"], "one two three");
        assert_eq!(docs[0]["a"]["c"], "x y \" z\nw");
        assert_eq!(docs[0]["d"], "p q");
    }

    #[test]
    fn an_unclosed_quote_is_named_where_it_opens() {
        let mut text = String::from("items:\n- schema: olm.bundle\n  name: 'abc\n");
        for i in 0..2000 {
            text.push_str(&format!("- schema: olm.bundle\n  name: b{i}\n"));
        }
        let err = parse_manifest_text(&text).unwrap_err();
        assert!(err.contains("line 3 column 9") && err.contains("never closed before the end of the file"), "{err}");
        let err = parse_manifest_text("---\nname: \"abc\nx: 1\n---\nname: b\n").unwrap_err();
        assert!(err.contains("line 2 column 7") && err.contains("the document ends at line 4") && err.contains("closing \""), "{err}");
    }

    #[test]
    fn json_stream() {
        let docs = parse_manifest_text("{\"a\":1}\n{\"b\":2} {\"c\":3}").unwrap();
        assert_eq!(docs.len(), 3);
        assert!(parse_manifest_text("{\"a\":1} {").is_err());
    }

    #[test]
    fn many_documents_do_not_hit_default_budget() {
        let text: String = (0..3000)
            .map(|i| format!("---\nschema: s\nname: n{i}\n"))
            .collect();
        assert_eq!(parse_manifest_text(&text).unwrap().len(), 3000);
    }

    #[test]
    fn bad_and_deep_input_is_an_error_not_a_panic() {
        assert!(parse_manifest_text("a: [1, 2\n").is_err());
        let deep = "[".repeat(10_000) + &"]".repeat(10_000);
        assert!(parse_manifest_text(&deep).is_err());
        let deep_json = "{\"a\":".repeat(10_000) + "1" + &"}".repeat(10_000);
        assert!(parse_manifest_text(&deep_json).is_err());
        // alias bomb
        let bomb = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\ng: [*f, *f, *f, *f, *f, *f, *f, *f, *f]\n";
        let _ = parse_manifest_text(bomb); // must return (error or bounded value), never hang
    }

    #[test]
    fn repairs_parse_at_most_128_times_the_file_or_4_mib() {
        for len in [1, 100, 1_000, 22_121, 100_000, 1 << 20, 10 << 20, 100 << 20] {
            let work = repair_parse_budget(len) * len;
            assert!(work <= (len * 128).clamp(4 << 20, 64 << 20).max(8 * len), "{len} bytes: {work} bytes of parsing");
        }
        // A 1 MiB CRD still gets its repairs.
        assert!(repair_parse_budget(1 << 20) / 2 >= 32);
    }

    #[test]
    fn a_file_found_by_fuzzing_that_needs_a_repair_on_every_line_ends_in_an_error() {
        let text = String::from_utf8_lossy(include_bytes!("../testdata/fuzz-found/fbc-repair-on-every-line.yaml"));
        let err = parse_manifest_text(&text).unwrap_err();
        assert!(err.contains("too many under-indented lines"), "{err}");
    }
}
