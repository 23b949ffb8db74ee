//! Reading what a plan is compared with: the CSVs it replaces and the existing objects of its
//! CRD and RBAC steps; (the existing custom resources a CRD's new schema would refuse: `olm_install::crd_check`).

use k8s_openapi::api::rbac::v1::{ClusterRole, Role};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use olm_api::v1alpha1::install_plan::Step;
use serde::Serialize;
use serde_json::Value;

use super::{Installed, replaced_csvs};

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
