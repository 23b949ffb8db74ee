//! Conformance over real packages: every package of `tests/testdata/community-subset` (38
//! packages and 997 bundles of community-operators-prod, copied verbatim, see its SOURCE.md) is
//! taken as a cluster admin takes it. The tree is rendered with `olm catalog render`, served by
//! the catalog server from one CatalogSource in the global catalog namespace, and each package
//! gets a namespace, an OperatorGroup and a Subscription to its default channel that starts at
//! the oldest bundle of that channel this Kubernetes can install (`startingCSV`) and follows the
//! channel, Automatic approval, to its head. A package that needs a package or API the catalog
//! does not have must fail resolution with a message naming what is missing.
//!
//! A table of the outcomes (package, start and head, upgrades walked, time) is printed, and
//! written to `$OLM_CONFORMANCE_TABLE` when set (docs/conformance.md keeps the last one).
//! `OLM_CONFORMANCE_PACKAGES=DIR` runs another tree of bundle directories the same way (a
//! held-out set, or the whole community catalog: bench/community.sh); `OLM_CONFORMANCE_ONLY=a,b`
//! runs only some packages, `OLM_CONFORMANCE_SLICE=K/N` the K-th of N equal runs of them in name
//! order, `OLM_CONFORMANCE_HEADS=1` installs each head without `startingCSV` (no walk).
//! A package that fails gets what its user sees (Subscription conditions, InstallPlan and CSV
//! phases and messages) in the table.
//!
//! The plan of each package is read from the rendered catalog with the catalog library (the
//! same model the catalog server serves); what the test expects of OLM is what a user sees:
//! the head's CSV Succeeded, every older CSV replaced and gone (never Failed), the Subscription
//! AtLatestKnown on the head, or a resolution failure that names the missing dependency.
//!
//! Longer than ~600 lines: what this cluster can install (the plan), the run and its report,
//! and the channel switch, which shares the unpacking, rendering and serving.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::api::PostParams;
use olm_api::v1alpha1::catalog_source::CatalogSource;
use olm_api::v1alpha1::subscription::Subscription;
use olm_catalog::{Bundle, Catalog, Channel, Package, UpgradeEdges as _};
use olm_install::bundle_objects::created_by_kind;
use olm_e2e::controllers::{self, create_from_yaml};
use olm_e2e::journey;
use olm_testkit::{TestCluster, TestNamespace};
use serde_json::{Value, json};

/// How long one wait of one package may take (many packages install at once on 2 cores).
const TIMEOUT: Duration = Duration::from_secs(420);
/// How much more a walk may take per upgrade on its way.
const PER_STEP: Duration = Duration::from_secs(10);
/// How many packages install at once.
const CONCURRENT: usize = 8;
/// Without `OLM_CONFORMANCE_FULL`, each walk starts at most this many upgrades below the head (2 keeps CI
/// near its 45-minute aim; `OLM_CONFORMANCE_FULL=1` starts from the oldest installable bundle).
const MAX_CI_STEPS: usize = 2;

/// How one package is to be taken.
#[derive(Debug)]
struct Plan {
    package: String,
    channel: String,
    /// The install mode of the OperatorGroup: the first of OwnNamespace, AllNamespaces that
    /// every bundle of the channel from `start` on supports.
    mode: &'static str,
    start: String,
    head: String,
    /// Older bundles of the channel this cluster cannot install, and why.
    passed_over: Vec<String>,
    /// Packages or APIs the walk needs that no bundle of the catalog provides: resolution must
    /// fail naming one of them.
    missing: Vec<String>,
    /// Upgrades on the shortest path from `start` to `head`.
    steps: usize,
}

impl Plan {
    /// How long its walk may take: [`TIMEOUT`], and [`PER_STEP`] for each upgrade (a full walk
    /// of a long channel is that many installs, one after the other).
    fn timeout(&self) -> Duration {
        TIMEOUT + PER_STEP * u32::try_from(self.steps).unwrap_or(u32::MAX)
    }
}

/// What happened to one package.
enum Outcome {
    /// The CSVs walked, and how many steps took each kind of edge.
    Walked { walked: Vec<String>, edges: BTreeMap<String, usize> },
    Unresolvable { message: String },
    /// OLM did not do what the user expects: what went wrong, and what the user sees.
    Failed { error: String, seen: String },
}

/// Which packages of the tree this run takes: `OLM_CONFORMANCE_ONLY`, then `OLM_CONFORMANCE_SLICE`.
struct Selection {
    only: Option<BTreeSet<String>>,
    /// (K, N): the K-th (from 1) of N consecutive, equal slices of the packages in name order.
    slice: Option<(usize, usize)>,
}

impl Selection {
    fn from_env() -> anyhow::Result<Selection> {
        let only = std::env::var("OLM_CONFORMANCE_ONLY").ok().map(|s| s.split(',').map(str::to_owned).collect());
        let slice = match std::env::var("OLM_CONFORMANCE_SLICE") {
            Err(_) => None,
            Ok(text) => {
                let parsed = text.split_once('/').and_then(|(k, n)| Some((k.trim().parse::<usize>().ok()?, n.trim().parse::<usize>().ok()?)));
                match parsed {
                    Some((k, n)) if (1..=n).contains(&k) => Some((k, n)),
                    _ => bail!("OLM_CONFORMANCE_SLICE={text}: expected K/N with 1 <= K <= N, for example 2/5"),
                }
            }
        };
        Ok(Selection { only, slice })
    }

    /// The names to take out of `names` (in name order).
    fn pick<'a>(&self, names: impl Iterator<Item = &'a str>) -> BTreeSet<String> {
        let names: Vec<&str> = names.filter(|n| self.only.as_ref().is_none_or(|only| only.contains(*n))).collect::<BTreeSet<_>>().into_iter().collect();
        let Some((k, n)) = self.slice else {
            return names.into_iter().map(str::to_owned).collect();
        };
        let (from, to) = (names.len() * (k - 1) / n, names.len() * k / n);
        names[from..to].iter().map(|n| (*n).to_owned()).collect()
    }
}

/// The packages' tree: `OLM_CONFORMANCE_PACKAGES`, or the bundled subset unpacked into `scratch`.
fn packages_dir(scratch: &Path) -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os("OLM_CONFORMANCE_PACKAGES") {
        return Ok(PathBuf::from(dir));
    }
    let archive = olm_e2e::repo().join("tests/testdata/community-subset/operators.tar.zst");
    let file = std::fs::File::open(&archive).with_context(|| archive.display().to_string())?;
    let decoder = ruzstd::decoding::StreamingDecoder::new(std::io::BufReader::new(file))
        .map_err(|e| anyhow::anyhow!("{}: {e}", archive.display()))?;
    tar::Archive::new(decoder).unpack(scratch).with_context(|| format!("unpack {}", archive.display()))?;
    Ok(scratch.join("operators"))
}

/// What this cluster can install, as far as the plan needs to know.
struct ThisCluster {
    kube: semver::Version,
    /// The group versions the API server serves.
    served: BTreeSet<String>,
    /// Groups some CRD of the catalog defines.
    crd_groups: BTreeSet<String>,
    /// Bundles with a `v1beta1` CRD the API server refuses even as OLM converts it to `v1`
    /// (a schema that is not structural, as `v1` requires), and what it said.
    refused_crds: BTreeMap<String, String>,
    /// The labels of each node.
    node_labels: Vec<BTreeMap<String, String>>,
}

impl ThisCluster {
    async fn read(cluster: &TestCluster, catalog: &Catalog) -> anyhow::Result<ThisCluster> {
        let client = cluster.client();
        let version = client.apiserver_version().await?;
        let kube = semver::Version::new(version.major.trim_end_matches('+').parse()?, version.minor.trim_end_matches('+').parse()?, 0);
        let mut served: BTreeSet<String> = client.list_core_api_versions().await?.versions.into_iter().collect();
        for group in client.list_api_groups().await?.groups {
            served.extend(group.versions.into_iter().map(|v| v.group_version));
        }
        let crds = catalog.bundles().flat_map(|b| b.objects().into_iter().map(move |o| (b, o))).filter(|(_, o)| o["kind"] == "CustomResourceDefinition");
        let mut crd_groups = BTreeSet::new();
        let mut refused_crds = BTreeMap::new();
        let api: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> = Api::all(client);
        let dry_run = kube::api::PatchParams::apply("olm-conformance").dry_run().force();
        for (bundle, crd) in crds {
            crd_groups.extend(crd.pointer("/spec/group").and_then(Value::as_str).map(str::to_owned));
            if crd["apiVersion"] != "apiextensions.k8s.io/v1beta1" || refused_crds.contains_key(&bundle.name) {
                continue;
            }
            let converted = olm_install::bundle_objects::normalize_object(crd.clone(), &bundle.name, 0).map_err(anyhow::Error::msg)?;
            let name = converted.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned();
            if let Err(kube::Error::Api(status)) = api.patch(&name, &dry_run, &kube::api::Patch::Apply(&converted)).await
                && status.code == 422
            {
                refused_crds.insert(bundle.name.clone(), format!("CRD {name} refused: {}", status.message.chars().take(160).collect::<String>()));
            }
        }
        let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(cluster.client());
        let node_labels = nodes.list(&Default::default()).await?.items.into_iter().map(|n| n.metadata.labels.unwrap_or_default()).collect();
        Ok(ThisCluster { kube, served, crd_groups, refused_crds, node_labels })
    }

    /// Why this cluster cannot install `bundle`, if it cannot: a `minKubeVersion` above the
    /// server's, a CRD it refuses, a native API it requires that the server does not serve,
    /// pods no node fits, or a manifest of an API the server does not serve, no CRD of the
    /// catalog provides and OLM does not take by its kind.
    fn cannot_install(&self, bundle: &Bundle) -> Option<String> {
        let csv = bundle.csv()?;
        if let Some(min) = csv.pointer("/spec/minKubeVersion").and_then(Value::as_str).filter(|m| !m.trim().is_empty()) {
            match semver::Version::parse(min.trim().trim_start_matches('v')) {
                Ok(min) if min > self.kube => return Some(format!("{}: minKubeVersion {min}", bundle.name)),
                _ => {}
            }
        }
        if let Some(why) = self.refused_crds.get(&bundle.name) {
            return Some(format!("{}: {why}", bundle.name));
        }
        // Native APIs the CSV requires (OpenShift's Routes, its console): without them its
        // requirements are never met, with any OLM.
        let native = csv.pointer("/spec/nativeAPIs").and_then(Value::as_array).into_iter().flatten();
        for api in native {
            let group_version = match (api["group"].as_str().unwrap_or_default(), api["version"].as_str().unwrap_or_default()) {
                ("", version) => version.to_owned(),
                (group, version) => format!("{group}/{version}"),
            };
            if !self.served.contains(&group_version) {
                return Some(format!("{}: requires the native API {} {group_version} (not served by this Kubernetes)", bundle.name, api["kind"].as_str().unwrap_or_default()));
            }
        }
        // A Deployment whose pods only fit nodes this cluster lacks (OpenShift's
        // `node-role.kubernetes.io/master`) never becomes available, with any OLM.
        let deployments = csv.pointer("/spec/install/spec/deployments").and_then(Value::as_array).into_iter().flatten();
        for deployment in deployments {
            let pod = deployment.pointer("/spec/template/spec").cloned().unwrap_or_default();
            if !self.node_labels.iter().any(|labels| fits_node(&pod, labels)) {
                return Some(format!(
                    "{}: Deployment {} selects nodes (nodeSelector {}, required nodeAffinity {}) that this cluster does not have",
                    bundle.name,
                    deployment["name"].as_str().unwrap_or_default(),
                    pod["nodeSelector"],
                    pod.pointer("/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution").unwrap_or(&Value::Null)
                ));
            }
        }
        for object in &bundle.objects() {
            let api_version = object["apiVersion"].as_str().unwrap_or_default();
            let group = api_version.split_once('/').map_or("", |(g, _)| g);
            let by_kind = object["kind"].as_str().is_some_and(created_by_kind);
            if !self.served.contains(api_version) && !self.crd_groups.contains(group) && !by_kind {
                return Some(format!("{}: {} {} (not served by this Kubernetes)", bundle.name, api_version, object["kind"].as_str().unwrap_or_default()));
            }
        }
        None
    }

    /// The CRDs of APIs that bundles' manifests use (a PrometheusRule, a ServiceMonitor), that
    /// this cluster does not serve and the catalog defines: created before the run, as a
    /// cluster with that operator (OpenShift's monitoring stack) has them. Each from the
    /// newest bundle that has it.
    async fn add_used_apis(&self, cluster: &TestCluster, catalog: &Catalog) -> anyhow::Result<Vec<String>> {
        let mut used = BTreeSet::new();
        for bundle in catalog.bundles() {
            for object in &bundle.objects() {
                let api_version = object["apiVersion"].as_str().unwrap_or_default();
                let kind = object["kind"].as_str().unwrap_or_default();
                if !self.served.contains(api_version) && !created_by_kind(kind) && api_version.contains('/') {
                    used.insert((api_version.split('/').next().unwrap_or_default().to_owned(), kind.to_owned()));
                }
            }
        }
        let mut newest: BTreeMap<String, (&Bundle, Value)> = BTreeMap::new();
        for bundle in catalog.bundles() {
            for crd in bundle.objects().into_iter().filter(|o| o["kind"] == "CustomResourceDefinition" && o["apiVersion"] == "apiextensions.k8s.io/v1") {
                let (group, kind) = (crd.pointer("/spec/group").and_then(Value::as_str), crd.pointer("/spec/names/kind").and_then(Value::as_str));
                let (Some(group), Some(kind), Some(name)) = (group, kind, crd.pointer("/metadata/name").and_then(Value::as_str)) else { continue };
                if used.contains(&(group.to_owned(), kind.to_owned()))
                    && newest.get(name).is_none_or(|(b, _)| bundle.package == b.package && bundle.cmp_version(b).is_gt())
                {
                    newest.insert(name.to_owned(), (bundle, crd));
                }
            }
        }
        let api: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> = Api::all(cluster.client());
        for (name, (_, crd)) in &newest {
            api.patch(name, &kube::api::PatchParams::apply("olm-conformance").force(), &kube::api::Patch::Apply(crd)).await?;
        }
        Ok(newest.into_iter().map(|(name, (bundle, _))| format!("{name} (from {})", bundle.name)).collect())
    }
}

/// Whether a pod of `pod` (a PodSpec) may go to a node with `labels`: its `nodeSelector`, and
/// its required node affinity (terms ORed, expressions ANDed; In, NotIn, Exists, DoesNotExist).
fn fits_node(pod: &Value, labels: &BTreeMap<String, String>) -> bool {
    let selector = pod["nodeSelector"].as_object().into_iter().flatten();
    if !selector.into_iter().all(|(k, v)| labels.get(k).map(String::as_str) == v.as_str()) {
        return false;
    }
    let terms = pod.pointer("/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms").and_then(Value::as_array);
    let Some(terms) = terms.filter(|t| !t.is_empty()) else {
        return true;
    };
    terms.iter().any(|term| {
        term["matchExpressions"].as_array().into_iter().flatten().all(|expression| {
            let value = expression["key"].as_str().and_then(|k| labels.get(k));
            let listed = |v: &String| expression["values"].as_array().into_iter().flatten().any(|x| x.as_str() == Some(v.as_str()));
            match expression["operator"].as_str().unwrap_or_default() {
                "Exists" => value.is_some(),
                "DoesNotExist" => value.is_none(),
                "In" => value.is_some_and(listed),
                "NotIn" => !value.is_some_and(listed),
                // Gt/Lt: not used by these bundles; assume it fits.
                _ => true,
            }
        })
    })
}

fn install_modes(bundle: &Bundle) -> BTreeSet<String> {
    bundle.supported_install_modes().unwrap_or_default().iter().cloned().collect()
}

/// The bundles of `channel`, oldest first.
fn by_version<'a>(catalog: &'a Catalog, package: &Package, channel: &Channel) -> Vec<&'a Bundle> {
    let mut bundles: Vec<&Bundle> = channel.entries().iter().filter_map(|e| catalog.bundle(&package.name, &e.name)).collect();
    bundles.sort_by(|a, b| a.cmp_version(b));
    bundles
}

/// What `bundle` requires that no bundle of the catalog provides.
fn missing_dependencies(catalog: &Catalog, bundle: &Bundle) -> Vec<String> {
    let mut missing = Vec::new();
    for required in bundle.required_packages() {
        let provided = catalog.package(&required.package_name).is_some_and(|p| {
            p.bundles().iter().any(|b| required.range.as_ref().is_none_or(|r| r.contains(&b.version)))
        });
        if !provided {
            missing.push(required.package_name.clone());
        }
    }
    for gvk in bundle.required_gvks() {
        if catalog.bundles_providing(gvk).next().is_none() {
            missing.push(gvk.kind.clone());
        }
    }
    missing
}

fn plan(catalog: &Catalog, package: &Package, this: &ThisCluster, max_steps: usize) -> anyhow::Result<Plan> {
    let channel = package.default_channel().with_context(|| format!("{}: no default channel", package.name))?;
    let head = channel.head().with_context(|| format!("{}/{}: no head", package.name, channel.name))?.name.clone();
    let bundles = by_version(catalog, package, channel);
    let mut passed_over = Vec::new();
    for (i, start) in bundles.iter().enumerate() {
        let mut steps = 0;
        if let Some(why) = this.cannot_install(start) {
            passed_over.push(why);
            continue;
        }
        if start.name != head {
            match olm_walk(catalog, package, channel, start) {
                Err(why) => {
                    passed_over.push(format!("{}: {why}", start.name));
                    continue;
                }
                Ok(walk) if walk.len() - 1 > max_steps => continue,
                Ok(walk) => {
                    steps = walk.len() - 1;
                    if let Some(why) = drops_a_stored_version(walk.into_iter()) {
                        passed_over.push(format!("{}: {why}", start.name));
                        continue;
                    }
                }
            }
        }
        let walk = &bundles[i..];
        let Some(mode) = ["OwnNamespace", "AllNamespaces"].into_iter().find(|m| walk.iter().all(|b| install_modes(b).contains(*m))) else {
            passed_over.push(format!("{}: no install mode every later bundle supports", start.name));
            continue;
        };
        let missing: BTreeSet<String> = walk.iter().flat_map(|b| missing_dependencies(catalog, b)).collect();
        return Ok(Plan {
            package: package.name.clone(),
            channel: channel.name.clone(),
            mode,
            start: start.name.clone(),
            head,
            passed_over,
            missing: missing.into_iter().collect(),
            steps,
        });
    }
    bail!("{}/{}: no bundle this cluster can install: {}", package.name, channel.name, passed_over.join("; "))
}

/// The walk OLM takes from `start` to the channel's head, as upstream takes it: from each
/// bundle to the newest entry that replaces it, skips it or covers it with its skipRange,
/// never to an entry another entry of the channel skips (a publisher's way of withdrawing a
/// bundle). Or where it stops, and why.
fn olm_walk<'a>(catalog: &'a Catalog, package: &Package, channel: &Channel, start: &'a Bundle) -> Result<Vec<&'a Bundle>, String> {
    let head = channel.head().map(|h| h.name.clone()).unwrap_or_default();
    let skipped: BTreeSet<&str> = channel.entries().iter().flat_map(|e| e.skips.iter().map(String::as_str)).collect();
    let mut walk = vec![start];
    while let Some(current) = walk.last().copied().filter(|b| b.name != head) {
        let successors = channel.successors(&current.name, Some(&current.version));
        let next = successors
            .iter()
            .filter(|e| !skipped.contains(e.name.as_str()))
            .filter_map(|e| catalog.bundle(&package.name, &e.name))
            .max_by(|a, b| a.cmp_version(b));
        match next {
            Some(next) if walk.len() <= channel.entries().len() => walk.push(next),
            Some(_) => return Err(format!("the upgrades from {} loop", start.name)),
            None => {
                let names: Vec<&str> = successors.iter().map(|e| e.name.as_str()).collect();
                return Err(if names.is_empty() {
                    format!("OLM stops at {}: no bundle of the channel upgrades from it, so {head} is out of reach", current.name)
                } else {
                    format!(
                        "OLM stops at {}: the bundles that upgrade from it ({}) are all skipped by other entries, and OLM, like upstream, never upgrades to a skipped bundle",
                        current.name,
                        names.join(", ")
                    )
                });
            }
        }
    }
    Ok(walk)
}

/// Why walking `walk` (oldest first) would fail, if it would: a bundle whose CRD no longer
/// lists a version that an earlier bundle's CRD stored. Every object written while that version
/// was the storage version is kept in it (`status.storedVersions`), so OLM, like upstream
/// ("risk of data loss"), refuses the CRD: real data broken beyond what upstream accepts.
fn drops_a_stored_version<'a>(walk: impl Iterator<Item = &'a Bundle>) -> Option<String> {
    // (CRD, version) → the bundle whose CRD first stored it.
    let mut stored: BTreeMap<(String, String), String> = BTreeMap::new();
    for bundle in walk {
        for crd in bundle.objects().iter().filter(|o| o["kind"] == "CustomResourceDefinition") {
            let name = crd.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
            let versions = crd.pointer("/spec/versions").and_then(Value::as_array).cloned().unwrap_or_default();
            let single = crd.pointer("/spec/version").and_then(Value::as_str);
            let mut listed: BTreeSet<&str> = versions.iter().filter_map(|v| v["name"].as_str()).collect();
            listed.extend(single);
            let dropped = stored.iter().find(|((crd_name, version), _)| crd_name == name && !listed.contains(version.as_str()));
            if let Some(((_, version), by)) = dropped {
                return Some(format!(
                    "the walk would reach {}, whose CRD {name} drops version {version} that {by} stored (refused as upstream refuses it: risk of data loss)",
                    bundle.name
                ));
            }
            let storage = versions.iter().find(|v| v["storage"] == json!(true)).and_then(|v| v["name"].as_str()).or(single);
            if let Some(storage) = storage {
                stored.entry((name.to_owned(), storage.to_owned())).or_insert_with(|| bundle.name.clone());
            }
        }
    }
    None
}

/// Delete the CRDs the catalog's bundles define ([`journey::remove_crds`]).
async fn remove_catalog_crds(cluster: &TestCluster, catalog: &Catalog) -> anyhow::Result<()> {
    let names: BTreeSet<String> = catalog
        .bundles()
        .flat_map(|b| b.objects())
        .filter(|o| o["kind"] == "CustomResourceDefinition")
        .filter_map(|o| o.pointer("/metadata/name").and_then(Value::as_str).map(str::to_owned))
        .collect();
    journey::remove_crds(cluster, &names, TIMEOUT).await
}

/// The packages some other planned package requires, by name or by an API they provide.
fn needed_by_others(catalog: &Catalog, plans: &[Plan]) -> BTreeSet<String> {
    let mut needed = BTreeSet::new();
    for plan in plans {
        for bundle in catalog.package(&plan.package).map(Package::bundles).unwrap_or_default() {
            let providers = bundle.required_gvks().flat_map(|gvk| catalog.bundles_providing(gvk).map(|b| b.package.clone()));
            let wanted = bundle.required_packages().map(|r| r.package_name.clone()).chain(providers);
            needed.extend(wanted.filter(|p| *p != plan.package));
        }
    }
    needed
}

/// Subscribe `plan` in a namespace of its own and wait for what the user must see; when OLM
/// does not get there, what the user sees instead.
async fn take(cluster: &TestCluster, plan: &Plan, source: &(String, String), catalog: &Catalog) -> anyhow::Result<Outcome> {
    let ns = cluster.namespace(&format!("conf-{}", &plan.package[..plan.package.len().min(40)])).await?;
    match follow(&ns, plan, source, catalog).await {
        Ok(outcome) => {
            // Removed before the next package starts: CSVs of all-namespaces operators left
            // behind would conflict with the same operator installed elsewhere.
            ns.cleanup().await?;
            Ok(outcome)
        }
        Err(err) => {
            let seen = user_sees(&ns).await;
            ns.cleanup().await?;
            Ok(Outcome::Failed { error: format!("{err:#}"), seen })
        }
    }
}

/// The Subscription's true conditions, and each InstallPlan's and CSV's phase and message, one
/// line: what `kubectl get` and `kubectl describe` show the user of a package that did not install.
async fn user_sees(ns: &TestNamespace) -> String {
    use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
    use olm_api::v1alpha1::install_plan::InstallPlan;
    fn statuses<K: serde::Serialize + Clone>(items: Result<kube::api::ObjectList<K>, kube::Error>) -> Vec<(String, Value)> {
        let items = items.map(|l| l.items).unwrap_or_default();
        items.iter().filter_map(|o| serde_json::to_value(o).ok()).map(|o| (o.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned(), o["status"].clone())).collect()
    }
    fn conditions(status: &Value, shown: &str) -> String {
        let conditions = status["conditions"].as_array().into_iter().flatten().filter(|c| c["status"] == shown);
        let said: Vec<String> = conditions.map(|c| format!("{} {}: {}", c["type"].as_str().unwrap_or_default(), c["reason"].as_str().unwrap_or_default(), c["message"].as_str().unwrap_or_default())).collect();
        said.join("; ")
    }
    let list = Default::default();
    let mut seen = Vec::new();
    for (name, status) in statuses(ns.api::<Subscription>().list(&list).await) {
        let (state, current) = (status["state"].as_str().unwrap_or("-"), status["currentCSV"].as_str().unwrap_or("-"));
        seen.push(format!("Subscription {name} {state} on {current}: {}", conditions(&status, "True")));
    }
    for (name, status) in statuses(ns.api::<InstallPlan>().list(&list).await) {
        seen.push(format!("InstallPlan {name} {}: {}", status["phase"].as_str().unwrap_or("-"), conditions(&status, "False")));
    }
    for (name, status) in statuses(ns.api::<ClusterServiceVersion>().list(&list).await) {
        let (phase, reason, message) = (status["phase"].as_str().unwrap_or("-"), status["reason"].as_str().unwrap_or("-"), status["message"].as_str().unwrap_or_default());
        seen.push(format!("CSV {name} {phase} {reason}: {message}"));
    }
    seen.join(" / ").replace('|', "/").replace('\n', " ")
}

/// The Subscription of `plan` in `ns`, followed to its end.
async fn follow(ns: &TestNamespace, plan: &Plan, source: &(String, String), catalog: &Catalog) -> anyhow::Result<Outcome> {
    let spec = if plan.mode == "OwnNamespace" { format!("  targetNamespaces: [{}]\n", ns.name()) } else { "  {}\n".to_owned() };
    let walk = journey::WalkRecorder::start(ns);
    create_from_yaml(ns, &format!("apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata:\n  name: group\nspec:\n{spec}")).await?;
    create_from_yaml(
        &ns,
        &format!(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata:\n  name: operator\nspec:\n  source: {}\n  sourceNamespace: {}\n  name: {}\n  channel: {}\n{}  installPlanApproval: Automatic\n",
            source.0,
            source.1,
            plan.package,
            plan.channel,
            // The head: as a cluster admin installs the latest, without naming it.
            if plan.start == plan.head { String::new() } else { format!("  startingCSV: {}\n", plan.start) }
        ),
    )
    .await?;
    if !plan.missing.is_empty() {
        let message = resolution_failure(ns, &plan.missing, plan.timeout()).await?;
        return Ok(Outcome::Unresolvable { message });
    }
    journey::csv_succeeded_on_the_way(ns, &walk, &plan.head, plan.timeout()).await?;
    journey::at_latest(ns, "operator", &plan.head, TIMEOUT).await?;
    // The package's own CSVs: dependencies resolved with it are installed beside it.
    let walked: Vec<String> = walk.walked().into_iter().filter(|c| catalog.bundle(&plan.package, c).is_some()).collect();
    if let Some((csv, why)) = walk.failed().into_iter().next() {
        bail!("{csv} was Failed on the way: {why}");
    }
    if walked.first() != Some(&plan.start) || walked.last() != Some(&plan.head) {
        bail!("the InstallPlans did not go from {} to {}: {walked:?}", plan.start, plan.head);
    }
    // Each step is an upgrade edge of the channel (replaces, skips or skipRange).
    let channel = catalog.channel(&plan.package, &plan.channel).context("the channel")?;
    let mut edges = BTreeMap::new();
    for pair in walked.windows(2) {
        let from = catalog.bundle(&plan.package, &pair[0]).context("a walked bundle")?;
        let edge = channel.entry(&pair[1]).and_then(|next| next.edge_to(&from.name, Some(&from.version)));
        let Some(edge) = edge else {
            bail!("{} → {} is not an upgrade edge of {}: {walked:?}", pair[0], pair[1], plan.channel);
        };
        *edges.entry(format!("{edge:?}").to_lowercase()).or_insert(0) += 1;
    }
    for older in &walked[..walked.len() - 1] {
        journey::csv_replaced(ns, older, TIMEOUT).await?;
    }
    Ok(Outcome::Walked { walked, edges })
}

/// Wait until a condition of the Subscription names one of `missing`.
async fn resolution_failure(ns: &TestNamespace, missing: &[String], timeout: Duration) -> anyhow::Result<String> {
    let subs: Api<Subscription> = ns.api();
    Ok(ns
        .wait_for(&format!("a Subscription condition naming one of {missing:?}"), timeout, &["subscriptions", "installplans", "csvs"], || {
            let subs = subs.clone();
            async move {
                let sub = subs.get("operator").await.map_err(|e| e.to_string())?;
                let conditions = serde_json::to_value(sub.status.unwrap_or_default().conditions.unwrap_or_default()).map_err(|e| e.to_string())?;
                // ResolutionFailed when the start needs it, BehindChannelHead when a later bundle does.
                let said = conditions.as_array().into_iter().flatten().filter(|c| c["status"] == "True").find_map(|c| {
                    let message = c["message"].as_str()?;
                    missing.iter().any(|name| message.contains(name.as_str())).then(|| format!("{}: {message}", c["type"].as_str().unwrap_or_default()))
                });
                Ok::<_, String>(said)
            }
        })
        .await?)
}

/// `olm catalog render` of each package directory of `packages` into `out/<package>/catalog.json`,
/// as a catalog maintainer lays out an FBC (one directory per package: files a server can
/// hold, and one package's bad bundle fails its own render only). Two at a time. Returns what
/// render said on stderr (its warnings are the admin's too), and the packages it refused.
fn render_packages(packages: &Path, out: &Path) -> anyhow::Result<(String, Vec<(String, String)>)> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(packages)?.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.is_dir()).collect();
    dirs.sort();
    let queue = std::sync::Mutex::new(dirs.into_iter());
    let results = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                while let Some(dir) = queue.lock().ok().and_then(|mut q| q.next()) {
                    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                    let result = render(&dir, &out.join(&name));
                    if let Ok(mut results) = results.lock() {
                        results.push((name, result));
                    }
                }
            });
        }
    });
    let mut results = results.into_inner().map_err(|_| anyhow::anyhow!("a render thread panicked"))?;
    results.sort_by(|a, b| a.0.cmp(&b.0));
    let (mut warnings, mut refused) = (String::new(), Vec::new());
    for (name, result) in results {
        match result {
            // Render leaves out a bundle directory it cannot read, with a warning.
            Ok(said) if !std::fs::read_to_string(out.join(&name).join("catalog.json")).unwrap_or_default().contains("\"olm.package\"") => {
                refused.push((name, format!("render left out every bundle: {}", said.trim())));
            }
            Ok(said) => warnings.push_str(&said),
            Err(err) => refused.push((name, format!("{err:#}"))),
        }
    }
    Ok((warnings, refused))
}

/// The rendered packages, what render said and what it refused. With `OLM_CONFORMANCE_RENDERED`
/// (a directory), rendered once and kept there with what render said (`render.json`): the
/// slices of a whole-catalog run share one render (minutes for 297 packages) instead of each
/// rendering every package its dependencies may come from.
fn rendered_packages(packages: &Path, scratch: &Path) -> anyhow::Result<(PathBuf, String, Vec<(String, String)>)> {
    let Some(dir) = std::env::var_os("OLM_CONFORMANCE_RENDERED").map(PathBuf::from) else {
        let rendered = scratch.join("catalog");
        let (warnings, refused) = render_packages(packages, &rendered)?;
        return Ok((rendered, warnings, refused));
    };
    let (catalog, said) = (dir.join("catalog"), dir.join("render.json"));
    if let Ok(text) = std::fs::read_to_string(&said) {
        let (warnings, refused): (String, Vec<(String, String)>) =
            serde_json::from_str(&text).with_context(|| format!("{}: remove the directory to render again", said.display()))?;
        return Ok((catalog, warnings, refused));
    }
    let _ = std::fs::remove_dir_all(&catalog);
    let (warnings, refused) = render_packages(packages, &catalog)?;
    // Written last: a render cut short leaves no render.json, and the next run renders again.
    std::fs::write(&said, serde_json::to_string(&(&warnings, &refused))?).with_context(|| said.display().to_string())?;
    Ok((catalog, warnings, refused))
}

/// `olm catalog render` of `packages` into `out/catalog.json`, as a cluster admin would;
/// returns what it said on stderr (its warnings are the admin's too).
fn render(packages: &Path, out: &Path) -> anyhow::Result<String> {
    std::fs::create_dir_all(out)?;
    let output = std::process::Command::new(olm_e2e::olm_bin())
        .args(["catalog", "render", packages.to_str().context("path")?, "-o", "json"])
        .output()?;
    let warnings = String::from_utf8_lossy(&output.stderr).into_owned();
    if !output.status.success() {
        bail!("olm catalog render {} failed: {}", packages.display(), warnings.trim());
    }
    std::fs::write(out.join("catalog.json"), &output.stdout)?;
    Ok(warnings)
}

/// `picked` and every package of `catalog` a bundle of theirs may need, transitively: those
/// named by `olm.package.required` or a package constraint, and those providing an API named
/// by `olm.gvk.required` or a GVK constraint.
fn dependency_closure(catalog: &olm_catalog::Catalog, picked: &BTreeSet<String>) -> BTreeSet<String> {
    use olm_catalog::{ConstraintKind, Gvk};
    fn walk<'a>(kind: &'a ConstraintKind, packages: &mut Vec<&'a str>, gvks: &mut Vec<&'a Gvk>) {
        match kind {
            ConstraintKind::Gvk(gvk) => gvks.push(gvk),
            ConstraintKind::Package(required) => packages.push(&required.package_name),
            ConstraintKind::All(inner) | ConstraintKind::Any(inner) | ConstraintKind::Not(inner) => {
                inner.iter().for_each(|c| walk(&c.kind, packages, gvks));
            }
            ConstraintKind::Cel { .. } => {}
        }
    }
    let mut providers: BTreeMap<&Gvk, BTreeSet<&str>> = BTreeMap::new();
    for package in catalog.packages() {
        for bundle in package.bundles() {
            for gvk in bundle.provided_gvks() {
                providers.entry(gvk).or_default().insert(&package.name);
            }
        }
    }
    let mut served: BTreeSet<String> = picked.iter().filter(|p| catalog.package(p).is_some()).cloned().collect();
    let mut todo: Vec<String> = served.iter().cloned().collect();
    while let Some(name) = todo.pop() {
        let Some(package) = catalog.package(&name) else { continue };
        for bundle in package.bundles() {
            let (mut packages, mut gvks): (Vec<&str>, Vec<&Gvk>) = (Vec::new(), bundle.required_gvks().collect());
            packages.extend(bundle.required_packages().map(|r| r.package_name.as_str()));
            bundle.constraints().for_each(|c| walk(&c.kind, &mut packages, &mut gvks));
            let needed = packages.into_iter().chain(gvks.iter().flat_map(|g| providers.get(g).into_iter().flatten().copied()));
            for dependency in needed {
                if catalog.package(dependency).is_some() && served.insert(dependency.to_owned()) {
                    todo.push(dependency.to_owned());
                }
            }
        }
    }
    served
}

/// Copy the files of each of `dirs` (a rendered package each) into a directory of that name in `to`.
fn copy_dirs(dirs: &BTreeSet<PathBuf>, to: &Path) -> anyhow::Result<()> {
    let _ = std::fs::remove_dir_all(to);
    for source in dirs {
        let target = to.join(source.file_name().context("a package directory has a name")?);
        std::fs::create_dir_all(&target).with_context(|| target.display().to_string())?;
        for file in std::fs::read_dir(source).with_context(|| source.display().to_string())? {
            let file = file?;
            if file.file_type()?.is_file() {
                std::fs::copy(file.path(), target.join(file.file_name())).with_context(|| file.path().display().to_string())?;
            }
        }
    }
    Ok(())
}

/// The catalog server on `catalog` (one gRPC listener on loopback) and its address.
async fn serve(catalog: &Path) -> anyhow::Result<(olm_registry::RunningServer, std::net::SocketAddr)> {
    let server = olm_registry::start({
        let mut config = olm_registry::ServeConfig::new(vec![("conformance".into(), catalog.to_path_buf())]);
        config.grpc_addrs = vec![("conformance".into(), "127.0.0.1:0".parse()?)];
        config.reload_interval = None;
        config
    })
    .await?;
    let address = *server.grpc_addrs.get("conformance").context("the catalog server's gRPC address")?;
    Ok((server, address))
}

/// How the community pipeline builds the package's channels: `updateGraph` of its ci.yaml.
fn update_graph(packages: &Path, package: &str) -> String {
    let ci = std::fs::read_to_string(packages.join(package).join("ci.yaml")).unwrap_or_default();
    let setting = ci.lines().find_map(|l| l.trim().strip_prefix("updateGraph:")).map(|v| v.trim().trim_matches('"').to_owned());
    setting.unwrap_or_else(|| "-".to_owned())
}

fn version_of(csv: &str) -> &str {
    csv.rsplit_once(".v").map_or(csv, |(_, v)| v)
}

/// The suites of this binary install the same real packages, whose CRDs are cluster-wide: one
/// at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Copied CSVs off for as long as it lives (OLMConfig `disableCopiedCSVs`), as a cluster admin
/// with dozens of all-namespaces operators sets it: every CSV of the 20 all-namespaces packages
/// here would otherwise be copied into every other package's namespace, and each upgrade
/// step of each of them rewrites 40 copies. Back on when dropped, failure or not.
struct CopiedCsvsOff(TestCluster);

impl CopiedCsvsOff {
    async fn new(cluster: &TestCluster) -> anyhow::Result<Self> {
        Self::set(cluster, true).await?;
        Ok(CopiedCsvsOff(cluster.clone()))
    }

    async fn set(cluster: &TestCluster, disabled: bool) -> anyhow::Result<()> {
        let configs: Api<olm_api::v1::OLMConfig> = Api::all(cluster.client());
        let config = json!({
            "apiVersion": "operators.coreos.com/v1", "kind": "OLMConfig",
            "metadata": {"name": "cluster"},
            "spec": {"features": {"disableCopiedCSVs": disabled}},
        });
        configs.patch("cluster", &kube::api::PatchParams::apply("olm-conformance").force(), &kube::api::Patch::Apply(&config)).await?;
        Ok(())
    }
}

impl Drop for CopiedCsvsOff {
    fn drop(&mut self) {
        // No async in Drop: kubectl, as TestNamespace does.
        let _ = std::process::Command::new(self.0.kubectl_path())
            .arg(format!("--kubeconfig={}", self.0.kubeconfig().display()))
            .args(["--request-timeout=15s", "patch", "olmconfig", "cluster", "--type=merge"])
            .args(["-p", r#"{"spec":{"features":{"disableCopiedCSVs":false}}}"#])
            .output();
    }
}

#[tokio::test]
async fn real_packages_install_and_walk_their_default_channel() -> anyhow::Result<()> {
    let _alone = ONE_AT_A_TIME.lock().await;
    let global = olm_controllers::catalog_operator::global_namespace();
    // The OLM under test: ours, or upstream's operators to judge against (`OLM_CONFORMANCE_UPSTREAM`).
    let (cluster, mut upstream) = match std::env::var_os("OLM_CONFORMANCE_UPSTREAM").map(PathBuf::from) {
        None => (controllers::setup().await?.0, None),
        Some(bin) => {
            let cluster = controllers::cluster_with_crds().await?;
            let logs = std::env::temp_dir().join("olm-conformance-upstream");
            let upstream = olm_e2e::upstream::UpstreamOlm::start(&cluster, &bin, &global, &logs).await?;
            eprintln!("OLM under test: upstream {} from {} (logs in {})", olm_e2e::upstream::VERSION, bin.display(), logs.display());
            (cluster, Some(upstream))
        }
    };
    let _copies_off = CopiedCsvsOff::new(&cluster).await?;
    let scratch = tempfile::tempdir()?;
    let started = Instant::now();
    let packages = packages_dir(scratch.path())?;

    let (rendered, warnings, refused) = rendered_packages(&packages, scratch.path())?;
    eprintln!("rendered {} in {:?}; render said:\n{warnings}", packages.display(), started.elapsed());

    // What the server serves: the catalog with its unsound packages left out.
    let (catalog, problems) = olm_catalog::load::load_fbc(&rendered)?;
    let isolated = catalog.isolate(problems);
    let errors: Vec<String> = isolated.unattributed.iter().filter(|p| !p.warning).map(ToString::to_string).collect();
    if !errors.is_empty() {
        bail!("the rendered catalog has problems that no package can be blamed for (what is served would lack more than a package): {}", errors.join("; "));
    }
    let catalog = isolated.catalog;
    eprintln!("catalog loaded ({:?} in)", started.elapsed());
    // (package, why): rows of the table (the bundled subset has one: eventing-kogito, whose
    // dependencies.yaml files are not YAML).
    let mut left_out: Vec<(String, String)> = isolated
        .left_out
        .iter()
        .map(|l| (l.package.clone(), l.problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")))
        .collect();
    left_out.extend(refused);

    remove_catalog_crds(&cluster, &catalog).await?;
    let this = ThisCluster::read(&cluster, &catalog).await?;
    let added = this.add_used_apis(&cluster, &catalog).await?;
    eprintln!("APIs bundles use, created first ({:?} in): {added:?}", started.elapsed());
    // The full walk from the oldest installable bundle is hundreds of upgrades over the subset
    // (ack-* channels are 70 entries long, one `replaces` at a time): a benchmark-sized run.
    // CI starts each package at most MAX_CI_STEPS upgrades (shortest path) below its head.
    let full = std::env::var_os("OLM_CONFORMANCE_FULL").is_some();
    let heads = std::env::var_os("OLM_CONFORMANCE_HEADS").is_some();
    let max_steps = if heads { 0 } else if full { usize::MAX } else { MAX_CI_STEPS };
    // Slices cut the packages of the tree, served or not: a package left out is a row of its
    // own slice's table only.
    let names = catalog.packages().iter().map(|p| p.name.as_str()).chain(left_out.iter().map(|(p, _)| p.as_str()));
    let picked = Selection::from_env()?.pick(names);
    left_out.retain(|(package, _)| picked.contains(package));
    let mut plans = Vec::new();
    let mut failures = Vec::new();
    // Packages with no bundle this cluster can install (a minKubeVersion, an API, a node it
    // lacks): rows of the table; a failure only for the bundled subset, where none is.
    let mut not_installable = Vec::new();
    for package in catalog.packages() {
        if !picked.contains(&package.name) {
            continue;
        }
        match plan(&catalog, package, &this, max_steps) {
            Ok(plan) => plans.push(plan),
            Err(err) => not_installable.push((package.name.clone(), format!("{err:#}"))),
        }
    }

    // One CatalogSource in the global catalog namespace, served by the catalog server: the
    // picked packages and every package they may depend on. Not the whole rendered catalog:
    // with every manifest inlined, ListBundles of all 297 packages is over a gigabyte, which
    // upstream's catalog operator cannot read within its deadline (`DeadlineExceeded`), and
    // both OLMs must be served the same.
    let served = scratch.path().join("served");
    let served_packages = dependency_closure(&catalog, &picked);
    // Each package's directory as render wrote it (named after the tree's directory).
    let dirs: BTreeSet<PathBuf> = served_packages
        .iter()
        .filter_map(|name| catalog.package(name))
        .map(|p| p.source.as_deref().and_then(Path::parent).map_or_else(|| rendered.join(&p.name), Path::to_path_buf))
        .collect();
    copy_dirs(&dirs, &served)?;
    eprintln!("serving {} packages: the {} picked and what they may depend on", served_packages.len(), picked.len());
    let (server, address) = serve(&served).await?;
    let namespaces: Api<Namespace> = Api::all(cluster.client());
    match namespaces.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": global}}))?).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(err) => return Err(err).context("create the global catalog namespace"),
    }
    let catalogs: Api<CatalogSource> = Api::namespaced(cluster.client(), &global);
    // A run stopped before its end leaves its CatalogSource, naming a server that is gone: upstream
    // resolves against every catalog of the global namespace and fails on an unreachable one
    // (`failed to list bundles … connection refused`), so it must go first.
    for stale in catalogs.list(&Default::default()).await? {
        let name = stale.metadata.name.unwrap_or_default();
        if name.starts_with("conformance-") {
            catalogs.delete(&name, &Default::default()).await.with_context(|| format!("delete CatalogSource {name} of an earlier run"))?;
        }
    }
    let catalog_name = olm_testkit::random_name("conformance");
    let source: CatalogSource = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "CatalogSource",
        "metadata": {"name": catalog_name},
        "spec": {"sourceType": "grpc", "address": address.to_string(), "displayName": "Conformance"},
    }))?;
    catalogs.create(&PostParams::default(), &source).await?;
    let catalog_ref = (catalog_name.clone(), global.clone());
    eprintln!("{} packages planned and the catalog served ({:?} in)", plans.len(), started.elapsed());

    // Packages that others depend on go first, alone: installed beside their dependents at the
    // same time, an all-namespaces operator would be provided twice to every namespace
    // (InterOperatorGroupOwnerConflict, as upstream says too).
    let needed = needed_by_others(&catalog, &plans);
    let (first, then): (Vec<&Plan>, Vec<&Plan>) = plans.iter().partition(|p| needed.contains(&p.package));
    let begin = Instant::now();
    let mut results = Vec::new();
    for (i, phase) in [first, then].into_iter().enumerate() {
        if i > 0 {
            // The packages others need walked to their heads, leaving their newest CRDs (and
            // stored versions) behind; a dependent installs its own, maybe older, copy of them,
            // as on a cluster that never ran them (an older CRD must not drop a stored version).
            remove_catalog_crds(&cluster, &catalog).await?;
            this.add_used_apis(&cluster, &catalog).await?;
        }
        let done: Vec<(&Plan, Duration, anyhow::Result<Outcome>)> = futures::stream::iter(phase)
            .map(|plan| {
                let (cluster, catalog_ref, catalog) = (&cluster, &catalog_ref, &catalog);
                async move {
                    let start = Instant::now();
                    let outcome = take(cluster, plan, catalog_ref, catalog).await;
                    if let Err(err) = &outcome {
                        eprintln!("{} failed after {:.0} s: {err:#}", plan.package, start.elapsed().as_secs_f64());
                    }
                    (plan, start.elapsed(), outcome)
                }
            })
            .buffer_unordered(CONCURRENT)
            .collect()
            .await;
        results.extend(done);
    }
    let took = begin.elapsed();
    results.sort_by(|a, b| a.0.package.cmp(&b.0.package));

    let mut table = String::from("| package | graph | channel | group | start → head | outcome | upgrades walked | seconds |\n|---|---|---|---|---|---|---|---|\n");
    let mut notes = String::new();
    let (mut walked_count, mut unresolvable_count) = (0, 0);
    for (plan, seconds, outcome) in &results {
        let span = format!("{} → {}", version_of(&plan.start), version_of(&plan.head));
        let (outcome, walked) = match outcome {
            Ok(Outcome::Walked { walked, edges, .. }) => {
                walked_count += 1;
                let path: Vec<&str> = walked.iter().map(|c| version_of(c)).collect();
                let kinds: Vec<String> = edges.iter().map(|(kind, n)| format!("{n} {kind}")).collect();
                let kinds = if kinds.is_empty() { String::new() } else { format!(" ({})", kinds.join(", ")) };
                ("Succeeded at head".to_owned(), format!("{}{kinds}: {}", walked.len() - 1, path.join(" → ")))
            }
            Ok(Outcome::Unresolvable { message, .. }) => {
                unresolvable_count += 1;
                (format!("not resolvable: needs {}", plan.missing.join(", ")), format!("- ({})", message.replace('|', "/").replace('\n', " ")))
            }
            Ok(Outcome::Failed { error, seen }) => {
                failures.push(format!("{}: {error}\n  the user sees: {seen}", plan.package));
                (format!("FAILED: {}", error.replace('|', "/").replace('\n', " ")), format!("- (the user sees: {seen})"))
            }
            Err(err) => {
                failures.push(format!("{}: {err:#}", plan.package));
                ("FAILED (harness)".to_owned(), "-".to_owned())
            }
        };
        let graph = update_graph(&packages, &plan.package);
        let _ = writeln!(table, "| {} | {graph} | {} | {} | {span} | {outcome} | {walked} | {:.1} |", plan.package, plan.channel, plan.mode, seconds.as_secs_f64());
        if !plan.passed_over.is_empty() {
            let shown = plan.passed_over.iter().take(3).cloned().collect::<Vec<_>>().join("; ");
            let more = plan.passed_over.len().saturating_sub(3);
            let more = if more > 0 { format!("; and {more} more") } else { String::new() };
            let _ = writeln!(notes, "- {}: started above {} older bundle(s) this cluster cannot install or OLM cannot walk from: {shown}{more}", plan.package, plan.passed_over.len());
        }
    }
    for (package, why) in &not_installable {
        let graph = update_graph(&packages, package);
        let _ = writeln!(table, "| {package} | {graph} | - | - | - | not installable on this cluster | - ({}) | - |", why.replace('|', "/").replace('\n', " "));
    }
    if !added.is_empty() {
        let _ = writeln!(notes, "- created before the run, as a cluster with those operators has them: {}", added.join(", "));
    }
    for (package, why) in &left_out {
        let graph = update_graph(&packages, package);
        let _ = writeln!(table, "| {package} | {graph} | - | - | - | not served | - ({}) | - |", why.replace('|', "/").replace('\n', " "));
    }
    // No namespace of the run may be left Terminating (a finalizer nobody removes).
    let stuck = terminating(&cluster).await?;
    for name in &stuck {
        failures.push(format!("namespace {name} still Terminating after the run"));
        let _ = writeln!(notes, "- namespace {name} still Terminating after the run");
    }
    let summary = format!(
        "{} packages: {walked_count} installed and walked to their head, {unresolvable_count} not resolvable as expected, {} failed, {} not installable on this cluster or not served; {} namespaces left Terminating; {:.0} s for all (at most {CONCURRENT} at once), {:.0} s in all with render and load.\n",
        results.len() + not_installable.len() + left_out.len(),
        results.len() - walked_count - unresolvable_count,
        not_installable.len() + left_out.len(),
        stuck.len(),
        took.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    let under_test = if upstream.is_some() { format!("upstream OLM {}", olm_e2e::upstream::VERSION) } else { "olm-rs".to_owned() };
    if upstream.as_mut().is_some_and(|u| !u.running()) {
        failures.push("upstream's operators exited during the run (their logs say why)".to_owned());
    }
    let report = format!("OLM under test: {under_test}\n\n{table}\n{notes}\n{summary}");
    eprintln!("{report}");
    if let Some(path) = std::env::var_os("OLM_CONFORMANCE_TABLE") {
        std::fs::write(&path, &report).with_context(|| format!("write {}", PathBuf::from(&path).display()))?;
    }

    let _ = catalogs.delete(&catalog_name, &Default::default()).await;
    server.shutdown();
    // The run's CRDs go too: this cluster is shared, and a suite run after this one must find
    // no API it did not create (a CRD of some package's group is not the test's own).
    if let Err(err) = remove_catalog_crds(&cluster, &catalog).await {
        failures.push(format!("remove the CRDs of the run: {err:#}"));
    }
    if std::env::var_os("OLM_CONFORMANCE_PACKAGES").is_none() {
        failures.extend(not_installable.iter().map(|(package, why)| format!("{package}: not installable on this cluster: {why}")));
    }
    if !failures.is_empty() {
        bail!("{} failures:\n{}", failures.len(), failures.join("\n\n"));
    }
    Ok(())
}

/// The run's namespaces (`conf-*`) still Terminating five minutes after the last was deleted.
async fn terminating(cluster: &TestCluster) -> anyhow::Result<Vec<String>> {
    let namespaces: Api<Namespace> = Api::all(cluster.client());
    // The namespace controller empties dozens of namespaces one after another; on a loaded
    // machine that took over a minute (all finished). Stuck is what a finalizer holds for good.
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let left: Vec<String> = namespaces
            .list(&Default::default())
            .await?
            .items
            .into_iter()
            .filter(|n| n.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Terminating"))
            .filter_map(|n| n.metadata.name)
            .filter(|n| n.starts_with("conf-"))
            .collect();
        if left.is_empty() || Instant::now() > deadline {
            return Ok(left);
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// A channel switch on real bundles: microcks installed from its `alpha` channel (head 0.3.0),
/// then `spec.channel` set to `stable`, which continues from 0.3.0 by `replaces` to its head.
/// The Subscription must follow the new channel from the installed CSV, each CSV taking over
/// from the one before and none ever Failed.
#[tokio::test]
async fn a_channel_switch_follows_the_new_channel_from_the_installed_csv() -> anyhow::Result<()> {
    let _alone = ONE_AT_A_TIME.lock().await;
    let (cluster, _) = controllers::setup().await?;
    let scratch = tempfile::tempdir()?;
    let packages = packages_dir(scratch.path())?;
    let rendered = scratch.path().join("catalog");
    render(&packages.join("microcks"), &rendered)?;
    let (catalog, _) = olm_catalog::load::load_fbc(&rendered)?;
    let head = |channel: &str| -> anyhow::Result<String> {
        Ok(catalog.channel("microcks", channel).and_then(Channel::head).context("microcks channel head")?.name.clone())
    };
    let (alpha_head, stable_head) = (head("alpha")?, head("stable")?);
    remove_catalog_crds(&cluster, &catalog).await?;
    let (server, address) = serve(&rendered).await?;

    let ns = cluster.namespace("channel-switch").await?;
    let walk = journey::WalkRecorder::start(&ns);
    controllers::create_own_namespace_group(&ns, "group").await?;
    create_from_yaml(
        &ns,
        &format!("apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: real\nspec:\n  sourceType: grpc\n  address: {address}\n"),
    )
    .await?;
    create_from_yaml(
        &ns,
        &format!(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata:\n  name: operator\nspec:\n  source: real\n  sourceNamespace: {}\n  name: microcks\n  channel: alpha\n  installPlanApproval: Automatic\n",
            ns.name()
        ),
    )
    .await?;
    journey::csv_succeeded(&ns, &alpha_head, TIMEOUT).await?;
    journey::at_latest(&ns, "operator", &alpha_head, TIMEOUT).await?;

    let subs: Api<Subscription> = ns.api();
    let switch = json!({"spec": {"channel": "stable"}});
    subs.patch("operator", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&switch)).await?;
    journey::csv_succeeded(&ns, &stable_head, TIMEOUT).await?;
    journey::at_latest(&ns, "operator", &stable_head, TIMEOUT).await?;
    journey::csv_replaced(&ns, &alpha_head, TIMEOUT).await?;

    // The package's own CSVs: dependencies resolved with it are installed beside it.
    let walked: Vec<String> = walk.walked().into_iter().filter(|c| catalog.bundle("microcks", c).is_some()).collect();
    if let Some((csv, why)) = walk.failed().into_iter().next() {
        bail!("{csv} was Failed on the way: {why}");
    }
    // Every step of the walk after the switch is an entry of stable that upgrades the one before.
    let stable = catalog.channel("microcks", "stable").context("stable")?;
    assert_eq!(walked.first(), Some(&alpha_head), "{walked:?}");
    assert_eq!(walked.last(), Some(&stable_head), "{walked:?}");
    for pair in walked.windows(2) {
        let from = catalog.bundle("microcks", &pair[0]).context("a walked bundle")?;
        let next: Vec<&str> = stable.successors(&from.name, Some(&from.version)).iter().map(|e| e.name.as_str()).collect();
        assert!(next.contains(&pair[1].as_str()), "{} → {}: not an upgrade edge of stable ({next:?})", pair[0], pair[1]);
    }
    eprintln!("microcks alpha → stable: {}", walked.iter().map(|c| version_of(c)).collect::<Vec<_>>().join(" → "));
    ns.cleanup().await?;
    server.shutdown();
    Ok(())
}
