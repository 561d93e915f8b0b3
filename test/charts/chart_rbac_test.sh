#!/usr/bin/env bash
# Applies the chart's ServiceAccounts, ClusterRoles, Roles and bindings to a
# real kube-apiserver and checks them as the identities that will use them:
# - the controller, with a token minted for its ServiceAccount and again by
#   impersonation: every verb it needs is allowed and nothing else (no patch,
#   no secrets, no other namespace's Leases); then the calls themselves, made
#   with that token: ResourceSlice create, update, delete and deletecollection,
#   Node get and list, Lease create and update, events.k8s.io Events, and the
#   TokenReview + SubjectAccessReview that authenticate and authorize a driver;
#   for the self-signed inventory TLS: its one Secret and the CA ConfigMaps (in
#   its namespace and the drivers'), by name, and no other Secret;
#   Services, EndpointSlices and Pods not at all by default, and with pull
#   discovery list and watch only, in the namespaces pull.drivers binds and
#   nowhere else, never cluster-wide (then the lists and watches themselves);
# - the drivers listed in values: `publish` on their own driver names only, and
#   no write access to the API server at all;
# - the post-delete hook's ServiceAccount: list, delete and deletecollection on
#   ResourceSlices, get and update of the leader Lease by name and create of
#   Leases in its namespace (the fence of --cleanup --leader-elect), nothing
#   else; then those calls with its token;
# - the scrapers in metrics.scrapers: get on /metrics (the SubjectAccessReview
#   a secure /metrics asks), nothing else; other ServiceAccounts: not even that.
# Starts its own cluster and always stops it.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

start_cluster
cluster_bin="$("$root/test/cluster/build")"
server="$(cat "$cluster/server")"
ns=rsc-system
controller_sa=rsc-resourceslice-controller
cleanup_sa=rsc-resourceslice-controller-cleanup
audience=resourceslice-controller
group=resourceslice.dra.k8s.io

for n in "$ns" gpu-system nic-system; do kubectl create namespace "$n" >/dev/null; done
kubectl create serviceaccount gpu-driver -n gpu-system >/dev/null
kubectl create serviceaccount rogue-driver -n gpu-system >/dev/null
kubectl create serviceaccount nic-driver -n nic-system >/dev/null
kubectl create namespace monitoring >/dev/null
kubectl create serviceaccount prometheus -n monitoring >/dev/null

# The chart's identity and RBAC objects only (the hook file also holds the
# cleanup Job, which stays inert: the test cluster has no Job controller).
helm template rsc "$chart" --namespace "$ns" --kube-version "$kube_version" \
  --set-json 'drivers=[{"name":"gpu-driver","namespace":"gpu-system","driverNames":["gpu.example.com"]},{"name":"nic-driver","namespace":"nic-system"}]' \
  --set-json 'metrics.scrapers=[{"name":"prometheus","namespace":"monitoring"}]' \
  --show-only templates/metrics-rbac.yaml --show-only templates/inventory-tls.yaml \
  --show-only templates/serviceaccount.yaml --show-only templates/clusterrole.yaml \
  --show-only templates/role.yaml --show-only templates/drivers-rbac.yaml \
  --show-only templates/cleanup-hook.yaml >"$work/rbac.yaml"
check_ok "the chart's RBAC applies" kubectl apply -f "$work/rbac.yaml"
check "applied kinds" \
  '["ClusterRole","ClusterRole","ClusterRole","ClusterRole","ClusterRole","ClusterRoleBinding","ClusterRoleBinding","ClusterRoleBinding","ClusterRoleBinding","ClusterRoleBinding","Job","Role","Role","Role","Role","Role","RoleBinding","RoleBinding","RoleBinding","RoleBinding","RoleBinding","ServiceAccount","ServiceAccount"]' \
  "$(kubectl apply --dry-run=server -o json -f "$work/rbac.yaml" | jq -c '[.items[].kind] | sort')"

# A kubeconfig holding nothing but a token, so that requests authenticate as
# that token's ServiceAccount (the admin kubeconfig's client certificate would
# win otherwise).
token_kubeconfig() {  # token_kubeconfig NAME TOKEN
  local config="$work/$1.kubeconfig"
  "$cluster_bin/kubectl" config --kubeconfig "$config" set-cluster test \
    --server "$server" --certificate-authority "$cluster/pki/ca.crt" --embed-certs >/dev/null
  "$cluster_bin/kubectl" config --kubeconfig "$config" set-credentials "$1" --token "$2" >/dev/null
  "$cluster_bin/kubectl" config --kubeconfig "$config" set-context test --cluster test --user "$1" >/dev/null
  "$cluster_bin/kubectl" config --kubeconfig "$config" use-context test >/dev/null
}
as() { "$cluster_bin/kubectl" --kubeconfig "$work/$1.kubeconfig" "${@:2}"; }
# call TOKEN METHOD PATH [BODY [CONTENT-TYPE]]: one request as the controller
# will make it; the response body goes to $work/response, the HTTP code to stdout.
call() {
  curl -sS -o "$work/response" -w '%{http_code}' --cacert "$cluster/pki/ca.crt" \
    -H "Authorization: Bearer $1" -X "$2" -H "Content-Type: ${5:-application/json}" \
    ${4:+--data "$4"} "$server$3"
}
controller_token="$(kubectl create token "$controller_sa" -n "$ns" --duration 1h)"
cleanup_token="$(kubectl create token "$cleanup_sa" -n "$ns" --duration 1h)"
token_kubeconfig controller "$controller_token"
token_kubeconfig cleanup "$cleanup_token"
check "the minted token is the controller's ServiceAccount" \
  "\"system:serviceaccount:$ns:$controller_sa\"" \
  "$(as controller auth whoami -o json | jq -c .status.userInfo.username)"

# can WHO ANSWER VERB RESOURCE [ARGS...]: `kubectl auth can-i` answers ANSWER,
# asked with WHO's token and again by the admin impersonating WHO.
can() {
  local who="$1" want="$2" sa
  shift 2
  case "$who" in
    controller) sa="system:serviceaccount:$ns:$controller_sa" ;;
    cleanup) sa="system:serviceaccount:$ns:$cleanup_sa" ;;
  esac
  check "$who token: can-i $* = $want" "$want" "$(as "$who" auth can-i "$@" 2>/dev/null || true)"
  check "$who impersonated: can-i $* = $want" "$want" \
    "$(kubectl auth can-i "$@" --as="$sa" 2>/dev/null || true)"
}

# --- The controller: what it needs is allowed.
for verb in get list watch create update delete deletecollection; do
  can controller yes "$verb" resourceslices.resource.k8s.io
done
for verb in get list watch; do
  can controller yes "$verb" nodes
done
can controller yes create tokenreviews.authentication.k8s.io
can controller yes create subjectaccessreviews.authorization.k8s.io
for events_ns in default "$ns"; do
  can controller yes create events.events.k8s.io -n "$events_ns"
  can controller yes patch events.events.k8s.io -n "$events_ns"
done
for verb in get create update; do
  can controller yes "$verb" leases.coordination.k8s.io -n "$ns"
done
# ... and nothing more.
can controller no patch resourceslices.resource.k8s.io
for verb in create update patch delete; do
  can controller no "$verb" nodes
done
can controller no get nodes --subresource=status
# (blockOwnerDeletion on an owner reference would need this; the controller sets none)
can controller no update nodes --subresource=finalizers
# Self-signed inventory TLS: its own Secret and CA ConfigMaps, by name.
tls_secret="$controller_sa-inventory-tls"
ca_config_map="$controller_sa-ca"
can controller yes create secrets -n "$ns"
can controller yes get "secrets/$tls_secret" -n "$ns"
can controller yes update "secrets/$tls_secret" -n "$ns"
for cm_ns in "$ns" gpu-system nic-system; do
  can controller yes create configmaps -n "$cm_ns"
  can controller yes get "configmaps/$ca_config_map" -n "$cm_ns"
  can controller yes update "configmaps/$ca_config_map" -n "$cm_ns"
  can controller no get configmaps/kube-root-ca.crt -n "$cm_ns"
done
can controller no get secrets -n "$ns"
can controller no get secrets/other -n "$ns"
can controller no delete "secrets/$tls_secret" -n "$ns"
can controller no create secrets -n gpu-system
can controller no list secrets -n kube-system
can controller no list secrets --all-namespaces
can controller no get configmaps -n "$ns"
can controller no create configmaps -n kube-system
can controller no create pods -n "$ns"
can controller no create serviceaccounts/token -n gpu-system
can controller no get leases.coordination.k8s.io -n kube-system
can controller no list leases.coordination.k8s.io -n "$ns"
can controller no delete leases.coordination.k8s.io -n "$ns"
can controller no create events -n default
can controller no publish "drivers.$group/gpu.example.com"
can controller no impersonate users
# Pull mode is off by default: no discovery of drivers' Services, EndpointSlices and Pods.
for verb in list watch; do
  can controller no "$verb" services --all-namespaces
  can controller no "$verb" endpointslices.discovery.k8s.io --all-namespaces
  can controller no "$verb" pods --all-namespaces
  can controller no "$verb" services -n gpu-system
  can controller no "$verb" pods -n gpu-system
done
can controller no bind clusterroles.rbac.authorization.k8s.io
can controller no '*' '*'

# --- The controller's calls themselves, made with its token.
create_node node-a
check "get the Node of a node-local pool" '"node-a"' "$(as controller get node node-a -o json | jq -c .metadata.name)"
check "list Nodes (the Node cache)" '"node-a"' \
  "$(as controller get nodes -o json | jq -c '[.items[].metadata.name] | map(select(. == "node-a")) | .[0]')"
check "but not change them" Forbidden \
  "$(as controller label node node-a example.com/x=y 2>&1 | grep -o Forbidden | head -n1 || true)"

slice() {  # slice NAME
  cat <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: $1
  labels:
    app.kubernetes.io/managed-by: resourceslice-controller
spec:
  driver: gpu.example.com
  nodeName: node-a
  pool: {name: node-a, generation: 1, resourceSliceCount: 1}
  devices:
    - name: gpu-0
EOF
}
check_ok "create a ResourceSlice" as controller create -f <(slice rbac-slice-1)
updated="$(as controller get resourceslice rbac-slice-1 -o json | jq -c '.spec.pool.generation = 2')"
check_ok "update it (PUT with its resourceVersion)" as controller replace -f <(echo "$updated")
check "the update is stored" 2 "$(kubectl get resourceslice rbac-slice-1 -o json | jq .spec.pool.generation)"
check "patch is refused" Forbidden \
  "$(as controller patch resourceslice rbac-slice-1 --type merge -p '{"metadata":{"labels":{"x":"y"}}}' 2>&1 | grep -o Forbidden | head -n1 || true)"
check_ok "delete it" as controller delete resourceslice rbac-slice-1
check_ok "create two more" as controller create -f <(slice rbac-slice-2; echo ---; slice rbac-slice-3)
code="$(call "$controller_token" DELETE \
  "/apis/resource.k8s.io/v1/resourceslices?labelSelector=app.kubernetes.io%2Fmanaged-by%3Dresourceslice-controller")"
check "deletecollection of the managed slices" 200 "$code"
check "no managed slice is left" 0 \
  "$(kubectl get resourceslices -l app.kubernetes.io/managed-by=resourceslice-controller -o json | jq '.items | length')"

check_ok "create the leader Lease" as controller create -f - <<EOF
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: rsc-resourceslice-controller
  namespace: $ns
spec:
  holderIdentity: rsc-0_1
  leaseDurationSeconds: 15
EOF
renewed="$(as controller get lease rsc-resourceslice-controller -n "$ns" -o json | jq -c '.spec.holderIdentity = "rsc-1_2"')"
check_ok "update the Lease" as controller replace -f <(echo "$renewed")
check "delete the Lease is refused" Forbidden \
  "$(as controller delete lease rsc-resourceslice-controller -n "$ns" 2>&1 | grep -o Forbidden | head -n1 || true)"

check_ok "record an Event about a ResourceSlice (namespace default)" as controller create -f - <<'EOF'
apiVersion: events.k8s.io/v1
kind: Event
metadata:
  name: rbac-slice-1.17f0c0c0c0c0c0c0
  namespace: default
eventTime: "2026-01-01T00:00:00.000000Z"
reportingController: resourceslice.dra.k8s.io/controller
reportingInstance: rsc-0
action: Publish
reason: PoolPublished
type: Normal
note: pool node-a published
regarding:
  apiVersion: resource.k8s.io/v1
  kind: ResourceSlice
  name: rbac-slice-1
EOF
check "patch the Event (a repeated event's series)" 200 \
  "$(call "$controller_token" PATCH /apis/events.k8s.io/v1/namespaces/default/events/rbac-slice-1.17f0c0c0c0c0c0c0 \
    '{"series":{"count":2,"lastObservedTime":"2026-01-01T00:00:30.000000Z"}}' application/merge-patch+json)"
check "the patch is stored" 2 "$(kubectl get event.events.k8s.io rbac-slice-1.17f0c0c0c0c0c0c0 -n default -o json | jq .series.count)"

# A driver authenticates with a token for the controller's audience; the
# controller reviews it (TokenReview) and asks whether it may publish
# (SubjectAccessReview), as the inventory API will.
review() {  # review TOKEN: the TokenReview's status, as the controller
  local body
  body="$(jq -cn --arg t "$1" --arg a "$audience" \
    '{apiVersion: "authentication.k8s.io/v1", kind: "TokenReview", spec: {token: $t, audiences: [$a]}}')"
  local code
  code="$(call "$controller_token" POST /apis/authentication.k8s.io/v1/tokenreviews "$body")"
  if [[ "$code" == 201 ]]; then jq -c .status "$work/response"; else echo "\"HTTP $code\""; fi
}
may_publish() { may publish "$@"; }
may() {  # may VERB USER DRIVER: the SubjectAccessReview's answer, as the controller
  local body
  body="$(jq -cn --arg v "$1" --arg u "$2" --arg g "$group" --arg d "$3" \
    '{apiVersion: "authorization.k8s.io/v1", kind: "SubjectAccessReview",
      spec: {user: $u, groups: ["system:serviceaccounts", "system:serviceaccounts:\($u | split(":")[2])", "system:authenticated"],
             resourceAttributes: {group: $g, resource: "drivers", verb: $v, name: $d}}}')"
  local code
  code="$(call "$controller_token" POST /apis/authorization.k8s.io/v1/subjectaccessreviews "$body")"
  # An error must not pass for "not allowed".
  if [[ "$code" == 201 ]]; then jq -c '.status.allowed // false' "$work/response"; else echo "HTTP $code"; fi
}
driver_token="$(kubectl create token gpu-driver -n gpu-system --audience "$audience" --duration 1h)"
status="$(review "$driver_token")"
check "TokenReview: the driver's token is authenticated" true "$(jq -c .authenticated <<<"$status")"
check "TokenReview: as the driver's ServiceAccount" '"system:serviceaccount:gpu-system:gpu-driver"' \
  "$(jq -c .user.username <<<"$status")"
check "TokenReview: for the controller's audience" "[\"$audience\"]" "$(jq -c .audiences <<<"$status")"
api_token="$(kubectl create token gpu-driver -n gpu-system --duration 1h)"
check "TokenReview: a token for the API server is refused" false \
  "$(review "$api_token" | jq -c '.authenticated // false')"
check "SAR: gpu-driver may publish gpu.example.com" true \
  "$(may_publish system:serviceaccount:gpu-system:gpu-driver gpu.example.com)"
check "SAR: gpu-driver may not publish another driver's pools" false \
  "$(may_publish system:serviceaccount:gpu-system:gpu-driver nic.example.com)"
check "SAR: nic-driver (no driverNames) may publish any driver name" true \
  "$(may_publish system:serviceaccount:nic-system:nic-driver anything.example.com)"
check "SAR: a ServiceAccount not in values may not publish" false \
  "$(may_publish system:serviceaccount:gpu-system:rogue-driver gpu.example.com)"
# The controller's own ServiceAccount may read pool statuses (resourceslicectl
# in its pods), and only that.
controller_user="system:serviceaccount:$ns:$controller_sa"
check "SAR: the controller may get a driver's pool statuses" true "$(may get "$controller_user" gpu.example.com)"
check "SAR: the controller may list drivers' pool statuses" true "$(may list "$controller_user" "")"
check "SAR: the controller may not publish" false "$(may publish "$controller_user" gpu.example.com)"

# Drivers need no API-server rights: the token for the controller's audience is
# not accepted by the API server, and the driver's own API token cannot write
# slices.
token_kubeconfig driver-audience "$driver_token"
token_kubeconfig driver-api "$api_token"
check "the API server refuses the driver's controller-audience token" Unauthorized \
  "$(as driver-audience get resourceslices 2>&1 | grep -o Unauthorized | head -n1 || true)"
check "the driver's API token may not create ResourceSlices" no \
  "$(as driver-api auth can-i create resourceslices.resource.k8s.io 2>/dev/null || true)"

# --- The post-delete hook's ServiceAccount.
for verb in list delete deletecollection; do
  can cleanup yes "$verb" resourceslices.resource.k8s.io
done
for verb in get watch create update patch; do
  can cleanup no "$verb" resourceslices.resource.k8s.io
done
can cleanup no get nodes
# The leader Lease, by name; create cannot be limited by name.
for verb in get update; do
  can cleanup yes "$verb" leases.coordination.k8s.io/rsc-resourceslice-controller -n "$ns"
  can cleanup no "$verb" leases.coordination.k8s.io/other-lease -n "$ns"
done
can cleanup yes create leases.coordination.k8s.io -n "$ns"
for verb in list watch patch delete; do
  can cleanup no "$verb" leases.coordination.k8s.io/rsc-resourceslice-controller -n "$ns"
done
can cleanup no create leases.coordination.k8s.io -n kube-system
can cleanup no get leases.coordination.k8s.io/rsc-resourceslice-controller -n kube-system
can cleanup no get secrets -n "$ns"
can cleanup no get configmaps -n "$ns"
# The fence's calls with its token: read the Lease the controller left, take
# it, release it.
code="$(call "$cleanup_token" GET "/apis/coordination.k8s.io/v1/namespaces/$ns/leases/rsc-resourceslice-controller")"
check "the hook's ServiceAccount reads the leader Lease" 200 "$code"
taken="$(jq -c '.spec.holderIdentity = "cleanup_1"' "$work/response")"
code="$(call "$cleanup_token" PUT "/apis/coordination.k8s.io/v1/namespaces/$ns/leases/rsc-resourceslice-controller" "$taken")"
check "the hook's ServiceAccount takes the leader Lease" 200 "$code"
released="$(jq -c '.spec.holderIdentity = "" | .spec.leaseDurationSeconds = 1' "$work/response")"
code="$(call "$cleanup_token" PUT "/apis/coordination.k8s.io/v1/namespaces/$ns/leases/rsc-resourceslice-controller" "$released")"
check "the hook's ServiceAccount releases the leader Lease" 200 "$code"
code="$(call "$cleanup_token" POST "/apis/coordination.k8s.io/v1/namespaces/$ns/leases" \
  '{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"rsc-resourceslice-controller-new"}}')"
check "the hook's ServiceAccount creates a Lease (create has no name to check)" 201 "$code"
kubectl create -f <(slice rbac-slice-4) >/dev/null
code="$(call "$cleanup_token" DELETE \
  "/apis/resource.k8s.io/v1/resourceslices?labelSelector=app.kubernetes.io%2Fmanaged-by%3Dresourceslice-controller")"
check "the hook's ServiceAccount deletes the managed slices" 200 "$code"
check "no managed slice is left after the hook's delete" 0 \
  "$(kubectl get resourceslices -l app.kubernetes.io/managed-by=resourceslice-controller -o json | jq '.items | length')"

# --- Scrapers of a secure /metrics: the controller asks a SubjectAccessReview
# for get on the non-resource URL /metrics with the scraper's identity.
may_get_metrics() {  # may_get_metrics USER: the SAR's status.allowed, asked as the controller
  local body
  body="$(jq -cn --arg u "$1" '{apiVersion: "authorization.k8s.io/v1", kind: "SubjectAccessReview",
    spec: {user: $u, groups: ["system:serviceaccounts", "system:authenticated"],
           nonResourceAttributes: {path: "/metrics", verb: "get"}}}')"
  call "$controller_token" POST /apis/authorization.k8s.io/v1/subjectaccessreviews "$body" >/dev/null
  jq -r .status.allowed "$work/response"
}
check "SAR: the scraper in metrics.scrapers may get /metrics" true \
  "$(may_get_metrics system:serviceaccount:monitoring:prometheus)"
check "SAR: another ServiceAccount may not get /metrics" false \
  "$(may_get_metrics system:serviceaccount:gpu-system:gpu-driver)"
check "the scraper may get no other non-resource URL (/debug/pprof/)" no \
  "$(kubectl auth can-i get /debug/pprof/ --as=system:serviceaccount:monitoring:prometheus 2>/dev/null || true)"
check "the scraper may not read secrets" no \
  "$(kubectl auth can-i get secrets -n "$ns" --as=system:serviceaccount:monitoring:prometheus 2>/dev/null || true)"

# --- Pull mode with discovery: list and watch Services, EndpointSlices and
# Pods, only in the namespaces pull.drivers binds. In each of gpu-system and
# kube-system, a driver's labelled Service, a hand-made EndpointSlice for it
# (the test cluster runs no EndpointSlice controller) and the Pod it names.
kubectl create serviceaccount gpu-driver -n kube-system >/dev/null
for n in gpu-system kube-system; do
  kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Service
metadata:
  name: inventory
  namespace: $n
  labels: {resourceslice.dra.k8s.io/driver: gpu.example.com}
spec:
  ports: [{name: inventory, port: 9443, appProtocol: https}]
---
apiVersion: v1
kind: Pod
metadata:
  name: gpu-driver-1
  namespace: $n
spec:
  serviceAccountName: gpu-driver
  automountServiceAccountToken: false
  nodeName: node-a
  containers: [{name: driver, image: registry.example.com/gpu-driver:1}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: inventory-1
  namespace: $n
  labels: {resourceslice.dra.k8s.io/driver: gpu.example.com, kubernetes.io/service-name: inventory}
addressType: IPv4
ports: [{name: inventory, port: 9443, appProtocol: https}]
endpoints:
  - addresses: [10.1.2.3]
    nodeName: node-a
    conditions: {ready: true}
    targetRef: {kind: Pod, name: gpu-driver-1, namespace: $n}
EOF
done
driver_selector="labelSelector=resourceslice.dra.k8s.io%2Fdriver"
# listed PATH: "CODE NAMESPACE/NAME..." of a list made as the controller.
listed() {
  local code
  code="$(call "$controller_token" GET "$1")"
  echo "$code $(jq -r '[.items[]? | "\(.metadata.namespace)/\(.metadata.name)"] | join(" ")' "$work/response")"
}

# Two drivers: gpu.example.com served by gpu-driver pods in gpu-system,
# nic.example.com by any pod of nic-system or gpu-system. kube-system and
# default are bound to no driver.
helm template rsc "$chart" --namespace "$ns" --kube-version "$kube_version" --set pull.enabled=true \
  --set-json 'pull.drivers=[{"name":"gpu.example.com","namespaces":["gpu-system"],"serviceAccount":"gpu-driver"},{"name":"nic.example.com","namespaces":["nic-system","gpu-system"]}]' \
  --show-only templates/pull-rbac.yaml >"$work/pull-rbac.yaml"
check_ok "pull discovery RBAC for two drivers applies" kubectl apply -f "$work/pull-rbac.yaml"
check "a Role and a RoleBinding in each bound namespace, once, nothing cluster-wide" \
  '["Role/gpu-system","Role/nic-system","RoleBinding/gpu-system","RoleBinding/nic-system"]' \
  "$(kubectl apply --dry-run=server -o json -f "$work/pull-rbac.yaml" | jq -c '[.items[] | "\(.kind)/\(.metadata.namespace)"] | sort')"
check "no ClusterRole or ClusterRoleBinding for pull discovery exists" '[]' \
  "$( { kubectl get clusterroles -o json; kubectl get clusterrolebindings -o json; } |
    jq -sc '[.[].items[] | select(.metadata.name | contains("pull")) | .metadata.name]')"
for verb in list watch; do
  for n in gpu-system nic-system; do
    can controller yes "$verb" services -n "$n"
    can controller yes "$verb" endpointslices.discovery.k8s.io -n "$n"
    can controller yes "$verb" pods -n "$n"
  done
  # Namespaces bound to no driver: no access at all.
  for n in kube-system default; do
    can controller no "$verb" services -n "$n"
    can controller no "$verb" endpointslices.discovery.k8s.io -n "$n"
    can controller no "$verb" pods -n "$n"
  done
  can controller no "$verb" services --all-namespaces
  can controller no "$verb" endpointslices.discovery.k8s.io --all-namespaces
  can controller no "$verb" pods --all-namespaces
done
# List and watch only: nothing that reads one object by name, writes, or reaches
# into a pod.
for verb in get create update patch delete; do
  can controller no "$verb" services -n gpu-system
  can controller no "$verb" endpointslices.discovery.k8s.io -n gpu-system
  can controller no "$verb" pods -n gpu-system
done
can controller no create pods --subresource=exec -n gpu-system
can controller no get pods --subresource=log -n gpu-system
can controller no list endpoints -n gpu-system
can controller no list secrets -n gpu-system
can controller no list serviceaccounts -n gpu-system

# The calls themselves, made with the controller's token.
check "list the labelled Services of a bound namespace" "200 gpu-system/inventory" \
  "$(listed "/api/v1/namespaces/gpu-system/services?$driver_selector")"
check "list its EndpointSlices" "200 gpu-system/inventory-1" \
  "$(listed "/apis/discovery.k8s.io/v1/namespaces/gpu-system/endpointslices?$driver_selector")"
check "list its Pods (an endpoint's node, address and ServiceAccount)" "200 gpu-system/gpu-driver-1" \
  "$(listed "/api/v1/namespaces/gpu-system/pods")"
for path in /api/v1/namespaces/gpu-system/services /apis/discovery.k8s.io/v1/namespaces/gpu-system/endpointslices \
  /api/v1/namespaces/nic-system/pods; do
  check "watch $path" 200 "$(call "$controller_token" GET "$path?watch=1&timeoutSeconds=1")"
done
check "no Services of a namespace bound to no driver" "403 " \
  "$(listed "/api/v1/namespaces/kube-system/services?$driver_selector")"
check "no EndpointSlices there" "403 " \
  "$(listed "/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices?$driver_selector")"
check "no Pods there" "403 " "$(listed "/api/v1/namespaces/kube-system/pods")"
check "no Services of every namespace" "403 " "$(listed "/api/v1/services?$driver_selector")"
check "no EndpointSlices of every namespace" "403 " "$(listed "/apis/discovery.k8s.io/v1/endpointslices?$driver_selector")"
check "no Pods of every namespace" "403 " "$(listed "/api/v1/pods")"
check "no single Pod by name" 403 "$(call "$controller_token" GET /api/v1/namespaces/gpu-system/pods/gpu-driver-1)"

finish
