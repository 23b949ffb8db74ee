//! A manifest as upstream's typed decode leaves it, read off the CRD's schema (pure).
//!
//! Upstream's InstallPlan executor decodes a bundle's CSV into Go structs and encodes it again
//! before creating it. Real CSVs rely on what that round trip does, and the API server refuses
//! them without it: project-quay 3.18.0 lists owned-CRD `resources` with no `version` (the Go
//! field has no `omitempty`, so upstream sends `""`, which satisfies the CRD's `required`) and
//! one spelt `Kind:` (Go's decoder matches field names case-insensitively). So, where the
//! schema lists the properties of an object:
//! - a key that is not a property but matches one ignoring case is renamed to it (an exact
//!   key wins over such a variant, which is dropped);
//! - any other unknown key is dropped (the typed decode has nowhere to put it; server-side
//!   apply would refuse the object for it);
//! - a required `string`, `integer`, `number` or `boolean` property that is missing is added
//!   with its zero value.
//!
//! Where the schema preserves unknown fields, unknown keys stay (the API server keeps them
//! too). Objects without listed properties (`metadata`, maps) are kept as they are, apart from
//! their values' own schemas.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use serde_json::{Map, Value, json};

/// Make `value` what a typed decode and encode by `schema` would make of it.
pub fn decode_as_typed(value: &mut Value, schema: &JSONSchemaProps) {
    match value {
        Value::Object(map) => decode_object(map, schema),
        Value::Array(items) => {
            if let Some(item_schema) = item_schema(schema) {
                items.iter_mut().for_each(|item| decode_as_typed(item, item_schema));
            }
        }
        _ => {}
    }
}

fn item_schema(schema: &JSONSchemaProps) -> Option<&JSONSchemaProps> {
    match schema.items.as_ref()? {
        JSONSchemaPropsOrArray::Schema(item) => Some(item),
        JSONSchemaPropsOrArray::Schemas(items) => items.first(),
    }
}

fn decode_object(map: &mut Map<String, Value>, schema: &JSONSchemaProps) {
    let Some(properties) = schema.properties.as_ref().filter(|p| !p.is_empty()) else {
        // A map: each value has the schema of additionalProperties.
        if let Some(JSONSchemaPropsOrBool::Schema(values)) = schema.additional_properties.as_ref() {
            map.values_mut().for_each(|value| decode_as_typed(value, values));
        }
        return;
    };
    // Where the schema preserves unknown fields, they stay: the API server keeps them too.
    let preserved = schema.x_kubernetes_preserve_unknown_fields == Some(true);
    let keys: Vec<String> = map.keys().cloned().collect();
    for key in keys {
        if properties.contains_key(&key) {
            continue;
        }
        let same_ignoring_case = properties.keys().find(|name| name.eq_ignore_ascii_case(&key));
        if same_ignoring_case.is_none() && preserved {
            continue;
        }
        let Some(value) = map.remove(&key) else { continue };
        if let Some(name) = same_ignoring_case
            && !map.contains_key(name)
        {
            map.insert(name.clone(), value);
        }
    }
    for (name, property) in properties {
        if let Some(value) = map.get_mut(name) {
            decode_as_typed(value, property);
        }
    }
    for name in schema.required.iter().flatten() {
        if map.contains_key(name) {
            continue;
        }
        let zero = match properties.get(name).and_then(|p| p.type_.as_deref()) {
            Some("string") => json!(""),
            Some("integer" | "number") => json!(0),
            Some("boolean") => json!(false),
            _ => continue,
        };
        map.insert(name.clone(), zero);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema(value: Value) -> JSONSchemaProps {
        serde_json::from_value(value).expect("a schema")
    }

    /// The shape of a CSV's owned CRDs as project-quay 3.18.0 ships them.
    fn owned_schema() -> JSONSchemaProps {
        schema(json!({
            "type": "object",
            "properties": {
                "owned": {"type": "array", "items": {
                    "type": "object",
                    "required": ["kind", "name", "version"],
                    "properties": {
                        "kind": {"type": "string"}, "name": {"type": "string"}, "version": {"type": "string"},
                        "resources": {"type": "array", "items": {
                            "type": "object",
                            "required": ["kind", "version"],
                            "properties": {"kind": {"type": "string"}, "name": {"type": "string"}, "version": {"type": "string"}}
                        }},
                        "specDescriptors": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                            "required": ["path"], "properties": {"path": {"type": "string"}}}}
                    }
                }},
                "labels": {"type": "object", "additionalProperties": {"type": "object", "required": ["on"], "properties": {"on": {"type": "boolean"}}}}
            }
        }))
    }

    #[test]
    fn required_scalars_get_their_zero_value_and_a_key_spelt_in_another_case_is_renamed() {
        let mut owned = json!({"owned": [{"kind": "QuayRegistry", "name": "quayregistries.quay.redhat.com", "version": "v1",
            "resources": [{"kind": "Deployment"}, {"Kind": "Job"}, {"kind": "Secret", "Kind": "Job", "version": "v1"}]}]});
        decode_as_typed(&mut owned, &owned_schema());
        assert_eq!(
            owned["owned"][0]["resources"],
            json!([{"kind": "Deployment", "version": ""}, {"kind": "Job", "version": ""}, {"kind": "Secret", "version": "v1"}])
        );
    }

    #[test]
    fn unknown_keys_are_dropped_where_the_schema_lists_properties_and_kept_where_it_preserves_them() {
        let mut owned = json!({"ownd": [], "owned": [{"kind": "A", "name": "as.x", "version": "v1", "colour": "red",
            "specDescriptors": [{"path": "size", "anything": {"goes": true}}, {"Path": "colour"}]}],
            "labels": {"a": {"off": true}}});
        decode_as_typed(&mut owned, &owned_schema());
        assert_eq!(
            owned,
            json!({"owned": [{"kind": "A", "name": "as.x", "version": "v1",
                "specDescriptors": [{"path": "size", "anything": {"goes": true}}, {"path": "colour"}]}],
                "labels": {"a": {"on": false}}})
        );
    }

    #[test]
    fn an_object_without_listed_properties_is_kept() {
        let mut metadata = json!({"name": "x", "annotations": {"a": "b"}});
        decode_as_typed(&mut metadata, &schema(json!({"type": "object"})));
        assert_eq!(metadata, json!({"name": "x", "annotations": {"a": "b"}}));
    }
}
