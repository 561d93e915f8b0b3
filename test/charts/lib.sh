# Shared by the chart tests (sourced, not run): test/lib.sh, the chart's paths,
# and a helm built by test/helm/build with its state in the temporary folder.
# shellcheck shell=bash

# shellcheck source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
chart="$root/charts/resourceslice-controller"
values_all="$root/test/charts/values-all.yaml"

helm_bin="$("$root/test/helm/build")/helm"
# helm keeps repositories, plugins and caches under these; a test must not read
# or change the user's.
export HELM_CACHE_HOME="$work/helm/cache" HELM_CONFIG_HOME="$work/helm/config" \
  HELM_DATA_HOME="$work/helm/data"
helm() { "$helm_bin" "$@"; }

# The chart's parameters: the schema's properties, descending into inline
# objects but not into $ref'd Kubernetes-like types (securityContext, resources,
# ...), which are documented as one value. Properties marked "deprecated" are
# removed values that the schema still accepts only so that the chart can refuse
# them with a message naming their replacement: they are no parameters.
chart_params() {
  jq -r 'def params(p): (.properties // {}) | to_entries[] | select(.value.deprecated != true)
           | (p + [.key]) as $k
           | if (.value.properties and (.value["$ref"] | not)) then (.value | params($k))
             else ($k | join(".")) end;
         params([])' "$chart/values.schema.json"
}

# values_json FILE: a values file as JSON, read by helm itself (through a chart
# whose one template prints its values), so YAML is parsed the way helm does.
values_json() {
  local dump="$work/values-dump"
  if [[ ! -d "$dump" ]]; then
    mkdir -p "$dump/templates"
    printf 'apiVersion: v2\nname: values-dump\nversion: 0.0.0\n' >"$dump/Chart.yaml"
    printf '{{ toJson .Values }}\n' >"$dump/templates/values.json"
  fi
  helm template dump "$dump" -f "$1" | sed -n '/^{/p'
}

# --- The controller binary under the chart's ServiceAccount, RBAC and
# arguments (chart_controller, chart_policy). They use $ns, the release
# namespace, and $cluster.

# apply_chart RELEASE HELM_ARGS...: renders the chart into $ns as
# $work/rendered.yaml and $work/rendered.json (one object a line), and applies
# everything but the workloads (there is no kubelet to run them). chart_args
# and cleanup_args are the Deployment's and the cleanup Job's arguments.
apply_chart() {
  helm template "$1" "$chart" -n "${ns:?}" "${@:2}" >"$work/rendered.yaml"
  kubectl create --dry-run=client -o json -f "$work/rendered.yaml" >"$work/rendered.json"
  jq -c 'select(.kind != "Deployment" and .kind != "Job" and .kind != "PodDisruptionBudget")' \
    "$work/rendered.json" | kubectl apply -f - >/dev/null
  mapfile -t chart_args < <(jq -r 'select(.kind == "Deployment")
    | .spec.template.spec.containers[0].args[]' "$work/rendered.json")
  # shellcheck disable=SC2034 # read by the scripts
  mapfile -t cleanup_args < <(jq -r 'select(.kind == "Job")
    | .spec.template.spec.containers[0].args[]' "$work/rendered.json")
}

# kubeconfig_for SERVICEACCOUNT FILE: a kubeconfig with only the token of that
# ServiceAccount of $ns.
kubeconfig_for() {
  local token
  token="$(kubectl -n "${ns:?}" create token "$1")"
  cat >"$2" <<YAML
apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: "$(cat "$cluster/server")", certificate-authority: "$cluster/pki/ca.crt"}}]
users: [{name: sa, user: {token: "$token"}}]
contexts: [{name: sa, context: {cluster: test, user: sa, namespace: $ns}}]
current-context: sa
YAML
}

# start_controller BINARY KUBECONFIG: runs the controller as the pod
# controller-0 of $ns with chart_args, its ports moved to free loopback ports
# (inventory_port, health_port, metrics_port); controller_args are the
# arguments it got, its output goes to $work/controller.log. Stopped on exit.
controller_pid=""
start_controller() {
  inventory_port="$(free_port)"
  health_port="$(free_port)"
  metrics_port="$(free_port)"
  controller_args=()
  local a
  for a in "${chart_args[@]}"; do
    case "$a" in
      --inventory-bind-address=*) controller_args+=("--inventory-bind-address=127.0.0.1:$inventory_port") ;;
      --health-probe-bind-address=*) controller_args+=("--health-probe-bind-address=127.0.0.1:$health_port") ;;
      --metrics-bind-address=*) controller_args+=("--metrics-bind-address=127.0.0.1:$metrics_port") ;;
      *) controller_args+=("$a") ;;
    esac
  done
  POD_NAMESPACE="${ns:?}" POD_NAME=controller-0 "$1" --kubeconfig "$2" \
    "${controller_args[@]}" >"$work/controller.log" 2>&1 &
  controller_pid=$!
  on_exit stop_controller
}
stop_controller() {
  if [[ -n "$controller_pid" ]] && kill -0 "$controller_pid" 2>/dev/null; then
    kill -TERM "$controller_pid"
    wait "$controller_pid" || true
  fi
  controller_pid=""
}

# driver_token NAMESPACE SERVICEACCOUNT NODE: creates a driver pod of that
# ServiceAccount on NODE (no kubelet runs it) and prints a token bound to it for
# the controller's audience: what a driver pod pushes with.
driver_token() {
  kubectl -n "$1" apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $2-$3}
spec:
  nodeName: $3
  serviceAccountName: $2
  automountServiceAccountToken: false
  containers: [{name: driver, image: example.com/driver:1}]
YAML
  kubectl -n "$1" create token "$2" --audience resourceslice-controller \
    --bound-object-kind Pod --bound-object-name "$2-$3"
}

# use_inventory RELEASE DRIVER_NAMESPACE: the controller's inventory API as a
# driver reaches it, through the Service's name (resolved to the local
# controller), trusting nothing but the CA bundle published in the driver's
# namespace ($work/ca.crt): sets service_host and inventory, for icurl.
use_inventory() {
  kubectl -n "$2" get configmap "$1-resourceslice-controller-ca" \
    -o jsonpath='{.data.ca\.crt}' >"$work/ca.crt"
  service_host="$1-resourceslice-controller.${ns:?}.svc"
  inventory="https://$service_host:$inventory_port"
}
icurl() { curl --resolve "$service_host:$inventory_port:127.0.0.1" --cacert "$work/ca.crt" "$@"; }

# push TOKEN DRIVER NODE: publishes a one-device pool named NODE on NODE with
# the driver's TOKEN and waits for it; prints the HTTP code, the body goes to
# $work/answer.
push() {
  icurl -s -o "$work/answer" -w '%{http_code}' -X PUT -H 'Content-Type: application/json' \
    -H "Authorization: Bearer $1" \
    --data "{\"nodeName\": \"$3\", \"devices\": [{\"name\": \"gpu-0\", \"attributes\": {\"model\": {\"string\": \"A100\"}}}]}" \
    "$inventory/v1/drivers/$2/pools/$3?wait=20s"
}
