//! OLM v1's rendering of a registry+v1 bundle (a ClusterServiceVersion, its CRDs and other
//! manifests) to the plain objects a ClusterExtension installs, as operator-controller v1.11
//! renders it: no CSV is written. Pure: a bundle and where it goes in, objects or a reason out.
//!
//! - the CRDs as the bundle has them;
//! - a ServiceAccount for each account the CSV's permissions name (not `default`), in the
//!   install namespace;
//! - `permissions` as a Role and RoleBinding in each watched namespace, or, watching all
//!   namespaces, as a ClusterRole and ClusterRoleBinding; `clusterPermissions` as a ClusterRole
//!   and ClusterRoleBinding;
//! - each Deployment of the install strategy, in the install namespace, its pods annotated with
//!   the CSV's annotations and `olm.targetNamespaces` (empty for all namespaces);
//! - every other manifest of the bundle, its own namespace dropped (the installer puts the
//!   namespaced ones in the install namespace).
//!
//! - webhooks ([`webhooks`]): served with a certificate of olm-rs's own CA.
//!
//! Refused in upstream's words, with what to do: APIServices and dependencies (v1 does not
//! install what a bundle needs from others), and a `watchNamespace` the bundle's install modes do
//! not allow.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use olm_catalog_client::BundleContent;
use serde_json::{Map, Value, json};

use crate::bundle_objects::{normalize_csv, normalize_object};
use crate::names::generated_name;
use crate::serving_cert::ServingCert;

mod webhooks;

/// The pod annotation that tells an operator which namespaces to watch (empty: all).
pub const TARGET_NAMESPACES_ANNOTATION: &str = "olm.targetNamespaces";
/// The pod annotation that names the namespace the operator runs in.
pub const OPERATOR_NAMESPACE_ANNOTATION: &str = "olm.operatorNamespace";

/// Where a bundle is installed.
#[derive(Clone, Copy, Debug)]
pub struct Target<'a> {
    /// `spec.namespace`: where the operator runs.
    pub install_namespace: &'a str,
    /// `spec.config.inline`: the bundle's configuration (`watchNamespace`), when given.
    pub config: Option<&'a Map<String, Value>>,
}

/// A bundle as plain objects, in the order they are applied: CRDs, ServiceAccounts, roles,
/// bindings, the bundle's other manifests, webhook Secrets and Services, Deployments, webhook
/// configurations.
#[derive(Clone, Debug, PartialEq)]
pub struct Rendered {
    /// The CSV's name (`metadata.name`), which names the generated RBAC.
    pub csv_name: String,
    pub objects: Vec<Value>,
}

/// Why a bundle cannot be installed as asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RenderError {
    /// The bundle itself is broken: only a new bundle helps.
    Invalid(String),
    /// The bundle needs what OLM v1 does not install.
    Unsupported(String),
    /// `spec.config.inline` does not fit the bundle (its install modes): only a change of the
    /// ClusterExtension helps (upstream's terminal `InvalidConfiguration`).
    InvalidConfiguration(String),
}

impl fmt::Display for RenderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RenderError::Invalid(m) | RenderError::Unsupported(m) | RenderError::InvalidConfiguration(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for RenderError {}

fn supported_modes(csv: &Value) -> BTreeSet<String> {
    csv.pointer("/spec/installModes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|m| m.get("supported").and_then(Value::as_bool) == Some(true))
        .filter_map(|m| m.get("type").and_then(Value::as_str).map(str::to_owned))
        .collect()
}

/// The prefix of every configuration error, as upstream words it.
const INVALID_CONFIGURATION: &str = "invalid ClusterExtension configuration: invalid configuration: ";

fn is_dns_label(name: &str) -> bool {
    let bytes = name.as_bytes();
    (1..=63).contains(&bytes.len())
        && bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[0] != b'-'
        && bytes[bytes.len() - 1] != b'-'
}

/// The namespace the operator watches (`None`: all), from `spec.config.inline` and the bundle's
/// install modes, as upstream's configuration schema decides it: `watchNamespace` is unknown to a
/// bundle that only supports AllNamespaces, optional when it supports AllNamespaces and one of
/// Own/SingleNamespace, required otherwise; OwnNamespace alone wants the install namespace,
/// SingleNamespace alone another one. Each refusal says what to set.
pub fn watch_namespace(csv_name: &str, csv: &Value, target: &Target<'_>) -> Result<Option<String>, RenderError> {
    let supported = supported_modes(csv);
    let (all, own, single) = (supported.contains("AllNamespaces"), supported.contains("OwnNamespace"), supported.contains("SingleNamespace"));
    let modes = supported.iter().cloned().collect::<Vec<_>>().join(" ");
    if !(all || own || single) {
        return Err(RenderError::Unsupported(format!(
            "unsupported bundle: bundle must support at least one of [AllNamespaces SingleNamespace OwnNamespace] install modes: {csv_name} supports [{modes}]; choose another version or package"
        )));
    }
    let install = target.install_namespace;
    let config = target.config.cloned().unwrap_or_default();
    let invalid = |detail: String| Err(RenderError::InvalidConfiguration(format!("{INVALID_CONFIGURATION}{detail}")));
    if let Some(unknown) = config.keys().find(|k| *k != "watchNamespace") {
        return invalid(format!("unknown field {unknown:?}: spec.config.inline of a registry+v1 bundle takes only watchNamespace"));
    }
    let watch = match config.get("watchNamespace") {
        None | Some(Value::Null) => None,
        Some(Value::String(ns)) => Some(ns.clone()),
        Some(other) => return invalid(format!("invalid type for field \"watchNamespace\": got {other}, want a namespace name (a string)")),
    };
    let Some(watch) = watch else {
        if all {
            return Ok(None);
        }
        let set = if own { format!("{install:?} (the install namespace; OwnNamespace)") } else { "a namespace other than the install namespace (SingleNamespace)".to_owned() };
        return invalid(format!(
            "required field \"watchNamespace\" is missing: bundle {csv_name} supports [{modes}], not AllNamespaces; set spec.config.inline.watchNamespace to {set}"
        ));
    };
    if !own && !single {
        return invalid(format!(
            "unknown field \"watchNamespace\": bundle {csv_name} supports only AllNamespaces; remove spec.config.inline.watchNamespace"
        ));
    }
    if !is_dns_label(&watch) {
        return invalid(format!("field \"watchNamespace\" must match pattern \"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$\": {watch:?} is not a namespace name"));
    }
    if watch == install && !own {
        return invalid(format!(
            "invalid value {watch:?}: must be different from {install:?} (the install namespace) because this operator uses SingleNamespace install mode to watch a different namespace{}",
            if all { "; or remove watchNamespace to watch all namespaces" } else { "" }
        ));
    }
    if watch != install && !single {
        return invalid(format!(
            "invalid value {watch:?}: must be {install:?} (the namespace where the operator is installed) because this operator only supports OwnNamespace install mode{}",
            if all { "; or remove watchNamespace to watch all namespaces" } else { "" }
        ));
    }
    Ok(Some(watch))
}

/// What OLM v1 does not install: webhooks, APIServices, dependencies on other packages or APIs.
/// Properties that make a bundle depend on another (upstream refuses each).
const DEPENDENCY_PROPERTIES: &[&str] = &["olm.package.required", "olm.gvk.required", "olm.constraint"];

fn check_supported(csv_name: &str, csv: &Value, properties: &Value) -> Result<(), RenderError> {
    let non_empty = |pointer: &str| csv.pointer(pointer).and_then(Value::as_array).is_some_and(|a| !a.is_empty());
    if non_empty("/spec/apiservicedefinitions/owned") {
        return Err(RenderError::Unsupported(format!(
            "unsupported bundle: apiServiceDefintions are not supported: {csv_name} owns APIServices; install it with a Subscription (OLM v0), which serves them"
        )));
    }
    let dependency = properties.get("properties").and_then(Value::as_array).into_iter().flatten().find_map(|p| {
        let kind = p.get("type").and_then(Value::as_str)?;
        DEPENDENCY_PROPERTIES.contains(&kind).then_some((kind, p.get("value").map(Value::to_string).unwrap_or_default()))
    });
    if let Some((kind, value)) = dependency {
        return Err(RenderError::Unsupported(format!(
            "validating bundle {csv_name:?}: bundle {csv_name:?} has a dependency declared via property {kind:?} which is currently not supported ({value}): install what it needs first and choose a version without dependencies, or install it with a Subscription (OLM v0), which resolves them"
        )));
    }
    Ok(())
}

fn rbac(kind: &str, name: &str, namespace: Option<&str>, body: Value) -> Value {
    let mut metadata = json!({ "name": name });
    if let Some(ns) = namespace {
        metadata["namespace"] = json!(ns);
    }
    let mut object = json!({ "apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": metadata });
    if let (Some(object), Value::Object(body)) = (object.as_object_mut(), body) {
        object.extend(body);
    }
    object
}

fn binding(kind: &str, role_kind: &str, name: &str, namespace: Option<&str>, sa: &str, sa_namespace: &str) -> Value {
    rbac(
        kind,
        name,
        namespace,
        json!({
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name },
            "subjects": [{ "kind": "ServiceAccount", "name": sa, "namespace": sa_namespace }],
        }),
    )
}

/// The Deployment of one install strategy entry.
fn deployment(csv: &Value, entry: &Value, install: &str, targets: &str) -> Result<Value, RenderError> {
    let name = entry.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()).ok_or_else(|| {
        RenderError::Invalid("a deployment of spec.install.spec.deployments has no name: fix the bundle".to_owned())
    })?;
    let mut spec = entry.get("spec").cloned().unwrap_or_else(|| json!({}));
    if !spec.is_object() {
        return Err(RenderError::Invalid(format!("deployment {name} of the install strategy has no spec: fix the bundle")));
    }
    spec["revisionHistoryLimit"] = json!(1);
    let template = spec.as_object_mut().and_then(|s| s.entry("template").or_insert_with(|| json!({})).as_object_mut());
    if let Some(template) = template {
        let metadata = template.entry("metadata").or_insert_with(|| json!({}));
        if !metadata.is_object() {
            *metadata = json!({});
        }
        let mut annotations: Map<String, Value> = csv
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        // Client-side apply bookkeeping can be larger than a pod annotation may be.
        annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
        if let Some(own) = metadata.get("annotations").and_then(Value::as_object) {
            annotations.extend(own.clone());
        }
        annotations.insert(TARGET_NAMESPACES_ANNOTATION.to_owned(), json!(targets));
        annotations.insert(OPERATOR_NAMESPACE_ANNOTATION.to_owned(), json!(install));
        metadata["annotations"] = Value::Object(annotations);
    }
    let mut metadata = json!({ "name": name, "namespace": install });
    if let Some(labels) = entry.get("label").filter(|l| l.is_object()) {
        metadata["labels"] = labels.clone();
    }
    Ok(json!({ "apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata, "spec": spec }))
}

fn parse_csv(bundle: &BundleContent) -> Result<Value, RenderError> {
    let csv: Value = serde_json::from_str(&bundle.csv_json)
        .map_err(|err| RenderError::Invalid(format!("the ClusterServiceVersion of bundle {} is not valid JSON: {err}", bundle.name)))?;
    Ok(normalize_csv(csv))
}

/// The Deployments of `bundle` that serve webhooks: [`render`] wants a serving certificate for
/// each (`crate::serving_cert`), by Deployment name.
pub fn certificates_needed(bundle: &BundleContent) -> Result<BTreeSet<String>, RenderError> {
    Ok(webhooks::deployments(&parse_csv(bundle)?))
}

/// Render `bundle` for `target`, its webhooks served with `certs` (by Deployment name).
pub fn render(bundle: &BundleContent, target: &Target<'_>, certs: &BTreeMap<String, ServingCert>) -> Result<Rendered, RenderError> {
    let csv = parse_csv(bundle)?;
    let csv_name = csv.pointer("/metadata/name").and_then(Value::as_str).unwrap_or(&bundle.name).to_owned();
    let properties: Value = serde_json::from_str(&bundle.properties_annotation).unwrap_or(Value::Null);
    check_supported(&csv_name, &csv, &properties)?;
    let watch = watch_namespace(&csv_name, &csv, target)?;
    let install = target.install_namespace;
    let all_namespaces = watch.is_none();
    let targets = watch.as_deref().unwrap_or("");

    let mut crds = Vec::new();
    let mut others = Vec::new();
    for (i, text) in bundle.objects.iter().enumerate() {
        let object: Value = serde_json::from_str(text)
            .map_err(|err| RenderError::Invalid(format!("object {} of bundle {} is not valid JSON: {err}", i + 1, bundle.name)))?;
        let kind = object.get("kind").and_then(Value::as_str).unwrap_or_default().to_owned();
        if kind == "ClusterServiceVersion" {
            continue;
        }
        let mut object = normalize_object(object, &bundle.name, i + 1).map_err(RenderError::Invalid)?;
        if object.pointer("/metadata/name").and_then(Value::as_str).is_none_or(str::is_empty) {
            return Err(RenderError::Invalid(format!("object {} ({kind}) of bundle {} has no metadata.name: fix the bundle", i + 1, bundle.name)));
        }
        if let Some(map) = object.as_object_mut() {
            map.remove("status");
        }
        if kind == "CustomResourceDefinition" {
            crds.push(object);
        } else {
            // Namespaced manifests go to the install namespace whatever they say (the installer
            // places them, knowing which kinds are namespaced), as upstream.
            if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                metadata.remove("namespace");
            }
            others.push(object);
        }
    }

    let strategy = csv.pointer("/spec/install/spec").cloned().unwrap_or(Value::Null);
    let mut accounts: Vec<String> = Vec::new();
    let (mut roles, mut bindings) = (Vec::new(), Vec::new());
    for (cluster_list, list) in [(false, "permissions"), (true, "clusterPermissions")] {
        for permission in strategy.get(list).and_then(Value::as_array).into_iter().flatten() {
            let sa = permission.get("serviceAccountName").and_then(Value::as_str).unwrap_or_default();
            if sa.is_empty() {
                return Err(RenderError::Invalid(format!("spec.install.spec.{list} of {csv_name} has an entry without serviceAccountName: fix the bundle")));
            }
            if sa != "default" && !accounts.iter().any(|a| a == sa) {
                accounts.push(sa.to_owned());
            }
            let mut rules = permission.get("rules").cloned().unwrap_or_else(|| json!([]));
            // Namespaced permissions of an operator that watches all namespaces hold in all of
            // them: a ClusterRole that may also read namespaces, as upstream promotes them.
            if !cluster_list && all_namespaces && let Some(list) = rules.as_array_mut() {
                list.push(json!({ "verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["namespaces"] }));
            }
            let rules = json!({ "rules": rules });
            if cluster_list || all_namespaces {
                let name = generated_name(&format!("{csv_name}-{sa}"), &json!([csv_name, install, list, permission]));
                roles.push(rbac("ClusterRole", &name, None, rules));
                bindings.push(binding("ClusterRoleBinding", "ClusterRole", &name, None, sa, install));
            } else {
                let name = generated_name(&format!("{csv_name}-{sa}"), &json!([csv_name, install, permission]));
                roles.push(rbac("Role", &name, Some(targets), rules));
                bindings.push(binding("RoleBinding", "Role", &name, Some(targets), sa, install));
            }
        }
    }
    let mut deployments = Vec::new();
    for entry in strategy.get("deployments").and_then(Value::as_array).into_iter().flatten() {
        deployments.push(deployment(&csv, entry, install, targets)?);
    }
    let hooks = webhooks::definitions(&csv);
    let names = |objects: &[Value]| -> BTreeSet<String> {
        objects.iter().filter_map(|o| o.pointer("/metadata/name").and_then(Value::as_str).map(str::to_owned)).collect()
    };
    let deployment_names = names(&deployments);
    webhooks::check(&csv_name, &hooks, &deployment_names.iter().map(String::as_str).collect(), &names(&crds), &supported_modes(&csv))?;
    let served = webhooks::render(&hooks, install, watch.as_deref(), certs, &mut crds, &mut deployments)?;
    let (front, configurations): (Vec<Value>, Vec<Value>) =
        served.into_iter().partition(|o| matches!(o.get("kind").and_then(Value::as_str), Some("Secret" | "Service")));
    let shipped = |kind: &str, name: &str| {
        others.iter().any(|o| o.get("kind").and_then(Value::as_str) == Some(kind) && o.pointer("/metadata/name").and_then(Value::as_str) == Some(name))
    };
    let service_accounts: Vec<Value> = accounts
        .iter()
        .filter(|sa| !shipped("ServiceAccount", sa))
        .map(|sa| json!({ "apiVersion": "v1", "kind": "ServiceAccount", "metadata": { "name": sa, "namespace": install } }))
        .collect();

    let mut objects = crds;
    objects.extend(service_accounts);
    objects.extend(roles);
    objects.extend(bindings);
    objects.extend(others);
    objects.extend(front);
    objects.extend(deployments);
    objects.extend(configurations);
    Ok(Rendered { csv_name, objects })
}

#[cfg(test)]
mod tests;
