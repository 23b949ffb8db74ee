//! The generated CRDs: committed copies are current, schemas are structural, names and
//! printer columns are upstream's.

use std::path::{Path, PathBuf};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};

const REGENERATE: &str = "cargo run -p olm -- crds --output-dir manifests/crds   (or: OLM_WRITE_CRDS=1 cargo test -p olm-api --test crds)";

fn manifests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../manifests/crds")
}

#[test]
fn committed_manifests_match_the_generated_crds() {
    let dir = manifests_dir();
    if std::env::var_os("OLM_WRITE_CRDS").is_some() {
        olm_api::crds::write_dir(&dir).expect("write manifests/crds");
    }
    let generated = olm_api::crds::render_files().expect("render CRDs");
    let mut problems = Vec::new();
    for (name, yaml) in &generated {
        match std::fs::read_to_string(dir.join(name)) {
            Ok(committed) if committed == *yaml => {}
            Ok(committed) => {
                let line = committed.lines().zip(yaml.lines()).position(|(a, b)| a != b).map_or_else(
                    || committed.lines().count().min(yaml.lines().count()) + 1,
                    |index| index + 1,
                );
                problems.push(format!("manifests/crds/{name} differs from the generated CRD (first at line {line})"));
            }
            Err(err) => problems.push(format!("manifests/crds/{name}: {err}")),
        }
    }
    if let Ok(entries) = std::fs::read_dir(&dir) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".yaml") && !generated.iter().any(|(g, _)| *g == name) {
                problems.push(format!("manifests/crds/{name} is not generated any more; delete it"));
            }
        }
    }
    assert!(problems.is_empty(), "{}\nregenerate with: {REGENERATE}", problems.join("\n"));
}

#[test]
fn the_stream_parses_back_into_the_same_crds() {
    let yaml = olm_api::crds::render_yaml().expect("render");
    assert_eq!(yaml, olm_api::crds::render_yaml().expect("render again"), "deterministic");
    let parsed: Vec<CustomResourceDefinition> = olm_api::yaml::all_from_str(&yaml, "olm crds").expect("parses");
    assert_eq!(parsed, olm_api::crds::all().expect("crds"));
}

/// Kubernetes' structural-schema rules (apiextensions validation), checked on every node.
fn check_structural(schema: &JSONSchemaProps, path: &str, problems: &mut Vec<String>) {
    let preserves = schema.x_kubernetes_preserve_unknown_fields == Some(true);
    let int_or_string = schema.x_kubernetes_int_or_string == Some(true);
    if schema.type_.is_none() && !preserves && !int_or_string {
        problems.push(format!("{path}: no type"));
    }
    if schema.ref_path.is_some() {
        problems.push(format!("{path}: $ref"));
    }
    if int_or_string && schema.type_.is_some() {
        problems.push(format!("{path}: int-or-string with a type"));
    }
    for (name, present) in [
        ("anyOf", schema.any_of.is_some() && !int_or_string),
        ("oneOf", schema.one_of.is_some()),
        ("allOf", schema.all_of.is_some()),
        ("not", schema.not.is_some()),
        ("definitions", schema.definitions.is_some()),
        ("dependencies", schema.dependencies.is_some()),
        ("nullable", schema.nullable.is_some()),
        ("uniqueItems", schema.unique_items.is_some()),
    ] {
        if present {
            problems.push(format!("{path}: {name}"));
        }
    }
    if schema.properties.is_some() && schema.additional_properties.is_some() {
        problems.push(format!("{path}: properties and additionalProperties"));
    }
    if let Some(values) = &schema.enum_
        && values.iter().any(|v| v.0.is_null())
    {
        problems.push(format!("{path}: null in enum"));
    }
    if let Some(format) = &schema.format
        && !["int32", "int64", "float", "double", "byte", "date", "date-time", "password", "int-or-string"].contains(&format.as_str())
    {
        problems.push(format!("{path}: format {format}"));
    }
    if schema.type_.as_deref() == Some("array") && schema.items.is_none() {
        problems.push(format!("{path}: array without items"));
    }
    for (name, property) in schema.properties.iter().flatten() {
        check_structural(property, &format!("{path}.{name}"), problems);
    }
    match &schema.items {
        Some(JSONSchemaPropsOrArray::Schema(item)) => check_structural(item, &format!("{path}[]"), problems),
        Some(JSONSchemaPropsOrArray::Schemas(_)) => problems.push(format!("{path}: tuple items")),
        None => {}
    }
    match &schema.additional_properties {
        Some(JSONSchemaPropsOrBool::Schema(value)) => check_structural(value, &format!("{path}{{}}"), problems),
        Some(JSONSchemaPropsOrBool::Bool(_)) => problems.push(format!("{path}: additionalProperties: bool")),
        None => {}
    }
}

#[test]
fn every_schema_is_structural() {
    let mut problems = Vec::new();
    for crd in olm_api::crds::all().expect("crds") {
        for version in &crd.spec.versions {
            let root = version.schema.as_ref().and_then(|s| s.open_api_v3_schema.as_ref());
            match root {
                Some(root) => check_structural(root, &format!("{}/{}", crd.spec.names.plural, version.name), &mut problems),
                None => problems.push(format!("{}/{}: no schema", crd.spec.names.plural, version.name)),
            }
            assert!(version.subresources.as_ref().and_then(|s| s.status.as_ref()).is_some(), "{}/{} has a status subresource", crd.spec.names.plural, version.name);
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

fn columns(crd: &CustomResourceDefinition) -> Vec<(String, String, String)> {
    crd.spec.versions[0]
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| (c.name.clone(), c.type_.clone(), c.json_path.clone()))
        .collect()
}

fn owned(list: &[(&str, &str, &str)]) -> Vec<(String, String, String)> {
    list.iter().map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string())).collect()
}

#[test]
fn names_scopes_versions_and_columns_are_upstreams() {
    let crds = olm_api::crds::all().expect("crds");
    let find = |name: &str| crds.iter().find(|c| c.metadata.name.as_deref() == Some(name)).unwrap_or_else(|| panic!("{name}"));
    let summary = |crd: &CustomResourceDefinition| {
        let versions: Vec<(String, bool, bool)> = crd.spec.versions.iter().map(|v| (v.name.clone(), v.served, v.storage)).collect();
        (
            crd.spec.group.clone(),
            crd.spec.names.kind.clone(),
            crd.spec.names.short_names.clone().unwrap_or_default(),
            crd.spec.names.categories.clone().unwrap_or_default(),
            crd.spec.scope.clone(),
            versions,
        )
    };
    let expect = |name: &str, kind: &str, short: &[&str], scope: &str, versions: &[(&str, bool, bool)]| {
        let crd = find(name);
        let want = (
            "operators.coreos.com".to_owned(),
            kind.to_owned(),
            short.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            vec!["olm".to_owned()],
            scope.to_owned(),
            versions.iter().map(|(v, served, storage)| (v.to_string(), *served, *storage)).collect::<Vec<_>>(),
        );
        assert_eq!(summary(crd), want, "{name}");
    };
    expect("clusterserviceversions.operators.coreos.com", "ClusterServiceVersion", &["csv", "csvs"], "Namespaced", &[("v1alpha1", true, true)]);
    expect("catalogsources.operators.coreos.com", "CatalogSource", &["catsrc"], "Namespaced", &[("v1alpha1", true, true)]);
    expect("subscriptions.operators.coreos.com", "Subscription", &["sub", "subs"], "Namespaced", &[("v1alpha1", true, true)]);
    expect("installplans.operators.coreos.com", "InstallPlan", &["ip"], "Namespaced", &[("v1alpha1", true, true)]);
    expect("operatorgroups.operators.coreos.com", "OperatorGroup", &["og"], "Namespaced", &[("v1", true, true), ("v1alpha2", true, false)]);
    expect("operatorconditions.operators.coreos.com", "OperatorCondition", &["condition"], "Namespaced", &[("v1", true, false), ("v2", true, true)]);
    expect("operators.operators.coreos.com", "Operator", &[], "Cluster", &[("v1", true, true)]);
    expect("olmconfigs.operators.coreos.com", "OLMConfig", &[], "Cluster", &[("v1", true, true)]);
    // OLM v1's two (their schemas: tests/olmv1_crds.rs).
    assert_eq!(crds.len(), 10);

    assert_eq!(
        columns(find("clusterserviceversions.operators.coreos.com")),
        owned(&[
            ("Display", "string", ".spec.displayName"),
            ("Version", "string", ".spec.version"),
            ("Release", "string", ".spec.release"),
            ("Replaces", "string", ".spec.replaces"),
            ("Phase", "string", ".status.phase"),
        ])
    );
    assert_eq!(
        columns(find("subscriptions.operators.coreos.com")),
        owned(&[("Package", "string", ".spec.name"), ("Source", "string", ".spec.source"), ("Channel", "string", ".spec.channel")])
    );
    assert_eq!(
        columns(find("installplans.operators.coreos.com")),
        owned(&[("CSV", "string", ".spec.clusterServiceVersionNames[0]"), ("Approval", "string", ".spec.approval"), ("Approved", "boolean", ".spec.approved")])
    );
    assert_eq!(
        columns(find("catalogsources.operators.coreos.com")),
        owned(&[
            ("Display", "string", ".spec.displayName"),
            ("Type", "string", ".spec.sourceType"),
            ("Publisher", "string", ".spec.publisher"),
            ("Age", "date", ".metadata.creationTimestamp"),
        ])
    );
    assert!(columns(find("operatorgroups.operators.coreos.com")).is_empty(), "upstream's OperatorGroup has no extra columns");
}

fn property<'a>(schema: &'a JSONSchemaProps, path: &[&str]) -> &'a JSONSchemaProps {
    let mut node = schema;
    for segment in path {
        node = if *segment == "[]" {
            match &node.items {
                Some(JSONSchemaPropsOrArray::Schema(item)) => item,
                _ => panic!("no items at {segment}"),
            }
        } else {
            node.properties.as_ref().and_then(|p| p.get(*segment)).unwrap_or_else(|| panic!("no property {segment} in {path:?}"))
        };
    }
    node
}

fn root(crds: &[CustomResourceDefinition], name: &str, version: &str) -> JSONSchemaProps {
    let crd = crds.iter().find(|c| c.metadata.name.as_deref() == Some(name)).expect("crd");
    let v = crd.spec.versions.iter().find(|v| v.name == version).expect("version");
    v.schema.as_ref().and_then(|s| s.open_api_v3_schema.clone()).expect("schema")
}

#[test]
fn schema_details_that_users_feel() {
    let crds = olm_api::crds::all().expect("crds");
    let csv = root(&crds, "clusterserviceversions.operators.coreos.com", "v1alpha1");
    assert_eq!(csv.required, Some(vec!["metadata".to_owned(), "spec".to_owned()]));
    let deployment = property(&csv, &["spec", "install", "spec", "deployments", "[]", "spec"]);
    assert_eq!(deployment.x_kubernetes_preserve_unknown_fields, Some(true), "pod templates are not re-validated by the CSV CRD");
    let modes = property(&csv, &["spec", "installModes", "[]", "type"]);
    let accepted: Vec<String> = modes.enum_.iter().flatten().map(|v| v.0.as_str().unwrap_or_default().to_owned()).collect();
    assert_eq!(accepted, ["OwnNamespace", "SingleNamespace", "MultiNamespace", "AllNamespaces"]);
    let port = property(&csv, &["spec", "webhookdefinitions", "[]", "containerPort"]);
    assert_eq!(port.default.as_ref().map(|d| d.0.clone()), Some(serde_json::json!(443)));
    let value = property(&csv, &["spec", "customresourcedefinitions", "owned", "[]", "specDescriptors", "[]", "value"]);
    assert_eq!(value.x_kubernetes_preserve_unknown_fields, Some(true));
    assert!(property(&csv, &["status", "phase"]).enum_.is_none(), "status enums stay open");

    let og = root(&crds, "operatorgroups.operators.coreos.com", "v1");
    assert_eq!(og.required, Some(vec!["metadata".to_owned()]), "spec is optional");
    assert_eq!(property(&og, &["spec"]).default.as_ref().map(|d| d.0.clone()), Some(serde_json::json!({"upgradeStrategy": "Default"})));
    let olm_config = root(&crds, "olmconfigs.operators.coreos.com", "v1");
    assert_eq!(olm_config.required, Some(vec!["metadata".to_owned()]), "OLM's own chart ships an OLMConfig without spec");
    let interval = property(&olm_config, &["spec", "features", "packageServerSyncInterval"]);
    assert_eq!(interval.pattern.as_deref(), Some(r"^([0-9]+(\.[0-9]+)?(s|m|h))+$"));
    let condition = root(&crds, "operatorconditions.operators.coreos.com", "v2");
    let override_required = property(&condition, &["spec", "overrides", "[]"]).required.clone().unwrap_or_default();
    assert!(!override_required.contains(&"lastTransitionTime".to_owned()), "{override_required:?}");
}

#[test]
fn the_csv_crd_is_small() {
    let files = olm_api::crds::render_files().expect("render");
    let (_, csv) = files.iter().find(|(name, _)| name == "clusterserviceversions.operators.coreos.com.yaml").expect("csv crd");
    // Upstream's is 814 KB, mostly the embedded DeploymentSpec schema.
    assert!(csv.len() < 150_000, "CSV CRD is {} bytes", csv.len());
}
