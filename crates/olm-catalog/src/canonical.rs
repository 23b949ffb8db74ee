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
    // control characters, and the JavaScript line terminators U+2028/U+2029.
    out.push('"');
    let mut plain_from = 0;
    for (i, c) in s.char_indices() {
        let escape: Option<&str> = match c {
            '"' => Some("\\\""),
            '\\' => Some("\\\\"),
            '\n' => Some("\\n"),
            '\r' => Some("\\r"),
            '\t' => Some("\\t"),
            '\u{8}' => Some("\\b"),
            '\u{c}' => Some("\\f"),
            c if (c as u32) < 0x20 || c == '\u{2028}' || c == '\u{2029}' => Some(""),
            _ => None,
        };
        if let Some(esc) = escape {
            out.push_str(&s[plain_from..i]);
            if esc.is_empty() {
                use std::fmt::Write;
                let _ = write!(out, "\\u{:04x}", c as u32);
            } else {
                out.push_str(esc);
            }
            plain_from = i + c.len_utf8();
        }
    }
    out.push_str(&s[plain_from..]);
    out.push('"');
}

fn write_number(out: &mut String, n: &serde_json::Number) {
    use std::fmt::Write;
    if let Some(i) = n.as_i64()
        && (i as f64).abs() < 1e21 {
            let _ = write!(out, "{i}");
            return;
        }
    if let Some(u) = n.as_u64()
        && (u as f64) < 1e21 {
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
    }

    #[test]
    fn go_float_formatting() {
        assert_eq!(to_canonical_string(&json!(1e21)), "1e+21");
        assert_eq!(to_canonical_string(&json!(1e-7)), "1e-7");
        assert_eq!(to_canonical_string(&json!(0.5)), "0.5");
    }
}
