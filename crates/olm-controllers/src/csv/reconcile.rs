//! Observe → decide → act for ClusterServiceVersions.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::core::v1::{Namespace, ObjectReference, Secret, Service, ServiceAccount};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};
use olm_api::keys;
use olm_api::v1::olm_config::{OLM_CONFIG_NAME, OLMConfig};
use olm_api::v1::operator_group::OperatorGroup;
use olm_api::v1alpha1::cluster_service_version::{ClusterServiceVersion, CsvPhase, CsvReason};
use olm_api::v1alpha1::subscription::Subscription;
use olm_api::v2::OperatorCondition;
use serde_json::json;
use tracing::instrument;

use super::certs::{self, ServingCert, WebhookConfig};
use super::decide::{
    CsvAction, CsvDecision, ExistingApiService, ExistingWebhook, Observed, OwnedRbac, OwnerLabels, decide, decide_copy,
    needs_permission_check, set_phase,
};
use super::requirements::{CrdState, GeneratedRbac, PermissionCheck, declared_rules, declared_service_accounts, granted_by};
use olm_runtime::controller::action_for;
use olm_runtime::error::is_not_found;
use olm_runtime::{Cache, ControllerContext, Error, Result, error_policy, guarded};

/// Controller name: metric label, field manager `olm/csv`.
pub const NAME: &str = "csv";

/// The caches the CSV controller reads.
#[derive(Clone)]
pub struct CsvState {
    /// Every ClusterServiceVersion.
    pub csvs: Cache<ClusterServiceVersion>,
    /// Every OperatorGroup.
    pub groups: Cache<OperatorGroup>,
    /// Every CRD.
    pub crds: Cache<CustomResourceDefinition>,
    /// Every ServiceAccount.
    pub service_accounts: Cache<ServiceAccount>,
    /// Deployments labelled `olm.owner.kind=ClusterServiceVersion`, without their pod specs
    /// (`deployment::trim_cached_deployment`).
    pub deployments: Cache<Deployment>,
    /// The operator Deployments whose pod spec is known to be as wanted.
    pub verified_specs: super::deployment::VerifiedSpecs,
    /// Every Namespace.
    pub namespaces: Cache<Namespace>,
    /// ClusterRoles labelled `olm.managed=true`.
    pub cluster_roles: Cache<ClusterRole>,
    /// Every OperatorCondition (v2).
    pub operator_conditions: Cache<OperatorCondition>,
    /// The OLMConfig singleton.
    pub olm_configs: Cache<OLMConfig>,
    /// Every Subscription (their `spec.config` shapes the operator Deployments).
    pub subscriptions: Cache<Subscription>,
    /// Every APIService: the owned ones, and ones a CSV would adopt (their owner labels decide).
    pub api_services: Cache<APIService>,
    /// ValidatingWebhookConfigurations labelled `olm.owner.kind=ClusterServiceVersion`.
    pub validating_webhooks: Cache<ValidatingWebhookConfiguration>,
    /// MutatingWebhookConfigurations labelled `olm.owner.kind=ClusterServiceVersion`.
    pub mutating_webhooks: Cache<MutatingWebhookConfiguration>,
    /// Roles labelled `olm.managed=true` (among them each OperatorCondition's).
    pub managed_roles: Cache<Role>,
    /// RoleBindings labelled `olm.managed=true`.
    pub managed_role_bindings: Cache<RoleBinding>,
    /// The CSV metrics.
    pub metrics: super::metrics::CsvMetrics,
}

/// The label selector of the Deployment and webhook configuration caches (what OLM generated
/// for a CSV).
pub fn deployment_selector() -> String {
    format!("{}=ClusterServiceVersion", keys::OWNER_KIND_LABEL)
}

/// What the watch cache keeps of a CRD: what `crd_state` and the provided-API roles read
/// (names, versions served, conversion, conditions, uid), without the schemas, printer columns
/// and subresources, which make OLM's own CRDs alone megabytes.
pub fn trim_cached_crd(crd: &mut CustomResourceDefinition) {
    for version in &mut crd.spec.versions {
        version.schema = None;
        version.additional_printer_columns = None;
        version.subresources = None;
        version.selectable_fields = None;
    }
}

fn crd_state(crd: &CustomResourceDefinition) -> CrdState {
    let conditions = crd.status.as_ref().and_then(|s| s.conditions.as_deref()).unwrap_or_default();
    let is_true = |t: &str| conditions.iter().any(|c| c.type_ == t && c.status == "True");
    CrdState {
        served_versions: crd.spec.versions.iter().filter(|v| v.served).map(|v| v.name.clone()).collect(),
        established: is_true("Established"),
        names_accepted: is_true("NamesAccepted"),
        preserve_unknown_fields: crd.spec.preserve_unknown_fields.unwrap_or(false),
        conversion: crd.spec.conversion.clone(),
    }
}

fn object_reference(csv: &ClusterServiceVersion) -> ObjectReference {
    csv.object_ref(&())
}

/// One SubjectAccessReview per (group, resource, verb, name) of the rule; the rule is satisfied
/// when every one is allowed.
async fn rule_allowed(client: &kube::Client, user_ns: &str, sa: &str, namespace: Option<&str>, rule: &PolicyRule) -> Result<bool> {
    let api: Api<SubjectAccessReview> = Api::all(client.clone());
    let user = format!("system:serviceaccount:{user_ns}:{sa}");
    let groups = vec![
        "system:serviceaccounts".to_owned(),
        format!("system:serviceaccounts:{user_ns}"),
        "system:authenticated".to_owned(),
    ];
    let mut attributes = Vec::new();
    let verbs = rule.verbs.clone();
    for url in rule.non_resource_urls.iter().flatten() {
        for verb in &verbs {
            attributes.push((None, Some(NonResourceAttributes {
                path: Some(url.clone()),
                verb: Some(verb.clone()),
            })));
        }
    }
    let api_groups = rule.api_groups.clone().unwrap_or_default();
    let names: Vec<Option<String>> = match rule.resource_names.as_deref() {
        Some(names) if !names.is_empty() => names.iter().cloned().map(Some).collect(),
        _ => vec![None],
    };
    for group in &api_groups {
        for resource in rule.resources.iter().flatten() {
            let (resource, subresource) = match resource.split_once('/') {
                Some((r, s)) => (r.to_owned(), Some(s.to_owned())),
                None => (resource.clone(), None),
            };
            for verb in &verbs {
                for name in &names {
                    attributes.push((
                        Some(ResourceAttributes {
                            namespace: namespace.map(str::to_owned),
                            group: Some(group.clone()),
                            resource: Some(resource.clone()),
                            subresource: subresource.clone(),
                            verb: Some(verb.clone()),
                            name: name.clone(),
                            ..Default::default()
                        }),
                        None,
                    ));
                }
            }
        }
    }
    // The reviews are independent: asked a few at a time, since a CSV's rules expand to dozens
    // and asking one after the other was most of the time of a CSV's first reconcile.
    let answers: Vec<bool> = futures::stream::iter(attributes)
        .map(|(resource_attributes, non_resource_attributes)| {
            let review = SubjectAccessReview {
                metadata: Default::default(),
                spec: SubjectAccessReviewSpec {
                    user: Some(user.clone()),
                    groups: Some(groups.clone()),
                    resource_attributes,
                    non_resource_attributes,
                    ..Default::default()
                },
                status: None,
            };
            let api = api.clone();
            async move {
                let answer = api
                    .create(&PostParams::default(), &review)
                    .await
                    .map_err(|err| Error::api(format!("check permissions of ServiceAccount {user_ns}/{sa}"), err))?;
                Ok::<bool, Error>(answer.status.is_some_and(|s| s.allowed))
            }
        })
        .buffer_unordered(REVIEWS_IN_FLIGHT)
        .try_collect()
        .await?;
    Ok(answers.into_iter().all(|allowed| allowed))
}

/// SubjectAccessReviews in flight per rule, and rules checked at once.
const REVIEWS_IN_FLIGHT: usize = 8;

async fn check_permissions(
    client: &kube::Client,
    csv: &ClusterServiceVersion,
    existing_service_accounts: &BTreeSet<String>,
) -> Result<Vec<PermissionCheck>> {
    let own = csv.namespace().unwrap_or_default();
    let own = own.as_str();
    let rules: Vec<(String, bool, PolicyRule)> =
        declared_rules(csv).into_iter().filter(|(sa, _, _)| existing_service_accounts.contains(sa)).collect();
    let generated = if rules.is_empty() {
        GeneratedRbac::default()
    } else {
        generated_rbac(client, csv, rules.iter().any(|(_, cluster, _)| *cluster)).await
    };
    let generated = &generated;
    futures::stream::iter(rules)
        .map(|(sa, cluster, rule)| async move {
            // As upstream: namespaced rules in the operator's namespace (for all-namespaces
            // groups the Roles are then lifted to ClusterRoles), cluster rules cluster-wide.
            let satisfied = granted_by(generated, own, &sa, cluster, &rule)
                || rule_allowed(client, own, &sa, (!cluster).then_some(own), &rule).await?;
            Ok::<PermissionCheck, Error>(PermissionCheck {
                service_account: sa,
                cluster,
                rule,
                satisfied,
            })
        })
        // `buffered` keeps the rules' order, which the requirement status lists.
        .buffered(REVIEWS_IN_FLIGHT)
        .try_collect()
        .await
}

/// The RBAC labelled as generated for `csv`, listed at once (the cluster-scoped kinds only
/// when it has cluster rules). A list that fails leaves its part empty: the rules it would
/// have granted are then asked of the API server.
async fn generated_rbac(client: &kube::Client, csv: &ClusterServiceVersion, cluster: bool) -> GeneratedRbac {
    let namespace = csv.namespace().unwrap_or_default();
    // From the API server's watch cache: a list that misses a role created a moment ago only
    // sends its rules to SubjectAccessReviews.
    let params = kube::api::ListParams::default().labels(&owner_selector(csv)).match_any();
    async fn listed<K>(api: Api<K>, params: &kube::api::ListParams, wanted: bool) -> Vec<K>
    where
        K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        if !wanted {
            return Vec::new();
        }
        match api.list(params).await {
            Ok(list) => list.items,
            Err(err) => {
                tracing::debug!(%err, "cannot list generated RBAC; asking SubjectAccessReviews instead");
                Vec::new()
            }
        }
    }
    let (roles, bindings, cluster_roles, cluster_bindings) = futures::join!(
        listed(Api::<Role>::namespaced(client.clone(), &namespace), &params, true),
        listed(Api::<RoleBinding>::namespaced(client.clone(), &namespace), &params, true),
        listed(Api::<ClusterRole>::all(client.clone()), &params, cluster),
        listed(Api::<ClusterRoleBinding>::all(client.clone()), &params, cluster),
    );
    GeneratedRbac { roles, bindings, cluster_roles, cluster_bindings }
}

/// The label selector of what is labelled as owned by `csv`.
fn owner_selector(csv: &ClusterServiceVersion) -> String {
    crate::metadata::owner_labels(csv)
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The Roles and RoleBindings in the CSV's namespace labelled as owned by it.
async fn owned_rbac(client: &kube::Client, csv: &ClusterServiceVersion) -> Result<OwnedRbac> {
    let namespace = csv.namespace().unwrap_or_default();
    let params = kube::api::ListParams::default().labels(&owner_selector(csv));
    let roles = Api::<Role>::namespaced(client.clone(), &namespace)
        .list(&params)
        .await
        .map_err(|err| Error::api(format!("list the Roles of {namespace}/{}", csv.name_any()), err))?
        .items;
    let bindings = Api::<RoleBinding>::namespaced(client.clone(), &namespace)
        .list(&params)
        .await
        .map_err(|err| Error::api(format!("list the RoleBindings of {namespace}/{}", csv.name_any()), err))?
        .items;
    Ok(OwnedRbac { roles, bindings })
}

#[instrument(skip_all, fields(kind = "ClusterServiceVersion", namespace = %csv.namespace().unwrap_or_default(), name = %csv.name_any()))]
async fn reconcile(csv: Arc<ClusterServiceVersion>, ctx: Arc<ControllerContext<CsvState>>) -> Result<Action> {
    let state = &ctx.state;
    let namespace = csv.namespace().unwrap_or_default();
    let name = csv.name_any();
    ctx.state.metrics.csv_count.set(i64::try_from(state.csvs.store().len()).unwrap_or(i64::MAX));

    if csv.is_copied() {
        let origin = csv.labels().get(keys::COPIED_FROM_LABEL).cloned().unwrap_or_default();
        let original = state.csvs.get(Some(&origin), &name).filter(|original| !original.is_copied());
        let explicit_targets = original
            .as_ref()
            .and_then(|o| o.annotations().get(keys::TARGET_NAMESPACES_ANNOTATION).cloned())
            .is_some_and(|t| !t.is_empty());
        let rbac = match &original {
            Some(original) if explicit_targets => owned_rbac(&ctx.client, original).await?,
            _ => OwnedRbac::default(),
        };
        let decision = decide_copy(&csv, original.as_deref(), &rbac);
        act(&ctx, &csv, &decision).await?;
        return Ok(action_for(decision.requeue_after));
    }

    let replaced_by_peer = state
        .csvs
        .list_in(&namespace)
        .iter()
        .any(|c| !c.is_copied() && c.spec.replaces.as_deref() == Some(name.as_str()));
    if let Some(decision) = super::decide::decide_deletion(&csv, replaced_by_peer) {
        // Nothing else to observe on the way out.
        act(&ctx, &csv, &decision).await?;
        return Ok(action_for(decision.requeue_after));
    }

    // Observe.
    let started = std::time::Instant::now();
    let all_groups = state.groups.list();
    let groups: Vec<Arc<OperatorGroup>> = all_groups
        .iter()
        .filter(|g| g.namespace().as_deref() == Some(namespace.as_str()))
        .cloned()
        .collect();
    let mut crds = BTreeMap::new();
    let mut crd_uids = BTreeMap::new();
    for crd in csv.spec.owned_crds().iter().chain(csv.spec.required_crds()) {
        if let Some(found) = state.crds.get(None, &crd.name) {
            crds.insert(crd.name.clone(), crd_state(&found));
            crd_uids.insert(crd.name.clone(), found.uid().unwrap_or_default());
        }
    }
    let owner = crate::metadata::owner_labels(&csv);
    let mut cluster_roles: BTreeMap<String, ClusterRole> = csv
        .spec
        .owned_crds()
        .iter()
        .flat_map(|crd| {
            ["admin", "edit", "view", "crdview"].map(|suffix| format!("{}-{}-{suffix}", crd.name, crd.version))
        })
        .filter_map(|name| state.cluster_roles.get(None, &name).map(|role| (name, (*role).clone())))
        .collect();
    // Roles lifted for an all-namespaces group carry the CSV's owner labels.
    for role in state
        .cluster_roles
        .store()
        .state_filter(|r| owner.iter().all(|(k, v)| r.labels().get(k) == Some(v)))
    {
        cluster_roles.insert(role.name_any(), (*role).clone());
    }
    let declared = declared_service_accounts(&csv);
    let service_accounts: BTreeSet<String> = declared
        .iter()
        .filter(|sa| state.service_accounts.get(Some(&namespace), sa).is_some())
        .cloned()
        .collect();
    // As upstream: an account with CSV owners none of which is this CSV (by uid) belongs to
    // another operator. Owners in this CSV's replacement chain do not count (the InstallPlan
    // of an upgrade hands the account to the new version), nor owners that no longer exist.
    let own_uid = csv.uid().unwrap_or_default();
    let namespace_csvs = state.csvs.list_in(&namespace);
    let peer_refs: Vec<&ClusterServiceVersion> = namespace_csvs
        .iter()
        .map(Arc::as_ref)
        .filter(|c| !c.is_copied() && c.name_any() != name)
        .collect();
    let chain = super::decide::replacement_chain_of(&csv, &peer_refs);
    let foreign_service_accounts: BTreeMap<String, Vec<String>> = declared
        .iter()
        .filter_map(|sa| {
            let account = state.service_accounts.get(Some(&namespace), sa)?;
            let others = super::requirements::foreign_owners(account.owner_references(), &own_uid, &chain, &peer_refs);
            (!others.is_empty()).then(|| (sa.clone(), others))
        })
        .collect();
    // minKubeVersion, nativeAPIs and required APIServices: asked of the API server only for
    // CSVs that declare them.
    let kube_version = if csv.spec.min_kube_version.as_deref().is_some_and(|v| !v.trim().is_empty()) {
        match ctx.client.apiserver_version().await {
            Ok(info) => Some(info.git_version),
            Err(err) => {
                tracing::warn!(%err, "cannot read the API server version for minKubeVersion");
                None
            }
        }
    } else {
        None
    };
    // Discovery of each group-version, all at once.
    let client = &ctx.client;
    let discovered = futures::future::join_all(super::requirements::group_versions_to_discover(&csv).into_iter().map(
        |group_version| async move {
            let listed = if group_version.contains('/') {
                client.list_api_group_resources(&group_version).await
            } else {
                client.list_core_api_resources(&group_version).await
            };
            (group_version, listed)
        },
    ))
    .await;
    let mut served_kinds: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (group_version, listed) in discovered {
        match listed {
            Ok(list) => {
                served_kinds.insert(group_version, list.resources.into_iter().map(|r| r.kind).collect());
            }
            Err(err) if is_not_found(&err) => {}
            Err(err) => return Err(Error::api(format!("discover the resources of {group_version}"), err)),
        }
    }
    let required_api_services: BTreeMap<String, bool> = csv
        .spec
        .required_api_services()
        .iter()
        .filter_map(|api| {
            let name = api.api_service_name();
            let found = state.api_services.get(None, &name)?;
            let available = found
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Available" && c.status == "True"));
            Some((name, available))
        })
        .collect();
    let permissions = if needs_permission_check(&csv) {
        Some(check_permissions(&ctx.client, &csv, &service_accounts).await?)
    } else {
        None
    };
    let strategy_names: BTreeSet<String> = csv.spec.strategy_deployment_names().map(str::to_owned).collect();
    // The cache has no pod specs: a Deployment whose spec is not verified at its current
    // generation (changed by someone, or first seen since this process started) is read whole.
    let mut deployments: BTreeMap<String, Deployment> = BTreeMap::new();
    let mut read_whole = Vec::new();
    for cached in state.deployments.list_in(&namespace) {
        let dep_name = cached.name_any();
        if !strategy_names.contains(&dep_name) && !crate::metadata::owned_by(cached.labels(), &csv) {
            continue;
        }
        if state.verified_specs.holds(&cached) {
            deployments.insert(dep_name, (*cached).clone());
            continue;
        }
        let api: Api<Deployment> = Api::namespaced(ctx.client.clone(), &namespace);
        match api.get_opt(&dep_name).await {
            Ok(Some(full)) => {
                read_whole.push(dep_name.clone());
                deployments.insert(dep_name, full);
            }
            Ok(None) => {}
            Err(err) => return Err(Error::api(format!("read Deployment {namespace}/{dep_name}"), err)),
        }
    }
    let all_csvs = state.csvs.list();
    let peers: Vec<&ClusterServiceVersion> = all_csvs
        .iter()
        .map(Arc::as_ref)
        .filter(|c| c.namespace().as_deref() == Some(namespace.as_str()) && c.name_any() != name && !c.is_copied())
        .collect();
    let copies: Vec<&ClusterServiceVersion> = all_csvs
        .iter()
        .map(Arc::as_ref)
        .filter(|c| {
            c.name_any() == name
                && c.namespace().as_deref() != Some(namespace.as_str())
                && c.labels().get(keys::COPIED_FROM_LABEL) == Some(&namespace)
        })
        .collect();
    let taken_namespaces: BTreeSet<String> = all_csvs
        .iter()
        .filter(|c| {
            c.name_any() == name
                && c.namespace().as_deref() != Some(namespace.as_str())
                && c.labels().get(keys::COPIED_FROM_LABEL) != Some(&namespace)
        })
        .filter_map(|c| c.namespace())
        .collect();
    let active_namespaces: Vec<String> = state
        .namespaces
        .list()
        .iter()
        .filter(|ns| {
            ns.metadata.deletion_timestamp.is_none()
                && ns.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Terminating")
        })
        .map(|ns| ns.name_any())
        .collect();
    let all_namespaces = csv.annotations().get(keys::TARGET_NAMESPACES_ANNOTATION).is_some_and(String::is_empty);
    let rbac = if all_namespaces && csv.phase() == Some(&CsvPhase::Succeeded) {
        owned_rbac(&ctx.client, &csv).await?
    } else {
        OwnedRbac::default()
    };
    let operator_condition = state.operator_conditions.get(Some(&namespace), &name);
    let condition_role = state.managed_roles.get(Some(&namespace), &name);
    let condition_binding = state.managed_role_bindings.get(Some(&namespace), &name);
    let replaced_condition = csv
        .spec
        .replaces
        .as_deref()
        .and_then(|old| state.operator_conditions.get(Some(&namespace), old));
    let copied_csvs_disabled = state
        .olm_configs
        .get(None, OLM_CONFIG_NAME)
        .is_some_and(|config| config.copied_csvs_disabled());
    let subscriptions = state.subscriptions.list_in(&namespace);
    let subscription_refs: Vec<&Subscription> = subscriptions.iter().map(Arc::as_ref).collect();
    let subscription = super::deployment::subscription_for(&csv, &subscription_refs);
    let now = Timestamp::now();
    let exposure = observe_exposure(&ctx.client, state, &csv, now).await?;
    let observed = Observed {
        serving_certs: &exposure.certs,
        api_services: &exposure.api_services,
        webhooks: &exposure.webhooks,
        subscription_config: subscription.and_then(|s| s.spec.config.as_ref()),
        csv: &csv,
        groups: groups.iter().map(Arc::as_ref).collect(),
        other_groups: all_groups
            .iter()
            .map(Arc::as_ref)
            .filter(|g| g.namespace().as_deref() != Some(namespace.as_str()))
            .collect(),
        crds: &crds,
        service_accounts: &service_accounts,
        foreign_service_accounts: &foreign_service_accounts,
        kube_version: kube_version.as_deref(),
        served_kinds: &served_kinds,
        required_api_services: &required_api_services,
        permissions: permissions.as_deref(),
        deployments: &deployments,
        peers,
        copies,
        taken_namespaces,
        crd_uids: &crd_uids,
        cluster_roles: &cluster_roles,
        owned_rbac: &rbac,
        operator_condition: operator_condition.as_deref(),
        condition_rbac: (condition_role.as_deref(), condition_binding.as_deref()),
        replaced_condition: replaced_condition.as_deref(),
        active_namespaces: &active_namespaces,
        copied_csvs_disabled,
    };

    remember_verified_specs(state, &observed, &read_whole);

    // Decide.
    let mut decision = decide(&observed, now);
    let observed_in = started.elapsed();

    // Act.
    let acted = act(&ctx, &csv, &decision).await;
    tracing::debug!(
        observe_ms = observed_in.as_secs_f64() * 1e3,
        act_ms = (started.elapsed() - observed_in).as_secs_f64() * 1e3,
        actions = ?decision.actions.iter().map(CsvAction::name).collect::<Vec<_>>(),
        "pass timing"
    );
    if let Err(err) = acted {
        if err.retryable() {
            return Err(err);
        }
        // The API server refused what the CSV asks for (invalid Deployment, forbidden, ...):
        // say so in the status instead of retrying the same request.
        let previous = csv.status.clone().unwrap_or_default();
        let status = set_phase(
            &previous,
            CsvPhase::Failed,
            CsvReason::InstallComponentFailed,
            format!("install strategy failed: {err}"),
            now,
        );
        decision = CsvDecision::status(status).event(olm_runtime::EventNote::warning(
            CsvReason::InstallComponentFailed.as_str(),
            "Install",
            format!("install strategy failed: {err}"),
        ));
        decision.requeue_after = Some(super::decide::REQUEUE_RESYNC);
    }
    if let Some(status) = &decision.status {
        let previous_phase = csv.phase().cloned();
        ctx.status.apply(csv.as_ref(), status).await?;
        if status.phase == Some(CsvPhase::Replacing) && previous_phase != Some(CsvPhase::Replacing) {
            ctx.state.metrics.csv_upgrade_count.inc();
        }
        ctx.state.metrics.observe_csv(
            &namespace,
            &name,
            csv.spec.version.as_deref().unwrap_or_default(),
            status.phase.as_ref().map(|p| p.as_str()).unwrap_or_default(),
            status.reason.as_ref().map(|r| r.as_str()).unwrap_or_default(),
        );
        if let Some(phase) = &status.phase
            && csv.phase() != Some(phase)
        {
            tracing::info!(
                phase = phase.as_str(),
                reason = status.reason.as_ref().map(|r| r.as_str()).unwrap_or_default(),
                message = status.message.as_deref().unwrap_or_default(),
                "phase transition"
            );
        }
    }
    let reference = object_reference(&csv);
    for note in &decision.events {
        ctx.events.publish(&reference, note).await;
    }
    apply_api_roles(&ctx, &csv, &decision).await?;
    Ok(action_for(decision.requeue_after))
}

/// The provided APIs' ClusterRoles, all at once, after the status: nothing waits for them,
/// and the status (Succeeded) should not wait for a dozen writes either.
async fn apply_api_roles(ctx: &ControllerContext<CsvState>, csv: &ClusterServiceVersion, decision: &CsvDecision) -> Result<()> {
    let apply = PatchParams::apply(&ctx.field_manager()).force();
    act_at_once(ctx, csv, decision.actions.iter().filter(|a| matches!(a, CsvAction::ApplyApiRole(_))), &apply).await
}

/// Apply `actions` concurrently (none of them depends on another, and none copies the CSV).
async fn act_at_once<'a>(
    ctx: &ControllerContext<CsvState>,
    csv: &ClusterServiceVersion,
    actions: impl Iterator<Item = &'a CsvAction>,
    apply: &PatchParams,
) -> Result<()> {
    futures::future::try_join_all(actions.map(|action| async move { act_one(ctx, csv, action, apply, &mut Copies::default()).await }))
        .await?;
    Ok(())
}

/// Remember the Deployments just read whole whose spec holds what the CSV wants, so that later
/// reconciles take them from the cache (drift is still told by their generation).
fn remember_verified_specs(state: &CsvState, observed: &Observed<'_>, read_whole: &[String]) {
    if read_whole.is_empty() {
        return;
    }
    let desired = super::decide::desired_deployments(
        observed.csv,
        observed.subscription_config,
        observed.serving_certs,
    );
    for want in &desired {
        let name = want.name_any();
        if !read_whole.contains(&name) {
            continue;
        }
        if let Some(actual) = observed.deployments.get(&name)
            && super::deployment::check_drift(want, Some(actual)).is_ok()
        {
            state.verified_specs.remember(actual);
        }
    }
    let cached = state.deployments.list();
    state.verified_specs.prune(2 * cached.len() + 64, |uid| {
        cached
            .iter()
            .any(|d| d.metadata.uid.as_deref() == Some(uid))
    });
}

/// The client for the operator's Deployments: the ServiceAccount named by the namespace's
/// OperatorGroup (`spec.serviceAccountName`), as upstream does, else OLM's own. Built per call
/// (Deployments are written rarely); see `crate::scoped_client`.
fn workload_client(ctx: &ControllerContext<CsvState>, namespace: &str) -> Result<kube::Client> {
    let groups = ctx.state.groups.list_in(namespace);
    let groups: Vec<&OperatorGroup> = groups.iter().map(Arc::as_ref).collect();
    crate::scoped_client::ScopedClients::new(ctx.client.clone())
        .for_workloads(namespace, &groups)
        .map_err(|err| Error::InvalidObject {
            kind: "OperatorGroup",
            name: namespace.to_owned(),
            message: err.to_string(),
        })
}

/// Apply the decision's actions. The CSV's own metadata (finalizer first, labels,
/// annotations) goes first, in order. Then the OperatorCondition, which nothing in the pass
/// waits for, at the same time as everything else in order (the operator's Deployment among
/// it: what the install waits for should not queue behind writes it does not need). The
/// provided APIs' ClusterRoles are left to `apply_api_roles`, after the status. Copies are best
/// effort (a namespace may be going away); every other failure stops the pass.
async fn act(ctx: &ControllerContext<CsvState>, csv: &ClusterServiceVersion, decision: &CsvDecision) -> Result<()> {
    let apply = PatchParams::apply(&ctx.field_manager()).force();
    let mut copies = Copies::default();
    let is_metadata = |a: &CsvAction| matches!(a, CsvAction::AddFinalizer { .. } | CsvAction::Label(_) | CsvAction::Annotate(_));
    let is_side = |a: &CsvAction| matches!(a, CsvAction::ApplyOperatorCondition(_));
    let is_later = |a: &CsvAction| matches!(a, CsvAction::ApplyApiRole(_));
    for action in decision.actions.iter().filter(|a| is_metadata(a)) {
        act_one(ctx, csv, action, &apply, &mut copies).await?;
    }
    let side = act_at_once(ctx, csv, decision.actions.iter().filter(|a| is_side(a)), &apply);
    let ordered = async {
        for action in decision.actions.iter().filter(|a| !is_metadata(a) && !is_side(a) && !is_later(a)) {
            act_one(ctx, csv, action, &apply, &mut copies).await?;
        }
        Ok(())
    };
    futures::future::try_join(side, ordered).await?;
    // A copy failure must not hide the status of the CSV itself: copies are retried on the
    // next pass (the periodic resync at the latest).
    if let Some(err) = copies.error {
        tracing::warn!(%err, error.category = err.category(), "some copies failed; retrying on the next pass");
    }
    Ok(())
}

/// What the copies of one pass share: the original read whole once, and the first failure.
#[derive(Default)]
struct Copies {
    full_original: Option<ClusterServiceVersion>,
    error: Option<Error>,
}

/// Apply one action.
async fn act_one(
    ctx: &ControllerContext<CsvState>,
    csv: &ClusterServiceVersion,
    action: &CsvAction,
    apply: &PatchParams,
    copies: &mut Copies,
) -> Result<()> {
    let namespace = csv.namespace().unwrap_or_default();
    let name = csv.name_any();
    match action {
        CsvAction::Annotate(annotations) => {
            let api: Api<ClusterServiceVersion> = Api::namespaced(ctx.client.clone(), &namespace);
            let patch = json!({ "metadata": { "annotations": annotations } });
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|err| Error::api(format!("annotate ClusterServiceVersion {namespace}/{name}"), err))?;
        }
        CsvAction::Label(labels) => {
            let api: Api<ClusterServiceVersion> = Api::namespaced(ctx.client.clone(), &namespace);
            let patch = json!({ "metadata": { "labels": labels } });
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|err| Error::api(format!("label ClusterServiceVersion {namespace}/{name}"), err))?;
        }
        CsvAction::ApplyDeployment(deployment) => {
            let api: Api<Deployment> = Api::namespaced(workload_client(ctx, &namespace)?, &namespace);
            let applied = server_side_apply(&api, Some(&namespace), deployment.as_ref(), apply).await?;
            // What was just applied is what the CSV wants, at the generation returned.
            ctx.state.verified_specs.remember(&applied);
            tracing::info!(deployment = %deployment.name_any(), "applied deployment");
        }
        CsvAction::DeleteDeployment(dep_name) => {
            let api: Api<Deployment> = Api::namespaced(workload_client(ctx, &namespace)?, &namespace);
            match api.delete(dep_name, &DeleteParams::background()).await {
                Ok(_) => tracing::info!(deployment = %dep_name, "deleted deployment no longer in the strategy"),
                Err(err) if is_not_found(&err) => {}
                Err(err) => return Err(Error::api(format!("delete Deployment {namespace}/{dep_name}"), err)),
            }
        }
        CsvAction::ApplyClusterRole(role) | CsvAction::ApplyApiRole(role) => {
            server_side_apply(&Api::<ClusterRole>::all(ctx.client.clone()), None, role.as_ref(), apply).await?;
        }
        CsvAction::ApplyOperatorCondition(condition) => {
            let api: Api<OperatorCondition> = Api::namespaced(ctx.client.clone(), &namespace);
            server_side_apply(&api, Some(&namespace), condition.as_ref(), apply).await?;
        }
        CsvAction::ApplyOperatorConditionStatus(status) => {
            let api: Api<OperatorCondition> = Api::namespaced(ctx.client.clone(), &namespace);
            let patch = json!({ "status": status });
            match api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                Ok(_) => {}
                // Created in this pass but not visible yet, or gone: the next pass syncs it.
                Err(err) if is_not_found(&err) => {}
                Err(err) => return Err(Error::api(format!("update the status of OperatorCondition {namespace}/{name}"), err)),
            }
        }
        CsvAction::ApplyClusterRoleBinding(binding) => {
            server_side_apply(&Api::<ClusterRoleBinding>::all(ctx.client.clone()), None, binding.as_ref(), apply).await?;
        }
        CsvAction::ApplyRole(role) => {
            let target = role.namespace().unwrap_or_default();
            let api: Api<Role> = Api::namespaced(ctx.client.clone(), &target);
            server_side_apply(&api, Some(&target), role.as_ref(), apply).await?;
        }
        CsvAction::ApplyRoleBinding(binding) => {
            let target = binding.namespace().unwrap_or_default();
            let api: Api<RoleBinding> = Api::namespaced(ctx.client.clone(), &target);
            server_side_apply(&api, Some(&target), binding.as_ref(), apply).await?;
        }
        CsvAction::AddFinalizer { current, resource_version } => {
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
            patch_finalizers(ctx, &namespace, &name, ops, "add the cleanup finalizer to").await?;
        }
        CsvAction::DeleteOwnedClusterObjects => {
            delete_owned_cluster_objects(&ctx.client, csv).await?;
        }
        CsvAction::RemoveFinalizer { index } => {
            let path = format!("/metadata/finalizers/{index}");
            let ops = json!([
                {"op": "test", "path": path, "value": keys::CSV_CLEANUP_FINALIZER},
                {"op": "remove", "path": path},
            ]);
            patch_finalizers(ctx, &namespace, &name, ops, "remove the cleanup finalizer from").await?;
            tracing::info!("cluster-scoped objects deleted; cleanup finalizer removed");
        }
        CsvAction::ApplySecret(secret) => {
            let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &namespace);
            server_side_apply(&api, Some(&namespace), secret.as_ref(), apply).await?;
        }
        CsvAction::ApplyService(service) => {
            let api: Api<Service> = Api::namespaced(ctx.client.clone(), &namespace);
            server_side_apply(&api, Some(&namespace), service.as_ref(), apply).await?;
        }
        CsvAction::ApplyApiService(api_service) => {
            server_side_apply(&Api::<APIService>::all(ctx.client.clone()), None, api_service.as_ref(), apply).await?;
        }
        CsvAction::ApplyWebhook { existing, config } => {
            apply_webhook(ctx, existing.as_deref(), config).await?;
        }
        CsvAction::ApplyCrdConversion { crd, conversion } => {
            // A merge patch of `spec.conversion` only: the rest of the CRD belongs to
            // whoever installed it, and `url: null` keeps exactly one client target.
            let mut wanted = serde_json::to_value(conversion.as_ref()).map_err(|source| Error::Serialize {
                what: format!("conversion of CustomResourceDefinition {crd}"),
                source,
            })?;
            if let Some(client) = wanted.pointer_mut("/webhook/clientConfig").and_then(|c| c.as_object_mut()) {
                client.insert("url".to_owned(), serde_json::Value::Null);
            }
            let patch = json!({ "spec": { "conversion": wanted } });
            let params = PatchParams {
                field_manager: Some(ctx.field_manager()),
                ..PatchParams::default()
            };
            Api::<CustomResourceDefinition>::all(ctx.client.clone())
                .patch(crd, &params, &Patch::Merge(&patch))
                .await
                .map_err(|err| Error::api(format!("configure the conversion webhook of CustomResourceDefinition {crd}"), err))?;
        }
        CsvAction::ResetCrdConversion { crd } => {
            let patch = json!({ "spec": { "conversion": { "strategy": "None", "webhook": null } } });
            let params = PatchParams {
                field_manager: Some(ctx.field_manager()),
                ..PatchParams::default()
            };
            match Api::<CustomResourceDefinition>::all(ctx.client.clone())
                .patch(crd, &params, &Patch::Merge(&patch))
                .await
            {
                Ok(_) => tracing::info!(%crd, "conversion webhook removed from the CRD"),
                Err(err) if is_not_found(&err) => {}
                Err(err) => return Err(Error::api(format!("remove the conversion webhook of CustomResourceDefinition {crd}"), err)),
            }
        }
        CsvAction::DeleteWebhook { kind, name: config_name } => {
            let deleted = if kind == "MutatingWebhookConfiguration" {
                Api::<MutatingWebhookConfiguration>::all(ctx.client.clone())
                    .delete(config_name, &DeleteParams::default())
                    .await
                    .map(|_| ())
            } else {
                Api::<ValidatingWebhookConfiguration>::all(ctx.client.clone())
                    .delete(config_name, &DeleteParams::default())
                    .await
                    .map(|_| ())
            };
            match deleted {
                Ok(()) => tracing::info!(%kind, name = %config_name, "deleted webhook configuration no longer declared"),
                Err(err) if is_not_found(&err) => {}
                Err(err) => return Err(Error::api(format!("delete {kind} {config_name}"), err)),
            }
        }
        CsvAction::DeleteSelf => {
            let api: Api<ClusterServiceVersion> = Api::namespaced(ctx.client.clone(), &namespace);
            match api.delete(&name, &DeleteParams::background()).await {
                Ok(_) => tracing::info!("deleted ClusterServiceVersion"),
                Err(err) if is_not_found(&err) => {}
                Err(err) => return Err(Error::api(format!("delete ClusterServiceVersion {namespace}/{name}"), err)),
            }
        }
        CsvAction::ApplyCopy(copy) => {
            if copies.full_original.is_none() {
                let api: Api<ClusterServiceVersion> = Api::namespaced(ctx.client.clone(), &namespace);
                match api.get(&name).await {
                    Ok(full) => copies.full_original = Some(full),
                    Err(err) => {
                        // Best effort like every copy: retried on the next pass.
                        copies.error.get_or_insert(Error::api(format!("read ClusterServiceVersion {namespace}/{name} to copy it"), err));
                        return Ok(());
                    }
                }
            }
            let Some(full) = &copies.full_original else { return Ok(()) };
            let copy = super::decide::with_full_content(copy, full);
            if let Err(err) = apply_copy(ctx, &copy).await {
                tracing::warn!(target_namespace = %copy.namespace().unwrap_or_default(), %err, "cannot copy the CSV");
                copies.error.get_or_insert(err);
            }
        }
        CsvAction::DeleteCopy { namespace: target } => {
            let api: Api<ClusterServiceVersion> = Api::namespaced(ctx.client.clone(), target);
            match api.delete(&name, &DeleteParams::background()).await {
                Ok(_) => tracing::info!(target_namespace = %target, "deleted copied CSV"),
                Err(err) if is_not_found(&err) => {}
                Err(err) => {
                    copies.error.get_or_insert(Error::api(format!("delete copied ClusterServiceVersion {target}/{name}"), err));
                }
            }
        }
    }
    Ok(())
}

/// What the CSV's APIServices and webhooks look like on the cluster, and the serving
/// certificates to use (stored, or fresh when missing or due for rotation).
#[derive(Default)]
struct Exposure {
    certs: BTreeMap<String, ServingCert>,
    api_services: BTreeMap<String, ExistingApiService>,
    webhooks: BTreeMap<String, ExistingWebhook>,
}

async fn observe_exposure(client: &kube::Client, state: &CsvState, csv: &ClusterServiceVersion, now: Timestamp) -> Result<Exposure> {
    let mut exposure = Exposure::default();
    // APIServices and webhook configurations come from the watch caches (their events
    // requeue the owning CSV, so a deleted one is noticed at once).
    for owned in csv.spec.owned_api_services() {
        let name = owned.api_service_name();
        if let Some(found) = state.api_services.get(None, &name) {
            let available = found
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Available" && c.status == "True"));
            let ca_bundle = found.spec.as_ref().and_then(|s| s.ca_bundle.as_ref()).map(|b| b.0.clone());
            let owner = OwnerLabels::of(found.labels());
            exposure.api_services.insert(name, ExistingApiService { available, ca_bundle, owner });
        }
    }
    if !csv.spec.webhooks().is_empty() {
        let generated = |labels: &BTreeMap<String, String>| {
            crate::metadata::owned_by(labels, csv)
                .then(|| labels.get(keys::WEBHOOK_DESCRIPTION_GENERATE_NAME_LABEL).cloned())
                .flatten()
        };
        for config in state.validating_webhooks.list() {
            if let Some(generate_name) = generated(config.labels()) {
                let ca_bundle = config
                    .webhooks
                    .as_ref()
                    .and_then(|w| w.first())
                    .and_then(|w| w.client_config.ca_bundle.as_ref())
                    .map(|b| b.0.clone());
                exposure.webhooks.insert(generate_name, ExistingWebhook {
                    kind: "ValidatingWebhookConfiguration".into(),
                    name: config.name_any(),
                    ca_bundle,
                });
            }
        }
        for config in state.mutating_webhooks.list() {
            if let Some(generate_name) = generated(config.labels()) {
                let ca_bundle = config
                    .webhooks
                    .as_ref()
                    .and_then(|w| w.first())
                    .and_then(|w| w.client_config.ca_bundle.as_ref())
                    .map(|b| b.0.clone());
                exposure.webhooks.insert(generate_name, ExistingWebhook {
                    kind: "MutatingWebhookConfiguration".into(),
                    name: config.name_any(),
                    ca_bundle,
                });
            }
        }
    }
    let uses = certs::cert_deployments(csv);
    let namespace = csv.namespace().unwrap_or_default();
    let rotate_at = csv.status.as_ref().and_then(|s| s.certs_rotate_at.as_ref()).map(|t| t.0);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    for deployment in uses.keys() {
        let secret_name = certs::secret_name(deployment);
        let stored = secrets
            .get_opt(&secret_name)
            .await
            .map_err(|err| Error::api(format!("read Secret {namespace}/{secret_name}"), err))?
            .as_ref()
            .and_then(certs::from_secret);
        let cert = match stored {
            Some(stored) if !certs::needs_rotation(Some(&stored), rotate_at, now) => stored,
            _ => certs::generate(&certs::service_name(deployment), &namespace, now).map_err(|err| Error::InvalidObject {
                kind: "ClusterServiceVersion",
                name: format!("{namespace}/{}", csv.name_any()),
                message: err.to_string(),
            })?,
        };
        exposure.certs.insert(deployment.clone(), cert);
    }
    Ok(exposure)
}

/// Server-side applies a description's configuration: under the name of the one found for it
/// (possibly generated by an older OLM), else under its fixed name.
async fn apply_webhook(ctx: &ControllerContext<CsvState>, existing: Option<&str>, config: &WebhookConfig) -> Result<()> {
    match config {
        WebhookConfig::Validating(object) => apply_named(ctx, existing, object.as_ref()).await,
        WebhookConfig::Mutating(object) => apply_named(ctx, existing, object.as_ref()).await,
    }
}

async fn apply_named<K>(ctx: &ControllerContext<CsvState>, existing: Option<&str>, object: &K) -> Result<()>
where
    K: kube::Resource<Scope = kube::core::ClusterResourceScope, DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::Serialize
        + serde::de::DeserializeOwned,
{
    let mut object = object.clone();
    let name = existing.map(str::to_owned).or_else(|| object.meta().name.clone()).unwrap_or_default();
    object.meta_mut().name = Some(name.clone());
    object.meta_mut().generate_name = None;
    let apply = PatchParams::apply(&ctx.field_manager()).force();
    server_side_apply(&Api::<K>::all(ctx.client.clone()), None, &object, &apply).await.map(drop)
}

/// Server-side apply `object` (under its own name) through `api`, returning the object as the
/// server stored it; an error names the kind, the namespace (`None` for cluster-scoped kinds)
/// and the name.
async fn server_side_apply<K>(api: &Api<K>, namespace: Option<&str>, object: &K, params: &PatchParams) -> Result<K>
where
    K: kube::Resource<DynamicType = ()> + Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
{
    let name = object.name_any();
    api.patch(&name, params, &Patch::Apply(object)).await.map_err(|err| {
        let at = namespace.map(|ns| format!("{ns}/")).unwrap_or_default();
        Error::api(format!("apply {} {at}{name}", K::kind(&())), err)
    })
}

/// Apply a JSON patch to the CSV's finalizers. A failed `test` (422: the object changed since
/// it was observed) is not an error: the change triggers another pass with the new object.
async fn patch_finalizers(
    ctx: &ControllerContext<CsvState>,
    namespace: &str,
    name: &str,
    ops: serde_json::Value,
    what: &str,
) -> Result<()> {
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

/// Delete the ClusterRoles, ClusterRoleBindings, APIServices and webhook configurations
/// labelled with `csv` as owner.
async fn delete_owned_cluster_objects(client: &kube::Client, csv: &ClusterServiceVersion) -> Result<()> {
    let params = kube::api::ListParams::default().labels(&owner_selector(csv));
    let namespace = csv.namespace().unwrap_or_default();
    let name = csv.name_any();
    let roles: Api<ClusterRole> = Api::all(client.clone());
    roles
        .delete_collection(&DeleteParams::default(), &params)
        .await
        .map_err(|err| Error::api(format!("delete the ClusterRoles of ClusterServiceVersion {namespace}/{name}"), err))?;
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    bindings
        .delete_collection(&DeleteParams::default(), &params)
        .await
        .map_err(|err| Error::api(format!("delete the ClusterRoleBindings of ClusterServiceVersion {namespace}/{name}"), err))?;
    if !csv.spec.owned_api_services().is_empty() {
        Api::<APIService>::all(client.clone())
            .delete_collection(&DeleteParams::default(), &params)
            .await
            .map_err(|err| Error::api(format!("delete the APIServices of ClusterServiceVersion {namespace}/{name}"), err))?;
    }
    if !certs::cert_deployments(csv).is_empty() {
        // The auth-reader bindings live in kube-system, out of reach of ownerReferences.
        Api::<RoleBinding>::namespaced(client.clone(), "kube-system")
            .delete_collection(&DeleteParams::default(), &params)
            .await
            .map_err(|err| Error::api(format!("delete the kube-system RoleBindings of ClusterServiceVersion {namespace}/{name}"), err))?;
    }
    if !csv.spec.webhooks().is_empty() {
        Api::<ValidatingWebhookConfiguration>::all(client.clone())
            .delete_collection(&DeleteParams::default(), &params)
            .await
            .map_err(|err| Error::api(format!("delete the ValidatingWebhookConfigurations of ClusterServiceVersion {namespace}/{name}"), err))?;
        Api::<MutatingWebhookConfiguration>::all(client.clone())
            .delete_collection(&DeleteParams::default(), &params)
            .await
            .map_err(|err| Error::api(format!("delete the MutatingWebhookConfigurations of ClusterServiceVersion {namespace}/{name}"), err))?;
    }
    Ok(())
}

async fn apply_copy(ctx: &ControllerContext<CsvState>, copy: &ClusterServiceVersion) -> Result<()> {
    let target = copy.namespace().unwrap_or_default();
    let name = copy.name_any();
    let api: Api<ClusterServiceVersion> = Api::namespaced(ctx.client.clone(), &target);
    let mut object = copy.clone();
    let status = object.status.take();
    let params = PatchParams::apply(&ctx.field_manager()).force();
    let applied = api
        .patch(&name, &params, &Patch::Apply(&object))
        .await
        .map_err(|err| Error::api(format!("copy ClusterServiceVersion into {target}"), err))?;
    if let Some(status) = status {
        ctx.status.apply(&applied, &status).await?;
    }
    Ok(())
}

/// Lifted ClusterRoles and ClusterRoleBindings cannot carry an ownerReference to a namespaced
/// CSV: when a (non-copied) CSV disappears from the cache they are deleted by its owner labels.
fn delete_cluster_rbac_of_deleted_csvs(ctx: Arc<ControllerContext<CsvState>>) -> impl std::future::Future<Output = ()> + Send + 'static {
    let events = ctx.state.csvs.subscribe();
    async move {
        let mut events = std::pin::pin!(events);
        while let Some(csv) = events.next().await {
            if csv.is_copied()
                || ctx.state.csvs.store().get(&ObjectRef::from_obj(csv.as_ref())).is_some()
                || !ctx.leadership.is_leader()
            {
                continue;
            }
            let params = kube::api::ListParams::default().labels(&owner_selector(&csv));
            let roles: Api<ClusterRole> = Api::all(ctx.client.clone());
            let bindings: Api<ClusterRoleBinding> = Api::all(ctx.client.clone());
            let deleted_roles = roles.delete_collection(&DeleteParams::default(), &params).await;
            let deleted_bindings = bindings.delete_collection(&DeleteParams::default(), &params).await;
            if let Err(err) = deleted_roles.map(|_| ()).and(deleted_bindings.map(|_| ())) {
                tracing::warn!(%err, csv = %csv.name_any(), "cannot delete the cluster RBAC of a deleted CSV");
            }
        }
    }
}

/// The CSV whose OperatorCondition controls `object` (its Role or RoleBinding).
fn condition_owner<K: ResourceExt>(object: &K) -> Option<ObjectRef<ClusterServiceVersion>> {
    let namespace = object.namespace().unwrap_or_default();
    object
        .owner_references()
        .iter()
        .find(|o| o.kind == "OperatorCondition")
        .map(|o| ObjectRef::<ClusterServiceVersion>::new(&o.name).within(&namespace))
}

/// Build the CSV controller; it subscribes to the caches now (call this before the caches
/// start) and runs, once every cache it reads has synced, until `shutdown` resolves.
pub fn run(
    ctx: Arc<ControllerContext<CsvState>>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let state = ctx.state.clone();
    let store = state.csvs.store().clone();

    let related_store = store.clone();
    let metrics = ctx.state.metrics.clone();
    // Replacement-chain neighbours and copies/originals react to each other.
    let related = move |changed: Arc<ClusterServiceVersion>| {
        let ns = changed.namespace().unwrap_or_default();
        let name = changed.name_any();
        if related_store.get(&ObjectRef::from_obj(changed.as_ref())).is_none() && !changed.is_copied() {
            metrics.forget_csv(&ns, &name, changed.spec.version.as_deref().unwrap_or_default());
            metrics.csv_count.set(i64::try_from(related_store.len()).unwrap_or(i64::MAX));
        }
        let origin = changed.labels().get(keys::COPIED_FROM_LABEL).cloned();
        related_store
            .state()
            .iter()
            .filter(|c| {
                let same_ns = c.namespace().as_deref() == Some(ns.as_str());
                (same_ns
                    && (c.spec.replaces.as_deref() == Some(name.as_str())
                        || changed.spec.replaces.as_deref() == Some(c.name_any().as_str())))
                    || (c.name_any() == name && c.labels().get(keys::COPIED_FROM_LABEL) == Some(&ns))
                    || (c.name_any() == name && origin.as_deref() == c.namespace().as_deref())
            })
            .map(|c| ObjectRef::from_obj(c.as_ref()))
            .collect::<Vec<_>>()
    };
    let groups_store = store.clone();
    let by_group = move |group: Arc<OperatorGroup>| {
        let ns = group.namespace();
        groups_store
            .state()
            .iter()
            .filter(|c| c.namespace() == ns && !c.is_copied())
            .map(|c| ObjectRef::from_obj(c.as_ref()))
            .collect::<Vec<_>>()
    };
    let crd_store = store.clone();
    let by_crd = move |crd: Arc<CustomResourceDefinition>| {
        let crd_name = crd.name_any();
        crd_store
            .state()
            .iter()
            .filter(|c| {
                !c.is_copied()
                    && c.spec.owned_crds().iter().chain(c.spec.required_crds()).any(|d| d.name == crd_name)
            })
            .map(|c| ObjectRef::from_obj(c.as_ref()))
            .collect::<Vec<_>>()
    };
    let sa_store = store.clone();
    let by_service_account = move |sa: Arc<ServiceAccount>| {
        let ns = sa.namespace();
        let sa_name = sa.name_any();
        sa_store
            .state()
            .iter()
            .filter(|c| c.namespace() == ns && !c.is_copied() && declared_service_accounts(c).contains(&sa_name))
            .map(|c| ObjectRef::from_obj(c.as_ref()))
            .collect::<Vec<_>>()
    };
    let all_ns_store = store.clone();
    let all_namespace_csvs = move || {
        all_ns_store
            .state()
            .iter()
            .filter(|c| {
                !c.is_copied() && c.annotations().get(keys::TARGET_NAMESPACES_ANNOTATION).is_some_and(String::is_empty)
            })
            .map(|c| ObjectRef::from_obj(c.as_ref()))
            .collect::<Vec<_>>()
    };
    let for_config = all_namespace_csvs.clone();

    let condition_store = store.clone();
    // Its own CSV (RBAC and status follow the condition) and the CSVs replacing it (the
    // Upgradeable gate).
    let by_condition = move |condition: Arc<OperatorCondition>| {
        let ns = condition.namespace();
        let owner = condition.name_any();
        condition_store
            .state()
            .iter()
            .filter(|c| {
                c.namespace() == ns
                    && (c.spec.replaces.as_deref() == Some(owner.as_str()) || (c.name_any() == owner && !c.is_copied()))
            })
            .map(|c| ObjectRef::from_obj(c.as_ref()))
            .collect::<Vec<_>>()
    };
    // An OperatorCondition's Role and RoleBinding lead back to the CSV of the same name.
    let by_condition_role = |role: Arc<Role>| condition_owner(role.as_ref());
    let by_condition_binding = |binding: Arc<RoleBinding>| condition_owner(binding.as_ref());
    let subscription_store = store.clone();
    let by_subscription = move |subscription: Arc<Subscription>| {
        let ns = subscription.namespace();
        let status = subscription.status.as_ref();
        let named: BTreeSet<&str> = status
            .into_iter()
            .flat_map(|s| [s.installed_csv.as_deref(), s.current_csv.as_deref()])
            .flatten()
            .collect();
        subscription_store
            .state()
            .iter()
            .filter(|c| c.namespace() == ns && !c.is_copied() && named.contains(c.name_any().as_str()))
            .map(|c| ObjectRef::from_obj(c.as_ref()))
            .collect::<Vec<_>>()
    };
    // Generated cluster-scoped objects lead back to their CSV through the owner labels; an
    // APIService also to every CSV that owns it (an adoption conflict may have cleared) or
    // requires it (it may have become Available).
    let by_owner_labels = |labels: &BTreeMap<String, String>| {
        let owner = OwnerLabels::of(labels);
        (owner.kind == "ClusterServiceVersion" && !owner.name.is_empty())
            .then(|| ObjectRef::<ClusterServiceVersion>::new(&owner.name).within(&owner.namespace))
    };
    let api_service_store = store.clone();
    let by_api_service = move |api: Arc<APIService>| {
        let api_name = api.name_any();
        let mut refs: Vec<ObjectRef<ClusterServiceVersion>> = api_service_store
            .state()
            .iter()
            .filter(|c| {
                !c.is_copied()
                    && c.spec
                        .owned_api_services()
                        .iter()
                        .chain(c.spec.required_api_services())
                        .any(|d| d.api_service_name() == api_name)
            })
            .map(|c| ObjectRef::from_obj(c.as_ref()))
            .collect();
        refs.extend(by_owner_labels(api.labels()));
        refs.dedup();
        refs
    };
    let by_validating = move |config: Arc<ValidatingWebhookConfiguration>| by_owner_labels(config.labels());
    let by_mutating = move |config: Arc<MutatingWebhookConfiguration>| by_owner_labels(config.labels());
    let controller = Controller::for_shared_stream(state.csvs.subscribe(), store)
        .with_config(olm_runtime::controller::controller_config())
        .watches_shared_stream(state.api_services.subscribe(), by_api_service)
        .watches_shared_stream(state.validating_webhooks.subscribe(), by_validating)
        .watches_shared_stream(state.mutating_webhooks.subscribe(), by_mutating)
        .watches_shared_stream(state.managed_roles.subscribe(), by_condition_role)
        .watches_shared_stream(state.managed_role_bindings.subscribe(), by_condition_binding)
        .watches_shared_stream(state.subscriptions.subscribe(), by_subscription)
        .watches_shared_stream(state.operator_conditions.subscribe(), by_condition)
        .watches_shared_stream(state.csvs.subscribe(), related)
        .owns_shared_stream(state.deployments.subscribe())
        .watches_shared_stream(state.groups.subscribe(), by_group)
        .watches_shared_stream(state.crds.subscribe(), by_crd)
        .watches_shared_stream(state.service_accounts.subscribe(), by_service_account)
        .watches_shared_stream(state.namespaces.subscribe(), move |_ns: Arc<Namespace>| all_namespace_csvs())
        .watches_shared_stream(state.olm_configs.subscribe(), move |_c: Arc<OLMConfig>| for_config())
        .reconcile_all_on(ctx.leadership.gained())
        .graceful_shutdown_on(shutdown);
    let cleanup = delete_cluster_rbac_of_deleted_csvs(ctx.clone());
    async move {
        state.csvs.synced().await;
        state.groups.synced().await;
        state.crds.synced().await;
        state.service_accounts.synced().await;
        state.deployments.synced().await;
        state.namespaces.synced().await;
        state.olm_configs.synced().await;
        state.cluster_roles.synced().await;
        state.operator_conditions.synced().await;
        state.subscriptions.synced().await;
        state.api_services.synced().await;
        state.validating_webhooks.synced().await;
        state.mutating_webhooks.synced().await;
        state.managed_roles.synced().await;
        state.managed_role_bindings.synced().await;
        let controller = controller
            .run(|csv, ctx| guarded(csv, ctx, reconcile), error_policy, ctx)
            .for_each(|_| futures::future::ready(()));
        // The cleanup loop only ends with the cache; the controller ends on shutdown.
        tokio::select! {
            _ = controller => {}
            _ = cleanup => {}
        }
    }
}
