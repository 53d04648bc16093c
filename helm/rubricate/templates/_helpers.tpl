{{/*
Names
*/}}
{{- define "rubricate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "rubricate.fullname" -}}
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

{{- define "rubricate.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Name of one component's resources. Call with (dict "root" $ "component" "gateway"). */}}
{{- define "rubricate.componentName" -}}
{{- printf "%s-%s" (include "rubricate.fullname" .root) .component | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels
*/}}
{{- define "rubricate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "rubricate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "rubricate.labels" -}}
helm.sh/chart: {{ include "rubricate.chart" . }}
{{ include "rubricate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: rubricate
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "rubricate.componentSelectorLabels" -}}
{{ include "rubricate.selectorLabels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "rubricate.componentLabels" -}}
{{ include "rubricate.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* Labels of a Service that the ServiceMonitor scrapes; the job name matches Compose's. */}}
{{- define "rubricate.metricsLabels" -}}
rubricate.dev/metrics: "true"
rubricate.dev/job: rubricate-{{ .component }}
{{- end }}

{{/*
Accounts, secrets, images
*/}}
{{- define "rubricate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "rubricate.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "rubricate.secretName" -}}
{{- if .Values.existingSecret }}
{{- .Values.existingSecret }}
{{- else }}
{{- include "rubricate.fullname" . }}
{{- end }}
{{- end }}

{{/* Image reference. Call with (dict "image" .Values.image "root" $). */}}
{{- define "rubricate.image" -}}
{{- printf "%s:%s" .image.repository (default .root.Chart.AppVersion .image.tag | toString) }}
{{- end }}

{{/*
Connection URLs (only used when the chart creates the Secret)
*/}}
{{- define "rubricate.databaseUrl" -}}
{{- with .Values.externalDatabase }}
{{- if .url }}
{{- .url }}
{{- else }}
{{- $auth := .user | urlquery | replace "+" "%20" }}
{{- if .password }}
{{- $auth = printf "%s:%s" $auth (.password | urlquery | replace "+" "%20") }}
{{- end }}
{{- printf "postgresql://%s@%s:%d/%s?sslmode=%s" $auth .host (int .port) .database .sslmode }}
{{- end }}
{{- end }}
{{- end }}

{{/* Redis URL of one database. Call with (dict "root" $ "db" 0). */}}
{{- define "rubricate.redisUrl" -}}
{{- $db := .db }}
{{- with .root.Values.externalRedis }}
{{- $scheme := ternary "rediss" "redis" (eq (toString .tls) "true") }}
{{- $auth := "" }}
{{- if .password }}
{{- $auth = printf ":%s@" (.password | urlquery | replace "+" "%20") }}
{{- end }}
{{- printf "%s://%s%s:%d/%d" $scheme $auth .host (int .port) (int $db) }}
{{- end }}
{{- end }}

{{- define "rubricate.cacheRedisUrl" -}}
{{- default (include "rubricate.redisUrl" (dict "root" . "db" .Values.externalRedis.cacheDb)) .Values.externalRedis.url }}
{{- end }}

{{- define "rubricate.brokerRedisUrl" -}}
{{- default (include "rubricate.redisUrl" (dict "root" . "db" .Values.externalRedis.brokerDb)) .Values.externalRedis.brokerUrl }}
{{- end }}

{{/* One env entry from the Secret. Call with (dict "root" $ "name" "ENV" "key" "databaseUrl" "optional" false). */}}
{{- define "rubricate.secretEnv" -}}
- name: {{ .name }}
  valueFrom:
    secretKeyRef:
      name: {{ include "rubricate.secretName" .root }}
      key: {{ index .root.Values.secretKeys .key }}
      {{- if .optional }}
      optional: true
      {{- end }}
{{- end }}

{{/*
The services' shared internal token: auth.internalToken, else the one in the release's Secret
(upgrades keep it), else a new random one (install).
*/}}
{{- define "rubricate.internalToken" -}}
{{- if .Values.auth.internalToken }}
{{- .Values.auth.internalToken }}
{{- else }}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "rubricate.fullname" .) }}
{{- $data := (get (default dict $existing) "data") | default dict }}
{{- $key := .Values.secretKeys.authInternalToken }}
{{- if hasKey $data $key }}
{{- index $data $key | b64dec }}
{{- else }}
{{- randAlphaNum 48 }}
{{- end }}
{{- end }}
{{- end }}

{{/* The internal token, for every Rubricate container: the internal services (store, model
servers, miner, worker) accept nothing else, so a tenant's key cannot reach them around the
gateway. */}}
{{- define "rubricate.internalAuthEnv" -}}
{{ include "rubricate.secretEnv" (dict "root" . "name" "RUBRICATE_AUTH_INTERNAL_TOKEN" "key" "authInternalToken" "optional" false) }}
{{- end }}

{{/* The gateway's: the internal token and the tenants' API-key table. */}}
{{- define "rubricate.gatewayAuthEnv" -}}
{{ include "rubricate.secretEnv" (dict "root" . "name" "RUBRICATE_AUTH_API_KEYS" "key" "authApiKeys" "optional" false) }}
{{ include "rubricate.internalAuthEnv" . }}
{{- end }}

{{/* env entries from a map of name → value. */}}
{{- define "rubricate.envMap" -}}
{{- range $name, $value := . }}
- name: {{ $name }}
  value: {{ $value | toString | quote }}
{{- end }}
{{- end }}

{{/*
Pod building blocks
*/}}
{{- define "rubricate.podSpecCommon" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
serviceAccountName: {{ include "rubricate.serviceAccountName" . }}
automountServiceAccountToken: {{ .Values.serviceAccount.automountServiceAccountToken }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- end }}

{{- define "rubricate.podAnnotations" -}}
checksum/config: {{ include (print .Template.BasePath "/configmap.yaml") . | sha256sum }}
{{- if not .Values.existingSecret }}
checksum/secret: {{ include (print .Template.BasePath "/secret.yaml") . | sha256sum }}
{{- end }}
{{- with .Values.podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Writable scratch space under a read-only root file system. */}}
{{- define "rubricate.scratchVolumes" -}}
- name: tmp
  emptyDir: {}
- name: home
  emptyDir: {}
{{- end }}

{{- define "rubricate.scratchVolumeMounts" -}}
- name: tmp
  mountPath: /tmp
- name: home
  mountPath: /home/rubricate
{{- end }}

{{/* Remove the pod from Service endpoints before the server stops taking connections. */}}
{{- define "rubricate.preStop" -}}
lifecycle:
  preStop:
    exec:
      command: ["sleep", "5"]
{{- end }}

{{/* HTTP probes: liveness and startup on /healthz, readiness on /readyz. Call with the component values. */}}
{{- define "rubricate.httpProbes" -}}
startupProbe:
  httpGet:
    path: /healthz
    port: http
  {{- toYaml .startupProbe | nindent 2 }}
livenessProbe:
  httpGet:
    path: /healthz
    port: http
  {{- toYaml .livenessProbe | nindent 2 }}
readinessProbe:
  httpGet:
    path: /readyz
    port: http
  {{- toYaml .readinessProbe | nindent 2 }}
{{- end }}

{{/*
Effective LLM settings of a model server: the shared `llm` block with the server's own `llm`
keys on top (key by key, so an explicit false or 0 wins). Returns YAML; use with fromYaml.
*/}}
{{- define "rubricate.effectiveLlm" -}}
{{- $llm := deepCopy .root.Values.llm }}
{{- range $key, $value := (.values.llm | default dict) }}
{{- $_ := set $llm $key $value }}
{{- end }}
{{- toYaml $llm }}
{{- end }}
