//! Reading back the step content a large plan keeps in ConfigMaps (see
//! [`crate::plan_content`]) before its steps are applied.

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
        return Ok(steps.to_vec());
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
    resolve(&plan.name_any(), steps, &read).map_err(|err| StepError::new(err.message, err.retryable))
}
