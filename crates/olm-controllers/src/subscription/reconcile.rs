//! Observe → decide → act for Subscriptions. Each reconcile resolves the Subscription's whole
//! namespace (every Subscription and installed operator constrains the others) under a
//! per-namespace lock, but acts only for the Subscription at hand: its own InstallPlan, its
//! own conditions.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Resource, ResourceExt};
use olm_api::keys;
use olm_api::v1::operator_group::OperatorGroup;
use olm_api::v1alpha1::catalog_source::CatalogSource;
use olm_api::v1alpha1::cluster_service_version::{ClusterServiceVersion, CsvPhase};
use olm_api::v1alpha1::install_plan::{
    Approval, BundleLookup, InstallPlan, InstallPlanConditionType, InstallPlanPhase, InstallPlanSpec, InstallPlanStatus, Step,
    StepResource, StepStatus,
};
use olm_api::v1alpha1::subscription::{Subscription, SubscriptionConditionType, reasons};
use olm_resolver::{CatalogKey, Catalogs, Installed, Reason, Request, Selected};
use serde_json::{Value, json};
use tracing::instrument;

use super::decide::{self, CatalogView, CsvView, Deprecations, Gate, Observed, PlanView, Resolved};
use olm_catalog_client::CatalogCache;
use crate::catalog_metrics::SubscriptionSyncLabels;
use crate::plan_steps::{StepSource, bundle_steps};
use olm_catalog_client::CatalogContent;
use olm_runtime::controller::action_for;
use olm_runtime::{Cache, ControllerContext, Error, EventNote, Result, error_policy, guarded};

/// Controller name: metric label, field manager `olm/subscription`.
pub const NAME: &str = "subscription";

/// How soon to try again when the targeted catalog cannot be read (its recovery also
/// triggers a reconcile at once).
const CATALOG_RETRY: Duration = Duration::from_secs(30);
/// How soon to try again when fetching bundle content failed.
const CONTENT_RETRY: Duration = Duration::from_secs(10);

/// One async lock per namespace, so two reconciles never plan for the same namespace at once.
#[derive(Clone, Default)]
pub struct NamespaceLocks(Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>);

impl NamespaceLocks {
    fn get(&self, namespace: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.0.lock().unwrap_or_else(|p| p.into_inner());
        locks.entry(namespace.to_owned()).or_default().clone()
    }
}

/// What the Subscription controller reads.
#[derive(Clone)]
pub struct SubscriptionControllerState {
    /// Every Subscription.
    pub subscriptions: Cache<Subscription>,
    /// Every InstallPlan.
    pub plans: Cache<InstallPlan>,
    /// Every ClusterServiceVersion.
    pub csvs: Cache<ClusterServiceVersion>,
    /// Every CatalogSource.
    pub catalogs: Cache<CatalogSource>,
    /// Every OperatorGroup.
    pub groups: Cache<OperatorGroup>,
    /// Catalog content, filled by the CatalogSource controller.
    pub content: CatalogCache,
    /// The namespace whose catalogs every namespace sees (`olm` upstream).
    pub global_namespace: String,
    /// Per-namespace planning locks.
    pub locks: NamespaceLocks,
    /// The catalog-operator metrics.
    pub metrics: crate::catalog_metrics::CatalogMetrics,
}

/// The package of an installed CSV, from its `operatorframework.io/properties` annotation.
pub fn package_of(csv: &ClusterServiceVersion) -> Option<String> {
    let text = csv.annotations().get(keys::PROPERTIES_ANNOTATION)?;
    let value: Value = serde_json::from_str(text).ok()?;
    value
        .get("properties")?
        .as_array()?
        .iter()
        .find(|p| p.get("type") == Some(&json!("olm.package")))
        .and_then(|p| p.pointer("/value/packageName"))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

fn plan_view(plan: &InstallPlan) -> PlanView {
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
    }
}

/// Installed operators and the resolver's Subscriptions for `namespace`. Returns the request
/// and, per Subscription name, the installed CSV it owns (by status or adoption).
fn build_request(
    namespace: &str,
    global_namespace: &str,
    subs: &[Arc<Subscription>],
    csvs: &[Arc<ClusterServiceVersion>],
    catalogs: &Catalogs,
) -> (Request, HashMap<String, String>) {
    let replaced: HashSet<String> = csvs.iter().filter_map(|c| c.spec.replaces.clone()).collect();
    let live: Vec<&Arc<ClusterServiceVersion>> = csvs
        .iter()
        .filter(|c| !c.is_copied())
        .filter(|c| !matches!(c.phase(), Some(CsvPhase::Replacing | CsvPhase::Deleting)))
        .filter(|c| !replaced.contains(&c.name_any()))
        .collect();
    let mut owner: HashMap<String, String> = HashMap::new();
    let mut owned_csv: HashMap<String, String> = HashMap::new();
    for sub in subs {
        let status = sub.status.clone().unwrap_or_default();
        for name in [status.installed_csv, status.current_csv].into_iter().flatten() {
            if live.iter().any(|c| c.name_any() == name) && !owner.contains_key(&name) {
                owner.insert(name.clone(), sub.name_any());
                owned_csv.insert(sub.name_any(), name);
                break;
            }
        }
    }
    // A Subscription without a current CSV takes over an installed CSV of its package.
    for sub in subs {
        let has_current = sub.status.as_ref().and_then(|s| s.current_csv.as_ref()).is_some();
        if has_current || owned_csv.contains_key(&sub.name_any()) {
            continue;
        }
        if let Some(csv) = live
            .iter()
            .find(|c| !owner.contains_key(&c.name_any()) && package_of(c).as_deref() == Some(sub.spec.name.as_str()))
        {
            owner.insert(csv.name_any(), sub.name_any());
            owned_csv.insert(sub.name_any(), csv.name_any());
        }
    }
    let mut request = Request::new(namespace);
    request.global_namespace = global_namespace.to_owned();
    for csv in &live {
        let name = csv.name_any();
        let owning = owner.get(&name).and_then(|s| subs.iter().find(|sub| &sub.name_any() == s));
        let package = package_of(csv).or_else(|| owning.map(|s| s.spec.name.clone())).unwrap_or_default();
        let catalog = owning.map(|s| decide::target(s));
        let version = csv
            .spec
            .version
            .as_deref()
            .and_then(|v| olm_catalog::version::parse_version(v).ok());
        request
            .installed
            .push(Installed::from_catalogs(catalogs, &name, &package, catalog.as_ref(), version));
    }
    for sub in subs {
        request.subscriptions.push(olm_resolver::Subscription {
            name: sub.name_any(),
            package: sub.spec.name.clone(),
            channel: sub.spec.channel.clone().filter(|c| !c.is_empty()),
            catalog: decide::target(sub),
            starting_csv: sub.spec.starting_csv.clone().filter(|c| !c.is_empty()),
            installed_csv: owned_csv.get(&sub.name_any()).cloned(),
        });
    }
    (request, owned_csv)
}

fn catalog_unavailable(target: &CatalogKey, views: &[CatalogView]) -> String {
    match views.iter().find(|v| &v.key == target) {
        Some(view) => format!(
            "catalog {} cannot be read: {}; resolution of this subscription resumes when it is back",
            target,
            view.error.clone().unwrap_or_else(|| "not read yet".into())
        ),
        None => {
            let known: Vec<String> = views.iter().map(|v| v.key.to_string()).collect();
            format!(
                "CatalogSource {} (spec.source, spec.sourceNamespace) does not exist; catalogs visible from this namespace: {}",
                target,
                if known.is_empty() { "none".to_owned() } else { known.join(", ") }
            )
        }
    }
}

fn dependency_subscription_step(bundle: &Selected, namespace: &str) -> Step {
    let name = format!(
        "{}-{}-{}-{}",
        bundle.package, bundle.channel, bundle.catalog.name, bundle.catalog.namespace
    );
    let manifest = json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "source": bundle.catalog.name, "sourceNamespace": bundle.catalog.namespace,
            "name": bundle.package, "channel": bundle.channel, "startingCSV": bundle.name,
            "installPlanApproval": "Automatic",
        },
    });
    Step {
        resolving: bundle.name.clone(),
        resource: StepResource {
            source_name: bundle.catalog.name.clone(),
            source_namespace: bundle.catalog.namespace.clone(),
            group: "operators.coreos.com".into(),
            version: "v1alpha1".into(),
            kind: "Subscription".into(),
            name,
            manifest: Some(manifest.to_string()),
        },
        optional: None,
        status: StepStatus::Unknown,
    }
}

/// Fetch the bundles' manifests, create the InstallPlan and write its plan. Errors that come
/// from catalog content are returned as `Ok(Err(message))`.
async fn create_plan(
    ctx: &ControllerContext<SubscriptionControllerState>,
    sub: &Subscription,
    bundles: &[&Selected],
    contents: &HashMap<CatalogKey, Arc<CatalogContent>>,
    subs: &[Arc<Subscription>],
    now: Timestamp,
) -> Result<std::result::Result<PlanView, String>> {
    let namespace = sub.namespace().unwrap_or_default();
    let mut steps = Vec::new();
    let mut lookups = Vec::new();
    let mut catalogs_used = BTreeSet::new();
    for bundle in bundles {
        let Some(content) = contents.get(&bundle.catalog) else {
            return Ok(Err(format!(
                "catalog {} of bundle {} is not available",
                bundle.catalog, bundle.name
            )));
        };
        let fetched = match content.bundle(&bundle.package, &bundle.channel, &bundle.name).await {
            Ok(fetched) => fetched,
            Err(err) => {
                return Ok(Err(format!(
                    "cannot read bundle {} from catalog {}: {err}",
                    bundle.name, bundle.catalog
                )));
            }
        };
        let source = StepSource {
            catalog: bundle.catalog.name.clone(),
            catalog_namespace: bundle.catalog.namespace.clone(),
        };
        match bundle_steps(&fetched, &source, &namespace) {
            Ok(more) => steps.extend(more),
            Err(message) => {
                return Ok(Err(format!(
                    "bundle {} from catalog {} cannot be installed: {message}",
                    bundle.name, bundle.catalog
                )));
            }
        }
        if bundle.reason == Reason::Dependency && !subs.iter().any(|s| s.spec.name == bundle.package) {
            steps.push(dependency_subscription_step(bundle, &namespace));
        }
        catalogs_used.insert(bundle.catalog.name.clone());
        lookups.push(BundleLookup {
            path: fetched.bundle_path.clone(),
            identifier: bundle.name.clone(),
            replaces: bundle.replaces.clone().unwrap_or_default(),
            catalog_source_ref: Some(ObjectReference {
                api_version: Some("operators.coreos.com/v1alpha1".into()),
                kind: Some("CatalogSource".into()),
                name: Some(bundle.catalog.name.clone()),
                namespace: Some(bundle.catalog.namespace.clone()),
                ..Default::default()
            }),
            // Content came straight from the catalog server: nothing pending, nothing failed.
            conditions: None,
            properties: Some(fetched.properties_annotation.clone()),
        });
    }
    let generation = ctx
        .state
        .plans
        .list_in(&namespace)
        .iter()
        .filter_map(|p| p.spec.generation)
        .max()
        .unwrap_or(0)
        + 1;
    let approval = sub.spec.approval();
    let approved = approval == Approval::Automatic;
    let plan = InstallPlan {
        metadata: ObjectMeta {
            name: Some(plan_name(sub, bundles)),
            namespace: Some(namespace.clone()),
            owner_references: Some(vec![OwnerReference {
                api_version: "operators.coreos.com/v1alpha1".into(),
                kind: "Subscription".into(),
                name: sub.name_any(),
                uid: sub.uid().unwrap_or_default(),
                controller: Some(false),
                block_owner_deletion: Some(false),
            }]),
            ..Default::default()
        },
        spec: InstallPlanSpec {
            source: None,
            source_namespace: None,
            cluster_service_version_names: bundles.iter().map(|b| b.name.clone()).collect(),
            approval,
            approved,
            generation: Some(generation),
        },
        status: None,
    };
    let api: Api<InstallPlan> = Api::namespaced(ctx.client.clone(), &namespace);
    let created = match api.create(&PostParams::default(), &plan).await {
        Ok(created) => created,
        // Another OLM replica (or a retry after a lost answer) made the same plan: use it.
        Err(err) if olm_runtime::error::api_status_code(&err) == Some(409) => {
            let existing_name = plan.metadata.name.clone().unwrap_or_default();
            let existing = api
                .get(&existing_name)
                .await
                .map_err(|err| Error::api(format!("get InstallPlan {namespace}/{existing_name}"), err))?;
            if existing.status.as_ref().is_some_and(|s| s.plan.is_some()) {
                tracing::info!(plan = %existing_name, "InstallPlan already exists; using it");
                return Ok(Ok(plan_view(&existing)));
            }
            existing
        }
        Err(err) => {
            return Err(Error::api(
                format!("create InstallPlan in {namespace} for Subscription {}", sub.name_any()),
                err,
            ));
        }
    };
    let status = InstallPlanStatus {
        phase: if approved {
            InstallPlanPhase::Installing
        } else {
            InstallPlanPhase::RequiresApproval
        },
        catalog_sources: catalogs_used.into_iter().collect(),
        plan: Some(steps),
        bundle_lookups: Some(lookups),
        start_time: approved.then_some(Time(now)),
        ..Default::default()
    };
    if let Err(err) = ctx.status.apply(&created, &status).await {
        // A plan without steps would be found again and never executed: remove it.
        let _ = api.delete(&created.name_any(), &DeleteParams::default()).await;
        return Err(err);
    }
    tracing::info!(plan = %created.name_any(), csvs = ?created.spec.cluster_service_version_names, approval = approval.as_str(), "InstallPlan created");
    ctx.events
        .publish(
            &sub.object_ref(&()),
            &EventNote::normal(
                "InstallPlanCreated",
                "Resolve",
                format!(
                    "InstallPlan {} installs {} ({})",
                    created.name_any(),
                    created.spec.cluster_service_version_names.join(", "),
                    approval.as_str()
                ),
            ),
        )
        .await;
    let mut view = plan_view(&created);
    view.phase = status.phase;
    Ok(Ok(view))
}

/// Keep the namespace's InstallPlans bounded (best effort: a failed delete is retried with
/// the next plan).
async fn collect_old_plans(ctx: &ControllerContext<SubscriptionControllerState>, namespace: &str, subs: &[Arc<Subscription>]) {
    let plans: Vec<(String, i64, InstallPlanPhase)> = ctx
        .state
        .plans
        .list_in(namespace)
        .iter()
        .map(|p| {
            let phase = p.status.as_ref().map(|s| s.phase.clone()).unwrap_or(InstallPlanPhase::None);
            (p.name_any(), p.spec.generation.unwrap_or(0), phase)
        })
        .collect();
    let referenced: Vec<String> = subs
        .iter()
        .filter_map(|s| s.status.as_ref()?.install_plan_ref.as_ref()?.name.clone())
        .collect();
    let api: Api<InstallPlan> = Api::namespaced(ctx.client.clone(), namespace);
    for name in super::decide::plans_to_collect(&plans, &referenced) {
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => tracing::info!(plan = %name, "deleted an old InstallPlan"),
            Err(err) => tracing::warn!(plan = %name, %err, "cannot delete an old InstallPlan"),
        }
    }
}

/// The name of the plan that installs `bundles` for `sub`: `install-` and a hash of the
/// Subscription's uid and the bundles, so that two OLM replicas, or a retry, agree on one plan
/// instead of creating two.
pub fn plan_name(sub: &Subscription, bundles: &[&Selected]) -> String {
    use sha2::{Digest, Sha256};
    let mut names: Vec<&str> = bundles.iter().map(|b| b.name.as_str()).collect();
    names.sort_unstable();
    let text = format!("{}/{}", sub.uid().unwrap_or_else(|| sub.name_any()), names.join(","));
    let digest = Sha256::digest(text.as_bytes());
    // Lowercase alphanumerics, like the suffix of a generated name.
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let suffix: String = digest
        .iter()
        .take(5)
        .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char)
        .collect();
    format!("install-{suffix}")
}

fn deprecations(content: Option<&Arc<CatalogContent>>, sub: &Subscription, installed: Option<&str>) -> Deprecations {
    let mut out = Deprecations::default();
    let Some(content) = content else {
        return out;
    };
    for d in content.snapshot.deprecations.iter().filter(|d| d.package == sub.spec.name) {
        match d.scope.as_str() {
            "olm.package" => out.package = Some(d.message.clone()),
            "olm.channel" if sub.spec.channel.as_deref() == Some(d.name.as_str()) => out.channel = Some(d.message.clone()),
            "olm.bundle" if installed == Some(d.name.as_str()) => out.bundle = Some(d.message.clone()),
            _ => {}
        }
    }
    out
}

#[instrument(skip_all, fields(kind = "Subscription", namespace = %cached.namespace().unwrap_or_default(), name = %cached.name_any()))]
async fn reconcile(cached: Arc<Subscription>, ctx: Arc<ControllerContext<SubscriptionControllerState>>) -> Result<Action> {
    let state = &ctx.state;
    let namespace = cached.namespace().unwrap_or_default();
    let name = cached.name_any();
    let lock = state.locks.get(&namespace);
    let _guard = lock.lock().await;
    ctx.state.metrics
        .subscription_count
        .set(i64::try_from(state.subscriptions.store().len()).unwrap_or(i64::MAX));

    // Read the Subscription itself fresh: the cache may not show the plan we just created.
    let api: Api<Subscription> = Api::namespaced(ctx.client.clone(), &namespace);
    let Some(sub) = api
        .get_opt(&name)
        .await
        .map_err(|err| Error::api(format!("get Subscription {namespace}/{name}"), err))?
    else {
        return Ok(Action::await_change());
    };
    if sub.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let now = Timestamp::now();
    let previous = sub.status.clone().unwrap_or_default();

    // Catalogs visible from the namespace.
    let exclude_global = state.groups.list_in(&namespace).iter().any(|g| {
        g.annotations()
            .get(keys::EXCLUDE_GLOBAL_NAMESPACE_RESOLUTION_ANNOTATION)
            .map(String::as_str)
            == Some("true")
    });
    let mut views = Vec::new();
    let mut contents: HashMap<CatalogKey, Arc<CatalogContent>> = HashMap::new();
    for catalog in state.catalogs.list() {
        let catalog_namespace = catalog.namespace().unwrap_or_default();
        let visible = catalog_namespace == namespace || (catalog_namespace == state.global_namespace && !exclude_global);
        if !visible {
            continue;
        }
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

    // The referenced plan (read through when the cache lags behind our own create).
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
                Some(p) => (Some(plan_view(&p)), false),
                None => (None, true),
            }
        }
        None => (None, false),
    };
    let current = previous
        .current_csv
        .as_ref()
        .and_then(|csv| state.csvs.get(Some(&namespace), csv))
        .filter(|csv| !csv.is_copied())
        .map(|csv| CsvView {
            name: csv.name_any(),
            phase: csv.phase().cloned(),
        });

    let mut resolved = Resolved::Skipped;
    let mut requeue = None;
    let mut adopted = None;
    let target = decide::target(&sub);
    let gate = decide::gate(plan.as_ref(), plan_missing, current.as_ref(), plan_name.is_some());
    tracing::debug!(?gate, plan = ?plan_name, plan_phase = ?plan.as_ref().map(|p| p.phase.clone()), plan_missing, current = ?current, "resolution gate");
    if gate == Gate::Resolve {
        if !contents.contains_key(&target) {
            resolved = Resolved::Failed {
                reason: reasons::ERROR_PREVENTED_RESOLUTION,
                message: catalog_unavailable(&target, &views),
            };
            requeue = Some(CATALOG_RETRY);
        } else {
            let mut subs: Vec<Arc<Subscription>> = state
                .subscriptions
                .list_in(&namespace)
                .into_iter()
                .filter(|s| s.name_any() != name)
                .collect();
            subs.push(Arc::new(sub.clone()));
            subs.sort_by_key(|s| s.name_any());
            let csvs = state.csvs.list_in(&namespace);
            let started = Instant::now();
            let catalogs = Catalogs::new(contents.values().map(|c| c.snapshot.clone()));
            let (request, owned) = build_request(&namespace, &state.global_namespace, &subs, &csvs, &catalogs);
            if previous.current_csv.is_none() {
                adopted = owned.get(&name).cloned();
            }
            let resolution = olm_resolver::resolve(&catalogs, &request);
            let mine_failed = resolution.errors.iter().find(|e| e.subscription == name);
            ctx.state.metrics
                .resolution(mine_failed.is_none(), started.elapsed().as_secs_f64());
            if let Some(error) = mine_failed {
                let changed = previous
                    .condition(&SubscriptionConditionType::ResolutionFailed)
                    .is_none_or(|c| c.message.as_deref() != Some(error.message.as_str()));
                if changed {
                    ctx.events
                        .publish(
                            &sub.object_ref(&()),
                            &EventNote::warning("ResolutionFailed", "Resolve", format!("{}: {}", error.category, error.message)),
                        )
                        .await;
                }
                resolved = Resolved::Failed {
                    reason: reasons::CONSTRAINTS_NOT_SATISFIABLE,
                    message: error.message.clone(),
                };
            } else {
                let mine: Vec<&Selected> = resolution
                    .bundles
                    .iter()
                    .filter(|b| b.subscription.as_deref() == Some(name.as_str()))
                    .collect();
                if mine.is_empty() {
                    resolved = Resolved::UpToDate;
                } else {
                    let current_csv = mine[0].name.clone();
                    let mut bundles = mine;
                    bundles.extend(resolution.bundles.iter().filter(|b| b.subscription.is_none()));
                    match create_plan(&ctx, &sub, &bundles, &contents, &subs, now).await? {
                        Ok(plan) => {
                            resolved = Resolved::NewPlan { plan, current_csv };
                            adopted = None;
                            collect_old_plans(&ctx, &namespace, &subs).await;
                        }
                        Err(message) => {
                            resolved = Resolved::Failed {
                                reason: reasons::ERROR_PREVENTED_RESOLUTION,
                                message,
                            };
                            requeue = Some(CONTENT_RETRY);
                        }
                    }
                }
            }
        }
    }

    let installed = adopted.clone().or_else(|| current.as_ref().map(|c| c.name.clone()));
    let observed = Observed {
        sub: &sub,
        catalogs: views,
        plan,
        plan_missing,
        current,
        adopted,
        resolved,
        deprecations: deprecations(contents.get(&target), &sub, installed.as_deref()),
    };
    let desired = decide::status(&observed, now);
    ctx.status.apply(&sub, &desired).await?;
    ctx.state.metrics.subscription_synced(SubscriptionSyncLabels {
        name: name.clone(),
        installed: desired.installed_csv.clone().unwrap_or_default(),
        channel: sub.spec.channel.clone().unwrap_or_default(),
        package: sub.spec.name.clone(),
        approval: sub.spec.approval().as_str().to_owned(),
    });
    Ok(action_for(requeue))
}

fn subs_in(store: &Store<Subscription>, namespace: Option<&str>) -> Vec<ObjectRef<Subscription>> {
    store
        .state()
        .iter()
        .filter(|s| namespace.is_none_or(|ns| s.namespace().as_deref() == Some(ns)))
        .map(|s| ObjectRef::from_obj(s.as_ref()))
        .collect()
}

/// Build the Subscription controller (subscribes now; call before the caches start) and run it
/// until `shutdown` resolves.
pub fn run(
    ctx: Arc<ControllerContext<SubscriptionControllerState>>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let state = ctx.state.clone();
    let store = state.subscriptions.store().clone();
    let global = state.global_namespace.clone();
    let (s1, s2, s3, s4) = (store.clone(), store.clone(), store.clone(), store.clone());
    let (g1, g2) = (global.clone(), global.clone());
    let catalog_changes = state.content.subscribe().flat_map(move |key: CatalogKey| {
        let scope = (key.namespace != g1).then_some(key.namespace.clone());
        futures::stream::iter(subs_in(&s4, scope.as_deref()))
    });
    let controller = Controller::for_shared_stream(state.subscriptions.subscribe(), store)
        .with_config(olm_runtime::controller::controller_config())
        .watches_shared_stream(state.plans.subscribe(), move |plan: Arc<InstallPlan>| {
            let namespace = plan.namespace().unwrap_or_default();
            plan.owner_references()
                .iter()
                .filter(|o| o.kind == "Subscription")
                .map(|o| ObjectRef::new(&o.name).within(&namespace))
                .collect::<Vec<_>>()
        })
        // Copied CSVs are not installs of this namespace (resolution ignores them): an
        // all-namespaces operator's copies would otherwise wake every Subscription everywhere.
        .watches_shared_stream(state.csvs.subscribe(), move |csv: Arc<ClusterServiceVersion>| {
            if csv.is_copied() {
                return Vec::new();
            }
            subs_in(&s1, csv.namespace().as_deref())
        })
        .watches_shared_stream(state.catalogs.subscribe(), move |catalog: Arc<CatalogSource>| {
            let namespace = catalog.namespace().unwrap_or_default();
            let scope = (namespace != g2).then_some(namespace);
            subs_in(&s2, scope.as_deref())
        })
        .watches_shared_stream(state.groups.subscribe(), move |group: Arc<OperatorGroup>| {
            subs_in(&s3, group.namespace().as_deref())
        })
        .reconcile_on(catalog_changes)
        .reconcile_all_on(ctx.leadership.gained())
        .graceful_shutdown_on(shutdown);
    async move {
        state.subscriptions.synced().await;
        state.plans.synced().await;
        state.csvs.synced().await;
        state.catalogs.synced().await;
        state.groups.synced().await;
        controller
            .run(|sub, ctx| guarded(sub, ctx, reconcile), error_policy, ctx)
            .for_each(|_| futures::future::ready(()))
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use olm_api::v1alpha1::subscription::{SubscriptionSpec, SubscriptionStatus};

    fn csv(name: &str, package: &str, replaces: Option<&str>) -> Arc<ClusterServiceVersion> {
        let mut c: ClusterServiceVersion = serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": name, "namespace": "ns", "annotations": {
                keys::PROPERTIES_ANNOTATION: json!({"properties": [{"type": "olm.package", "value": {"packageName": package, "version": "0.9.0"}}]}).to_string()
            }},
            "spec": {"version": "0.9.0", "displayName": name, "install": {"strategy": "deployment"}},
        }))
        .expect("csv");
        c.spec.replaces = replaces.map(str::to_owned);
        Arc::new(c)
    }

    fn sub(name: &str, package: &str, current: Option<&str>) -> Arc<Subscription> {
        let mut s = Subscription::new(
            name,
            SubscriptionSpec {
                source: "community".into(),
                source_namespace: "olm".into(),
                name: package.into(),
                ..Default::default()
            },
        );
        s.metadata.namespace = Some("ns".into());
        s.status = current.map(|c| SubscriptionStatus {
            current_csv: Some(c.into()),
            ..Default::default()
        });
        Arc::new(s)
    }

    #[test]
    fn installed_operators_are_owned_by_their_subscriptions_or_adopted() {
        let catalogs = Catalogs::new(Vec::new());
        let csvs = vec![
            csv("etcd.v1", "etcd", None),
            csv("etcd.v2", "etcd", Some("etcd.v1")),
            csv("other.v1", "other", None),
        ];
        let subs = vec![sub("etcd", "etcd", Some("etcd.v2")), sub("other", "other", None)];
        let (request, owned) = build_request("ns", "olm", &subs, &csvs, &catalogs);
        let names: Vec<_> = request.installed.iter().map(|i| i.entry.name.clone()).collect();
        assert_eq!(names, vec!["etcd.v2", "other.v1"], "a replaced CSV is not an installed operator");
        assert_eq!(owned.get("etcd").map(String::as_str), Some("etcd.v2"));
        assert_eq!(owned.get("other").map(String::as_str), Some("other.v1"), "adopted by package");
        assert_eq!(request.subscriptions[1].installed_csv.as_deref(), Some("other.v1"));
        assert_eq!(request.installed[1].entry.package, "other");
    }

    #[test]
    fn a_missing_catalog_message_lists_what_exists() {
        let views = vec![CatalogView {
            key: CatalogKey::new("community", "olm"),
            uid: None,
            healthy: true,
            error: None,
        }];
        let message = catalog_unavailable(&CatalogKey::new("nope", "ns"), &views);
        assert!(message.contains("ns/nope") && message.contains("olm/community"), "{message}");
    }
}
