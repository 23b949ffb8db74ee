//! A plan's CSV never lands on a copy. An operator installed for all namespaces elsewhere has a
//! copy of its CSV, of the same name, in every namespace; a plan that installs the same operator
//! here would otherwise apply its CSV over that copy, and the result would be both: a "copy"
//! carrying this install's cleanup finalizer, which nobody removes. The copy goes first (its
//! original's group then finds the namespace taken and copies nothing there), and this install's
//! own CSV is written in its place, where the OperatorGroup rules judge it
//! (InterOperatorGroupOwnerConflict when the two groups provide the same APIs to the same
//! namespaces, as upstream).

use kube::api::{DeleteParams, Preconditions};
use kube::{Api, ResourceExt};
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use olm_runtime::error::is_not_found;

use super::decide::StepError;

/// Delete the copy of the CSV `namespace/name` that the cache shows, if it shows one.
pub(super) async fn remove_cached(api: &Api<ClusterServiceVersion>, cached: Option<&ClusterServiceVersion>) -> Result<(), StepError> {
    match cached.filter(|csv| csv.is_copied()) {
        Some(copy) => remove(api, copy).await,
        None => Ok(()),
    }
}

/// After the CSV was applied: when what the API server answered is a copy (one the cache had not
/// shown yet), delete it and have the step try again, which then creates this install's CSV.
pub(super) async fn undo_if_copy(api: &Api<ClusterServiceVersion>, applied: &ClusterServiceVersion) -> Result<(), StepError> {
    if !applied.is_copied() {
        return Ok(());
    }
    remove(api, applied).await?;
    Err(StepError::new(
        format!(
            "ClusterServiceVersion {}/{} was a copy of the operator installed in namespace {}: the copy is deleted and this install's own CSV is written in its place on the next pass",
            applied.namespace().unwrap_or_default(),
            applied.name_any(),
            applied.labels().get(olm_api::keys::COPIED_FROM_LABEL).map(String::as_str).unwrap_or("(unknown)")
        ),
        true,
    ))
}

/// Delete `copy`, this very object (its uid a precondition).
async fn remove(api: &Api<ClusterServiceVersion>, copy: &ClusterServiceVersion) -> Result<(), StepError> {
    let params = DeleteParams { preconditions: Some(Preconditions { uid: copy.uid(), resource_version: None }), ..DeleteParams::background() };
    match api.delete(&copy.name_any(), &params).await {
        Ok(_) => {
            tracing::info!(namespace = %copy.namespace().unwrap_or_default(), csv = %copy.name_any(), "deleted the copy a plan's CSV was to be written over");
            Ok(())
        }
        Err(err) if is_not_found(&err) || olm_runtime::error::api_status_code(&err) == Some(409) => Ok(()),
        Err(err) => Err(StepError::new(
            format!(
                "cannot delete ClusterServiceVersion {}/{}, a copy of the operator installed elsewhere that this install's CSV replaces: {}",
                copy.namespace().unwrap_or_default(),
                copy.name_any(),
                olm_runtime::error::api_message(&err)
            ),
            true,
        )),
    }
}
