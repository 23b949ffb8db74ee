#!/bin/sh
# kubectl-operator's `olmv1` commands (operator-framework/kubectl-operator, the plugin upstream
# ships for OLM v1) against olm-rs's v1 API (issue #53; docs/olmv1.md has the results).
# A benchmark, not CI: it starts a private olm-dev environment of its own.
#
#   KUBECTL_OPERATOR_SRC=<checkout> bench/kubectl-operator-olmv1/run.sh [OUT_DIR]
#
# The Go module proxy here serves kubectl-operator v0.6.0 only, whose `olmv1` commands predate
# the v1 API; the commands are on its main branch, so the plugin is built from a checkout of it
# (KUBECTL_OPERATOR_SRC; checked with commit 2a64180, December 2026), once, into olm-dev's cache.
#
# Each step runs the plugin as a user would and checks what it printed or what it left on the
# cluster; a line `PASS`/`FAIL <step>` each, the plugin's output in OUT_DIR/steps.log.
set -eu
cd "$(dirname "$0")/../.."
src=${KUBECTL_OPERATOR_SRC:-}
if [ -z "$src" ] || [ ! -f "$src/go.mod" ]; then
    echo "KUBECTL_OPERATOR_SRC must name a checkout of github.com/operator-framework/kubectl-operator (main, with internal/cmd/olmv1.go)" >&2
    exit 2
fi
cache=${OLM_DEV_CACHE_DIR:-$HOME/.cache/olm-dev}
out=${1:-target/kubectl-operator-olmv1}
mkdir -p "$out"
out=$(cd "$out" && pwd)
commit=$(cd "$src" && (git rev-parse --short HEAD 2>/dev/null || sha256sum go.sum | cut -c1-8))
plugin_dir=$cache/bin/kubectl-operator-$commit
export GOMODCACHE="$cache/go/mod" GOCACHE="$cache/go/build" GOTOOLCHAIN=local GOFLAGS=-mod=mod
if [ ! -x "$plugin_dir/kubectl-operator" ]; then
    echo "building kubectl-operator $commit (first run only, a few minutes)"
    mkdir -p "$plugin_dir"
    (cd "$src" && go build -o "$plugin_dir/kubectl-operator.partial" .)
    mv "$plugin_dir/kubectl-operator.partial" "$plugin_dir/kubectl-operator"
fi
cargo build -q --release -p olm
olm=$PWD/target/release/olm
base=${OLM_KO_PORT_BASE:-32000}
export OLM_DEV_STATE_DIR="$out/env" OLM_DEV_PORT_BASE=$base
"$olm" dev down --purge >/dev/null 2>&1 || true
"$olm" dev up > "$out/dev-up.log" 2>&1
# Its ports would keep the test suites' environments from starting: down when done, its logs
# kept in OUT_DIR/logs (KEEP=1 leaves it up to look at).
[ "${KEEP:-0}" = 1 ] || trap 'cp -r "$OLM_DEV_STATE_DIR/logs" "$out/" 2>/dev/null; "$olm" dev down --purge >/dev/null 2>&1 || true' EXIT
export KUBECONFIG="$OLM_DEV_STATE_DIR/kubeconfig"
kubectl_dir=$(dirname "$(ls -d "$cache"/bin/k8s-v*/kubectl | tail -n 1)")
# kubectl finds the plugin on PATH as `kubectl operator`.
export PATH="$plugin_dir:$kubectl_dir:$PATH"
registry=127.0.0.1:$((base + 500))
: > "$out/steps.log"
passed=0 failed=0
# step NAME CHECK -- COMMAND...: runs COMMAND, then CHECK (a shell snippet reading $said).
step() {
    name=$1 check=$2
    shift 3
    echo "\$ $*" >> "$out/steps.log"
    said=$("$@" 2>&1) && ran=0 || ran=$?
    printf '%s\n(exit %s)\n\n' "$said" "$ran" >> "$out/steps.log"
    if [ "$ran" -eq 0 ] && eval "$check"; then
        echo "PASS $name"; passed=$((passed + 1))
    else
        echo "FAIL $name (exit $ran): $(printf '%s' "$said" | tail -n 3)"; failed=$((failed + 1))
    fi
}
waited() { # waited SECONDS CHECK: polls CHECK each second
    i=0
    while [ "$i" -lt "$1" ]; do eval "$2" && return 0; i=$((i + 1)); sleep 1; done
    return 1
}

# `--available true`: without it this plugin waits for Serving to be False (it compares the
# unset flag with "Available"), gives up after a minute and deletes the catalog, on any OLM.
step "create catalog (waits until Serving)" 'kubectl get clustercatalog operatorhubio -o jsonpath="{.status.conditions[?(@.type==\"Serving\")].status}" | grep -qx True' -- \
    kubectl operator olmv1 create catalog operatorhubio "$registry/olm/community-catalog:latest" --priority 10 --available true
step "get catalog" 'printf "%s" "$said" | grep -q "operatorhubio.*True"' -- kubectl operator olmv1 get catalog
step "update catalog (priority, labels)" 'kubectl get clustercatalog operatorhubio -o jsonpath="{.spec.priority} {.metadata.labels.tier}" | grep -qx "20 gold"' -- \
    kubectl operator olmv1 update catalog operatorhubio --priority 20 --labels tier=gold
kubectl create namespace etcd-v1 >/dev/null
kubectl -n etcd-v1 create serviceaccount etcd-installer >/dev/null
kubectl create clusterrolebinding etcd-installer --clusterrole=cluster-admin --serviceaccount=etcd-v1:etcd-installer >/dev/null
# `--crd-upgrade-safety-enforcement Strict` (the default it names): unset, the extension has no
# spec.install, and `update extension` then stops on a nil pointer, on any OLM.
step "install extension (version 0.9.2-clusterwide)" 'waited 120 "kubectl get clusterextension etcd -o jsonpath={.status.install.bundle.name} | grep -qx etcdoperator.v0.9.2-clusterwide"' -- \
    kubectl operator olmv1 install extension etcd -n etcd-v1 -p etcd -s etcd-installer -c clusterwide-alpha -v 0.9.2-clusterwide --crd-upgrade-safety-enforcement Strict
step "get extension" 'printf "%s" "$said" | grep -q "etcd.*etcdoperator.v0.9.2-clusterwide"' -- kubectl operator olmv1 get extension
step "the operator's Deployment" 'printf "%s" "$said" | grep -qx etcd-operator' -- kubectl -n etcd-v1 get deployments -o "jsonpath={.items[*].metadata.name}"
step "update extension (to 0.9.4-clusterwide)" 'waited 120 "kubectl get clusterextension etcd -o jsonpath={.status.install.bundle.name} | grep -qx etcdoperator.v0.9.4-clusterwide"' -- \
    kubectl operator olmv1 update extension etcd -v 0.9.4-clusterwide
# search reaches a catalog by port-forwarding to a pod behind the Service its URL names: on
# `olm dev up` the URL is the host's (127.0.0.1), so there is none; not counted, what it said shown.
said=$(kubectl operator olmv1 search catalog --catalog operatorhubio 2>&1 || true)
printf '$ kubectl operator olmv1 search catalog --catalog operatorhubio\n%s\n\n' "$said" >> "$out/steps.log"
echo "NOTE search catalog (not counted: OLM runs on the host, no Service to forward to): $(printf '%s' "$said" | tail -n 1)"
step "delete extension" 'waited 60 "! kubectl -n etcd-v1 get deployment etcd-operator >/dev/null 2>&1"' -- kubectl operator olmv1 delete extension etcd
step "delete catalog" '! kubectl get clustercatalog operatorhubio >/dev/null 2>&1' -- kubectl operator olmv1 delete catalog operatorhubio
echo "kubectl-operator $commit olmv1: $passed passed, $failed failed; output in $out/steps.log"
[ "$failed" -eq 0 ]
