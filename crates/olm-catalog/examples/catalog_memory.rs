//! Where a loaded catalog's memory goes: `cargo run --release -p olm-catalog --example
//! catalog_memory [DIR]`. Counts the heap bytes live after `load_fbc` (jemalloc's statistics,
//! so size classes count) and splits out the documents' canonical texts (`Blob`s,
//! stored and plain) from the rest (the indexed model: packages, bundles, properties, indexes).

use std::path::PathBuf;

use olm_catalog::MetaFilter;
use olm_catalog::load::load_fbc;

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn allocated() -> usize {
    // Statistics are refreshed when the epoch advances.
    let _ = tikv_jemalloc_ctl::epoch::advance();
    tikv_jemalloc_ctl::stats::allocated::read().unwrap_or(0)
}

const DEFAULT_DIR: &str = "/work/shared/real-catalogs/community-operators-prod-fbc-v4.21/catalog";

fn main() {
    let dir = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| DEFAULT_DIR.to_string()));
    let before = allocated();
    let (catalog, problems) = match load_fbc(&dir) {
        Ok(loaded) => loaded,
        Err(err) => {
            eprintln!("{}: {err}", dir.display());
            std::process::exit(1);
        }
    };
    let live = allocated() - before;
    let (mut stored, mut plain, mut metas) = (0usize, 0usize, 0usize);
    let mut by_schema = std::collections::BTreeMap::<String, (usize, usize, usize)>::new();
    for meta in catalog.metas(MetaFilter::default()) {
        metas += 1;
        stored += meta.blob.stored_len();
        plain += meta.blob.len();
        let entry = by_schema.entry(meta.schema.clone()).or_default();
        entry.0 += 1;
        entry.1 += meta.blob.stored_len();
        entry.2 += meta.blob.len();
    }
    let kib = |b: usize| b as f64 / 1024.0;
    println!("{}: {} packages, {metas} documents, {} problems", dir.display(), catalog.packages().len(), problems.len());
    println!("live heap after load: {:.0} KiB", kib(live));
    println!("documents' texts: {:.0} KiB stored ({:.0} KiB plain)", kib(stored), kib(plain));
    for (schema, (n, s, p)) in &by_schema {
        println!("  {schema:<16} {n:>5} documents {:>8.0} KiB stored {:>8.0} KiB plain", kib(*s), kib(*p));
    }
    println!("everything else (model, properties, indexes): {:.0} KiB", kib(live.saturating_sub(stored)));
}
