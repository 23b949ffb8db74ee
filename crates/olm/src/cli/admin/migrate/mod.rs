//! `olm migrate SUBSCRIPTION` (issue #54): an operator OLM v0 installed becomes an OLM v1
//! ClusterExtension in place — its Deployments, ServiceAccounts, RBAC, Services, webhooks and
//! CRDs adopted, not recreated; no custom resource deleted; no pod restarted. What it creates,
//! adopts and deletes is printed first (`--dry-run` stops there); what cannot be expressed in
//! v1 is refused with what to do. Observing is here, every decision in `plan` (pure, tested
//! without a cluster), the steps in `act` (a rerun finishes an interrupted migration).

mod act;
mod plan;

use std::process::ExitCode;

use clap::Args;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{ListParams, ObjectMeta};
use kube::{Api, Resource, ResourceExt};
use olm_api::keys::{MIGRATED_FROM_ANNOTATION, OWNER_LABEL, OWNER_NAMESPACE_LABEL};
use olm_api::olmv1::cluster_catalog::ClusterCatalog;
use olm_api::olmv1::cluster_extension::ClusterExtension;
use olm_api::v1::operator_group::OperatorGroup;
use olm_api::v1alpha1::catalog_source::CatalogSource;
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use olm_api::v1alpha1::install_plan::InstallPlan;
use olm_api::v1alpha1::subscription::Subscription;
use serde::de::DeserializeOwned;

use super::{KubeArgs, Output, api_error, block_on, confirm, connect, package_manifest, print_data};
use plan::{Choices, Observed, Plan};

/// `olm migrate`.
#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// The Subscriptions to move to OLM v1, one after another.
    names: Vec<String>,
    /// Every Subscription of the namespace, one after another, stopping at the first that cannot go.
    #[arg(long)]
    all: bool,
    #[command(flatten)]
    kube: KubeArgs,
    /// Print what the migration would do and change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Go ahead without asking (for scripts); what will happen is still printed.
    #[arg(long, short = 'y')]
    yes: bool,
    /// The ClusterExtension's name (default: the package's).
    #[arg(long = "name")]
    extension_name: Option<String>,
    /// The ClusterCatalog to install from (default: one of the CatalogSource's image, else a new one).
    #[arg(long)]
    catalog: Option<String>,
    /// The installer's ServiceAccount in the install namespace (default: the OperatorGroup's, else a new one bound to cluster-admin).
    #[arg(long)]
    service_account: Option<String>,
    /// Map Manual approval to a pinned version (an upgrade is then a change of spec.source.catalog.version).
    #[arg(long)]
    pin: bool,
    /// Migrate without the Subscription's spec.config (the Deployments keep it until the next upgrade).
    #[arg(long)]
    drop_config: bool,
    /// Migrate although the operator requires APIs other operators provide (they stay as they are).
    #[arg(long)]
    ignore_dependencies: bool,
    /// `-o json|yaml`: the plan's objects for scripts.
    #[arg(long, short = 'o', value_enum, default_value_t)]
    output: Output,
}

/// How one Subscription's migration ended.
enum Ended {
    Migrated,
    Planned,
    Refused,
    Declined,
}

/// Exit 0 when every plan is printed (`--dry-run`) or every migration done; 1 when one is
/// refused (every reason printed; with several, what was migrated before it is said).
pub fn run(args: MigrateArgs) -> anyhow::Result<ExitCode> {
    block_on(async move {
        let (client, namespace) = connect(&args.kube).await?;
        let names = match (args.all, args.names.is_empty()) {
            (true, false) => anyhow::bail!("name Subscriptions or pass --all, not both"),
            (false, true) => anyhow::bail!("name the Subscription to migrate (kubectl get subscriptions -n {namespace}), or pass --all for every one"),
            (false, false) => args.names.clone(),
            (true, true) => {
                let mut all: Vec<String> = list(&Api::<Subscription>::namespaced(client.clone(), &namespace), "Subscriptions", &ListParams::default())
                    .await?
                    .iter()
                    .map(ResourceExt::name_any)
                    .collect();
                all.extend(unfinished(&client, &namespace).await?);
                all.sort();
                all.dedup();
                if all.is_empty() {
                    anyhow::bail!("namespace {namespace} has no Subscription to migrate");
                }
                all
            }
        };
        if names.len() > 1 && args.extension_name.is_some() {
            anyhow::bail!("--name names one ClusterExtension: migrate one Subscription with it");
        }
        let mut migrated: Vec<&str> = Vec::new();
        let mut refused = false;
        for name in &names {
            match migrate_one(&client, &namespace, name, &args).await? {
                Ended::Migrated => migrated.push(name),
                Ended::Planned => {}
                Ended::Declined => return Ok(ExitCode::from(1)),
                // A dry run shows every plan and every refusal; a migration stops at the first.
                Ended::Refused if args.dry_run => refused = true,
                Ended::Refused => {
                    if names.len() > 1 {
                        let before = if migrated.is_empty() { "none".to_owned() } else { migrated.join(", ") };
                        eprintln!("stopped at Subscription {namespace}/{name}; migrated before it: {before}");
                    }
                    return Ok(ExitCode::from(1));
                }
            }
        }
        Ok(if refused { ExitCode::from(1) } else { ExitCode::SUCCESS })
    })
}

async fn migrate_one(client: &kube::Client, namespace: &str, name: &str, args: &MigrateArgs) -> anyhow::Result<Ended> {
    let choices = Choices {
        name: args.extension_name.clone(),
        catalog: args.catalog.clone(),
        service_account: args.service_account.clone(),
        pin: args.pin,
        drop_config: args.drop_config,
        ignore_dependencies: args.ignore_dependencies,
    };
    if let Some(extension) = migrated_already(client, namespace, name).await? {
        if args.dry_run {
            println!("Subscription {namespace}/{name} is ClusterExtension {} already: nothing to plan", extension.name_any());
            return Ok(Ended::Planned);
        }
        act::finish(client, &extension).await?;
        println!("Subscription {namespace}/{name} is ClusterExtension {} now", extension.name_any());
        return Ok(Ended::Migrated);
    }
    let observed = observe(client, namespace, name, &choices).await?;
    let plan = match plan::plan(&observed, &choices) {
        Ok(plan) => plan,
        Err(refusals) => {
            eprintln!("Subscription {namespace}/{name} cannot move to OLM v1 as it is:");
            for refusal in &refusals {
                eprintln!("  - {}: {}", refusal.what, refusal.fix);
            }
            return Ok(Ended::Refused);
        }
    };
    let adopted = adoptable(client, &observed).await?;
    if args.output == Output::Text {
        print_plan(&plan, &adopted);
    } else {
        print_data(args.output, &plan_objects(&plan))?;
    }
    if args.dry_run {
        return Ok(Ended::Planned);
    }
    if !args.yes && !confirm(&format!("Move Subscription {namespace}/{name} to ClusterExtension {}?", plan.extension.name_any()))? {
        eprintln!("nothing was changed");
        return Ok(Ended::Declined);
    }
    act::migrate(client, &observed.subscription, &plan).await?;
    println!("Subscription {namespace}/{name} is ClusterExtension {} now", plan.extension.name_any());
    Ok(Ended::Migrated)
}

async fn get_opt<K>(api: &Api<K>, what: &str, name: &str) -> anyhow::Result<Option<K>>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    api.get_opt(name).await.map_err(|err| anyhow::anyhow!("cannot read {what} {name}: {}", api_error(&err)))
}

async fn list<K>(api: &Api<K>, what: &str, params: &ListParams) -> anyhow::Result<Vec<K>>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    Ok(api.list(params).await.map_err(|err| anyhow::anyhow!("cannot list {what}: {}", api_error(&err)))?.items)
}

/// The extensions earlier runs made of `namespace`'s Subscriptions, with the Subscription's
/// name (its `olm-rs.io/migrated-from`); none when this cluster has no v1 API (observing says
/// so, with what to do).
async fn migrated_from(client: &kube::Client, namespace: &str) -> Vec<(String, ClusterExtension)> {
    let Ok(extensions) = Api::<ClusterExtension>::all(client.clone()).list(&ListParams::default()).await else {
        return Vec::new();
    };
    extensions
        .items
        .into_iter()
        .filter_map(|e| {
            let (ns, name) = e.annotations().get(MIGRATED_FROM_ANNOTATION)?.split_once('/')?;
            (ns == namespace).then(|| (name.to_owned(), e.clone()))
        })
        .collect()
}

/// The extension an earlier run made of Subscription `namespace/name`, once that Subscription
/// is gone (a run stopped after deleting it leaves only the last steps to do).
async fn migrated_already(client: &kube::Client, namespace: &str, name: &str) -> anyhow::Result<Option<ClusterExtension>> {
    if get_opt(&Api::<Subscription>::namespaced(client.clone(), namespace), "Subscription", name).await?.is_some() {
        return Ok(None);
    }
    Ok(migrated_from(client, namespace).await.into_iter().find(|(from, _)| from == name).map(|(_, e)| e))
}

/// The Subscriptions of `namespace` an interrupted run deleted before it finished: their
/// extension is there and OLM v0's Operator object of the package still is.
async fn unfinished(client: &kube::Client, namespace: &str) -> anyhow::Result<Vec<String>> {
    let operators: Api<olm_api::v1::operator::Operator> = Api::all(client.clone());
    let mut names = Vec::new();
    for (name, extension) in migrated_from(client, namespace).await {
        let package = extension.spec.source.catalog.as_ref().map(|c| c.package_name.as_str()).unwrap_or_default();
        if get_opt(&operators, "Operator", &olm_api::keys::operator_name(package, namespace)).await?.is_some() {
            names.push(name);
        }
    }
    Ok(names)
}

/// Everything the plan is a function of; reads only.
async fn observe(client: &kube::Client, namespace: &str, name: &str, choices: &Choices) -> anyhow::Result<Observed> {
    let (_, subscription) = super::subscription(client, namespace, name).await?;
    let status = subscription.status.clone().unwrap_or_default();
    let csv = match status.installed_csv.as_deref().filter(|c| !c.is_empty()) {
        Some(csv) => get_opt(&Api::<ClusterServiceVersion>::namespaced(client.clone(), namespace), "ClusterServiceVersion", csv).await?,
        None => None,
    };
    let groups = list(&Api::<OperatorGroup>::namespaced(client.clone(), namespace), "OperatorGroups", &ListParams::default()).await?;
    let other_subscriptions = list(&Api::<Subscription>::namespaced(client.clone(), namespace), "Subscriptions", &ListParams::default())
        .await?
        .into_iter()
        .map(|s| s.name_any())
        .filter(|n| n != name)
        .collect();
    let source_namespace = if subscription.spec.source_namespace.is_empty() { namespace.to_owned() } else { subscription.spec.source_namespace.clone() };
    let catalog_source = get_opt(&Api::<CatalogSource>::namespaced(client.clone(), &source_namespace), "CatalogSource", &subscription.spec.source).await?;
    let cluster_catalogs = match Api::<ClusterCatalog>::all(client.clone()).list(&ListParams::default()).await {
        Ok(list) => list.items,
        Err(err) if olm_runtime::error::api_status_code(&err) == Some(404) => {
            anyhow::bail!("this cluster does not serve OLM v1's API (olm.operatorframework.io/v1 ClusterCatalog): install OLM v1's CRDs (`olm crds`) and run its controllers first")
        }
        Err(err) => anyhow::bail!("cannot list ClusterCatalogs: {}", api_error(&err)),
    };
    let extension_name = choices.name.clone().unwrap_or_else(|| subscription.spec.name.clone());
    let existing_extension = get_opt(&Api::<ClusterExtension>::all(client.clone()), "ClusterExtension", &extension_name).await?;
    // The default channel matters only when the Subscription names none; a PackageManifest
    // API that does not answer leaves it unknown (the plan then says so).
    let default_channel = if subscription.spec.channel.as_deref().is_some_and(|c| !c.is_empty()) {
        None
    } else {
        package_manifest(client, &subscription)
            .await
            .ok()
            .flatten()
            .and_then(|p| p.data.pointer("/status/defaultChannel").and_then(|c| c.as_str()).map(str::to_owned))
    };
    let install_plans = match &csv {
        Some(csv) => list(&Api::<InstallPlan>::namespaced(client.clone(), namespace), "InstallPlans", &ListParams::default())
            .await?
            .into_iter()
            .filter(|p| p.spec.cluster_service_version_names.iter().any(|n| *n == csv.name_any()))
            .map(|p| p.name_any())
            .collect(),
        None => Vec::new(),
    };
    Ok(Observed {
        subscription,
        csv,
        groups,
        other_subscriptions,
        catalog_source,
        cluster_catalogs,
        existing_extension,
        default_channel,
        install_plans,
    })
}

/// What OLM v0 made for the CSV, which the extension adopts in place: `Kind [namespace/]name`.
/// The CRDs the CSV owns are adopted too; their objects (the users' data) are never touched.
async fn adoptable(client: &kube::Client, observed: &Observed) -> anyhow::Result<Vec<String>> {
    let Some(csv) = &observed.csv else { return Ok(Vec::new()) };
    let namespace = csv.namespace().unwrap_or_default();
    let uid = csv.uid().unwrap_or_default();
    let owned = |meta: &ObjectMeta| meta.owner_references.iter().flatten().any(|o| o.uid == uid);
    let labels = ListParams::default().labels(&format!("{OWNER_LABEL}={},{OWNER_NAMESPACE_LABEL}={namespace}", csv.name_any()));
    let mut found = Vec::new();
    let ns = |kind: &str, meta: &ObjectMeta| format!("{kind} {}/{}", meta.namespace.clone().unwrap_or_default(), meta.name.clone().unwrap_or_default());
    let cluster = |kind: &str, meta: &ObjectMeta| format!("{kind} {}", meta.name.clone().unwrap_or_default());
    for d in list(&Api::<Deployment>::namespaced(client.clone(), &namespace), "Deployments", &ListParams::default()).await? {
        if owned(&d.metadata) {
            found.push(ns("Deployment", &d.metadata));
        }
    }
    for a in list(&Api::<ServiceAccount>::namespaced(client.clone(), &namespace), "ServiceAccounts", &ListParams::default()).await? {
        if owned(&a.metadata) {
            found.push(ns("ServiceAccount", &a.metadata));
        }
    }
    for s in list(&Api::<Service>::namespaced(client.clone(), &namespace), "Services", &ListParams::default()).await? {
        if owned(&s.metadata) {
            found.push(ns("Service", &s.metadata));
        }
    }
    for r in list(&Api::<Role>::all(client.clone()), "Roles", &labels).await? {
        found.push(ns("Role", &r.metadata));
    }
    for b in list(&Api::<RoleBinding>::all(client.clone()), "RoleBindings", &labels).await? {
        found.push(ns("RoleBinding", &b.metadata));
    }
    for r in list(&Api::<ClusterRole>::all(client.clone()), "ClusterRoles", &labels).await? {
        found.push(cluster("ClusterRole", &r.metadata));
    }
    for b in list(&Api::<ClusterRoleBinding>::all(client.clone()), "ClusterRoleBindings", &labels).await? {
        found.push(cluster("ClusterRoleBinding", &b.metadata));
    }
    // What the bundle shipped besides its CSV, cluster-scoped: only OLM v0's Operator label marks it.
    let package = observed.subscription.spec.name.as_str();
    if let Some(component) = olm_api::keys::operator_component_label(&olm_api::keys::operator_name(package, &namespace)) {
        let shipped = ListParams::default().labels(&component);
        for r in list(&Api::<ClusterRole>::all(client.clone()), "ClusterRoles", &shipped).await? {
            found.push(cluster("ClusterRole", &r.metadata));
        }
        for b in list(&Api::<ClusterRoleBinding>::all(client.clone()), "ClusterRoleBindings", &shipped).await? {
            found.push(cluster("ClusterRoleBinding", &b.metadata));
        }
    }
    for crd in csv.spec.owned_crds() {
        found.push(format!("CustomResourceDefinition {} (its objects untouched)", crd.name));
    }
    // An object can be found twice (labelled both ways; a CRD owned at two versions).
    let mut seen = std::collections::BTreeSet::new();
    found.retain(|line| seen.insert(line.clone()));
    Ok(found)
}

fn print_plan(plan: &Plan, adopted: &[String]) {
    let name = plan.extension.name_any();
    if let Some(catalog) = &plan.new_catalog {
        let image = catalog.spec.source.image.as_ref().map(|i| i.reference.clone()).unwrap_or_default();
        println!("create ClusterCatalog {} for {image}", catalog.name_any());
    }
    if let Some(account) = &plan.new_service_account {
        println!("create ServiceAccount {}/{} bound to ClusterRole {}", plan.extension.spec.namespace, account.name, account.cluster_role);
    }
    let filter = plan.extension.spec.source.catalog.as_ref();
    println!(
        "create ClusterExtension {name}: package {} version {} in namespace {}",
        filter.map(|f| f.package_name.as_str()).unwrap_or_default(),
        filter.and_then(|f| f.version.as_deref()).unwrap_or_default(),
        plan.extension.spec.namespace
    );
    println!("adopt, in place (no pod restarted):");
    for object in adopted {
        println!("  {object}");
    }
    println!("then delete:");
    for deletion in plan.deletions.described() {
        println!("  {deletion}");
    }
    match &plan.final_version {
        Some(version) => println!("then keep ClusterExtension {name} at version {version}"),
        None => println!("then let ClusterExtension {name} follow its channel (spec.source.catalog.version removed)"),
    }
    for note in &plan.notes {
        println!("note: {note}");
    }
}

/// The objects the plan creates, for `-o json|yaml`.
fn plan_objects(plan: &Plan) -> serde_json::Value {
    let mut objects = Vec::new();
    if let Some(catalog) = &plan.new_catalog {
        objects.push(serde_json::to_value(catalog).unwrap_or_default());
    }
    objects.push(serde_json::to_value(&plan.extension).unwrap_or_default());
    serde_json::json!({"apiVersion": "v1", "kind": "List", "items": objects})
}
