# Shared by the shell tests (sourced, not run): the repository root, a
# temporary folder and a test cluster (test/cluster) that are always removed
# and stopped when the script ends, helpers to start processes on free
# loopback ports, and check functions that count and report results.
# shellcheck shell=bash

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="$(mktemp -d)"
cluster=""

# on_exit COMMAND: evaluated when the script ends (last registered, first
# run), before the cluster is stopped and the temporary folder removed.
exit_commands=()
on_exit() { exit_commands=("$1" "${exit_commands[@]}"); }
cleanup() {
  local command
  for command in "${exit_commands[@]}"; do
    eval "$command" || true
  done
  if [[ -n "$cluster" ]]; then
    "$root/test/cluster/stop" "$cluster" || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
# A command that fails outside a check ends the script (set -e); say where.
trap 'echo "FAIL: ${BASH_SOURCE[0]##*/}:$LINENO: $BASH_COMMAND exited with $?" >&2' ERR

# start_cluster: a real kube-apiserver and etcd for this script in
# $work/cluster, stopped on exit; kube_version is its release (what helm
# renders for).
start_cluster() {
  cluster="$work/cluster"
  "$root/test/cluster/start" --owner-pid $$ "$cluster"
  kube_version="$(kubectl version -o json | jq -r .serverVersion.gitVersion)"
}
kubectl() { "$root/test/cluster/kubectl" "$cluster" "$@"; }
# create_node NAME: a Node object (no kubelet behind it), for node-local pools.
create_node() {
  printf 'apiVersion: v1\nkind: Node\nmetadata:\n  name: %s\n' "$1" | kubectl create -f - >/dev/null
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# wait_ready PORT: true once http://127.0.0.1:PORT/readyz answers 200 (30 s at most).
wait_ready() {
  local _
  for _ in $(seq 300); do
    curl -sf "http://127.0.0.1:$1/readyz" >/dev/null && return 0
    sleep 0.1
  done
  return 1
}

# now: seconds since the epoch, with nanoseconds.
now() { date +%s.%N; }
# fatal MESSAGE: a failure the rest of the script cannot go on from. Scripts
# that have more to show (logs, the cluster's state) define their own.
fatal() {
  echo "FAIL: $1" >&2
  exit 1
}
# poll SECONDS COMMAND...: polls COMMAND every 0.2 s until it succeeds (true)
# or SECONDS pass (false).
poll() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}
# wait_for SECONDS WHAT COMMAND...: poll, and fatal on timeout.
wait_for() {
  local seconds="$1" what="$2"
  shift 2
  poll "$seconds" "$@" || fatal "$what: not within ${seconds}s"
}

passed=0
failed=0
pass() { passed=$((passed + 1)); echo "ok: $1"; }
fail() {  # fail NAME DETAIL...: printed one to a line, indented.
  failed=$((failed + 1))
  printf 'FAIL: %s\n' "$1"
  printf '  %s\n' "${@:2}"
}
check() {  # check NAME EXPECTED ACTUAL
  if [[ "$2" == "$3" ]]; then pass "$1"; else fail "$1" "expected: $2" "actual:   $3"; fi
}
check_contains() {  # check_contains NAME NEEDLE HAYSTACK
  if [[ "$3" == *"$2"* ]]; then pass "$1"; else fail "$1" "expected to contain: $2" "actual: $3"; fi
}
check_ok() {  # check_ok NAME COMMAND... : the command succeeds
  local out
  if out="$("${@:2}" 2>&1)"; then pass "$1"; else fail "$1" "$out"; fi
}
finish() {
  echo "$passed passed, $failed failed"
  [[ "$failed" == 0 ]]
}
