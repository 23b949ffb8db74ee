//! What real bundles carry and upstream installs anyway, made installable (pure): a CSV
//! recognised by its kind whatever its `apiVersion` says, explicit `null`s in a CSV read as
//! absent (upstream decodes the CSV into typed structs; the CSV CRD's schema refuses `null`),
//! manifests without `apiVersion` of kinds whose API is known, and `apiextensions.k8s.io/v1beta1`
//! CRDs, which Kubernetes ≥ 1.22 no longer serves, converted to `v1` as the API server's own
//! conversion does (and every CRD decoded as the typed v1 CRD, dropping fields v1 does not
//! have, as upstream's typed decode does), and the kinds upstream takes by kind alone (RBAC, ServiceAccount, Service,
//! ConfigMap, Secret) created as those kinds whatever their `apiVersion`.

use serde_json::{Map, Value, json};

/// The CSV API.
pub const CSV_API_VERSION: &str = "operators.coreos.com/v1alpha1";

/// The `apiVersion` of well-known kinds, for manifests that omit it.
fn known_api_version(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "Service" | "ConfigMap" | "Secret" | "ServiceAccount" | "PersistentVolumeClaim" => "v1",
        "Role" | "RoleBinding" | "ClusterRole" | "ClusterRoleBinding" => "rbac.authorization.k8s.io/v1",
        "CustomResourceDefinition" => "apiextensions.k8s.io/v1",
        "PrometheusRule" | "ServiceMonitor" | "PodMonitor" => "monitoring.coreos.com/v1",
        "PodDisruptionBudget" => "policy/v1",
        "PriorityClass" => "scheduling.k8s.io/v1",
        "NetworkPolicy" => "networking.k8s.io/v1",
        "VerticalPodAutoscaler" => "autoscaling.k8s.io/v1",
        _ => return None,
    })
}

/// The CSV as the API server takes it: its `apiVersion` the CSV API's, `null`s dropped, and
/// no top-level field a Kubernetes object does not have (ndb-operator ships a stray
/// `ddapiVersion`, which upstream's typed decode drops and a server-side apply refuses).
pub fn normalize_csv(mut csv: Value) -> Value {
    drop_nulls(&mut csv);
    if let Some(map) = csv.as_object_mut() {
        map.retain(|field, _| matches!(field.as_str(), "apiVersion" | "kind" | "metadata" | "spec" | "status"));
        map.insert("apiVersion".into(), json!(CSV_API_VERSION));
    }
    csv
}

/// Object `index` (1-based) of `bundle` as the API server takes it, or why it cannot be.
pub fn normalize_object(mut object: Value, bundle: &str, index: usize) -> Result<Value, String> {
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or_default().to_owned();
    let api_version = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default().to_owned();
    if api_version.trim().is_empty() {
        let Some(known) = known_api_version(&kind) else {
            return Err(format!(
                "object {index} ({}) of bundle {bundle} has no apiVersion: add it to the manifest (for example `apiVersion: v1` for core kinds)",
                if kind.is_empty() { "no kind" } else { kind.as_str() }
            ));
        };
        object["apiVersion"] = json!(known);
    }
    if kind == "CustomResourceDefinition" && api_version == "apiextensions.k8s.io/v1beta1" {
        object = crd_v1beta1_to_v1(object);
    }
    if kind == "CustomResourceDefinition" {
        object = crd_as_typed(object);
    }
    if let Some((_, typed_api_version, fields)) = KIND_ONLY.iter().find(|(k, ..)| *k == kind)
        && !api_version.trim().is_empty()
        && api_version != *typed_api_version
    {
        object = as_typed(object, typed_api_version, fields);
    }
    Ok(object)
}

/// Kinds that upstream's InstallPlan executor takes by their kind alone, whatever the
/// manifest's `apiVersion` says: it decodes the manifest into the Kubernetes type and creates
/// that. With each, the API it is created in and the fields that type has besides metadata.
/// Real bundles rely on it: ack-iam-controller ships an example `Role` of
/// `iam.services.k8s.aws` (an RBAC Role with no rules upstream), old bundles RBAC of
/// `rbac.authorization.k8s.io/v1beta1`, which Kubernetes ≥ 1.22 no longer serves.
const KIND_ONLY: &[(&str, &str, &[&str])] = &[
    ("Role", "rbac.authorization.k8s.io/v1", &["rules"]),
    ("RoleBinding", "rbac.authorization.k8s.io/v1", &["subjects", "roleRef"]),
    ("ClusterRole", "rbac.authorization.k8s.io/v1", &["rules", "aggregationRule"]),
    ("ClusterRoleBinding", "rbac.authorization.k8s.io/v1", &["subjects", "roleRef"]),
    ("ServiceAccount", "v1", &["secrets", "imagePullSecrets", "automountServiceAccountToken"]),
    ("Service", "v1", &["spec"]),
    ("ConfigMap", "v1", &["data", "binaryData", "immutable"]),
    ("Secret", "v1", &["data", "stringData", "type", "immutable"]),
];

/// Whether OLM creates an object of `kind` in that kind's own API whatever its manifest's
/// `apiVersion` says: the CSV ([`normalize_csv`]), CRDs (`v1beta1` converted) and the kinds
/// upstream takes by kind alone.
pub fn created_by_kind(kind: &str) -> bool {
    kind == "ClusterServiceVersion" || kind == "CustomResourceDefinition" || KIND_ONLY.iter().any(|(k, ..)| *k == kind)
}

/// `object` as upstream's typed decoding leaves it: in `api_version`, with its metadata and
/// `fields` and nothing else.
fn as_typed(object: Value, api_version: &str, fields: &[&str]) -> Value {
    let Value::Object(map) = object else { return object };
    let mut typed: Map<String, Value> = map
        .into_iter()
        .filter(|(key, _)| key == "kind" || key == "metadata" || fields.contains(&key.as_str()))
        .collect();
    typed.insert("apiVersion".into(), json!(api_version));
    Value::Object(typed)
}

/// Remove every `null` member of every map (nulls inside arrays stay: they are values).
fn drop_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(drop_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

/// A v1 CRD as upstream creates it: decoded into the typed CRD, so fields v1 does not have
/// (neuvector-operator's v1 CRDs still carry v1beta1's `spec.subresources`) are dropped
/// instead of failing the apply; a manifest that does not decode is left for the API server
/// to refuse, naming what is wrong.
fn crd_as_typed(crd: Value) -> Value {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    match serde_json::from_value::<CustomResourceDefinition>(crd.clone()).and_then(serde_json::to_value) {
        Ok(typed) => typed,
        Err(_) => crd,
    }
}

/// A v1beta1 CRD in v1: per-version schema, subresources and printer columns (falling back to
/// the top-level ones), `JSONPath` → `jsonPath`, the webhook conversion moved under `webhook`,
/// and v1beta1's default of keeping unknown fields kept explicitly, since v1 prunes them.
fn crd_v1beta1_to_v1(mut crd: Value) -> Value {
    crd["apiVersion"] = json!("apiextensions.k8s.io/v1");
    let Some(spec) = crd.get_mut("spec").and_then(Value::as_object_mut) else {
        return crd;
    };
    let take = |spec: &mut Map<String, Value>, key: &str| spec.remove(key).filter(|v| !v.is_null());
    let top_schema = take(spec, "validation").and_then(|v| v.get("openAPIV3Schema").cloned());
    let top_subresources = take(spec, "subresources");
    let top_columns = take(spec, "additionalPrinterColumns");
    let preserve = take(spec, "preserveUnknownFields").and_then(|v| v.as_bool()).unwrap_or(true);
    let single = take(spec, "version");
    let mut versions = take(spec, "versions").and_then(|v| v.as_array().cloned()).unwrap_or_default();
    if versions.is_empty()
        && let Some(name) = single
    {
        versions.push(json!({"name": name, "served": true, "storage": true}));
    }
    for version in &mut versions {
        let Some(v) = version.as_object_mut() else { continue };
        let mut schema = v
            .remove("schema")
            .and_then(|s| s.get("openAPIV3Schema").cloned())
            .or_else(|| top_schema.clone())
            .unwrap_or_else(|| json!({"type": "object"}));
        if preserve && let Some(root) = schema.as_object_mut() {
            root.insert("x-kubernetes-preserve-unknown-fields".into(), json!(true));
            root.entry("type").or_insert(json!("object"));
        }
        only_name_rules_in_metadata(&mut schema);
        v.insert("schema".into(), json!({"openAPIV3Schema": schema}));
        if !v.contains_key("subresources")
            && let Some(sub) = &top_subresources
        {
            v.insert("subresources".into(), sub.clone());
        }
        let columns = v.remove("additionalPrinterColumns").or_else(|| top_columns.clone());
        if let Some(Value::Array(columns)) = columns {
            let columns: Vec<Value> = columns
                .into_iter()
                .map(|mut c| {
                    if let Some(c) = c.as_object_mut()
                        && let Some(path) = c.remove("JSONPath")
                    {
                        c.insert("jsonPath".into(), path);
                    }
                    c
                })
                .collect();
            v.insert("additionalPrinterColumns".into(), Value::Array(columns));
        }
    }
    spec.insert("versions".into(), Value::Array(versions));
    if let Some(conversion) = spec.get_mut("conversion").and_then(Value::as_object_mut) {
        let client = conversion.remove("webhookClientConfig");
        let review = conversion.remove("conversionReviewVersions");
        if conversion.get("strategy").and_then(Value::as_str) == Some("Webhook") {
            conversion.insert(
                "webhook".into(),
                json!({"clientConfig": client.unwrap_or(Value::Null), "conversionReviewVersions": review.unwrap_or_else(|| json!(["v1beta1"]))}),
            );
        }
    }
    crd
}

/// v1 refuses a schema of `metadata` with anything but `type: object` and rules for `name` and
/// `generateName` ("must not specify anything other than name and generateName"); v1beta1 CRDs
/// made by kubebuilder 1 describe it (`description: Standard object metadata.`, as
/// lib-bucket-provisioner 1.0.0's do). The API server never checked an object's metadata
/// against the rest, so dropping it loses nothing.
fn only_name_rules_in_metadata(schema: &mut Value) {
    let Some(metadata) = schema.pointer_mut("/properties/metadata").and_then(Value::as_object_mut) else { return };
    let names = metadata.get("properties").and_then(Value::as_object).map(|properties| {
        properties.iter().filter(|(key, _)| *key == "name" || *key == "generateName").map(|(k, v)| (k.clone(), v.clone())).collect::<Map<_, _>>()
    });
    metadata.clear();
    metadata.insert("type".into(), json!("object"));
    if let Some(names) = names.filter(|n| !n.is_empty()) {
        metadata.insert("properties".into(), Value::Object(names));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_csv_is_a_csv_whatever_its_api_version_and_nulls_are_absent() {
        let csv = normalize_csv(json!({
            "apiVersion": "operators.coreos.com/v1alpha", "kind": "ClusterServiceVersion",
            "metadata": {"name": "x.v1", "annotations": null},
            "spec": {"replaces": null, "icon": [{"base64data": "", "mediatype": null}], "keywords": [null]},
        }));
        assert_eq!(csv["apiVersion"], json!(CSV_API_VERSION));
        assert_eq!(csv["metadata"], json!({"name": "x.v1"}));
        assert_eq!(csv["spec"], json!({"icon": [{"base64data": ""}], "keywords": [null]}));
    }

    #[test]
    fn a_csv_keeps_only_the_fields_of_a_kubernetes_object() {
        // ndb-operator 1.10.0's CSV, as published.
        let csv = normalize_csv(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "ddapiVersion": "operators.coreos.com/v1alpha1",
            "kind": "ClusterServiceVersion", "metadata": {"name": "ndb-operator.v1.10.0"}, "spec": {"version": "1.10.0"},
        }));
        assert_eq!(csv, json!({
            "apiVersion": CSV_API_VERSION, "kind": "ClusterServiceVersion",
            "metadata": {"name": "ndb-operator.v1.10.0"}, "spec": {"version": "1.10.0"},
        }));
    }

    #[test]
    fn known_kinds_without_api_version_get_theirs_and_others_are_named() {
        let service = normalize_object(json!({"kind": "Service", "metadata": {"name": "m"}}), "b.v1", 3).unwrap();
        assert_eq!(service["apiVersion"], json!("v1"));
        let err = normalize_object(json!({"kind": "Widget", "metadata": {"name": "w"}}), "b.v1", 4).unwrap_err();
        assert!(err.contains("object 4 (Widget) of bundle b.v1 has no apiVersion"), "{err}");
    }

    #[test]
    fn kinds_upstream_takes_by_kind_alone_are_created_as_that_kind() {
        // ack-iam-controller 1.8.1's example_iam.services.k8s.aws_v1alpha1_role.yaml.
        let role = json!({"apiVersion": "iam.services.k8s.aws/v1alpha1", "kind": "Role", "metadata": {"name": "example"}, "spec": {}});
        let role = normalize_object(role, "ack-iam-controller.v1.8.1", 5).unwrap();
        assert_eq!(role, json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "example"}}));
        let binding = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1beta1", "kind": "ClusterRoleBinding", "metadata": {"name": "b"},
            "roleRef": {"kind": "ClusterRole", "name": "r"}, "subjects": [{"kind": "ServiceAccount", "name": "s"}],
        });
        let expected = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "b"},
            "roleRef": {"kind": "ClusterRole", "name": "r"}, "subjects": [{"kind": "ServiceAccount", "name": "s"}],
        });
        assert_eq!(normalize_object(binding, "b.v1", 1).unwrap(), expected);
        // In their own API nothing changes, unknown fields included (the server judges them).
        let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "m"}, "spec": {}, "extra": 1});
        assert_eq!(normalize_object(service.clone(), "b.v1", 2).unwrap(), service);
    }

    #[test]
    fn a_v1beta1_crd_becomes_v1() {
        // etcd's 0.6.1 bundle ships its CRD like this.
        let crd = normalize_object(
            json!({
                "apiVersion": "apiextensions.k8s.io/v1beta1", "kind": "CustomResourceDefinition",
                "metadata": {"name": "etcdclusters.etcd.database.coreos.com"},
                "spec": {
                    "group": "etcd.database.coreos.com", "version": "v1beta2", "scope": "Namespaced",
                    "names": {"plural": "etcdclusters", "kind": "EtcdCluster"},
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [{"name": "Size", "type": "integer", "JSONPath": ".spec.size"}],
                    "conversion": {"strategy": "None"},
                },
            }),
            "etcdoperator.v0.6.1",
            1,
        )
        .unwrap();
        assert_eq!(crd["apiVersion"], json!("apiextensions.k8s.io/v1"));
        let spec = &crd["spec"];
        assert!(spec.get("version").is_none() && spec.get("subresources").is_none());
        assert_eq!(
            spec["versions"],
            json!([{
                "name": "v1beta2", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                "subresources": {"status": {}},
                "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}],
            }])
        );
        assert_eq!(spec["conversion"], json!({"strategy": "None"}));
    }

    #[test]
    fn a_v1beta1_crds_description_of_metadata_is_dropped() {
        // lib-bucket-provisioner 1.0.0 (kubebuilder 1): v1 refuses a described metadata.
        let crd = normalize_object(
            json!({
                "apiVersion": "apiextensions.k8s.io/v1beta1", "kind": "CustomResourceDefinition",
                "metadata": {"name": "objectbucketclaims.objectbucket.io"},
                "spec": {
                    "group": "objectbucket.io", "version": "v1alpha1", "scope": "Namespaced",
                    "names": {"plural": "objectbucketclaims", "kind": "ObjectBucketClaim"},
                    "validation": {"openAPIV3Schema": {"properties": {
                        "metadata": {"description": "Standard object metadata.", "type": "object",
                            "properties": {"name": {"type": "string", "maxLength": 63}, "labels": {"type": "object"}}},
                        "spec": {"type": "object"},
                    }}},
                },
            }),
            "lib-bucket-provisioner.v1.0.0",
            1,
        )
        .unwrap();
        let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
        assert_eq!(schema["properties"]["metadata"], json!({"type": "object", "properties": {"name": {"type": "string", "maxLength": 63}}}));
        assert_eq!(schema["properties"]["spec"], json!({"type": "object"}));
    }

    #[test]
    fn a_v1_crd_keeps_what_v1_has_and_drops_what_it_does_not() {
        // neuvector-operator's v1 CRD still carries v1beta1's spec.subresources.
        let crd = normalize_object(
            json!({
                "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": "neuvectors.apm.neuvector.com", "creationTimestamp": null},
                "spec": {
                    "group": "apm.neuvector.com", "scope": "Namespaced",
                    "names": {"plural": "neuvectors", "kind": "Neuvector"},
                    "subresources": {"status": {}},
                    "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                        "subresources": {"status": {}}}],
                },
            }),
            "neuvector-operator.v1.3.0",
            1,
        )
        .unwrap();
        assert!(crd["spec"].get("subresources").is_none(), "{crd}");
        assert_eq!(crd["spec"]["versions"][0]["subresources"], json!({"status": {}}));
        assert_eq!(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["x-kubernetes-preserve-unknown-fields"], json!(true));
        assert_eq!(crd["metadata"]["name"], json!("neuvectors.apm.neuvector.com"));
    }
}
