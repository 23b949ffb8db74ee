//! Observe → decide → act for ClusterExtensions: read the revision record and what the
//! ClusterCatalogs serve, choose the bundle, and (when it or the spec changed, or the last apply
//! is older than [`decide::RESYNC`]) pull, render, check, apply, prune and record; then
//! [`decide::status`] and one status write. Only the leader acts.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, Patch, PatchParams};
use kube::core::{Selector, SelectorExt};
use kube::runtime::controller::{Action, Controller};
use kube::{Api, ResourceExt};
use olm_api::olmv1::cluster_catalog::AvailabilityMode;
use olm_api::olmv1::cluster_extension::{SourceType, UpgradeConstraintPolicy};
use olm_api::olmv1::conditions::{BLOCKED, INVALID_CONFIGURATION};
use olm_api::olmv1::ClusterExtension;
use olm_catalog::constraint::Constraint;
use olm_catalog_client::CatalogContent;
use olm_install::registry_v1::{RenderError, Target, certificates_needed, render};
use olm_install::serving_cert::{self, ServingCert};
use olm_resolver::extension::{Offer, Request, UpgradePolicy, choose};
use olm_runtime::controller::action_for;
use olm_runtime::error::{api_message, is_not_found};
use olm_runtime::{ControllerContext, EventNote, Result, error_policy, guarded};
use tracing::instrument;

use super::adopt::AdoptFrom;
use super::apply::{self, Installer, Kinds, Owner};
use super::decide::{self, Deprecations, InstalledBundle, Observed, Progress};
use super::record::{self, Record};
use super::release;
use super::{ClusterExtensionState, Memory};

/// How long a bundle read may take before the pass gives up and retries.
const PULL_TIMEOUT: Duration = Duration::from_secs(300);

type Ctx = ControllerContext<ClusterExtensionState>;

/// What a pass found and did.
struct Outcome {
    installed: Option<InstalledBundle>,
    progress: Progress,
    deprecations: Option<Deprecations>,
}

#[instrument(skip_all, fields(kind = "ClusterExtension", name = %extension.name_any()))]
async fn reconcile(extension: Arc<ClusterExtension>, ctx: Arc<Ctx>) -> Result<Action> {
    let name = extension.name_any();
    if extension.metadata.deletion_timestamp.is_some() {
        // The garbage collector removes what it owns.
        forget(&ctx.state, &name);
        return Ok(Action::await_change());
    }
    let outcome = pass(&ctx, &extension).await;
    let failures = {
        let mut memory = ctx.state.memory.lock().unwrap_or_else(|p| p.into_inner());
        let entry = memory.entry(name.clone()).or_default();
        entry.failures = if matches!(outcome.progress, Progress::Done) { 0 } else { entry.failures + 1 };
        entry.failures
    };
    let observed = Observed {
        extension: &extension,
        installed: outcome.installed.as_ref(),
        progress: &outcome.progress,
        deprecations: outcome.deprecations.as_ref(),
        failures,
    };
    let (status, requeue) = decide::status(&observed, Timestamp::now());
    if status.install != extension.status.as_ref().and_then(|s| s.install.clone())
        && let Some(installed) = &outcome.installed
    {
        let note = EventNote::normal("Installed", "Install", format!("installed bundle {} (version {}) of package {}", installed.name, installed.version, installed.package));
        ctx.events.publish(&kube::Resource::object_ref(extension.as_ref(), &()), &note).await;
    }
    ctx.status.apply_cluster(extension.as_ref(), &status).await?;
    Ok(action_for(requeue))
}

/// One pass: what is installed afterwards and how far it got.
async fn pass(ctx: &Ctx, extension: &ClusterExtension) -> Outcome {
    let name = extension.name_any();
    let namespace = extension.spec.namespace.clone();
    let (recorded, manifest) = match read_record(ctx, &name, &extension.uid().unwrap_or_default(), &namespace).await {
        Ok(Some(deployed)) => (Some(deployed.record), deployed.manifest),
        Ok(None) => (None, String::new()),
        Err(message) => return Outcome { installed: None, progress: Progress::Retrying(message), deprecations: None },
    };
    let installed = recorded.as_ref().map(|r| r.bundle.clone());
    let stay = |progress| Outcome { installed: installed.clone(), progress, deprecations: None };

    let Some(filter) = extension.catalog().filter(|_| extension.spec.source.source_type == SourceType::Catalog) else {
        let message = "spec.source.catalog is required when spec.source.sourceType is Catalog: set it to the package to install".to_owned();
        return stay(Progress::Stopped { reason: BLOCKED, message });
    };
    let constraint = match filter.version.as_deref().filter(|v| !v.trim().is_empty()).map(Constraint::parse).transpose() {
        Ok(constraint) => constraint,
        Err(err) => {
            let version = filter.version.clone().unwrap_or_default();
            return stay(Progress::Retrying(format!("desired version range {version:?} is invalid: {err}")));
        }
    };
    let offered = match offers(&ctx.state, filter.selector.clone()) {
        Ok(offered) => offered,
        Err(message) => return stay(Progress::Retrying(message)),
    };
    // No catalog at all (deleted, or none selected any more): keep what is installed, as
    // upstream does, rather than call it a failure; what was deleted of it is put back.
    if offered.is_empty()
        && let Some((installed, record)) = installed.as_ref().zip(recorded.as_ref())
    {
        if applied_lately(&ctx.state, &name, extension.metadata.generation, &installed.name) {
            return stay(Progress::Done);
        }
        tracing::info!(bundle = %installed.name, "no ClusterCatalog serves content for this extension; the installed bundle stays, applied again from its release");
        return match apply_release_again(ctx, extension, record, &manifest).await {
            Ok(()) => {
                remember_applied(&ctx.state, &name, extension.metadata.generation, &installed.name);
                stay(Progress::Done)
            }
            Err(message) => stay(Progress::Retrying(format!("no ClusterCatalog serves package {:?} any more, and applying bundle {} again from its release failed: {message}", installed.package, installed.name))),
        };
    }
    let installed_version = installed.as_ref().and_then(|i| olm_catalog::version::parse_version(&i.version).ok());
    let channels = filter.channels.clone().unwrap_or_default();
    let request = Request {
        package: &filter.package_name,
        version: constraint.as_ref(),
        channels: &channels,
        policy: match filter.upgrade_constraint_policy {
            UpgradeConstraintPolicy::SelfCertified => UpgradePolicy::SelfCertified,
            _ => UpgradePolicy::CatalogProvided,
        },
        installed: installed.as_ref().zip(installed_version.as_ref()).map(|(i, v)| (i.name.as_str(), v)),
    };
    let catalogs: Vec<Offer<'_>> = offered.iter().map(|(name, priority, content)| Offer { catalog: name, priority: *priority, content: &content.catalog }).collect();
    let chosen = match choose(&catalogs, &request) {
        Ok(chosen) => chosen,
        Err(why) => return stay(Progress::Retrying(why.to_string())),
    };
    let content = offered.iter().find(|(n, ..)| n == chosen.catalog).map(|(_, _, c)| c.clone());
    let Some(content) = content else { return stay(Progress::Retrying(format!("catalog {} is no longer served", chosen.catalog))) };
    let bundle = InstalledBundle {
        package: chosen.package.name.clone(),
        name: chosen.bundle.name.clone(),
        version: chosen.bundle.version.to_string(),
        image: chosen.bundle.image.clone(),
    };
    let deprecations_for = |bundle: Option<&str>| deprecations(chosen.package, &channels, bundle);
    let wrap = |message: String| format!("error for resolved bundle {:?} with version {:?}: {message}", bundle.name, bundle.version);

    // Applied lately for this generation and bundle: nothing to do.
    if recorded.as_ref().is_some_and(|r| r.bundle == bundle) && applied_lately(&ctx.state, &name, extension.metadata.generation, &bundle.name) {
        return Outcome { installed, progress: Progress::Done, deprecations: Some(deprecations_for(Some(&bundle.name))) };
    }
    let kept = |progress| Outcome { installed: installed.clone(), deprecations: Some(deprecations_for(installed.as_ref().map(|i| i.name.as_str()))), progress };

    let channel = chosen
        .package
        .channels()
        .iter()
        .filter(|c| channels.is_empty() || channels.contains(&c.name))
        .find(|c| c.entry(&bundle.name).is_some())
        .map(|c| c.name.clone())
        .unwrap_or_default();
    let read = tokio::time::timeout(PULL_TIMEOUT, content.extension_bundle(&bundle.package, &channel, &bundle.name)).await;
    let manifests = match read {
        Ok(Ok(manifests)) => manifests,
        Ok(Err(err)) => return kept(Progress::Retrying(wrap(err.to_string()))),
        Err(_) => return kept(Progress::Retrying(wrap(format!("reading the bundle did not finish within {}s; check the registry", PULL_TIMEOUT.as_secs())))),
    };
    let target = Target { install_namespace: &namespace, config: extension.spec.config.as_ref().and_then(|c| c.inline.as_ref()) };
    let certs = match serving_certs(ctx, &manifests, &namespace).await {
        Ok(certs) => certs,
        Err(message) => return kept(Progress::Retrying(wrap(message))),
    };
    let rendered = match render(&manifests, &target, &certs) {
        Ok(rendered) => rendered,
        Err(RenderError::InvalidConfiguration(message)) => return kept(Progress::Stopped { reason: INVALID_CONFIGURATION, message: wrap(message) }),
        Err(other) => return kept(Progress::Retrying(wrap(other.to_string()))),
    };
    if let Err(message) = namespace_exists(ctx, &namespace).await {
        return kept(Progress::Retrying(wrap(message)));
    }
    if extension.crd_upgrade_safety()
        && let Err(message) = apply::check_crds(&ctx.client, &rendered.objects).await
    {
        return kept(Progress::Retrying(wrap(message)));
    }
    let installer = match installer(ctx, extension) {
        Ok(installer) => installer,
        Err(message) => return kept(Progress::Stopped { reason: BLOCKED, message }),
    };
    let uid = extension.uid().unwrap_or_default();
    let package = extension.spec.source.catalog.as_ref().map(|c| c.package_name.as_str()).unwrap_or_default();
    let adopt_from = extension.annotations().get(olm_api::keys::ADOPT_FROM_ANNOTATION).and_then(|a| AdoptFrom::parse(a, package));
    let owner = Owner { name: &name, uid: &uid, install_namespace: &namespace, adopt_from: adopt_from.as_ref() };
    let previous = recorded.as_ref().map(|r| r.objects.clone()).unwrap_or_default();
    // Adopted Deployments keep their spec while the bundle they were adopted at stays.
    let live_spec = recorded.as_ref().filter(|r| r.bundle == bundle).map(|r| r.live_spec.clone()).unwrap_or_default();
    let mut kinds = Kinds::default();
    let applied = match apply::apply_all(&installer, &ctx.field_manager(), &owner, rendered.objects, &previous, &live_spec, &mut kinds).await {
        Ok(applied) => applied,
        Err(message) => return kept(Progress::Retrying(wrap(message))),
    };
    let apply::Applied { objects: applied, live_spec, manifest } = applied;
    if let Err(message) = apply::remove(&installer, &record::dropped(&previous, &applied), &mut kinds).await {
        return kept(Progress::Retrying(wrap(format!("the new objects are applied, but removing what the new bundle dropped failed: {message}"))));
    }
    let changed = recorded.as_ref().is_none_or(|r| r.bundle != bundle || r.objects != applied || r.live_spec != live_spec);
    let revision = recorded.as_ref().map_or(1, |r| r.revision + u64::from(changed));
    let next = Record { revision, bundle: bundle.clone(), objects: applied, live_spec };
    if changed && let Err(message) = write_record(ctx, &next, &manifest, &name, &uid, &namespace).await {
        return kept(Progress::Retrying(wrap(message)));
    }
    if changed {
        tracing::info!(bundle = %bundle.name, revision, objects = next.objects.len(), "installed");
    }
    remember_applied(&ctx.state, &name, extension.metadata.generation, &bundle.name);
    Outcome { installed: Some(bundle.clone()), progress: Progress::Done, deprecations: Some(deprecations_for(Some(&bundle.name))) }
}

/// The serving certificates of the Deployments that serve webhooks: the pair in their Secret
/// while it is still good for their Service (so an upgrade does not roll the pods for nothing),
/// else a new CA and pair.
async fn serving_certs(ctx: &Ctx, bundle: &olm_catalog_client::BundleContent, namespace: &str) -> std::result::Result<BTreeMap<String, ServingCert>, String> {
    let needed = match certificates_needed(bundle) {
        Ok(needed) => needed,
        // The render that follows says what is wrong with the bundle.
        Err(_) => return Ok(BTreeMap::new()),
    };
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), namespace);
    let now = Timestamp::now();
    let mut out = BTreeMap::new();
    for deployment in needed {
        let service = serving_cert::service_name(&deployment);
        let stored = match secrets.get_opt(&serving_cert::secret_name(&deployment)).await {
            Ok(found) => found.as_ref().and_then(serving_cert::from_secret),
            Err(err) if is_not_found(&err) => None,
            Err(err) => return Err(format!("cannot read the serving certificate Secret of deployment {deployment}: {}", api_message(&err))),
        };
        let cert = match stored.filter(|c| serving_cert::usable(c, &service, namespace, now)) {
            Some(cert) => cert,
            None => serving_cert::generate(&service, namespace, now).map_err(|err| err.to_string())?,
        };
        out.insert(deployment, cert);
    }
    Ok(out)
}

/// The ClusterCatalogs offered: served by this process, available, selected; by name.
fn offers(state: &ClusterExtensionState, selector: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>) -> Result<Vec<(String, i32, Arc<CatalogContent>)>, String> {
    let selector = match selector.map(Selector::try_from).transpose() {
        Ok(selector) => selector,
        Err(err) => return Err(format!("desired catalog selector is invalid: {err}: fix spec.source.catalog.selector")),
    };
    let served = state.served.lock().unwrap_or_else(|p| p.into_inner());
    let mut offered = Vec::new();
    for catalog in state.catalogs.list() {
        if catalog.spec.availability_mode == AvailabilityMode::Unavailable {
            continue;
        }
        let name = catalog.name_any();
        // Upstream's webhook labels every catalog with its own name; olm-rs has no webhook, so
        // every catalog is taken to carry it.
        let mut labels = catalog.metadata.labels.clone().unwrap_or_default();
        labels.insert(olm_api::olmv1::METADATA_NAME_LABEL.to_owned(), name.clone());
        if selector.as_ref().is_some_and(|s| !s.matches(&labels)) {
            continue;
        }
        if let Some(held) = served.get(&name).and_then(|m| m.held.as_ref()) {
            offered.push((name, catalog.spec.priority, held.content.clone()));
        }
    }
    offered.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(offered)
}

/// The deprecation messages that concern this extension: the package's, those of the channels
/// it asks for (every channel when none), the installed bundle's.
fn deprecations(package: &olm_catalog::Package, channels: &[String], installed: Option<&str>) -> Deprecations {
    let mut out = Deprecations::default();
    out.package.extend(package.deprecation.clone());
    for channel in package.channels() {
        if (channels.is_empty() || channels.contains(&channel.name))
            && let Some(message) = &channel.deprecation
        {
            out.channels.push(message.clone());
        }
    }
    if let Some(bundle) = installed.and_then(|b| package.bundle(b)) {
        out.bundle.extend(bundle.deprecation.clone());
    }
    out
}

/// What the release of the installed revision applied, applied again: with no catalog to read
/// the bundle from, objects deleted since are put back (upstream applies its cached bundle).
async fn apply_release_again(ctx: &Ctx, extension: &ClusterExtension, record: &Record, manifest: &str) -> Result<(), String> {
    // A record an older olm-rs kept in a ConfigMap has no manifest: nothing to apply from.
    if manifest.is_empty() {
        return Ok(());
    }
    let objects = olm_catalog::load::parse_manifest_text(manifest).map_err(|err| format!("its manifest cannot be read: {err}"))?;
    let installer = installer(ctx, extension)?;
    let (name, uid) = (extension.name_any(), extension.uid().unwrap_or_default());
    let owner = Owner { name: &name, uid: &uid, install_namespace: &extension.spec.namespace, adopt_from: None };
    apply::apply_all(&installer, &ctx.field_manager(), &owner, objects, &record.objects, &record.live_spec, &mut Kinds::default()).await.map(drop)
}

/// `name`'s deployed revision: its release in OLM's namespace ([`release`]), else the record in
/// the ConfigMap in the install namespace where olm-rs kept it before (without a manifest).
async fn read_record(ctx: &Ctx, name: &str, uid: &str, namespace: &str) -> Result<Option<release::Deployed>, String> {
    let system = &ctx.state.namespace;
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), system);
    let listed = match secrets.list(&ListParams::default().labels(&release::deployed_selector(name))).await {
        Ok(listed) => listed.items,
        Err(err) if is_not_found(&err) => Vec::new(),
        Err(err) => return Err(format!("cannot read the release Secrets of {name} in {system}: {}", api_message(&err))),
    };
    // The newest of this ClusterExtension's (a same-named one deleted before may leave some
    // for the garbage collector).
    let index = listed
        .into_iter()
        .filter(|s| s.owner_references().iter().any(|o| o.uid == uid))
        .max_by_key(|s| s.labels().get("version").and_then(|v| v.parse::<u64>().ok()).unwrap_or(0));
    if let Some(index) = index {
        let index_name = index.name_any();
        let unreadable = |why: String| format!("the release Secret {system}/{index_name} cannot be read ({why}): delete it and OLM applies the bundle again");
        let mut extra = Vec::new();
        for chunk in release::extra_chunks(&index).map_err(unreadable)? {
            match secrets.get_opt(&chunk).await {
                Ok(Some(secret)) => extra.push(secret),
                Ok(None) => return Err(unreadable(format!("its chunk Secret {chunk} is missing"))),
                Err(err) => return Err(format!("cannot read the release chunk Secret {system}/{chunk}: {}", api_message(&err))),
            }
        }
        return release::read(&index, &extra).map(Some).map_err(unreadable);
    }
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), namespace);
    let map_name = record::name_for(name);
    match api.get_opt(&map_name).await {
        Ok(None) => Ok(None),
        Ok(Some(map)) => record::read(&map).map(|record| Some(release::Deployed { record, manifest: String::new() })).map_err(|why| {
            format!("the revision record ConfigMap {namespace}/{map_name} cannot be read ({why}): delete it and OLM applies the bundle again")
        }),
        // The namespace is gone or not there yet: nothing recorded in it.
        Err(err) if is_not_found(&err) => Ok(None),
        Err(err) => Err(format!("cannot read the revision record ConfigMap {namespace}/{map_name}: {}", api_message(&err))),
    }
}

/// Writes `record` as the deployed release, then removes the releases of earlier revisions (and
/// the ConfigMap an older olm-rs kept): one record per ClusterExtension.
async fn write_record(ctx: &Ctx, record: &Record, manifest: &[serde_json::Value], name: &str, uid: &str, namespace: &str) -> Result<(), String> {
    let system = &ctx.state.namespace;
    let now = Timestamp::now().to_string();
    let secrets = release::secrets(record, manifest, name, uid, system, namespace, &now).map_err(|why| format!("cannot record revision {}: {why}", record.revision))?;
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), system);
    let params = PatchParams::apply(&ctx.field_manager()).force();
    for secret in &secrets {
        let secret_name = secret.name_any();
        let mut result = api.patch(&secret_name, &params, &Patch::Apply(secret)).await;
        if matches!(&result, Err(err) if is_not_found(err)) {
            // OLM's own namespace is gone (or was never made, outside `olm dev`): make it.
            let namespaces: Api<Namespace> = Api::all(ctx.client.clone());
            let wanted = Namespace { metadata: kube::api::ObjectMeta { name: Some(system.clone()), ..Default::default() }, ..Default::default() };
            match namespaces.create(&Default::default(), &wanted).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 409 => {}
                Err(err) => return Err(format!("OLM's namespace {system} does not exist and cannot be created: {}", api_message(&err))),
            }
            result = api.patch(&secret_name, &params, &Patch::Apply(secret)).await;
        }
        result.map_err(|err| format!("cannot write the release Secret {system}/{secret_name}: {}", api_message(&err)))?;
    }
    // The previous release first, by name: while both are there a reader finds two deployed
    // releases (upstream's suite then finds none it can use), so that lasts one request.
    if record.revision > 1 {
        match api.delete(&release::key(name, record.revision - 1), &Default::default()).await {
            Ok(_) => {}
            Err(err) if is_not_found(&err) => {}
            Err(err) => return Err(format!("cannot delete the release Secret {system}/{} of the previous revision: {}", release::key(name, record.revision - 1), api_message(&err))),
        }
    }
    let current: std::collections::BTreeSet<String> = secrets.iter().map(ResourceExt::name_any).collect();
    let all = api.list(&ListParams::default().labels(&release::all_selector(name))).await.map_err(|err| format!("cannot list the release Secrets of {name} in {system}: {}", api_message(&err)))?;
    for old in all.items.iter().filter(|s| !current.contains(&s.name_any())) {
        match api.delete(&old.name_any(), &Default::default()).await {
            Ok(_) => {}
            Err(err) if is_not_found(&err) => {}
            Err(err) => return Err(format!("cannot delete the release Secret {system}/{} of an earlier revision: {}", old.name_any(), api_message(&err))),
        }
    }
    match Api::<ConfigMap>::namespaced(ctx.client.clone(), namespace).delete(&record::name_for(name), &Default::default()).await {
        Ok(_) => Ok(()),
        Err(err) if is_not_found(&err) => Ok(()),
        Err(err) => Err(format!("cannot delete the old revision record ConfigMap {namespace}/{}: {}", record::name_for(name), api_message(&err))),
    }
}

async fn namespace_exists(ctx: &Ctx, namespace: &str) -> Result<(), String> {
    match Api::<Namespace>::all(ctx.client.clone()).get_opt(namespace).await {
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err(format!("the install namespace {namespace:?} does not exist: create it (kubectl create namespace {namespace}); OLM installs once it exists")),
        Err(err) => Err(format!("cannot read the install namespace {namespace:?}: {}", api_message(&err))),
    }
}

/// Who applies: the ServiceAccount `spec.serviceAccount` names, in the install namespace (least
/// privilege: what it may not do, the install may not do), else OLM itself.
fn installer(ctx: &Ctx, extension: &ClusterExtension) -> std::result::Result<Installer, String> {
    let named = extension.spec.service_account.as_ref().and_then(|sa| sa.name.as_deref()).filter(|n| !n.is_empty());
    let Some(account) = named else { return Ok(Installer { client: ctx.client.clone(), service_account: None }) };
    let namespace = &extension.spec.namespace;
    let user = olm_runtime::client::service_account_username(namespace, account);
    let client = olm_runtime::client::impersonating(&ctx.client, &user, namespace)
        .ok_or_else(|| format!("spec.serviceAccount.name {account:?} is not a valid ServiceAccount name: fix it"))?;
    Ok(Installer { client, service_account: Some(format!("{namespace}/{account}")) })
}

fn applied_lately(state: &ClusterExtensionState, name: &str, generation: Option<i64>, bundle: &str) -> bool {
    let memory = state.memory.lock().unwrap_or_else(|p| p.into_inner());
    memory.get(name).and_then(|m| m.applied.as_ref()).is_some_and(|(g, b, at)| *g == generation && b == bundle && at.elapsed() < decide::RESYNC)
}

fn remember_applied(state: &ClusterExtensionState, name: &str, generation: Option<i64>, bundle: &str) {
    let mut memory = state.memory.lock().unwrap_or_else(|p| p.into_inner());
    memory.entry(name.to_owned()).or_insert_with(Memory::default).applied = Some((generation, bundle.to_owned(), Instant::now()));
}

fn forget(state: &ClusterExtensionState, name: &str) {
    state.memory.lock().unwrap_or_else(|p| p.into_inner()).remove(name);
}

/// The ClusterExtensions whose objects in `cache` were deleted, each forgetting its last apply
/// so that its pass applies again.
fn removed_from<K>(cache: &olm_runtime::Cache<K>, memory: Arc<std::sync::Mutex<std::collections::HashMap<String, Memory>>>) -> impl futures::Stream<Item = kube::runtime::reflector::ObjectRef<ClusterExtension>> + Send + 'static + use<K>
where
    K: kube::Resource<DynamicType = ()> + Clone + std::fmt::Debug + Send + Sync + 'static,
{
    let store = cache.store().clone();
    cache.subscribe().filter_map(move |object| {
        let gone = store.get(&kube::runtime::reflector::ObjectRef::from_obj(object.as_ref())).is_none();
        let labels = object.meta().labels.clone().unwrap_or_default();
        let owner = labels.get(super::OWNER_NAME_LABEL).filter(|_| gone && labels.get(super::OWNER_KIND_LABEL).map(String::as_str) == Some(super::OWNER_KIND)).cloned();
        if let Some(owner) = &owner {
            tracing::info!(extension = %owner, object = %object.meta().name.as_deref().unwrap_or_default(), "an installed object was deleted; applying again");
            if let Some(entry) = memory.lock().unwrap_or_else(|p| p.into_inner()).get_mut(owner) {
                entry.applied = None;
            }
        }
        futures::future::ready(owner.map(|name| kube::runtime::reflector::ObjectRef::new(&name)))
    })
}

/// Build the controller (subscribes now; call before the caches start) and run it until
/// `shutdown` resolves. A ClusterCatalog that changes (new content, served or withdrawn)
/// brings every ClusterExtension to a pass.
pub fn run(
    ctx: Arc<Ctx>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let state = ctx.state.clone();
    let memory = state.memory.clone();
    let deletions = state.extensions.deleted(move |extension: &ClusterExtension| {
        memory.lock().unwrap_or_else(|p| p.into_inner()).remove(&extension.name_any());
    });
    let catalogs_changed = state.catalogs.subscribe().map(|_| ());
    let removed = futures::stream::select_all([
        removed_from(&state.installed.deployments, state.memory.clone()).boxed(),
        removed_from(&state.installed.services, state.memory.clone()).boxed(),
        removed_from(&state.installed.service_accounts, state.memory.clone()).boxed(),
        removed_from(&state.installed.config_maps, state.memory.clone()).boxed(),
    ]);
    let controller = Controller::for_shared_stream(state.extensions.subscribe(), state.extensions.store().clone())
        .with_config(olm_runtime::controller::controller_config())
        .reconcile_on(deletions)
        .reconcile_on(removed)
        .reconcile_all_on(catalogs_changed)
        .reconcile_all_on(ctx.leadership.gained())
        .graceful_shutdown_on(shutdown);
    async move {
        state.extensions.synced().await;
        state.catalogs.synced().await;
        controller.run(|extension, ctx| guarded(extension, ctx, reconcile), error_policy, ctx).for_each(|_| futures::future::ready(())).await;
    }
}
