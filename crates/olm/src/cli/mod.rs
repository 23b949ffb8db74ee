//! Command-line surface of the `olm` binary. One module per subcommand group.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod crds;
mod dev;
mod resolve;
mod run;

/// A Rust reimplementation of the Operator Lifecycle Manager.
#[derive(Debug, Parser)]
#[command(name = "olm", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the CustomResourceDefinitions of every OLM kind as multi-document YAML.
    Crds(crds::CrdsArgs),
    /// Developer tooling: a local Kubernetes control plane (`olm dev cluster up|down|status|env`).
    Dev(dev::DevArgs),
    /// Resolve Subscriptions against catalogs from a request file (no cluster needed).
    Resolve(resolve::ResolveArgs),
    /// Run the OLM controllers (ClusterServiceVersion, OperatorGroup) until SIGTERM/SIGINT.
    Run(run::RunArgs),
    /// Print the version of this binary and the Kubernetes API it targets.
    Version,
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Crds(args) => crds::run(args),
        Command::Dev(args) => dev::run(args),
        Command::Resolve(args) => resolve::run(args),
        Command::Run(args) => run::run(args),
        Command::Version => {
            println!(
                "olm {} (Kubernetes API {}.{})",
                env!("CARGO_PKG_VERSION"),
                k8s_openapi::K8S_VERSION_MAJOR,
                k8s_openapi::K8S_VERSION_MINOR
            );
            Ok(ExitCode::SUCCESS)
        }
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(2)
        }
    }
}
