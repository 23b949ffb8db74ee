//! The `operatorframework.io/installed-alongside-<hash>: <namespace>/<csv>` annotations a CRD
//! step carries, as upstream writes them: one for each (non-copied) CSV that still exists and
//! was installed with the CRD, plus the CSV of this step. They say which operators a shared CRD
//! came with; the hash is upstream's (FNV-1a, 64 bits, of `namespace/name`), so the keys are the
//! same whichever OLM wrote them.

use std::collections::BTreeMap;
use std::hash::Hasher as _;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::jiff::Timestamp;
use kube::{Api, ResourceExt};
use olm_api::keys::INSTALLED_ALONGSIDE_ANNOTATION_PREFIX;
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use olm_api::v1alpha1::install_plan::{InstallPlan, InstallPlanConditionType, InstallPlanPhase};

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
/// manifest: the installed-alongside annotations of the CRD on the cluster whose CSV is still
/// installed (`installed`, see [`still_installed`]), and those CSVs'; the CRD's component
/// labels. `installed` reads the watch caches, as upstream reads its lister: a live read of
/// every CSV a shared CRD names made each install of an operator cost one request per earlier
/// install (1,000 namespaces: half a million reads). The CRD itself is read live, under its
/// write lock, so nothing another write just added is lost.
pub async fn for_write(
    client: &kube::Client,
    crd: &str,
    csvs: &[(String, String)],
    installed: impl Fn(&str, &str) -> bool,
) -> Result<SharedMetadata, kube::Error> {
    let existing = Api::<CustomResourceDefinition>::all(client.clone()).get_opt(crd).await?;
    let on_crd = existing.as_ref().map(|crd| installed_alongside(crd.annotations())).unwrap_or_default();
    let component_labels = existing.as_ref().map(|crd| component_labels(crd.labels())).unwrap_or_default();
    Ok(SharedMetadata { annotations: keep_existing(on_crd, csvs, installed), component_labels })
}

/// How long after its plan completed a CSV missing from the cache still counts as installed:
/// the plan's status and the CSV it created come on two watches, in either order.
const CACHE_LAG_GRACE: Duration = Duration::from_secs(60);

/// Whether the CSV `namespace/name` is still installed, for its installed-alongside
/// annotation: it exists and is no copy (`csv`, from the cache), or one of `plans` (the
/// namespace's) is still to create it. A plan writes its CRDs before its CSV, so the CSV of
/// an install whose CRD step was just written is not there yet; dropping its annotation then
/// (another install writing the CRD meanwhile) would lose it for good.
pub fn still_installed(
    name: &str,
    csv: Option<Arc<ClusterServiceVersion>>,
    plans: &[Arc<InstallPlan>],
    now: Timestamp,
) -> bool {
    if let Some(csv) = csv {
        return !csv.is_copied();
    }
    plans.iter().filter(|plan| plan.spec.cluster_service_version_names.iter().any(|n| n == name)).any(|plan| {
        let status = plan.status.as_ref();
        match status.map(|s| &s.phase) {
            Some(InstallPlanPhase::Failed) => false,
            Some(InstallPlanPhase::Complete) => status
                .and_then(|s| s.conditions.as_ref())
                .into_iter()
                .flatten()
                .filter(|c| c.type_ == Some(InstallPlanConditionType::Installed))
                .filter_map(|c| c.last_transition_time.as_ref())
                .any(|since| Duration::try_from(now.duration_since(since.0)).is_ok_and(|ago| ago < CACHE_LAG_GRACE)),
            _ => true,
        }
    })
}

/// The Operator component labels among `labels`.
pub fn component_labels(labels: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    labels
        .iter()
        .filter(|(key, _)| olm_api::keys::component_of([*key]).next().is_some())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The annotations for `on_crd` (what the CRD names) whose CSV is still installed, and for
/// `written` (the CSVs the write is for).
fn keep_existing(
    on_crd: Vec<(String, String)>,
    written: &[(String, String)],
    installed: impl Fn(&str, &str) -> bool,
) -> BTreeMap<String, String> {
    let mut csvs: Vec<(String, String)> =
        on_crd.into_iter().filter(|named| !written.contains(named)).filter(|(ns, csv_name)| installed(ns, csv_name)).collect();
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
        let lookup = |ns: &str, name: &str| {
            let found = cluster.iter().find(|c| c.namespace().as_deref() == Some(ns) && c.name_any() == name).cloned();
            still_installed(name, found, &[], Timestamp::UNIX_EPOCH)
        };
        let written = [("d".to_owned(), "x.v2".to_owned()), ("e".to_owned(), "x.v2".to_owned())];
        let kept = keep_existing(on_crd, &written, lookup);
        let expected: Vec<(String, String)> = vec![("a".into(), "x.v1".into()), ("d".into(), "x.v2".into()), ("e".into(), "x.v2".into())];
        assert_eq!(kept, annotations(&expected));
    }

    fn plan(csv: &str, phase: &str, installed_at: Timestamp) -> Arc<InstallPlan> {
        let plan = serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
            "metadata": {"name": "install-abcde", "namespace": "a"},
            "spec": {"clusterServiceVersionNames": [csv], "approval": "Automatic", "approved": true},
            "status": {"phase": phase, "catalogSources": [],
                       "conditions": [{"type": "Installed", "status": "True", "lastTransitionTime": installed_at.to_string()}]},
        });
        Arc::new(serde_json::from_value(plan).expect("a valid InstallPlan"))
    }

    #[test]
    fn a_csv_its_plan_is_still_to_create_keeps_its_annotation() {
        // Another install writes the shared CRD after this one's CRD step, before its CSV step
        // (or before the cache has the CSV): its annotation must stay.
        let now: Timestamp = "2026-11-29T12:00:00Z".parse().expect("a timestamp");
        let earlier = |secs: i64| now - k8s_openapi::jiff::SignedDuration::from_secs(secs);
        assert!(still_installed("x.v1", None, &[plan("x.v1", "Installing", earlier(0))], now), "its plan is installing");
        assert!(still_installed("x.v1", None, &[plan("x.v1", "RequiresApproval", earlier(0))], now));
        assert!(still_installed("x.v1", None, &[plan("x.v1", "Complete", earlier(5))], now), "the cache has the plan, not yet the CSV");
        assert!(!still_installed("x.v1", None, &[plan("x.v1", "Complete", earlier(300))], now), "the CSV was deleted since");
        assert!(!still_installed("x.v1", None, &[plan("x.v1", "Failed", earlier(0))], now), "its plan failed");
        assert!(!still_installed("x.v1", None, &[plan("x.v2", "Installing", earlier(0))], now), "the plan installs another CSV");
        assert!(!still_installed("x.v1", None, &[], now));
        assert!(!still_installed("x.v1", Some(csv("a", "x.v1", true)), &[plan("x.v1", "Installing", earlier(0))], now), "a copy is no install");
    }
}
