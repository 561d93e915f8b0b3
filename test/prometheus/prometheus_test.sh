#!/usr/bin/env bash
# Usage: prometheus_test.sh CONTROLLER_BINARY [PROMETHEUS [PROMTOOL]]
# A real Prometheus scrapes the real controller: the test starts a test cluster
# (test/cluster), the controller with leader election and --metrics-secure on
# free loopback ports (Prometheus scrapes over HTTPS with a real ServiceAccount
# token bound to a reader ClusterRole, as the chart's ServiceMonitor does),
# and Prometheus with the chart's alert rules; pushes pools of two drivers and
# checks, through Prometheus' query API, the exact values of the series that
# dashboards and alerts read (DESIGN.md section 8), that the alert rules load
# and stay quiet for a healthy controller, and that `promtool check metrics`
# finds nothing to say about a scrape. Every wait is bounded; everything
# started here is stopped on exit.
set -euo pipefail

controller_bin="${1:?usage: prometheus_test.sh CONTROLLER_BINARY [PROMETHEUS [PROMTOOL]]}"
prometheus_bin="${2:-prometheus}"
promtool_bin="${3:-promtool}"
# shellcheck source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
rules="$root/charts/resourceslice-controller/rules/alerts.yaml"
job=resourceslice-controller
lease=rsc-prometheus-test
gpu=gpu.example.com
nic=nic.example.com
# 200 devices make two slices (at most 128 devices per slice, DESIGN.md section 5).
gpu_devices=200
nic_devices=10

controller_pid=""
prometheus_pid=""

# alive PID: the process runs (an exited child stays a zombie until waited for).
alive() {
  local state
  state="$(ps -o stat= -p "$1" 2>/dev/null)" && [[ "$state" != Z* ]]
}
stop_process() {  # stop_process PID: SIGTERM, then SIGKILL after 10 s.
  local pid="$1"
  [[ -n "$pid" ]] && alive "$pid" || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 100); do
    alive "$pid" || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
on_exit 'stop_process "$controller_pid"'
on_exit 'stop_process "$prometheus_pid"'

check_true() {  # check_true NAME ACTUAL AWK_CONDITION_ON_x: ACTUAL is a number and meets it.
  if awk -v x="$2" "BEGIN { exit !(x ~ /^[0-9.]+([eE][-+]?[0-9]+)?\$/ && ($3)) }"; then
    pass "$1 ($2)"
  else
    fail "$1" "expected: $3" "actual:   $2"
  fi
}
logs() {
  echo "--- controller log (last 40 lines)"
  tail -n 40 "$work/controller.log" 2>/dev/null || true
  echo "--- prometheus log (last 20 lines)"
  tail -n 20 "$work/prometheus.log" 2>/dev/null || true
}
# fatal MESSAGE: a failure the rest of the test cannot go on from.
fatal() {
  echo "FAIL: $1" >&2
  logs >&2
  exit 1
}

# --- The cluster, its Nodes, the controller.
start_cluster
for node in node-a node-b node-c; do
  create_node "$node"
done

# The scraper: a ServiceAccount that may get /metrics (the chart's
# <fullname>-metrics-reader ClusterRole), and its token.
kubectl create serviceaccount prometheus -n default >/dev/null
kubectl create clusterrole metrics-reader --non-resource-url=/metrics --verb=get >/dev/null
kubectl create clusterrolebinding prometheus-metrics-reader --clusterrole=metrics-reader \
  --serviceaccount=default:prometheus >/dev/null
kubectl create serviceaccount stranger -n default >/dev/null
kubectl create token prometheus -n default --duration=1h >"$work/token"
stranger_token="$(kubectl create token stranger -n default --duration=1h)"

inventory_port="$(free_port)"
metrics_port="$(free_port)"
health_port="$(free_port)"
inventory="http://127.0.0.1:$inventory_port"
metrics="https://127.0.0.1:$metrics_port/metrics"
# scrape [CURL ARGS...]: GET /metrics as the scraper (the certificate is the
# controller's self-signed one, so it is not verified).
scrape() {
  curl -sfk --max-time 5 -H "Authorization: Bearer $(cat "$work/token")" "$@" "$metrics"
}
"$controller_bin" --auth=none --kubeconfig="$cluster/kubeconfig" \
  --inventory-bind-address="127.0.0.1:$inventory_port" \
  --metrics-bind-address="127.0.0.1:$metrics_port" --metrics-secure \
  --health-probe-bind-address="127.0.0.1:$health_port" \
  --leader-elect --leader-election-namespace=default --leader-election-id="$lease" \
  --leader-elect-lease-duration=4s --leader-elect-renew-deadline=3s \
  --leader-elect-retry-period=1s --identity=prometheus-test \
  >"$work/controller.log" 2>&1 &
controller_pid=$!

# scraped SERIES: the value of one exact series in a scrape of the controller.
scraped() {
  scrape | awk -v s="$1" '$1 == s { print $2 }'
}
# scraped_sum NAME: the sum of every series of one metric in a scrape.
scraped_sum() {
  scrape |
    awk -v n="$1" '$1 == n || index($1, n "{") == 1 { s += $2 } END { print s + 0 }'
}
is_leader() { [[ "$(scraped "leader_election_master_status{name=\"$lease\"}")" == 1 ]]; }
wait_for 60 "the controller answers /readyz" curl -sf --max-time 2 "http://127.0.0.1:$health_port/readyz"
wait_for 60 "the controller becomes leader of Lease default/$lease" is_leader
# /metrics answers only the scraper: 401 without a token, 403 without the grant.
status_of() { curl -sk -o /dev/null -w '%{http_code}' --max-time 5 "$@" "$metrics"; }
check "a scrape without a token is refused" 401 "$(status_of)"
check "a scrape with a token lacking the grant is refused" 403 \
  "$(status_of -H "Authorization: Bearer $stranger_token")"
check "the scraper's scrape is answered" 200 "$(status_of -H "Authorization: Bearer $(cat "$work/token")")"

# --- Prometheus, scraping the controller every second with the chart's rules.
prom_port="$(free_port)"
prom="http://127.0.0.1:$prom_port"
cat >"$work/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - $rules
scrape_configs:
  - job_name: $job
    scheme: https
    tls_config:
      insecure_skip_verify: true
    authorization:
      credentials_file: $work/token
    static_configs:
      - targets: ['127.0.0.1:$metrics_port']
EOF
"$prometheus_bin" --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/prometheus-data" \
  --web.listen-address="127.0.0.1:$prom_port" >"$work/prometheus.log" 2>&1 &
prometheus_pid=$!
wait_for 60 "Prometheus answers /-/ready" curl -sf --max-time 2 "$prom/-/ready"

# query PROMQL: the value of the one sample the query returns; "absent" when
# it returns none, "many" when more than one.
query() {
  local out
  out="$(curl -sf --max-time 10 -G --data-urlencode "query=$1" "$prom/api/v1/query")" ||
    fatal "query failed: $1"
  [[ "$(jq -r .status <<<"$out")" == success ]] || fatal "query failed: $1: $out"
  jq -r '.data.result | if length == 0 then "absent" elif length > 1 then "many"
                        else .[0].value[1] end' <<<"$out"
}
# scraped_after TIME: Prometheus' last scrape of the controller began after TIME.
scraped_after() {
  local last
  last="$(query "timestamp(up{job=\"$job\"})")"
  [[ "$last" != absent ]] && awk -v a="$last" -v b="$1" 'BEGIN { exit !(a > b) }'
}
# evaluated_after TIME: every rule group was last evaluated after TIME.
evaluated_after() {
  local times t
  times="$(curl -sf --max-time 10 "$prom/api/v1/rules" | jq -r '.data.groups[].lastEvaluation')"
  [[ -n "$times" ]] || return 1
  while read -r t; do
    awk -v a="$(date -d "$t" +%s.%N)" -v b="$1" 'BEGIN { exit !(a > b) }' || return 1
  done <<<"$times"
}

# --- Push: driver gpu has three node-local pools of 200 devices (two slices
# each), driver nic one pool of 10 devices (one slice).
pool() {  # pool NODE PREFIX COUNT [DEVICE MODEL]: a Pool body.
  jq -cn --arg node "$1" --arg prefix "$2" --argjson n "$3" --arg dev "${4:-}" --arg model "${5:-}" '
    {nodeName: $node,
     devices: [range($n) | "\($prefix)-\(.)" as $name
               | {name: $name,
                  attributes: {model: {string: (if $name == $dev then $model else "A100" end)}}}]}'
}
push() {  # push DRIVER POOL BODY: PUT with ?wait; the pool must be published.
  local out code
  out="$(curl -sS --max-time 60 -X PUT -H 'Content-Type: application/json' --data-binary "$3" \
    -w '\n%{http_code}' "$inventory/v1/drivers/$1/pools/$2?wait=30s")" ||
    fatal "push of $1/$2: curl failed"
  code="$(tail -n1 <<<"$out")"
  check "push of $1/$2 is published (200, phase Published)" "200 Published" \
    "$code $(sed '$d' <<<"$out" | jq -r .phase 2>/dev/null)"
}
for node in node-a node-b node-c; do
  push "$gpu" "$node" "$(pool "$node" gpu "$gpu_devices")"
done
push "$nic" node-a "$(pool node-a nic "$nic_devices")"

# The gauges are refreshed by the controller once a second; wait until its own
# scrape shows the publication, then until Prometheus has scraped after that
# and evaluated the rules on it.
published() {
  [[ "$(scraped_sum resourceslice_controller_slices)" == 7 &&
     "$(scraped_sum resourceslice_controller_devices)" == $((3 * gpu_devices + nic_devices)) ]]
}
wait_for 60 "the controller's gauges show 7 slices and 610 devices" published
published_at="$(now)"
wait_for 60 "Prometheus scrapes the controller after the publication" scraped_after "$published_at"
# An evaluation that began after the publication may still have run before that
# scrape was stored (a rule that read no `up` yet is pending). An evaluation that
# began one interval after the scrape was seen reads it: its query time is at
# most one interval before its start.
seen_at="$(now)"
wait_for 60 "Prometheus evaluates the rules on that scrape" \
  evaluated_after "$(awk -v t="$seen_at" 'BEGIN { printf "%.3f", t + 1 }')"

# --- Exact values through Prometheus.
sel="job=\"$job\""
check "up is 1" 1 "$(query "up{$sel}")"
check "pools of $gpu" 3 "$(query "resourceslice_controller_pools{$sel,driver=\"$gpu\"}")"
check "pools of $nic" 1 "$(query "resourceslice_controller_pools{$sel,driver=\"$nic\"}")"
check "slices of $gpu" 6 "$(query "resourceslice_controller_slices{$sel,driver=\"$gpu\"}")"
check "slices of $nic" 1 "$(query "resourceslice_controller_slices{$sel,driver=\"$nic\"}")"
check "devices of $gpu" $((3 * gpu_devices)) \
  "$(query "resourceslice_controller_devices{$sel,driver=\"$gpu\"}")"
check "devices of $nic" "$nic_devices" "$(query "resourceslice_controller_devices{$sel,driver=\"$nic\"}")"
writes() {  # writes DRIVER VERB: successful slice writes, "absent" when none was counted.
  query "resourceslice_controller_slice_writes_total{$sel,driver=\"$1\",verb=\"$2\",result=\"success\"}"
}
check "slice creates of $gpu" 6 "$(writes "$gpu" create)"
check "slice creates of $nic" 1 "$(writes "$nic" create)"
check "no failed or conflicting slice write" absent \
  "$(query "sum(resourceslice_controller_slice_writes_total{$sel,result!=\"success\"} > 0)")"
check "publications of $gpu" 3 \
  "$(query "resourceslice_controller_publish_latency_seconds_count{$sel,driver=\"$gpu\"}")"
check "publications of $nic" 1 \
  "$(query "resourceslice_controller_publish_latency_seconds_count{$sel,driver=\"$nic\"}")"
for driver in "$gpu" "$nic"; do
  check_true "p99 publish latency of $driver is finite and positive" \
    "$(query "histogram_quantile(0.99, sum by (le) (
             resourceslice_controller_publish_latency_seconds_bucket{$sel,driver=\"$driver\"}))")" \
    'x > 0 && x < 60'
done
check "this replica reports itself leader" 1 \
  "$(query "leader_election_master_status{$sel,name=\"$lease\"}")"
# The 7 slices, plus the Lease.
check_true "API requests answered 201" "$(query "sum(rest_client_requests_total{$sel,code=\"201\"})")" \
  'x >= 8'
check_true "work queue adds (one per push at least)" \
  "$(query "workqueue_adds_total{$sel,name=\"resourceslice\"}")" 'x >= 4'
check "no reconcile error" 0 \
  "$(query "sum(controller_runtime_reconcile_total{$sel,result=\"error\"})")"
check_true "resident memory" "$(query "process_resident_memory_bytes{$sel}")" 'x > 1000000'

# --- The alert rules: all loaded, healthy, and none pending or firing.
rules_json="$(curl -sf --max-time 10 "$prom/api/v1/rules")" || fatal "GET /api/v1/rules failed"
check "every alert of the rules file is loaded" \
  "$(sed -n 's/^ *- alert: *//p' "$rules" | sort | paste -sd' ')" \
  "$(jq -r '[.data.groups[].rules[] | select(.type == "alerting") | .name] | sort | join(" ")' \
    <<<"$rules_json")"
check "no rule has an evaluation error" "" \
  "$(jq -r '[.data.groups[].rules[] | select(.health != "ok") | "\(.name): \(.lastError)"]
            | join("; ")' <<<"$rules_json")"
for alert in ResourceSliceControllerDown ResourceSliceControllerNoLeader \
  ResourceSliceControllerReconcileErrors; do
  check "$alert is inactive" inactive \
    "$(jq -r --arg a "$alert" '[.data.groups[].rules[] | select(.name == $a) | .state] | join(" ")' \
      <<<"$rules_json")"
done
check "no alert is pending or firing" "" \
  "$(curl -sf --max-time 10 "$prom/api/v1/alerts" |
     jq -r '[.data.alerts[] | "\(.labels.alertname) \(.state)"] | join("; ")')"

# --- Change one device of one pool: one slice update, no create.
push "$gpu" node-b "$(pool node-b gpu "$gpu_devices" gpu-7 H100)"
changed_at="$(now)"
wait_for 60 "Prometheus scrapes the controller after the change" scraped_after "$changed_at"
check "slice updates of $gpu after changing one device" 1 "$(writes "$gpu" update)"
check "slice creates of $gpu are unchanged" 6 "$(writes "$gpu" create)"
check "no slice of $gpu was deleted" absent \
  "$(query "resourceslice_controller_slice_writes_total{$sel,driver=\"$gpu\",verb=\"delete\"} > 0")"
check "no slice update of $nic" absent \
  "$(query "resourceslice_controller_slice_writes_total{$sel,driver=\"$nic\",verb=\"update\"} > 0")"
check "publications of $gpu after the change" 4 \
  "$(query "resourceslice_controller_publish_latency_seconds_count{$sel,driver=\"$gpu\"}")"

# --- promtool lints a real scrape.
scrape >"$work/scrape.txt" || fatal "scrape of $metrics failed"
lint_rc=0
lint="$("$promtool_bin" check metrics <"$work/scrape.txt" 2>&1)" || lint_rc=$?
check "promtool check metrics reports no problem" "0 " "$lint_rc $lint"

finish || {
  logs
  exit 1
}
