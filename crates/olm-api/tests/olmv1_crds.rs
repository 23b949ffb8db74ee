//! The v1 CRDs generated from `olm_api::olmv1` are upstream's (operator-controller v1.11.0,
//! `tests/upstream-olmv1/`): the same names, scope, printer columns, subresources and schema —
//! every type, format, bound, pattern, enum, default, required list, list type and CEL rule
//! with its message. Only descriptions may differ. So what the API server accepts, refuses
//! and says for a v1 object is what it says under upstream's CRDs.

use std::path::Path;

use serde_json::{Map, Value};

/// Descriptions dropped, recursively.
fn without_descriptions(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter().filter(|(k, _)| k.as_str() != "description").map(|(k, v)| (k.clone(), without_descriptions(v))).collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_descriptions).collect()),
        other => other.clone(),
    }
}

/// What of a CRD the API server acts on: group, scope, names, and each version.
fn essence(crd: &Value) -> Value {
    let spec = &crd["spec"];
    let names: Map<String, Value> =
        ["kind", "listKind", "plural", "singular"].iter().map(|k| ((*k).to_owned(), spec["names"][k].clone())).collect();
    let versions: Vec<Value> = spec["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| {
            let mut version = without_descriptions(v);
            // An empty list is how kube-derive writes "none"; controller-gen leaves it out.
            if version.get("additionalPrinterColumns") == Some(&Value::Array(vec![])) {
                version.as_object_mut().map(|o| o.remove("additionalPrinterColumns"));
            }
            version
        })
        .collect();
    serde_json::json!({"group": spec["group"], "scope": spec["scope"], "names": names, "versions": versions})
}

/// Every path where `ours` and `theirs` differ, with both values.
fn differences(path: &str, ours: &Value, theirs: &Value, out: &mut Vec<String>) {
    match (ours, theirs) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                let (x, y) = (a.get(key).unwrap_or(&Value::Null), b.get(key).unwrap_or(&Value::Null));
                differences(&format!("{path}.{key}"), x, y, out);
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                differences(&format!("{path}[{i}]"), x, y, out);
            }
        }
        (a, b) if a == b => {}
        // 720 and 720.0 (JSONSchemaProps holds bounds as floats) are the same bound.
        (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() => {}
        (a, b) => out.push(format!("{path}: ours {a}, upstream's {b}")),
    }
}

fn upstream(file: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/upstream-olmv1").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

fn ours(name: &str) -> Value {
    let crds = olm_api::crds::all().expect("generate the CRDs");
    let crd = crds.iter().find(|c| c.metadata.name.as_deref() == Some(name)).unwrap_or_else(|| panic!("no CRD {name} is generated"));
    serde_json::to_value(crd).expect("CRD as JSON")
}

fn assert_same(plural: &str) {
    let name = format!("{plural}.olm.operatorframework.io");
    let (ours, theirs) = (essence(&ours(&name)), essence(&upstream(&format!("olm.operatorframework.io_{plural}.yaml"))));
    let mut found = Vec::new();
    differences("", &ours, &theirs, &mut found);
    assert!(found.is_empty(), "{name} differs from upstream's v1.11.0 CRD in {} place(s):\n{}", found.len(), found.join("\n"));
}

#[test]
fn cluster_catalog_crd_is_upstreams() {
    assert_same("clustercatalogs");
}

#[test]
fn cluster_extension_crd_is_upstreams() {
    assert_same("clusterextensions");
}

/// The comparison itself can fail: one changed bound and one dropped rule are both found.
#[test]
fn a_changed_schema_is_reported() {
    let mut theirs = essence(&upstream("olm.operatorframework.io_clusterextensions.yaml"));
    let ours = theirs.clone();
    let namespace = &mut theirs["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["namespace"];
    namespace["maxLength"] = Value::from(64);
    namespace["x-kubernetes-validations"].as_array_mut().expect("rules").pop();
    let mut found = Vec::new();
    differences("", &ours, &theirs, &mut found);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(found[0].contains("namespace.maxLength: ours 63, upstream's 64"), "{found:#?}");
}
