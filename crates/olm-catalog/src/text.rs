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

/// Most repairs of under-indented quoted-scalar continuation lines per file.
const MAX_INDENT_REPAIRS: usize = 2000;

/// Parse multi-document YAML. Go's YAML parser (what opm uses) accepts
/// continuation lines of multi-line quoted scalars that are not indented past
/// their key, which YAML 1.2 and our parser reject; real published CRDs contain
/// them. Such a line's leading whitespace is not part of the value, so we indent
/// the offending line one more column and parse again (bounded).
fn parse_yaml_lenient(text: &str) -> Result<Vec<Value>, String> {
    let mut owned: Option<String> = None;
    let mut duplicates = serde_saphyr::DuplicateKeyPolicy::Error;
    for _ in 0..=MAX_INDENT_REPAIRS {
        let current = owned.as_deref().unwrap_or(text);
        match serde_saphyr::from_multiple_with_options::<Value>(current, yaml_options(duplicates)) {
            Ok(docs) => return Ok(docs),
            Err(e) => {
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
                let repairable = message.contains("multiline quoted scalar");
                match (repairable, location) {
                    (true, Some(loc)) if loc.line() > 0 => {
                        let line = (loc.line() - 1) as usize;
                        let mut lines: Vec<&str> = current.split('\n').collect();
                        let Some(target) = lines.get(line) else {
                            return Err(yaml_error(&e));
                        };
                        let fixed = format!(" {target}");
                        lines[line] = &fixed;
                        owned = Some(lines.join("\n"));
                    }
                    _ => return Err(yaml_error(&e)),
                }
            }
        }
    }
    Err("invalid YAML: too many under-indented quoted-scalar lines".into())
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
}
