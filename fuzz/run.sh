#!/usr/bin/env bash
# Fuzz every target for SECONDS each (default 10), one after another, with one job:
#   bash fuzz/run.sh 10                 # the short CI run: keeps the targets building
#   bash fuzz/run.sh 600 cel_rule       # one target, longer
#   FUZZ_RUNS=1000000 bash fuzz/run.sh 0 fbc_load   # until 10^6 executions, however long
#   FUZZ_FORK=2 FUZZ_RUNS=1000000 bash fuzz/run.sh 0 fbc_load   # the same, on two cores: one
#       libFuzzer run (fork mode) whose workers share the corpus; -runs counts them all
#   FUZZ_BUILD_ONLY=1 bash fuzz/run.sh  # build every target, run none
# Each target's seeds (fuzz/seeds/<target>) are copied into its corpus: for long runs (over a
# minute, or FUZZ_RUNS) fuzz/corpus/<target>, not committed, which keeps what libFuzzer finds
# between runs; for short ones a scratch directory. The large hostile inputs of issue #25
# (fuzz/hostile.py large) are run once, then the target is fuzzed. Exits non-zero when a target crashes, hangs (-timeout) or runs out of
# memory (-rss_limit_mb); the input is left in fuzz/artifacts/<target>/.
set -euo pipefail

seconds="${1:-10}"
shift || true
cd "$(dirname "$0")"

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    echo "fuzz: skipped: no nightly toolchain (rustup toolchain install nightly)"
    exit 0
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi

targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
    mapfile -t targets < <(cargo +nightly fuzz list)
fi

# FUZZ_SANITIZER=none for the long runs: the targets are safe Rust, and without AddressSanitizer
# they run several times faster (panics, hangs and -rss_limit_mb still fail them).
sanitizer=(-s "${FUZZ_SANITIZER:-address}")
cargo +nightly fuzz build "${sanitizer[@]}"
# FUZZ_BUILD_ONLY=1: build and stop (CI builds in the background and runs the targets later,
# with the same settings, so that the run does not build again).
if [ -n "${FUZZ_BUILD_ONLY:-}" ]; then
    echo "fuzz: every target built"
    exit 0
fi

large="$(mktemp -d)"
# libFuzzer leaves a shared-memory directory per process.
trap 'rm -rf "$large" /dev/shm/olm-fuzz-*' EXIT
python3 hostile.py large "$large"

# No leak detection: semver keeps its heap pointers encoded, so LeakSanitizer reports the
# versions of catalogs kept for the process as leaks. Unbounded growth still fails on
# -rss_limit_mb.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0}"

status=0
summary=()
for target in "${targets[@]}"; do
    # Long runs grow fuzz/corpus/<target>; a short run starts from the seeds alone, so that it
    # takes seconds however large a developer's corpus has grown (loading 6,000 grown
    # catalogs under AddressSanitizer alone took ten minutes).
    if [ -n "${FUZZ_RUNS:-}" ] || [ "$seconds" -gt 60 ]; then
        corpus="corpus/$target"
    else
        corpus="$large/corpus-$target"
    fi
    mkdir -p "$corpus" "artifacts/$target"
    cp -r "seeds/$target/." "$corpus/"
    flags=(-rss_limit_mb=2048 -print_final_stats=1 -detect_leaks=0 "-artifact_prefix=artifacts/$target/")
    if [ -d "$large/$target" ]; then
        echo "== $target: large hostile inputs"
        if ! cargo +nightly fuzz run "${sanitizer[@]}" "$target" "$large/$target"/* -- "${flags[@]}" -timeout=60 -runs=1; then
            summary+=("$target: FAILED on a large hostile input")
            status=1
            continue
        fi
    fi
    if [ -n "${FUZZ_RUNS:-}" ]; then
        limit=(-runs="$FUZZ_RUNS")
        echo "== $target: fuzzing for $FUZZ_RUNS executions"
    else
        limit=(-max_total_time="$seconds")
        echo "== $target: fuzzing for ${seconds}s"
    fi
    if [ -n "${FUZZ_FORK:-}" ]; then
        limit+=(-fork="$FUZZ_FORK")
    fi
    started=$(date +%s)
    log="$(mktemp)"
    # Seeds up to 64 KiB: the real catalog files chosen as seeds fit; larger inputs are the
    # large hostile ones above.
    set +e
    cargo +nightly fuzz run "${sanitizer[@]}" "$target" "$corpus" -- "${flags[@]}" -timeout=10 -max_len=65536 \
        "${limit[@]}" >"$log" 2>&1
    result=$?
    set -e
    grep -E '^(#[0-9]+ *(INITED|DONE)|==[0-9]+== ERROR|SUMMARY|artifact_prefix|Test unit written|INFO: fuzzed for|INFO: exiting)' "$log" || true
    if [ -n "${FUZZ_FORK:-}" ]; then
        # Fork mode: the parent's progress lines ("#<runs>: cov: … exec/s: …") count every worker.
        runs=$(grep -oE '^#[0-9]+: cov' "$log" | tail -n 1 | grep -oE '[0-9]+' || echo "?")
        rate=$(( ${runs/\?/0} / ( $(date +%s) - started + 1 ) ))
    else
        runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo "?")
        rate=$(grep -oE 'stat::average_exec_per_sec: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo "?")
    fi
    if [ "$result" -ne 0 ]; then
        tail -n 60 "$log"
        summary+=("$target: FAILED (exit $result) after $runs executions; see fuzz/artifacts/$target/")
        status=1
    else
        summary+=("$target: $runs executions in $(( $(date +%s) - started ))s ($rate exec/s)")
    fi
    rm -f "$log"
done

echo "== fuzz summary"
printf '  %s\n' "${summary[@]}"
exit "$status"
