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
