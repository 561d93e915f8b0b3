#!/usr/bin/env bash
# Applies what the chart renders to a real kube-apiserver with a server-side
# dry run, for the default values, for test/charts/values-all.yaml (every
# option on) and for the ways to switch parts off. The API server checks every
# field (strict decoding), its admission checks the pods against the
# "restricted" Pod Security Standard (enforced and warned on every namespace
# used here), and this script then checks what the server would store: the
# controller's flags, security settings, probes, ports, RBAC rules, hooks and
# the optional monitoring objects. Starts its own cluster and always stops it.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

start_cluster

# Namespaces the renders use, each enforcing the restricted profile.
for ns in rsc-system rsc-all rsc-leases monitoring gpu-system nic-system tpu-system tpu-canary; do
  kubectl create namespace "$ns" >/dev/null
  kubectl label namespace "$ns" pod-security.kubernetes.io/enforce=restricted \
    pod-security.kubernetes.io/warn=restricted >/dev/null
done

# The test API server has no Prometheus Operator: install stand-in CRDs (see
# the file) so that the ServiceMonitor and PrometheusRule reach the server.
kubectl apply -f "$root/test/charts/monitoring-crds.yaml" >/dev/null
kubectl wait --for condition=Established --timeout=60s \
  crd/servicemonitors.monitoring.coreos.com crd/prometheusrules.monitoring.coreos.com >/dev/null

# dry_run NAME HELM_ARGS...: renders the chart and applies it with a server-side
# dry run; the objects as the server would store them go to $work/NAME.json.
dry_run() {
  local name="$1"
  shift
  helm template rsc "$chart" --namespace rsc-system --kube-version "$kube_version" "$@" \
    >"$work/$name.yaml"
  local rc=0
  kubectl apply --dry-run=server -o json -f "$work/$name.yaml" \
    >"$work/$name.json" 2>"$work/$name.err" || rc=$?
  check "the API server accepts the $name render" 0 "$rc"
  check "the API server has no warning for the $name render" "" "$(cat "$work/$name.err")"
  [[ "$rc" == 0 ]] || cat "$work/$name.err"
}
# q NAME JQ: runs a jq filter over the stored objects of a render.
q() { jq -c "$2" "$work/$1.json"; }
obj() { echo ".items[] | select(.kind == \"$1\" and .metadata.name == \"$2\")"; }

# --- Default values.
dry_run default
check "default render: objects" \
  '["ClusterRole/rsc-resourceslice-controller","ClusterRole/rsc-resourceslice-controller-cleanup","ClusterRole/rsc-resourceslice-controller-metrics-reader","ClusterRoleBinding/rsc-resourceslice-controller","ClusterRoleBinding/rsc-resourceslice-controller-cleanup","Deployment/rsc-resourceslice-controller","Job/rsc-resourceslice-controller-cleanup","PodDisruptionBudget/rsc-resourceslice-controller","Role/rsc-resourceslice-controller-cleanup","Role/rsc-resourceslice-controller-inventory-tls","Role/rsc-resourceslice-controller-leader-election","RoleBinding/rsc-resourceslice-controller-cleanup","RoleBinding/rsc-resourceslice-controller-inventory-tls","RoleBinding/rsc-resourceslice-controller-leader-election","Service/rsc-resourceslice-controller","ServiceAccount/rsc-resourceslice-controller","ServiceAccount/rsc-resourceslice-controller-cleanup","ValidatingAdmissionPolicy/rsc-resourceslice-controller","ValidatingAdmissionPolicyBinding/rsc-resourceslice-controller"]' \
  "$(q default '[.items[] | "\(.kind)/\(.metadata.name)"] | sort')"

deploy="$(obj Deployment rsc-resourceslice-controller)"
pod="$deploy | .spec.template.spec"
container="$pod | .containers[0]"
check "two replicas" 2 "$(q default "$deploy | .spec.replicas")"
check "the controller's flags" \
  '["--leader-elect=true","--leader-election-namespace=rsc-system","--leader-election-id=rsc-resourceslice-controller","--metrics-bind-address=:8080","--metrics-secure=true","--health-probe-bind-address=:8081","--inventory-bind-address=:8443","--inventory-tls-secret=rsc-resourceslice-controller-inventory-tls","--inventory-ca-configmap=rsc-resourceslice-controller-ca","--inventory-tls-names=rsc-resourceslice-controller.rsc-system.svc,rsc-resourceslice-controller.rsc-system.svc.cluster.local,rsc-resourceslice-controller.rsc-system,rsc-resourceslice-controller","--inventory-tls-validity=8760h","--inventory-server-name=rsc-resourceslice-controller.rsc-system.svc","--auth=tokenreview","--token-audience=resourceslice-controller","--shutdown-timeout=25s","--log-format=json","-v=0"]' \
  "$(q default "$container | .args")"
check "image tag defaults to appVersion" '"ghcr.io/resourceslice-controller/resourceslice-controller:0.1.0"' \
  "$(q default "$container | .image")"
check "named ports (the inventory on 8443: TLS by default)" '[["inventory",8443],["metrics",8080],["health",8081]]' \
  "$(q default "[$container | .ports[] | [.name, .containerPort]]")"
check "liveness probe: /healthz on the health port" '{"path":"/healthz","port":"health","scheme":"HTTP"}' \
  "$(q default "$container | .livenessProbe.httpGet")"
check "readiness probe: /readyz on the health port" '{"path":"/readyz","port":"health","scheme":"HTTP"}' \
  "$(q default "$container | .readinessProbe.httpGet")"
check "container security context" \
  '{"allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"]},"privileged":false,"readOnlyRootFilesystem":true,"runAsGroup":65532,"runAsNonRoot":true,"runAsUser":65532,"seccompProfile":{"type":"RuntimeDefault"}}' \
  "$(q default "$container | .securityContext")"
check "pod security context" \
  '{"fsGroup":65532,"runAsGroup":65532,"runAsNonRoot":true,"runAsUser":65532,"seccompProfile":{"type":"RuntimeDefault"}}' \
  "$(q default "$pod | .securityContext")"
check "requests and limits" '[true,true,true,true]' \
  "$(q default "$container | .resources | [.requests.cpu != null, .requests.memory != null, .limits.cpu != null, .limits.memory != null]")"
check "an emptyDir at /tmp" '[{"emptyDir":{"sizeLimit":"64Mi"},"name":"tmp"},{"mountPath":"/tmp","name":"tmp"}]' \
  "$(q default "[($pod | .volumes[] | select(.name == \"tmp\")), ($container | .volumeMounts[] | select(.name == \"tmp\"))]")"
check "POD_NAMESPACE, POD_NAME and POD_IP from the downward API" \
  '[["POD_NAMESPACE","metadata.namespace"],["POD_NAME","metadata.name"],["POD_IP","status.podIP"]]' \
  "$(q default "[$container | .env[] | select(.valueFrom) | [.name, .valueFrom.fieldRef.fieldPath]]")"
check "resourceslicectl's defaults: the Lease, the published CA, its own token" \
  '[["RESOURCESLICECTL_LEASE_NAMESPACE","rsc-system"],["RESOURCESLICECTL_LEASE_NAME","rsc-resourceslice-controller"],["RESOURCESLICECTL_CA_CONFIGMAP","rsc-resourceslice-controller-ca"],["RESOURCESLICECTL_TOKEN_FILE","/var/run/secrets/resourceslice-controller/inventory/token"]]' \
  "$(q default "[$container | .env[] | select(.name | startswith(\"RESOURCESLICECTL_\")) | [.name, .value]]")"
check "resourceslicectl's token: projected for the inventory's audience, mounted read-only" \
  '["resourceslice-controller",3600,"/var/run/secrets/resourceslice-controller/inventory",true]' \
  "$(q default "[($pod | .volumes[] | select(.name == \"ctl-token\") | .projected.sources[0].serviceAccountToken | (.audience, .expirationSeconds)), ($container | .volumeMounts[] | select(.name == \"ctl-token\") | (.mountPath, .readOnly))]")"
check "preferred anti-affinity by hostname" '"kubernetes.io/hostname"' \
  "$(q default "$pod | .affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.topologyKey")"
check "the anti-affinity selects the controller's pods" \
  "$(q default "$deploy | .spec.selector.matchLabels")" \
  "$(q default "$pod | .affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.labelSelector.matchLabels")"
check "termination grace period" 30 "$(q default "$pod | .terminationGracePeriodSeconds")"
check "the pods use the controller's ServiceAccount" '"rsc-resourceslice-controller"' \
  "$(q default "$pod | .serviceAccountName")"
check "self-signed TLS by default: no Secret volume (the controller reads its Secret itself)" '[]' \
  "$(q default "[$pod | .volumes[] | select(.name == \"inventory-tls\")]")"

svc="$(obj Service rsc-resourceslice-controller)"
check "Service ports" '[["inventory",8443,"inventory"],["metrics",8080,"metrics"]]' \
  "$(q default "[$svc | .spec.ports[] | [.name, .port, .targetPort]]")"
check "the Service selects the Deployment's pods" \
  "$(q default "$deploy | .spec.selector.matchLabels")" "$(q default "$svc | .spec.selector")"
pdb="$(obj PodDisruptionBudget rsc-resourceslice-controller)"
check "PodDisruptionBudget keeps one pod" 1 "$(q default "$pdb | .spec.minAvailable")"
check "PodDisruptionBudget selects the Deployment's pods" \
  "$(q default "$deploy | .spec.selector.matchLabels")" "$(q default "$pdb | .spec.selector.matchLabels")"

check "controller ClusterRole: exactly the verbs the controller uses" \
  '[{"apiGroups":["resource.k8s.io"],"resources":["resourceslices"],"verbs":["get","list","watch","create","update","delete","deletecollection"]},{"apiGroups":[""],"resources":["nodes"],"verbs":["get","list","watch"]},{"apiGroups":["authentication.k8s.io"],"resources":["tokenreviews"],"verbs":["create"]},{"apiGroups":["authorization.k8s.io"],"resources":["subjectaccessreviews"],"verbs":["create"]},{"apiGroups":["events.k8s.io"],"resources":["events"],"verbs":["create","patch"]},{"apiGroups":["resourceslice.dra.k8s.io"],"resources":["drivers"],"verbs":["get","list"]}]' \
  "$(q default "$(obj ClusterRole rsc-resourceslice-controller) | .rules")"
check "leader election Role: leases get, create, update in the release namespace" \
  '["rsc-system",[{"apiGroups":["coordination.k8s.io"],"resources":["leases"],"verbs":["get","create","update"]}]]' \
  "$(q default "$(obj Role rsc-resourceslice-controller-leader-election) | [.metadata.namespace, .rules]")"

# The post-delete hook: it runs once the Deployment is gone.
job="$(obj Job rsc-resourceslice-controller-cleanup)"
check "cleanup Job is a post-delete hook, deleted on success" \
  '["post-delete","before-hook-creation,hook-succeeded","0"]' \
  "$(q default "$job | .metadata.annotations | [.[\"helm.sh/hook\"], .[\"helm.sh/hook-delete-policy\"], .[\"helm.sh/hook-weight\"]]")"
check "cleanup RBAC is created before the Job (lower hook weight)" \
  '[["ClusterRole","post-delete","-10","before-hook-creation,hook-succeeded"],["ClusterRoleBinding","post-delete","-10","before-hook-creation,hook-succeeded"],["Role","post-delete","-10","before-hook-creation,hook-succeeded"],["RoleBinding","post-delete","-10","before-hook-creation,hook-succeeded"],["ServiceAccount","post-delete","-10","before-hook-creation,hook-succeeded"]]' \
  "$(q default '[.items[] | select(.metadata.name == "rsc-resourceslice-controller-cleanup" and .kind != "Job") | [.kind, .metadata.annotations["helm.sh/hook"], .metadata.annotations["helm.sh/hook-weight"], .metadata.annotations["helm.sh/hook-delete-policy"]]] | sort')"
check "cleanup Job runs the controller image with --cleanup, fenced by the controllers' Lease" \
  "[$(q default "$container | .image"),\"--cleanup\",\"--leader-elect=true\",\"--leader-election-namespace=rsc-system\",\"--leader-election-id=rsc-resourceslice-controller\"]" \
  "$(q default "$job | .spec.template.spec.containers[0] | [.image] + .args[0:4]")"
check "cleanup Job: the Lease flags are the Deployment's" \
  "$(q default "[$container | .args[] | select(startswith(\"--leader-elect\"))]")" \
  "$(q default "[$job | .spec.template.spec.containers[0].args[] | select(startswith(\"--leader-elect\"))]")"
check "cleanup Job runs under its own ServiceAccount" '"rsc-resourceslice-controller-cleanup"' \
  "$(q default "$job | .spec.template.spec.serviceAccountName")"
check "cleanup ClusterRole: list and delete ResourceSlices only" \
  '[{"apiGroups":["resource.k8s.io"],"resources":["resourceslices"],"verbs":["list","delete","deletecollection"]}]' \
  "$(q default "$(obj ClusterRole rsc-resourceslice-controller-cleanup) | .rules")"
check "cleanup Role: get and update of the leader Lease by name, create of Leases, in its namespace" \
  '["rsc-system",[{"apiGroups":["coordination.k8s.io"],"resourceNames":["rsc-resourceslice-controller"],"resources":["leases"],"verbs":["get","update"]},{"apiGroups":["coordination.k8s.io"],"resources":["leases"],"verbs":["create"]}]]' \
  "$(q default "$(obj Role rsc-resourceslice-controller-cleanup) | [.metadata.namespace, .rules]")"
check "cleanup RoleBinding: the hook's ServiceAccount, in the Lease's namespace" \
  '["rsc-system","rsc-resourceslice-controller-cleanup",[{"kind":"ServiceAccount","name":"rsc-resourceslice-controller-cleanup","namespace":"rsc-system"}]]' \
  "$(q default "$(obj RoleBinding rsc-resourceslice-controller-cleanup) | [.metadata.namespace, .roleRef.name, .subjects]")"
check "the Deployment's selector does not match the cleanup pod" false \
  "$(jq -c --argjson sel "$(q default "$deploy | .spec.selector.matchLabels")" \
    "$job | .spec.template.metadata.labels | contains(\$sel)" "$work/default.json")"

# --- Every option on.
dry_run all -f "$values_all"
image="registry.example.com/dra/resourceslice-controller:0.1.0-rc.1@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
deploy="$(obj Deployment rsc-all)"
pod="$deploy | .spec.template.spec"
container="$pod | .containers[0]"
check "all: namespaceOverride places the Deployment" '"rsc-all"' "$(q all "$deploy | .metadata.namespace")"
check "all: image by tag and digest" "\"$image\"" "$(q all "$container | .image")"
vap="$(obj ValidatingAdmissionPolicy rsc-all)"
check "all: the policy lets the controller's ServiceAccount through first" \
  '"request.userInfo.username != \"system:serviceaccount:rsc-all:rsc-controller\""' \
  "$(q all "$vap | .spec.matchConditions[0].expression")"
check "all: the policy exempts the break-glass groups and users" \
  '["system:masters","platform-admins"] ["system:serviceaccount:ops:slice-janitor"]' \
  "$(q all "$vap | .spec.matchConditions[1].expression" | grep -o '\[[^]]*\]' | sed 's/\\"/"/g' | paste -sd' ')"
check "all: the policy's managed drivers: drivers, pull.drivers and pull.sources" \
  '["fpga.example.com","gpu-shared.example.com","gpu.example.com","legacy.example.com","smartnic.example.com","tpu.example.com"]' \
  "$(q all "$vap | .spec.validations[1].expression" | grep -o '\[[^]]*\]' | sed 's/\\"/"/g')"
check "all: the binding denies with the policy" '["rsc-all",["Deny"]]' \
  "$(q all "$(obj ValidatingAdmissionPolicyBinding rsc-all) | [.spec.policyName, .spec.validationActions]")"
check "all: the controller's flags" \
  '["--leader-elect=true","--leader-election-namespace=rsc-leases","--leader-election-id=rsc-leader","--metrics-bind-address=:9090","--metrics-secure=true","--health-probe-bind-address=:9091","--inventory-bind-address=:9443","--inventory-tls-cert-file=/etc/resourceslice-controller/tls/tls.crt","--inventory-tls-key-file=/etc/resourceslice-controller/tls/tls.key","--inventory-ca-file=/etc/resourceslice-controller/tls/ca.crt","--metrics-tls-cert-file=/etc/resourceslice-controller/tls/tls.crt","--metrics-tls-key-file=/etc/resourceslice-controller/tls/tls.key","--inventory-server-name=rsc-all.rsc-all.svc","--auth=tokenreview","--token-audience=slices.example.com","--kube-api-qps=50.5","--kube-api-burst=100","--workers=8","--adoption-grace=2m30s","--events=false","--event-qps=2.5","--pull-discovery=true","--pull-driver=tpu.example.com=tpu-system/tpu-driver,tpu-canary/tpu-driver","--pull-driver=smartnic.example.com=nic-system,tpu-system","--inventory-source=fpga.example.com=https://fpga-inventory.example.com:9443/v1/inventory","--inventory-source=legacy.example.com=http://legacy-inventory.legacy-system:9000","--pull-interval=45s","--pull-timeout=5s","--pull-grace=3m","--pull-ca-file=/etc/resourceslice-controller/pull-ca/ca.crt","--pull-token-file=/var/run/secrets/resourceslice-controller/pull/token","--shutdown-timeout=40s","--log-format=text","-v=4","--some-future-flag=value"]' \
  "$(q all "$container | .args")"
check "all: TLS Secret mounted read-only" \
  '[{"name":"inventory-tls","secret":{"defaultMode":420,"secretName":"rsc-inventory-tls"}},{"mountPath":"/etc/resourceslice-controller/tls","name":"inventory-tls","readOnly":true}]' \
  "$(q all "[($pod | .volumes[] | select(.name == \"inventory-tls\")), ($container | .volumeMounts[] | select(.name == \"inventory-tls\"))]")"
check "all: Service serves the inventory and the metrics over https" '[["inventory",9443,"https"],["metrics",9090,"https"]]' \
  "$(q all "[$(obj Service rsc-all) | .spec.ports[] | [.name, .port, .appProtocol]]")"
check "all: scheduling settings" \
  '["system-cluster-critical",45,"node-role.kubernetes.io/control-plane",true]' \
  "$(q all "$pod | [.priorityClassName, .terminationGracePeriodSeconds, .tolerations[0].key, (.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution != null)]")"
check "all: a spread constraint without a selector gets the pod selector" \
  "[$(q all "$deploy | .spec.selector.matchLabels"),{\"app.kubernetes.io/instance\":\"rsc-all\"}]" \
  "$(q all "[$pod | .topologySpreadConstraints[].labelSelector.matchLabels]")"
check "all: pod labels and annotations" '["control","true","rsc"]' \
  "$(q all "$deploy | .spec.template.metadata | [.labels[\"example.com/tier\"], .annotations[\"example.com/pod\"], .labels[\"app.kubernetes.io/name\"]]")"
check "all: extra env, volumes, pull secrets" '["GODEBUG","NODE_NAME","extra-config","/etc/extra","registry-credentials"]' \
  "$(q all "$pod | [(.containers[0].env | map(select(.name | startswith(\"RESOURCESLICECTL_\") | not)))[3].name, (.containers[0].env | map(select(.name | startswith(\"RESOURCESLICECTL_\") | not)))[4].name, (.volumes[] | select(.name == \"extra-config\") | .name), (.containers[0].volumeMounts[] | select(.name == \"extra-config\") | .mountPath), .imagePullSecrets[0].name]")"
check "all: Lease Role in the leader election namespace" '"rsc-leases"' \
  "$(q all "$(obj Role rsc-all-leader-election) | .metadata.namespace")"
check "all: RoleBinding names the controller's ServiceAccount" '[{"kind":"ServiceAccount","name":"rsc-controller","namespace":"rsc-all"}]' \
  "$(q all "$(obj RoleBinding rsc-all-leader-election) | .subjects")"
check "all: the cleanup hook's Lease Role: the Lease's namespace and name" '["rsc-leases",["rsc-leader"]]' \
  "$(q all "$(obj Role rsc-all-cleanup) | [.metadata.namespace, .rules[0].resourceNames]")"
check "all: the cleanup Job's Lease flags are the Deployment's" \
  "$(q all "[$deploy | .spec.template.spec.containers[0].args[] | select(startswith(\"--leader-elect\"))]")" \
  "$(q all "[$(obj Job rsc-all-cleanup) | .spec.template.spec.containers[0].args[] | select(startswith(\"--leader-elect\"))]")"
check "all: PodDisruptionBudget" '[1,null,"AlwaysAllow"]' \
  "$(q all "$(obj PodDisruptionBudget rsc-all) | [.spec.maxUnavailable, .spec.minAvailable, .spec.unhealthyPodEvictionPolicy]")"
check "all: commonLabels on every object but extraObjects" true \
  "$(q all '[.items[] | select(.metadata.name | test("-extra") | not) | .metadata.labels.team] | all(. == "accelerators")')"
check "all: extraObjects" '["rsc-all-extra","rsc-extra-string"]' \
  "$(q all '[.items[] | select(.kind == "ConfigMap" and (.metadata.name | contains("extra"))) | .metadata.name] | sort')"

# Drivers' publishing rights.
check "all: one publishing ClusterRole per driver ServiceAccount" \
  '[["rsc-all:publish:fpga-system:fpga.driver",null],["rsc-all:publish:gpu-system:gpu-driver",["gpu.example.com","gpu-shared.example.com"]],["rsc-all:publish:nic-system:nic-driver",null]]' \
  "$(q all '[.items[] | select(.kind == "ClusterRole" and (.metadata.name | contains(":publish:"))) | [.metadata.name, .rules[0].resourceNames]] | sort')"
check "all: publishing is the verb publish on drivers in resourceslice.dra.k8s.io" \
  '[{"apiGroups":["resourceslice.dra.k8s.io"],"resources":["drivers"],"verbs":["publish","get"]}]' \
  "$(q all '[.items[] | select(.kind == "ClusterRole" and (.metadata.name | contains(":publish:"))) | .rules[0] | del(.resourceNames)] | unique')"
check "all: each binding names its driver's ServiceAccount" \
  '[["rsc-all:publish:fpga-system:fpga.driver","fpga-system/fpga.driver"],["rsc-all:publish:gpu-system:gpu-driver","gpu-system/gpu-driver"],["rsc-all:publish:nic-system:nic-driver","nic-system/nic-driver"]]' \
  "$(q all '[.items[] | select(.kind == "ClusterRoleBinding" and (.metadata.name | contains(":publish:"))) | [.roleRef.name, "\(.subjects[0].namespace)/\(.subjects[0].name)"]] | sort')"

# NetworkPolicy.
np="$(obj NetworkPolicy rsc-all)"
check "all: NetworkPolicy isolates both directions" '["Ingress","Egress"]' "$(q all "$np | .spec.policyTypes")"
check "all: NetworkPolicy selects the controller's pods" \
  "$(q all "$deploy | .spec.selector.matchLabels")" "$(q all "$np | .spec.podSelector.matchLabels")"
check "all: inventory ingress from the configured peers and the other replicas" \
  "[{\"example.com/dra-drivers\":\"true\"},$(q all "$deploy | .spec.selector.matchLabels")]" \
  "$(q all "[$np | .spec.ingress[0].from[] | (.namespaceSelector // .podSelector).matchLabels]")"
check "all: ingress ports" '[["inventory"],["metrics"],["health"],[9091]]' \
  "$(q all "[$np | .spec.ingress[] | [.ports[].port]]")"
check "all: egress to the API server addresses" '[[443,6443],["10.0.0.1/32","192.168.10.0/24"]]' \
  "$(q all "$np | .spec.egress[0] | [[.ports[].port], [.to[].ipBlock.cidr]]")"
check "all: egress to the other replicas, DNS, the pull endpoints and extra" '[[9443],[53,53],[9443,"inventory"],[4317]]' \
  "$(q all "[$np | .spec.egress[1:][] | [.ports[].port]]")"
check "all: egress to the pull endpoints: pods of the pull drivers' namespaces" '["nic-system","tpu-canary","tpu-system"]' \
  "$(q all "[$np | .spec.egress[3].to[] | .namespaceSelector.matchLabels[\"kubernetes.io/metadata.name\"]]")"

# Pull mode.
check "all: pull discovery RBAC, a Role and a RoleBinding in each pull driver's namespace, once" \
  '["Role/nic-system","Role/tpu-canary","Role/tpu-system","RoleBinding/nic-system","RoleBinding/tpu-canary","RoleBinding/tpu-system"]' \
  "$(q all '[.items[] | select(.metadata.name == "rsc-all-pull-discovery") | "\(.kind)/\(.metadata.namespace)"] | sort')"
check "all: pull discovery Roles: list and watch Services, EndpointSlices and Pods" \
  '[[{"apiGroups":[""],"resources":["services"],"verbs":["list","watch"]},{"apiGroups":["discovery.k8s.io"],"resources":["endpointslices"],"verbs":["list","watch"]},{"apiGroups":[""],"resources":["pods"],"verbs":["list","watch"]}]]' \
  "$(q all '[.items[] | select(.kind == "Role" and .metadata.name == "rsc-all-pull-discovery") | .rules] | unique')"
check "all: the controller's pull token, projected for the pull audience, mounted read-only" \
  '[[{"serviceAccountToken":{"audience":"drivers.example.com","expirationSeconds":3600,"path":"token"}}],{"mountPath":"/var/run/secrets/resourceslice-controller/pull","name":"pull-token","readOnly":true}]' \
  "$(q all "[($pod | .volumes[] | select(.name == \"pull-token\") | .projected.sources), ($container | .volumeMounts[] | select(.name == \"pull-token\"))]")"
check "all: nothing cluster-wide for pull discovery" '[]' \
  "$(q all '[.items[] | select(.kind | startswith("Cluster")) | select(.metadata.name | contains("pull")) | .metadata.name]')"
check "all: pull discovery RoleBindings name the controller's ServiceAccount" '[[{"kind":"ServiceAccount","name":"rsc-controller","namespace":"rsc-all"}]]' \
  "$(q all '[.items[] | select(.kind == "RoleBinding" and .metadata.name == "rsc-all-pull-discovery") | .subjects] | unique')"
check "all: the pull CA bundle's ConfigMap, mounted read-only" \
  '["rsc-all-pull-ca",{"mountPath":"/etc/resourceslice-controller/pull-ca","name":"pull-ca","readOnly":true},true]' \
  "$(q all "[($pod | .volumes[] | select(.name == \"pull-ca\") | .configMap.name), ($container | .volumeMounts[] | select(.name == \"pull-ca\")), ($(obj ConfigMap rsc-all-pull-ca) | .data[\"ca.crt\"] | startswith(\"-----BEGIN CERTIFICATE-----\"))]")"

# Monitoring.
sm="$(obj ServiceMonitor rsc-all)"
check "all: ServiceMonitor" \
  '["monitoring","kube-prometheus-stack","app.kubernetes.io/name",["rsc-all"],"metrics","/metrics","15s","5s",true]' \
  "$(q all "$sm | [.metadata.namespace, .metadata.labels.release, .spec.jobLabel, .spec.namespaceSelector.matchNames, .spec.endpoints[0].port, .spec.endpoints[0].path, .spec.endpoints[0].interval, .spec.endpoints[0].scrapeTimeout, .spec.endpoints[0].honorLabels]")"
check "all: ServiceMonitor scrapes over https with the scraper's token" \
  '["https","/var/run/secrets/kubernetes.io/serviceaccount/token",{"insecureSkipVerify":true}]' \
  "$(q all "$sm | .spec.endpoints[0] | [.scheme, .bearerTokenFile, .tlsConfig]")"
check "all: the metrics reader ClusterRole and its binding for metrics.scrapers" \
  '[[{"nonResourceURLs":["/metrics"],"verbs":["get"]}],[{"kind":"ServiceAccount","name":"prometheus-k8s","namespace":"monitoring"}]]' \
  "$(q all "[($(obj ClusterRole rsc-all-metrics-reader) | .rules), ($(obj ClusterRoleBinding rsc-all-metrics-reader) | .subjects)]")"
check "all: ServiceMonitor selects the Service" "$(q all "$(obj Service rsc-all) | .spec.selector")" \
  "$(q all "$sm | .spec.selector.matchLabels")"

if [[ -f "$chart/rules/alerts.yaml" ]]; then
  rule="$(obj PrometheusRule rsc-all)"
  check "all: PrometheusRule in its namespace" '["monitoring","kube-prometheus-stack"]' \
    "$(q all "$rule | [.metadata.namespace, .metadata.labels.release]")"
  # The spec is rules/alerts.yaml itself, with the job renamed after nameOverride.
  check "all: the PrometheusRule's spec is rules/alerts.yaml" \
    "$(values_json "$chart/rules/alerts.yaml" |
      jq -cS 'walk(if type == "string" then gsub("job=\"resourceslice-controller\""; "job=\"rsc\"") else . end)')" \
    "$(q all "$rule | .spec" | jq -cS .)"
  q all "$rule | .spec" >"$work/rules.json"
  check_ok "all: promtool accepts the PrometheusRule's rules" promtool check rules "$work/rules.json"
  if grep -q 'job="resourceslice-controller"' "$chart/rules/alerts.yaml"; then
    check "all: rules select the job the ServiceMonitor produces (nameOverride rsc)" '[true,false]' \
      "$(q all "$rule | [.spec.groups[].rules[].expr] | [any(contains(\"job=\\\"rsc\\\"\")), any(contains(\"job=\\\"resourceslice-controller\\\"\"))]")"
  fi
else
  check "all: no PrometheusRule while rules/alerts.yaml is missing" 0 "$(q all '[.items[] | select(.kind == "PrometheusRule")] | length')"
fi

if [[ -f "$chart/dashboards/resourceslice-controller.json" ]]; then
  cm="$(obj ConfigMap rsc-all-dashboard)"
  check "all: dashboard ConfigMap for the Grafana sidecar" '["monitoring","1","DRA"]' \
    "$(q all "$cm | [.metadata.namespace, .metadata.labels.grafana_dashboard, .metadata.annotations.grafana_folder]")"
  check "all: the ConfigMap holds the dashboard unchanged" \
    "$(jq -cS . "$chart/dashboards/resourceslice-controller.json")" \
    "$(q all "$cm | .data[\"resourceslice-controller.json\"]" | jq -r . | jq -cS .)"
else
  check "all: no dashboard ConfigMap while the dashboard is missing" 0 \
    "$(q all '[.items[] | select(.kind == "ConfigMap" and .metadata.labels.grafana_dashboard != null)] | length')"
fi

# --- Parts switched off.
dry_run no-rbac --set rbac.create=false --set serviceAccount.create=false --set serviceAccount.name=existing-sa
check "rbac.create=false: no RBAC objects, no ServiceAccount" \
  '["Deployment","Job","PodDisruptionBudget","Service","ValidatingAdmissionPolicy","ValidatingAdmissionPolicyBinding"]' "$(q no-rbac '[.items[].kind] | sort')"
check "rbac.create=false: the controller and the cleanup Job use the given ServiceAccount" '["existing-sa","existing-sa"]' \
  "$(q no-rbac '[.items[] | select(.kind == "Deployment" or .kind == "Job") | .spec.template.spec.serviceAccountName]')"
check "rbac.create=false: the policy's deleters: no hook account of its own, the garbage collector" \
  '"request.operation == \"DELETE\" && request.userInfo.username in [\"system:serviceaccount:kube-system:generic-garbage-collector\",\"system:kube-controller-manager\"]"' \
  "$(q no-rbac "$(obj ValidatingAdmissionPolicy rsc-resourceslice-controller) | .spec.variables[] | select(.name == \"deleter\") | .expression")"

dry_run no-rbac-own-sa --set rbac.create=false --set-json 'serviceAccount.annotations={"example.com/role":"cleanup"}'
check "rbac.create=false, the chart's ServiceAccount: the post-delete hook creates it again for the Job" \
  '[[null,"cleanup"],["post-delete","cleanup"]]' \
  "$(q no-rbac-own-sa '[.items[] | select(.kind == "ServiceAccount" and .metadata.name == "rsc-resourceslice-controller") | .metadata.annotations | [.["helm.sh/hook"], .["example.com/role"]]] | sort')"
check "rbac.create=false, the chart's ServiceAccount: the Job runs as it" '"rsc-resourceslice-controller"' \
  "$(q no-rbac-own-sa "$(obj Job rsc-resourceslice-controller-cleanup) | .spec.template.spec.serviceAccountName")"

dry_run no-election --set replicaCount=1 --set leaderElection.enabled=false
check "no leader election: the cleanup Job is not fenced and gets no Lease Role" \
  '[["--leader-elect=false"],[]]' \
  "$(q no-election "[[$(obj Job rsc-resourceslice-controller-cleanup) | .spec.template.spec.containers[0].args[] | select(startswith(\"--leader-elect\"))], [.items[] | select(.kind == \"Role\" and .metadata.name == \"rsc-resourceslice-controller-cleanup\")]]")"

dry_run no-policy --set admissionPolicy.enabled=false
check "admissionPolicy.enabled=false: no policy, no binding" 0 \
  "$(q no-policy '[.items[] | select(.kind | startswith("ValidatingAdmissionPolicy"))] | length')"

dry_run single --set replicaCount=1 --set leaderElection.enabled=false --set cleanup.enabled=false
check "one replica: no PodDisruptionBudget, no Lease Role, no hook" \
  '["ClusterRole","ClusterRole","ClusterRoleBinding","Deployment","Role/rsc-resourceslice-controller-inventory-tls","RoleBinding/rsc-resourceslice-controller-inventory-tls","Service","ServiceAccount","ValidatingAdmissionPolicy","ValidatingAdmissionPolicyBinding"]' \
  "$(q single '[.items[] | if (.kind | startswith("Role")) then "\(.kind)/\(.metadata.name)" else .kind end] | sort')"
check "one replica without leader election: the flag says so, no anti-affinity" '[["--leader-elect=false"],null]' \
  "$(q single '.items[] | select(.kind == "Deployment") | [[.spec.template.spec.containers[0].args[] | select(startswith("--leader-elect"))], .spec.template.spec.affinity]')"

dry_run pull-drivers --set pull.enabled=true --set networkPolicy.enabled=true \
  --set-json 'pull.drivers=[{"name":"gpu.example.com","namespaces":["gpu-system"],"serviceAccount":"gpu-driver"},{"name":"nic.example.com","namespaces":["nic-system","gpu-system"]}]'
check "pull drivers: a Role and a RoleBinding in each of their namespaces, nothing cluster-wide" \
  '["Role/gpu-system","Role/nic-system","RoleBinding/gpu-system","RoleBinding/nic-system"]' \
  "$(q pull-drivers '[.items[] | select(.metadata.name == "rsc-resourceslice-controller-pull-discovery") | "\(.kind)/\(.metadata.namespace)"] | sort')"
check "pull drivers: egress to the pods of their namespaces on every port" \
  '[{"to":[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"gpu-system"}}},{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"nic-system"}}}]}]' \
  "$(q pull-drivers '[.items[] | select(.kind == "NetworkPolicy") | .spec.egress[] | select(.to[0].namespaceSelector)]')"
check "pull: the flags" '["--pull-discovery=true","--pull-driver=gpu.example.com=gpu-system/gpu-driver","--pull-driver=nic.example.com=nic-system,gpu-system","--pull-token-file=/var/run/secrets/resourceslice-controller/pull/token"]' \
  "$(q pull-drivers '[.items[] | select(.kind == "Deployment") | .spec.template.spec.containers[0].args[] | select(startswith("--pull") or startswith("--inventory-source"))]')"

dry_run pdb-percent --set podDisruptionBudget.minAvailable=50% --set auth.mode=none
check "PodDisruptionBudget minAvailable as a percentage" '"50%"' \
  "$(q pdb-percent '.items[] | select(.kind == "PodDisruptionBudget") | .spec.minAvailable')"
check "auth.mode=none reaches the flag" '["--auth=none"]' \
  "$(q pdb-percent '[.items[] | select(.kind == "Deployment") | .spec.template.spec.containers[0].args[] | select(startswith("--auth"))]')"

dry_run tag-and-digest --set image.digest=sha256:abababababababababababababababababababababababababababababababab \
  --set image.tag=latest
check "a tag and a digest: both in the reference" \
  '"ghcr.io/resourceslice-controller/resourceslice-controller:latest@sha256:abababababababababababababababababababababababababababababababab"' \
  "$(q tag-and-digest '.items[] | select(.kind == "Deployment") | .spec.template.spec.containers[0].image')"

finish
