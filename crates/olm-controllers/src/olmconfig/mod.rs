//! The OLMConfig status controller: reports on the `cluster` singleton whether the copied CSVs
//! of all-namespaces operators are as `spec.features.disableCopiedCSVs` wants them (condition
//! `DisabledCopiedCSVs`, upstream's reasons and messages). The copies themselves are made and
//! removed by the CSV controller; this one only observes, so it runs with it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use olm_api::keys;
use olm_api::v1::olm_config::{
    COPIED_CSVS_DISABLED_REASON, COPIED_CSVS_ENABLED_REASON, DISABLED_COPIED_CSVS_CONDITION, OLM_CONFIG_NAME, OLMConfig,
    OLMConfigStatus,
};
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use tracing::instrument;

use olm_runtime::{Cache, ControllerContext, Decision, Result, error_policy, guarded};

/// Controller name: metric label, field manager `olm/olmconfig`.
pub const NAME: &str = "olmconfig";

/// How many CSVs a message names before it says "and N more".
const NAMED_IN_MESSAGE: usize = 3;

/// The caches the OLMConfig controller reads.
#[derive(Clone)]
pub struct OlmConfigState {
    /// OLMConfigs (only `cluster` is read).
    pub olm_configs: Cache<OLMConfig>,
    /// Every ClusterServiceVersion, copies included.
    pub csvs: Cache<ClusterServiceVersion>,
    /// Every Namespace.
    pub namespaces: Cache<Namespace>,
    /// When the last pass started.
    pub pace: Pace,
}

/// Passes start at most this often. The status sums up every copy in the cluster and any CSV
/// change wakes it: while 50,000 copies were written at 10,000 namespaces it ran 13,075 passes
/// of 53 ms each, most of a core. Changes arriving meanwhile are taken together by the next.
const PACE: std::time::Duration = std::time::Duration::from_secs(2);

/// The start of the last pass, so that the next one waits for the rest of its interval.
#[derive(Clone)]
pub struct Pace {
    every: std::time::Duration,
    last: Arc<std::sync::Mutex<Option<tokio::time::Instant>>>,
}

impl Default for Pace {
    fn default() -> Self {
        Self::every(PACE)
    }
}

impl Pace {
    /// Passes starting at most once per `every`.
    pub fn every(every: std::time::Duration) -> Self {
        Self { every, last: Arc::default() }
    }

    /// Wait until the interval has passed since the last pass started (at once after a quiet
    /// moment), and note this pass's start.
    async fn begin(&self) {
        let last = *self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(last) = last {
            tokio::time::sleep_until(last + self.every).await;
        }
        *self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(tokio::time::Instant::now());
    }
}

/// An all-namespaces operator's CSV and how its copies stand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopiedOperator {
    /// `namespace/name` of the original CSV.
    pub csv: String,
    /// Namespaces that should hold a copy (when copies are enabled).
    pub expected: BTreeSet<String>,
    /// Namespaces that hold a copy.
    pub present: BTreeSet<String>,
}

/// What the controller observed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    /// `spec.features.disableCopiedCSVs` of the singleton.
    pub copies_disabled: bool,
    /// Every all-namespaces operator.
    pub operators: Vec<CopiedOperator>,
}

/// Whether a CSV is an operator installed for all namespaces whose copies OLM keeps: a
/// non-copied CSV of its group's namespace targeting `""`, in a phase that is copied.
fn is_copied_all_namespaces_operator(csv: &ClusterServiceVersion) -> bool {
    let namespace = csv.namespace().unwrap_or_default();
    !csv.is_copied()
        && csv.status.as_ref().is_some_and(crate::metadata::is_copiable)
        && csv.annotation(keys::TARGET_NAMESPACES_ANNOTATION) == Some("")
        && csv.annotation(keys::OPERATOR_NAMESPACE_ANNOTATION) == Some(namespace.as_str())
}

/// Build [`Observed`] from plain lists (pure, so it is tested without a cluster).
pub fn observe(config: &OLMConfig, csvs: &[Arc<ClusterServiceVersion>], active_namespaces: &BTreeSet<String>) -> Observed {
    // Namespaces where a CSV of that name exists that is not a copy from `origin` (an
    // operator installed there, or another namespace's copy): the CSV controller never
    // overwrites those, so no copy is expected there.
    let mut holders: BTreeMap<&str, Vec<(String, Option<String>)>> = BTreeMap::new();
    for csv in csvs {
        let origin = csv.is_copied().then(|| csv.labels().get(keys::COPIED_FROM_LABEL).cloned()).flatten();
        holders.entry(csv.metadata.name.as_deref().unwrap_or_default()).or_default().push((csv.namespace().unwrap_or_default(), origin));
    }
    let mut operators: Vec<CopiedOperator> = csvs
        .iter()
        .filter(|csv| is_copied_all_namespaces_operator(csv))
        .map(|csv| {
            let own = csv.namespace().unwrap_or_default();
            let name = csv.name_any();
            let same_name = holders.get(name.as_str()).map(Vec::as_slice).unwrap_or_default();
            let present: BTreeSet<String> = same_name
                .iter()
                .filter(|(_, origin)| origin.as_deref() == Some(own.as_str()))
                .map(|(ns, _)| ns.clone())
                .collect();
            let taken: BTreeSet<&str> = same_name
                .iter()
                .filter(|(ns, origin)| *ns != own && origin.as_deref() != Some(own.as_str()))
                .map(|(ns, _)| ns.as_str())
                .collect();
            let expected = active_namespaces
                .iter()
                .filter(|ns| **ns != own && !taken.contains(ns.as_str()))
                .cloned()
                .collect();
            CopiedOperator {
                csv: format!("{own}/{name}"),
                expected,
                present,
            }
        })
        .collect();
    operators.sort_by(|a, b| a.csv.cmp(&b.csv));
    Observed {
        copies_disabled: config.copied_csvs_disabled(),
        operators,
    }
}

/// Names of at most [`NAMED_IN_MESSAGE`] items, then "and N more".
fn name_some(items: &[String]) -> String {
    let mut named = items.iter().take(NAMED_IN_MESSAGE).cloned().collect::<Vec<_>>().join(", ");
    if items.len() > NAMED_IN_MESSAGE {
        named.push_str(&format!(" and {} more", items.len() - NAMED_IN_MESSAGE));
    }
    named
}

/// The `DisabledCopiedCSVs` condition for what was observed. The status and reason strings
/// are upstream's and so is the start of every message; when something is off, the message
/// goes on to name the CSVs concerned, so nobody has to list copies by hand to find them. It
/// names them without counting their copies: a count changes with every copy written or
/// removed, and each change was a status write (4,040 while 50,000 copies were made at
/// 10,000 namespaces).
pub fn copied_csvs_condition(observed: &Observed) -> (String, &'static str, String) {
    if observed.copies_disabled {
        let offenders: Vec<String> = observed
            .operators
            .iter()
            .filter(|op| !op.present.is_empty())
            .map(|op| op.csv.clone())
            .collect();
        if offenders.is_empty() {
            (
                "True".into(),
                COPIED_CSVS_DISABLED_REASON,
                "Copied CSVs are disabled and no unexpected copied CSVs were found for operators installed in AllNamespace mode".into(),
            )
        } else {
            (
                "False".into(),
                COPIED_CSVS_DISABLED_REASON,
                format!(
                    "Copied CSVs are disabled and at least one unexpected copied CSV was found for an operator installed in AllNamespace mode: {}; OLM is removing them",
                    name_some(&offenders)
                ),
            )
        }
    } else {
        let short: Vec<String> = observed
            .operators
            .iter()
            .filter(|op| !op.expected.is_subset(&op.present))
            .map(|op| op.csv.clone())
            .collect();
        if short.is_empty() {
            ("False".into(), COPIED_CSVS_ENABLED_REASON, "Copied CSVs are enabled and present across the cluster".into())
        } else {
            (
                "False".into(),
                COPIED_CSVS_ENABLED_REASON,
                format!(
                    "Copied CSVs are enabled and at least one copied CSVs is missing: {}; OLM is copying them",
                    name_some(&short)
                ),
            )
        }
    }
}

/// Pure decision: the singleton's desired status. `lastTransitionTime` moves only when the
/// condition's status changes; other conditions are kept as they are.
pub fn decide(config: &OLMConfig, observed: &Observed, now: Timestamp) -> Decision<(), OLMConfigStatus> {
    let (status, reason, message) = copied_csvs_condition(observed);
    let existing = config.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    let previous = existing.iter().find(|c| c.type_ == DISABLED_COPIED_CSVS_CONDITION);
    let last_transition_time = match previous {
        Some(p) if p.status == status => p.last_transition_time.clone(),
        _ => Time(now),
    };
    let condition = Condition {
        type_: DISABLED_COPIED_CSVS_CONDITION.into(),
        status,
        reason: reason.into(),
        message,
        last_transition_time,
        observed_generation: config.metadata.generation,
    };
    let mut conditions: Vec<Condition> = existing.into_iter().filter(|c| c.type_ != DISABLED_COPIED_CSVS_CONDITION).collect();
    conditions.push(condition);
    Decision::status(OLMConfigStatus {
        conditions: Some(conditions),
    })
}

/// What [`observe`] reads, from the CSV cache's indexes: the CSVs that are no copy, and the
/// copies of those named like an all-namespaces operator. A pass over every CSV ran for each
/// CSV written: 50,000 copies at 10,000 namespaces, each pass over 51,000 CSVs.
fn copy_relevant_csvs(csvs: &olm_runtime::Cache<ClusterServiceVersion>) -> Vec<Arc<ClusterServiceVersion>> {
    let mut relevant = crate::csv_index::originals(csvs, |_| true);
    let copied: BTreeSet<String> = relevant.iter().filter(|c| is_copied_all_namespaces_operator(c)).map(|c| c.name_any()).collect();
    let namesakes: Vec<(String, String)> = relevant
        .iter()
        .filter(|c| copied.contains(&c.name_any()))
        .map(|c| (c.namespace().unwrap_or_default(), c.name_any()))
        .collect();
    for (namespace, name) in namesakes {
        relevant.extend(crate::csv_index::copies_of(csvs, &namespace, &name));
    }
    relevant
}

#[instrument(skip_all, fields(kind = "OLMConfig", namespace = "", name = %config.name_any()))]
async fn reconcile(config: Arc<OLMConfig>, ctx: Arc<ControllerContext<OlmConfigState>>) -> Result<Action> {
    if config.name_any() != OLM_CONFIG_NAME || config.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let state = &ctx.state;
    state.pace.begin().await;
    let active: BTreeSet<String> = state
        .namespaces
        .list()
        .iter()
        .filter(|ns| ns.metadata.deletion_timestamp.is_none())
        .map(|ns| ns.name_any())
        .collect();
    let observed = observe(&config, &copy_relevant_csvs(&state.csvs), &active);
    let decision = decide(&config, &observed, Timestamp::now());
    if let Some(status) = &decision.status {
        ctx.status.apply_cluster(config.as_ref(), status).await?;
    }
    Ok(Action::await_change())
}

/// Build the OLMConfig controller; it subscribes to the caches now (call this before the
/// caches start) and runs, once every cache it reads has synced, until `shutdown` resolves.
pub fn run(
    ctx: Arc<ControllerContext<OlmConfigState>>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let state = ctx.state.clone();
    let singleton = || vec![ObjectRef::<OLMConfig>::new(OLM_CONFIG_NAME)];
    let controller = Controller::for_shared_stream(state.olm_configs.subscribe(), state.olm_configs.store().clone())
        .with_config(olm_runtime::controller::controller_config())
        // Any CSV or namespace change can add or remove an expected copy. Requests for the one
        // singleton are deduplicated by the controller's queue.
        .watches_shared_stream(state.csvs.subscribe(), move |_csv: Arc<ClusterServiceVersion>| singleton())
        .watches_shared_stream(state.namespaces.subscribe(), move |_ns: Arc<Namespace>| singleton())
        .reconcile_all_on(ctx.leadership.gained())
        .graceful_shutdown_on(shutdown);
    async move {
        state.olm_configs.synced().await;
        state.csvs.synced().await;
        state.namespaces.synced().await;
        controller
            .run(|config, ctx| guarded(config, ctx, reconcile), error_policy, ctx)
            .for_each(|_| futures::future::ready(()))
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use olm_api::v1::olm_config::{Features, OLMConfigSpec};
    use olm_api::v1alpha1::cluster_service_version::{ClusterServiceVersionStatus, CsvPhase, CsvReason};

    fn config(disabled: Option<bool>) -> OLMConfig {
        let mut config = OLMConfig::new(
            OLM_CONFIG_NAME,
            OLMConfigSpec {
                features: Some(Features {
                    disable_copied_csvs: disabled,
                    package_server_sync_interval: None,
                }),
            },
        );
        config.metadata.generation = Some(3);
        config
    }

    fn csv(namespace: &str, name: &str, targets: &str, phase: CsvPhase) -> Arc<ClusterServiceVersion> {
        let mut csv = ClusterServiceVersion::new(name, Default::default());
        csv.metadata.namespace = Some(namespace.into());
        csv.metadata.annotations = Some(
            [
                (keys::TARGET_NAMESPACES_ANNOTATION.to_string(), targets.to_string()),
                (keys::OPERATOR_NAMESPACE_ANNOTATION.to_string(), namespace.to_string()),
            ]
            .into(),
        );
        csv.status = Some(ClusterServiceVersionStatus {
            phase: Some(phase),
            ..Default::default()
        });
        Arc::new(csv)
    }

    fn copy(origin: &str, namespace: &str, name: &str) -> Arc<ClusterServiceVersion> {
        let mut c = (*csv(namespace, name, "", CsvPhase::Succeeded)).clone();
        c.metadata.labels = Some([(keys::COPIED_FROM_LABEL.to_string(), origin.to_string())].into());
        c.status = Some(ClusterServiceVersionStatus {
            phase: Some(CsvPhase::Succeeded),
            reason: Some(CsvReason::Copied),
            ..Default::default()
        });
        Arc::new(c)
    }

    fn namespaces(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn enabled_and_every_copy_present() {
        let csvs = vec![
            csv("operators", "etcd.v1", "", CsvPhase::Succeeded),
            copy("operators", "a", "etcd.v1"),
            copy("operators", "b", "etcd.v1"),
        ];
        let observed = observe(&config(None), &csvs, &namespaces(&["operators", "a", "b"]));
        let (status, reason, message) = copied_csvs_condition(&observed);
        assert_eq!((status.as_str(), reason), ("False", "CopiedCSVsEnabled"));
        assert_eq!(message, "Copied CSVs are enabled and present across the cluster");
    }

    #[test]
    fn enabled_with_a_missing_copy_names_the_operator() {
        let csvs = vec![csv("operators", "etcd.v1", "", CsvPhase::Succeeded), copy("operators", "a", "etcd.v1")];
        let observed = observe(&config(Some(false)), &csvs, &namespaces(&["operators", "a", "b"]));
        let (status, reason, message) = copied_csvs_condition(&observed);
        assert_eq!((status.as_str(), reason), ("False", "CopiedCSVsEnabled"));
        assert!(message.starts_with("Copied CSVs are enabled and at least one copied CSVs is missing"), "{message}");
        assert!(message.ends_with(": operators/etcd.v1; OLM is copying them"), "{message}");
        // The message does not move while copies are written: one status write, not one a copy.
        let more = vec![csv("operators", "etcd.v1", "", CsvPhase::Succeeded), copy("operators", "a", "etcd.v1"), copy("operators", "b", "etcd.v1")];
        let later = observe(&config(Some(false)), &more, &namespaces(&["operators", "a", "b", "c", "d"]));
        assert_eq!(copied_csvs_condition(&later).2, message);
    }

    #[test]
    fn a_namespace_holding_its_own_csv_of_that_name_expects_no_copy() {
        let csvs = vec![
            csv("operators", "etcd.v1", "", CsvPhase::Succeeded),
            copy("operators", "a", "etcd.v1"),
            csv("b", "etcd.v1", "b", CsvPhase::Succeeded),
        ];
        let observed = observe(&config(None), &csvs, &namespaces(&["operators", "a", "b"]));
        assert_eq!(observed.operators.len(), 1, "only the all-namespaces operator counts: {observed:?}");
        assert_eq!(observed.operators[0].expected, namespaces(&["a"]));
        assert_eq!(copied_csvs_condition(&observed).2, "Copied CSVs are enabled and present across the cluster");
    }

    /// The controller reads the CSVs through the cache's indexes: what it observes is what
    /// every CSV of the cluster shows (a copy of another name, an own-namespace install of the
    /// same name, and the copies of that one, included or not).
    #[test]
    fn the_indexed_read_observes_what_every_csv_shows() {
        let csvs = vec![
            csv("operators", "etcd.v1", "", CsvPhase::Succeeded),
            copy("operators", "a", "etcd.v1"),
            csv("b", "etcd.v1", "b,c", CsvPhase::Succeeded),
            copy("b", "c", "etcd.v1"),
            csv("team", "other.v1", "team", CsvPhase::Succeeded),
            copy("elsewhere", "a", "other.v1"),
        ];
        let cache = Cache::holding(csvs.iter().map(|c| (**c).clone()));
        crate::csv_index::index(&cache);
        let active = namespaces(&["operators", "a", "b", "c", "d", "team"]);
        let relevant = copy_relevant_csvs(&cache);
        assert_eq!(relevant.len(), 5, "every CSV but the copy of other.v1");
        let (indexed, full) = (observe(&config(None), &relevant, &active), observe(&config(None), &csvs, &active));
        assert_eq!(format!("{indexed:?}"), format!("{full:?}"));
        assert_eq!(indexed.operators[0].expected, namespaces(&["a", "d", "team"]), "b holds its own, c b's copy");
    }

    #[tokio::test]
    async fn a_pass_right_after_another_waits_for_the_interval_and_one_after_a_quiet_moment_does_not() {
        let pace = Pace::every(std::time::Duration::from_millis(300));
        let started = std::time::Instant::now();
        pace.begin().await;
        pace.begin().await;
        assert!(started.elapsed() >= std::time::Duration::from_millis(290), "{:?}", started.elapsed());
        tokio::time::sleep(std::time::Duration::from_millis(400)).await;
        let quiet = std::time::Instant::now();
        pace.begin().await;
        assert!(quiet.elapsed() < std::time::Duration::from_millis(250), "{:?}", quiet.elapsed());
    }

    #[test]
    fn disabled_without_copies_is_true() {
        let csvs = vec![csv("operators", "etcd.v1", "", CsvPhase::Succeeded)];
        let observed = observe(&config(Some(true)), &csvs, &namespaces(&["operators", "a"]));
        let (status, reason, message) = copied_csvs_condition(&observed);
        assert_eq!((status.as_str(), reason), ("True", "CopiedCSVsDisabled"));
        assert_eq!(
            message,
            "Copied CSVs are disabled and no unexpected copied CSVs were found for operators installed in AllNamespace mode"
        );
    }

    #[test]
    fn disabled_with_a_leftover_copy_is_false_and_names_it() {
        let csvs = vec![csv("operators", "etcd.v1", "", CsvPhase::Succeeded), copy("operators", "a", "etcd.v1")];
        let observed = observe(&config(Some(true)), &csvs, &namespaces(&["operators", "a"]));
        let (status, reason, message) = copied_csvs_condition(&observed);
        assert_eq!((status.as_str(), reason), ("False", "CopiedCSVsDisabled"));
        assert!(message.contains(": operators/etcd.v1; OLM is removing them"), "{message}");
    }

    #[test]
    fn own_namespace_operators_and_uncopiable_csvs_do_not_count() {
        let mut failed = (*csv("operators", "broken.v1", "", CsvPhase::Failed)).clone();
        if let Some(status) = failed.status.as_mut() {
            status.reason = Some(CsvReason::TooManyOperatorGroups);
        }
        let csvs = vec![csv("team", "etcd.v1", "team", CsvPhase::Succeeded), Arc::new(failed)];
        let observed = observe(&config(None), &csvs, &namespaces(&["operators", "team", "a"]));
        assert!(observed.operators.is_empty(), "{observed:?}");
    }

    #[test]
    fn transition_time_moves_only_when_the_status_flips() {
        let csvs = vec![csv("operators", "etcd.v1", "", CsvPhase::Succeeded)];
        let earlier = Timestamp::from_second(1_700_000_000).unwrap_or(Timestamp::UNIX_EPOCH);
        let later = Timestamp::from_second(1_800_000_000).unwrap_or(Timestamp::UNIX_EPOCH);

        let mut cfg = config(None);
        let first = decide(&cfg, &observe(&cfg, &csvs, &namespaces(&["operators"])), earlier);
        cfg.status = first.status.clone();
        let same = decide(&cfg, &observe(&cfg, &csvs, &namespaces(&["operators"])), later);
        let condition = |d: &Decision<(), OLMConfigStatus>| {
            d.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default().remove(0)
        };
        assert_eq!(condition(&same).last_transition_time, Time(earlier));
        assert_eq!(condition(&same).observed_generation, Some(3));

        let mut disabled = config(Some(true));
        disabled.status = first.status.clone();
        let flipped = decide(&disabled, &observe(&disabled, &csvs, &namespaces(&["operators"])), later);
        assert_eq!(condition(&flipped).status, "True");
        assert_eq!(condition(&flipped).last_transition_time, Time(later));
    }
}
