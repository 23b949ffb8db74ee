//! Real community operators from images: bundles of twelve packages of the community catalog
//! (`tests/testdata/community`, copied verbatim from community-operators-prod) are pushed to a
//! real registry with `olm bundle push`, a file-based catalog that names them by digest and
//! inlines nothing is pushed with `olm catalog push`, and one CatalogSource with `spec.image`
//! in the global catalog namespace serves them. Each package is then installed in a namespace
//! of its own, from its oldest copied bundle, and upgraded along its real channel (the CSVs'
//! `replaces`, `skips` and `olm.skipRange`, or a replaces chain in semver order where the CSVs
//! say nothing, as the community catalog builds semver-mode packages) to the newest copied one.
//! The OperatorGroup follows the CSVs' install modes: OwnNamespace where every copied bundle
//! supports it, else AllNamespaces (each such package provides APIs of its own, so the
//! all-namespaces groups never conflict). All packages run at once; a table of the path each
//! Subscription walked (its InstallPlans' CSVs) and the time it took is printed at the end.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use olm_api::v1alpha1::catalog_source::CatalogSource;
use olm_e2e::controllers::{self, create_from_yaml};
use olm_e2e::{journey, olm};
use olm_testkit::{RegistryOptions, TestCluster, TestNamespace};
use serde_json::{Value, json};

/// How long one step of one package may take — the first is its whole walk to the head —
/// while every package runs at once on a small machine. A guard against a stall, not a
/// target: 50–95 s here, idle or beside three busy loops, but a cold CI machine building the
/// OLM image beside it once needed more than 240 s.
const TIMEOUT: Duration = Duration::from_secs(480);
/// How many threads push bundles.
const PUSH_THREADS: usize = 4;

/// A package of `tests/testdata/community`: its default channel and the copied bundles of that
/// channel, oldest first (the directory names).
struct Package {
    name: &'static str,
    channel: &'static str,
    versions: &'static [&'static str],
}

const PACKAGES: &[Package] = &[
    Package { name: "ack-ecr-controller", channel: "alpha", versions: &["0.0.11", "0.0.12", "0.0.13"] },
    Package { name: "aws-efs-operator", channel: "stable", versions: &["0.0.6", "0.0.7", "0.0.8"] },
    Package { name: "cert-utils-operator", channel: "alpha", versions: &["0.0.1", "0.0.3", "0.1.0"] },
    Package { name: "deployment-validation-operator", channel: "alpha", versions: &["0.2.2", "0.3.0", "0.4.0"] },
    Package { name: "dns-operator", channel: "stable", versions: &["0.1.0", "0.2.0", "0.6.0"] },
    Package { name: "gitlab-runner-operator", channel: "stable", versions: &["1.11.0", "1.12.0", "1.13.0"] },
    Package { name: "koku-metrics-operator", channel: "beta", versions: &["0.9.0", "0.9.1", "0.9.2"] },
    Package { name: "limitador-operator", channel: "stable", versions: &["0.6.0", "0.7.0", "0.8.0"] },
    Package { name: "microcks", channel: "stable", versions: &["1.4.1", "1.5.0", "1.5.1"] },
    Package { name: "ndmspc-operator", channel: "alpha", versions: &["0.5.0", "0.6.0", "0.7.2"] },
    Package { name: "silicom-sts-operator", channel: "alpha", versions: &["0.0.2", "0.0.3", "0.0.4"] },
    Package { name: "yaks", channel: "alpha", versions: &["0.4.0", "0.5.0", "0.6.0"] },
];

/// What the test needs from one bundle's CSV.
struct Bundle {
    dir: PathBuf,
    csv: String,
    replaces: Option<String>,
    skips: Vec<String>,
    skip_range: Option<String>,
    install_modes: BTreeSet<String>,
    /// The names of the CRDs the bundle defines.
    crds: BTreeSet<String>,
}

fn read_bundle(package: &str, version: &str) -> anyhow::Result<Bundle> {
    let dir = olm_e2e::repo().join("tests/testdata/community").join(package).join(version);
    let (mut csvs, mut crds) = (Vec::new(), BTreeSet::new());
    for file in std::fs::read_dir(dir.join("manifests")).with_context(|| format!("{}", dir.display()))? {
        let path = file?.path();
        let text = std::fs::read_to_string(&path)?;
        if !text.contains("ClusterServiceVersion") && !text.contains("CustomResourceDefinition") {
            continue;
        }
        let docs: Vec<Value> = olm_api::yaml::all_from_path(&path).with_context(|| format!("{}", path.display()))?;
        for doc in docs {
            if doc["kind"] == "CustomResourceDefinition" {
                crds.extend(doc["metadata"]["name"].as_str().map(str::to_owned));
            } else if doc["kind"] == "ClusterServiceVersion" {
                csvs.push(doc);
            }
        }
    }
    let [csv] = csvs.as_slice() else { bail!("{}: {} CSVs", dir.display(), csvs.len()) };
    let text = |v: &Value| v.as_str().filter(|s| !s.is_empty()).map(str::to_owned);
    Ok(Bundle {
        csv: text(&csv["metadata"]["name"]).context("CSV name")?,
        replaces: text(&csv["spec"]["replaces"]),
        skips: csv["spec"]["skips"].as_array().into_iter().flatten().filter_map(text).collect(),
        skip_range: text(&csv["metadata"]["annotations"]["olm.skipRange"]),
        install_modes: csv["spec"]["installModes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["supported"] == json!(true))
            .filter_map(|m| text(&m["type"]))
            .collect(),
        crds,
        dir,
    })
}

/// The package's channel: each bundle replaces what its CSV says it replaces, else the bundle
/// before it (a replaces chain in version order); skips and skipRange as the CSV says.
fn channel_entries(bundles: &[Bundle]) -> Vec<Value> {
    let mut entries = Vec::new();
    for (i, bundle) in bundles.iter().enumerate() {
        let mut entry = json!({"name": bundle.csv});
        let replaces = bundle.replaces.clone().or_else(|| i.checked_sub(1).map(|p| bundles[p].csv.clone()));
        if let Some(replaces) = replaces {
            entry["replaces"] = json!(replaces);
        }
        if !bundle.skips.is_empty() {
            entry["skips"] = json!(bundle.skips);
        }
        if let Some(range) = &bundle.skip_range {
            entry["skipRange"] = json!(range);
        }
        entries.push(entry);
    }
    entries
}

/// Push the bundles of `package`; its catalog documents (package, bundles, channel), each bundle
/// rendered with its image by digest and only an `olm.csv.metadata`, as published catalogs are.
fn push_package(registry: &str, package: &Package, bundles: &[Bundle]) -> anyhow::Result<Vec<Value>> {
    let mut docs = vec![json!({"schema": "olm.package", "name": package.name, "defaultChannel": package.channel})];
    for (bundle, version) in bundles.iter().zip(package.versions) {
        let path = bundle.dir.to_str().context("path")?;
        let target = format!("{registry}/{}-bundle:v{version}", package.name);
        let image = olm(&["bundle", "push", path, &target])?.trim().to_owned();
        assert!(image.starts_with(&format!("{registry}/{}-bundle@sha256:", package.name)), "{image}");
        let rendered = olm(&[
            "catalog",
            "render",
            path,
            "--image",
            &image,
            "--migrate-level",
            "bundle-object-to-csv-metadata",
            "-o",
            "json",
        ])?;
        let doc: Value = serde_json::from_str(&rendered).context("rendered bundle")?;
        assert_eq!(doc["name"], json!(bundle.csv), "{rendered}");
        assert_eq!(doc["image"], json!(image), "{rendered}");
        docs.push(doc);
    }
    docs.push(json!({
        "schema": "olm.channel",
        "package": package.name,
        "name": package.channel,
        "entries": channel_entries(bundles),
    }));
    Ok(docs)
}

/// Push every bundle of every package (a few packages at a time) and write the digest-only
/// catalog to `dir`, one directory per package.
fn push_and_write_catalog(registry: &str, dir: &std::path::Path, bundles: &BTreeMap<&str, Vec<Bundle>>) -> anyhow::Result<()> {
    let chunks: Vec<&[Package]> = PACKAGES.chunks(PACKAGES.len().div_ceil(PUSH_THREADS)).collect();
    type Pushed<'a> = anyhow::Result<Vec<(&'a str, Vec<Value>)>>;
    let pushed: Vec<Pushed<'_>> = std::thread::scope(|scope| {
        let threads: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                scope.spawn(move || {
                    chunk.iter().map(|p| Ok((p.name, push_package(registry, p, &bundles[p.name])?))).collect()
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap_or_else(|_| Err(anyhow::anyhow!("push thread panicked")))).collect()
    });
    for chunk in pushed {
        for (name, docs) in chunk? {
            let text: Vec<String> = docs.iter().map(Value::to_string).collect();
            let text = text.join("\n");
            assert!(!text.contains("olm.bundle.object"), "the catalog inlines no manifest");
            std::fs::create_dir_all(dir.join(name))?;
            std::fs::write(dir.join(name).join("catalog.json"), text)?;
        }
    }
    Ok(())
}

/// The CatalogSource in the global catalog namespace, deleted when dropped (also on failure).
struct GlobalCatalog {
    cluster: TestCluster,
    namespace: String,
    name: String,
}

impl Drop for GlobalCatalog {
    fn drop(&mut self) {
        let _ = std::process::Command::new(self.cluster.kubectl_path())
            .arg(format!("--kubeconfig={}", self.cluster.kubeconfig().display()))
            .args(["--request-timeout=15s", "delete", "catalogsource", &self.name, "-n", &self.namespace])
            .args(["--wait=false", "--ignore-not-found"])
            .output();
    }
}

/// What one package went through, and its namespace (removed once every package is done).
struct Outcome {
    group: &'static str,
    walked: Vec<String>,
    namespace: TestNamespace,
}

/// Install `package` from its oldest bundle in a namespace of its own and wait until the
/// Subscription has walked the channel to its head.
async fn install_and_upgrade(
    cluster: &TestCluster,
    package: &Package,
    bundles: &[Bundle],
    catalog: &GlobalCatalog,
) -> anyhow::Result<Outcome> {
    let supports = |mode: &str| bundles.iter().all(|b| b.install_modes.contains(mode));
    let (group, target) = if supports("OwnNamespace") {
        ("OwnNamespace", true)
    } else if supports("AllNamespaces") {
        ("AllNamespaces", false)
    } else {
        bail!("{}: no install mode every copied bundle supports", package.name)
    };
    let ns = cluster.namespace(&format!("community-{}", package.name)).await?;
    let spec = if target { format!("  targetNamespaces: [{}]\n", ns.name()) } else { "  {}\n".to_owned() };
    create_from_yaml(
        &ns,
        &format!("apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata:\n  name: {}\nspec:\n{spec}", package.name),
    )
    .await?;
    let walk = journey::WalkRecorder::start(&ns);
    let oldest = &bundles[0].csv;
    let head = &bundles[bundles.len() - 1].csv;
    create_from_yaml(
        &ns,
        &format!(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata:\n  name: operator\nspec:\n  source: {}\n  sourceNamespace: {}\n  name: {}\n  channel: {}\n  startingCSV: {oldest}\n  installPlanApproval: Automatic\n",
            catalog.name, catalog.namespace, package.name, package.channel
        ),
    )
    .await?;
    journey::csv_succeeded(&ns, head, TIMEOUT).await?;
    for older in &bundles[..bundles.len() - 1] {
        journey::csv_replaced(&ns, &older.csv, TIMEOUT).await?;
    }
    journey::at_latest(&ns, "operator", head, TIMEOUT).await?;

    let walked = walk.walked();
    if let Some((csv, why)) = walk.failed().into_iter().next() {
        bail!("{csv} was Failed on the way: {why}");
    }
    if walked.first() != Some(oldest) || walked.last() != Some(head) {
        bail!("the InstallPlans did not go from {oldest} to {head}: {walked:?}");
    }
    Ok(Outcome { group, walked, namespace: ns })
}

#[tokio::test]
async fn community_operators_install_and_upgrade_from_bundle_images() -> anyhow::Result<()> {
    let (cluster, _) = controllers::setup().await?;
    let registry = olm_testkit::registry(RegistryOptions::new()).await?;
    let addr = registry.addr().to_owned();
    let mut bundles = BTreeMap::new();
    for package in PACKAGES {
        let read: anyhow::Result<Vec<Bundle>> = package.versions.iter().map(|v| read_bundle(package.name, v)).collect();
        bundles.insert(package.name, read?);
    }
    let crds: BTreeSet<String> = bundles.values().flatten().flat_map(|b| b.crds.iter().cloned()).collect();
    journey::remove_crds(&cluster, &crds, TIMEOUT).await?;
    let started = Instant::now();
    let work = tempfile::tempdir()?;
    push_and_write_catalog(&addr, work.path(), &bundles)?;
    let catalog_image = format!("{addr}/community-catalog:latest");
    olm(&["catalog", "push", work.path().to_str().context("path")?, &catalog_image])?;
    eprintln!("{} bundles pushed and the catalog image built in {:?}", bundles.values().map(Vec::len).sum::<usize>(), started.elapsed());

    // One CatalogSource in the global catalog namespace, which every namespace subscribes from.
    let global = olm_controllers::catalog_operator::global_namespace();
    let namespaces: Api<Namespace> = Api::all(cluster.client());
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": global}}))?;
    match namespaces.create(&PostParams::default(), &namespace).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(err) => return Err(err).context("create the global catalog namespace"),
    }
    let catalog = GlobalCatalog {
        cluster: cluster.clone(),
        namespace: global.clone(),
        name: olm_testkit::random_name("community-images"),
    };
    let catalogs: Api<CatalogSource> = Api::namespaced(cluster.client(), &global);
    let source: CatalogSource = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "CatalogSource",
        "metadata": {"name": catalog.name},
        "spec": {"sourceType": "grpc", "image": catalog_image, "displayName": "Community operators (images)"},
    }))?;
    catalogs.create(&PostParams::default(), &source).await?;
    olm_testkit::wait_for("the community CatalogSource READY", TIMEOUT, || {
        let catalogs = catalogs.clone();
        let name = catalog.name.clone();
        async move {
            let status = catalogs.get(&name).await.map_err(|e| e.to_string())?.status.unwrap_or_default();
            match status.connection_state.map(|c| c.last_observed_state) {
                Some(state) if state == "READY" => Ok(Some(())),
                state => Err(format!("{state:?}: {:?}", status.message)),
            }
        }
    })
    .await?;
    eprintln!("catalog READY after {:?}", started.elapsed());

    let begin = Instant::now();
    let mut results: Vec<(&Package, Duration, anyhow::Result<Outcome>)> = futures::stream::iter(PACKAGES)
        .map(|package| {
            let (cluster, bundles, catalog) = (&cluster, &bundles, &catalog);
            async move {
                let start = Instant::now();
                let outcome = install_and_upgrade(cluster, package, &bundles[package.name], catalog).await;
                (package, start.elapsed(), outcome)
            }
        })
        .buffer_unordered(PACKAGES.len())
        .collect()
        .await;

    results.sort_by_key(|(package, _, _)| package.name);
    let mut table = format!("{:<32} {:<14} {:<44} {:>7}\n", "package", "group", "bundles walked", "seconds");
    let mut failures = Vec::new();
    for (package, took, outcome) in &results {
        let (group, walked) = match outcome {
            Ok(o) => {
                let versions: Vec<&str> = o.walked.iter().map(|c| c.rsplit_once(".v").map_or(c.as_str(), |(_, v)| v)).collect();
                (o.group, versions.join(" → "))
            }
            Err(err) => {
                failures.push(format!("{}: {err:#}", package.name));
                ("-", "FAILED".to_owned())
            }
        };
        table.push_str(&format!("{:<32} {:<14} {:<44} {:>7.1}\n", package.name, group, walked, took.as_secs_f64()));
    }
    eprintln!("{table}all packages done in {:?}", begin.elapsed());

    // The namespaces go once every package is done (deleting one while others install only
    // slows those down); each must go, its CSVs' cleanup finalizers removed by OLM.
    let cleanups = results.into_iter().filter_map(|(package, _, outcome)| {
        outcome.ok().map(|o| async move { o.namespace.cleanup().await.with_context(|| format!("remove the namespace of {}", package.name)) })
    });
    let removed = Instant::now();
    for cleanup in futures::future::join_all(cleanups).await {
        if let Err(err) = cleanup {
            failures.push(format!("{err:#}"));
        }
    }
    eprintln!("namespaces removed in {:?}", removed.elapsed());
    catalogs.delete(&catalog.name, &DeleteParams::default()).await?;
    if !failures.is_empty() {
        bail!("{} failures over {} packages:\n{}", failures.len(), PACKAGES.len(), failures.join("\n\n"));
    }
    Ok(())
}
