//! The `olm` binary: every subcommand lives in `cli`; `main` only parses and dispatches.

#![forbid(unsafe_code)]

mod cli;

// jemalloc, configured in .cargo/config.toml: glibc malloc kept up to twice the live heap
// resident after the bursts of decoding a watch cache goes through.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    cli::main()
}
