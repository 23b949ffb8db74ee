//! The `operatorframework.io/installed-alongside-<hash>: <namespace>/<csv>` annotations a CRD
//! step carries, as upstream writes them: one for each (non-copied) CSV that still exists and
//! was installed with the CRD, plus the CSV of this step. They say which operators a shared CRD
//! came with; the hash is upstream's (FNV-1a, 64 bits, of `namespace/name`), so the keys are the
//! same whichever OLM wrote them.

use std::collections::BTreeMap;
use std::hash::Hasher as _;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{Api, ResourceExt};
use olm_api::keys::INSTALLED_ALONGSIDE_ANNOTATION_PREFIX;
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;

/// The annotation key for the CSV `namespace/name`.
pub fn key(namespace: &str, name: &str) -> String {
    let mut hasher = fnv::FnvHasher::default();
    hasher.write(format!("{namespace}/{name}").as_bytes());
    format!("{INSTALLED_ALONGSIDE_ANNOTATION_PREFIX}{:x}", hasher.finish())
}

/// The CSVs `annotations` say a CRD was installed alongside.
pub fn installed_alongside(annotations: &BTreeMap<String, String>) -> Vec<(String, String)> {
    annotations
        .iter()
        .filter(|(k, _)| k.starts_with(INSTALLED_ALONGSIDE_ANNOTATION_PREFIX))
        .filter_map(|(_, v)| v.split_once('/').filter(|(ns, name)| !ns.is_empty() && !name.is_empty() && !name.contains('/')))
        .map(|(ns, name)| (ns.to_owned(), name.to_owned()))
        .collect()
}

/// The annotations for `csvs`.
pub fn annotations(csvs: &[(String, String)]) -> BTreeMap<String, String> {
    csvs.iter().map(|(ns, name)| (key(ns, name), format!("{ns}/{name}"))).collect()
}

/// The installed-alongside annotations a CRD step applies for the CSV `namespace/name`: those
/// of the CRD on the cluster whose CSV still exists and is no copy, and this CSV's. A CSV that
/// cannot be read is kept (it is checked again next time).
pub async fn for_step(client: &kube::Client, crd: &str, namespace: &str, name: &str) -> Result<BTreeMap<String, String>, kube::Error> {
    let existing = Api::<CustomResourceDefinition>::all(client.clone()).get_opt(crd).await?;
    let mut csvs = Vec::new();
    for (ns, csv) in existing.map(|crd| installed_alongside(crd.annotations())).unwrap_or_default() {
        if (ns.as_str(), csv.as_str()) == (namespace, name) {
            continue;
        }
        match Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns).get_opt(&csv).await {
            Ok(None) => {}
            Ok(Some(found)) if found.is_copied() => {}
            Ok(Some(_)) | Err(_) => csvs.push((ns, csv)),
        }
    }
    if !namespace.is_empty() && !name.is_empty() {
        csvs.push((namespace.to_owned(), name.to_owned()));
    }
    Ok(annotations(&csvs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_upstreams_fnv_hash_of_namespace_and_name() {
        // FNV-1a 64 of "ns/test-csv", as Go's hash/fnv New64a computes it.
        assert_eq!(key("ns", "test-csv"), "operatorframework.io/installed-alongside-4f5029d97012e166");
    }

    #[test]
    fn only_well_formed_references_are_read() {
        let on_crd = BTreeMap::from([
            (key("a", "x.v1"), "a/x.v1".to_owned()),
            ("operatorframework.io/installed-alongside-bad".to_owned(), "no-slash".to_owned()),
            ("other".to_owned(), "b/y.v1".to_owned()),
        ]);
        assert_eq!(installed_alongside(&on_crd), vec![("a".to_owned(), "x.v1".to_owned())]);
        assert_eq!(annotations(&[("a".into(), "x.v1".into())]), BTreeMap::from([(key("a", "x.v1"), "a/x.v1".to_owned())]));
    }
}
