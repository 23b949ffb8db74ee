//! The `olm` binary: every subcommand lives in `cli`; `main` only parses and dispatches.

#![forbid(unsafe_code)]

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
