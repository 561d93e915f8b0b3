#!/usr/bin/env bash
# The chart's ValidatingAdmissionPolicy against the real kube-apiserver, with
# real identities: the controller binary, under the chart's ServiceAccount and
# arguments, publishes pools on node-a and node-b through the policy; a
# ServiceAccount that RBAC allows every verb on resourceslices ("intruder") is
# refused, through every served version of resource.k8s.io, when it updates
# or deletes a managed slice, creates one of the chart's driver, or puts the
# managed-by label on a slice, and is not refused for unrelated slices; node-a
# (the kubelet's identity) deletes its own node's managed slices with the
# kubelet's DeleteCollection, but not node-b's and creates or updates none;
# the garbage collector's ServiceAccount deletes one; system:masters (the
# break-glass) edits and deletes them; the uninstall hook's --cleanup, under
# its own ServiceAccount, deletes them all. The cluster serves v1beta1 and
# v1beta2 of resource.k8s.io too (off by default), so that a write through an
# older version is shown to be checked as well.
# Usage: chart_policy_test.sh CONTROLLER_BINARY
set -euo pipefail
binary="$1"
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

export TESTCLUSTER_APISERVER_ARGS="${TESTCLUSTER_APISERVER_ARGS:-} --runtime-config=resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true"
start_cluster
ns=rsc-system
release=rsc
name="$release-resourceslice-controller"
managed=app.kubernetes.io/managed-by=resourceslice-controller
server="$(cat "$cluster/server")"
kubectl create namespace "$ns" >/dev/null
kubectl create namespace drivers >/dev/null

apply_chart "$release" --set 'drivers[0].name=gpu-driver' --set 'drivers[0].namespace=drivers' \
  --set 'drivers[0].driverNames[0]=gpu.example.com'
check "the policy and its binding are applied" \
  "ValidatingAdmissionPolicy/$name ValidatingAdmissionPolicyBinding/$name" \
  "$(jq -r 'select(.kind | startswith("ValidatingAdmissionPolicy")) | "\(.kind)/\(.metadata.name)"' \
      "$work/rendered.json" | paste -sd' ')"

# api TOKEN METHOD PATH [BODY]: a request with nothing but that bearer token;
# prints the HTTP code, the body goes to $work/answer.
api() {
  curl -sS -o "$work/answer" -w '%{http_code}' --cacert "$cluster/pki/ca.crt" \
    -H "Authorization: Bearer $1" -H 'Content-Type: application/json' -X "$2" \
    ${4:+--data "$4"} "$server$3"
}
answer() { jq -r '.message // empty' "$work/answer"; }
# slice VERSION NAME DRIVER LABELLED: a slice for all nodes, without devices,
# valid in every version.
slice() {
  jq -cn --arg v "$1" --arg n "$2" --arg d "$3" --arg l "$4" '{
    apiVersion: "resource.k8s.io/\($v)", kind: "ResourceSlice",
    metadata: ({name: $n} + if $l == "yes" then {labels: {"app.kubernetes.io/managed-by": "resourceslice-controller"}} else {} end),
    spec: {driver: $d, allNodes: true, pool: {name: $n, generation: 1, resourceSliceCount: 1}}}'
}
slices="/apis/resource.k8s.io/v1/resourceslices"

# The intruder: RBAC lets it do everything to every ResourceSlice.
kubectl -n "$ns" create serviceaccount intruder >/dev/null
kubectl create clusterrole slice-writer --verb='*' --resource=resourceslices.resource.k8s.io >/dev/null
kubectl create clusterrolebinding intruder --clusterrole=slice-writer --serviceaccount="$ns:intruder" >/dev/null
intruder="$(kubectl -n "$ns" create token intruder)"
# The API server enforces a policy once its informers have it and it is
# type-checked: wait until a dry run of a forbidden create is refused by it.
policy_active() {
  [[ "$(api "$intruder" POST "$slices?dryRun=All" "$(slice v1 probe other.example.com yes)")" == 403 ]] &&
    [[ "$(answer)" == *"ValidatingAdmissionPolicy '$name'"* ]]
}
wait_for 60 "the policy is enforced" policy_active
check "the policy type-checks without warnings" "" \
  "$(kubectl get validatingadmissionpolicy "$name" -o json | jq -c '.status.typeChecking.expressionWarnings // empty')"

# --- 1. The controller publishes through the policy.
kubeconfig_for "$name" "$work/controller.kubeconfig"
start_controller "$binary" "$work/controller.kubeconfig"
ready=false
wait_ready "$health_port" && ready=true
check "the controller becomes ready under the chart's ServiceAccount" true "$ready"
for node in node-a node-b; do create_node "$node"; done
kubectl -n drivers create serviceaccount gpu-driver >/dev/null
use_inventory "$release" drivers
for node in node-a node-b; do
  check "the controller publishes $node's pool through the policy" 200 \
    "$(push "$(driver_token drivers gpu-driver "$node")" gpu.example.com "$node")"
done
# managed_slice NODE: the name of a managed slice on NODE (empty when none).
managed_slice() {
  kubectl get resourceslices -l "$managed" --field-selector "spec.nodeName=$1" -o json |
    jq -r '.items[0].metadata.name // empty'
}
has_managed_slice() { [[ -n "$(managed_slice "$1")" ]]; }
slice_a="$(managed_slice node-a)"
slice_b="$(managed_slice node-b)"
check "node-a and node-b have a managed slice" "true true" \
  "$([[ -n "$slice_a" ]] && echo true) $([[ -n "$slice_b" ]] && echo true)"
[[ -n "$slice_a" && -n "$slice_b" ]] || fatal "no managed slices: $(tail -20 "$work/controller.log")"

# --- 2. The intruder, through every served version.
mapfile -t versions < <(kubectl api-versions | sed -n 's|^resource.k8s.io/||p')
echo "kube-apiserver $kube_version serves resource.k8s.io ${versions[*]}"
check "v1, v1beta1 and v1beta2 are served" "v1 v1beta1 v1beta2" "${versions[*]}"
policy_says="ValidatingAdmissionPolicy '$name' with binding '$name' denied request"
only_sa="system:serviceaccount:$ns:$name"
for v in "${versions[@]}"; do
  path="/apis/resource.k8s.io/$v/resourceslices"
  api "$intruder" GET "$path/$slice_a" >/dev/null
  edited="$(jq -c '.metadata.annotations["example.com/edited"] = "yes"' "$work/answer")"
  check "$v: the intruder's update of a managed slice is refused" 403 "$(api "$intruder" PUT "$path/$slice_a" "$edited")"
  msg="$(answer)"
  check_contains "$v: the refusal names the policy" "$policy_says" "$msg"
  check_contains "$v: the refusal says who may write" "may not update ResourceSlice $slice_a: it is managed by resourceslice-controller" "$msg"
  check_contains "$v: the refusal names the controller's ServiceAccount" "Only the controller's ServiceAccount $only_sa may" "$msg"
  check_contains "$v: the refusal names the node rule" "the node it is bound to (system:node:<spec.nodeName>" "$msg"
  check_contains "$v: the refusal names the break-glass" "Break-glass: requests of group system:masters are not checked" "$msg"
  unlabelled="$(jq -c 'del(.metadata.labels["app.kubernetes.io/managed-by"])' <<<"$edited")"
  check "$v: the intruder's removal of the label is refused" 403 "$(api "$intruder" PUT "$path/$slice_a" "$unlabelled")"
  check "$v: the intruder's delete of a managed slice is refused" 403 "$(api "$intruder" DELETE "$path/$slice_a")"
  check_contains "$v: the refusal names the policy" "$policy_says: system:serviceaccount:$ns:intruder may not delete" "$(answer)"
  check "$v: the intruder's create of a gpu.example.com slice (unlabelled) is refused" 403 \
    "$(api "$intruder" POST "$path" "$(slice "$v" "intruder-gpu-$v" gpu.example.com no)")"
  check_contains "$v: the refusal says the chart publishes that driver" \
    "$policy_says: system:serviceaccount:$ns:intruder may not create ResourceSlice intruder-gpu-$v for driver gpu.example.com: resourceslice-controller publishes that driver's pools, so only its ServiceAccount $only_sa may create or update its slices." \
    "$(answer)"
  check "$v: the intruder's create of a labelled slice of another driver is refused" 403 \
    "$(api "$intruder" POST "$path" "$(slice "$v" "intruder-labelled-$v" other.example.com yes)")"
  check_contains "$v: the refusal names the label" "may not create ResourceSlice intruder-labelled-$v: it is managed by resourceslice-controller" "$(answer)"
  check "$v: the intruder still creates an unmanaged slice of another driver" 201 \
    "$(api "$intruder" POST "$path" "$(slice "$v" "other-$v" other.example.com no)")"
  api "$intruder" GET "$path/other-$v" >/dev/null
  check "$v: and updates it" 200 \
    "$(api "$intruder" PUT "$path/other-$v" "$(jq -c '.metadata.labels.team = "x"' "$work/answer")")"
  check "$v: and deletes it" 200 "$(api "$intruder" DELETE "$path/other-$v")"
done
# DeleteCollection: admission sees each slice; one refusal fails the call.
check "the intruder's DeleteCollection of the managed slices is refused" 403 \
  "$(api "$intruder" DELETE "$slices?labelSelector=${managed//\//%2F}")"
check_contains "the refusal names the policy" "$policy_says" "$(answer)"
check "the managed slices are all still there" "true true" \
  "$(for s in "$slice_a" "$slice_b"; do kubectl get resourceslice "$s" >/dev/null 2>&1 && echo true || echo false; done | paste -sd' ')"

# --- 3. The kubelet: node-a deletes its own node's slices, nothing else.
# (Read again: should the intruder have got through above, the controller has
# re-published them under new names, and what follows still shows.)
wait_for 30 "the controller re-publishes node-a's pool" has_managed_slice node-a
wait_for 30 "the controller re-publishes node-b's pool" has_managed_slice node-b
slice_a="$(managed_slice node-a)"
slice_b="$(managed_slice node-b)"
node_a="$(cat "$cluster/tokens/node-a")"
api "$node_a" GET "$slices/$slice_a" >/dev/null
check "node-a's update of its own managed slice is refused by the policy" 403 \
  "$(api "$node_a" PUT "$slices/$slice_a" "$(jq -c '.metadata.annotations["example.com/edited"] = "yes"' "$work/answer")")"
check_contains "the refusal names the policy" "$policy_says: system:node:node-a may not update" "$(answer)"
labelled_on_a="$(slice v1 node-a-made gpu.example.com yes | jq -c 'del(.spec.allNodes) | .spec.nodeName = "node-a"')"
check "node-a's create of a managed slice on node-a is refused by the policy" 403 \
  "$(api "$node_a" POST "$slices" "$labelled_on_a")"
check_contains "the refusal names the policy" "$policy_says: system:node:node-a may not create" "$(answer)"
check "node-a's delete of node-b's managed slice is refused" 403 "$(api "$node_a" DELETE "$slices/$slice_b")"
echo "  node-a deleting node-b's slice: $(answer)"
node_b_refusal="$(answer)"
# The node authorizer refuses it before admission (1.34 and 1.37 say so).
check_contains "it is refused before the policy, by the node authorizer" \
  "no relationship found between node 'node-a' and this object" "$node_b_refusal"
uid_a="$(kubectl get resourceslice "$slice_a" -o jsonpath='{.metadata.uid}')"
# The kubelet's call at start: DeleteCollection of its node's slices.
check "node-a's DeleteCollection of its node's slices (the kubelet's call) succeeds" 200 \
  "$(api "$node_a" DELETE "$slices?fieldSelector=spec.nodeName%3Dnode-a")"
check "it deleted node-a's managed slice" true \
  "$(jq --arg u "$uid_a" '[.items[]?.metadata.uid] | index($u) != null' "$work/answer")"
check "node-b's managed slice is untouched" true \
  "$(kubectl get resourceslice "$slice_b" >/dev/null 2>&1 && echo true || echo false)"
# The garbage collector deletes node-local slices with their Node (admin
# impersonating its ServiceAccount, whose bootstrap RBAC allows deletes).
check_ok "the garbage collector's ServiceAccount deletes a managed slice" \
  kubectl --as=system:serviceaccount:kube-system:generic-garbage-collector delete resourceslice "$slice_b"

# Both pools are now held (someone else deleted their node's slices): the
# driver pushes them again, as it does when its kubelet plugin registers.
for node in node-a node-b; do
  check "a push republishes $node's held pool" 200 \
    "$(push "$(driver_token drivers gpu-driver "$node")" gpu.example.com "$node")"
done

# --- 4. The break-glass: system:masters (the admin certificate) edits and deletes.
wait_for 30 "the controller re-publishes node-b's pool" has_managed_slice node-b
slice_b="$(managed_slice node-b)"
check_ok "system:masters annotates a managed slice" \
  kubectl annotate resourceslice "$slice_b" example.com/break-glass=yes
check_ok "system:masters deletes a managed slice" kubectl delete resourceslice "$slice_b"

# --- 5. The uninstall hook's --cleanup, under its own ServiceAccount and the
# Job's arguments, deletes what is left under the policy.
wait_for 30 "the controller re-publishes node-a's pool" has_managed_slice node-a
stop_controller
kubeconfig_for "$name-cleanup" "$work/cleanup.kubeconfig"
rc=0
"$binary" --kubeconfig "$work/cleanup.kubeconfig" "${cleanup_args[@]}" >"$work/cleanup.log" 2>&1 || rc=$?
check "--cleanup succeeds under the policy" 0 "$rc"
[[ "$rc" == 0 ]] || tail -20 "$work/cleanup.log"
check "no managed slice is left" 0 \
  "$(kubectl get resourceslices -l "$managed" -o json | jq '.items | length')"

if [[ "$failed" != 0 ]]; then
  echo "--- controller log"
  tail -30 "$work/controller.log"
fi
finish
