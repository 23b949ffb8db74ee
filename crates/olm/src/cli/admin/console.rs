//! `olm console` (issue #55): the web console (crates/olm-console) on 127.0.0.1, acting with
//! the user's kubeconfig credentials, until interrupted.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Args;

use super::{KubeArgs, block_on, connect};

#[derive(Debug, Args)]
pub struct ConsoleArgs {
    #[command(flatten)]
    kube: KubeArgs,
    /// The port on 127.0.0.1 (0: any free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Open the URL in the desktop's browser (xdg-open).
    #[arg(long)]
    open: bool,
}

pub fn run(args: ConsoleArgs) -> anyhow::Result<ExitCode> {
    block_on(async move {
        let (client, namespace) = connect(&args.kube).await?;
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", args.port)).await.with_context(|| format!("cannot listen on 127.0.0.1:{}", args.port))?;
        let port = listener.local_addr()?.port();
        let session = Arc::new(olm_console::Session::new(port).context("cannot make the console's secret token")?);
        println!("olm console: {} (the link works once; it acts with your kubeconfig's credentials; Ctrl-C stops it)", session.url());
        if args.open && std::process::Command::new("xdg-open").arg(session.url()).spawn().is_err() {
            eprintln!("note: could not open a browser (xdg-open); open the URL above");
        }
        let shutdown = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        olm_console::serve(listener, client, namespace, session, shutdown).await.context("the console stopped")?;
        Ok(ExitCode::SUCCESS)
    })
}
