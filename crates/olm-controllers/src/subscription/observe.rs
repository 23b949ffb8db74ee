//! Observe, for one Subscription: the Subscription itself, its namespace's other
//! Subscriptions and installed CSVs, the catalogs visible from the namespace with their
//! content, and the InstallPlan and CSV it references.

use std::collections::HashMap;
use std::sync::Arc;

use kube::{Api, Resource, ResourceExt};
use olm_api::keys;
use olm_api::v1::operator_group::OperatorGroup;
use olm_api::v1alpha1::catalog_source::CatalogSource;
use olm_api::v1alpha1::cluster_service_version::{ClusterServiceVersion, CsvPhase, InstallModeType};
use olm_api::v1alpha1::install_plan::{InstallPlan, InstallPlanConditionType, InstallPlanPhase};
use olm_api::v1alpha1::subscription::Subscription;
use olm_catalog_client::CatalogContent;
use olm_resolver::CatalogKey;
use olm_runtime::{ControllerContext, Error, Result};

use super::decide::{CatalogView, CsvView, PlanView};
use super::state::SubscriptionControllerState;

/// What one reconcile of a Subscription works from.
pub struct Facts {
    /// The Subscription (from the cache, caught up with this controller's writes).
    pub sub: Subscription,
    /// The other Subscriptions of its namespace and this one, sorted by name: resolution
    /// covers the whole namespace.
    pub subs: Vec<Arc<Subscription>>,
    /// The namespace's CSVs.
    pub csvs: Vec<Arc<ClusterServiceVersion>>,
    /// Catalogs visible from the namespace, sorted by namespace and name.
    pub catalogs: Vec<CatalogView>,
    /// The content of those that have been read.
    pub contents: HashMap<CatalogKey, Arc<CatalogContent>>,
    /// The InstallPlan `status.installPlanRef` names, when it exists.
    pub plan: Option<PlanView>,
    /// A plan is referenced but does not exist.
    pub plan_missing: bool,
    /// The current CSV, when it exists in the namespace (copies do not count).
    pub current: Option<CsvView>,
    /// The namespace whose catalogs every namespace sees.
    pub global_namespace: String,
    /// The generation the namespace's next InstallPlan gets.
    pub next_plan_generation: i64,
    /// How long unpacking a bundle may take, and how soon a failed one is tried again (the
    /// namespace's OperatorGroup annotations, as upstream).
    pub unpack: UnpackSettings,
    /// The namespace's one OperatorGroup and the install modes its targets ask of an operator.
    pub group_modes: Option<GroupModes>,
    /// The namespace's one OperatorGroup has `upgradeStrategy: TechPreviewUnsafeFailForward`.
    pub fail_forward: bool,
}

/// Whether the namespace's one OperatorGroup lets failed upgrades be replaced by newer ones
/// (upstream's `IsFailForwardEnabled`: none with several groups).
pub fn fail_forward(groups: &[Arc<OperatorGroup>]) -> bool {
    matches!(groups, [group] if group.spec.upgrade_strategy() == olm_api::v1::operator_group::UpgradeStrategy::TechPreviewUnsafeFailForward)
}

/// An OperatorGroup and the install modes its resolved targets ask of its operators.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupModes {
    /// The group's name.
    pub group: String,
    /// `AllNamespaces`; `OwnNamespace`; `SingleNamespace`; or `MultiNamespace` (with
    /// `OwnNamespace` when the own namespace is a target), as the CSV controller checks them.
    pub modes: Vec<String>,
}

impl GroupModes {
    /// What the one group of `namespace` asks for; `None` with no group, several, or targets
    /// not known yet (nothing is then held back: the CSV controller says what is wrong).
    /// Targets are the group's status, or, before its controller wrote one, its spec's
    /// `targetNamespaces` (none: all namespaces) when it has no selector: a group and a
    /// Subscription created together must not get a bundle the group cannot run.
    pub fn of(groups: &[Arc<OperatorGroup>], namespace: &str) -> Option<GroupModes> {
        let [group] = groups else { return None };
        let from_spec = || match &group.spec.selector {
            Some(_) => None,
            None => Some(group.spec.target_namespaces.clone().filter(|t| !t.is_empty()).unwrap_or_else(|| vec![String::new()])),
        };
        let targets = match group.status.as_ref().and_then(|s| s.namespaces.clone()) {
            Some(targets) => targets,
            None => from_spec()?,
        };
        let modes = InstallModeType::needed_for(namespace, &targets).ok()?;
        Some(GroupModes { group: group.name_any(), modes: modes.into_iter().map(|m| m.as_str().to_owned()).collect() })
    }
}

/// The OperatorGroup's bundle unpack annotations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UnpackSettings {
    /// `operatorframework.io/bundle-unpack-timeout`.
    pub timeout: Option<std::time::Duration>,
    /// `operatorframework.io/bundle-unpack-min-retry-interval`.
    pub min_retry: Option<std::time::Duration>,
}

/// The least time between two pulls of a bundle whose pull failed.
pub const MIN_UNPACK_RETRY: std::time::Duration = std::time::Duration::from_secs(10);

impl UnpackSettings {
    /// How soon a failed pull is tried again: the group's `bundle-unpack-min-retry-interval`,
    /// at least [`MIN_UNPACK_RETRY`].
    pub fn retry(&self) -> std::time::Duration {
        self.min_retry.map_or(MIN_UNPACK_RETRY, |d| d.max(MIN_UNPACK_RETRY))
    }

    /// The settings an OperatorGroup's annotations give (unparsable values are ignored, as
    /// upstream does with a log line).
    pub fn of(group: Option<&OperatorGroup>) -> UnpackSettings {
        let annotation = |key: &str| {
            group
                .and_then(|g| g.metadata.annotations.as_ref())
                .and_then(|a| a.get(key))
                .and_then(|v| olm_api::duration::parse_go_duration(v.trim()).ok())
        };
        UnpackSettings {
            timeout: annotation(keys::BUNDLE_UNPACK_TIMEOUT_ANNOTATION).filter(|d| !d.is_zero()),
            min_retry: annotation(keys::BUNDLE_UNPACK_MIN_RETRY_INTERVAL_ANNOTATION).filter(|d| !d.is_zero()),
        }
    }
}

/// The CatalogSources resolution in `namespace` reads: its own, and the global namespace's
/// unless its OperatorGroup excludes them.
fn visible_catalogs(state: &SubscriptionControllerState, namespace: &str) -> Vec<Arc<CatalogSource>> {
    let exclude_global = state.groups.list_in(namespace).iter().any(|g| {
        g.annotations()
            .get(keys::EXCLUDE_GLOBAL_NAMESPACE_RESOLUTION_ANNOTATION)
            .map(String::as_str)
            == Some("true")
    });
    state
        .catalogs
        .list()
        .into_iter()
        .filter(|catalog| {
            let catalog_namespace = catalog.namespace().unwrap_or_default();
            catalog_namespace == namespace || (catalog_namespace == state.global_namespace && !exclude_global)
        })
        .collect()
}

/// Whether one of `catalogs` has a valid source but no read yet.
fn catalogs_unread(state: &SubscriptionControllerState, catalogs: &[Arc<CatalogSource>]) -> bool {
    catalogs.iter().any(|catalog| {
        catalog.meta().deletion_timestamp.is_none()
            && olm_catalog_client::Location::of(catalog).is_ok()
            && state.content.get(&CatalogKey::new(catalog.name_any(), catalog.namespace().unwrap_or_default())).is_none()
    })
}

/// Observe the Subscription `cached` names; None when it is being deleted.
///
/// The Subscription is the cache's: a cache that has not yet caught up with this controller's
/// last status write (which may reference the plan just created: planning again would create
/// a second one) never gets here (`guarded` waits for the write's watch event). One read goes
/// to the API server: a referenced plan the cache does not have yet (our own create).
pub async fn observe(
    ctx: &ControllerContext<SubscriptionControllerState>,
    cached: &Subscription,
) -> Result<Option<Facts>> {
    let state = &ctx.state;
    let namespace = cached.namespace().unwrap_or_default();
    let name = cached.name_any();
    // Until every catalog the namespace sees has been read once by this process (at start,
    // or when a catalog is created), resolving would say "unhealthy" or "not found" only to
    // take it back a moment later: a status rewritten twice per Subscription, for every
    // Subscription, after each restart. The read's end wakes the Subscriptions again.
    let catalogs = visible_catalogs(state, &namespace);
    if catalogs_unread(state, &catalogs) {
        return Ok(None);
    }
    let sub = cached.clone();
    if sub.meta().deletion_timestamp.is_some() {
        return Ok(None);
    }
    let previous = sub.status.clone().unwrap_or_default();

    // Catalogs visible from the namespace.
    let mut views = Vec::new();
    let mut contents: HashMap<CatalogKey, Arc<CatalogContent>> = HashMap::new();
    for catalog in catalogs {
        let catalog_namespace = catalog.namespace().unwrap_or_default();
        let key = CatalogKey::new(catalog.name_any(), catalog_namespace);
        let content_state = state.content.get(&key);
        views.push(CatalogView {
            key: key.clone(),
            uid: catalog.uid(),
            healthy: content_state.as_ref().is_some_and(|s| s.healthy()),
            error: content_state.as_ref().and_then(|s| s.last_error.clone()),
        });
        if let Some(content) = content_state.and_then(|s| s.content) {
            contents.insert(key, content);
        }
    }
    views.sort_by(|a, b| (&a.key.namespace, &a.key.name).cmp(&(&b.key.namespace, &b.key.name)));

    // The referenced plan (read through when the cache lags behind our own create). A
    // Subscription an InstallPlan created (a dependency's) and that references none yet is
    // shown the plan that created it (`olm.generated-by`), as upstream.
    let generated_by = sub
        .annotations()
        .get(olm_api::keys::GENERATED_BY_ANNOTATION)
        .filter(|_| previous.install_plan_ref.is_none())
        .and_then(|name| state.plans.get(Some(&namespace), name))
        .map(|p| plan_view(&p));
    let plan_name = previous.install_plan_ref.as_ref().and_then(|r| r.name.clone());
    let (plan, plan_missing) = match &plan_name {
        Some(plan_name) => {
            let found = match state.plans.get(Some(&namespace), plan_name) {
                Some(p) => Some((*p).clone()),
                None => Api::<InstallPlan>::namespaced(ctx.client.clone(), &namespace)
                    .get_opt(plan_name)
                    .await
                    .map_err(|err| Error::api(format!("get InstallPlan {namespace}/{plan_name}"), err))?,
            };
            match found {
                Some(p) => {
                    let mut view = plan_view(&p);
                    view.write_failed = state.write_failures.get(&namespace, plan_name);
                    (Some(view), false)
                }
                None => (None, true),
            }
        }
        None => (generated_by, false),
    };
    let current = previous
        .current_csv
        .as_ref()
        .and_then(|csv| state.csvs.get(Some(&namespace), csv))
        .filter(|csv| !csv.is_copied())
        .map(|csv| CsvView {
            name: csv.name_any(),
            phase: csv.phase().cloned(),
            failure: csv.status.as_ref().filter(|s| s.phase == Some(CsvPhase::Failed)).map(|s| {
                (
                    s.reason.as_ref().map_or("Failed", |r| r.as_str()).to_owned(),
                    s.message.clone().unwrap_or_default(),
                )
            }),
        });

    let mut subs: Vec<Arc<Subscription>> = state
        .subscriptions
        .list_in(&namespace)
        .into_iter()
        .filter(|s| s.name_any() != name)
        .collect();
    subs.push(Arc::new(sub.clone()));
    subs.sort_by_key(|s| s.name_any());
    let next_plan_generation = state
        .plans
        .list_in(&namespace)
        .iter()
        .filter_map(|p| p.spec.generation)
        .max()
        .unwrap_or(0)
        + 1;
    let groups = state.groups.list_in(&namespace);
    Ok(Some(Facts {
        sub,
        subs,
        csvs: state.csvs.list_in(&namespace),
        catalogs: views,
        contents,
        plan,
        plan_missing,
        current,
        global_namespace: state.global_namespace.clone(),
        next_plan_generation,
        unpack: UnpackSettings::of(groups.first().map(AsRef::as_ref)),
        group_modes: GroupModes::of(&groups, &namespace),
        fail_forward: fail_forward(&groups),
    }))
}

pub fn plan_view(plan: &InstallPlan) -> PlanView {
    // Borrowed: a plan being installed carries every step's manifest.
    let status = plan.status.as_ref();
    let failed_reason = status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .find(|c| c.type_ == Some(InstallPlanConditionType::Installed))
        .and_then(|c| c.reason.as_ref().map(|r| r.as_str().to_owned()));
    PlanView {
        name: plan.name_any(),
        uid: plan.uid().unwrap_or_default(),
        generation: plan.spec.generation,
        phase: status.map_or(InstallPlanPhase::None, |s| s.phase.clone()),
        failed_reason,
        message: status.and_then(|s| s.message.clone()),
        write_failed: None,
        awaits_content: status.is_some_and(super::plan::awaits_content),
        bundles: plan.spec.cluster_service_version_names.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn unpack_settings_come_from_the_operator_group_annotations() {
        assert_eq!(UnpackSettings::of(None), UnpackSettings::default());
        let mut group = OperatorGroup::new("og", Default::default());
        group.metadata.annotations = Some(
            [
                (keys::BUNDLE_UNPACK_TIMEOUT_ANNOTATION.to_owned(), "2m30s".to_owned()),
                (keys::BUNDLE_UNPACK_MIN_RETRY_INTERVAL_ANNOTATION.to_owned(), "often".to_owned()),
            ]
            .into(),
        );
        let settings = UnpackSettings::of(Some(&group));
        assert_eq!(settings.timeout, Some(Duration::from_secs(150)));
        assert_eq!(settings.min_retry, None, "an unparsable value is ignored");
    }

    #[test]
    fn fail_forward_is_the_one_groups_upgrade_strategy() {
        let group = |strategy: &str| -> Arc<OperatorGroup> {
            Arc::new(serde_json::from_value(serde_json::json!({"metadata": {"name": "og"}, "spec": {"upgradeStrategy": strategy}})).expect("a group"))
        };
        assert!(fail_forward(&[group("TechPreviewUnsafeFailForward")]));
        assert!(!fail_forward(&[group("Default")]));
        assert!(!fail_forward(&[group("TechPreviewUnsafeFailForward"), group("TechPreviewUnsafeFailForward")]), "several groups: none");
        assert!(!fail_forward(&[]));
    }
}
