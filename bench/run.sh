#!/bin/sh
# Regenerate BENCHMARKS.md: build `olm` and the harness in release mode, then run the harness.
# (Not `cargo run`: it would hold cargo's build lock for the whole run.) Arguments go to
# olm-bench: --quick, --no-e2e, --out FILE, --fbc DIR.
set -eu
cd "$(dirname "$0")/.."
cargo build --release -p olm -p olm-bench
exec "${CARGO_TARGET_DIR:-target}/release/olm-bench" "$@"
