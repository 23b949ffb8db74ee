//! What a migration of one Subscription to a ClusterExtension does, or why it cannot: a pure
//! function of what `olm migrate` read from the cluster and what its flags say, so every
//! mapping and every refusal is tested without a cluster.
//!
//! What maps to what (docs/olmv1.md, "Migrating from OLM v0"):
//! - the Subscription's package, channel (or the package's default channel) and CatalogSource
//!   → `spec.source.catalog` (`packageName`, `channels`, a `selector` naming one ClusterCatalog);
//! - the CatalogSource → a ClusterCatalog of the same image (an existing one, or a new one);
//! - the OperatorGroup's targets → `watchNamespace` (none for all namespaces);
//! - the OperatorGroup's ServiceAccount (a scoped install) → `spec.serviceAccount`; without
//!   one, v0 installed with OLM's own rights, so a new ServiceAccount bound to cluster-admin;
//! - the installed CSV's version → `spec.source.catalog.version`, exact while the objects are
//!   adopted (the migration never upgrades); then removed for Automatic approval (the channel
//!   is followed, as before) or kept for Manual approval with `--pin` (an upgrade is a change
//!   of the version, as an approval was).
//!
//! Refused, with what to do: MultiNamespace groups, dependencies on other operators' APIs
//! (unless `--ignore-dependencies`), Manual approval (unless `--pin`), `spec.config` (unless
//! `--drop-config`), a CatalogSource that is not an image, no installed CSV, a
//! ClusterExtension of the chosen name that is not this migration's.

use std::collections::BTreeMap;

use olm_api::keys::{ADOPT_FROM_ANNOTATION, MIGRATED_FROM_ANNOTATION};
use olm_api::olmv1::METADATA_NAME_LABEL;
use olm_api::olmv1::cluster_catalog::ClusterCatalog;
use olm_api::olmv1::cluster_extension::ClusterExtension;
use olm_api::v1::operator_group::OperatorGroup;
use olm_api::v1alpha1::catalog_source::CatalogSource;
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use olm_api::v1alpha1::install_plan::Approval;
use olm_api::v1alpha1::subscription::Subscription;
use kube::ResourceExt;
use serde_json::json;


/// What `olm migrate` read.
#[derive(Debug, Clone)]
pub struct Observed {
    pub subscription: Subscription,
    /// The CSV the Subscription installed (`status.installedCSV`), when it exists.
    pub csv: Option<ClusterServiceVersion>,
    /// The OperatorGroups of the Subscription's namespace.
    pub groups: Vec<OperatorGroup>,
    /// The namespace's other Subscriptions' names: while there are any, the OperatorGroup stays.
    pub other_subscriptions: Vec<String>,
    /// The Subscription's CatalogSource, when it exists.
    pub catalog_source: Option<CatalogSource>,
    pub cluster_catalogs: Vec<ClusterCatalog>,
    /// The ClusterExtension of the chosen name, when one exists.
    pub existing_extension: Option<ClusterExtension>,
    /// The package's default channel (its PackageManifest), for a Subscription without one.
    pub default_channel: Option<String>,
    /// The InstallPlans of the Subscription's namespace that name its CSV.
    pub install_plans: Vec<String>,
}

/// What the flags say.
#[derive(Debug, Clone, Default)]
pub struct Choices {
    /// `--name`: the ClusterExtension's name (default: the package's).
    pub name: Option<String>,
    /// `--catalog`: the ClusterCatalog to install from.
    pub catalog: Option<String>,
    /// `--service-account`: the installer's ServiceAccount in the install namespace.
    pub service_account: Option<String>,
    /// `--pin`: Manual approval becomes a pinned version.
    pub pin: bool,
    /// `--drop-config`: the Subscription's `spec.config` is not carried over.
    pub drop_config: bool,
    /// `--ignore-dependencies`: the APIs this operator requires from others stay as they are.
    pub ignore_dependencies: bool,
}

/// Why a migration cannot go ahead, and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub what: String,
    pub fix: String,
}

/// A ServiceAccount the migration creates for the installer, bound to `cluster_role`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewServiceAccount {
    pub name: String,
    pub cluster_role: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The ClusterExtension to create, its version exact at the installed one.
    pub extension: ClusterExtension,
    /// `spec.source.catalog.version` once adopted: `None` follows the channel.
    pub final_version: Option<String>,
    /// A ClusterCatalog to create first.
    pub new_catalog: Option<ClusterCatalog>,
    pub new_service_account: Option<NewServiceAccount>,
    /// What is deleted once the ClusterExtension is installed.
    pub deletions: Deletions,
    /// Things the user should know (nothing refused).
    pub notes: Vec<String>,
}

/// OLM v0's objects a migration deletes, all in the Subscription's namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deletions {
    pub namespace: String,
    pub subscription: String,
    pub install_plans: Vec<String>,
    pub csv: String,
    /// Only when no other Subscription uses it.
    pub operator_group: Option<String>,
}

impl Deletions {
    /// `Kind namespace/name` each, as the plan prints them.
    pub fn described(&self) -> Vec<String> {
        let ns = &self.namespace;
        let mut lines = vec![format!("Subscription {ns}/{}", self.subscription)];
        lines.extend(self.install_plans.iter().map(|plan| format!("InstallPlan {ns}/{plan}")));
        lines.push(format!("ClusterServiceVersion {ns}/{} (its objects kept, now the extension's; its copies in other namespaces go with it)", self.csv));
        lines.extend(self.operator_group.iter().map(|group| format!("OperatorGroup {ns}/{group}")));
        lines
    }
}

/// The plan for `observed`, or every reason it cannot go ahead.
pub fn plan(observed: &Observed, choices: &Choices) -> Result<Plan, Vec<Refusal>> {
    let sub = &observed.subscription;
    let namespace = sub.namespace().unwrap_or_default();
    let sub_ref = format!("{namespace}/{}", sub.name_any());
    let package = sub.spec.name.clone();
    let name = choices.name.clone().unwrap_or_else(|| package.clone());
    let mut refusals = Vec::new();
    let mut notes = Vec::new();
    let mut refuse = |what: String, fix: String| refusals.push(Refusal { what, fix });

    // A rerun after the CSV or the OperatorGroup was deleted goes on from the extension this
    // migration made.
    let made_before = observed.existing_extension.as_ref().filter(|e| e.annotations().get(MIGRATED_FROM_ANNOTATION) == Some(&sub_ref));
    let made_before_spec = made_before.and_then(|e| serde_json::to_value(&e.spec).ok()).unwrap_or_default();
    let resumed = made_before
        .and_then(|e| {
            let pinned = e.spec.source.catalog.as_ref().and_then(|c| c.version.clone());
            let installed = e.status.as_ref().and_then(|s| s.install.as_ref()).map(|i| i.bundle.version.clone());
            Some((e.annotations().get(ADOPT_FROM_ANNOTATION)?.clone(), pinned.or(installed)?))
        });
    let (adopt_from, version) = match (&observed.csv, resumed) {
        (Some(csv), _) => (format!("{namespace}/{}", csv.name_any()), csv.spec.version.clone().unwrap_or_default()),
        (None, Some(resumed)) => resumed,
        (None, None) => {
            let installed = sub.status.as_ref().and_then(|s| s.installed_csv.clone()).unwrap_or_default();
            let what = if installed.is_empty() {
                format!("Subscription {sub_ref} has installed nothing yet (no status.installedCSV)")
            } else {
                format!("Subscription {sub_ref} names ClusterServiceVersion {installed}, which does not exist")
            };
            refuse(what, "wait until its operator is installed (`kubectl olm status`), then migrate it".into());
            return Err(refusals);
        }
    };
    if version.is_empty() {
        refuse(format!("ClusterServiceVersion {adopt_from} has no spec.version"), "OLM v1 installs versions: the bundle must have one".into());
    }
    let no_csv = ClusterServiceVersion::new("", Default::default());
    let csv = observed.csv.as_ref().unwrap_or(&no_csv);

    // Where the extension may come from.
    if let Some(existing) = &observed.existing_extension {
        let ours = existing.annotations().get(ADOPT_FROM_ANNOTATION) == Some(&adopt_from)
            && existing.annotations().get(MIGRATED_FROM_ANNOTATION) == Some(&sub_ref);
        if !ours {
            refuse(
                format!("ClusterExtension {name} already exists and is not a migration of Subscription {sub_ref}"),
                "choose another name with --name".into(),
            );
        }
    }

    // Which namespaces the operator watches.
    let watch_namespace = match observed.groups.as_slice() {
        [group] => match group_targets(group).as_slice() {
            [] => None,
            [one] if one.is_empty() => None,
            [one] => Some(one.clone()),
            many => {
                refuse(
                    format!("OperatorGroup {namespace}/{} targets {} namespaces ({})", group.name_any(), many.len(), many.join(", ")),
                    "OLM v1 installs an operator for one namespace or all: change the OperatorGroup's targetNamespaces to one namespace, or remove them for all namespaces, let the operator settle, and migrate again".into(),
                );
                None
            }
        },
        [] if made_before.is_some() => made_before_spec.pointer("/config/inline/watchNamespace").and_then(|w| w.as_str()).map(str::to_owned),
        [] => {
            refuse(format!("namespace {namespace} has no OperatorGroup"), "create the OperatorGroup the operator was installed with, or remove the Subscription".into());
            None
        }
        groups => {
            let names: Vec<_> = groups.iter().map(ResourceExt::name_any).collect();
            refuse(format!("namespace {namespace} has {} OperatorGroups ({})", groups.len(), names.join(", ")), "OLM v0 itself refuses this: delete all but one".into());
            None
        }
    };

    // Dependencies: v1 resolves none.
    let required: Vec<String> = csv
        .spec
        .required_crds()
        .iter()
        .map(|d| format!("{} ({})", d.name, d.kind))
        .chain(csv.spec.required_api_services().iter().map(|a| format!("{}.{}/{} ({})", a.version, a.group, a.name, a.kind)))
        .collect();
    if !required.is_empty() {
        if choices.ignore_dependencies {
            notes.push(format!("the APIs it requires stay installed by what provides them now: {}", required.join(", ")));
        } else {
            refuse(
                format!("ClusterServiceVersion {adopt_from} requires APIs other operators provide: {}", required.join(", ")),
                "OLM v1 does not resolve dependencies: migrate the operators that provide them too, or pass --ignore-dependencies to keep them as they are".into(),
            );
        }
    }

    // OLM v0 gives users access to an operator's APIs through ClusterRoles per API that
    // aggregate into the cluster's admin, edit and view; they are owned by the CRD, so they stay.
    let provided: Vec<&str> = csv.spec.owned_crds().iter().map(|d| d.name.as_str()).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
    if !provided.is_empty() {
        notes.push(format!(
            "the ClusterRoles OLM v0 made for its APIs ({} -admin, -edit, -view) stay with their CRDs, so users keep access through admin, edit and view; OLM v1 makes none for APIs a later version adds: grant access to those with RBAC of your own",
            provided.join(", ")
        ));
    }

    // Approval and version.
    let final_version = match sub.spec.approval() {
        Approval::Manual if choices.pin => {
            notes.push(format!("Manual approval becomes a pinned version: upgrade by changing spec.source.catalog.version (now {version})"));
            Some(version.clone())
        }
        Approval::Manual => {
            refuse(
                format!("Subscription {sub_ref} has installPlanApproval: Manual, which OLM v1 does not have"),
                "pass --pin to pin the installed version instead (an upgrade is then a change of spec.source.catalog.version)".into(),
            );
            None
        }
        _ => None,
    };
    if let Some(starting) = sub.spec.starting_csv.as_deref().filter(|s| !s.is_empty() && sub.spec.approval() != Approval::Manual) {
        notes.push(format!("startingCSV {starting} only chose where the Subscription started: the extension follows the channel from {version}"));
    }
    if sub.spec.config.as_ref().is_some_and(|c| serde_json::to_value(c).is_ok_and(|v| v.as_object().is_some_and(|o| !o.is_empty()))) {
        if choices.drop_config {
            notes.push("spec.config is not carried over: the Deployments keep it until the next upgrade replaces them".into());
        } else {
            refuse(
                format!("Subscription {sub_ref} has spec.config, which a ClusterExtension has no field for"),
                "pass --drop-config to migrate without it (the Deployments keep it until the next upgrade), or remove it from the Subscription first".into(),
            );
        }
    }

    // The catalog.
    let (catalog, new_catalog) = choose_catalog(observed, choices, &mut refuse);

    // The installer's ServiceAccount.
    let group_account = observed.groups.first().and_then(|g| g.spec.service_account_name.clone()).filter(|s| !s.is_empty());
    let (service_account, new_service_account) = match (&choices.service_account, group_account) {
        (Some(chosen), _) => (chosen.clone(), None),
        (None, Some(scoped)) => {
            notes.push(format!("installs as ServiceAccount {namespace}/{scoped}, as the OperatorGroup's scoped install did"));
            (scoped, None)
        }
        (None, None) if observed.groups.is_empty() && made_before.is_some() => {
            let account = made_before_spec.pointer("/serviceAccount/name").and_then(|a| a.as_str()).unwrap_or_default();
            (account.to_owned(), None)
        }
        (None, None) => {
            let account = format!("{name}-installer");
            notes.push(format!(
                "OLM v0 installed it with OLM's own rights: ServiceAccount {namespace}/{account} is created and bound to cluster-admin; pass --service-account to install with less"
            ));
            (account.clone(), Some(NewServiceAccount { name: account, cluster_role: "cluster-admin".into() }))
        }
    };

    if !refusals.is_empty() {
        return Err(refusals);
    }

    let channels = match (&sub.spec.channel, &observed.default_channel) {
        (Some(channel), _) if !channel.is_empty() => vec![channel.clone()],
        (_, Some(default)) => vec![default.clone()],
        _ => {
            notes.push("neither the Subscription nor the package names a channel: the extension takes versions from every channel".into());
            Vec::new()
        }
    };
    let mut catalog_filter = json!({
        "packageName": package,
        "version": version,
        "selector": {"matchLabels": {METADATA_NAME_LABEL: catalog}},
    });
    if !channels.is_empty() {
        catalog_filter["channels"] = json!(channels);
    }
    let mut spec = json!({
        "namespace": namespace,
        "serviceAccount": {"name": service_account},
        "source": {"sourceType": "Catalog", "catalog": catalog_filter},
    });
    if let Some(watch) = &watch_namespace {
        spec["config"] = json!({"configType": "Inline", "inline": {"watchNamespace": watch}});
    }
    let extension = json!({
        "apiVersion": "olm.operatorframework.io/v1",
        "kind": "ClusterExtension",
        "metadata": {
            "name": name,
            "annotations": {ADOPT_FROM_ANNOTATION: adopt_from, MIGRATED_FROM_ANNOTATION: sub_ref},
        },
        "spec": spec,
    });
    let extension: ClusterExtension = serde_json::from_value(extension).map_err(|e| {
        vec![Refusal { what: format!("the ClusterExtension for {sub_ref} does not form: {e}"), fix: "report this as a bug of olm migrate".into() }]
    })?;

    let mut deletions = Deletions {
        namespace: namespace.clone(),
        subscription: sub.name_any(),
        install_plans: observed.install_plans.clone(),
        csv: adopt_from.split_once('/').map_or(adopt_from.as_str(), |(_, csv)| csv).to_owned(),
        operator_group: None,
    };
    match (observed.groups.first(), observed.other_subscriptions.is_empty()) {
        (Some(group), true) => deletions.operator_group = Some(group.name_any()),
        (Some(group), false) => notes.push(format!(
            "OperatorGroup {namespace}/{} stays: Subscriptions {} still use it",
            group.name_any(),
            observed.other_subscriptions.join(", ")
        )),
        (None, _) => {}
    }
    Ok(Plan { extension, final_version, new_catalog, new_service_account, deletions, notes })
}

/// The OperatorGroup's targets: its status when OLM has set it, else its spec (`[""]` or none
/// means all namespaces; a selector is resolved only in status).
fn group_targets(group: &OperatorGroup) -> Vec<String> {
    if let Some(namespaces) = group.status.as_ref().and_then(|s| s.namespaces.clone()) {
        return namespaces;
    }
    group.spec.target_namespaces.clone().unwrap_or_default()
}

/// The ClusterCatalog the extension installs from: `--catalog`, else one of the CatalogSource's
/// image, else a new one named after the CatalogSource.
fn choose_catalog(observed: &Observed, choices: &Choices, refuse: &mut dyn FnMut(String, String)) -> (String, Option<ClusterCatalog>) {
    let sub = &observed.subscription;
    let by_name: BTreeMap<String, &ClusterCatalog> = observed.cluster_catalogs.iter().map(|c| (c.name_any(), c)).collect();
    if let Some(chosen) = &choices.catalog {
        if !by_name.contains_key(chosen) {
            let names: Vec<_> = by_name.keys().cloned().collect();
            refuse(
                format!("ClusterCatalog {chosen} does not exist"),
                format!("create it first, or name one of: {}", if names.is_empty() { "(none)".into() } else { names.join(", ") }),
            );
        }
        return (chosen.clone(), None);
    }
    let source_ref = format!("{}/{}", sub.spec.source_namespace, sub.spec.source);
    let Some(source) = &observed.catalog_source else {
        refuse(format!("CatalogSource {source_ref} does not exist"), "name the ClusterCatalog that serves the package with --catalog".into());
        return (String::new(), None);
    };
    let Some(image) = source.spec.image.clone().filter(|i| !i.is_empty()) else {
        let serves = match (&source.spec.config_map, &source.spec.address) {
            (Some(config_map), _) => format!("from ConfigMap {config_map}"),
            (_, Some(address)) => format!("from the address {address}"),
            _ => "without an image".to_owned(),
        };
        refuse(
            format!("CatalogSource {source_ref} serves its catalog {serves}; OLM v1 reads catalogs from images"),
            "publish the catalog as an image, create a ClusterCatalog for it, and migrate with --catalog NAME".into(),
        );
        return (String::new(), None);
    };
    if let Some(same) = observed.cluster_catalogs.iter().find(|c| c.spec.source.image.as_ref().is_some_and(|i| i.reference == image)) {
        return (same.name_any(), None);
    }
    let mut name = sub.spec.source.clone();
    if by_name.contains_key(&name) {
        name = format!("{}-{}", sub.spec.source_namespace, sub.spec.source);
    }
    if by_name.contains_key(&name) {
        refuse(
            format!("ClusterCatalogs {} and {name} exist with other images than {image}", sub.spec.source),
            "create a ClusterCatalog for the image and migrate with --catalog NAME".into(),
        );
        return (name, None);
    }
    let mut image_source = json!({"ref": image});
    if let Some(minutes) = poll_minutes(source) {
        image_source["pollIntervalMinutes"] = json!(minutes);
    }
    let catalog = json!({
        "apiVersion": "olm.operatorframework.io/v1",
        "kind": "ClusterCatalog",
        "metadata": {"name": name, "annotations": {MIGRATED_FROM_ANNOTATION: source_ref}},
        "spec": {"source": {"type": "Image", "image": image_source}},
    });
    match serde_json::from_value(catalog) {
        Ok(catalog) => (name, Some(catalog)),
        Err(e) => {
            refuse(format!("the ClusterCatalog for {source_ref} does not form: {e}"), "report this as a bug of olm migrate".into());
            (name, None)
        }
    }
}

/// The CatalogSource's registry poll interval in whole minutes (rounded up; at least 1).
fn poll_minutes(source: &CatalogSource) -> Option<i64> {
    let interval = source.spec.update_strategy.as_ref()?.registry_poll.as_ref()?.interval.clone()?;
    let seconds = olm_api::duration::parse_go_duration(&interval).ok()?.as_secs();
    Some(i64::try_from(seconds.div_ceil(60).max(1)).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests;
