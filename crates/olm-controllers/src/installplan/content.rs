//! The steps of a plan as they are applied: the step content a large plan keeps in ConfigMaps
//! (see [`crate::plan_content`]) read back, and each step's API group taken from its manifest
//! when the step does not name it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, ResourceExt};
use olm_api::v1alpha1::install_plan::{InstallPlan, Step};
use olm_runtime::error::api_message;

use super::decide::StepError;
use crate::plan_content::{referenced_config_maps, resolve};

/// `steps` with their referenced manifests read back from the plan's ConfigMaps (read from the
/// API server: OLM does not watch ConfigMaps, and a plan reads them once per pass). A plan
/// without references costs nothing.
pub async fn resolved_steps(client: &kube::Client, plan: &InstallPlan, steps: &[Step]) -> Result<Vec<Step>, StepError> {
    let names = referenced_config_maps(steps);
    if names.is_empty() {
        return Ok(steps.iter().cloned().map(with_api_of_manifest).collect());
    }
    let namespace = plan.namespace().unwrap_or_default();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
    let mut read = BTreeMap::new();
    for name in names {
        let found = api.get_opt(&name).await.map_err(|err| {
            StepError::new(
                format!("cannot read ConfigMap {namespace}/{name}, which holds step content of this plan: {}", api_message(&err)),
                true,
            )
        })?;
        read.insert(name, found.map(|cm| cm.binary_data.unwrap_or_default()));
    }
    let resolved = resolve(&plan.name_any(), steps, &read).map_err(|err| StepError::new(err.message, err.retryable))?;
    Ok(resolved.into_iter().map(with_api_of_manifest).collect())
}

/// A step whose group is empty and whose version or manifest names a group gets that group:
/// plans written by hand (and upstream's e2e suite) name a CRD step's API as
/// `version: apiextensions.k8s.io/v1` without a group, and upstream applies the manifest by its
/// `apiVersion`.
pub fn with_api_of_manifest(mut step: Step) -> Step {
    let r = &mut step.resource;
    if !r.group.is_empty() {
        return step;
    }
    let from_manifest = || {
        let manifest: serde_json::Value = serde_json::from_str(r.manifest.as_deref()?).ok()?;
        manifest.get("apiVersion")?.as_str().map(str::to_owned)
    };
    let api_version = if r.version.contains('/') { Some(r.version.clone()) } else { from_manifest() };
    if let Some((group, version)) = api_version.as_deref().and_then(|v| v.split_once('/')) {
        r.group = group.to_owned();
        r.version = version.to_owned();
    } else if r.kind == "CustomResourceDefinition" {
        // Only the version named (upstream's e2e suite writes `version: v1` and a manifest with
        // `apiVersion: v1`): a CRD has one group, and upstream reads only the version too.
        r.group = "apiextensions.k8s.io".to_owned();
        r.version = api_version.filter(|v| !v.is_empty()).unwrap_or_else(|| "v1".to_owned());
    }
    step
}

#[cfg(test)]
mod tests {
    use olm_api::v1alpha1::install_plan::{StepResource, StepStatus};

    use super::*;

    fn step(group: &str, version: &str, kind: &str, manifest: &str) -> Step {
        Step {
            resolving: "test-csv".into(),
            resource: StepResource {
                source_name: String::new(),
                source_namespace: String::new(),
                group: group.into(),
                version: version.into(),
                kind: kind.into(),
                name: "x".into(),
                manifest: Some(manifest.into()),
            },
            optional: None,
            status: StepStatus::Unknown,
        }
    }

    #[test]
    fn a_hand_written_step_gets_its_group_from_its_version_or_manifest() {
        let crd = with_api_of_manifest(step("", "apiextensions.k8s.io/v1", "CustomResourceDefinition", "{}"));
        assert_eq!((crd.resource.group.as_str(), crd.resource.version.as_str()), ("apiextensions.k8s.io", "v1"));
        let role = with_api_of_manifest(step("", "v1", "Role", r#"{"apiVersion":"rbac.authorization.k8s.io/v1"}"#));
        assert_eq!((role.resource.group.as_str(), role.resource.version.as_str()), ("rbac.authorization.k8s.io", "v1"));
        let service = with_api_of_manifest(step("", "v1", "Service", r#"{"apiVersion":"v1"}"#));
        assert_eq!((service.resource.group.as_str(), service.resource.version.as_str()), ("", "v1"));
        let bare_crd = with_api_of_manifest(step("", "v1", "CustomResourceDefinition", r#"{"apiVersion":"v1"}"#));
        assert_eq!((bare_crd.resource.group.as_str(), bare_crd.resource.version.as_str()), ("apiextensions.k8s.io", "v1"));
        let named = with_api_of_manifest(step("apps", "v1", "Deployment", r#"{"apiVersion":"other/v9"}"#));
        assert_eq!(named.resource.group, "apps", "a step naming its group keeps it");
    }
}
