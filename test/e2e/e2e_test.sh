#!/usr/bin/env bash
# The controller as users run it: the image built from the Dockerfile, in
# pods, installed with `helm install` on a real node with a kubelet
# (test/cluster/start --node), with the chart's defaults but for the image.
#   1. helm install with 2 replicas: both pods Ready through their probes, one
#      leader, inventory TLS bootstrapped, metrics scraped by a real
#      Prometheus over HTTPS with a ServiceAccount token;
#   2. the example driver DaemonSet pushes with its projected, node-bound
#      token over HTTPS, trusting only the published CA; its pool is published;
#   3. the real kube-scheduler allocates a ResourceClaim from our slice;
#   4. the leader pod deleted: the other replica leads and writes nothing, and
#      pushes keep working through the Service; helm upgrade rolls both pods
#      and writes nothing; resourceslicectl runs inside the image;
#   5. the kubelet restarted: the node's pool held (not recreated) until the
#      driver's next push, one PoolHeld Event;
#   6. helm uninstall runs the cleanup hook as a Job in a pod, which removes
#      every managed slice.
# Prints its figures at the end. Needs root (a kubelet); starts its own cluster
# and node and always stops them.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
on_exit print_figures

# The names the example driver DaemonSet assumes (the chart's defaults).
release=resourceslice-controller
ns=resourceslice-system
name=resourceslice-controller
driver=gpu.example.com
driver_ns=gpu-system
managed=app.kubernetes.io/managed-by=resourceslice-controller
service_host="$name.$ns.svc"

start_node_cluster
export KUBECONFIG="$cluster/kubeconfig"

build_image
controller_image="$image_ref"
figure "controller image" "$controller_image"
figure "controller image size (MiB)" "$image_mib"
build_image --driver
driver_image="$image_ref"

# --- 1. helm install, two replicas.
kubectl create namespace "$driver_ns" >/dev/null
kubectl create namespace monitoring >/dev/null
kubectl create serviceaccount prometheus -n monitoring >/dev/null
t0="$(now)"
check_ok "helm install" helm install "$release" "$chart" --namespace "$ns" --create-namespace \
  --set image.repository="${controller_image%:*}" --set image.tag="${controller_image##*:}" \
  --set image.pullPolicy=Never \
  --set-json "drivers=[{\"name\":\"gpu-driver\",\"namespace\":\"$driver_ns\",\"driverNames\":[\"$driver\"]}]" \
  --set-json 'metrics.scrapers=[{"name":"prometheus","namespace":"monitoring"}]'
ready_replicas() { kubectl get deployment "$name" -n "$ns" -o jsonpath='{.status.readyReplicas}'; }
two_ready() { [[ "$(ready_replicas)" == 2 ]]; }
wait_for 180 "two Ready replicas after helm install" two_ready
figure "helm install to 2 pods Ready (s)" "$(since "$t0")"
check "both replicas are Ready through their probes" 2 "$(ready_replicas)"

pods() { kubectl get pods -n "$ns" -l app.kubernetes.io/component=controller -o json; }
# The leader's pod: the Lease's holder is POD_UNIQUE-SUFFIX.
holder() { local h; h="$(kubectl get lease "$name" -n "$ns" -o jsonpath='{.spec.holderIdentity}')"; echo "${h%_*}"; }
has_holder() { [[ -n "$(holder)" ]]; }
# Rolled out: the old pods are gone, not just terminating, both new ones are
# Ready, and one of them leads.
rolled() {
  local p
  p="$(pods)"
  kubectl rollout status deployment "$name" -n "$ns" --timeout=1s &&
    [[ "$(jq '.items | length' <<<"$p")" == 2 ]] &&
    jq -e --arg h "$(holder)" 'any(.items[]; .metadata.name == $h)' <<<"$p"
}
wait_for 60 "a leader" has_holder
leader="$(holder)"
check_contains "the Lease is held by one of the pods" "$leader" "$(pods | jq -r '[.items[].metadata.name] | join(" ")')"
lease_url="$(kubectl get lease "$name" -n "$ns" -o json | jq -r '.metadata.annotations["resourceslice.dra.k8s.io/inventory-url"] // ""')"
leader_ip="$(pods | jq -r --arg l "$leader" '.items[] | select(.metadata.name == $l) | .status.podIP')"
check "the Lease announces the leader's HTTPS address" "https://$leader_ip:8443" "$lease_url"

# Inventory TLS, bootstrapped by the controller itself: the Secret, and the
# CA bundle in the driver's namespace; the Service answers with a certificate
# that verifies against that bundle under the Service's name.
kubectl get configmap "$name-ca" -n "$driver_ns" -o jsonpath='{.data.ca\.crt}' >"$work/ca.crt"
check "the CA bundle is published in the driver's namespace" 1 "$(grep -c 'BEGIN CERTIFICATE' "$work/ca.crt")"
check "the certificate Secret exists" kubernetes.io/tls \
  "$(kubectl get secret "$name-inventory-tls" -n "$ns" -o jsonpath='{.type}')"
service_ip="$(kubectl get service "$name" -n "$ns" -o jsonpath='{.spec.clusterIP}')"
resolve=(--resolve "$service_host:8443:$service_ip" --resolve "$service_host:8080:$service_ip")
check "the Service serves the inventory API over verified HTTPS" 200 \
  "$(curl -sS -o /dev/null -w '%{http_code}' --cacert "$work/ca.crt" "${resolve[@]}" \
    "https://$service_host:8443/openapi.json")"

# A real Prometheus scrapes both pods over HTTPS with the monitoring/prometheus
# ServiceAccount's token (bound to the metrics reader by metrics.scrapers).
kubectl create token prometheus -n monitoring --duration=1h >"$work/prometheus-token"
targets="$(pods | jq -c '[.items[].status.podIP + ":8080"]')"
cat >"$work/prometheus.yml" <<EOF
global: {scrape_interval: 1s, scrape_timeout: 1s}
scrape_configs:
  - job_name: resourceslice-controller
    scheme: https
    authorization: {credentials_file: $work/prometheus-token}
    tls_config: {ca_file: $work/ca.crt, server_name: $service_host}
    static_configs: [{targets: $targets}]
EOF
prometheus_port="$(free_port)"
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/prometheus" \
  --web.listen-address="127.0.0.1:$prometheus_port" >"$work/prometheus.log" 2>&1 &
prometheus_pid=$!
on_exit 'kill "$prometheus_pid" 2>/dev/null; wait "$prometheus_pid" 2>/dev/null'
query() {
  curl -sS --get "http://127.0.0.1:$prometheus_port/api/v1/query" --data-urlencode "query=$1" |
    jq -r '.data.result[0].value[1] // ""'
}
both_up() { [[ "$(query 'sum(up{job="resourceslice-controller"})')" == 2 ]]; }
wait_for 60 "Prometheus scraping both pods" both_up
check "Prometheus scrapes both pods over HTTPS with a token" 2 "$(query 'sum(up{job="resourceslice-controller"})')"
check "Prometheus sees exactly one leader" 1 "$(query 'sum(leader_election_master_status)')"

# --- 2. The example driver DaemonSet, as the chart's notes tell drivers to
# run: its image (curl) is built here, and without cluster DNS the Service's
# name resolves through a host alias.
kubectl create --dry-run=client -o json -f "$root/controller/inventory/examples/driver-daemonset.yaml" |
  jq --arg image "$driver_image" --arg ip "$service_ip" --arg host "$service_host" '
    if .kind == "DaemonSet" then
      .spec.template.spec.containers[0].image = $image
      | .spec.template.spec.containers[0].imagePullPolicy = "Never"
      | .spec.template.spec.hostAliases = [{ip: $ip, hostnames: [$host]}]
    else . end' >"$work/driver.json"
t0="$(now)"
kubectl apply -f "$work/driver.json" >/dev/null
node_slices() {
  kubectl get resourceslices -o json |
    jq -c --arg d "$driver" --arg n "$node" '[.items[] | select(.spec.driver == $d and .spec.nodeName == $n)]'
}
published() { [[ "$(node_slices | jq length)" == 1 ]]; }
wait_for 120 "the driver's pool published" published
figure "driver DaemonSet applied to its pool published (s)" "$(since "$t0")"
slice="$(node_slices | jq -c '.[0]')"
check "the pool is published complete: one slice of a pool of one" \
  "$node 1 gpu-0 $managed" \
  "$(jq -r '[.spec.pool.name, .spec.pool.resourceSliceCount, .spec.devices[0].name,
             ("app.kubernetes.io/managed-by=" + .metadata.labels["app.kubernetes.io/managed-by"])] | join(" ")' <<<"$slice")"
driver_pod="$(kubectl get pods -n "$driver_ns" -o jsonpath='{.items[0].metadata.name}')"
check "the driver pod runs" Running "$(kubectl get pod "$driver_pod" -n "$driver_ns" -o jsonpath='{.status.phase}')"

# push_from_driver: one push from inside the driver pod, as its loop does;
# prints the HTTP code, and the answer's body before it unless the code is 200.
push_from_driver() {
  local out
  out="$(kubectl exec -n "$driver_ns" "$driver_pod" -- /bin/sh -c '
    printf "{\"nodeName\":\"%s\",\"leaseSeconds\":120,\"devices\":[{\"name\":\"gpu-0\"}]}" "$NODE_NAME" |
      curl -sS -w " %{http_code}" -X PUT --cacert /var/run/resourceslice/ca/ca.crt \
        -H "Authorization: Bearer $(cat /var/run/resourceslice/token/token)" \
        -H "Content-Type: application/json" --data-binary @- \
        "$INVENTORY_URL/v1/drivers/gpu.example.com/pools/$NODE_NAME?wait=30s"' 2>&1 | tr '\n' ' ')"
  out="${out% }"
  if [[ "${out##* }" == 200 ]]; then echo 200; else echo "$out"; fi
}
check "a push from the driver pod is accepted" 200 "$(push_from_driver)"
# pushes N: N pushes from the driver pod through the Service (which picks a
# replica for each connection: followers forward to the leader); prints the
# answers that were not 200, one to a line.
pushes() {
  local i out
  for ((i = 0; i < $1; i++)); do
    out="$(push_from_driver)"
    [[ "$out" == 200 ]] || echo "$out"
  done
}
# What the cluster says about the replicas and the Lease, when a check of
# pushes failed (to stderr, next to the FAIL line).
explain_pushes() {
  [[ -z "$1" ]] && return 0
  {
    echo "--- at $(date -u +%H:%M:%S.%3N): the Lease, then the replicas"
    kubectl get lease "$name" -n "$ns" -o yaml
    kubectl get pods -n "$ns" -o wide
    local pod
    for pod in $(kubectl get pods -n "$ns" -o name); do
      echo "--- $pod"
      kubectl logs -n "$ns" "$pod" --tail=40 2>&1 | grep -v '"GET /' || true
    done
  } >&2
}
# The node-bound token speaks for its node only.
other="$(kubectl exec -n "$driver_ns" "$driver_pod" -- /bin/sh -c '
  printf "{\"nodeName\":\"node-b\",\"devices\":[{\"name\":\"gpu-0\"}]}" |
    curl -sS -o /dev/null -w "%{http_code}" -X PUT --cacert /var/run/resourceslice/ca/ca.crt \
      -H "Authorization: Bearer $(cat /var/run/resourceslice/token/token)" \
      -H "Content-Type: application/json" --data-binary @- \
      "$INVENTORY_URL/v1/drivers/gpu.example.com/pools/node-b"')"
check "the driver's token may not publish another node's pool" 403 "$other"

# --- 3. The real kube-scheduler allocates a claim from our slice.
kubectl apply -f - >/dev/null <<EOF
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec:
  selectors:
    - cel: {expression: 'device.driver == "gpu.example.com"'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: gpu, namespace: default}
spec:
  devices:
    requests:
      - name: gpu
        exactly: {deviceClassName: gpu.example.com}
---
apiVersion: v1
kind: Pod
metadata: {name: gpu-user, namespace: default}
spec:
  resourceClaims: [{name: gpu, resourceClaimName: gpu}]
  containers:
    - name: user
      image: $driver_image
      imagePullPolicy: Never
      command: [sleep, "3600"]
      resources: {claims: [{name: gpu}]}
EOF
allocated() { [[ -n "$(kubectl get resourceclaim gpu -n default -o jsonpath='{.status.allocation}')" ]]; }
wait_for 60 "the claim allocated by kube-scheduler" allocated
check "kube-scheduler allocated our device to the claim" "$driver $node gpu-0" \
  "$(kubectl get resourceclaim gpu -n default -o json |
    jq -r '.status.allocation.devices.results[0] | [.driver, .pool, .device] | join(" ")')"
check "the pod is scheduled to the node" "$node" \
  "$(kubectl get pod gpu-user -n default -o jsonpath='{.spec.nodeName}')"
kubectl delete pod gpu-user -n default --grace-period=0 --force >/dev/null 2>&1 || true
kubectl delete resourceclaim gpu -n default --wait=false >/dev/null

# --- 4. Failover: delete the leader pod.
writes_before="$(apiserver_writes resourceslices)"
t0="$(now)"
kubectl delete pod "$leader" -n "$ns" --wait=false >/dev/null
new_leader() { local h; h="$(holder)"; [[ -n "$h" && "$h" != "$leader" ]]; }
wait_for 60 "another replica leading" new_leader
figure "leader pod deleted to a new leader (s)" "$(since "$t0")"
new="$(holder)"
check "the Lease moved to the other replica" 1 \
  "$(pods | jq --arg n "$new" '[.items[] | select(.metadata.name == $n)] | length')"
wait_for 120 "two Ready replicas, the deleted one gone, after the failover" rolled
check "pushes keep working through the Service (8 pushes, both replicas)" "" "$(pushes 8)"
check "the pool is still published as it was" "$slice" "$(node_slices | jq -c '.[0]')"
writes="$(($(apiserver_writes resourceslices) - writes_before))"
figure "ResourceSlice writes during failover" "$writes"
check "failover writes no ResourceSlice" 0 "$writes"

# helm upgrade with a changed value rolls both pods and writes nothing.
writes_before="$(apiserver_writes resourceslices)"
old_pods="$(pods | jq -r '[.items[].metadata.name] | sort | join(" ")')"
t0="$(now)"
check_ok "helm upgrade" helm upgrade "$release" "$chart" --namespace "$ns" --reuse-values \
  --set logging.verbosity=1
wait_for 180 "the upgrade rolled out" rolled
figure "helm upgrade to both pods replaced and Ready (s)" "$(since "$t0")"
new_pods="$(pods | jq -r '[.items[].metadata.name] | sort | join(" ")')"
check "the upgrade replaced both pods" "" \
  "$(comm -12 <(tr ' ' '\n' <<<"$old_pods") <(tr ' ' '\n' <<<"$new_pods"))"
# The old leader released the Lease as its pod stopped; a follower that has
# not read the Lease since still names it, and reads the Lease again when the
# old leader's address does not answer. The time to the first accepted push
# is a figure; after it, every push must work.
t0="$(now)"
push_ok() {
  local out
  out="$(push_from_driver)"
  [[ "$out" == 200 ]] || echo "push after the upgrade: $out" >&2
  [[ "$out" == 200 ]]
}
wait_for 60 "a push through the Service after the upgrade" push_ok
figure "helm upgrade rolled out to pushes accepted again (s)" "$(since "$t0")"
out="$(pushes 8)"
explain_pushes "$out"
check "pushes work after the upgrade (8 pushes, both replicas)" "" "$out"
writes="$(($(apiserver_writes resourceslices) - writes_before))"
figure "ResourceSlice writes during the upgrade" "$writes"
check "the upgrade writes no ResourceSlice" 0 "$writes"

out="$(kubectl exec -n "$ns" "deployment/$name" -- resourceslicectl get pools 2>&1)" && rc=0 || rc=$?
check "resourceslicectl get pools runs inside the image" 0 "$rc"
check_contains "resourceslicectl lists the driver's pool" "$node" "$out"

# --- 5. The kubelet restarts: it deletes every slice of its node at start,
# and expects drivers to publish again once their plugins register. The
# controller holds the node's pool (nothing recreated, status Held, a PoolHeld
# Event on the Node) until the driver pushes it again: the example driver's
# loop pushes every 60 s.
writes_before="$(apiserver_writes resourceslices)"
uid_before="$(node_slices | jq -r '.[0].metadata.uid')"
t0="$(now)"
restarted_at="$(date -u +%Y-%m-%dT%H:%M:%S.%6NZ)"  # as lastPushTime is written
"$root/test/cluster/restart-kubelet" "$cluster"
wiped() { [[ "$(node_slices | jq length)" == 0 ]]; }
wait_for 60 "the kubelet's wipe of its node's slices" wiped
figure "kubelet restart to the node's slice deleted (s)" "$(since "$t0")"
# The pool's phase, and whether its driver pushed it since the kubelet
# restarted, from the Service with the token resourceslicectl uses in the
# pods (kubectl exec may fail for a while after a kubelet restart).
kubectl create token "$name" -n "$ns" --audience resourceslice-controller --duration=10m \
  >"$work/ctl-token"
pool_state() {
  curl -sS --cacert "$work/ca.crt" "${resolve[@]}" -H "Authorization: Bearer $(cat "$work/ctl-token")" \
    "https://$service_host:8443/v1/drivers/$driver/pools/$node" |
    jq -r --arg t "$restarted_at" '.phase + (if (.lastPushTime // "") > $t then " pushed-since" else "" end)'
}
# Held within moments of the wipe, unless the driver's loop pushed meanwhile.
held_or_pushed() {
  state="$(pool_state)"
  [[ "$state" == Held* || "$state" == *pushed-since ]]
}
if poll 10 held_or_pushed; then held=ok; else held="$state"; fi
figure "the node's pool after the kubelet's wipe" "$state"
check "the wiped pool is held until its driver pushes (phase, and whether it pushed since)" ok "$held"
republished() {
  local s
  s="$(node_slices)"
  [[ "$(jq length <<<"$s")" == 1 && "$(jq -r '.[0].metadata.uid' <<<"$s")" != "$uid_before" ]]
}
wait_for 90 "the pool republished at the driver's next push" republished
figure "kubelet restart to the node's slice republished at the driver's next push (s)" "$(since "$t0")"
figure "ResourceSlice writes around a kubelet restart" "$(($(apiserver_writes resourceslices) - writes_before))"
if [[ -n "${E2E_DEBUG:-}" ]]; then
  kubectl logs -n "$ns" "$(holder)" --tail=40 || true
fi
events_json="$(kubectl get events -A -o json)"
check "one PoolHeld Event about the node" 1 \
  "$(jq --arg n "$node" '[.items[] | select(.reason == "PoolHeld" and .involvedObject.kind == "Node" and .involvedObject.name == $n)] | length' <<<"$events_json")"
check "no ForeignChangeReverted Event for the kubelet's wipe" 0 \
  "$(jq '[.items[] | select(.reason == "ForeignChangeReverted")] | length' <<<"$events_json")"

# --- 6. helm uninstall: the cleanup hook's Job runs in a pod.
kubectl delete -f "$work/driver.json" --wait=false >/dev/null
t0="$(now)"
check_ok "helm uninstall" helm uninstall "$release" -n "$ns" --timeout 180s
figure "helm uninstall to no managed slice (s)" "$(since "$t0")"
check "no managed slice is left" 0 "$(kubectl get resourceslices -l "$managed" -o json | jq '.items | length')"
check "the cleanup Job ran and completed in a pod" 1 \
  "$(kubectl get events -n "$ns" -o json |
    jq '[.items[] | select(.involvedObject.kind == "Job" and .reason == "Completed")] | length')"
left="$(kubectl get deployments,services,serviceaccounts,roles,rolebindings,jobs,poddisruptionbudgets,secrets,configmaps \
  -n "$ns" -l app.kubernetes.io/instance="$release" -o name)"
left+="$(kubectl get clusterroles,clusterrolebindings -l app.kubernetes.io/instance="$release" -o name)"
check "no object of the release is left" "" "$left"

finish
