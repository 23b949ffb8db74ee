//! Hand-written schema fragments, used with `#[schemars(schema_with = "...")]` where the
//! derived schema would be wrong for the apiserver or needlessly large.

use schemars::{Schema, SchemaGenerator, json_schema};

/// An object whose content the apiserver neither validates nor prunes.
///
/// Used for the Deployment specs embedded in a CSV's install strategy: the full
/// `DeploymentSpec` schema is most of upstream's 814 KB CSV CRD. The trade-off: the apiserver
/// no longer rejects a malformed pod template inside a CSV at admission; the error surfaces
/// when OLM creates the Deployment (and is reported on the CSV). In exchange, fields the
/// apiserver would have pruned silently are kept.
pub fn preserve_unknown_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// A list of such objects.
pub fn preserve_unknown_object_list(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
        },
    })
}

/// Any JSON value (object, array, string, number, boolean).
///
/// Used for descriptor `value`s (a `json.RawMessage` upstream).
pub fn any_json(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// A string-to-string map.
pub fn string_map(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "additionalProperties": { "type": "string" },
    })
}
