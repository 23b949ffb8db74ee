//! Resolution benchmark: prints a table (run with `cargo run --release -p olm-resolver --example resolve_bench`).
//!
//! * the real community FBC (745 bundles; path from `OLM_BENCH_FBC`, default
//!   /work/shared/real-catalogs/community-operators-prod-fbc-v4.21/catalog; skipped when absent);
//! * a synthetic catalog of 10,000 bundles with API and package dependencies.
//!
//! For each, 1, 10 and 100 Subscriptions in one namespace; the catalogs are loaded and
//! indexed once, the time is the resolution only.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use olm_resolver::{
    CatalogKey, CatalogSnapshot, Catalogs, Dependency, Entry, Gvk, Request, Requirement, Subscription, Version,
    VersionRange, adapter,
};

fn measure(catalogs: &Catalogs, req: &Request) -> (Duration, Duration, usize, usize) {
    // Warm up, then take enough samples for a stable median.
    let first = olm_resolver::resolve(catalogs, req);
    let mut samples = Vec::new();
    let start = Instant::now();
    while samples.len() < 15 || (start.elapsed() < Duration::from_secs(2) && samples.len() < 2000) {
        let t = Instant::now();
        let r = olm_resolver::resolve(catalogs, req);
        samples.push(t.elapsed());
        std::hint::black_box(r);
    }
    samples.sort();
    let median = samples[samples.len() / 2];
    let p90 = samples[samples.len() * 9 / 10];
    (median, p90, first.bundles.len(), first.errors.len())
}

/// `resolve_bench [FILTER]`: only rows whose name contains FILTER (for profiling).
fn wanted(name: &str) -> bool {
    std::env::args().nth(1).is_none_or(|f| name.contains(&f))
}

fn row(name: &str, subs: usize, m: (Duration, Duration, usize, usize)) {
    let (median, p90, bundles, errors) = m;
    println!(
        "| {name:<28} | {subs:>4} | {:>10.3} | {:>10.3} | {:>10.3} | {bundles:>7} | {errors:>6} |",
        median.as_secs_f64() * 1e3,
        p90.as_secs_f64() * 1e3,
        median.as_secs_f64() * 1e6 / subs as f64,
    );
}

fn header() {
    println!("| catalog                      | subs | median ms  | p90 ms     | µs per sub | bundles | errors |");
    println!("|------------------------------|------|------------|------------|------------|---------|--------|");
}

fn real_fbc() {
    let path = std::env::var_os("OLM_BENCH_FBC").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from("/work/shared/real-catalogs/community-operators-prod-fbc-v4.21/catalog")
    });
    if !path.exists() {
        println!("real FBC not found at {} — skipped (set OLM_BENCH_FBC)", path.display());
        return;
    }
    let t = Instant::now();
    let (snapshot, problems) = match adapter::load(&path, CatalogKey::new("community", "olm"), 0) {
        Ok(x) => x,
        Err(e) => {
            println!("real FBC at {} could not be loaded: {e}", path.display());
            return;
        }
    };
    let load = t.elapsed();
    let t = Instant::now();
    let mut packages: Vec<String> = snapshot.entries.iter().map(|e| e.package.clone()).collect();
    packages.sort();
    packages.dedup();
    let entries = snapshot.entries.len();
    let catalogs = Catalogs::new([snapshot]);
    let index = t.elapsed();
    println!(
        "real FBC {}: {} packages, {entries} (bundle, channel) entries, {} load problems; load {:.0} ms, index {:.2} ms",
        path.display(),
        packages.len(),
        problems.len(),
        load.as_secs_f64() * 1e3,
        index.as_secs_f64() * 1e3
    );
    header();
    for n in [1usize, 10, 100] {
        let mut req = Request::new("operators");
        // More Subscriptions than packages: later ones repeat a package under another name
        // (they share the bundle, as upstream does).
        for i in 0..n {
            let pkg = &packages[i % packages.len()];
            req.subscriptions.push(Subscription::new(pkg.clone(), CatalogKey::new("community", "olm")).named(format!("sub-{i}")));
        }
        row("real FBC (community)", n, measure(&catalogs, &req));
    }
    // One Subscription per namespace, one resolution each: the cost of one namespace.
    let mut total = Duration::ZERO;
    for pkg in &packages {
        let mut req = Request::new("operators");
        req.subscriptions.push(Subscription::new(pkg.clone(), CatalogKey::new("community", "olm")));
        total += measure(&catalogs, &req).0;
    }
    println!(
        "one Subscription per package, each resolved alone: mean of medians {:.3} ms over {} packages",
        total.as_secs_f64() * 1e3 / packages.len() as f64,
        packages.len()
    );
}

/// 500 packages × 20 versions = 10,000 bundles in one channel each. Package p provides
/// API Kp; it requires the APIs of up to two lower-numbered packages and, every fifth
/// package, a version range of package p-1. Every version has a skipRange over its
/// predecessors, like real catalogs.
fn synthetic() -> Catalogs {
    const PACKAGES: usize = 500;
    const VERSIONS: usize = 20;
    let mut entries = Vec::with_capacity(PACKAGES * VERSIONS);
    for p in 0..PACKAGES {
        let pkg = format!("pkg{p:03}");
        for v in 0..VERSIONS {
            let version = Version::new(1, v as u64, 0);
            let mut deps = Vec::new();
            for back in [1usize, 7] {
                if p >= back && (p + v) % 3 != 0 {
                    let q = p - back;
                    deps.push(Dependency::new(Requirement::Gvk(Gvk::new("bench.io", "v1", format!("K{q:03}")))));
                }
            }
            if p >= 1 && p % 5 == 0 {
                let range = VersionRange::parse(">=1.5.0 <1.19.0").expect("range");
                deps.push(Dependency::new(Requirement::Package { name: format!("pkg{:03}", p - 1), range }));
            }
            entries.push(Entry {
                name: format!("{pkg}.v1.{v}.0"),
                package: pkg.clone(),
                channel: "stable".into(),
                default_channel: true,
                replaces: if v > 0 { Some(format!("{pkg}.v1.{}.0", v - 1)) } else { None },
                skip_range: if v > 0 { Some(VersionRange::parse(&format!("<1.{v}.0")).expect("range")) } else { None },
                version: Some(version),
                provided_gvks: vec![Gvk::new("bench.io", "v1", format!("K{p:03}"))],
                dependencies: deps,
                ..Entry::default()
            });
        }
    }
    Catalogs::new([CatalogSnapshot::new(CatalogKey::new("synthetic", "olm"), 0, entries)])
}

fn main() {
    if wanted("real FBC") {
        real_fbc();
    }
    println!();
    let t = Instant::now();
    let catalogs = synthetic();
    println!("synthetic catalog: {} bundles, built and indexed in {:.1} ms", catalogs.entry_count(), t.elapsed().as_secs_f64() * 1e3);
    header();
    for n in [1usize, 10, 100] {
        let mut req = Request::new("operators");
        // Spread the Subscriptions over the packages, from the top (deepest closures).
        for i in 0..n {
            let p = 499 - i * (500 / n.max(1)).min(4);
            req.subscriptions.push(Subscription::new(format!("pkg{p:03}"), CatalogKey::new("synthetic", "olm")));
        }
        if wanted("synthetic 10k, deep deps") {
            row("synthetic 10k, deep deps", n, measure(&catalogs, &req));
        }
    }
    for n in [1usize, 10, 100] {
        let mut req = Request::new("operators");
        for i in 0..n {
            let p = i * 5 % 500;
            req.subscriptions.push(Subscription::new(format!("pkg{p:03}"), CatalogKey::new("synthetic", "olm")));
        }
        if wanted("synthetic 10k, shallow") {
            row("synthetic 10k, shallow", n, measure(&catalogs, &req));
        }
    }
}
