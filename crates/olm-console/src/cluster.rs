//! What the pages read and write, as the user: every error becomes the API server's own words
//! (a refusal names the verb, the resource and the namespace), never a debug dump.

use futures::{Stream, StreamExt as _};
use kube::api::{ApiResource, DynamicObject, ListParams, PostParams, WatchEvent, WatchParams};
use kube::Api;
use olm_runtime::error::{api_message, api_status_code};
use olm_api::packages::v1::PackageManifest;
use olm_api::v1::operator_group::OperatorGroup;
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use olm_api::v1alpha1::subscription::Subscription;
use serde_json::Value;

use crate::install::{ExistingGroup, Target};

fn manifests_resource() -> ApiResource {
    ApiResource {
        group: "packages.operators.coreos.com".into(),
        version: "v1".into(),
        api_version: "packages.operators.coreos.com/v1".into(),
        kind: "PackageManifest".into(),
        plural: "packagemanifests".into(),
    }
}

fn forbidden(err: &kube::Error) -> bool {
    api_status_code(err) == Some(403)
}

fn to_manifest(object: DynamicObject) -> Option<PackageManifest> {
    serde_json::to_value(object).ok().and_then(|v| serde_json::from_value(v).ok())
}

/// Every PackageManifest the user can list: in all namespaces, or (when that is refused) in
/// the kubeconfig's namespace, with a note saying so.
pub async fn package_manifests(client: &kube::Client, own: &str) -> Result<(Vec<PackageManifest>, Option<String>), String> {
    let all: Api<DynamicObject> = Api::all_with(client.clone(), &manifests_resource());
    match all.list(&ListParams::default()).await {
        Ok(list) => Ok((list.items.into_iter().filter_map(to_manifest).collect(), None)),
        Err(err) if forbidden(&err) => {
            let namespace = own.to_owned();
            let own: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, &manifests_resource());
            let list = own.list(&ListParams::default()).await.map_err(|e| format!("cannot list the packages of namespace {namespace}: {}", api_message(&e)))?;
            Ok((list.items.into_iter().filter_map(to_manifest).collect(), Some(format!("You may not list packages in all namespaces ({}); showing namespace {namespace}.", api_message(&err)))))
        }
        Err(err) if api_status_code(&err) == Some(404) => Err("this cluster does not serve the PackageManifest API: OLM's package server is not running".into()),
        Err(err) => Err(format!("cannot list packages: {}", api_message(&err))),
    }
}

pub async fn package_manifest(client: &kube::Client, namespace: &str, name: &str) -> Result<PackageManifest, String> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &manifests_resource());
    let object = api.get(name).await.map_err(|e| format!("package {name} of namespace {namespace}: {}", api_message(&e)))?;
    to_manifest(object).ok_or_else(|| format!("package {name} of namespace {namespace} is not a PackageManifest this console can read"))
}

/// Whether `namespace` exists and its OperatorGroups (an empty name is refused by the plan).
pub async fn target(client: &kube::Client, namespace: &str) -> Result<Target, String> {
    if namespace.is_empty() {
        return Ok(Target { namespace_exists: false, groups: Vec::new() });
    }
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let namespace_exists = match namespaces.get_opt(namespace).await {
        Ok(found) => found.is_some(),
        // A namespace admin may not read Namespaces: assume it exists, the dry run says more.
        Err(err) if forbidden(&err) => true,
        Err(err) => return Err(format!("cannot read namespace {namespace}: {}", api_message(&err))),
    };
    let groups = if namespace_exists {
        Api::<OperatorGroup>::namespaced(client.clone(), namespace)
            .list(&ListParams::default())
            .await
            .map_err(|e| format!("cannot list the OperatorGroups of namespace {namespace}: {}", api_message(&e)))?
            .items
            .into_iter()
            .map(|g| ExistingGroup {
                name: g.metadata.name.clone().unwrap_or_default(),
                targets: g.status.as_ref().and_then(|s| s.namespaces.clone()).or(g.spec.target_namespaces.clone()).unwrap_or_default().into_iter().filter(|t| !t.is_empty()).collect(),
            })
            .collect()
    } else {
        Vec::new()
    };
    Ok(Target { namespace_exists, groups })
}

fn resource_of(object: &Value) -> Option<(ApiResource, Option<String>)> {
    let kind = object["kind"].as_str()?;
    let (group, version, plural) = match kind {
        "Namespace" => ("", "v1", "namespaces"),
        "OperatorGroup" => ("operators.coreos.com", "v1", "operatorgroups"),
        "Subscription" => ("operators.coreos.com", "v1alpha1", "subscriptions"),
        _ => return None,
    };
    let api_version = if group.is_empty() { version.to_owned() } else { format!("{group}/{version}") };
    let resource = ApiResource { group: group.into(), version: version.into(), api_version, kind: kind.into(), plural: plural.into() };
    Some((resource, object["metadata"]["namespace"].as_str().map(str::to_owned)))
}

async fn post(client: &kube::Client, object: &Value, dry_run: bool) -> Result<(), String> {
    let what = format!("{} {}", object["kind"].as_str().unwrap_or_default(), object["metadata"]["name"].as_str().unwrap_or_default());
    let (resource, namespace) = resource_of(object).ok_or_else(|| format!("{what}: not something the console creates"))?;
    let api: Api<DynamicObject> = match &namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let dynamic: DynamicObject = serde_json::from_value(object.clone()).map_err(|e| format!("{what}: {e}"))?;
    let params = PostParams { dry_run, ..PostParams::default() };
    api.create(&params, &dynamic).await.map(drop).map_err(|e| format!("{what}: {}", api_message(&e)))
}

/// The server-side dry run of each object, a line each. Objects of a namespace that does not
/// exist yet cannot be checked before it does: said so.
pub async fn dry_run(client: &kube::Client, objects: &[Value], namespace_exists: bool) -> Vec<String> {
    let mut lines = Vec::new();
    for object in objects {
        let what = format!("{} {}", object["kind"].as_str().unwrap_or_default(), object["metadata"]["name"].as_str().unwrap_or_default());
        if !namespace_exists && object["metadata"]["namespace"].is_string() {
            lines.push(format!("{what}: checked when it is created (its namespace does not exist yet)"));
            continue;
        }
        lines.push(match post(client, object, true).await {
            Ok(()) => format!("{what}: accepted"),
            Err(message) => format!("refused: {message}"),
        });
    }
    lines
}

/// Creates the objects in order; stops at the first refusal, saying what was created before.
pub async fn create(client: &kube::Client, objects: &[Value]) -> Result<(), String> {
    let mut created = Vec::new();
    for object in objects {
        if let Err(message) = post(client, object, false).await {
            let before = if created.is_empty() { "nothing was created".to_owned() } else { format!("created before it: {}", created.join(", ")) };
            return Err(format!("{message} ({before})"));
        }
        created.push(format!("{} {}", object["kind"].as_str().unwrap_or_default(), object["metadata"]["name"].as_str().unwrap_or_default()));
    }
    Ok(())
}

/// The Subscriptions and CSVs the user can list, in all namespaces or (refused) their own.
/// What the Installed page shows, and the resourceVersions of the two lists (to watch from).
pub struct Installed {
    pub subscriptions: Vec<Subscription>,
    pub csvs: Vec<ClusterServiceVersion>,
    pub note: Option<String>,
    pub versions: (String, String),
}

pub async fn installed(client: &kube::Client, own: &str) -> Result<Installed, String> {
    let all: Api<Subscription> = Api::all(client.clone());
    let (subscriptions, note, namespace) = match all.list(&ListParams::default()).await {
        Ok(list) => (list, None, None),
        Err(err) if forbidden(&err) => {
            let namespace = own.to_owned();
            let list = Api::<Subscription>::namespaced(client.clone(), &namespace)
                .list(&ListParams::default())
                .await
                .map_err(|e| format!("cannot list the Subscriptions of namespace {namespace}: {}", api_message(&e)))?;
            (list, Some(format!("You may not list Subscriptions in all namespaces ({}); showing namespace {namespace}.", api_message(&err))), Some(namespace))
        }
        Err(err) => return Err(format!("cannot list Subscriptions: {}", api_message(&err))),
    };
    let csvs: Api<ClusterServiceVersion> = match &namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    // Copies are left out: a row shows the CSV of its own namespace.
    let csvs = csvs.list(&ListParams::default().labels("!olm.copiedFrom")).await.map_err(|e| format!("cannot list ClusterServiceVersions: {}", api_message(&e)))?;
    let versions = (subscriptions.metadata.resource_version.clone().unwrap_or_default(), csvs.metadata.resource_version.clone().unwrap_or_default());
    Ok(Installed { subscriptions: subscriptions.items, csvs: csvs.items, note, versions })
}

/// The namespace the user may list Subscriptions in: None for all, else `own`.
pub async fn installed_scope(client: &kube::Client, own: &str) -> Option<String> {
    match Api::<Subscription>::all(client.clone()).list(&ListParams::default().limit(1)).await {
        Err(err) if forbidden(&err) => Some(own.to_owned()),
        _ => None,
    }
}

/// Yields each time a Subscription or CSV in `scope` changes after the lists the page showed
/// (`versions`: their resourceVersions), and once more when a watch ends or fails (10 s
/// later: the page then lists and watches again), so no change between the page and its watch
/// is missed.
pub fn installed_changes(client: kube::Client, scope: Option<String>, versions: (String, String)) -> impl Stream<Item = ()> + Send {
    fn since<K>(api: Api<K>, version: String) -> futures::stream::BoxStream<'static, ()>
    where
        K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
    {
        futures::stream::once(async move { api.watch(&WatchParams::default().timeout(290), &version).await })
            .flat_map(|watch| match watch {
                Ok(events) => events
                    .filter_map(|event| async move {
                        match event {
                            Ok(WatchEvent::Bookmark(_)) => None,
                            _ => Some(()),
                        }
                    })
                    .boxed(),
                // Not at once: a watch refused every time must not reload the page in a loop.
                Err(_) => futures::stream::once(tokio::time::sleep(std::time::Duration::from_secs(10))).boxed(),
            })
            .chain(futures::stream::once(async {}))
            .boxed()
    }
    let (subscriptions, csvs): (Api<Subscription>, Api<ClusterServiceVersion>) = match &scope {
        Some(ns) => (Api::namespaced(client.clone(), ns), Api::namespaced(client, ns)),
        None => (Api::all(client.clone()), Api::all(client)),
    };
    futures::stream::select(since(subscriptions, versions.0), since(csvs, versions.1))
}

/// Sets `spec.approved` of InstallPlan `namespace/name`, as the user.
pub async fn approve(client: &kube::Client, namespace: &str, name: &str) -> Result<(), String> {
    let api: Api<olm_api::v1alpha1::install_plan::InstallPlan> = Api::namespaced(client.clone(), namespace);
    let patch = serde_json::json!({"spec": {"approved": true}});
    api.patch(name, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch))
        .await
        .map(drop)
        .map_err(|e| format!("cannot approve InstallPlan {namespace}/{name}: {}", api_message(&e)))
}

/// ClusterServiceVersion `namespace/name`, as the user reads it.
pub async fn csv(client: &kube::Client, namespace: &str, name: &str) -> Result<ClusterServiceVersion, String> {
    Api::<ClusterServiceVersion>::namespaced(client.clone(), namespace)
        .get(name)
        .await
        .map_err(|e| format!("ClusterServiceVersion {name} of namespace {namespace}: {}", api_message(&e)))
}

/// The API of `kind` in `api_version` as the cluster serves it, and whether it is namespaced.
pub async fn served_kind(client: &kube::Client, api_version: &str, kind: &str) -> Result<(ApiResource, bool), String> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
    match kube::discovery::pinned_kind(client, &gvk).await {
        Ok((resource, capabilities)) => Ok((resource, capabilities.scope == kube::discovery::Scope::Namespaced)),
        Err(err) => Err(format!("the cluster does not serve {kind} in {api_version} ({}): is the operator's CRD installed?", api_message(&err))),
    }
}

/// Creates `object` (of an API an operator provides) as the user, or only checks it with a
/// server-side dry run; what was created, in words.
pub async fn create_instance(client: &kube::Client, object: &Value, dry_run: bool) -> Result<String, String> {
    let kind = object["kind"].as_str().unwrap_or_default();
    let (resource, namespaced) = served_kind(client, object["apiVersion"].as_str().unwrap_or_default(), kind).await?;
    let namespace = object["metadata"]["namespace"].as_str().filter(|_| namespaced);
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let dynamic: DynamicObject = serde_json::from_value(object.clone()).map_err(|e| format!("{kind}: {e}"))?;
    let params = PostParams { dry_run, ..PostParams::default() };
    let created = api.create(&params, &dynamic).await.map_err(|e| format!("{kind}: {}", api_message(&e)))?;
    let name = created.metadata.name.unwrap_or_default();
    Ok(match namespace {
        Some(ns) => format!("{kind} {name} in namespace {ns}"),
        None => format!("{kind} {name}"),
    })
}
