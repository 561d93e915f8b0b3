#!/usr/bin/env bash
# The controller binary runs with the chart's own ServiceAccount token and
# RBAC, and with the arguments the chart's Deployment gives it, against the
# real API server: it elects a leader, authenticates a driver pod's token,
# publishes over the HTTPS the chart configures by default (a self-signed CA
# the controller makes under the chart's Role, published in the driver's
# namespace, which the driver trusts alone, for the Service's name); then one
# verb is removed from the chart's ClusterRole and the
# controller reports a clear "forbidden" error naming what it could not do.
# The uninstall hook's --cleanup then runs under the hook's own account, with
# the Job's arguments: it takes the leader Lease, deletes, gives it back.
# Usage: chart_controller_test.sh CONTROLLER_BINARY
set -euo pipefail
binary="$1"
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

start_cluster
ns=rsc-system
release=rsc
sa="$release-resourceslice-controller"
kubectl create namespace "$ns" >/dev/null
kubectl create namespace drivers >/dev/null

values=(--set 'drivers[0].name=gpu-driver' --set 'drivers[0].namespace=drivers'
        --set 'drivers[0].driverNames[0]=gpu.example.com')
apply_chart "$release" "${values[@]}"
kubeconfig_for "$sa" "$work/controller.kubeconfig"
start_controller "$binary" "$work/controller.kubeconfig"
# A loop, not `printf | grep -q`: grep -q exits at the first match, printf
# then writes into a closed pipe, and under pipefail its SIGPIPE made the
# check fail now and then.
leader_elect=false
for a in "${controller_args[@]}"; do [[ "$a" == --leader-elect=true ]] && leader_elect=true; done
check "the chart runs the controller with leader election" "true" "$leader_elect"

ready=false
wait_ready "$health_port" && ready=true
check "the controller becomes ready under the chart's ServiceAccount" true "$ready"

lease_holder() { kubectl -n "$ns" get lease "$sa" -o jsonpath='{.spec.holderIdentity}' 2>/dev/null || true; }
holder=""
for _ in $(seq 100); do
  holder="$(lease_holder)"
  [[ -n "$holder" ]] && break
  sleep 0.1
done
check_contains "it elects itself leader on the chart's Lease" "controller-0_" "$holder"

# /metrics as the chart configures it: HTTPS, reviewed with the chart's own
# ClusterRole (tokenreviews, subjectaccessreviews): no token, no scrape.
check "the chart's /metrics refuses a scrape without a token" 401 \
  "$(curl -sk -o /dev/null -w '%{http_code}' --max-time 10 "https://127.0.0.1:$metrics_port/metrics")"

# A driver pod on node-a, with a token for the controller's audience.
for node in node-a node-b; do create_node "$node"; done
kubectl -n drivers create serviceaccount gpu-driver >/dev/null
driver_token="$(driver_token drivers gpu-driver node-a)"

# The CA bundle as the driver's pod mounts it: the ConfigMap in its namespace.
use_inventory "$release" drivers
check_contains "the CA bundle is published in the driver's namespace" "BEGIN CERTIFICATE" \
  "$(cat "$work/ca.crt")"
check "one Secret holds the CA and the serving certificate" kubernetes.io/tls \
  "$(kubectl -n "$ns" get secret "$release-resourceslice-controller-inventory-tls" -o jsonpath='{.type}')"
check "plain HTTP is not served" 000 \
  "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$inventory_port/openapi.json" || true)"
check "the served certificate is not trusted without the bundle" 000 \
  "$(curl -s -o /dev/null -w '%{http_code}' --resolve "$service_host:$inventory_port:127.0.0.1" \
      "$inventory/openapi.json" || true)"

check "the driver's pod token publishes its node's pool" 200 "$(push "$driver_token" gpu.example.com node-a)"
check "the pool's slice exists" 1 \
  "$(kubectl get resourceslices -l app.kubernetes.io/managed-by=resourceslice-controller \
      --field-selector spec.driver=gpu.example.com -o json | jq '[.items[] | select(.spec.pool.name == "node-a")] | length')"

# Take "create" on resourceslices away from the chart's ClusterRole.
kubectl get clusterrole "$sa" -o json \
  | jq '(.rules[] | select(.resources | index("resourceslices")) | .verbs) |= map(select(. != "create"))' \
  | kubectl replace -f - >/dev/null
# A new pool now needs a create, which the API server refuses.
code="$(icurl -s -o "$work/answer" -w '%{http_code}' -X PUT -H 'Content-Type: application/json' \
  -H "Authorization: Bearer $driver_token" \
  --data '{"nodeName": "node-a", "devices": [{"name": "gpu-1"}]}' \
  "$inventory/v1/drivers/gpu.example.com/pools/node-a-extra?wait=5s")"
check "without create the push is accepted but not published" 202 "$code"
status=""
for _ in $(seq 100); do
  status="$(icurl -s -H "Authorization: Bearer $driver_token" \
    "$inventory/v1/drivers/gpu.example.com/pools/node-a-extra")"
  [[ "$(jq -r .phase <<<"$status")" == Failed ]] && break
  sleep 0.1
done
check "the pool's status says Failed" Failed "$(jq -r .phase <<<"$status")"
check_contains "the error names the refused call" 'create ResourceSlice' "$(jq -r .lastError.message <<<"$status")"
check_contains "the error says the API server forbade it" 'forbidden' "$(jq -r .lastError.message <<<"$status")"
check_contains "the controller logs the same error" 'is forbidden' "$(cat "$work/controller.log")"

# SIGTERM: exit 0 and the Lease given up.
kill -TERM "$controller_pid"
rc=0
wait "$controller_pid" || rc=$?
controller_pid=""
check "SIGTERM exits 0" 0 "$rc"
check "the Lease is released" "" "$(lease_holder)"

# The uninstall hook: --cleanup under the hook's own ServiceAccount, with the
# Job's arguments (fenced by the leader Lease).
kubeconfig_for "$release-resourceslice-controller-cleanup" "$work/cleanup.kubeconfig"
check_contains "the Job runs --cleanup under the Lease" "--cleanup --leader-elect=true" "${cleanup_args[*]}"
rc=0
"$binary" --kubeconfig "$work/cleanup.kubeconfig" "${cleanup_args[@]}" >"$work/cleanup.log" 2>&1 || rc=$?
check "--cleanup succeeds with the hook's RBAC" 0 "$rc"
[[ "$rc" == 0 ]] || cat "$work/cleanup.log"
check_contains "--cleanup held the leader Lease while deleting" "holding the leader Lease" "$(cat "$work/cleanup.log")"
check "--cleanup released the Lease" "" "$(lease_holder)"
check "no managed slice is left" 0 \
  "$(kubectl get resourceslices -l app.kubernetes.io/managed-by=resourceslice-controller -o json | jq '.items | length')"

if [[ "$failed" != 0 ]]; then
  echo "--- controller log"
  tail -50 "$work/controller.log"
fi
finish
