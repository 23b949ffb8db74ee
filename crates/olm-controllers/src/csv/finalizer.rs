//! The CSV cleanup finalizer (`operators.coreos.com/csv-cleanup`), added and removed here only
//! (the API patches `act` runs; when to add or remove it is decided in `decide::finalizer` and
//! `decide::deletion`).
//!
//! Hand-rolled rather than `kube::runtime::finalizer`, which ends a pass once it has added the
//! finalizer and runs the cleanup as a pass of its own: here the finalizer is the first action
//! of an ordinary pass (which goes on), and the cleanup is a decision like any other (cluster
//! objects and conversion webhooks first, the finalizer last). Both patches test what they
//! change, so a concurrent edit of the list is never overwritten.

use kube::api::{Patch, PatchParams};
use kube::Api;
use olm_api::keys;
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use olm_runtime::error::is_not_found;
use olm_runtime::{ControllerContext, Error, Result};
use serde_json::json;

use super::state::CsvState;

/// Add the cleanup finalizer to the CSV `namespace/name`, testing that the list is still
/// `current` (or, with no list, that the object is still at `resource_version`).
pub(super) async fn add(
    ctx: &ControllerContext<CsvState>,
    namespace: &str,
    name: &str,
    current: Option<&[String]>,
    resource_version: Option<&str>,
) -> Result<()> {
    let finalizer = keys::CSV_CLEANUP_FINALIZER;
    let ops = match current {
        Some(list) if !list.is_empty() => json!([
            {"op": "test", "path": "/metadata/finalizers", "value": list},
            {"op": "add", "path": "/metadata/finalizers/-", "value": finalizer},
        ]),
        _ => json!([
            {"op": "test", "path": "/metadata/resourceVersion", "value": resource_version},
            {"op": "add", "path": "/metadata/finalizers", "value": [finalizer]},
        ]),
    };
    patch(ctx, namespace, name, ops, "add the cleanup finalizer to").await
}

/// Remove the cleanup finalizer at `index` of the CSV `namespace/name`, testing that it is
/// still there.
pub(super) async fn remove(ctx: &ControllerContext<CsvState>, namespace: &str, name: &str, index: usize) -> Result<()> {
    let path = format!("/metadata/finalizers/{index}");
    let ops = json!([
        {"op": "test", "path": path, "value": keys::CSV_CLEANUP_FINALIZER},
        {"op": "remove", "path": path},
    ]);
    patch(ctx, namespace, name, ops, "remove the cleanup finalizer from").await
}

/// Apply a JSON patch to the CSV's finalizers. A failed `test` (422: the object changed since
/// it was observed) is not an error: the change triggers another pass with the new object.
async fn patch(ctx: &ControllerContext<CsvState>, namespace: &str, name: &str, ops: serde_json::Value, what: &str) -> Result<()> {
    let patch: json_patch::Patch = serde_json::from_value(ops).map_err(|source| Error::Serialize {
        what: format!("finalizer patch of ClusterServiceVersion {namespace}/{name}"),
        source,
    })?;
    let api: Api<ClusterServiceVersion> = Api::namespaced(ctx.client.clone(), namespace);
    match api.patch(name, &PatchParams::default(), &Patch::<()>::Json(patch)).await {
        Ok(_) => Ok(()),
        Err(err) if is_not_found(&err) => Ok(()),
        Err(err) if olm_runtime::error::api_status_code(&err) == Some(422) => {
            tracing::debug!(%err, "the CSV changed since it was observed; finalizer patch skipped until the next pass");
            Ok(())
        }
        Err(err) => Err(Error::api(format!("{what} ClusterServiceVersion {namespace}/{name}"), err)),
    }
}
