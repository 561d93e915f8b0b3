# Shared by the e2e tests (sourced, not run): the chart tests' helpers
# (test/charts/lib.sh: helm, checks, a temporary folder), plus a test cluster
# with a real node (test/cluster/start --node: kube-controller-manager,
# kube-scheduler, kube-proxy, containerd and a kubelet registering node-a) and
# the images built from the tree (test/image/build), imported into the node.
# A node changes the machine (mounts, iptables chains, sysctls) and needs
# root; without root the test is skipped (exit 77), and says so.
# shellcheck shell=bash

if [[ "$(id -u)" != 0 ]]; then
  echo "SKIP: the e2e tests start a kubelet and containerd, which need root" >&2
  exit 77
fi

# shellcheck source=../charts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../charts/lib.sh"

# since T: seconds since T (from now, test/lib.sh), to 0.1 s.
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# figure NAME VALUE: one of the figures the suite reports, collected in
# $work/figures and printed together at the end (and on each line as it comes).
figure() {
  echo "figure: $1: $2"
  printf '%-50s %s\n' "$1" "$2" >>"$work/figures"
}
print_figures() {
  [[ -f "$work/figures" ]] || return 0
  echo "=== figures"
  cat "$work/figures"
}

# fatal MESSAGE: a failure the rest of the test cannot go on from; shows what
# the cluster says about its pods first.
fatal() {
  echo "FAIL: $1" >&2
  diagnose >&2 || true
  exit 1
}
diagnose() {
  [[ -n "$cluster" && -f "$cluster/kubeconfig" ]] || return 0
  echo "--- pods"
  kubectl get pods -A -o wide 2>&1 | head -40
  echo "--- events (last 30)"
  kubectl get events -A --sort-by=.lastTimestamp 2>&1 | tail -30
  local pod
  for pod in $(kubectl get pods -n "${ns:-default}" -o name 2>/dev/null); do
    echo "--- logs of $pod (last 20 lines)"
    kubectl logs -n "${ns:-default}" "$pod" --all-containers --tail=20 2>&1 || true
  done
}

# start_node_cluster: the test cluster with a real node in $work/cluster,
# stopped on exit (the --owner-pid watchdog stops it if this script is killed).
start_node_cluster() {
  cluster="$work/cluster"
  local t0
  t0="$(now)"
  "$root/test/cluster/start" --node --owner-pid $$ "$cluster"
  figure "cluster with a Ready node started in (s)" "$(since "$t0")"
  kube_version="$(kubectl version -o json | jq -r .serverVersion.gitVersion)"
  node="$(cat "$cluster/node")"
}

# build_image [--driver]: builds (or finds) an image with test/image/build,
# imports it into the node's containerd and sets image_ref to its reference
# and image_mib to its size.
build_image() {
  local archive
  archive="$("$root/test/image/build" "$@")"
  image_ref="$(cat "${archive%.tar}.ref")"
  [[ -f "$archive" && -n "$image_ref" ]] || fatal "test/image/build $*: no archive or reference"
  image_mib="$(podman image inspect --format '{{.Size}}' "$image_ref" | awk '{ printf "%.1f", $1 / 1048576 }')"
  "$root/test/cluster/load-image" "$cluster" "$archive" >/dev/null
}

# apiserver_writes RESOURCE: how many writes (create, update, patch, apply,
# delete, deletecollection) of RESOURCE the API server has served, as its own
# apiserver_request_total counts them (dry runs excluded).
apiserver_writes() {
  kubectl get --raw /metrics | awk -v r="resource=\"$1\"" '
    /^apiserver_request_total\{/ && index($0, r) && index($0, "dry_run=\"\"") &&
      $0 ~ /verb="(POST|PUT|PATCH|APPLY|DELETE|DELETECOLLECTION)"/ { n += $NF }
    END { printf "%d\n", n }'
}
