# Shared by the chart tests (sourced, not run): paths, a helm built by
# test/helm/build with its state in a temporary folder, a test cluster that is
# always stopped, and check functions that count and report results.
# shellcheck shell=bash

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
chart="$root/charts/resourceslice-controller"
values_all="$root/test/charts/values-all.yaml"
work="$(mktemp -d)"
cluster=""

cleanup() {
  if [[ -n "$cluster" ]]; then
    "$root/test/cluster/stop" "$cluster" || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
# A command that fails outside a check ends the script (set -e); say where.
trap 'echo "FAIL: ${BASH_SOURCE[0]##*/}:$LINENO: $BASH_COMMAND exited with $?" >&2' ERR

helm_bin="$("$root/test/helm/build")/helm"
# helm keeps repositories, plugins and caches under these; a test must not read
# or change the user's.
export HELM_CACHE_HOME="$work/helm/cache" HELM_CONFIG_HOME="$work/helm/config" \
  HELM_DATA_HOME="$work/helm/data"
helm() { "$helm_bin" "$@"; }

# start_cluster: a real kube-apiserver and etcd for this script, stopped on exit.
start_cluster() {
  cluster="$work/cluster"
  "$root/test/cluster/start" --owner-pid $$ "$cluster"
  kube_version="$(kubectl version -o json | jq -r .serverVersion.gitVersion)"
}
kubectl() { "$root/test/cluster/kubectl" "$cluster" "$@"; }

passed=0
failed=0
check() {  # check NAME EXPECTED ACTUAL
  if [[ "$2" == "$3" ]]; then
    passed=$((passed + 1)); echo "ok: $1"
  else
    failed=$((failed + 1)); printf 'FAIL: %s\n  expected: %s\n  actual:   %s\n' "$1" "$2" "$3"
  fi
}
check_contains() {  # check_contains NAME NEEDLE HAYSTACK
  if [[ "$3" == *"$2"* ]]; then
    passed=$((passed + 1)); echo "ok: $1"
  else
    failed=$((failed + 1)); printf 'FAIL: %s\n  expected to contain: %s\n  actual: %s\n' "$1" "$2" "$3"
  fi
}
check_ok() {  # check_ok NAME COMMAND... : the command succeeds
  local out
  if out="$("${@:2}" 2>&1)"; then
    passed=$((passed + 1)); echo "ok: $1"
  else
    failed=$((failed + 1)); printf 'FAIL: %s\n  %s\n' "$1" "$out"
  fi
}
finish() {
  echo "$passed passed, $failed failed"
  [[ "$failed" == 0 ]]
}

# The chart's parameters: the schema's properties, descending into inline
# objects but not into $ref'd Kubernetes-like types (securityContext, resources,
# ...), which are documented as one value.
chart_params() {
  jq -r 'def params(p): (.properties // {}) | to_entries[]
           | (p + [.key]) as $k
           | if (.value.properties and (.value["$ref"] | not)) then (.value | params($k))
             else ($k | join(".")) end;
         params([])' "$chart/values.schema.json"
}

# values_json FILE: a values file as JSON, read by helm itself (through a chart
# whose one template prints its values), so YAML is parsed the way helm does.
values_json() {
  local dump="$work/values-dump"
  if [[ ! -d "$dump" ]]; then
    mkdir -p "$dump/templates"
    printf 'apiVersion: v2\nname: values-dump\nversion: 0.0.0\n' >"$dump/Chart.yaml"
    printf '{{ toJson .Values }}\n' >"$dump/templates/values.json"
  fi
  helm template dump "$dump" -f "$1" | sed -n '/^{/p'
}
