#!/usr/bin/env bash
# Heap profiles of `olm run` inside a benchmark: give this script as OLM_BENCH_OLM. Every
# `olm run` the benchmark starts runs under heaptrack (its profile in
# $OLM_HEAPTRACK_OUT/olm-run.PID.zst, default target/olm-heaptrack); other commands run plain.
# The process keeps its PID (exec), so the benchmark's readings and signals still reach it.
#
# heaptrack follows malloc, so build `olm` with the system allocator and line tables first:
#   CARGO_PROFILE_RELEASE_DEBUG=line-tables-only CARGO_PROFILE_RELEASE_STRIP=none \
#     cargo build --release -p olm --no-default-features --target-dir target/heap
#   OLM_BENCH_OLM=bench/olm-heaptrack.sh OLM_BENCH_SIDES=ours target/release/olm-bench --e2e-only --out /tmp/heap.md
#   heaptrack_print -f target/olm-heaptrack/olm-run.PID.zst -F stacks.txt --flamegraph-cost-type peak
# (`olm run` stops on SIGTERM and frees its caches: read the peak, not what is left at exit, or
# what was live at a moment: bench/heaptrack-at.py prints the live heap over time and cuts the
# profile there.)
set -euo pipefail
# The repository: the benchmark runs a copy of this script from under target/.
root="$(cd "$(dirname "$0")" && pwd)"
while [ "$root" != / ] && ! grep -qs '^\[workspace\]' "$root/Cargo.toml"; do root="$(dirname "$root")"; done
bin="${OLM_HEAPTRACK_BIN:-$root/target/heap/release/olm}"
[ -x "$bin" ] || { echo "olm-heaptrack.sh: $bin is missing; build it as this script's comment says" >&2; exit 1; }
if [ "${1:-}" = run ]; then
    out="${OLM_HEAPTRACK_OUT:-$root/target/olm-heaptrack}"
    libexec=/usr/lib/heaptrack
    [ -x "$libexec/libexec/heaptrack_interpret" ] || { echo "olm-heaptrack.sh: heaptrack is not installed ($libexec)" >&2; exit 1; }
    mkdir -p "$out"
    pipe="$(mktemp -u /tmp/olm-heaptrack.XXXXXX)"
    mkfifo "$pipe"
    "$libexec/libexec/heaptrack_interpret" < "$pipe" | zstd -q -c > "$out/olm-run.$$.zst" &
    # Both ends are open within moments; the name is not needed after that.
    (sleep 5; rm -f "$pipe") &
    LD_PRELOAD="$libexec/libheaptrack_preload.so" DUMP_HEAPTRACK_OUTPUT="$pipe" exec "$bin" "$@"
fi
exec "$bin" "$@"
