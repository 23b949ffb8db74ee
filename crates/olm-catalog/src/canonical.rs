//! Canonical JSON encoding of FBC blobs, byte-compatible with what opm/catalogd
//! produce after decoding a blob into a Go map and re-encoding it: compact,
//! object keys sorted bytewise, no HTML escaping, U+2028/U+2029 escaped, numbers
//! as Go prints a float64.

use serde_json::Value;

/// Encode `value` canonically (no trailing newline).
pub fn to_canonical_string(value: &Value) -> String {
    let mut out = String::with_capacity(256);
    write_value(&mut out, value);
    out
}

/// Encode a top-level object canonically and also return, for each element of its
/// `properties` array, the byte range of that element's `value` in the output.
/// (Lets property values point into the blob instead of being encoded twice.)
pub(crate) fn to_canonical_with_property_values(
    value: &Value,
) -> (String, Vec<Option<(usize, usize)>>) {
    let Value::Object(map) = value else {
        return (to_canonical_string(value), Vec::new());
    };
    let mut out = String::with_capacity(1024);
    let mut ranges = Vec::new();
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort_unstable();
    out.push('{');
    for (i, key) in keys.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(&mut out, key);
        out.push(':');
        let Some(v) = map.get(key) else { continue };
        match (key.as_str(), v) {
            ("properties", Value::Array(items)) => {
                out.push('[');
                for (j, item) in items.iter().enumerate() {
                    if j > 0 {
                        out.push(',');
                    }
                    let mut range = None;
                    if let Value::Object(prop) = item {
                        let mut pkeys: Vec<&String> = prop.keys().collect();
                        pkeys.sort_unstable();
                        out.push('{');
                        for (k, pkey) in pkeys.into_iter().enumerate() {
                            if k > 0 {
                                out.push(',');
                            }
                            write_string(&mut out, pkey);
                            out.push(':');
                            let start = out.len();
                            if let Some(pv) = prop.get(pkey) {
                                write_value(&mut out, pv);
                            }
                            if pkey == "value" {
                                range = Some((start, out.len()));
                            }
                        }
                        out.push('}');
                    } else {
                        write_value(&mut out, item);
                    }
                    ranges.push(range);
                }
                out.push(']');
            }
            _ => write_value(&mut out, v),
        }
    }
    out.push('}');
    (out, ranges)
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_unstable();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, key);
                out.push(':');
                if let Some(v) = map.get(key) {
                    write_value(out, v);
                }
            }
            out.push('}');
        }
    }
}

fn write_string(out: &mut String, s: &str) {
    // Escape exactly what Go's encoder escapes with HTML escaping off: `"`, `\\`,
    // control characters, and the JavaScript line terminators U+2028/U+2029
    // (UTF-8 E2 80 A8/A9). Scanning bytes keeps the common no-escape case a copy.
    out.push('"');
    let bytes = s.as_bytes();
    // Most strings (names, base64 icons and manifests) need no escape: one pass the compiler
    // vectorises tells, and they are copied whole.
    let needs_escape = bytes.iter().fold(false, |seen, &b| seen | (b < 0x20) | (b == b'"') | (b == b'\\') | (b == 0xe2));
    if !needs_escape {
        out.push_str(s);
        out.push('"');
        return;
    }
    let mut plain_from = 0;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let escape: Option<&str> = match b {
            b'"' => Some("\\\""),
            b'\\' => Some("\\\\"),
            b'\n' => Some("\\n"),
            b'\r' => Some("\\r"),
            b'\t' => Some("\\t"),
            0x08 => Some("\\b"),
            0x0c => Some("\\f"),
            0x00..=0x1f => Some(""),
            0xe2 if bytes.get(i + 1) == Some(&0x80) && matches!(bytes.get(i + 2), Some(0xa8 | 0xa9)) => {
                out.push_str(&s[plain_from..i]);
                out.push_str(if bytes[i + 2] == 0xa8 { "\\u2028" } else { "\\u2029" });
                i += 3;
                plain_from = i;
                continue;
            }
            _ => None,
        };
        if let Some(esc) = escape {
            out.push_str(&s[plain_from..i]);
            if esc.is_empty() {
                use std::fmt::Write;
                let _ = write!(out, "\\u{:04x}", b);
            } else {
                out.push_str(esc);
            }
            plain_from = i + 1;
        }
        i += 1;
    }
    out.push_str(&s[plain_from..]);
    out.push('"');
}

fn write_number(out: &mut String, n: &serde_json::Number) {
    use std::fmt::Write;
    if let Some(i) = n.as_i64()
        && (i as f64).abs() < 1e21
    {
        let _ = write!(out, "{i}");
        return;
    }
    if let Some(u) = n.as_u64()
        && (u as f64) < 1e21
    {
        let _ = write!(out, "{u}");
        return;
    }
    let f = n.as_f64().unwrap_or(0.0);
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let s = format!("{f:e}");
        // Go writes an explicit sign on positive exponents.
        match s.split_once('e') {
            Some((mantissa, exp)) if !exp.starts_with('-') => {
                let _ = write!(out, "{mantissa}e+{exp}");
            }
            _ => out.push_str(&s),
        }
    } else if f.fract() == 0.0 {
        let _ = write!(out, "{f:.0}");
    } else {
        let _ = write!(out, "{f}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sorts_keys_compact_no_html_escape() {
        let v = json!({"schema": "olm.package", "b": [1, 2.5, true, null], "a": {"z": "<&>", "y": 1.0}});
        assert_eq!(
            to_canonical_string(&v),
            r#"{"a":{"y":1,"z":"<&>"},"b":[1,2.5,true,null],"schema":"olm.package"}"#
        );
    }

    #[test]
    fn escapes_line_separators_and_controls() {
        let v = json!("a\u{2028}b\n\u{1}");
        assert_eq!(to_canonical_string(&v), r#""a\u2028b\n\u0001""#);
        let mixed = json!("é\"€\u{2029}\u{e2}\u{80}x\u{7f}");
        assert_eq!(to_canonical_string(&mixed), "\"é\\\"€\\u2029\u{e2}\u{80}x\u{7f}\"");
        assert_eq!(serde_json::from_str::<Value>(&to_canonical_string(&mixed)).unwrap(), mixed);
    }

    #[test]
    fn property_value_ranges_point_at_the_values() {
        let v = json!({"schema": "olm.bundle", "properties": [{"value": {"b": 1, "a": "x"}, "type": "t"}, {"type": "u"}, 5]});
        let (text, ranges) = to_canonical_with_property_values(&v);
        assert_eq!(text, to_canonical_string(&v));
        assert_eq!(ranges.len(), 3);
        let (s, e) = ranges[0].unwrap();
        assert_eq!(&text[s..e], r#"{"a":"x","b":1}"#);
        assert_eq!(ranges[1], None);
        assert_eq!(ranges[2], None);
    }

    #[test]
    fn go_float_formatting() {
        assert_eq!(to_canonical_string(&json!(1e21)), "1e+21");
        assert_eq!(to_canonical_string(&json!(1e-7)), "1e-7");
        assert_eq!(to_canonical_string(&json!(0.5)), "0.5");
    }
}
