#!/usr/bin/env bash
# Schema fuzzing of the inventory API: schemathesis generates requests from the OpenAPI document
# the controller serves (valid ones and, from the same schema, invalid ones) and sends them to the
# controller binary running against a real API server. Fails on any 5xx, on an answer whose code,
# content type, headers or body the document does not describe, and on an accepted request the
# schema says is invalid. Bounded: a fixed number of examples per operation, a fixed seed.
#
#   schemathesis_test.sh CONTROLLER_BINARY [EXAMPLES_PER_OPERATION]
set -euo pipefail

# shellcheck source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
controller="$1"
examples="${2:-40}"
controller_pid=""
on_exit '[[ -n "$controller_pid" ]] && kill "$controller_pid" 2>/dev/null && wait "$controller_pid"'

if ! command -v schemathesis >/dev/null; then
  echo "schemathesis is not installed (.ci/install-deps installs it)" >&2
  exit 1
fi

start_cluster
# The caller: a ServiceAccount token for the controller's audience, granted
# everything, so that generated requests get past authorization; schemathesis
# also sends requests without it and with a broken one, which must get 401.
kubectl create serviceaccount schemathesis -n default >/dev/null
kubectl create clusterrolebinding schemathesis --clusterrole=cluster-admin \
  --serviceaccount=default:schemathesis >/dev/null
token="$(kubectl create token schemathesis -n default --audience=resourceslice-controller)"
inventory_port="$(free_port)"
health_port="$(free_port)"
"$controller" --kubeconfig="$cluster/kubeconfig" --auth=tokenreview \
  --inventory-bind-address="127.0.0.1:$inventory_port" --metrics-bind-address=0 \
  --health-probe-bind-address="127.0.0.1:$health_port" >"$work/controller.log" 2>&1 &
controller_pid=$!
wait_ready "$health_port" || {
  echo "the controller did not become ready" >&2
  cat "$work/controller.log" >&2
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
  tail -n 50 "$work/controller.log" >&2
fi
exit "$status"
