//! Small JSON helpers with Go `encoding/json` lookup semantics.

use serde_json::{Map, Value};

pub(crate) fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Field lookup, exact first, then case-insensitive (Go `encoding/json` semantics).
pub(crate) fn get_ci<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    map.get(key).or_else(|| {
        map.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v)
    })
}

pub(super) fn as_object(v: &Value) -> Result<&Map<String, Value>, String> {
    match v {
        Value::Object(m) => Ok(m),
        other => Err(format!(
            "value must be an object, found {}",
            json_kind(other)
        )),
    }
}

pub(crate) fn opt_str(map: &Map<String, Value>, key: &str) -> Result<String, String> {
    match get_ci(map, key) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(format!(
            "{key:?} must be a string, found {}",
            json_kind(other)
        )),
    }
}

pub(super) fn req_str(map: &Map<String, Value>, key: &str) -> Result<String, String> {
    let s = opt_str(map, key)?;
    if s.is_empty() {
        Err(format!("{key:?} must be set"))
    } else {
        Ok(s)
    }
}

/// Whether `v` is a ClusterServiceVersion.
pub fn is_csv(v: &Value) -> bool {
    v.get("kind").and_then(Value::as_str) == Some("ClusterServiceVersion")
}
