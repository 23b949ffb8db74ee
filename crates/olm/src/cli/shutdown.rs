//! Stopping the long-running commands (`olm run`, `olm catalog serve`, `olm packageserver`)
//! on SIGTERM or SIGINT. The handlers are installed when [`on_signal`] is called, which each
//! command does before it says it is ready — not when the returned future is first polled:
//! a SIGTERM sent right after the ready line must stop the command gracefully, not kill it
//! (the default action of a signal that no handler holds yet).

use std::future::Future;

use anyhow::Context as _;
use tokio::signal::unix::{SignalKind, signal};

/// Install the SIGTERM and SIGINT handlers now (within a Tokio runtime); the future resolves
/// on the first of them.
pub fn on_signal() -> anyhow::Result<impl Future<Output = ()> + Send + 'static> {
    let mut terminate = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?;
    Ok(async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
    })
}
