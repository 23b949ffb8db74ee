//! `olm catalog`: validate and render catalogs (File-Based Catalogs, legacy package
//! manifests, bundle directories).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};
use olm_catalog::source::{OutputFormat, render_documents, render_to_string};
use olm_catalog::{ObjectMode, Problem, RenderOptions};
use serde_json::json;

#[derive(Debug, Args)]
pub struct CatalogArgs {
    #[command(subcommand)]
    command: CatalogCommand,
}

#[derive(Debug, Subcommand)]
enum CatalogCommand {
    /// Check a catalog with opm's rules and list every problem found.
    Validate(ValidateArgs),
    /// Convert package manifests, bundle directories or an FBC to File-Based Catalog blobs on stdout.
    Render(RenderArgs),
    /// Serve catalogs over HTTP (catalogd-compatible and ours) and operator-registry gRPC.
    Serve(super::catalog_serve::ServeArgs),
    /// Build a catalog image from a File-Based Catalog directory (served from /configs) and push it.
    Push(super::image::PushArgs),
}

#[derive(Debug, Args)]
#[command(after_long_help = VALIDATE_HELP)]
pub struct ValidateArgs {
    /// Catalog directory: a File-Based Catalog root, a legacy package-manifest tree or a tree of bundle directories.
    dir: PathBuf,
    /// Output format of the report.
    #[arg(short, long, value_enum, default_value_t = ReportFormat::Text)]
    output: ReportFormat,
}

const VALIDATE_HELP: &str = "\
Exit status: 0 when the catalog is valid, 1 when it has problems (each is listed with
its file, package, channel or bundle and what to change), 2 when it cannot be read.

Examples:
  olm catalog validate catalogs/community
  olm catalog validate ./operators -o json";

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ReportFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum RenderFormat {
    Yaml,
    Json,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum MigrateLevel {
    /// Keep every manifest as an olm.bundle.object property (full objects; installable from the catalog).
    None,
    /// Replace the manifests by one olm.csv.metadata property (small; installs need the bundle image).
    BundleObjectToCsvMetadata,
}

#[derive(Debug, Args)]
#[command(after_long_help = RENDER_HELP)]
pub struct RenderArgs {
    /// Sources: bundle directories, directories of bundles, legacy package-manifest
    /// directories, or File-Based Catalogs (directories or files).
    #[arg(required = true)]
    sources: Vec<PathBuf>,
    /// Output encoding.
    #[arg(short, long, value_enum, default_value_t = RenderFormat::Yaml)]
    output: RenderFormat,
    /// How bundle manifests are carried (like opm's --migrate-level).
    #[arg(long, value_enum, default_value_t = MigrateLevel::None)]
    migrate_level: MigrateLevel,
    /// Bundle image reference to record in the olm.bundle of a single bundle directory.
    #[arg(long, value_name = "REF")]
    image: Option<String>,
}

const RENDER_HELP: &str = "\
A single bundle directory renders to its olm.bundle blob only (as opm render does).
A directory of bundles (community-operators layout) or a legacy package renders to a
complete catalog: olm.package, olm.channel and olm.bundle blobs. Channel entries come
from the bundles' channel annotations and their CSVs' replaces/skips/olm.skipRange;
packages in semver mode (ci.yaml updateGraph: semver-mode) get one replaces edge per
consecutive version instead. Output is in opm's canonical order with sorted keys.

Problems that keep a source from being read (invalid YAML, a bundle without a CSV) are
errors: they are listed and the exit status is 1. Catalog rule violations in the
output (e.g. two channel heads) are printed as warnings; run `olm catalog validate`.

Example:
  olm catalog render ./community-operators/etcd > catalogs/community/etcd/catalog.yaml";

pub fn run(args: CatalogArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        CatalogCommand::Validate(a) => {
            super::warnings_to_stderr();
            validate(a)
        }
        CatalogCommand::Render(a) => {
            super::warnings_to_stderr();
            render(a)
        }
        CatalogCommand::Serve(a) => super::catalog_serve::run(a),
        CatalogCommand::Push(a) => {
            super::warnings_to_stderr();
            super::image::run_catalog_push(a)
        }
    }
}

fn problem_json(p: &Problem) -> serde_json::Value {
    json!({
        "file": p.file.as_ref().map(|f| f.display().to_string()),
        "package": p.package,
        "channel": p.channel,
        "bundle": p.bundle,
        "code": p.code,
        "message": p.message,
        "fix": p.fix,
    })
}

fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

fn validate(args: ValidateArgs) -> anyhow::Result<ExitCode> {
    let report = olm_catalog::validate(&args.dir).with_context(|| format!("cannot validate {}", args.dir.display()))?;
    let summary = format!(
        "{}, {}, {}",
        plural(report.packages, "package"),
        plural(report.channels, "channel"),
        plural(report.bundles, "bundle")
    );
    match args.output {
        ReportFormat::Json => {
            let body = json!({
                "passed": report.passed(),
                "path": args.dir.display().to_string(),
                "format": report.format.as_str(),
                "packages": report.packages,
                "channels": report.channels,
                "bundles": report.bundles,
                "problems": report.problems.iter().map(problem_json).collect::<Vec<_>>(),
            });
            println!("{}", serde_json::to_string_pretty(&body)?);
        }
        ReportFormat::Text => {
            if report.passed() {
                println!("{}: valid {}: {summary}", args.dir.display(), report.format.as_str());
            } else {
                let mut out = std::io::stdout().lock();
                writeln!(
                    out,
                    "{}: invalid {} ({summary}): {}",
                    args.dir.display(),
                    report.format.as_str(),
                    plural(report.problems.len(), "problem")
                )?;
                for p in &report.problems {
                    writeln!(out, "  - {p}")?;
                }
            }
        }
    }
    Ok(if report.passed() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

fn render(args: RenderArgs) -> anyhow::Result<ExitCode> {
    let opts = RenderOptions {
        objects: match args.migrate_level {
            MigrateLevel::None => ObjectMode::BundleObjects,
            MigrateLevel::BundleObjectToCsvMetadata => ObjectMode::CsvMetadata,
        },
        image: args.image.clone(),
    };
    let mut documents = Vec::new();
    let mut load_problems = Vec::new();
    for src in &args.sources {
        match render_documents(src, &opts) {
            Ok((_, mut docs, mut problems)) => {
                documents.append(&mut docs);
                load_problems.append(&mut problems);
            }
            // What is in the source keeps it from being read: a problem like the others (exit 1).
            Err(err) if !err.is_retryable() => load_problems.extend(err.problems()),
            Err(err) => return Err(err).with_context(|| format!("cannot render {}", src.display())),
        }
    }
    // Warnings (a CSV no channel reaches, left out) do not stop the render.
    let (warned, load_problems): (Vec<Problem>, Vec<Problem>) = load_problems.into_iter().partition(|p| p.warning);
    for p in &warned {
        eprintln!("warning: {p}");
    }
    if !load_problems.is_empty() {
        eprintln!("error: {} while reading the sources:", plural(load_problems.len(), "problem"));
        for p in &load_problems {
            eprintln!("  - {p}");
        }
        return Ok(ExitCode::from(1));
    }
    let format = match args.output {
        RenderFormat::Yaml => OutputFormat::Yaml,
        RenderFormat::Json => OutputFormat::Json,
    };
    let (text, warnings) = render_to_string(documents, format).context("cannot encode the rendered catalog")?;
    std::io::stdout().lock().write_all(text.as_bytes())?;
    // A lone olm.bundle has no package or channel yet; that is expected, not a warning.
    let single_bundles = args.sources.iter().all(|s| olm_catalog::render::is_bundle_dir(s));
    if !single_bundles {
        for w in &warnings {
            eprintln!("warning: {w}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
