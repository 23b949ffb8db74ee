#!/bin/sh
# operator-controller v1.11.0's own e2e suite (Godog features under test/e2e/features) against
# olm-rs's OLM v1 API (issue #53; docs/olmv1.md has the results and what each failure means).
# A benchmark, not CI: it starts a private olm-dev environment of its own.
#
#   bench/operator-controller-e2e/run.sh [OUT_DIR] [FEATURE...]
#
# FEATUREs are paths under the suite's test/e2e (default: the features that exercise the v1 API
# rather than upstream's own Deployments). GODOG_TAGS overrides the tag filter, GODOG_CONCURRENCY
# the scenarios run at once (default 2), E2E_STEP_TIMEOUT each step's wait (the suite's default 5m).
#
# What it does, without changing upstream's code:
# - builds the suite once with `go test -c` through a consumer module (as bench/upstream-e2e does
#   for OLM v0's), into olm-dev's cache;
# - starts `olm dev up` on its own ports (OLM_OC_E2E_PORT_BASE, default 31000) with a kwok
#   ClusterPortForward from the stand-in registry pod's port 5000 to olm-dev's registry;
# - applies stand-in.yaml (what the suite reads of upstream's install: see there);
# - runs the suite with CLUSTER_REGISTRY_HOST set to olm-dev's registry, the junit report in OUT_DIR.
set -eu
cd "$(dirname "$0")/../.."
root=$PWD
version=v1.11.0
module=github.com/operator-framework/operator-controller
cache=${OLM_DEV_CACHE_DIR:-$HOME/.cache/olm-dev}
out=${1:-target/operator-controller-e2e}
[ $# -gt 0 ] && shift
mkdir -p "$out"
out=$(cd "$out" && pwd)
base=${OLM_OC_E2E_PORT_BASE:-31000}
registry=127.0.0.1:$((base + 500))

# The suite, built once.
src=$cache/src/operator-controller-e2e-$version
bin=$cache/bin/operator-controller-e2e-$version/e2e.test
export GOMODCACHE="$cache/go/mod" GOCACHE="$cache/go/build" GOTOOLCHAIN=local GOFLAGS=-mod=mod
if [ ! -x "$bin" ]; then
    echo "building operator-controller $version's e2e suite (go test -c; first run only, about 4 minutes)"
    mkdir -p "$src" "$(dirname "$bin")"
    [ -f "$src/go.mod" ] || (cd "$src" && go mod init local.invalid/operator-controller-e2e)
    (cd "$src" && go mod edit "-require=$module@$version" && go test -c -vet=off -o "$bin.partial" "$module/test/e2e")
    mv "$bin.partial" "$bin"
fi
suite=$(cd "$src" && go list -m -f '{{.Dir}}' "$module")/test/e2e

# OLM on a private environment, the registry pod forwarded by kwok.
cargo build -q --release -p olm
olm=$root/target/release/olm
cat > "$out/kwok-port-forward.yaml" <<YAML
kind: ClusterPortForward
apiVersion: kwok.x-k8s.io/v1alpha1
metadata:
  name: e2e-registry
spec:
  selector:
    matchNamespaces: [operator-controller-e2e]
  forwards:
  - ports: [5000]
    target: {port: $((base + 500)), address: 127.0.0.1}
YAML
export OLM_DEV_STATE_DIR="$out/env" OLM_DEV_PORT_BASE=$base OLM_DEV_KWOK_CONFIG="$out/kwok-port-forward.yaml"
"$olm" dev down --purge >/dev/null 2>&1 || true
"$olm" dev up
# Its ports would keep the test suites' environments from starting: down when done, its logs
# kept in OUT_DIR/logs (KEEP=1 leaves it up to look at).
[ "${KEEP:-0}" = 1 ] || trap 'cp -r "$OLM_DEV_STATE_DIR/logs" "$out/" 2>/dev/null; "$olm" dev down --purge >/dev/null 2>&1 || true' EXIT
export KUBECONFIG="$OLM_DEV_STATE_DIR/kubeconfig"
kubectl=$(ls -d "$cache"/bin/k8s-v*/kubectl | tail -n 1)
"$kubectl" apply -f bench/operator-controller-e2e/stand-in.yaml
"$kubectl" -n olm rollout status deployment/operator-controller-controller-manager --timeout=120s
"$kubectl" -n operator-controller-e2e rollout status deployment/docker-registry --timeout=120s

[ $# -gt 0 ] || set -- features/install.feature features/update.feature features/recover.feature features/uninstall.feature features/vap-access-control.feature
start=$(date +%s)
status=0
(cd "$suite" && CLUSTER_REGISTRY_HOST=$registry "$bin" --k8s.cli="$kubectl" \
    --godog.concurrency="${GODOG_CONCURRENCY:-2}" \
    --godog.tags="${GODOG_TAGS:-~@demo && ~@BoxcutterRuntime && ~@DeploymentConfig && ~@mirrored-registry}" \
    --godog.format="pretty,junit:$out/junit.xml" "$@") > "$out/suite.log" 2>&1 || status=$?
echo "suite: exit $status after $(( $(date +%s) - start )) s; log $out/suite.log, junit $out/junit.xml"
grep -o '<testsuites[^>]*>' "$out/junit.xml" || true
