//! The commands for cluster admins (issue #22): `olm status`, `olm plan show`, `olm approve`,
//! `olm rollback`, `olm uninstall`. Installed as `kubectl-olm` too, so that `kubectl olm …`
//! runs them; they take kubectl's `-n`, `--context`, `--kubeconfig` and `-o`.

pub mod approve;
pub mod console;
pub mod migrate;
pub mod plan;
pub mod rollback;
pub mod status;
pub mod uninstall;

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, ValueEnum};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::Api;
use olm_api::v1alpha1::subscription::Subscription;

/// Where to connect, as kubectl takes it.
#[derive(Debug, Args, Clone)]
pub struct KubeArgs {
    /// The namespace (default: the context's, else `default`).
    #[arg(long, short = 'n')]
    pub namespace: Option<String>,
    /// The kubeconfig context to use.
    #[arg(long)]
    pub context: Option<String>,
    /// The kubeconfig file (default: $KUBECONFIG, else ~/.kube/config; in a pod, its ServiceAccount).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
}

/// `-o`: words for people, or JSON/YAML for scripts.
#[derive(Debug, Clone, Copy, Default, ValueEnum, PartialEq, Eq)]
pub enum Output {
    #[default]
    Text,
    Json,
    Yaml,
}

/// A client for the cluster `args` name, and the namespace to act in.
pub async fn connect(args: &KubeArgs) -> anyhow::Result<(kube::Client, String)> {
    let options = KubeConfigOptions {
        context: args.context.clone(),
        ..KubeConfigOptions::default()
    };
    let config = match &args.kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path).with_context(|| format!("cannot read kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .with_context(|| format!("kubeconfig {}", path.display()))?
        }
        None if args.context.is_some() => kube::Config::from_kubeconfig(&options).await.context("kubeconfig")?,
        None => kube::Config::infer()
            .await
            .context("no cluster to talk to: set KUBECONFIG or --kubeconfig (or run `olm dev up` for a local cluster)")?,
    };
    let namespace = args.namespace.clone().unwrap_or_else(|| config.default_namespace.clone());
    let client = kube::Client::try_from(config).context("cannot build a client for the cluster")?;
    Ok((client, namespace))
}

/// Run `work` on a small runtime: these commands make a few requests, then exit.
pub fn block_on<T>(work: impl std::future::Future<Output = anyhow::Result<T>>) -> anyhow::Result<T> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(work)
}

/// `value` as JSON or YAML on stdout.
pub fn print_data<T: serde::Serialize>(output: Output, value: &T) -> anyhow::Result<()> {
    match output {
        Output::Json => println!("{}", serde_json::to_string_pretty(value).context("rendering JSON")?),
        Output::Yaml => print!("{}", serde_saphyr::to_string(value).context("rendering YAML")?),
        Output::Text => {}
    }
    Ok(())
}

/// Ask a yes/no question on the terminal; without one (a script), the answer is no and the
/// message says to pass `--yes`.
pub fn confirm(question: &str) -> anyhow::Result<bool> {
    if !std::io::stdin().is_terminal() {
        anyhow::bail!("{question} — no terminal to ask on: pass --yes to go ahead");
    }
    print!("{question} [y/N] ");
    std::io::stdout().flush().ok();
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer).context("reading the answer")?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes" | "Yes"))
}

/// `--yes` and `--no-wait`, for the commands that ask and then follow what OLM does.
#[derive(Debug, Args, Clone, Copy)]
pub struct AskArgs {
    /// Go ahead without asking (for scripts); what will happen is still printed.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Return once done asking instead of following OLM.
    #[arg(long)]
    pub no_wait: bool,
}

/// The Subscription `name` of `namespace`, and its API; an error that says how to list them
/// when it does not exist.
pub async fn subscription(client: &kube::Client, namespace: &str, name: &str) -> anyhow::Result<(Api<Subscription>, Subscription)> {
    Ok(olm_admin::subscription(client, namespace, name).await?)
}

/// How long the commands that wait for OLM wait at most, and how often they look.
pub const WAIT: Duration = Duration::from_secs(300);
pub const POLL: Duration = Duration::from_secs(1);

/// A line of progress on stderr (stdout stays for the result).
pub fn progress(line: &str) {
    eprintln!("{line}");
}

/// How the commands wait for OLM ([`WAIT`], [`POLL`]), saying progress on stderr.
pub fn waiting() -> olm_admin::Waiting<'static> {
    olm_admin::Waiting { limit: WAIT, poll: POLL, progress: &progress }
}

pub use olm_admin::package_manifest;

/// The API server's message of a failed request, for people.
pub fn api_error(err: &kube::Error) -> String {
    olm_runtime::error::api_message(err)
}
