//! The `operatorframework.io/installed-alongside-<hash>: <namespace>/<csv>` annotations a CRD
//! step carries, as upstream writes them: one for each (non-copied) CSV that still exists and
//! was installed with the CRD, plus the CSV of this step. They say which operators a shared CRD
//! came with; the hash is upstream's (FNV-1a, 64 bits, of `namespace/name`), so the keys are the
//! same whichever OLM wrote them.

use std::collections::BTreeMap;
use std::hash::Hasher as _;
use std::sync::Arc;

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

/// What a CRD step applies besides its manifest, read from the CRD on the cluster.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SharedMetadata {
    /// The installed-alongside annotations (see [`for_write`]).
    pub annotations: BTreeMap<String, String>,
    /// The Operator component labels (`operators.coreos.com/<operator>`) the CRD carries: the
    /// step applies them with its own, so that the field manager every plan applies with keeps
    /// every install's label (it would otherwise remove those of earlier installs), and the
    /// Operator controller finds the CRD labelled instead of writing it a second time.
    pub component_labels: BTreeMap<String, String>,
}

/// What a write of a CRD for the CSVs `csvs` (`namespace`, `name`) applies besides its
/// manifest: the installed-alongside annotations of the CRD on the cluster whose CSV still
/// exists and is no copy, and those CSVs'; the CRD's component labels. `csv` reads a CSV from the
/// watch cache (None: gone), as upstream reads its lister: a live read of every CSV a shared CRD
/// names made each install of an operator cost one request per earlier install (1,000
/// namespaces: half a million reads). The CRD itself is read live, under its write lock, so
/// nothing another write just added is lost.
pub async fn for_write(
    client: &kube::Client,
    crd: &str,
    csvs: &[(String, String)],
    csv: impl Fn(&str, &str) -> Option<Arc<ClusterServiceVersion>>,
) -> Result<SharedMetadata, kube::Error> {
    let existing = Api::<CustomResourceDefinition>::all(client.clone()).get_opt(crd).await?;
    let on_crd = existing.as_ref().map(|crd| installed_alongside(crd.annotations())).unwrap_or_default();
    let component_labels = existing.as_ref().map(|crd| component_labels(crd.labels())).unwrap_or_default();
    Ok(SharedMetadata { annotations: keep_existing(on_crd, csvs, csv), component_labels })
}

/// The Operator component labels among `labels`.
pub fn component_labels(labels: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    labels
        .iter()
        .filter(|(key, _)| olm_api::keys::component_of([*key]).next().is_some())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The annotations for `on_crd` (what the CRD names) whose CSV still exists and is no copy, and
/// for `written` (the CSVs the write is for).
fn keep_existing(
    on_crd: Vec<(String, String)>,
    written: &[(String, String)],
    csv: impl Fn(&str, &str) -> Option<Arc<ClusterServiceVersion>>,
) -> BTreeMap<String, String> {
    let mut csvs: Vec<(String, String)> = on_crd
        .into_iter()
        .filter(|named| !written.contains(named))
        .filter(|(ns, csv_name)| csv(ns, csv_name).is_some_and(|found| !found.is_copied()))
        .collect();
    csvs.extend(written.iter().filter(|(ns, name)| !ns.is_empty() && !name.is_empty()).cloned());
    annotations(&csvs)
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

    fn csv(namespace: &str, name: &str, copied: bool) -> Arc<ClusterServiceVersion> {
        let mut csv = ClusterServiceVersion::new(name, Default::default());
        csv.metadata.namespace = Some(namespace.into());
        if copied {
            csv.metadata.labels = Some(BTreeMap::from([(olm_api::keys::COPIED_FROM_LABEL.to_owned(), "a".to_owned())]));
        }
        Arc::new(csv)
    }

    #[test]
    fn only_operator_component_labels_are_carried() {
        let on_crd = BTreeMap::from([
            ("operators.coreos.com/etcd.team-a".to_owned(), String::new()),
            ("operators.coreos.com/".to_owned(), String::new()),
            ("app".to_owned(), "etcd".to_owned()),
        ]);
        assert_eq!(component_labels(&on_crd), BTreeMap::from([("operators.coreos.com/etcd.team-a".to_owned(), String::new())]));
    }

    #[test]
    fn only_existing_original_csvs_stay_and_this_one_is_added() {
        let on_crd = vec![
            ("a".to_owned(), "x.v1".to_owned()),
            ("b".to_owned(), "gone.v1".to_owned()),
            ("c".to_owned(), "x.v1".to_owned()),
            ("d".to_owned(), "x.v2".to_owned()),
        ];
        let cluster = [csv("a", "x.v1", false), csv("c", "x.v1", true), csv("d", "x.v2", false)];
        let lookup = |ns: &str, name: &str| cluster.iter().find(|c| c.namespace().as_deref() == Some(ns) && c.name_any() == name).cloned();
        let written = [("d".to_owned(), "x.v2".to_owned()), ("e".to_owned(), "x.v2".to_owned())];
        let kept = keep_existing(on_crd, &written, lookup);
        let expected: Vec<(String, String)> = vec![("a".into(), "x.v1".into()), ("d".into(), "x.v2".into()), ("e".into(), "x.v2".into())];
        assert_eq!(kept, annotations(&expected));
    }
}
