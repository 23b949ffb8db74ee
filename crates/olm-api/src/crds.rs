//! The CustomResourceDefinitions of `operators.coreos.com` and `olm.operatorframework.io`, generated from the Rust types.
//!
//! `olm crds` prints [`render_yaml`]; `manifests/crds/` holds [`render_files`] and a test
//! keeps the two in sync. Install them with server-side apply (the CSV CRD is small here,
//! but the Subscription CRD still embeds several core/v1 schemas).

use std::path::{Path, PathBuf};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use serde_json::Value;
use kube::CustomResourceExt;
use kube::core::crd::merge_crds;

use crate::{olmv1, v1, v1alpha1, v1alpha2, v2};

/// A CRD could not be assembled or written.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    /// Two versions of one kind disagree on names or scope (a bug in this crate).
    #[error("cannot merge the versions of {kind}: {message}")]
    Merge { kind: &'static str, message: String },
    /// A CRD could not be rendered as YAML.
    #[error("cannot render CRD {name} as YAML: {message}")]
    Render { name: String, message: String },
    /// A file could not be written.
    #[error("{}: cannot write: {cause}", path.display())]
    Write { path: PathBuf, cause: std::io::Error },
}

impl CrdError {
    /// PascalCase category, for metrics and Event reasons.
    pub fn category(&self) -> &'static str {
        match self {
            CrdError::Merge { .. } => "CrdMergeFailed",
            CrdError::Render { .. } => "CrdRenderFailed",
            CrdError::Write { .. } => "CrdWriteFailed",
        }
    }

    /// Only a failed write might succeed when tried again.
    pub fn is_retryable(&self) -> bool {
        matches!(self, CrdError::Write { .. })
    }
}

/// Every CRD, sorted by name.
pub fn all() -> Result<Vec<CustomResourceDefinition>, CrdError> {
    let operator_groups = merge_crds(vec![v1::OperatorGroup::crd(), v1alpha2::OperatorGroup::crd()], "v1")
        .map_err(|err| CrdError::Merge { kind: "OperatorGroup", message: err.to_string() })?;
    let operator_conditions = merge_crds(vec![v1::OperatorCondition::crd(), v2::OperatorCondition::crd()], "v2")
        .map_err(|err| CrdError::Merge { kind: "OperatorCondition", message: err.to_string() })?;
    let mut crds = vec![
        v1alpha1::ClusterServiceVersion::crd(),
        v1alpha1::CatalogSource::crd(),
        v1alpha1::Subscription::crd(),
        v1alpha1::InstallPlan::crd(),
        operator_groups,
        operator_conditions,
        v1::Operator::crd(),
        v1::OLMConfig::crd(),
        olmv1::ClusterCatalog::crd(),
        olmv1::ClusterExtension::crd(),
    ];
    for crd in &mut crds {
        // Served versions in a stable order.
        crd.spec.versions.sort_by(|a, b| a.name.cmp(&b.name));
        // The root's `required` as upstream's: `spec` only where its Go type has no
        // `omitempty` on it; nothing at all for ClusterExtension (controller-gen's output).
        let required: Option<&[&str]> = match crd.spec.names.kind.as_str() {
            "ClusterServiceVersion" | "CatalogSource" | "Subscription" | "InstallPlan" | "ClusterCatalog" => Some(&["metadata", "spec"]),
            "ClusterExtension" => None,
            _ => Some(&["metadata"]),
        };
        let v1 = crd.spec.group == olmv1::GROUP;
        if v1 {
            // What the API server would default, written as upstream's CRDs write it.
            crd.spec.names.list_kind = Some(format!("{}List", crd.spec.names.kind));
        }
        for version in &mut crd.spec.versions {
            if let Some(root) = version.schema.as_mut().and_then(|s| s.open_api_v3_schema.as_mut()) {
                tidy(root);
                shape_root(root, required);
                if v1 {
                    root.title = None;
                }
            }
        }
    }
    crds.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    Ok(crds)
}

/// The file name of a CRD in `manifests/crds/`: `<plural>.<group>.yaml`.
pub fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}.{}.yaml", crd.spec.names.plural, crd.spec.group)
}

/// One CRD as a YAML document (without a leading `---`).
pub fn render_one(crd: &CustomResourceDefinition) -> Result<String, CrdError> {
    serde_saphyr::to_string(crd).map_err(|err| CrdError::Render {
        name: crd.metadata.name.clone().unwrap_or_default(),
        message: err.to_string(),
    })
}

/// Every CRD as one deterministic multi-document YAML stream.
pub fn render_yaml() -> Result<String, CrdError> {
    let mut out = String::new();
    for crd in all()? {
        out.push_str("---\n");
        out.push_str(&render_one(&crd)?);
    }
    Ok(out)
}

/// Every CRD as `(file name, YAML)`.
pub fn render_files() -> Result<Vec<(String, String)>, CrdError> {
    all()?.iter().map(|crd| Ok((file_name(crd), render_one(crd)?))).collect()
}

/// Writes one file per CRD into `dir` (created if missing); returns the paths written.
pub fn write_dir(dir: &Path) -> Result<Vec<PathBuf>, CrdError> {
    std::fs::create_dir_all(dir).map_err(|cause| CrdError::Write { path: dir.to_owned(), cause })?;
    let mut written = Vec::new();
    for (name, yaml) in render_files()? {
        let path = dir.join(name);
        std::fs::write(&path, yaml).map_err(|cause| CrdError::Write { path: path.clone(), cause })?;
        written.push(path);
    }
    Ok(written)
}

/// Brings a derived schema in line with upstream's conventions:
/// * no `nullable` (the apiserver then prunes explicit nulls, as it does upstream);
/// * no `null` among `enum` values (schemars adds it for `Option<Enum>`);
/// * no defaults that only mirror a Rust `#[serde(default)]` (`""`, `false`): the apiserver
///   would otherwise materialise fields the user never wrote.
fn tidy(schema: &mut JSONSchemaProps) {
    schema.nullable = None;
    if let Some(values) = &mut schema.enum_ {
        values.retain(|value| !value.0.is_null());
    }
    if schema.default.as_ref().is_some_and(|d| matches!(&d.0, Value::String(s) if s.is_empty()) || d.0 == Value::Bool(false)) {
        schema.default = None;
    }
    if let Some(properties) = &mut schema.properties {
        properties.values_mut().for_each(tidy);
    }
    match &mut schema.items {
        Some(JSONSchemaPropsOrArray::Schema(item)) => tidy(item),
        Some(JSONSchemaPropsOrArray::Schemas(items)) => items.iter_mut().for_each(tidy),
        None => {}
    }
    if let Some(JSONSchemaPropsOrBool::Schema(additional)) = &mut schema.additional_properties {
        tidy(additional);
    }
}

/// Adds the `apiVersion`, `kind` and `metadata` properties and sets the root `required`
/// list as upstream's (controller-gen) CRDs have them.
fn shape_root(root: &mut JSONSchemaProps, required: Option<&[&str]>) {
    let properties = root.properties.get_or_insert_with(Default::default);
    let typed = |type_: &str| JSONSchemaProps { type_: Some(type_.to_owned()), ..Default::default() };
    properties.entry("apiVersion".to_owned()).or_insert_with(|| typed("string"));
    properties.entry("kind".to_owned()).or_insert_with(|| typed("string"));
    properties.entry("metadata".to_owned()).or_insert_with(|| typed("object"));
    root.required = required.map(|names| names.iter().map(|n| (*n).to_owned()).collect());
}
