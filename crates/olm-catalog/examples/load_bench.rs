//! Load-and-index benchmark: `cargo run --release -p olm-catalog --example load_bench [DIR] [ROUNDS]`.
//!
//! Loads a catalog directory (default: the real community FBC v4.21 under
//! /work/shared/real-catalogs) ROUNDS times and prints the time of each phase,
//! the counts and the peak resident set size. Target: < 0.5 s in release.

use std::path::PathBuf;
use std::time::Instant;

use olm_catalog::load::load_fbc;

const DEFAULT_DIR: &str = "/work/shared/real-catalogs/community-operators-prod-fbc-v4.21/catalog";

fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().unwrap_or_else(|| DEFAULT_DIR.to_string()));
    let rounds: usize = args.next().and_then(|r| r.parse().ok()).unwrap_or(5);
    if !dir.exists() {
        eprintln!("{} does not exist; pass a catalog directory", dir.display());
        std::process::exit(2);
    }
    println!("catalog: {}", dir.display());
    println!("{:>5} {:>12}", "round", "load+index ms");
    let mut totals = Vec::new();
    let mut kept: Option<olm_catalog::Catalog> = None;
    for round in 1..=rounds {
        drop(kept.take());
        let t0 = Instant::now();
        let (catalog, problems) = match load_fbc(&dir) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("error: {e}");
                std::process::exit(1);
            }
        };
        let total = t0.elapsed().as_secs_f64() * 1000.0;
        if round == 1 && !problems.is_empty() {
            eprintln!(
                "note: {} problems (run olm catalog validate)",
                problems.len()
            );
        }
        totals.push(total);
        println!("{round:>5} {total:>12.1}");
        kept = Some(catalog);
    }
    totals.sort_by(|a, b| a.total_cmp(b));
    let catalog = kept.unwrap_or_default();
    let (p, c, b) = catalog.counts();
    let blob_bytes: usize = catalog.all_metas().iter().map(|m| m.blob.len()).sum();
    let digest = {
        use sha2::Digest as _;
        let mut hasher = sha2::Sha256::new();
        for meta in catalog.all_metas() {
            hasher.update(meta.blob.text().as_bytes());
        }
        hex::encode(hasher.finalize())
    };
    println!(
        "packages {p}, channels {c}, bundles {b}, blobs {} ({:.1} MiB canonical JSON, sha256 {digest})",
        catalog.all_metas().len(),
        blob_bytes as f64 / 1048576.0
    );
    println!(
        "load+index: min {:.1} ms, median {:.1} ms",
        totals[0],
        totals[totals.len() / 2]
    );
    println!(
        "RSS with one catalog held: {:.1} MiB; peak RSS: {:.1} MiB",
        rss_kib().unwrap_or(0) as f64 / 1024.0,
        peak_rss_kib().unwrap_or(0) as f64 / 1024.0
    );
    // The documents path (a catalog image's parsed form, gRPC): index only, no parsing.
    drop(catalog);
    let documents = olm_catalog::load::load_fbc_documents(&dir).map(|(documents, _)| documents).unwrap_or_default();
    let mut builds: Vec<f64> = (0..rounds)
        .map(|_| {
            let documents = documents.clone();
            let t0 = Instant::now();
            let built = olm_catalog::Catalog::build(documents);
            let ms = t0.elapsed().as_secs_f64() * 1000.0;
            drop(built);
            ms
        })
        .collect();
    builds.sort_by(|a, b| a.total_cmp(b));
    println!("index from documents (Catalog::build): min {:.1} ms, median {:.1} ms", builds[0], builds[builds.len() / 2]);
}
