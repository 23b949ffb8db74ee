//! The rules a CRD change must keep, shared by the InstallPlan controller (which refuses an
//! unsafe change before writing anything) and the plan preview (which tells a person what a
//! change would do): versions still in `status.storedVersions` stay served
//! ([`stored_versions_kept`]), and existing custom resources stay valid under the new schema
//! ([`validate`], best effort, as upstream's check). The schema check covers what most changes
//! break: `type`, `required`, `enum`, `properties`, `items`, `additionalProperties: false`,
//! string lengths and numeric bounds, `nullable`. Not covered (the API server still enforces
//! them on writes): `pattern`, `format`, `oneOf`/`anyOf`/`allOf`/`not`, CEL rules.

use serde_json::Value;

/// At most this many problems are reported per object.
const MAX_PROBLEMS: usize = 5;

/// CRD upgrade safety: versions still in `status.storedVersions` must stay in `spec.versions`.
pub fn stored_versions_kept(existing: &Value, desired: &Value) -> Result<(), String> {
    let stored: Vec<&str> = existing
        .pointer("/status/storedVersions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let offered = version_names(desired);
    let missing: Vec<&str> = stored.into_iter().filter(|v| !offered.contains(v)).collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "risk of data loss: version(s) {} of the existing CRD are still in status.storedVersions but the new CRD drops them; migrate the stored objects and remove those versions from status.storedVersions first",
            missing.join(", ")
        ))
    }
}

fn type_matches(expected: &str, value: &Value) -> bool {
    match expected {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "integer" => value.as_i64().is_some() || value.as_u64().is_some(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        _ => true,
    }
}

fn walk(value: &Value, schema: &Value, path: &str, out: &mut Vec<String>) {
    if out.len() >= MAX_PROBLEMS {
        return;
    }
    if value.is_null() {
        if schema.get("nullable") != Some(&Value::Bool(true)) && schema.get("type").is_some() {
            out.push(format!("{path}: must not be null"));
        }
        return;
    }
    let int_or_string = schema.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    if let Some(expected) = schema.get("type").and_then(Value::as_str) {
        let ok = type_matches(expected, value) || (int_or_string && (value.is_string() || value.is_i64() || value.is_u64()));
        if !ok {
            out.push(format!("{path}: must be of type {expected}"));
            return;
        }
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        out.push(format!("{path}: {value} is not one of {}", Value::Array(allowed.clone())));
    }
    if let Some(s) = value.as_str() {
        let len = s.chars().count() as u64;
        if schema.get("maxLength").and_then(Value::as_u64).is_some_and(|m| len > m) {
            out.push(format!("{path}: longer than maxLength"));
        }
        if schema.get("minLength").and_then(Value::as_u64).is_some_and(|m| len < m) {
            out.push(format!("{path}: shorter than minLength"));
        }
    }
    if let Some(n) = value.as_f64() {
        if schema.get("maximum").and_then(Value::as_f64).is_some_and(|m| n > m) {
            out.push(format!("{path}: {n} is above the maximum"));
        }
        if schema.get("minimum").and_then(Value::as_f64).is_some_and(|m| n < m) {
            out.push(format!("{path}: {n} is below the minimum"));
        }
    }
    if let Some(map) = value.as_object() {
        for key in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if !map.contains_key(key) {
                out.push(format!("{path}.{key}: required"));
            }
        }
        let properties = schema.get("properties").and_then(Value::as_object);
        let additional = schema.get("additionalProperties");
        let preserve = schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
        for (key, child) in map {
            // The API server owns metadata, apiVersion and kind at the top level.
            if path.is_empty() && matches!(key.as_str(), "metadata" | "apiVersion" | "kind" | "status") {
                continue;
            }
            let child_path = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
            match (properties.and_then(|p| p.get(key)), additional) {
                (Some(child_schema), _) => walk(child, child_schema, &child_path, out),
                (None, Some(Value::Object(schema))) => walk(child, &Value::Object(schema.clone()), &child_path, out),
                (None, Some(Value::Bool(false))) if !preserve => out.push(format!("{child_path}: not allowed by the schema")),
                // Unknown fields are pruned by the API server, not rejected.
                _ => {}
            }
        }
    }
    if let (Some(items), Some(schema)) = (value.as_array(), schema.get("items")) {
        for (i, item) in items.iter().enumerate() {
            walk(item, schema, &format!("{path}[{i}]"), out);
        }
    }
}

/// Problems of `object` under `schema` (an `openAPIV3Schema`), each naming the field.
pub fn validate(object: &Value, schema: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk(object, schema, "", &mut out);
    out
}

/// The names of a CRD's `spec.versions`, in order.
pub fn version_names(crd: &Value) -> Vec<&str> {
    crd.pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.get("name").and_then(Value::as_str))
        .collect()
}

/// The `openAPIV3Schema` of `version` in a CRD manifest, when it has one and is served.
pub fn served_schema<'a>(crd: &'a Value, version: &str) -> Option<&'a Value> {
    crd.pointer("/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| v.get("name").and_then(Value::as_str) == Some(version) && v.get("served") != Some(&Value::Bool(false)))?
        .pointer("/schema/openAPIV3Schema")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_versions_may_not_disappear() {
        let existing = json!({"status": {"storedVersions": ["v1beta1", "v1"]}});
        let keeps = json!({"spec": {"versions": [{"name": "v1beta1"}, {"name": "v1"}]}});
        assert!(stored_versions_kept(&existing, &keeps).is_ok());
        let drops = json!({"spec": {"versions": [{"name": "v1"}]}});
        let err = stored_versions_kept(&existing, &drops).unwrap_err();
        assert!(err.contains("v1beta1") && err.contains("risk of data loss"), "{err}");
    }
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object", "required": ["size"], "properties": {
            "size": {"type": "integer", "minimum": 1},
            "version": {"type": "string", "enum": ["3.2.13", "3.3.0"]},
            "pod": {"type": "object", "additionalProperties": false, "properties": {"labels": {"type": "object", "additionalProperties": {"type": "string"}}}},
            "members": {"type": "array", "items": {"type": "string"}},
        }}}})
    }

    #[test]
    fn valid_objects_pass() {
        let object = json!({"apiVersion": "etcd.database.coreos.com/v1beta2", "kind": "EtcdCluster", "metadata": {"name": "a"},
            "spec": {"size": 3, "version": "3.2.13", "pod": {"labels": {"a": "b"}}, "members": ["x"]}, "status": {"phase": "Running"}});
        assert_eq!(validate(&object, &schema()), Vec::<String>::new());
    }

    #[test]
    fn problems_name_the_field() {
        let object = json!({"spec": {"version": "9.9", "pod": {"extra": 1, "labels": {"a": 1}}, "members": [1]}});
        let problems = validate(&object, &schema());
        assert!(problems.contains(&"spec.size: required".to_owned()), "{problems:?}");
        assert!(
            problems.iter().any(|p| p.starts_with("spec.version: \"9.9\" is not one of")),
            "{problems:?}"
        );
        assert!(
            problems.contains(&"spec.pod.extra: not allowed by the schema".to_owned()),
            "{problems:?}"
        );
        assert!(
            problems.contains(&"spec.pod.labels.a: must be of type string".to_owned()),
            "{problems:?}"
        );
        assert!(
            problems.contains(&"spec.members[0]: must be of type string".to_owned()),
            "{problems:?}"
        );
        let object = json!({"spec": {"size": 0}});
        assert_eq!(validate(&object, &schema()), vec!["spec.size: 0 is below the minimum"]);
    }

    #[test]
    fn the_served_schema_of_a_version_is_found() {
        let crd = json!({"spec": {"versions": [
            {"name": "v1", "served": true, "schema": {"openAPIV3Schema": {"type": "object"}}},
            {"name": "v0", "served": false, "schema": {"openAPIV3Schema": {"type": "string"}}},
        ]}});
        assert_eq!(served_schema(&crd, "v1"), Some(&json!({"type": "object"})));
        assert_eq!(served_schema(&crd, "v0"), None);
    }
}
