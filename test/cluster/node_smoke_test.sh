#!/usr/bin/env bash
# Usage: test/cluster/node_smoke_test.sh [--kubernetes MINOR] [--kubelet-root-dir PATH] [--keep]
# Proves that `start --node` gives a node that runs pods the way users run
# them, and that stop leaves the host as it found it:
#   - a Deployment of two pause pods gets Running pods with pod IPs;
#   - a Job whose pod uses the default ServiceAccount's projected token reaches
#     the API server at https://10.0.0.1:443 (through kube-proxy) and is let in;
#   - a ClusterIP Service answers through kube-proxy, from the host and from a pod;
#   - kubectl logs and kubectl exec work (the API server reaches the kubelet);
#   - kube-scheduler allocates a ResourceClaim from a ResourceSlice of the node;
#   - after restart-kubelet the node is Ready again and runs a new pod;
#   - after stop, host-snapshot shows no difference with before start.
# Needs root. --keep leaves the cluster running (DIR is printed).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export PATH="$PATH:/usr/local/go/bin"
start_args=()
keep=false
while (($#)); do
  case "$1" in
    --kubernetes) start_args+=("$1" "$2"); shift 2 ;;
    --kubelet-root-dir) start_args+=("$1=$2"); shift 2 ;;
    --keep) keep=true; shift ;;
    *) echo "usage: $0 [--kubernetes MINOR] [--kubelet-root-dir PATH] [--keep]" >&2; exit 2 ;;
  esac
done
dir="$(mktemp -d /tmp/node-smoke.XXXXXX)"
before="$(mktemp)"
after="$(mktemp)"
"$here/host-snapshot" >"$before"
cleanup() {
  local rc=$?
  if $keep && ((rc == 0)); then
    echo "node_smoke_test: cluster left running in $dir (test/cluster/stop $dir)"
    return
  fi
  if ((rc != 0)); then
    echo "node_smoke_test: FAILED; logs in $dir/logs" >&2
    "$here/kubectl" "$dir" get pods -A -o wide >&2 || true
  fi
  "$here/stop" "$dir" || rc=1
  "$here/host-snapshot" >"$after"
  if ! diff -u "$before" "$after" >&2; then
    echo "node_smoke_test: FAILED: stop left changes on the host (above)" >&2
    rc=1
  else
    echo "node_smoke_test: stop left the host as it was"
  fi
  ((rc != 0)) || rm -rf "$dir"
  rm -f "$before" "$after"
  exit $rc
}
trap cleanup EXIT
k() { "$here/kubectl" "$dir" "$@"; }
step() { echo "node_smoke_test: $*"; }

t0=$SECONDS
"$here/start" "${start_args[@]}" --node "$dir"
step "start --node took $((SECONDS - t0)) s"
"$here/load-image" "$dir" "$dir/bin/pause.tar" >/dev/null

step "a Deployment of two pause pods"
k create deployment pause --image=localhost/pause:test --replicas=2 >/dev/null
k rollout status deployment/pause --timeout=60s >/dev/null
ips="$(k get pods -l app=pause -o jsonpath='{range .items[*]}{.status.podIP} {end}')"
[[ "$(wc -w <<<"$ips")" == 2 ]] || { echo "want two pod IPs, got: $ips" >&2; exit 1; }
step "pods running with IPs $ips"

step "a Job reaching https://10.0.0.1:443 with the default ServiceAccount's token"
k apply -f - >/dev/null <<'YAML'
apiVersion: batch/v1
kind: Job
metadata: {name: reach-apiserver}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      serviceAccountName: default
      containers:
      - name: probe
        image: localhost/probe:test
        args: ["-tries=10", "https://10.0.0.1:443/api"]
YAML
k wait --for=condition=complete job/reach-apiserver --timeout=90s >/dev/null
k logs job/reach-apiserver

step "a ClusterIP Service through kube-proxy"
k apply -f - >/dev/null <<'YAML'
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: localhost/probe:test
        args: ["-serve=:8080"]
        ports: [{containerPort: 8080}]
        readinessProbe: {httpGet: {path: /, port: 8080}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
YAML
k rollout status deployment/web --timeout=60s >/dev/null
ip="$(k get service web -o jsonpath='{.spec.clusterIP}')"
for try in $(seq 50); do
  if answer="$(curl -fsS --max-time 2 "http://$ip/" 2>/dev/null)"; then break; fi
  sleep 0.2
done
step "from the host, http://$ip/ answered: $answer"
k create job reach-service --image=localhost/probe:test -- /probe -tries=10 "http://$ip/" >/dev/null
k wait --for=condition=complete job/reach-service --timeout=90s >/dev/null
k logs job/reach-service

step "kubectl logs and exec"
pod="$(k get pods -l app=web -o jsonpath='{.items[0].metadata.name}')"
k logs "$pod" | grep -q "probe: serving on :8080"
k exec "$pod" -- /probe -tries=1 http://127.0.0.1:8080/

step "kube-scheduler allocates a ResourceClaim from a ResourceSlice of node-a"
k apply -f - >/dev/null <<'YAML'
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: smoke.example.com}
spec:
  selectors:
  - cel: {expression: 'device.driver == "smoke.example.com"'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-a-smoke}
spec:
  driver: smoke.example.com
  nodeName: node-a
  pool: {name: node-a, generation: 1, resourceSliceCount: 1}
  devices:
  - name: dev-0
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: smoke}
spec:
  spec:
    devices:
      requests:
      - name: dev
        exactly: {deviceClassName: smoke.example.com}
---
apiVersion: v1
kind: Pod
metadata: {name: claimer}
spec:
  containers:
  - {name: pause, image: localhost/pause:test}
  resourceClaims:
  - {name: dev, resourceClaimTemplateName: smoke}
YAML
# No kubelet plugin serves smoke.example.com: the pod is bound and its claim
# allocated, but it never runs ("DRA driver smoke.example.com is not registered").
k wait --for=jsonpath='{.spec.nodeName}'=node-a pod/claimer --timeout=60s >/dev/null
claim="$(k get pod claimer -o jsonpath='{.status.resourceClaimStatuses[0].resourceClaimName}')"
device="$(k get resourceclaim "$claim" -o jsonpath='{.status.allocation.devices.results[0].device}')"
[[ "$device" == dev-0 ]] || { echo "claim $claim: want device dev-0 allocated, got '$device'" >&2; exit 1; }
step "claim $claim allocated device $device"
k delete pod claimer --timeout=60s >/dev/null

step "restart the kubelet"
"$here/restart-kubelet" "$dir"
k run after-restart --image=localhost/pause:test --restart=Never >/dev/null
k wait --for=condition=Ready pod/after-restart --timeout=60s >/dev/null
k get pods -o wide
step "passed in $((SECONDS - t0)) s"
