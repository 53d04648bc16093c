{{/*
Deployment of one HTTP service (gateway, store, rubric-generator, verifier). Call with a dict:
  root          $
  component     "gateway"
  values        the component's values (port, replicas, probes, resources, env, scheduling,
                containerSecurityContext: keys over the chart-wide one)
  image         dict with repository, tag, pullPolicy
  args          the container command after the image's tini entrypoint (list)
  env           extra env entries as YAML (string, may be empty)
  resources     dict
  nodeSelector  dict
  tolerations   list
  volumes       extra volumes as YAML (string, may be empty)
  volumeMounts  extra volume mounts as YAML (string, may be empty)
  ports         extra container ports as YAML (string, may be empty)
  autoscaled    whether an HPA owns the replica count
*/}}
{{- define "rubricate.httpDeployment" -}}
{{- $root := .root }}
{{- $ctx := dict "root" .root "component" .component }}
{{- $v := .values }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "rubricate.componentName" $ctx }}
  labels:
    {{- include "rubricate.componentLabels" $ctx | nindent 4 }}
spec:
  {{- if not .autoscaled }}
  replicas: {{ $v.replicas }}
  {{- end }}
  revisionHistoryLimit: 5
  {{- include "rubricate.rollingUpdate" $root | nindent 2 }}
  selector:
    matchLabels:
      {{- include "rubricate.componentSelectorLabels" $ctx | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "rubricate.componentLabels" $ctx | nindent 8 }}
      annotations:
        {{- include "rubricate.podAnnotations" $root | nindent 8 }}
    spec:
      {{- include "rubricate.podSpecCommon" $root | trim | nindent 6 }}
      terminationGracePeriodSeconds: {{ $v.terminationGracePeriodSeconds }}
      containers:
        - name: {{ .component }}
          image: {{ include "rubricate.image" (dict "image" .image "root" $root) }}
          imagePullPolicy: {{ .image.pullPolicy }}
          args:
            {{- toYaml .args | nindent 12 }}
          ports:
            - name: http
              containerPort: {{ $v.port }}
              protocol: TCP
            {{- with .ports }}
            {{- . | nindent 12 }}
            {{- end }}
          envFrom:
            - configMapRef:
                name: {{ include "rubricate.fullname" $root }}
          env:
            - name: RUBRICATE_PORT
              value: {{ $v.port | toString | quote }}
            {{- if eq .component "gateway" }}
            {{- include "rubricate.gatewayAuthEnv" $root | nindent 12 }}
            {{- else }}
            {{- include "rubricate.internalAuthEnv" $root | nindent 12 }}
            {{- end }}
            {{- with .env }}
            {{- . | nindent 12 }}
            {{- end }}
            {{- with $v.env }}
            {{- include "rubricate.envMap" . | trim | nindent 12 }}
            {{- end }}
          {{- include "rubricate.httpProbes" $v | nindent 10 }}
          {{- include "rubricate.preStop" $root | nindent 10 }}
          resources:
            {{- toYaml .resources | nindent 12 }}
          {{- $security := deepCopy $root.Values.containerSecurityContext }}
          {{- range $key, $value := ($v.containerSecurityContext | default dict) }}
          {{- $_ := set $security $key $value }}
          {{- end }}
          securityContext:
            {{- toYaml $security | nindent 12 }}
          volumeMounts:
            {{- include "rubricate.scratchVolumeMounts" $root | nindent 12 }}
            {{- with .volumeMounts }}
            {{- . | nindent 12 }}
            {{- end }}
      volumes:
        {{- include "rubricate.scratchVolumes" $root | nindent 8 }}
        {{- with .volumes }}
        {{- . | nindent 8 }}
        {{- end }}
      {{- with .nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end }}

{{/*
ClusterIP (or other) Service in front of one HTTP component. Call with a dict:
  root, component, port, type (default ClusterIP), annotations (dict), ports (extra, YAML string)
*/}}
{{- define "rubricate.httpService" -}}
{{- $ctx := dict "root" .root "component" .component }}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "rubricate.componentName" $ctx }}
  labels:
    {{- include "rubricate.componentLabels" $ctx | nindent 4 }}
    {{- include "rubricate.metricsLabels" $ctx | nindent 4 }}
  {{- with .annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  type: {{ .type | default "ClusterIP" }}
  selector:
    {{- include "rubricate.componentSelectorLabels" $ctx | nindent 4 }}
  ports:
    - name: http
      port: {{ .port }}
      targetPort: http
      protocol: TCP
    {{- with .ports }}
    {{- . | nindent 4 }}
    {{- end }}
{{- end }}

{{/* HorizontalPodAutoscaler on CPU. Call with (dict "root" $ "component" "gateway" "values" .Values.gateway). */}}
{{- define "rubricate.hpa" -}}
{{- $ctx := dict "root" .root "component" .component }}
{{- $a := .values.autoscaling }}
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {{ include "rubricate.componentName" $ctx }}
  labels:
    {{- include "rubricate.componentLabels" $ctx | nindent 4 }}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: {{ include "rubricate.componentName" $ctx }}
  minReplicas: {{ $a.minReplicas }}
  maxReplicas: {{ $a.maxReplicas }}
  metrics:
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: {{ $a.targetCPUUtilizationPercentage }}
  behavior:
    scaleDown:
      stabilizationWindowSeconds: 300
{{- end }}

{{/*
Rolling update of a Deployment (issue 33, rolling upgrades mid-step): the new pod is started
and ready before an old one stops (maxUnavailable 0), and the old one drains on SIGTERM.
*/}}
{{- define "rubricate.rollingUpdate" -}}
strategy:
  type: RollingUpdate
  rollingUpdate:
    maxSurge: {{ .Values.rollingUpdate.maxSurge }}
    maxUnavailable: {{ .Values.rollingUpdate.maxUnavailable }}
{{- end }}

{{/*
PodDisruptionBudget of one component: a voluntary disruption (node drain, cluster upgrade)
evicts at most `podDisruptionBudget.maxUnavailable` of its pods at a time. Call with
(dict "root" $ "component" "gateway").
*/}}
{{- define "rubricate.pdb" -}}
{{- $ctx := dict "root" .root "component" .component }}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "rubricate.componentName" $ctx }}
  labels:
    {{- include "rubricate.componentLabels" $ctx | nindent 4 }}
spec:
  maxUnavailable: {{ .root.Values.podDisruptionBudget.maxUnavailable }}
  selector:
    matchLabels:
      {{- include "rubricate.componentSelectorLabels" $ctx | nindent 6 }}
{{- end }}
