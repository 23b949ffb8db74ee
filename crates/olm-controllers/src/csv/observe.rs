//! Observe: what one pass over a (non-copied, live) CSV reads, from the watch caches where it
//! can and from the API server where it must (server version, discovery, permissions, pod specs
//! the cache leaves out, owned RBAC, serving certificates).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::{ClusterRole, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::jiff::Timestamp;
use kube::{Api, ResourceExt};
use olm_api::keys;
use olm_api::v1::olm_config::OLM_CONFIG_NAME;
use olm_api::v1::operator_group::OperatorGroup;
use olm_api::v1alpha1::cluster_service_version::{ClusterServiceVersion, CsvPhase};
use olm_api::v1alpha1::subscription::Subscription;
use olm_api::v2::OperatorCondition;
use olm_runtime::error::is_not_found;
use olm_runtime::{ControllerContext, Error, Result};

use super::certs::{self, ServingCert};
use super::decide::{ExistingApiService, ExistingWebhook, Observed, OwnedRbac, OwnerLabels, needs_permission_check};
use super::state::CsvState;
use super::requirements::{CrdState, Facts, PermissionCheck, declared_service_accounts};
use crate::metadata::owner_selector;

/// What was read for one CSV; [`Observation::observed`] lends it to `decide`.
pub(super) struct Observation {
    csv: Arc<ClusterServiceVersion>,
    all_groups: Vec<Arc<OperatorGroup>>,
    crds: BTreeMap<String, CrdState>,
    crd_uids: BTreeMap<String, String>,
    cluster_roles: BTreeMap<String, ClusterRole>,
    service_accounts: BTreeSet<String>,
    foreign_service_accounts: BTreeMap<String, Vec<String>>,
    inherited_service_accounts: BTreeMap<String, Vec<String>>,
    kube_version: Option<String>,
    served_kinds: BTreeMap<String, BTreeSet<String>>,
    required_api_services: BTreeMap<String, bool>,
    permissions: Option<Vec<PermissionCheck>>,
    deployments: BTreeMap<String, Deployment>,
    /// The Deployments read whole from the API server (their spec was not verified).
    pub read_whole: Vec<String>,
    /// The other CSVs of its namespace (copies left out).
    peers: Vec<Arc<ClusterServiceVersion>>,
    /// Its copies in other namespaces.
    copies: Vec<Arc<ClusterServiceVersion>>,
    taken_namespaces: BTreeSet<String>,
    /// Namespaces not being deleted; read only when its group targets more than its own.
    active_namespaces: Vec<String>,
    owned_rbac: OwnedRbac,
    operator_condition: Option<Arc<OperatorCondition>>,
    condition_role: Option<Arc<Role>>,
    condition_binding: Option<Arc<RoleBinding>>,
    replaced_condition: Option<Arc<OperatorCondition>>,
    copied_csvs_disabled: bool,
    subscriptions: Vec<Arc<Subscription>>,
    exposure: Exposure,
    /// The time of the pass (taken before the serving certificates are read).
    pub now: Timestamp,
}

impl Observation {
    /// The observation as `decide` reads it.
    pub fn observed(&self) -> Observed<'_> {
        let csv = self.csv.as_ref();
        let namespace = csv.namespace().unwrap_or_default();
        let subscription_refs: Vec<&Subscription> = self.subscriptions.iter().map(Arc::as_ref).collect();
        let subscription = super::deployment::subscription_for(csv, &subscription_refs);
        let in_namespace = |g: &&OperatorGroup| g.namespace().as_deref() == Some(namespace.as_str());
        Observed {
            serving_certs: &self.exposure.certs,
            api_services: &self.exposure.api_services,
            webhooks: &self.exposure.webhooks,
            subscription_config: subscription.and_then(|s| s.spec.config.as_ref()),
            csv,
            groups: self.all_groups.iter().map(Arc::as_ref).filter(in_namespace).collect(),
            other_groups: self.all_groups.iter().map(Arc::as_ref).filter(|g| !in_namespace(g)).collect(),
            facts: Facts {
                crds: &self.crds,
                service_accounts: &self.service_accounts,
                foreign_service_accounts: &self.foreign_service_accounts,
                inherited_service_accounts: &self.inherited_service_accounts,
                kube_version: self.kube_version.as_deref(),
                served_kinds: &self.served_kinds,
                required_api_services: &self.required_api_services,
            },
            permissions: self.permissions.as_deref(),
            deployments: &self.deployments,
            peers: self.peers.iter().map(Arc::as_ref).collect(),
            copies: self.copies.iter().map(Arc::as_ref).collect(),
            taken_namespaces: self.taken_namespaces.clone(),
            crd_uids: &self.crd_uids,
            cluster_roles: &self.cluster_roles,
            owned_rbac: &self.owned_rbac,
            operator_condition: self.operator_condition.as_deref(),
            condition_rbac: (self.condition_role.as_deref(), self.condition_binding.as_deref()),
            replaced_condition: self.replaced_condition.as_deref(),
            active_namespaces: &self.active_namespaces,
            copied_csvs_disabled: self.copied_csvs_disabled,
            desired: Default::default(),
        }
    }
}

/// What the CRD cache says about `crd`.
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

/// What a CSV reads of a CRD: its uid and [`crd_state`].
pub(super) fn crd_view(crd: &CustomResourceDefinition) -> (Option<String>, String) {
    (crd.uid(), format!("{:?}", crd_state(crd)))
}

/// Read everything one pass over `csv` decides from.
pub(super) async fn observe(ctx: &ControllerContext<CsvState>, csv: &Arc<ClusterServiceVersion>) -> Result<Observation> {
    let state = &ctx.state;
    let namespace = csv.namespace().unwrap_or_default();
    let name = csv.name_any();
    let all_groups = state.groups.list();
    let mut crds = BTreeMap::new();
    let mut crd_uids = BTreeMap::new();
    for crd in csv.spec.owned_crds().iter().chain(csv.spec.required_crds()) {
        if let Some(found) = state.crds.get(None, &crd.name) {
            crds.insert(crd.name.clone(), crd_state(&found));
            crd_uids.insert(crd.name.clone(), found.uid().unwrap_or_default());
        }
    }
    let owner = crate::metadata::owner_labels(csv);
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
    for role in crate::metadata::carrying_owner(&state.cluster_roles, &owner) {
        cluster_roles.insert(role.name_any(), (*role).clone());
    }
    let declared = declared_service_accounts(csv);
    let service_accounts: BTreeSet<String> = declared
        .iter()
        .filter(|sa| state.service_accounts.get(Some(&namespace), sa).is_some())
        .cloned()
        .collect();
    // As upstream: an account with CSV owners none of which is this CSV (by uid) belongs to
    // another operator. Owners in this CSV's replacement chain do not count (the InstallPlan
    // of an upgrade hands the account to the new version), nor owners that no longer exist.
    let own_uid = csv.uid().unwrap_or_default();
    // Only a group that targets other namespaces needs every namespace's name and the CSVs
    // of the same name elsewhere (for copies): reading them per pass of every CSV was most of
    // a pass at 1,000 namespaces.
    let targets_others = all_groups.iter().filter(|g| g.namespace().as_deref() == Some(namespace.as_str())).any(|g| {
        g.status.as_ref().and_then(|s| s.namespaces.as_ref()).is_some_and(|targets| targets.iter().any(|t| *t != namespace))
    });
    let csvs = related_csvs(&state.csvs, &namespace, &name, targets_others);
    let peer_refs: Vec<&ClusterServiceVersion> = csvs.peers.iter().map(Arc::as_ref).collect();
    let chain = super::decide::replacement_chain_of(csv, &peer_refs);
    let foreign_service_accounts: BTreeMap<String, Vec<String>> = declared
        .iter()
        .filter_map(|sa| {
            let account = state.service_accounts.get(Some(&namespace), sa)?;
            let others = super::requirements::foreign_owners(account.owner_references(), &own_uid, &chain, &peer_refs);
            (!others.is_empty()).then(|| (sa.clone(), others))
        })
        .collect();
    let replaced = super::requirements::replaced_by(csv, &peer_refs);
    let inherited_service_accounts: BTreeMap<String, Vec<String>> = declared
        .iter()
        .filter_map(|sa| {
            let account = state.service_accounts.get(Some(&namespace), sa)?;
            let predecessors = super::requirements::predecessor_owners(account.owner_references(), &own_uid, &replaced);
            (!predecessors.is_empty()).then(|| (sa.clone(), predecessors))
        })
        .collect();
    let kube_version = kube_version(&ctx.client, csv).await;
    let served_kinds = served_kinds(&ctx.client, csv).await?;
    let required_api_services: BTreeMap<String, bool> = csv
        .spec
        .required_api_services()
        .iter()
        .filter_map(|api| {
            let name = api.api_service_name();
            let found = state.api_services.get(None, &name)?;
            Some((name, is_available(&found)))
        })
        .collect();
    let permissions = if needs_permission_check(csv) {
        Some(super::permissions::check_permissions(&ctx.client, csv, &service_accounts).await?)
    } else {
        None
    };
    let (deployments, read_whole) = deployments(ctx, csv).await?;
    let active_namespaces: Vec<String> = if targets_others {
        state
            .namespaces
            .list()
            .iter()
            .filter(|ns| {
                ns.metadata.deletion_timestamp.is_none()
                    && ns.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Terminating")
            })
            .map(|ns| ns.name_any())
            .collect()
    } else {
        Vec::new()
    };
    let all_namespaces = csv.annotations().get(keys::TARGET_NAMESPACES_ANNOTATION).is_some_and(String::is_empty);
    // Read in Failed too: a pass that finds the install healthy again lifts the roles before
    // it says Succeeded, so a lift the API server refuses keeps the CSV Failed (with one status
    // write) instead of flipping it between Succeeded and Failed on every retry.
    let owned_rbac = if all_namespaces && matches!(csv.phase(), Some(CsvPhase::Succeeded | CsvPhase::Failed)) {
        owned_rbac(&ctx.client, csv).await?
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
    let now = Timestamp::now();
    let exposure = observe_exposure(&ctx.client, state, csv, now).await?;
    Ok(Observation {
        csv: csv.clone(),
        all_groups,
        crds,
        crd_uids,
        cluster_roles,
        service_accounts,
        foreign_service_accounts,
        inherited_service_accounts,
        kube_version,
        served_kinds,
        required_api_services,
        permissions,
        deployments,
        read_whole,
        peers: csvs.peers,
        copies: csvs.copies,
        taken_namespaces: csvs.taken_namespaces,
        active_namespaces,
        owned_rbac,
        operator_condition,
        condition_role,
        condition_binding,
        replaced_condition,
        copied_csvs_disabled,
        subscriptions,
        exposure,
        now,
    })
}

/// The CSVs one pass relates its CSV to.
struct RelatedCsvs {
    /// The other CSVs of its namespace, copies left out.
    peers: Vec<Arc<ClusterServiceVersion>>,
    /// Its copies: of the same name, elsewhere, copied from its namespace.
    copies: Vec<Arc<ClusterServiceVersion>>,
    /// Namespaces where a CSV of the same name is no copy of it (no copy goes there); only
    /// read when its group targets other namespaces.
    taken_namespaces: BTreeSet<String>,
}

/// [`RelatedCsvs`] of the CSV `name` in `namespace`, from the cache's namespace and copy
/// indexes: a pass over every CSV of the cluster for every pass of every CSV made the
/// controller quadratic in the number of namespaces. Only a CSV whose group targets other
/// namespaces (`targets_others`) looks for the namespaces it cannot copy into: its namesakes'.
fn related_csvs(cache: &olm_runtime::Cache<ClusterServiceVersion>, namespace: &str, name: &str, targets_others: bool) -> RelatedCsvs {
    let peers = cache.list_in(namespace).into_iter().filter(|c| c.metadata.name.as_deref() != Some(name) && !c.is_copied()).collect();
    let copies = crate::csv_index::copies_of(cache, namespace, name);
    let taken_namespaces = if targets_others { crate::csv_index::taken_namespaces(cache, namespace, name) } else { BTreeSet::new() };
    RelatedCsvs { peers, copies, taken_namespaces }
}

/// Whether an APIService's `Available` condition is True.
fn is_available(api: &k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService) -> bool {
    api.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Available" && c.status == "True"))
}

/// The API server's `gitVersion`, asked only for CSVs that set `minKubeVersion`.
async fn kube_version(client: &kube::Client, csv: &ClusterServiceVersion) -> Option<String> {
    if csv.spec.min_kube_version.as_deref().is_some_and(|v| !v.trim().is_empty()) {
        match client.apiserver_version().await {
            Ok(info) => Some(info.git_version),
            Err(err) => {
                tracing::warn!(%err, "cannot read the API server version for minKubeVersion");
                None
            }
        }
    } else {
        None
    }
}

/// The kinds served per group-version named by `nativeAPIs` and required APIServices: each
/// discovered at once; one that is not served is absent.
async fn served_kinds(client: &kube::Client, csv: &ClusterServiceVersion) -> Result<BTreeMap<String, BTreeSet<String>>> {
    let discovered = futures::future::join_all(super::requirements::group_versions_to_discover(csv).into_iter().map(
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
    Ok(served_kinds)
}

/// The namespace's Deployments that the strategy names or that are labelled as the CSV's, and
/// the names of those read whole. The cache has no pod specs: a Deployment whose spec is not
/// verified at its current generation (changed by someone, or first seen since this process
/// started) is read whole.
async fn deployments(ctx: &ControllerContext<CsvState>, csv: &ClusterServiceVersion) -> Result<(BTreeMap<String, Deployment>, Vec<String>)> {
    let state = &ctx.state;
    let namespace = csv.namespace().unwrap_or_default();
    let strategy_names: BTreeSet<String> = csv.spec.strategy_deployment_names().map(str::to_owned).collect();
    let mut deployments: BTreeMap<String, Deployment> = BTreeMap::new();
    let mut read_whole = Vec::new();
    for cached in state.deployments.list_in(&namespace) {
        let dep_name = cached.name_any();
        if !strategy_names.contains(&dep_name) && !crate::metadata::owned_by(cached.labels(), csv) {
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
    Ok((deployments, read_whole))
}

/// The Roles and RoleBindings in the CSV's namespace labelled as owned by it.
pub(super) async fn owned_rbac(client: &kube::Client, csv: &ClusterServiceVersion) -> Result<OwnedRbac> {
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
            let available = is_available(&found);
            let ca_bundle = found.spec.as_ref().and_then(|s| s.ca_bundle.as_ref()).map(|b| b.0.clone());
            let owner = OwnerLabels::of(found.labels());
            exposure.api_services.insert(name, ExistingApiService { available, ca_bundle, owner });
        }
    }
    if !csv.spec.webhooks().is_empty() {
        let first_ca = |bundle: Option<&ByteString>| bundle.map(|b| b.0.clone());
        generated_webhooks(csv, &state.validating_webhooks.list(), &mut exposure.webhooks, |config| {
            first_ca(config.webhooks.as_ref().and_then(|w| w.first()).and_then(|w| w.client_config.ca_bundle.as_ref()))
        });
        generated_webhooks(csv, &state.mutating_webhooks.list(), &mut exposure.webhooks, |config| {
            first_ca(config.webhooks.as_ref().and_then(|w| w.first()).and_then(|w| w.client_config.ca_bundle.as_ref()))
        });
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
        let service = certs::service_name(deployment);
        let cert = match stored {
            Some(stored) if !certs::needs_rotation(Some(&stored), rotate_at, now) && certs::usable(&stored, &service, &namespace, now) => stored,
            _ => certs::generate(&service, &namespace, now).map_err(|err| Error::InvalidObject {
                kind: "ClusterServiceVersion",
                name: format!("{namespace}/{}", csv.name_any()),
                message: err.to_string(),
            })?,
        };
        exposure.certs.insert(deployment.clone(), cert);
    }
    Ok(exposure)
}

/// Record into `found`, by description generateName, the webhook configurations of kind `K`
/// generated for `csv` (labelled as its own), with the caBundle of their first webhook.
fn generated_webhooks<K>(
    csv: &ClusterServiceVersion,
    configs: &[Arc<K>],
    found: &mut BTreeMap<String, ExistingWebhook>,
    first_ca_bundle: impl Fn(&K) -> Option<Vec<u8>>,
) where
    K: kube::Resource<DynamicType = ()>,
{
    for config in configs {
        let labels = config.labels();
        let generate_name = crate::metadata::owned_by(labels, csv)
            .then(|| labels.get(keys::WEBHOOK_DESCRIPTION_GENERATE_NAME_LABEL).cloned())
            .flatten();
        if let Some(generate_name) = generate_name {
            found.insert(generate_name, ExistingWebhook {
                kind: K::kind(&()).into_owned(),
                name: config.name_any(),
                ca_bundle: first_ca_bundle(config),
            });
        }
    }
}
