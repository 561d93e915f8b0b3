#!/usr/bin/env bash
# The chart's life cycle with helm against a real kube-apiserver: install
# (with its notes for drivers, HTTPS by default), upgrade to plain HTTP, then to
# pull mode (refusing the values of an earlier chart), and uninstall through the
# post-delete hook, which runs once the controller is gone. The test cluster
# runs no kube-controller-manager, so no pod ever starts: while `helm
# uninstall` waits for the cleanup Job, this script does the Job's work with
# the Job's own ServiceAccount token (take the leader Lease, delete the managed
# ResourceSlices, release the Lease) and marks the Job complete, as the Job
# controller would. Then nothing of the release may be left, the admission
# policy (on by default) included. Starts its own cluster and always stops it.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

start_cluster
ns=rsc-system
release=rsc
name=rsc-resourceslice-controller
managed=app.kubernetes.io/managed-by=resourceslice-controller
export KUBECONFIG="$cluster/kubeconfig"

# --- Install. The drivers' namespaces exist first (the chart publishes the CA
# bundle there, under a Role it creates in each).
kubectl create namespace gpu-system >/dev/null
check_ok "helm install" helm install "$release" "$chart" --namespace "$ns" --create-namespace \
  --set-json 'drivers=[{"name":"gpu-driver","namespace":"gpu-system","driverNames":["gpu.example.com"]}]'
check "the release is deployed" deployed "$(helm status "$release" -n "$ns" -o json | jq -r .info.status)"
check "the Deployment exists with two replicas" 2 "$(kubectl get deployment "$name" -n "$ns" -o json | jq .spec.replicas)"
check "hooks are not installed with the release" NotFound \
  "$(kubectl get serviceaccount "$name-cleanup" -n "$ns" 2>&1 | grep -o NotFound || true)"
check "the CA bundle Role exists in the driver's namespace" "$name-inventory-tls" \
  "$(kubectl get role "$name-inventory-tls" -n gpu-system -o jsonpath='{.metadata.name}')"
check "the admission policy and its binding are installed (on by default)" "$name $name" \
  "$(kubectl get validatingadmissionpolicy "$name" -o jsonpath='{.metadata.name}') $(kubectl get validatingadmissionpolicybinding "$name" -o jsonpath='{.metadata.name}')"

notes="$(helm get notes "$release" -n "$ns")"
check_contains "notes: where drivers push (https by default)" \
  "PUT https://$name.$ns.svc:8443/v1/drivers/{driver}/pools/{pool}" "$notes"
check_contains "notes: the token audience" "audience: resourceslice-controller" "$notes"
check_contains "notes: how to grant publish" 'verbs: ["publish"]' "$notes"
check_contains "notes: who may publish now" "gpu-system/gpu-driver: gpu.example.com" "$notes"
check_contains "notes: the CA bundle to mount" "name: $name-ca" "$notes"
check_contains "notes: secure metrics" "Metrics: https://$name.$ns.svc:8080/metrics" "$notes"
check "notes: no plain HTTP warning by default" 0 "$(grep -c "plain HTTP, so" <<<"$notes" || true)"

# --- Upgrade: plain HTTP only when asked (no immutable field may change).
check_ok "helm upgrade to plain HTTP" helm upgrade "$release" "$chart" --namespace "$ns" --reuse-values \
  --set inventory.tls.enabled=false
check "the Service now serves the inventory on 8082" 8082 \
  "$(kubectl get service "$name" -n "$ns" -o json | jq '.spec.ports[] | select(.name == "inventory") | .port')"
notes="$(helm get notes "$release" -n "$ns")"
check_contains "notes: http after the upgrade" "PUT http://$name.$ns.svc:8082/v1/drivers/" "$notes"
check_contains "notes: warn about plain HTTP" "plain HTTP" "$notes"

# --- Upgrade: pull mode on. A values file of an earlier chart (discovery in
# every namespace) is refused with a message naming pull.drivers, and the
# release stays as it was.
out="$(helm upgrade "$release" "$chart" --namespace "$ns" --reuse-values \
  --set pull.enabled=true --set pull.discovery=true 2>&1)" && rc=0 || rc=$?
check "helm upgrade refuses the removed pull.discovery" 1 "$rc"
check_contains "the refusal names pull.drivers" "pull.discovery was removed: discovery is on exactly when pull.drivers lists a driver" "$out"
check "the refused upgrade left the release deployed" deployed "$(helm status "$release" -n "$ns" -o json | jq -r .info.status)"
# Then nic.example.com, bound to the nic-driver pods of nic-system.
kubectl create namespace nic-system >/dev/null
check_ok "helm upgrade to pull mode" helm upgrade "$release" "$chart" --namespace "$ns" --reuse-values \
  --set pull.enabled=true \
  --set-json 'pull.drivers=[{"name":"nic.example.com","namespaces":["nic-system"],"serviceAccount":"nic-driver"}]'
check "pull mode: the discovery Role in the bound namespace" '[{"apiGroups":[""],"resources":["services"],"verbs":["list","watch"]},{"apiGroups":["discovery.k8s.io"],"resources":["endpointslices"],"verbs":["list","watch"]},{"apiGroups":[""],"resources":["pods"],"verbs":["list","watch"]}]' \
  "$(kubectl get role "$name-pull-discovery" -n nic-system -o json | jq -c .rules)"
check "pull mode: no discovery ClusterRole" NotFound \
  "$(kubectl get clusterrole "$name-pull-discovery" 2>&1 | grep -o NotFound || true)"
check "pull mode: the binding in the flags" '["--pull-discovery=true","--pull-driver=nic.example.com=nic-system/nic-driver"]' \
  "$(kubectl get deployment "$name" -n "$ns" -o json |
    jq -c '[.spec.template.spec.containers[0].args[] | select(startswith("--pull-d"))]')"
check "pull mode: the Deployment mounts the controller's pull token" '"resourceslice-controller-pull"' \
  "$(kubectl get deployment "$name" -n "$ns" -o json |
    jq -c '.spec.template.spec.volumes[] | select(.name == "pull-token") | .projected.sources[0].serviceAccountToken.audience')"
notes="$(helm get notes "$release" -n "$ns")"
check_contains "notes: pull mode and the Service label" "resourceslice.dra.k8s.io/driver: <driver name>" "$notes"
check_contains "notes: who may serve the pulled driver" "nic.example.com: pods of ServiceAccount nic-driver in nic-system" "$notes"
check_contains "notes: every other Service is ignored" "Every other Service naming a" "$notes"
check_contains "notes: the audience of the controller's token" 'for the audience "resourceslice-controller-pull"' "$notes"

# Slices as the controller would have published them, and one that is not its.
create_node node-a
for i in 1 2 3; do
  manager=resourceslice-controller
  ((i < 3)) || manager=someone-else
  kubectl create -f - >/dev/null <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: install-slice-$i
  labels: {app.kubernetes.io/managed-by: $manager}
spec:
  driver: gpu.example.com
  nodeName: node-a
  pool: {name: node-a-$i, generation: 1, resourceSliceCount: 1}
  devices: [{name: gpu-0}]
EOF
done

# --- Uninstall through the post-delete hook.
helm uninstall "$release" -n "$ns" --timeout 120s >"$work/uninstall.out" 2>&1 &
uninstall_pid=$!
job=""
for _ in $(seq 300); do
  job="$(kubectl get job "$name-cleanup" -n "$ns" -o json 2>/dev/null || true)"
  [[ -n "$job" ]] && break
  sleep 0.2
done
check "the post-delete hook creates the cleanup Job" "$name-cleanup" "$(jq -r '.metadata.name // empty' <<<"$job")"
check "the Job runs the controller with --cleanup under the controllers' Lease" \
  "[\"--cleanup\",\"--leader-elect=true\",\"--leader-election-namespace=$ns\",\"--leader-election-id=$name\"]" \
  "$(jq -c '.spec.template.spec.containers[0].args[0:4]' <<<"$job")"
check "the Job's ServiceAccount and RBAC exist before it" \
  "$name-cleanup $name-cleanup $name-cleanup $name-cleanup $name-cleanup" \
  "$(kubectl get serviceaccount "$name-cleanup" -n "$ns" -o jsonpath='{.metadata.name}') $(kubectl get clusterrole "$name-cleanup" -o jsonpath='{.metadata.name}') $(kubectl get clusterrolebinding "$name-cleanup" -o jsonpath='{.metadata.name}') $(kubectl get role "$name-cleanup" -n "$ns" -o jsonpath='{.metadata.name}') $(kubectl get rolebinding "$name-cleanup" -n "$ns" -o jsonpath='{.metadata.name}')"
check "the controller is gone while the hook runs (Deployment, Service, account, Lease Role)" \
  "NotFound NotFound NotFound NotFound" \
  "$(for o in deployment/"$name" service/"$name" serviceaccount/"$name" role/"$name-leader-election"; do
       grep -o NotFound <<<"$(kubectl get "$o" -n "$ns" 2>&1 || true)" || echo "$o"
     done | paste -sd' ')"

# The Job's work, with the Job's ServiceAccount: take the leader Lease (no
# controller holds it: none ever ran), delete the managed slices, release it.
token="$(kubectl create token "$(jq -r .spec.template.spec.serviceAccountName <<<"$job")" -n "$ns")"
as_job() { # METHOD PATH [BODY]: the HTTP code
  curl -sS -o "$work/job-answer" -w '%{http_code}' --cacert "$cluster/pki/ca.crt" \
    -H "Authorization: Bearer $token" -H 'Content-Type: application/json' -X "$1" \
    ${3:+--data "$3"} "$(cat "$cluster/server")$2"
}
leases="/apis/coordination.k8s.io/v1/namespaces/$ns/leases"
t="$(date -u +%Y-%m-%dT%H:%M:%S.000000Z)"
check "the hook's ServiceAccount creates the leader Lease" 201 "$(as_job POST "$leases" "$(jq -cn \
  --arg n "$name" --arg t "$t" '{apiVersion: "coordination.k8s.io/v1", kind: "Lease", metadata: {name: $n},
  spec: {holderIdentity: "cleanup", leaseDurationSeconds: 15, acquireTime: $t, renewTime: $t}}')")"
code="$(as_job DELETE "/apis/resource.k8s.io/v1/resourceslices?labelSelector=${managed//\//%2F}")"
check "the hook's ServiceAccount deletes the managed slices" 200 "$code"
check "the hook's ServiceAccount reads the Lease" 200 "$(as_job GET "$leases/$name")"
check "the hook's ServiceAccount releases the Lease" 200 \
  "$(as_job PUT "$leases/$name" "$(jq -c '.spec.holderIdentity = "" | .spec.leaseDurationSeconds = 1' "$work/job-answer")")"
now="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
kubectl patch job "$name-cleanup" -n "$ns" --subresource=status --type merge -p "$(jq -cn --arg t "$now" \
  '{status: {startTime: $t, completionTime: $t, succeeded: 1, conditions: [
     {type: "SuccessCriteriaMet", status: "True", lastTransitionTime: $t, lastProbeTime: $t},
     {type: "Complete", status: "True", lastTransitionTime: $t, lastProbeTime: $t}]}}')" >/dev/null
rc=0
wait "$uninstall_pid" || rc=$?
check "helm uninstall succeeds once the Job completes" 0 "$rc"
[[ "$rc" == 0 ]] || cat "$work/uninstall.out"

# Nothing of the release is left, hooks included; only the foreign slice stays.
left="$(kubectl get deployments,services,serviceaccounts,roles,rolebindings,jobs,poddisruptionbudgets,secrets \
  -n "$ns" -l app.kubernetes.io/instance="$release" -o name)"
left+="$(kubectl get roles,rolebindings -n nic-system -l app.kubernetes.io/instance="$release" -o name)"
left+="$(kubectl get clusterroles,clusterrolebindings,validatingadmissionpolicies,validatingadmissionpolicybindings \
  -l app.kubernetes.io/instance="$release" -o name)"
check "no object of the release is left" "" "$left"
check "no release record is left" "" "$(kubectl get secrets -n "$ns" -l owner=helm -o name)"
check "the admission policy and its binding are gone" "NotFound NotFound" \
  "$(for o in validatingadmissionpolicy validatingadmissionpolicybinding; do
       grep -o NotFound <<<"$(kubectl get "$o" "$name" 2>&1 || true)" || echo "$o"
     done | paste -sd' ')"
check "only the slice the controller does not manage is left" "install-slice-3" \
  "$(kubectl get resourceslices -o json | jq -r '[.items[].metadata.name] | join(" ")')"

finish
