//! Helpers shared by the integration tests.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The crate's `testdata` directory.
pub fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata")
}

/// Every file under `dir` whose name ends with `suffix`, sorted.
pub fn files_under(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|err| panic!("{}: {err}", dir.display()));
        for entry in entries {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.to_string_lossy().ends_with(suffix) {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Lists every difference between two JSON values as `path: left != right`.
pub fn json_diff(left: &Value, right: &Value) -> Vec<String> {
    let mut out = Vec::new();
    diff_into(left, right, String::new(), &mut out);
    out
}

fn diff_into(left: &Value, right: &Value, path: String, out: &mut Vec<String>) {
    match (left, right) {
        (Value::Object(l), Value::Object(r)) => {
            for (key, lv) in l {
                match r.get(key) {
                    Some(rv) => diff_into(lv, rv, format!("{path}.{key}"), out),
                    None => out.push(format!("{path}.{key}: dropped (was {})", short(lv))),
                }
            }
            for (key, rv) in r {
                if !l.contains_key(key) {
                    out.push(format!("{path}.{key}: added {}", short(rv)));
                }
            }
        }
        (Value::Array(l), Value::Array(r)) if l.len() == r.len() => {
            for (index, (lv, rv)) in l.iter().zip(r).enumerate() {
                diff_into(lv, rv, format!("{path}[{index}]"), out);
            }
        }
        _ if left == right => {}
        _ => out.push(format!("{path}: {} became {}", short(left), short(right))),
    }
}

fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.len() > 80 { format!("{}...", &text[..text.char_indices().nth(77).map_or(text.len(), |(i, _)| i)]) } else { text }
}
