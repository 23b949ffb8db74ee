//! Turning a bundle into InstallPlan steps (pure): the CSV (with the
//! `operatorframework.io/properties` annotation), its CRDs and other manifests, and the
//! ServiceAccounts and RBAC generated from the CSV's permissions, named as upstream does.

use std::sync::LazyLock;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;
use olm_api::keys;
use olm_api::v1alpha1::install_plan::{Step, StepResource, StepStatus};
use serde_json::{Value, json};
use olm_install::names::generated_name;

use olm_catalog_client::BundleContent;

/// Where a bundle comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepSource {
    /// CatalogSource name.
    pub catalog: String,
    /// CatalogSource namespace.
    pub catalog_namespace: String,
    /// The label making every object of the bundle a component of its Operator
    /// (`operators.coreos.com/<package>.<namespace>`, see `olm_api::keys::operator_component_label`).
    pub component_label: Option<String>,
}

/// How a kind is served: plural resource name and whether it is namespaced.
pub fn resource_of(group: &str, kind: &str) -> Option<(&'static str, bool)> {
    Some(match (group, kind) {
        ("apiextensions.k8s.io", "CustomResourceDefinition") => ("customresourcedefinitions", false),
        ("operators.coreos.com", "ClusterServiceVersion") => ("clusterserviceversions", true),
        ("operators.coreos.com", "Subscription") => ("subscriptions", true),
        ("", "ServiceAccount") => ("serviceaccounts", true),
        ("", "Service") => ("services", true),
        ("", "ConfigMap") => ("configmaps", true),
        ("", "Secret") => ("secrets", true),
        ("rbac.authorization.k8s.io", "Role") => ("roles", true),
        ("rbac.authorization.k8s.io", "RoleBinding") => ("rolebindings", true),
        ("rbac.authorization.k8s.io", "ClusterRole") => ("clusterroles", false),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => ("clusterrolebindings", false),
        ("monitoring.coreos.com", "PrometheusRule") => ("prometheusrules", true),
        ("monitoring.coreos.com", "ServiceMonitor") => ("servicemonitors", true),
        ("policy", "PodDisruptionBudget") => ("poddisruptionbudgets", true),
        ("scheduling.k8s.io", "PriorityClass") => ("priorityclasses", false),
        ("autoscaling.k8s.io", "VerticalPodAutoscaler") => ("verticalpodautoscalers", true),
        ("console.openshift.io", "ConsoleYAMLSample") => ("consoleyamlsamples", false),
        ("console.openshift.io", "ConsoleQuickStart") => ("consolequickstarts", false),
        ("console.openshift.io", "ConsoleCLIDownload") => ("consoleclidownloads", false),
        ("console.openshift.io", "ConsoleLink") => ("consolelinks", false),
        ("console.openshift.io", "ConsolePlugin") => ("consoleplugins", false),
        ("networking.k8s.io", "NetworkPolicy") => ("networkpolicies", true),
        _ => return None,
    })
}

fn split_api_version(api_version: &str) -> (String, String) {
    match api_version.split_once('/') {
        Some((group, version)) => (group.to_owned(), version.to_owned()),
        None => (String::new(), api_version.to_owned()),
    }
}

fn step(resolving: &str, source: &StepSource, object: &Value) -> Step {
    let mut labelled;
    // A CRD is shared by every install of its operator: the plan applies it with the labels it
    // already carries (see `installplan::alongside`), so every install's label stays.
    let object = match &source.component_label {
        Some(label) if object.get("metadata").is_some_and(Value::is_object) => {
            labelled = object.clone();
            if let Some(metadata) = labelled.get_mut("metadata").and_then(Value::as_object_mut) {
                let labels = metadata.entry("labels").or_insert_with(|| json!({}));
                if !labels.is_object() {
                    *labels = json!({});
                }
                if let Some(labels) = labels.as_object_mut() {
                    labels.insert(label.clone(), json!(""));
                }
            }
            &labelled
        }
        _ => object,
    };
    let api_version = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or_default().to_owned();
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let (group, version) = split_api_version(api_version);
    let status = if resource_of(&group, &kind).is_some() {
        StepStatus::Unknown
    } else {
        StepStatus::UnsupportedResource
    };
    Step {
        resolving: resolving.to_owned(),
        resource: StepResource {
            source_name: source.catalog.clone(),
            source_namespace: source.catalog_namespace.clone(),
            group,
            version,
            kind,
            name,
            manifest: Some(object.to_string()),
        },
        optional: None,
        status,
    }
}

fn owner_labels(csv_name: &str, namespace: &str) -> Value {
    json!(crate::metadata::owner_labels_of(csv_name, namespace, "ClusterServiceVersion"))
}

/// The schema the API server validates CSVs against: the CSV CRD this OLM installs.
fn csv_schema() -> Option<&'static JSONSchemaProps> {
    static SCHEMA: LazyLock<Option<JSONSchemaProps>> = LazyLock::new(|| {
        let crds = olm_api::crds::all().ok()?;
        let csv = crds.into_iter().find(|crd| crd.spec.names.kind == "ClusterServiceVersion")?;
        csv.spec.versions.into_iter().find(|v| v.name == "v1alpha1")?.schema?.open_api_v3_schema
    });
    SCHEMA.as_ref()
}

/// The steps of one bundle, installed into `namespace`: the CSV first, then CRDs, then the
/// other manifests and the generated ServiceAccounts and RBAC (upstream's order).
///
/// `replaces` is the CSV this bundle replaces as resolution found it (for an upgrade, the
/// installed CSV). As upstream does, it becomes the CSV's `spec.replaces`: a bundle reached
/// by `skips`, a skipRange or a semver-mode channel names, in its own manifest, some other
/// CSV or none, and the CSV controller takes over from the installed CSV only when the new
/// one names it.
pub fn bundle_steps(
    bundle: &BundleContent,
    source: &StepSource,
    namespace: &str,
    replaces: Option<&str>,
) -> Result<Vec<Step>, String> {
    let csv: Value = serde_json::from_str(&bundle.csv_json)
        .map_err(|err| format!("the ClusterServiceVersion of bundle {} is not valid JSON: {err}", bundle.name))?;
    let mut csv = olm_install::bundle_objects::normalize_csv(csv);
    if let Some(schema) = csv_schema() {
        olm_install::typed_decode::decode_as_typed(&mut csv, schema);
    }
    let csv_name = csv
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or(&bundle.name)
        .to_owned();
    {
        let Some(metadata) = csv.get_mut("metadata").and_then(Value::as_object_mut) else {
            return Err(format!("the ClusterServiceVersion of bundle {} has no metadata", bundle.name));
        };
        metadata.insert("namespace".into(), json!(namespace));
        for key in ["resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"] {
            metadata.remove(key);
        }
        let annotations = metadata.entry("annotations").or_insert_with(|| json!({}));
        if let Some(map) = annotations.as_object_mut() {
            map.insert(keys::PROPERTIES_ANNOTATION.into(), json!(bundle.properties_annotation));
        }
    }
    if let Some(map) = csv.as_object_mut() {
        map.remove("status");
    }
    if let Some(replaces) = replaces.filter(|r| !r.is_empty()) {
        match csv.get_mut("spec").and_then(Value::as_object_mut) {
            Some(spec) => {
                spec.insert("replaces".into(), json!(replaces));
            }
            None => return Err(format!("the ClusterServiceVersion of bundle {} has no spec", bundle.name)),
        }
    }
    let mut csv_steps = vec![step(&csv_name, source, &csv)];
    let mut crd_steps = Vec::new();
    let mut other_steps = Vec::new();
    for (i, text) in bundle.objects.iter().enumerate() {
        let object: Value =
            serde_json::from_str(text).map_err(|err| format!("object {} of bundle {} is not valid JSON: {err}", i + 1, bundle.name))?;
        let kind = object.get("kind").and_then(Value::as_str).unwrap_or_default().to_owned();
        if kind == "ClusterServiceVersion" {
            continue;
        }
        let mut object = olm_install::bundle_objects::normalize_object(object, &bundle.name, i + 1)?;
        if object.pointer("/metadata/name").and_then(Value::as_str).is_none_or(str::is_empty) {
            return Err(format!("object {} ({kind}) of bundle {} has no metadata.name", i + 1, bundle.name));
        }
        if let Some(map) = object.as_object_mut() {
            map.remove("status");
        }
        let s = step(&csv_name, source, &object);
        if kind == "CustomResourceDefinition" {
            crd_steps.push(s);
        } else {
            other_steps.push(s);
        }
    }
    // ServiceAccounts and RBAC from the install strategy.
    let strategy = csv.pointer("/spec/install/spec").cloned().unwrap_or(Value::Null);
    let mut service_accounts: Vec<String> = Vec::new();
    let mut rbac_steps = Vec::new();
    for (cluster, list) in [(false, "permissions"), (true, "clusterPermissions")] {
        for permission in strategy.get(list).and_then(Value::as_array).into_iter().flatten() {
            let sa = permission.get("serviceAccountName").and_then(Value::as_str).unwrap_or_default();
            if sa.is_empty() {
                return Err(format!(
                    "spec.install.spec.{list} of {csv_name} has an entry without serviceAccountName"
                ));
            }
            if sa != "default" && !service_accounts.iter().any(|s| s == sa) {
                service_accounts.push(sa.to_owned());
            }
            let rules = permission.get("rules").cloned().unwrap_or_else(|| json!([]));
            let labels = owner_labels(&csv_name, namespace);
            if cluster {
                let name = generated_name(&csv_name, &json!([csv_name, namespace, permission]));
                rbac_steps.push(step(
                    &csv_name,
                    source,
                    &json!({
                        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                        "metadata": {"name": name, "labels": labels}, "rules": rules,
                    }),
                ));
                rbac_steps.push(step(
                    &csv_name,
                    source,
                    &json!({
                        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                        "metadata": {"name": name, "labels": labels},
                        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                        "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": namespace}],
                    }),
                ));
            } else {
                let name = generated_name(&format!("{csv_name}-{sa}"), &json!([csv_name, permission]));
                rbac_steps.push(step(
                    &csv_name,
                    source,
                    &json!({
                        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                        "metadata": {"name": name, "namespace": namespace, "labels": labels}, "rules": rules,
                    }),
                ));
                rbac_steps.push(step(
                    &csv_name,
                    source,
                    &json!({
                        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                        "metadata": {"name": name, "namespace": namespace, "labels": labels},
                        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                        "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": namespace}],
                    }),
                ));
            }
        }
    }
    let sa_steps = service_accounts.iter().map(|sa| {
        step(
            &csv_name,
            source,
            &json!({
                "apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": sa, "namespace": namespace, "labels": owner_labels(&csv_name, namespace)},
            }),
        )
    });
    csv_steps.extend(crd_steps);
    csv_steps.extend(sa_steps);
    csv_steps.extend(rbac_steps);
    csv_steps.extend(other_steps);
    Ok(csv_steps)
}

/// The rounds steps are applied in. CRDs and the CSV first, together: the CSV does not need
/// its CRDs to exist (its requirement check waits for them) and the CSV controller can start
/// while the API server establishes them; `execute` checks CRD upgrades for safety before any
/// of the round is written. Then ServiceAccounts and roles (the namespaced ones are owned by
/// the CSV, by uid) with their bindings, then everything else. When the plan is installed with
/// a group's ServiceAccount (`scoped`), bindings wait for their roles: without the `bind` verb
/// (OLM's own account has it), binding a role that does not exist yet is refused as an
/// escalation; and the CSV goes before the CRDs, as upstream orders steps, so that an account
/// that may not install the operator is refused before OLM writes a CRD for it.
pub fn execution_rank(step: &Step, scoped: bool) -> u8 {
    match (step.resource.kind.as_str(), scoped) {
        ("ClusterServiceVersion", _) | ("CustomResourceDefinition", false) => 0,
        ("CustomResourceDefinition", true) => 1,
        ("ServiceAccount" | "Role" | "ClusterRole", _) | ("RoleBinding" | "ClusterRoleBinding", false) => 2,
        ("RoleBinding" | "ClusterRoleBinding", true) => 3,
        _ => 4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle() -> BundleContent {
        let csv = json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": "etcdoperator.v0.9.4", "namespace": "placeholder"},
            "spec": {"version": "0.9.4", "install": {"strategy": "deployment", "spec": {
                "deployments": [],
                "permissions": [{"serviceAccountName": "etcd-operator", "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["*"]}]}],
                "clusterPermissions": [{"serviceAccountName": "etcd-operator", "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]}],
            }}},
        });
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "etcdclusters.etcd.database.coreos.com"}});
        let odd = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "sneaky"}});
        BundleContent {
            name: "etcdoperator.v0.9.4".into(),
            package: "etcd".into(),
            bundle_path: "quay.io/operatorhubio/etcd:v0.9.4".into(),
            csv_json: csv.to_string(),
            objects: vec![csv.to_string(), crd.to_string(), odd.to_string()],
            properties_annotation: r#"{"properties":[{"type":"olm.package","value":{"packageName":"etcd","version":"0.9.4"}}]}"#.into(),
        }
    }

    #[test]
    fn the_csv_step_is_the_csv_as_the_csv_crds_schema_decodes_it() {
        // project-quay 3.18.0's owned CRD: resources without `version`, one spelt `Kind:`.
        let mut content = bundle();
        let mut csv: Value = serde_json::from_str(&content.csv_json).expect("json");
        csv["spec"]["customresourcedefinitions"] = json!({"owned": [{"name": "quayregistries.quay.redhat.com", "version": "v1",
            "kind": "QuayRegistry", "resources": [{"kind": "Deployment"}, {"Kind": "Job"}]}]});
        content.csv_json = csv.to_string();
        let source = StepSource { catalog: "c".into(), catalog_namespace: "olm".into(), component_label: None };
        let steps = bundle_steps(&content, &source, "team-a", None).expect("steps");
        let written: Value = serde_json::from_str(steps[0].resource.manifest.as_deref().unwrap_or_default()).expect("json");
        assert_eq!(
            written.pointer("/spec/customresourcedefinitions/owned/0/resources"),
            Some(&json!([{"kind": "Deployment", "version": ""}, {"kind": "Job", "version": ""}]))
        );
    }

    #[test]
    fn a_bundle_becomes_csv_crd_rbac_and_object_steps() {
        let source = StepSource {
            catalog: "community".into(),
            catalog_namespace: "olm".into(),
            component_label: Some("operators.coreos.com/etcd.team-a".into()),
        };
        let steps = bundle_steps(&bundle(), &source, "team-a", None).expect("steps");
        for step in &steps {
            let object: Value = serde_json::from_str(step.resource.manifest.as_deref().unwrap_or_default()).expect("json");
            assert_eq!(
                object.pointer("/metadata/labels/operators.coreos.com~1etcd.team-a"),
                Some(&json!("")),
                "{} {} is a component of the Operator etcd.team-a",
                step.resource.kind,
                step.resource.name
            );
        }
        let kinds: Vec<_> = steps.iter().map(|s| s.resource.kind.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "ClusterServiceVersion",
                "CustomResourceDefinition",
                "ServiceAccount",
                "Role",
                "RoleBinding",
                "ClusterRole",
                "ClusterRoleBinding",
                "Deployment"
            ]
        );
        let csv: Value = serde_json::from_str(steps[0].resource.manifest.as_deref().unwrap_or_default()).expect("json");
        assert_eq!(csv.pointer("/metadata/namespace"), Some(&json!("team-a")));
        let props = csv
            .pointer("/metadata/annotations/operatorframework.io~1properties")
            .and_then(Value::as_str)
            .unwrap_or_default();
        assert!(props.contains("olm.package"), "{props}");
        assert_eq!(steps[0].resource.group, "operators.coreos.com");
        assert_eq!(steps[0].resource.source_name, "community");
        let role = &steps[3];
        assert!(
            role.resource.name.starts_with("etcdoperator.v0.9.4-etcd-operator-"),
            "{}",
            role.resource.name
        );
        assert!(role.resource.name.len() <= 63);
        assert_eq!(steps[4].resource.name, role.resource.name, "binding named like its role");
        assert!(steps[5].resource.name.starts_with("etcdoperator.v0.9.4-"));
        assert_eq!(
            steps[7].status,
            StepStatus::UnsupportedResource,
            "a Deployment in a bundle is not installable"
        );
        assert!(steps[..7].iter().all(|s| s.status == StepStatus::Unknown));
    }

    #[test]
    fn a_broken_csv_is_reported_with_the_bundle_name() {
        let mut b = bundle();
        b.csv_json = "{not json".into();
        let source = StepSource {
            catalog: "c".into(),
            catalog_namespace: "n".into(),
            component_label: None,
        };
        let err = bundle_steps(&b, &source, "ns", None).unwrap_err();
        assert!(err.contains("etcdoperator.v0.9.4"), "{err}");
    }

    #[test]
    fn the_csv_names_what_it_replaces_as_resolution_found_it() {
        let source = StepSource {
            catalog: "community".into(),
            catalog_namespace: "olm".into(),
            component_label: None,
        };
        let replaces_of = |steps: &[Step]| -> Option<String> {
            let csv: Value = serde_json::from_str(steps[0].resource.manifest.as_deref()?).ok()?;
            csv.pointer("/spec/replaces").and_then(Value::as_str).map(str::to_owned)
        };
        // Reached by skips or a skipRange from the installed 0.9.0: the manifest says nothing
        // of it, the plan's CSV must.
        let steps = bundle_steps(&bundle(), &source, "team-a", Some("etcdoperator.v0.9.0")).expect("steps");
        assert_eq!(replaces_of(&steps).as_deref(), Some("etcdoperator.v0.9.0"));
        // A manifest's own spec.replaces gives way to the installed CSV.
        let mut b = bundle();
        b.csv_json = b.csv_json.replace(r#""version":"0.9.4""#, r#""version":"0.9.4","replaces":"etcdoperator.v0.9.2""#);
        let steps = bundle_steps(&b, &source, "team-a", Some("etcdoperator.v0.9.0")).expect("steps");
        assert_eq!(replaces_of(&steps).as_deref(), Some("etcdoperator.v0.9.0"));
        // Nothing found: the manifest's stays.
        let steps = bundle_steps(&b, &source, "team-a", None).expect("steps");
        assert_eq!(replaces_of(&steps).as_deref(), Some("etcdoperator.v0.9.2"));
    }
}
