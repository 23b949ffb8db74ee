//! `olm crds`: the CRDs generated from the Rust types in `olm-api`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

#[derive(Debug, clap::Args)]
pub struct CrdsArgs {
    /// Write one file per CRD (`<plural>.<group>.yaml`) into this directory instead of
    /// printing one multi-document stream.
    #[arg(long, value_name = "DIR")]
    output_dir: Option<PathBuf>,
}

pub fn run(args: CrdsArgs) -> anyhow::Result<ExitCode> {
    match args.output_dir {
        Some(dir) => {
            let written = olm_api::crds::write_dir(&dir)?;
            for path in written {
                eprintln!("wrote {}", path.display());
            }
        }
        None => {
            let yaml = olm_api::crds::render_yaml()?;
            let mut stdout = std::io::stdout().lock();
            match stdout.write_all(yaml.as_bytes()).and_then(|()| stdout.flush()) {
                Ok(()) => {}
                // `olm crds | head` closes the pipe early; that is not an error.
                Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => {}
                Err(err) => return Err(err).context("cannot write to standard output"),
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
