#!/usr/bin/env bash
# Checks the chart without a cluster: `helm lint --strict` passes with the
# default values and with test/charts/values-all.yaml (every option on); bad
# values fail `helm lint` and `helm template` with an error naming the key;
# combinations the schema cannot express fail with the chart's own message;
# pull mode renders its flags, volumes and discovery RBAC only when enabled,
# and discovery only for the drivers pull.drivers binds, in their namespaces;
# values.yaml, values-all.yaml and the README's table cover every parameter.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# fails COMMAND REFUSES EXPLAINS CASE: `helm COMMAND` (template or lint) with
# the values of CASE (YAML, a tab, the message expected) fails and says why;
# REFUSES and EXPLAINS name the two checks.
fails() {
  local body="${4%%$'\t'*}" want="${4#*$'\t'}" out rc=0 args=("$1")
  [[ "$1" == template ]] && args+=(rsc)
  printf '%s\n' "$body" >"$work/bad.yaml"
  out="$(helm "${args[@]}" "$chart" -f "$work/bad.yaml" 2>&1)" || rc=$?
  check "helm $1 $2 '$body'" 1 "$rc"
  check_contains "helm $1 $3 '$body'" "$want" "$out"
}

# Lint: default values and every option.
for values in default all; do
  args=()
  [[ "$values" == all ]] && args=(-f "$values_all")
  out="$(helm lint --strict "$chart" "${args[@]}" 2>&1)" && rc=0 || rc=$?
  check "helm lint --strict passes with $values values" 0 "$rc"
  check_contains "helm lint reports no failed chart ($values)" "1 chart(s) linted, 0 chart(s) failed" "$out"
  [[ "$rc" == 0 ]] || echo "$out"
  check_ok "helm template renders with $values values" helm template rsc "$chart" "${args[@]}"
done

# Bad values: each fails both commands, and the message names the key.
# Columns: a values file body, then a piece of the expected error.
bad_cases=(
  'replicaCount: "two"'$'\t'"at '/replicaCount': got string, want integer"
  'replicas: 2'$'\t'"additional properties 'replicas' not allowed"
  'image: {tags: latest}'$'\t'"at '/image': additional properties 'tags' not allowed"
  'metrics: {serviceMonitor: {enabeld: true}}'$'\t'"at '/metrics/serviceMonitor': additional properties 'enabeld' not allowed"
  'auth: {mode: oidc}'$'\t'"at '/auth/mode': value must be one of 'tokenreview', 'none'"
  'inventory: {tls: {mode: vault}}'$'\t'"at '/inventory/tls/mode': value must be one of 'self-signed', 'cert-manager', 'secret'"
  'inventory: {tls: {certManager: {issuerRef: {kind: Vault}}}}'$'\t'"at '/inventory/tls/certManager/issuerRef/kind'"
  'leaderElection: {enabled: "yes"}'$'\t'"at '/leaderElection/enabled': got string, want boolean"
  'drivers: [{name: gpu-driver}]'$'\t'"at '/drivers/0': missing property 'namespace'"
  'drivers: [{name: d, namespace: n, driverNames: [Bad_Name]}]'$'\t'"at '/drivers/0/driverNames/0': 'Bad_Name' does not match pattern"
  'extraArgs: [workers=3]'$'\t'"at '/extraArgs/0': 'workers=3' does not match pattern"
  'metrics: {port: 70000}'$'\t'"at '/metrics/port'"
  'securityContext: {runAsNonroot: true}'$'\t'"at '/securityContext': additional properties 'runAsNonroot' not allowed"
  'resources: {limits: {memory: lots}}'$'\t'"at '/resources/limits/memory'"
  'tolerations: [{key: a, operator: Maybe}]'$'\t'"at '/tolerations/0/operator'"
  'pull: {sources: [{driver: nic.example.com}]}'$'\t'"at '/pull/sources/0': missing property 'url'"
  'pull: {sources: [{driver: nic.example.com, url: "ftp://nic"}]}'$'\t'"at '/pull/sources/0/url'"
  'pull: {drivers: [{name: a.example.com, namespaces: [Bad_NS]}]}'$'\t'"at '/pull/drivers/0/namespaces/0'"
  'pull: {drivers: [{name: a.example.com}]}'$'\t'"at '/pull/drivers/0': missing property 'namespaces'"
  'pull: {drivers: [{name: a.example.com, namespaces: []}]}'$'\t'"at '/pull/drivers/0/namespaces': minItems"
  'pull: {drivers: [{name: a.example.com, namespaces: [a, a]}]}'$'\t'"at '/pull/drivers/0/namespaces': items at"
  'pull: {drivers: [{name: Bad_Driver, namespaces: [a]}]}'$'\t'"at '/pull/drivers/0/name'"
  'pull: {drivers: [{name: a.example.com, namespaces: [a], serviceAccount: Bad_SA}]}'$'\t'"at '/pull/drivers/0/serviceAccount'"
  'pull: {drivers: [{name: a.example.com, namespaces: [a], serviceAccounts: [b]}]}'$'\t'"at '/pull/drivers/0': additional properties 'serviceAccounts' not allowed"
  'pull: {interval: soon}'$'\t'"at '/pull/interval'"
  'pull: {token: {audiences: [x]}}'$'\t'"at '/pull/token': additional properties 'audiences' not allowed"
  'pull: {endpointPorts: [70000]}'$'\t'"at '/pull/endpointPorts/0'"
)
for case in "${bad_cases[@]}"; do
  fails template rejects "names the key for" "$case"
  fails lint rejects "names the key for" "$case"
done

# Combinations the schema cannot express fail with the chart's own message.
fail_cases=(
  'leaderElection: {enabled: false}'$'\t'"replicaCount above 1 needs leaderElection.enabled"
  'inventory: {tls: {mode: secret}}'$'\t'"inventory.tls.secretName is required when inventory.tls.mode is secret"
  'podDisruptionBudget: {minAvailable: 1, maxUnavailable: 1}'$'\t'"set minAvailable or maxUnavailable, not both"
  'serviceAccount: {create: false}'$'\t'"serviceAccount.name is required when serviceAccount.create is false"
  'drivers: [{name: d, namespace: ns1}, {name: d, namespace: ns1}]'$'\t'"ServiceAccount ns1/d is listed twice"
  'pull: {enabled: true}'$'\t'"pull.enabled needs at least one entry in pull.drivers or in pull.sources"
  'pull: {enabled: true, sources: [{driver: a.example.com, url: "http://a"}, {driver: a.example.com, url: "http://b"}]}'$'\t'"pull.sources: driver a.example.com is listed twice"
  'pull: {enabled: true, drivers: [{name: a.example.com, namespaces: [a]}, {name: a.example.com, namespaces: [b]}]}'$'\t'"pull.drivers: driver a.example.com is listed twice (one entry per driver: list all its namespaces in it)"
  'pull: {enabled: true, drivers: [{name: a.example.com, namespaces: [a]}], sources: [{driver: a.example.com, url: "http://a"}]}'$'\t'"pull.sources: driver a.example.com is in pull.drivers too (one source of truth per driver)"
  # Values of earlier versions: refused, naming the replacement, even with pull mode off.
  'pull: {enabled: true, namespaces: [gpu-system]}'$'\t'"pull.namespaces was removed: bind each pulled driver to the namespaces that serve it in pull.drivers"
  'pull: {namespaces: []}'$'\t'"pull.namespaces was removed"
  'pull: {enabled: true, discovery: true, drivers: [{name: a.example.com, namespaces: [a]}]}'$'\t'"pull.discovery was removed: discovery is on exactly when pull.drivers lists a driver"
  'pull: {discovery: false}'$'\t'"pull.discovery was removed"
)
for case in "${fail_cases[@]}"; do
  fails template refuses explains "$case"
done
# What the schema already refuses, the chart refuses too where the schema is skipped.
out="$(helm template rsc "$chart" --skip-schema-validation \
  --set-json 'pull.drivers=[{"name":"a.example.com","namespaces":[]}]' 2>&1)" && rc=0 || rc=$?
check "without the schema: a driver without namespaces is refused" 1 "$rc"
check_contains "without the schema: the message says what is missing" \
  "pull.drivers: driver a.example.com has no namespaces" "$out"

# Each certificate mode renders what it needs, and plain HTTP only when asked.
out="$(helm template rsc "$chart" --set inventory.tls.mode=cert-manager 2>&1)"
check_contains "cert-manager mode: a Certificate for the Service's names" \
  "- rsc-resourceslice-controller.default.svc.cluster.local" "$out"
check_contains "cert-manager mode: the chart's own CA Issuer without issuerRef" "secretName: rsc-resourceslice-controller-ca" "$out"
out="$(helm template rsc "$chart" --set inventory.tls.mode=cert-manager \
  --set-json 'inventory.tls.certManager.issuerRef={"name":"corp-ca","kind":"ClusterIssuer","group":"cert-manager.io"}' 2>&1)"
check "cert-manager mode with issuerRef: no Issuer of the chart's own" 0 "$(grep -c '^kind: Issuer' <<<"$out" || true)"
check_contains "cert-manager mode with issuerRef: the Certificate uses it" "name: corp-ca" "$out"
out="$(helm template rsc "$chart" 2>&1)"
check_contains "self-signed by default: the controller makes the Secret" "--inventory-tls-secret=rsc-resourceslice-controller-inventory-tls" "$out"
check_contains "self-signed by default: the ServiceMonitor-ready CA ConfigMap is named" "--inventory-ca-configmap=rsc-resourceslice-controller-ca" "$out"
out="$(helm template rsc "$chart" --set inventory.tls.enabled=false 2>&1)"
check "plain HTTP only when asked: no TLS flag" 0 "$(grep -c -- '--inventory-tls' <<<"$out" || true)"

# Pull mode: nothing of it unless pull.enabled, even with its other values set.
out="$(helm template rsc "$chart" --set-json 'pull.sources=[{"driver":"a.example.com","url":"http://a"}]' \
  --set-json 'pull.drivers=[{"name":"b.example.com","namespaces":["b-system"]}]' \
  --set pull.caBundle='-----BEGIN CERTIFICATE-----' --set networkPolicy.enabled=true 2>&1)"
check "pull off: no pull flag, volume, RBAC, ConfigMap or egress rule" 0 \
  "$(grep -c -e '--pull' -e '--inventory-source' -e 'pull-token' -e 'pull-ca' -e 'pull-discovery' -e 'Pull mode' -e 'b-system' <<<"$out" || true)"
# Two drivers, one bound with a ServiceAccount in two namespaces, sharing a namespace with the
# other: one flag per driver, a Role and a RoleBinding per namespace (once each), nothing
# cluster-wide, the token for its audience, egress to those namespaces only.
two_drivers=(--set pull.enabled=true --set networkPolicy.enabled=true --set-json
  'pull.drivers=[{"name":"gpu.example.com","namespaces":["gpu-system","gpu-canary"],"serviceAccount":"gpu-driver"},{"name":"nic.example.com","namespaces":["nic-system","gpu-system"]}]')
out="$(helm template rsc "$chart" "${two_drivers[@]}" 2>&1)"
check "pull, two drivers: discovery on, one --pull-driver per driver, NAMESPACE/SERVICEACCOUNT" \
  "--pull-discovery=true,--pull-driver=gpu.example.com=gpu-system/gpu-driver,gpu-canary/gpu-driver,--pull-driver=nic.example.com=nic-system,gpu-system," \
  "$(grep -o -e '--pull-discovery.*' -e '--pull-driver.*' <<<"$out" | tr '\n' ',')"
check "pull, two drivers: a Role and a RoleBinding in each of their namespaces, once" \
  "Role gpu-canary,Role gpu-system,Role nic-system,RoleBinding gpu-canary,RoleBinding gpu-system,RoleBinding nic-system," \
  "$(grep -B3 -A1 'name: rsc-resourceslice-controller-pull-discovery$' <<<"$out" |
    awk '/^kind:/ {k = $2} /^  namespace:/ {print k, $2}' | sort | tr '\n' ',')"
check "pull, two drivers: no ClusterRole or ClusterRoleBinding for discovery" 0 \
  "$(grep -B3 'name: rsc-resourceslice-controller-pull-discovery$' <<<"$out" | grep -c '^kind: Cluster' || true)"
check_contains "pull, two drivers: the Roles list and watch Pods too" \
  $'  - apiGroups: [""]\n    resources: ["pods"]\n    verbs: ["list", "watch"]' "$out"
check "pull: no --pull-namespace any more" 0 "$(grep -c -- '--pull-namespace' <<<"$out" || true)"
check_contains "pull: the token file" "- --pull-token-file=/var/run/secrets/resourceslice-controller/pull/token" "$out"
check_contains "pull: the token is projected for the pull audience" 'audience: "resourceslice-controller-pull"' "$out"
check "pull, two drivers: egress to the pods of their namespaces only" "gpu-canary,gpu-system,nic-system," \
  "$(helm template rsc "$chart" "${two_drivers[@]}" --show-only templates/networkpolicy.yaml |
    sed -n 's/^ *kubernetes.io\/metadata.name: //p' | tr '\n' ',')"
check "pull: never egress to every namespace" 0 "$(grep -c 'namespaceSelector: {}' <<<"$out" || true)"
# Sources by URL only: no discovery, no RBAC, no egress rule; no token when switched off; the CA bundle.
out="$(helm template rsc "$chart" --set pull.enabled=true --set networkPolicy.enabled=true \
  --set-json 'pull.sources=[{"driver":"nic.example.com","url":"https://nic.example.com/v1/inventory"}]' \
  --set pull.token.enabled=false --set pull.caBundle='-----BEGIN CERTIFICATE-----' \
  --set pull.interval=1m --set pull.timeout=5s --set pull.grace=5m 2>&1)"
check "pull by URL only: no discovery RBAC or flag" 0 "$(grep -c -e 'pull-discovery' -e '--pull-driver' <<<"$out" || true)"
check "pull by URL only: no egress rule to pods (extraEgress's job)" 0 \
  "$(grep -c -e 'namespaceSelector' -e 'Pull mode' <<<"$out" || true)"
check_contains "pull by URL: the source" "- --inventory-source=nic.example.com=https://nic.example.com/v1/inventory" "$out"
check_contains "pull: timings" \
  $'- --pull-interval=1m\n            - --pull-timeout=5s\n            - --pull-grace=5m' "$out"
check "pull without token: no token flag or volume" 0 "$(grep -c 'pull-token' <<<"$out" || true)"
check_contains "pull: the CA bundle's file" "- --pull-ca-file=/etc/resourceslice-controller/pull-ca/ca.crt" "$out"
check_contains "pull: the CA bundle's ConfigMap" "name: rsc-resourceslice-controller-pull-ca" "$out"
check_contains "pull: a changed CA bundle restarts the pods" "checksum/pull-ca:" "$out"

# The admission policy: the drivers rule only for drivers the chart publishes
# (pull.* only with pull.enabled), the break-glass condition only when someone
# is exempt, nothing with admissionPolicy.enabled=false.
policy=(--show-only templates/admission-policy.yaml)
out="$(helm template rsc "$chart" "${policy[@]}" --set-json 'pull.drivers=[{"name":"b.example.com","namespaces":["b"]}]')"
check "policy without drivers (pull off): the label rule alone" 1 "$(grep -c 'reason: Forbidden' <<<"$out" || true)"
check "policy without drivers: no driver named" 0 "$(grep -c 'b.example.com' <<<"$out" || true)"
check_contains "policy: system:masters is the default break-glass" 'g in ["system:masters"]' "$out"
out="$(helm template rsc "$chart" "${policy[@]}" --set-json 'admissionPolicy.exemptGroups=[]')"
check "policy without exempt groups or users: no break-glass condition" 0 "$(grep -c 'not-exempt' <<<"$out" || true)"
check_contains "policy without exempt groups or users: the message says so" "nobody is exempt" "$out"
out="$(helm template rsc "$chart" "${policy[@]}" --set pull.enabled=true \
  --set-json 'drivers=[{"name":"d","namespace":"n","driverNames":["gpu.example.com"]}]' \
  --set-json 'pull.drivers=[{"name":"b.example.com","namespaces":["b"]}]' \
  --set-json 'pull.sources=[{"driver":"a.example.com","url":"http://a"}]')"
check_contains "policy: the drivers of drivers, pull.drivers and pull.sources" \
  '!(object.spec.driver in ["a.example.com","b.example.com","gpu.example.com"])' "$out"
out="$(helm template rsc "$chart" --set admissionPolicy.enabled=false)"
check "admissionPolicy.enabled=false: no policy" 0 "$(grep -c 'ValidatingAdmissionPolicy' <<<"$out" || true)"

# One replica may run without leader election.
check_ok "one replica without leader election renders" \
  helm template rsc "$chart" --set replicaCount=1 --set leaderElection.enabled=false

# kubeVersion: the chart needs resource.k8s.io/v1 (Kubernetes 1.34).
out="$(helm template rsc "$chart" --kube-version 1.33.5 2>&1)" && rc=0 || rc=$?
check "helm template refuses Kubernetes 1.33" 1 "$rc"
check_contains "the kubeVersion error says what is needed" "chart requires kubeVersion: >=1.34.0-0" "$out"
check_ok "helm template accepts Kubernetes 1.34" helm template rsc "$chart" --kube-version 1.34.0

# Every parameter has a default in values.yaml, is set by values-all.yaml (so
# the server-side test sees every option) and has a row in the README's table;
# the table has no row for a parameter that does not exist.
mapfile -t params < <(chart_params)
check "the schema lists parameters" true "$([[ ${#params[@]} -gt 50 ]] && echo true || echo false)"
defaults="$(values_json "$chart/values.yaml")"
all="$(values_json "$values_all")"
missing_default=() missing_all=() missing_readme=()
for p in "${params[@]}"; do
  jq -e --arg p "$p" '($p | split(".")) as $k | [paths | map(tostring)] | any(. == $k)' \
    <<<"$defaults" >/dev/null || missing_default+=("$p")
  # minAvailable and maxUnavailable exclude each other; values-all sets the latter.
  if [[ "$p" != podDisruptionBudget.minAvailable ]]; then
    jq -e --arg p "$p" 'getpath($p | split(".")) != null' <<<"$all" >/dev/null || missing_all+=("$p")
  fi
  grep -qF "| \`$p\` |" "$chart/README.md" || missing_readme+=("$p")
done
check "values.yaml has a default for every parameter" "" "${missing_default[*]}"
# The README's Default column is the default of values.yaml, as JSON.
wrong_default=()
for p in "${params[@]}"; do
  # grep -m1, not `grep | head -n1`: under pipefail, grep's SIGPIPE after head
  # exits would skip the row.
  row="$(grep -m1 -F "| \`$p\` |" "$chart/README.md")" || continue
  documented="$(awk -F' [|] ' '{print $3}' <<<"$row" | sed 's/^`//; s/`$//' | jq -cS . 2>/dev/null || echo unparsable)"
  actual="$(jq -cS --arg p "$p" 'getpath($p | split("."))' <<<"$defaults")"
  [[ "$documented" == "$actual" ]] || wrong_default+=("$p (README $documented, values.yaml $actual)")
done
check "README.md shows the default of every parameter" "" "${wrong_default[*]}"
check "values-all.yaml sets every parameter" "" "${missing_all[*]}"
check "README.md documents every parameter" "" "${missing_readme[*]}"
extra_rows="$(grep -o '^| `[^`]*` |' "$chart/README.md" | sed 's/^| `//; s/` |$//' | sort |
  comm -23 - <(printf '%s\n' "${params[@]}" | sort) | tr '\n' ' ')"
check "README.md documents no parameter that does not exist" "" "$extra_rows"

finish
