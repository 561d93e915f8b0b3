#!/usr/bin/env bash
# Schema fuzzing of the inventory API: schemathesis generates requests from the OpenAPI document
# the controller serves (valid ones and, from the same schema, invalid ones) and sends them to the
# controller binary running against a real API server. Fails on any 5xx, on an answer whose code,
# content type, headers or body the document does not describe, and on an accepted request the
# schema says is invalid. Bounded: a fixed number of examples per operation, a fixed seed.
#
#   schemathesis_test.sh CONTROLLER_BINARY [EXAMPLES_PER_OPERATION]
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
controller="$1"
examples="${2:-40}"
dir="$(mktemp -d)"
controller_pid=""
cleanup() {
  [[ -n "$controller_pid" ]] && kill "$controller_pid" 2>/dev/null && wait "$controller_pid" || true
  "$root/test/cluster/stop" "$dir" || true
  rm -rf "$dir"
}
trap cleanup EXIT

if ! command -v schemathesis >/dev/null; then
  echo "schemathesis is not installed (.ci/install-deps installs it)" >&2
  exit 1
fi

"$root/test/cluster/start" --owner-pid $$ "$dir"
# The caller: a ServiceAccount token for the controller's audience, granted
# everything, so that generated requests get past authorization; schemathesis
# also sends requests without it and with a broken one, which must get 401.
kubectl() { "$root/test/cluster/kubectl" "$dir" "$@"; }
kubectl create serviceaccount schemathesis -n default >/dev/null
kubectl create clusterrolebinding schemathesis --clusterrole=cluster-admin \
  --serviceaccount=default:schemathesis >/dev/null
token="$(kubectl create token schemathesis -n default --audience=resourceslice-controller)"
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
inventory_port="$(free_port)"
health_port="$(free_port)"
"$controller" --kubeconfig="$dir/kubeconfig" --auth=tokenreview \
  --inventory-bind-address="127.0.0.1:$inventory_port" --metrics-bind-address=0 \
  --health-probe-bind-address="127.0.0.1:$health_port" >"$dir/controller.log" 2>&1 &
controller_pid=$!
for _ in $(seq 1 300); do
  curl -sf "http://127.0.0.1:$health_port/readyz" >/dev/null && break
  sleep 0.1
done
curl -sf "http://127.0.0.1:$health_port/readyz" >/dev/null || {
  echo "the controller did not become ready" >&2
  cat "$dir/controller.log" >&2
  exit 1
}

# positive_data_acceptance is left out: the schema cannot say everything the
# API server's validation says (name rules, limits across fields), so a
# schema-valid pool may rightly get 422.
status=0
schemathesis run "http://127.0.0.1:$inventory_port/openapi.json" \
  --checks all --exclude-checks positive_data_acceptance \
  --header "Authorization: Bearer $token" \
  --max-examples "$examples" --generation-deterministic \
  --request-timeout 30 --continue-on-failure --no-color || status=$?
if ((status != 0)); then
  echo "--- controller log (last 50 lines)" >&2
  tail -n 50 "$dir/controller.log" >&2
fi
exit "$status"
