{{/*
Names, labels and small computed values shared by every template. Object names are cut to
63 characters because several of them also become label values.
*/}}

{{- define "resourceslice-controller.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "resourceslice-controller.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The full name with a suffix, still within 63 characters. */}}
{{- define "resourceslice-controller.suffixedName" -}}
{{- $suffix := index . 1 }}
{{- $base := include "resourceslice-controller.fullname" (index . 0) | trunc (int (sub 62 (len $suffix))) | trimSuffix "-" }}
{{- printf "%s-%s" $base $suffix }}
{{- end }}

{{- define "resourceslice-controller.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride }}
{{- end }}

{{- define "resourceslice-controller.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels of every object: the recommended app.kubernetes.io set plus commonLabels, which cannot
replace the chart's own keys. Built as a map so that no key is ever written twice.
*/}}
{{- define "resourceslice-controller.labelMap" -}}
{{- $labels := dict
  "helm.sh/chart" (include "resourceslice-controller.chart" .)
  "app.kubernetes.io/name" (include "resourceslice-controller.name" .)
  "app.kubernetes.io/instance" .Release.Name
  "app.kubernetes.io/version" .Chart.AppVersion
  "app.kubernetes.io/managed-by" .Release.Service
  "app.kubernetes.io/part-of" "resourceslice-controller" }}
{{- toYaml (merge $labels (.Values.commonLabels | default dict)) }}
{{- end }}

{{- define "resourceslice-controller.labels" -}}
{{- include "resourceslice-controller.labelMap" . }}
{{- end }}

{{/* Labels of an object that belongs to one component: (list $ "controller"). */}}
{{- define "resourceslice-controller.componentLabels" -}}
{{- $top := index . 0 }}
{{- $labels := include "resourceslice-controller.labelMap" $top | fromYaml }}
{{- $_ := set $labels "app.kubernetes.io/component" (index . 1) }}
{{- toYaml $labels }}
{{- end }}

{{/*
Labels of a pod template: (list $ "controller" extraLabels). helm.sh/chart is left out so
that a chart version bump alone does not restart the pods; the selector labels win over
everything else.
*/}}
{{- define "resourceslice-controller.podLabels" -}}
{{- $top := index . 0 }}
{{- $labels := include "resourceslice-controller.componentLabels" (list $top (index . 1)) | fromYaml }}
{{- $labels = omit $labels "helm.sh/chart" }}
{{- toYaml (merge $labels (index . 2 | default dict)) }}
{{- end }}

{{/*
Selector of the controller's pods. The component keeps the cleanup hook's pod out of the
Deployment, the Service, the PodDisruptionBudget and the NetworkPolicy; it is part of an
immutable Deployment selector, so it must never change.
*/}}
{{- define "resourceslice-controller.selectorLabels" -}}
app.kubernetes.io/name: {{ include "resourceslice-controller.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end }}

{{- define "resourceslice-controller.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "resourceslice-controller.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "resourceslice-controller.cleanupName" -}}
{{- include "resourceslice-controller.suffixedName" (list . "cleanup") }}
{{- end }}

{{/*
The image reference: repository:tag, or repository:tag@digest when a digest is given. The tag
defaults to the chart's appVersion. With a digest the runtime pulls by digest; the tag only
tells readers which release it is.
*/}}
{{- define "resourceslice-controller.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- $ref := .Values.image.repository }}
{{- if $tag }}
{{- $ref = printf "%s:%s" $ref $tag }}
{{- end }}
{{- if .Values.image.digest }}
{{- $ref = printf "%s@%s" $ref .Values.image.digest }}
{{- end }}
{{- $ref }}
{{- end }}

{{- define "resourceslice-controller.leaseNamespace" -}}
{{- default (include "resourceslice-controller.namespace" .) .Values.leaderElection.namespace }}
{{- end }}

{{- define "resourceslice-controller.leaseName" -}}
{{- default (include "resourceslice-controller.fullname" .) .Values.leaderElection.id }}
{{- end }}

{{/* The inventory API's port: 8443 with TLS, 8082 without, unless set. */}}
{{- define "resourceslice-controller.inventoryPort" -}}
{{- if .Values.inventory.port }}
{{- .Values.inventory.port }}
{{- else if .Values.inventory.tls.enabled }}
{{- 8443 }}
{{- else }}
{{- 8082 }}
{{- end }}
{{- end }}

{{- define "resourceslice-controller.inventoryScheme" -}}
{{- ternary "https" "http" .Values.inventory.tls.enabled }}
{{- end }}

{{/*
Checks the schema cannot express. Included by the Deployment, so a bad combination fails
before anything is installed.
*/}}
{{- define "resourceslice-controller.validate" -}}
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.leaderElection.enabled) }}
{{- fail "replicaCount above 1 needs leaderElection.enabled: without it every replica would write ResourceSlices" }}
{{- end }}
{{- if and .Values.inventory.tls.enabled (eq .Values.inventory.tls.mode "secret") (not .Values.inventory.tls.secretName) }}
{{- fail "inventory.tls.secretName is required when inventory.tls.mode is secret" }}
{{- end }}
{{- if not (or (kindIs "invalid" .Values.podDisruptionBudget.minAvailable) (kindIs "invalid" .Values.podDisruptionBudget.maxUnavailable)) }}
{{- fail "podDisruptionBudget: set minAvailable or maxUnavailable, not both" }}
{{- end }}
{{- $seen := dict }}
{{- range .Values.drivers }}
{{- $key := printf "%s/%s" .namespace .name }}
{{- if hasKey $seen $key }}
{{- fail (printf "drivers: ServiceAccount %s is listed twice" $key) }}
{{- end }}
{{- $_ := set $seen $key true }}
{{- end }}
{{- /* Values of earlier versions, refused even with pull mode off: they no longer do anything. */}}
{{- if hasKey .Values.pull "namespaces" }}
{{- fail "pull.namespaces was removed: bind each pulled driver to the namespaces that serve it in pull.drivers ([{name: <driver>, namespaces: [...], serviceAccount: <optional>}]), then delete pull.namespaces" }}
{{- end }}
{{- if hasKey .Values.pull "discovery" }}
{{- fail "pull.discovery was removed: discovery is on exactly when pull.drivers lists a driver ([{name: <driver>, namespaces: [...], serviceAccount: <optional>}]); delete pull.discovery" }}
{{- end }}
{{- $bound := dict }}
{{- range .Values.pull.drivers }}
{{- if hasKey $bound .name }}
{{- fail (printf "pull.drivers: driver %s is listed twice (one entry per driver: list all its namespaces in it)" .name) }}
{{- end }}
{{- if not .namespaces }}
{{- fail (printf "pull.drivers: driver %s has no namespaces (the namespaces whose Services may serve its inventory)" .name) }}
{{- end }}
{{- $_ := set $bound .name true }}
{{- end }}
{{- if .Values.pull.enabled }}
{{- if not (or .Values.pull.drivers .Values.pull.sources) }}
{{- fail "pull.enabled needs at least one entry in pull.drivers or in pull.sources" }}
{{- end }}
{{- $pulled := dict }}
{{- range .Values.pull.sources }}
{{- if hasKey $pulled .driver }}
{{- fail (printf "pull.sources: driver %s is listed twice (one URL per driver)" .driver) }}
{{- end }}
{{- if hasKey $bound .driver }}
{{- fail (printf "pull.sources: driver %s is in pull.drivers too (one source of truth per driver)" .driver) }}
{{- end }}
{{- $_ := set $pulled .driver true }}
{{- end }}
{{- end }}
{{- end }}

{{/*
How Prometheus checks the certificate of a secure /metrics. With inventory TLS, /metrics serves
the inventory's certificate, so Prometheus verifies it against that CA (the ConfigMap of the
self-signed mode, or the Secret's ca.crt) for the Service's name; Prometheus reads them from the
ServiceMonitor's namespace, so only when that is the release namespace. Otherwise the controller
serves a self-signed certificate made in memory, which no CA vouches for, and verification is
skipped; the bearer token still authenticates the scraper, and TLS still encrypts the scrape.
*/}}
{{- define "resourceslice-controller.metricsTlsConfig" -}}
{{- $ns := include "resourceslice-controller.namespace" . }}
{{- $tls := .Values.inventory.tls }}
{{- $sameNamespace := eq (default $ns .Values.metrics.serviceMonitor.namespace) $ns }}
{{- if and $tls.enabled $sameNamespace }}
serverName: {{ include "resourceslice-controller.fullname" . }}.{{ $ns }}.svc
ca:
  {{- if eq $tls.mode "self-signed" }}
  configMap:
    name: {{ include "resourceslice-controller.caConfigMap" . }}
    key: ca.crt
  {{- else }}
  secret:
    name: {{ include "resourceslice-controller.inventoryTlsSecret" . }}
    key: {{ if eq $tls.mode "cert-manager" }}ca.crt{{ else }}{{ default "tls.crt" $tls.caSecretKey }}{{ end }}
  {{- end }}
{{- else }}
insecureSkipVerify: true
{{- end }}
{{- end }}

{{/* The Service's DNS names, which the inventory certificate must carry. */}}
{{- define "resourceslice-controller.serviceNames" -}}
{{- $name := include "resourceslice-controller.fullname" . }}
{{- $ns := include "resourceslice-controller.namespace" . }}
- {{ $name }}.{{ $ns }}.svc
- {{ $name }}.{{ $ns }}.svc.cluster.local
- {{ $name }}.{{ $ns }}
- {{ $name }}
{{- end }}

{{/* The Secret with the inventory API's certificate, in every TLS mode. */}}
{{- define "resourceslice-controller.inventoryTlsSecret" -}}
{{- if eq .Values.inventory.tls.mode "secret" }}
{{- .Values.inventory.tls.secretName }}
{{- else }}
{{- include "resourceslice-controller.suffixedName" (list . "inventory-tls") }}
{{- end }}
{{- end }}

{{/* The ConfigMap with the CA bundle that drivers mount (self-signed mode). */}}
{{- define "resourceslice-controller.caConfigMap" -}}
{{- include "resourceslice-controller.suffixedName" (list . "ca") }}
{{- end }}

{{/* The ConfigMap with pull.caBundle, the CAs of drivers' HTTPS inventory endpoints. */}}
{{- define "resourceslice-controller.pullCaConfigMap" -}}
{{- include "resourceslice-controller.suffixedName" (list . "pull-ca") }}
{{- end }}

{{/* Whether the controller discovers inventory endpoints (and so needs the discovery RBAC). */}}
{{- define "resourceslice-controller.pullDiscovery" -}}
{{- if and .Values.pull.enabled .Values.pull.drivers }}true{{ end }}
{{- end }}

{{/*
The namespaces pull.drivers binds, each once and sorted: where discovery reads Services,
EndpointSlices and Pods, and so where the chart grants that and opens egress.
*/}}
{{- define "resourceslice-controller.pullNamespaces" -}}
{{- $namespaces := list }}
{{- range .Values.pull.drivers }}
{{- $namespaces = concat $namespaces (.namespaces | default list) }}
{{- end }}
{{- toYaml ($namespaces | uniq | sortAlpha) }}
{{- end }}

{{/*
The --pull-driver value of one pull.drivers entry: DRIVER=NAMESPACE[/SERVICEACCOUNT],...
*/}}
{{- define "resourceslice-controller.pullDriverFlag" -}}
{{- $sa := .serviceAccount }}
{{- $bindings := list }}
{{- range .namespaces }}
{{- $bindings = append $bindings (ternary (printf "%s/%s" . $sa) . (not (empty $sa))) }}
{{- end }}
{{- printf "%s=%s" .name (join "," $bindings) }}
{{- end }}
