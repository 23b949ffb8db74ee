//! `olm resolve`: run the resolver on a request file, without a cluster.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};
use olm_resolver::file::{Output, load_request};

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Format {
    Json,
    Yaml,
    Text,
}

/// Resolve Subscriptions against catalogs described in a request file.
#[derive(Debug, Args)]
pub struct ResolveArgs {
    /// The request: namespace, catalogs (paths relative to the file), installed operators, subscriptions.
    #[arg(long, value_name = "FILE")]
    request: PathBuf,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value = "text")]
    output: Format,
}

/// Exit 0 when every Subscription resolved, 1 when any failed; a malformed request or
/// catalog is an error (exit 2).
pub fn run(args: ResolveArgs) -> anyhow::Result<ExitCode> {
    let loaded = load_request(&args.request)?;
    for w in &loaded.warnings {
        eprintln!("warning: {w}");
    }
    let resolution = olm_resolver::resolve(&loaded.catalogs, &loaded.request);
    let out = Output::from_resolution(&resolution);
    match args.output {
        Format::Json => println!("{}", serde_json::to_string_pretty(&out).context("rendering JSON")?),
        Format::Yaml => print!("{}", serde_saphyr::to_string(&out).context("rendering YAML")?),
        Format::Text => print!("{}", text(&loaded.request.namespace, &resolution)),
    }
    Ok(if resolution.errors.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

fn text(namespace: &str, r: &olm_resolver::Resolution) -> String {
    let mut s = String::new();
    let plural = |n: usize, one: &str, many: &str| if n == 1 { format!("1 {one}") } else { format!("{n} {many}") };
    s.push_str(&format!(
        "Namespace {namespace}: {}, {}.\n",
        plural(r.bundles.len(), "bundle to install", "bundles to install"),
        plural(r.errors.len(), "Subscription failed", "Subscriptions failed")
    ));
    if !r.bundles.is_empty() {
        let width = r.bundles.iter().map(|b| b.name.len()).max().unwrap_or(0);
        for b in &r.bundles {
            let version = b.version.as_ref().map(|v| format!(", version {v}")).unwrap_or_default();
            let detail = match (b.reason, &b.replaces) {
                (olm_resolver::Reason::Upgrade, Some(old)) => format!("upgrades {old}"),
                (olm_resolver::Reason::Dependency, _) => "needed by another bundle".to_string(),
                _ => match &b.subscription {
                    Some(sub) => format!("for Subscription {sub}"),
                    None => String::new(),
                },
            };
            s.push_str(&format!(
                "  {:<10} {:<width$}  package {}{version}, channel {}, catalog {}/{}  ({detail})\n",
                b.reason.as_str(),
                b.name,
                b.package,
                b.channel,
                b.catalog.namespace,
                b.catalog.name,
            ));
        }
    }
    for e in &r.errors {
        s.push_str(&format!("\nSubscription {} failed [{}]:\n  {}\n", e.subscription, e.category, e.message));
    }
    if !r.notices.is_empty() {
        s.push_str("\nDeprecation notices (information only):\n");
        for n in &r.notices {
            s.push_str(&format!("  {n}\n"));
        }
    }
    s
}
