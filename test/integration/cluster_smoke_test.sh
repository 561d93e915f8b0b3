#!/usr/bin/env bash
# Checks the test cluster itself with nothing but curl: a resource.k8s.io/v1
# ResourceSlice can be created, read, watched, updated and deleted; the API
# server rejects an invalid slice (422) and identities without rights (401,
# 403). Starts its own cluster and always stops it.
set -euo pipefail

# shellcheck source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
watch_pid=""
on_exit '[[ -z "$watch_pid" ]] || kill "$watch_pid" 2>/dev/null'

start_cluster
server="$(cat "$cluster/server")"
slices="$server/apis/resource.k8s.io/v1/resourceslices"

# api AS METHOD URL [BODY]: prints the response body, then the HTTP code on the last line.
api() {
  local as="$1" method="$2" url="$3" body="${4:-}"
  local auth=()
  [[ "$as" != "anonymous" ]] && auth=(-H "Authorization: Bearer $(cat "$cluster/tokens/$as")")
  curl -sS --cacert "$cluster/pki/ca.crt" "${auth[@]}" -X "$method" \
    -H 'Content-Type: application/json' ${body:+--data "$body"} -w '\n%{http_code}' "$url"
}
code() { tail -n1 <<<"$1"; }
body() { sed '$d' <<<"$1"; }

slice() {  # slice NODE DRIVER
  cat <<JSON
{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice",
 "metadata":{"generateName":"smoke-","labels":{"app.kubernetes.io/managed-by":"resourceslice-controller"}},
 "spec":{"driver":"$2","nodeName":"$1",
   "pool":{"name":"$1","generation":1,"resourceSliceCount":1},
   "devices":[{"name":"gpu-0","attributes":{"model":{"string":"A100"}},
               "capacity":{"memory":{"value":"40Gi"}}}]}}
JSON
}

# Create.
r="$(api admin POST "$slices" "$(slice node-a gpu.example.com)")"
check "create returns 201" 201 "$(code "$r")"
name="$(body "$r" | jq -r .metadata.name)"
uid="$(body "$r" | jq -r .metadata.uid)"
rv="$(body "$r" | jq -r .metadata.resourceVersion)"
check "generateName gives a name" smoke- "${name:0:6}"

# Watch from the create's resourceVersion while the slice changes and goes.
curl -sS -N --cacert "$cluster/pki/ca.crt" -H "Authorization: Bearer $(cat "$cluster/tokens/admin")" \
  "$slices?watch=1&allowWatchBookmarks=true&timeoutSeconds=30&resourceVersion=$rv&labelSelector=app.kubernetes.io%2Fmanaged-by%3Dresourceslice-controller" \
  >"$cluster/watch.out" &
watch_pid=$!

# Read.
r="$(api admin GET "$slices/$name")"
check "get returns 200" 200 "$(code "$r")"
check "get returns the device" A100 "$(body "$r" | jq -r '.spec.devices[0].attributes.model.string')"

# Update with the resourceVersion read; a stale one conflicts.
updated="$(body "$r" | jq -c '.spec.devices[0].attributes.model.string = "H100" | .spec.pool.generation = 2')"
r="$(api admin PUT "$slices/$name" "$updated")"
check "update returns 200" 200 "$(code "$r")"
r="$(api admin PUT "$slices/$name" "$updated")"
check "update with a stale resourceVersion returns 409" 409 "$(code "$r")"

# Delete with a UID precondition; a wrong UID is refused.
r="$(api admin DELETE "$slices/$name" '{"preconditions":{"uid":"00000000-0000-0000-0000-000000000000"}}')"
check "delete with a wrong UID returns 409" 409 "$(code "$r")"
r="$(api admin DELETE "$slices/$name" "{\"preconditions\":{\"uid\":\"$uid\"}}")"
check "delete returns 200" 200 "$(code "$r")"
r="$(api admin GET "$slices/$name")"
check "deleted slice is gone" 404 "$(code "$r")"

# The watch saw the update and the delete, in order.
for _ in $(seq 100); do
  grep -q '"type":"DELETED"' "$cluster/watch.out" && break
  sleep 0.1
done
events="$(jq -r --arg n "$name" 'select(.object.metadata.name == $n) | .type' "$cluster/watch.out" | tr '\n' ' ')"
check "watch delivers MODIFIED then DELETED" "MODIFIED DELETED " "$events"

# Validation: an invalid driver name and a zero slice count are both reported.
bad="$(slice node-a 'Not_A_Driver' | jq -c '.spec.pool.resourceSliceCount = 0')"
r="$(api admin POST "$slices" "$bad")"
check "invalid slice returns 422" 422 "$(code "$r")"
check "422 reason is Invalid" Invalid "$(body "$r" | jq -r .reason)"
check "422 names both fields" "spec.driver spec.pool.resourceSliceCount" \
  "$(body "$r" | jq -r '[.details.causes[].field] | sort | unique | join(" ")')"

# Authentication and authorisation.
r="$(api anonymous GET "$slices")"
check "anonymous list returns 401 or 403" true "$([[ "$(code "$r")" == 401 || "$(code "$r")" == 403 ]] && echo true || echo false)"
r="$(api nobody POST "$slices" "$(slice node-a gpu.example.com)")"
check "user without RBAC gets 403" 403 "$(code "$r")"
check "403 reason is Forbidden" Forbidden "$(body "$r" | jq -r .reason)"
r="$(api node-a POST "$slices" "$(slice node-b gpu.example.com)")"
check "node-a may not publish node-b's slice" 403 "$(code "$r")"

finish
