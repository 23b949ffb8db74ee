//! Resolution: our olm-resolver in process vs upstream's resolver driven by
//! bench/go/resolver-driver, on the same catalog and the same Subscription sets.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use olm_resolver::{CatalogKey, Catalogs, Request, Subscription, adapter};
use serde::{Deserialize, Serialize};
use serde_json::json;

pub const NAMESPACE: &str = "bench";
pub const CATALOG_NAME: &str = "bench";
pub const CATALOG_NAMESPACE: &str = "olm";

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct BundleOut {
    pub name: String,
    pub package: String,
    pub channel: String,
    pub catalog: String,
    pub replaces: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetResult {
    pub label: String,
    pub subscriptions: usize,
    /// First resolution including getting the catalog (ours: read the parsed form from disk,
    /// build the model and the resolver's snapshot; upstream: ListBundles + GetPackage snapshot
    /// over gRPC from opm serve, which read its cache).
    pub first_ms: f64,
    pub median_ms: f64,
    pub p90_ms: f64,
    pub samples: usize,
    #[serde(default)]
    pub bundles: Vec<BundleOut>,
    /// Upstream only: per chosen bundle, every channel it was attributed to over all the set's
    /// resolutions (upstream gathers a channel-less Subscription's candidates from a Go map, so
    /// a bundle listed in several channels is attributed to one of them at random).
    #[serde(default)]
    pub channels_seen: std::collections::BTreeMap<String, Vec<String>>,
    #[serde(default)]
    pub error: Option<String>,
}

fn key() -> CatalogKey {
    CatalogKey::new(CATALOG_NAME, CATALOG_NAMESPACE)
}

fn load(dir: &Path) -> anyhow::Result<Catalogs> {
    let (snapshot, _warnings) =
        adapter::load(dir, key(), 0).with_context(|| format!("loading {} for the resolver", dir.display()))?;
    Ok(Catalogs::new([snapshot]))
}

fn request(packages: &[String]) -> Request {
    let mut r = Request::new(NAMESPACE);
    r.global_namespace = CATALOG_NAMESPACE.to_string();
    r.subscriptions = packages.iter().map(|p| Subscription::new(p.clone(), key())).collect();
    r
}

/// Packages, in name order, that resolve together with every package chosen before them
/// (by our resolver; upstream then gets exactly the same sets, and any disagreement shows
/// in the comparison). At most `max`.
pub fn choose_packages(dir: &Path, max: usize) -> anyhow::Result<Vec<String>> {
    let catalogs = load(dir)?;
    let mut names: Vec<String> = catalogs.iter().flat_map(|c| c.package_names().map(str::to_string)).collect();
    names.sort();
    names.dedup();
    let mut chosen: Vec<String> = Vec::new();
    for name in names {
        if chosen.len() >= max {
            break;
        }
        chosen.push(name);
        let r = olm_resolver::resolve(&catalogs, &request(&chosen));
        if !r.errors.is_empty() {
            chosen.pop();
        }
    }
    Ok(chosen)
}

/// Sizes 1, 10, 100 (capped at what resolves together).
pub fn sets(chosen: &[String]) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for n in [1usize, 10, 100] {
        let k = n.min(chosen.len());
        if k == 0 || out.iter().any(|(_, s)| s.len() == k) {
            continue;
        }
        let label = if k < n { format!("{k} (all that resolve together; {n} asked)") } else { k.to_string() };
        out.push((label, chosen[..k].to_vec()));
    }
    out
}

/// Ours: the first resolution reads the catalog's parsed form (`olm_catalog::parsed`, what
/// `olm catalog push` ships in a catalog image and the controllers read), written before the
/// clock starts as opm's cache is before `opm serve` answers; then builds the model and the
/// resolver's snapshot, and resolves.
pub fn ours(dir: &Path, sets: &[(String, Vec<String>)], min_time: Duration) -> anyhow::Result<Vec<SetResult>> {
    let (documents, problems) = olm_catalog::load::load_fbc_documents(dir).with_context(|| format!("loading {}", dir.display()))?;
    if problems.iter().any(|p| !p.warning) {
        bail!("{} has problems, so no parsed form is written for it: {}", dir.display(), problems[0]);
    }
    let parsed_dir = tempfile::tempdir().context("a directory for the parsed catalog")?;
    let parsed = parsed_dir.path().join("catalog.jsonl");
    std::fs::write(&parsed, olm_catalog::parsed::write(&documents, dir)?).context("writing the parsed catalog")?;
    drop(documents);
    let mut results = Vec::new();
    for (label, packages) in sets {
        let req = request(packages);
        let t = Instant::now();
        let (snapshot, _) = adapter::from_documents(olm_catalog::parsed::read_file(&parsed, dir)?, key(), 0);
        let catalogs = Catalogs::new([snapshot]);
        let first = olm_resolver::resolve(&catalogs, &req);
        let first_ms = t.elapsed().as_secs_f64() * 1e3;
        let mut samples = Vec::new();
        let start = Instant::now();
        while samples.len() < 5 || (start.elapsed() < min_time && samples.len() < 100_000) {
            let t = Instant::now();
            std::hint::black_box(olm_resolver::resolve(&catalogs, &req));
            samples.push(t.elapsed());
        }
        samples.sort();
        let mut bundles: Vec<BundleOut> = first
            .bundles
            .iter()
            .map(|b| BundleOut {
                name: b.name.clone(),
                package: b.package.clone(),
                channel: b.channel.clone(),
                catalog: b.catalog.name.clone(),
                replaces: b.replaces.clone().unwrap_or_default(),
            })
            .collect();
        bundles.sort();
        let error = (!first.errors.is_empty())
            .then(|| first.errors.iter().map(|e| format!("{}: {}", e.subscription, e.message)).collect::<Vec<_>>().join("; "));
        results.push(SetResult {
            label: label.clone(),
            subscriptions: packages.len(),
            first_ms,
            median_ms: samples[samples.len() / 2].as_secs_f64() * 1e3,
            p90_ms: samples[samples.len() * 9 / 10].as_secs_f64() * 1e3,
            samples: samples.len(),
            bundles,
            channels_seen: Default::default(),
            error,
        });
    }
    Ok(results)
}

#[derive(Deserialize)]
struct DriverOutput {
    results: Vec<SetResult>,
}

/// Run upstream's resolver against the operator-registry gRPC server at `addr`.
pub fn upstream(driver: &Path, addr: &str, sets: &[(String, Vec<String>)], work: &Path, min_time: Duration) -> anyhow::Result<Vec<SetResult>> {
    let input = json!({
        "namespace": NAMESPACE,
        "catalogName": CATALOG_NAME,
        "catalogNamespace": CATALOG_NAMESPACE,
        "sets": sets.iter().map(|(label, pkgs)| json!({
            "label": label,
            "subscriptions": pkgs.iter().map(|p| json!({"name": p, "package": p})).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    });
    let path = work.join("resolver-sets.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&input)?)?;
    let out = Command::new(driver)
        .args(["-address", addr, "-min-time", &format!("{}ms", min_time.as_millis())])
        .arg("-input")
        .arg(&path)
        .output()
        .context("running the resolver driver")?;
    if !out.status.success() {
        bail!("resolver driver failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr));
    }
    let parsed: DriverOutput = serde_json::from_slice(&out.stdout).context("parsing the resolver driver's JSON")?;
    let mut results = parsed.results;
    for r in &mut results {
        r.bundles.sort();
        if r.error.as_deref() == Some("") {
            r.error = None;
        }
    }
    Ok(results)
}

/// Whether upstream's answer contains `b`, taking a different channel as the same answer when
/// upstream itself attributed that bundle to `b`'s channel in some of its resolutions.
fn upstream_has(theirs: &SetResult, b: &BundleOut) -> bool {
    theirs.bundles.iter().any(|t| {
        t == b
            || (t.name == b.name
                && t.package == b.package
                && t.catalog == b.catalog
                && t.replaces == b.replaces
                && theirs.channels_seen.get(&t.name).is_some_and(|seen| seen.contains(&b.channel)))
    })
}

/// Differences between the two answers of one set, as readable lines.
pub fn differences(ours: &SetResult, theirs: &SetResult) -> Vec<String> {
    let mut lines = Vec::new();
    match (&ours.error, &theirs.error) {
        (None, Some(e)) => lines.push(format!("upstream failed, ours resolved: {}", truncate(e))),
        (Some(e), None) => lines.push(format!("ours failed, upstream resolved: {}", truncate(e))),
        _ => {}
    }
    for b in &ours.bundles {
        if !upstream_has(theirs, b) {
            lines.push(format!("only ours: {} ({}/{} replaces {:?})", b.name, b.package, b.channel, b.replaces));
        }
    }
    for t in &theirs.bundles {
        let matched = ours.bundles.iter().any(|b| b == t || (b.name == t.name && upstream_has(theirs, b)));
        if !matched {
            lines.push(format!("only upstream: {} ({}/{} replaces {:?})", t.name, t.package, t.channel, t.replaces));
        }
    }
    lines
}

/// Bundles both resolvers chose whose channel upstream attributes at random (it named several
/// channels over the set's resolutions), as readable lines: not differences in the answer.
pub fn channel_notes(ours: &SetResult, theirs: &SetResult) -> Vec<String> {
    ours.bundles
        .iter()
        .filter_map(|b| {
            let seen = theirs.channels_seen.get(&b.name)?;
            (seen.len() > 1 && seen.contains(&b.channel)).then(|| {
                format!("{}: ours {}, upstream one of {} (varies between its resolutions)", b.name, b.channel, seen.join(", "))
            })
        })
        .collect()
}

fn truncate(s: &str) -> String {
    if s.chars().count() > 300 { format!("{}…", s.chars().take(300).collect::<String>()) } else { s.to_string() }
}
