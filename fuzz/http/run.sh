#!/usr/bin/env bash
# Schema fuzzing of the HTTP servers with schemathesis (issue #20, item 4): every operation of
# each server's own OpenAPI document, with every check (no server error, status codes,
# content types, headers and bodies as declared, invalid input refused, valid input accepted).
#
#   bash fuzz/http/run.sh 10              # short (CI): 10 test cases per operation, both servers
#   bash fuzz/http/run.sh 1000            # long: 1000 per operation (100 or more: the
#                                         # packageserver's fuzzing phase too, see below)
#   bash fuzz/http/run.sh 200 catalog     # one server: catalog or packageserver
#
# catalog:       `olm catalog serve` over crates/olm-registry/testdata/catalog (etcd, demo),
#                fuzzed from its /openapi.json.
# packageserver: the package server's router and TLS layer (crates/olm-packageserver/examples/
#                fuzz_server.rs) over the etcd fixture, fuzzed from /openapi/v3/apis/
#                packages.operators.coreos.com/v1 as kube-apiserver's front proxy calls it: a
#                client certificate of the front-proxy CA and X-Remote-User.
#
# schemathesis is installed from PyPI into a cached venv (SCHEMATHESIS_VENV, default
# ~/.cache/olm-dev/venv-schemathesis). Prints test cases and requests per operation, failures,
# and the server's peak RSS; exits non-zero on any failure, or when a server died. A failed
# run's reports (NDJSON with every request and answer, JUnit) are kept in fuzz/http/reports/.
set -euo pipefail

examples="${1:-20}"
shift || true
servers=("$@")
[ "${#servers[@]}" -eq 0 ] && servers=(catalog packageserver)

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
version="4.32.5"
venv="${SCHEMATHESIS_VENV:-$HOME/.cache/olm-dev/venv-schemathesis}"

if ! "$venv/bin/schemathesis" --version 2>/dev/null | grep -q "$version"; then
    echo "== installing schemathesis $version into $venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet "schemathesis==$version"
fi

work="$(mktemp -d)"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Waits for "$1" (a URL) to answer; extra curl-like options for TLS are not needed: any
# answer, even 401, means the server is up.
wait_up() {
    python3 - "$1" "$2" <<'PY'
import ssl, sys, time, urllib.request, urllib.error
url, pid = sys.argv[1], int(sys.argv[2])
context = ssl._create_unverified_context()
for _ in range(600):
    try:
        urllib.request.urlopen(url, timeout=2, context=context)
        sys.exit(0)
    except urllib.error.HTTPError:
        sys.exit(0)
    except Exception:
        try:
            import os
            os.kill(pid, 0)
        except OSError:
            sys.exit(f"the server exited before answering {url}")
        time.sleep(0.1)
sys.exit(f"{url} did not answer within 60 s")
PY
}

status=0
summary=()

# run_schemathesis NAME PID [schemathesis options...] SCHEMA_URL [schemathesis options...]
run_schemathesis() {
    local name="$1" pid="$2"
    shift 2
    local report="$work/$name"
    mkdir -p "$report"
    echo "== $name: schemathesis, $examples test cases per operation"
    local started result
    started=$(date +%s)
    set +e
    "$venv/bin/schemathesis" run --checks all --max-examples "$examples" --seed 20 \
        --workers 2 --request-timeout 30 --report ndjson,junit --report-dir "$report" \
        --no-color "$@"
    result=$?
    set -e
    local elapsed=$(( $(date +%s) - started ))
    local rss="?"
    if kill -0 "$pid" 2>/dev/null; then
        rss=$(awk '/VmHWM/ {printf "%d MiB", $2 / 1024}' "/proc/$pid/status")
    else
        echo "$name: the server died during the run; its log:"
        tail -n 40 "$work/$name.log"
        result=1
    fi
    python3 "$here/summary.py" "$report"/*.ndjson
    if [ "$result" -ne 0 ]; then
        # Kept for `st replay` and a look at every request: the work directory is removed.
        mkdir -p "$here/reports"
        cp -r "$report" "$here/reports/$name-$(date +%Y%m%dT%H%M%S)"
        summary+=("$name: FAILED (schemathesis exit $result) in ${elapsed}s; server peak RSS $rss")
        status=1
    else
        summary+=("$name: ok in ${elapsed}s; server peak RSS $rss")
    fi
}

for server in "${servers[@]}"; do
    case "$server" in
    catalog)
        (cd "$root" && cargo build --quiet -p olm)
        port=$(free_port)
        grpc_port=$(free_port)
        "$target/debug/olm" catalog serve --catalog "community=$root/crates/olm-registry/testdata/catalog" \
            --http-addr "127.0.0.1:$port" --grpc-addr "127.0.0.1:$grpc_port" --reload-interval 0 \
            >"$work/catalog.log" 2>&1 &
        pids+=($!)
        wait_up "http://127.0.0.1:$port/healthz" "$!"
        run_schemathesis catalog "${pids[-1]}" "http://127.0.0.1:$port/openapi.json"
        ;;
    packageserver)
        (cd "$root" && cargo build --quiet -p olm-packageserver --example fuzz_server)
        port=$(free_port)
        "$target/debug/examples/fuzz_server" "$root/crates/olm-packageserver/testdata/etcd" "127.0.0.1:$port" "$work/certs" \
            >"$work/packageserver.log" 2>&1 &
        pids+=($!)
        wait_up "https://127.0.0.1:$port/healthz" "$!"
        # The selector patterns (the parsers' grammar, key and value lengths included) make
        # hypothesis slow, seconds per case: the short run keeps to the examples and coverage
        # phases (every parameter's boundaries, positive and negative), the long one fuzzes too.
        phases=(--phases examples,coverage)
        if [ "$examples" -ge 100 ]; then
            phases=(--suppress-health-check too_slow)
        fi
        run_schemathesis packageserver "${pids[-1]}" "${phases[@]}" \
            "https://127.0.0.1:$port/openapi/v3/apis/packages.operators.coreos.com/v1" \
            --url "https://127.0.0.1:$port" \
            --tls-verify "$work/certs/serving-ca.pem" \
            --request-cert "$work/certs/client.pem" --request-cert-key "$work/certs/client-key.pem" \
            -H "X-Remote-User: fuzz" -H "X-Remote-Group: system:authenticated"
        ;;
    *)
        echo "unknown server $server; give catalog or packageserver" >&2
        exit 2
        ;;
    esac
done

echo
echo "== summary ($examples test cases per operation)"
printf '%s\n' "${summary[@]}"
exit "$status"
