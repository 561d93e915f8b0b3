#!/usr/bin/env bash
# Checks the chart without a cluster: `helm lint --strict` passes with the
# default values and with test/charts/values-all.yaml (every option on); bad
# values fail `helm lint` and `helm template` with an error naming the key;
# combinations the schema cannot express fail with the chart's own message;
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
)
for case in "${fail_cases[@]}"; do
  fails template refuses explains "$case"
done

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
