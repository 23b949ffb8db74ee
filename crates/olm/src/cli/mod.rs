//! Command-line surface of the `olm` binary. One module per subcommand group.

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

mod admin;
mod catalog;
mod catalog_serve;
mod crds;
mod dev;
mod dev_in_cluster;
mod dev_pods;
mod dev_up;
mod image;
mod manifests;
mod packageserver;
mod chart;
mod release;
mod resolve;
mod run;
mod shutdown;

/// A Rust reimplementation of the Operator Lifecycle Manager.
#[derive(Debug, Parser)]
#[command(
    name = "olm",
    version,
    about,
    long_about = None,
    after_help = "Cluster admins: `status -n NS` tells where each Subscription stands and what to do; `plan show PLAN` previews an \
upgrade's permissions, CRD and Deployment changes before `approve PLAN`; `rollback SUB` goes back one version (a Subscription \
annotated olm-rs.io/auto-rollback: \"true\" does it by itself when an upgrade fails); `uninstall SUB` removes an operator and \
what OLM made for it; `migrate SUB` moves it to an OLM v1 ClusterExtension in place. A Manual Subscription with a startingCSV, annotated olm-rs.io/auto-approve-starting-csv: \"true\", \
installs that version at once and waits for approval after that. As `kubectl-olm` on PATH, this is `kubectl olm …`."
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// For cluster admins: why an operator is or is not at the version you expect (exit 0 when healthy).
    Status(admin::status::StatusArgs),
    /// For cluster admins: preview what an InstallPlan will change (`olm plan show PLAN`).
    Plan(admin::plan::PlanArgs),
    /// For cluster admins: approve an InstallPlan after seeing its preview, and follow the install.
    Approve(admin::approve::ApproveArgs),
    /// For cluster admins: go back to the version the installed operator replaced.
    Rollback(admin::rollback::RollbackArgs),
    /// For cluster admins: remove an operator and what OLM made for it (operands and CRDs only when asked).
    Uninstall(admin::uninstall::UninstallArgs),
    /// For cluster admins: move an operator from OLM v0 (Subscription) to OLM v1 (ClusterExtension) in place.
    Migrate(admin::migrate::MigrateArgs),
    /// A web console on 127.0.0.1: browse catalogs, install, see what is installed (with your credentials).
    Console(admin::console::ConsoleArgs),
    /// Build and push bundle images (`olm bundle push DIR IMAGE`).
    Bundle(image::BundleArgs),
    /// Validate, render and serve catalogs (File-Based Catalogs, package manifests, bundle directories).
    Catalog(catalog::CatalogArgs),
    /// Print the CustomResourceDefinitions of every OLM kind as multi-document YAML.
    Crds(crds::CrdsArgs),
    /// Developer tooling: a local Kubernetes control plane (`olm dev cluster up|down|status|env`).
    Dev(dev::DevArgs),
    /// Serve the PackageManifest API (packages.operators.coreos.com/v1) as an aggregated API.
    #[command(name = "packageserver")]
    PackageServer(packageserver::PackageServerArgs),
    /// Write the release pair, crds.yaml and olm.yaml, to install OLM with `kubectl apply --server-side`.
    Release(release::ReleaseArgs),
    /// Resolve Subscriptions against catalogs from a request file (no cluster needed).
    Resolve(resolve::ResolveArgs),
    /// Run the OLM controllers (OperatorGroup, ClusterServiceVersion, CatalogSource, Subscription, InstallPlan) until SIGTERM/SIGINT.
    Run(run::RunArgs),
    /// Print the version of this binary and the Kubernetes API it targets.
    Version,
}

/// The jemalloc arena of the watch caches' thread (`olm run`), u32::MAX until it has one.
static CACHE_ARENA: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(u32::MAX);

/// With `OLM_DEBUG_ALLOC` set, print the allocator's figures to stderr every 5 s from a
/// task of the current runtime: what memory measurements need to tell live heap from
/// fragmentation and from pages not yet returned; `caches=` is what the watch caches' arena
/// holds live. With `OLM_DEBUG_CACHES` set too, every minute a `CACHE` line per watch cache:
/// its objects, the bytes of their JSON and the heap bytes of a clone of them
/// (olm_runtime::cache::census).
fn spawn_alloc_report() {
    #[cfg(feature = "jemalloc")]
    if std::env::var_os("OLM_DEBUG_ALLOC").is_some() {
        tokio::spawn(async {
            use tikv_jemalloc_ctl::{Access, AsName, epoch, stats};
            let census = std::env::var_os("OLM_DEBUG_CACHES").is_some();
            for tick in 1u64.. {
                tokio::time::sleep(std::time::Duration::from_secs(5)).await;
                let _ = epoch::advance();
                let arena = CACHE_ARENA.load(std::sync::atomic::Ordering::Relaxed);
                let in_arena = |what: &str| -> usize {
                    let name = format!("stats.arenas.{arena}.{what}.allocated\0");
                    name.as_bytes().name().read().unwrap_or(0)
                };
                let caches = if arena == u32::MAX { 0 } else { in_arena("small") + in_arena("large") };
                eprintln!(
                    "ALLOC allocated={} active={} resident={} mapped={} retained={} metadata={} caches={caches}",
                    stats::allocated::read().unwrap_or(0),
                    stats::active::read().unwrap_or(0),
                    stats::resident::read().unwrap_or(0),
                    stats::mapped::read().unwrap_or(0),
                    stats::retained::read().unwrap_or(0),
                    stats::metadata::read().unwrap_or(0),
                );
                if census && tick % 12 == 0 {
                    for cache in olm_runtime::cache::census(thread_allocated) {
                        eprintln!("CACHE {} objects={} json_bytes={} heap_bytes={}", cache.name, cache.objects, cache.json_bytes, cache.heap_bytes);
                    }
                }
            }
        });
    }
}

/// Bytes this thread has allocated so far (jemalloc's `thread.allocated`), for the caches'
/// census.
#[cfg(feature = "jemalloc")]
fn thread_allocated() -> u64 {
    tikv_jemalloc_ctl::thread::allocatedp::read().map_or(0, |counter| counter.get())
}

/// For one-shot commands (render, validate, push): the libraries' warnings (a repaired YAML
/// file, a dropped icon) go to stderr as `warning: …` lines.
fn warnings_to_stderr() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .without_time()
        .with_target(false)
        .with_level(true)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

/// Run as `kubectl-olm` (a kubectl plugin: `kubectl olm …`), help and errors say `kubectl olm`.
/// The Go duration (`olm_api::duration`, as upstream's flags take them) given to `flag`, with
/// surrounding spaces ignored; an error names the flag and shows `example`.
fn duration_flag(flag: &str, text: &str, example: &str) -> anyhow::Result<std::time::Duration> {
    olm_api::duration::parse_go_duration(text.trim())
        .map_err(|err| anyhow::anyhow!("{flag} {text:?}: {err}; write a Go duration such as {example}"))
}

fn parse() -> Cli {
    let invoked = std::env::args_os().next().map(std::path::PathBuf::from);
    let as_plugin = invoked.as_deref().and_then(std::path::Path::file_name).is_some_and(|n| n == "kubectl-olm");
    let command = if as_plugin { Cli::command().name("kubectl-olm").bin_name("kubectl olm") } else { Cli::command() };
    Cli::from_arg_matches(&command.get_matches()).unwrap_or_else(|err| err.exit())
}

pub fn main() -> ExitCode {
    let cli = parse();
    let result = match cli.command {
        Command::Status(args) => admin::status::run(args),
        Command::Plan(args) => admin::plan::run(args),
        Command::Approve(args) => admin::approve::run(args),
        Command::Rollback(args) => admin::rollback::run(args),
        Command::Uninstall(args) => admin::uninstall::run(args),
        Command::Migrate(args) => admin::migrate::run(args),
        Command::Console(args) => admin::console::run(args),
        Command::Bundle(args) => image::run_bundle(args),
        Command::Catalog(args) => catalog::run(args),
        Command::Crds(args) => crds::run(args),
        Command::Dev(args) => dev::run(args),
        Command::PackageServer(args) => packageserver::run(args),
        Command::Release(args) => release::run(args),
        Command::Resolve(args) => resolve::run(args),
        Command::Run(args) => run::run(args),
        Command::Version => {
            // k8s-openapi 0.29 exports no version constants; this mirrors the `v1_36`
            // feature selected in crates/olm/Cargo.toml.
            println!("olm {} (Kubernetes API 1.36)", env!("CARGO_PKG_VERSION"));
            Ok(ExitCode::SUCCESS)
        }
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {}", said_once(&err));
            ExitCode::from(2)
        }
    }
}

/// The error and its causes, each said once: a cause whose text the message before it
/// already holds (many of our errors say their cause) is not repeated.
fn said_once(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in err.chain() {
        let cause = cause.to_string();
        if text.is_empty() {
            text = cause;
        } else if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duration_flag_is_a_go_duration_and_its_error_names_the_flag() {
        assert_eq!(duration_flag("--refresh", " 1m30s ", "5m").unwrap(), std::time::Duration::from_secs(90));
        assert_eq!(duration_flag("--refresh", "0", "5m").unwrap(), std::time::Duration::ZERO);
        for (text, why) in [("30", "missing unit"), ("5 parsecs", "unknown unit"), ("-1s", "negative"), ("", "invalid duration")] {
            let err = duration_flag("--refresh", text, "30s or 5m").unwrap_err().to_string();
            assert!(err.starts_with(&format!("--refresh {text:?}: ")) && err.contains(why) && err.ends_with("such as 30s or 5m"), "{err}");
        }
    }

    #[test]
    fn a_cause_the_message_already_says_is_not_repeated() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory (os error 2)");
        let err = anyhow::Error::new(io).context("cannot read ./nope: No such file or directory (os error 2)").context("catalogs[0].path (catalog c)");
        assert_eq!(said_once(&err), "catalogs[0].path (catalog c): cannot read ./nope: No such file or directory (os error 2)");
    }
}
