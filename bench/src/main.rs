//! `bench/run.sh` — side-by-side benchmarks against upstream (opm serve,
//! OLM's resolver) on the same machine, inputs and run; writes BENCHMARKS.md.
//!
//! Options: `--out FILE` (default: BENCHMARKS.md at the workspace root), `--fbc DIR` (the
//! real catalog; default /work/shared/real-catalogs/community-operators-prod-fbc-v4.21/catalog,
//! or OLM_BENCH_FBC), `--quick` (fewer requests, shorter timings: for trying the harness),
//! `--no-e2e` (skip the end-to-end part, which starts a private control plane), `--e2e-only`
//! (only the end-to-end part), `--scale-namespaces N` (namespaces of the end-to-end scale run;
//! default 200, 10 with `--quick`, 0 skips it; or OLM_BENCH_SCALE_NAMESPACES), `--images-rounds N`
//! (rounds of §4's image benchmark, tests/examples/image_bench; default 10, 2 with `--quick`, 0 skips
//! it), `--unpack-rounds N` (§4's real-node unpack comparison, root only; default 0, skipped),
//! `--scale-timeout SECS` (longest wait for the scale run to settle, per side; default 6 s per
//! namespace, at least 300 s), `--scale-catalog-updates SECS` (ours only: while the scale run
//! settles, the catalog gets a new bundle every SECS seconds; e2e.rs), `--scale-create-concurrency N`
//! (concurrent `kubectl create` processes making the scale run's objects; default 4). `OLM_BENCH_SIDES=ours` (or `upstream`) runs one side of the
//! end-to-end part only, for working on it; published figures need both. `--unpack ROUNDS` runs
//! only the bundle-unpack comparison on a real node (root; unpack.rs) and prints its section.
//! `--chaos [--seed N] [--kills N] [--namespaces N]` runs only the chaos run (chaos.rs) and
//! writes RELIABILITY.md. `--upstream-e2e [--ci] [--build-only] [--focus REGEX] [--out FILE] [--jobs N] [--spec-timeout SECS] [--budget MINUTES] [--all] [--keep] [--rerender] [--kubectl-operator]`
//! runs only upstream OLM's own e2e suite against olm-rs (upstream_e2e.rs) and writes CONFORMANCE.md.
//! `--large-scale [--namespaces N] [--subscriptions N] [--copies on|off|both] …` runs only the
//! 10,000-namespace run (large_scale.rs) and writes its section to target/olm-bench/large-scale.md. `OLM_BENCH_OLM=PATH` runs another `olm` build than target/release/olm
//! (`OLM_BENCH_OLM=bench/olm-heaptrack.sh` takes a heap profile of every `olm run`; see that script).
//! `--v1-vs-v0 [--runs N] [--out FILE]` runs only one operator installed through a ClusterExtension and
//! through a Subscription (v1_install.rs) and writes its section to target/olm-bench/v1-vs-v0.md.

mod catalogs;
mod chaos;
mod chaos_catalog;
mod chaos_check;
mod chaos_report;
mod compare;
mod csv_watch;
mod dev_env;
mod e2e;
mod figures;
mod host_speed;
mod images;
mod kubectl;
mod large_scale;
mod large_scale_report;
mod report;
mod report_e2e;
mod resolve;
mod serve;
mod tools;
mod unpack;
mod kubectl_operator;
mod upstream_e2e;
mod upstream_e2e_ci;
mod upstream_e2e_report;
mod v1_install;

// Our resolver runs in this process: with the allocator `olm` ships (crates/olm/src/main.rs).
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::Value;

use crate::serve::{LoadResult, Rpc, Server, Targets};

pub struct Options {
    pub out: PathBuf,
    pub fbc: PathBuf,
    pub quick: bool,
    pub e2e: bool,
    /// Only the end-to-end part (parts 1 and 2 skipped).
    pub e2e_only: bool,
    pub e2e_options: e2e::E2eOptions,
    /// Rounds of the unpack comparison; when set, nothing else runs.
    pub unpack_rounds: Option<usize>,
    /// §4 in the full run: rounds of the image benchmark and of the unpack comparison (0 skips).
    pub images_rounds: usize,
    pub images_unpack_rounds: usize,
}

const USAGE: &str = "usage: olm-bench [--out FILE] [--fbc DIR] [--quick] [--no-e2e | --e2e-only] [--scale-namespaces N] [--scale-timeout SECS] [--scale-catalog-updates SECS] [--scale-create-concurrency N] [--images-rounds N] [--unpack-rounds N] | --unpack ROUNDS | --chaos [--seed N] [--kills N] [--namespaces N] | --upstream-e2e [--ci] [--build-only] [--focus REGEX] [--out FILE] [--jobs N] [--spec-timeout SECS] [--budget MINUTES] [--all] [--keep] [--rerender] [--kubectl-operator]";

fn number(flag: &str, value: Option<String>) -> anyhow::Result<u64> {
    whole_number(flag, value.as_deref(), USAGE)
}

/// A flag's whole-number value; the error names the flag and shows `usage`.
pub(crate) fn whole_number(flag: &str, value: Option<&str>, usage: &str) -> anyhow::Result<u64> {
    let v = value.with_context(|| format!("{flag} needs a number; {usage}"))?;
    v.trim().parse().with_context(|| format!("{flag} {v:?} is not a whole number; {usage}"))
}

fn options(workspace: &Path) -> anyhow::Result<Options> {
    let mut out = workspace.join("BENCHMARKS.md");
    let mut fbc = std::env::var_os("OLM_BENCH_FBC").map_or_else(|| PathBuf::from(catalogs::DEFAULT_REAL_FBC), PathBuf::from);
    let mut quick = false;
    let mut e2e = true;
    let mut e2e_only = false;
    let mut scale_namespaces = match std::env::var("OLM_BENCH_SCALE_NAMESPACES") {
        Ok(v) => Some(number("OLM_BENCH_SCALE_NAMESPACES", Some(v))?),
        Err(_) => None,
    };
    let mut scale_timeout = None;
    let mut catalog_updates = None;
    let mut create_concurrency = 4;
    let mut unpack_rounds = None;
    let mut images_rounds = None;
    let mut images_unpack_rounds = 0;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--out" => out = PathBuf::from(args.next().context("--out needs a file")?),
            "--fbc" => fbc = PathBuf::from(args.next().context("--fbc needs a directory")?),
            "--quick" => quick = true,
            "--no-e2e" => e2e = false,
            "--e2e-only" => e2e_only = true,
            "--scale-namespaces" => scale_namespaces = Some(number(&a, args.next())?),
            "--scale-timeout" => scale_timeout = Some(Duration::from_secs(number(&a, args.next())?)),
            "--scale-create-concurrency" => create_concurrency = usize::try_from(number(&a, args.next())?.max(1)).context("--scale-create-concurrency is too large")?,
            "--scale-catalog-updates" => catalog_updates = Some(Duration::from_secs(number(&a, args.next())?).max(Duration::from_secs(10))),
            "--images-rounds" => images_rounds = Some(usize::try_from(number(&a, args.next())?).context("--images-rounds: too many rounds")?),
            "--unpack-rounds" => images_unpack_rounds = usize::try_from(number(&a, args.next())?).context("--unpack-rounds: too many rounds")?,
            "--unpack" => unpack_rounds = Some(usize::try_from(number(&a, args.next())?).context("--unpack: too many rounds")?),
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?}; {USAGE}"),
        }
    }
    if e2e_only && !e2e {
        bail!("--e2e-only and --no-e2e exclude each other; {USAGE}");
    }
    let scale_namespaces = usize::try_from(scale_namespaces.unwrap_or(if quick { 10 } else { 200 }))
        .context("--scale-namespaces is too large")?;
    // About 6 s per namespace: 20 minutes for 200 on a 2-core machine.
    let per_namespace = Duration::from_secs(6);
    let scale_timeout = scale_timeout
        .unwrap_or_else(|| (per_namespace * u32::try_from(scale_namespaces).unwrap_or(u32::MAX)).max(Duration::from_secs(300)));
    let e2e_options = e2e::E2eOptions {
        scale_namespaces,
        scale_timeout,
        steady_after: Duration::from_secs(if quick { 10 } else { 30 }),
        idle_after: Duration::from_secs(if quick { 5 } else { 15 }),
        create_concurrency,
        catalog_updates,
        single_runs: if quick { 1 } else { 5 },
    };
    let images_rounds = images_rounds.unwrap_or(if quick { 2 } else { 10 });
    Ok(Options { out, fbc, quick, e2e, e2e_only, e2e_options, unpack_rounds, images_rounds, images_unpack_rounds })
}

/// One server's figures on one catalog.
pub struct ServerRun {
    pub server: Server,
    pub ready: Duration,
    /// Untimed preparation (opm's pre-built cache).
    pub prepare: Option<Duration>,
    pub rss_idle_mib: f64,
    /// RssAnon at the same reading: the process's own memory, without the executable's pages.
    pub anon_idle_mib: f64,
    pub rss_after_mib: Option<f64>,
    pub hwm_mib: f64,
    pub loads: Vec<(Rpc, LoadResult)>,
}

pub struct CatalogRun {
    pub catalog: catalogs::BenchCatalog,
    pub servers: Vec<ServerRun>,
    pub comparison: compare::Comparison,
    pub resolution_ours: Vec<resolve::SetResult>,
    pub resolution_upstream: Vec<resolve::SetResult>,
}

fn targets(dir: &Path) -> anyhow::Result<Targets> {
    let (documents, _) = olm_catalog::load::load_fbc_documents(dir)?;
    let mut packages = Vec::new();
    let mut channels = Vec::new();
    for d in &documents {
        let s = |k: &str| d.value.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        match d.value.get("schema").and_then(Value::as_str) {
            Some("olm.package") => packages.push(s("name")),
            Some("olm.channel") => channels.push((s("package"), s("name"))),
            _ => {}
        }
    }
    packages.sort();
    channels.sort();
    Ok(Targets { packages, channels })
}

async fn bench_catalog(
    tools: &tools::Tools,
    catalog: catalogs::BenchCatalog,
    work: &Path,
    opts: &Options,
) -> anyhow::Result<CatalogRun> {
    let tag = if catalog.label.starts_with("synthetic") { "synthetic" } else { "real" };
    let targets = Arc::new(targets(&catalog.dir)?);
    let (cheap_requests, list_bundles_requests, cap) =
        if opts.quick { (300, 5, Duration::from_secs(5)) } else { (3000, 40, Duration::from_secs(20)) };
    let concurrency = 4;
    let resolve_time = if opts.quick { Duration::from_millis(300) } else { Duration::from_secs(2) };

    let chosen = resolve::choose_packages(&catalog.dir, 100)?;
    let sets = resolve::sets(&chosen);

    let mut servers = Vec::new();
    let mut answers = Vec::new();
    let mut resolution_upstream = Vec::new();
    for which in [Server::Ours, Server::Opm, Server::OpmPrebuiltCache] {
        eprintln!("[{}] {}", catalog.label, which.label());
        let prepare = if which == Server::OpmPrebuiltCache {
            let cache_dir = work.join(format!("{tag}-opm-cached-cache"));
            Some(serve::prebuild_opm_cache(tools, &catalog.dir, &cache_dir, &work.join(format!("{tag}-opm-cache-build.log")))?)
        } else {
            None
        };
        let server_tag = match which {
            Server::Ours => format!("{tag}-ours"),
            Server::Opm => format!("{tag}-opm"),
            Server::OpmPrebuiltCache => format!("{tag}-opm-cached"),
        };
        let running = serve::start(tools, which, &catalog.dir, work, &server_tag).await?;
        let pid = running.child.id();
        // Let start-up garbage settle before reading the resident set.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let (rss_idle_mib, _) = serve::memory_mib(pid)?;
        let anon_idle_mib = serve::anon_mib(pid)?;
        let mut run = ServerRun { server: which, ready: running.ready, prepare, rss_idle_mib, anon_idle_mib, rss_after_mib: None, hwm_mib: 0.0, loads: Vec::new() };
        if which != Server::OpmPrebuiltCache {
            answers.push(compare::fetch(&running.addr, &targets).await.with_context(|| format!("answers of {}", which.label()))?);
            for rpc in Rpc::ALL {
                let n = if rpc == Rpc::ListBundles { list_bundles_requests } else { cheap_requests };
                let r = serve::load(&running.addr, rpc, targets.clone(), n, concurrency, cap).await?;
                eprintln!("  {:<20} p50 {:>9.0} µs  p99 {:>9.0} µs  {:>8.1}/s  ({} requests, {} errors)", rpc.name(), r.p50_us, r.p99_us, r.per_second, r.requests, r.errors);
                run.loads.push((rpc, r));
            }
            run.rss_after_mib = Some(serve::memory_mib(pid)?.0);
        }
        if which == Server::Opm {
            eprintln!("[{}] upstream resolver against opm serve", catalog.label);
            resolution_upstream = resolve::upstream(&tools.resolver_driver, &running.addr, &sets, work, resolve_time)?;
        }
        run.hwm_mib = serve::memory_mib(pid)?.1;
        eprintln!("  ready {:.0} ms, RSS idle {:.1} MiB (anonymous {:.1} MiB), peak {:.1} MiB", run.ready.as_secs_f64() * 1e3, run.rss_idle_mib, run.anon_idle_mib, run.hwm_mib);
        running.stop();
        servers.push(run);
    }
    eprintln!("[{}] our resolver", catalog.label);
    let resolution_ours = resolve::ours(&catalog.dir, &sets, resolve_time)?;
    let comparison = match answers.as_slice() {
        [ours, opm] => compare::compare(ours, opm),
        _ => bail!("expected answers from two servers"),
    };
    Ok(CatalogRun { catalog, servers, comparison, resolution_ours, resolution_upstream })
}

fn main() -> anyhow::Result<()> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().context("bench/ sits in the workspace")?.to_path_buf();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--chaos") {
        return chaos_report::main(&workspace, &args);
    }
    if args.iter().any(|a| a == "--large-scale") {
        return large_scale_report::main(&workspace, &args);
    }
    if args.iter().any(|a| a == "--v1-vs-v0") {
        return v1_install::main(&workspace, &args);
    }
    if args.iter().any(|a| a == "--upstream-e2e") {
        return upstream_e2e::main(&workspace, &args);
    }
    let opts = options(&workspace)?;
    let started = Instant::now();
    let mut tools = tools::prepare(&workspace)?;
    let work = workspace.join("target/olm-bench");
    if work.exists() {
        std::fs::remove_dir_all(&work).with_context(|| format!("cleaning {}", work.display()))?;
    }
    std::fs::create_dir_all(&work)?;
    tools.olm = tools::private_copy(&tools.olm, &work, "olm")?;

    if let Some(rounds) = opts.unpack_rounds {
        let report = unpack::run(&tools, &workspace, &work, rounds)?;
        let text = unpack::markdown(&report);
        let file = work.join("unpack.md");
        std::fs::write(&file, &text).with_context(|| format!("writing {}", file.display()))?;
        println!("{text}");
        eprintln!("wrote {} in {:.0} s", file.display(), started.elapsed().as_secs_f64());
        return Ok(());
    }

    let mut notes = Vec::new();
    let base = if opts.fbc.is_dir() {
        opts.fbc.clone()
    } else {
        let fallback = workspace.join("catalogs/community");
        notes.push(format!(
            "The real catalog {} is absent on this machine: the benchmark used the repository's catalogs/community instead (much smaller), and its synthetic 10× copy.",
            opts.fbc.display()
        ));
        fallback
    };
    let mut runs = Vec::new();
    if !opts.e2e_only {
        let real = catalogs::describe(&format!("real ({})", short_path(&base)), &base)?;
        let synthetic_dir = work.join("synthetic-10x");
        catalogs::make_synthetic(&base, &synthetic_dir, 10)?;
        let synthetic = catalogs::describe("synthetic 10×", &synthetic_dir)?;
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
        for c in [real, synthetic] {
            runs.push(runtime.block_on(bench_catalog(&tools, c, &work, &opts))?);
        }
    }
    let end_to_end = if opts.e2e {
        eprintln!("end to end on a private control plane");
        Some(e2e::run(&tools, &work, &opts.e2e_options).map_err(|e| format!("{e:#}")))
    } else {
        None
    };
    // §4 only in the full run: --no-e2e and --e2e-only name the parts they keep.
    let images = (opts.e2e && !opts.e2e_only).then(|| images::run(&tools, &work, &base, opts.images_rounds, opts.images_unpack_rounds));
    let elapsed = started.elapsed();
    let text = report::render(&tools, &runs, end_to_end.as_ref(), images.as_ref(), &notes, &opts, elapsed)?;
    let text = with_separate_runs(&opts.out, text);
    std::fs::write(&opts.out, &text).with_context(|| format!("writing {}", opts.out.display()))?;
    println!("{text}");
    eprintln!("wrote {} in {:.0} s", opts.out.display(), elapsed.as_secs_f64());
    Ok(())
}

fn short_path(p: &Path) -> String {
    let parts: Vec<_> = p.components().rev().take(2).collect();
    parts.into_iter().rev().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect::<Vec<_>>().join("/")
}

const SEPARATE_RUN: &str = "<!-- separate run -->";
const END_OF_SEPARATE_RUN: &str = "<!-- end of separate run -->";

/// `text` followed by the sections of the report at `out` that came from runs of their own (each
/// between `<!-- separate run -->` and `<!-- end of separate run -->`, e.g. the 1,000-namespace
/// scale run, too long for every `bench/run.sh`): regenerating the report keeps them.
fn with_separate_runs(out: &Path, mut text: String) -> String {
    let Ok(old) = std::fs::read_to_string(out) else { return text };
    let mut rest = old.as_str();
    while let Some(start) = rest.find(SEPARATE_RUN) {
        let Some(len) = rest[start..].find(END_OF_SEPARATE_RUN) else { break };
        let end = start + len + END_OF_SEPARATE_RUN.len();
        text.push_str(&format!("\n{}\n", &rest[start..end]));
        rest = &rest[end..];
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_of_separate_runs_survive_a_regeneration() {
        let dir = std::env::temp_dir().join(format!("olm-bench-separate-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("BENCHMARKS.md");
        std::fs::write(&out, format!("old report\n{SEPARATE_RUN}\n## 1,000 namespaces\nfigures\n{END_OF_SEPARATE_RUN}\nold tail\n")).unwrap();
        let text = with_separate_runs(&out, "new report\n".to_owned());
        assert_eq!(text, format!("new report\n\n{SEPARATE_RUN}\n## 1,000 namespaces\nfigures\n{END_OF_SEPARATE_RUN}\n"));
        assert_eq!(with_separate_runs(&dir.join("absent.md"), "new\n".to_owned()), "new\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
