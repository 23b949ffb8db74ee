//! Reading what a plan is compared with: the CSVs it replaces and the existing objects of its
//! CRD and RBAC steps; and the existing custom resources a CRD's new schema would refuse.

use k8s_openapi::api::rbac::v1::{ClusterRole, Role};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::{Api, ResourceExt};
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use olm_api::v1alpha1::install_plan::Step;
use serde::Serialize;
use serde_json::Value;

use super::{Installed, replaced_csvs};
use crate::crd_rules;

fn to_value<K: Serialize>(object: K) -> Value {
    serde_json::to_value(object).unwrap_or(Value::Null)
}

/// What `steps` (manifests resolved) of a plan in `namespace` are compared with, read from the
/// API server: one GET per replaced CSV and per CRD, Role and ClusterRole step.
pub async fn installed(client: &kube::Client, namespace: &str, steps: &[Step]) -> Result<Installed, kube::Error> {
    let mut out = Installed::default();
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), namespace);
    for name in replaced_csvs(steps) {
        if let Some(csv) = csvs.get_opt(&name).await? {
            out.csvs.insert(name, to_value(csv));
        }
    }
    for step in steps {
        let r = &step.resource;
        let found = match r.kind.as_str() {
            "CustomResourceDefinition" => Api::<CustomResourceDefinition>::all(client.clone()).get_opt(&r.name).await?.map(to_value),
            "ClusterRole" => Api::<ClusterRole>::all(client.clone()).get_opt(&r.name).await?.map(to_value),
            "Role" => Api::<Role>::namespaced(client.clone(), namespace).get_opt(&r.name).await?.map(to_value),
            _ => None,
        };
        if let Some(found) = found {
            out.objects.insert((r.kind.clone(), r.name.clone()), found);
        }
    }
    Ok(out)
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
