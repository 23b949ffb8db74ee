//! `olm crds`: the CRDs generated from the Rust types in `olm-api`.

use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct CrdsArgs {}

pub fn run(_args: CrdsArgs) -> anyhow::Result<ExitCode> {
    // Filled in by the olm-api work: print olm_api::crds::render_all().
    anyhow::bail!("not yet implemented")
}
