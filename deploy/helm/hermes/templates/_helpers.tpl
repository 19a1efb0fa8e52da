{{/* The chart's name, for labels. */}}
{{- define "hermes.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every object's name: <release>-<chart>, or the release alone when it already
contains the chart's name. Kept at 30 characters so "<prefix>-<profile>" stays a DNS label and
a StatefulSet's pod name (with its "-0" and controller hash label) stays under 63.
*/}}
{{- define "hermes.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 30 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 30 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 30 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The name of one profile's objects: include "hermes.profileFullname" (list $ $profile) */}}
{{- define "hermes.profileFullname" -}}
{{- $root := index . 0 }}{{- $p := index . 1 }}
{{- printf "%s-%s" (include "hermes.fullname" $root) $p.name | trunc 52 | trimSuffix "-" }}
{{- end }}

{{- define "hermes.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object of the release. */}}
{{- define "hermes.labels" -}}
helm.sh/chart: {{ include "hermes.chart" . }}
app.kubernetes.io/name: {{ include "hermes.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Selector labels of one profile's pod: (list $ $profile) */}}
{{- define "hermes.selectorLabels" -}}
{{- $root := index . 0 }}{{- $p := index . 1 -}}
app.kubernetes.io/name: {{ include "hermes.name" $root }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
hermes.dev/profile: {{ $p.name }}
{{- end }}

{{/* Labels of one profile's objects: (list $ $profile) */}}
{{- define "hermes.profileLabels" -}}
{{- $root := index . 0 }}{{- $p := index . 1 }}
{{- include "hermes.labels" $root }}
hermes.dev/profile: {{ $p.name }}
app.kubernetes.io/component: gateway
{{- end }}

{{- define "hermes.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "hermes.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The image of one profile, by its engine: (list $ $profile) */}}
{{- define "hermes.image" -}}
{{- $root := index . 0 }}{{- $p := index . 1 }}
{{- $img := $root.Values.image }}
{{- $tag := default $root.Chart.AppVersion $img.tag }}
{{- if eq (default "native" $p.engine) "agent" }}
{{- if $img.fullDigest }}
{{- printf "%s@%s" $img.repository $img.fullDigest }}
{{- else }}
{{- printf "%s:%s" $img.repository (default (printf "%s-full" $tag) $img.fullTag) }}
{{- end }}
{{- else if $img.digest }}
{{- printf "%s@%s" $img.repository $img.digest }}
{{- else }}
{{- printf "%s:%s" $img.repository $tag }}
{{- end }}
{{- end }}

{{/* The first-boot config.yaml of one profile: its `config`, else one built from `model`. */}}
{{- define "hermes.configYaml" -}}
{{- $p := . }}
{{- if $p.config }}
{{- $p.config }}
{{- else }}
{{- $m := default dict $p.model -}}
# Seeded by the Hermes chart on this volume's first boot only: edits made here win over
# the chart's values from then on (docs/kubernetes.md).
model:
  default: {{ default "" $m.default | quote }}
  provider: {{ default "auto" $m.provider | quote }}
{{- if $m.baseUrl }}
  base_url: {{ $m.baseUrl | quote }}
{{- end }}
{{- end }}
{{- end }}

{{/* The ConfigMap data of one profile (what its checksum covers): the profile */}}
{{- define "hermes.seedData" -}}
config.yaml: |
{{ include "hermes.configYaml" . | indent 2 }}
{{- if .soul }}
SOUL.md: |
{{ .soul | indent 2 }}
{{- end }}
{{- end }}

{{/*
Whether one profile has objects of its own (a pod, volume, Service...): every profile, or with
`multiplex` only the `default` one, which serves them all. (list $ $profile) -> "true" or ""
*/}}
{{- define "hermes.hasPod" -}}
{{- $root := index . 0 }}{{- $p := index . 1 }}
{{- if or (not $root.Values.multiplex) (eq $p.name "default") }}true{{ end }}
{{- end }}

{{/*
The ConfigMap data of the multiplexing pod: the default profile's seeds under their own names,
each named profile's as "<name>.config.yaml" and "<name>.SOUL.md" (a key cannot hold a `/`;
the volume's items put them at profiles/<name>/).
*/}}
{{- define "hermes.multiplexSeedData" -}}
{{- range $p := .Values.profiles }}
{{- if eq $p.name "default" }}
{{ include "hermes.seedData" $p }}
{{- else }}
{{ $p.name }}.config.yaml: |
{{ include "hermes.configYaml" $p | indent 2 }}
{{- if $p.soul }}
{{ $p.name }}.SOUL.md: |
{{ $p.soul | indent 2 }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* The ConfigMap data of one profile's pod (what its checksum covers): (list $ $profile) */}}
{{- define "hermes.podSeedData" -}}
{{- $root := index . 0 }}{{- $p := index . 1 }}
{{- if $root.Values.multiplex }}
{{- include "hermes.multiplexSeedData" $root }}
{{- else }}
{{- include "hermes.seedData" $p }}
{{- end }}
{{- end }}

{{/* Whether one profile runs the dashboard: (list $ $profile) -> "true" or "" */}}
{{- define "hermes.dashboard" -}}
{{- $root := index . 0 }}{{- $p := index . 1 }}
{{- if $root.Values.metrics.enabled }}true
{{- else if hasKey $p "dashboard" }}{{ if $p.dashboard }}true{{ end }}
{{- else if $root.Values.dashboard.enabled }}true{{ end }}
{{- end }}

{{/* The Secret holding the metrics token and its key: "name key", or "" without a token. */}}
{{- define "hermes.metricsSecret" -}}
{{- with .Values.metrics }}
{{- if .existingSecret }}{{ .existingSecret }} {{ .secretKey }}
{{- else if .token }}{{ include "hermes.fullname" $ }}-metrics token
{{- end }}
{{- end }}
{{- end }}

{{/* Stops the render on values the schema cannot express (unique profile names). */}}
{{- define "hermes.validate" -}}
{{- $seen := dict }}
{{- range .Values.profiles }}
{{- if hasKey $seen .name }}
{{- fail (printf "profiles: the name %q is listed twice; every profile needs its own name (its pod, volume and Service are named after it)" .name) }}
{{- end }}
{{- $_ := set $seen .name true }}
{{- end }}
{{- if and .Values.ingress.enabled (not .Values.profiles) }}
{{- fail "ingress.enabled: no profile to route to; list one under profiles" }}
{{- end }}
{{- if .Values.multiplex }}
{{- $default := dict }}
{{- range .Values.profiles }}{{ if eq .name "default" }}{{ $default = . }}{{ end }}{{ end }}
{{- if not $default }}
{{- fail "multiplex: no profile named `default`; the default profile's pod serves every profile, so list one named default" }}
{{- end }}
{{- range .Values.profiles }}
{{- if ne (default "native" .engine) (default "native" $default.engine) }}
{{- fail (printf "multiplex: profile %q has engine %q but the default profile's is %q; one pod runs one engine for every profile" .name (default "native" .engine) (default "native" $default.engine)) }}
{{- end }}
{{- if and .ingressHost (ne .name "default") }}
{{- fail (printf "multiplex: profile %q has an ingressHost; every profile is reached through the default profile's host at /p/%s/v1" .name .name) }}
{{- end }}
{{- end }}
{{- end }}
{{- if and .Values.metrics.enabled (not (include "hermes.metricsSecret" .)) (not .Values.metrics.allow) }}
{{- fail "metrics.enabled: set metrics.existingSecret (a Secret holding the scrapers' bearer token), metrics.token, or metrics.allow (the scrapers' addresses); /metrics is never open to everyone" }}
{{- end }}
{{- if and .Values.metrics.serviceMonitor.enabled (not .Values.metrics.enabled) }}
{{- fail "metrics.serviceMonitor.enabled: needs metrics.enabled" }}
{{- end }}
{{- if and .Values.metrics.serviceMonitor.enabled (not (include "hermes.metricsSecret" .)) }}
{{- fail "metrics.serviceMonitor.enabled: the ServiceMonitor authenticates with the token; set metrics.existingSecret or metrics.token" }}
{{- end }}
{{- if lt (int .Values.terminationGracePeriodSeconds) 45 }}
{{- fail (printf "terminationGracePeriodSeconds: %v is shorter than a native gateway's clean stop (its 30 s drain, 10 s, and 5 s for the supervisor); use 45 or more (120 for the agent engine with cron jobs)" .Values.terminationGracePeriodSeconds) }}
{{- end }}
{{- end }}
