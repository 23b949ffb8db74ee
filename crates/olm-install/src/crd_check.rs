//! The existing custom resources a CRD's new schema would refuse, read from the API server: the
//! check every installer (v0's InstallPlan, v1's ClusterExtension, the plan preview) makes
//! before it writes a CRD, on top of the pure rules of [`crate::crd_rules`].

use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::{Api, ResourceExt};
use serde::Serialize;
use serde_json::Value;

use crate::crd_rules;

fn to_value<K: Serialize>(object: K) -> Value {
    serde_json::to_value(object).unwrap_or(Value::Null)
}

/// An existing custom resource that a CRD's new schema refuses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefusedObject {
    /// `namespace/name`, or `name` when cluster-scoped.
    pub object: String,
    /// The version whose new schema refuses it.
    pub version: String,
    /// What is wrong with it.
    pub problems: Vec<String>,
}

/// A list of existing objects that failed: which kind, and the API error.
#[derive(Debug)]
pub struct ListFailed {
    /// The kind listed.
    pub kind: String,
    /// The API server's error.
    pub error: kube::Error,
}

/// The existing objects of a CRD (`existing`, as served now) that its `desired` schemas would
/// refuse, at most `limit`, for every version both serve whose schema changes. A version whose
/// schema stays the same lists nothing: its objects were checked against it when written.
pub async fn refused_objects(client: &kube::Client, existing: &Value, desired: &Value, limit: usize) -> Result<Vec<RefusedObject>, ListFailed> {
    let text = |pointer: &str| desired.pointer(pointer).and_then(Value::as_str).unwrap_or_default().to_owned();
    let (group, kind, plural) = (text("/spec/group"), text("/spec/names/kind"), text("/spec/names/plural"));
    let versions = crd_rules::version_names(desired);
    let mut out = Vec::new();
    for version in versions {
        let (Some(schema), Some(current)) = (crd_rules::served_schema(desired, version), crd_rules::served_schema(existing, version)) else {
            continue;
        };
        if schema == current {
            continue;
        }
        let resource = ApiResource {
            group: group.clone(),
            version: version.to_owned(),
            api_version: format!("{group}/{version}"),
            kind: kind.clone(),
            plural: plural.clone(),
        };
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let list = api.list(&ListParams::default().limit(500)).await.map_err(|error| ListFailed { kind: kind.clone(), error })?;
        for object in list.items {
            let problems = crd_rules::validate(&to_value(&object), schema);
            if problems.is_empty() {
                continue;
            }
            let at = match object.namespace() {
                Some(ns) => format!("{ns}/{}", object.name_any()),
                None => object.name_any(),
            };
            out.push(RefusedObject { object: at, version: version.to_owned(), problems });
            if out.len() >= limit {
                return Ok(out);
            }
        }
    }
    Ok(out)
}
