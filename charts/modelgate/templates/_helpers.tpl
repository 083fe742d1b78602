{{/* Names, labels and shared snippets of the modelgate chart. */}}

{{- define "modelgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
fullname is the prefix of every object: the release name when it already
contains the chart name (so `helm install modelgate` gives modelgate-gateway,
the same names as config/default), else release-chart.
*/}}
{{- define "modelgate.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "modelgate.manager.fullname" -}}{{ include "modelgate.fullname" . | trunc 55 | trimSuffix "-" }}-manager{{- end -}}
{{- define "modelgate.gateway.fullname" -}}{{ include "modelgate.fullname" . | trunc 55 | trimSuffix "-" }}-gateway{{- end -}}

{{- define "modelgate.manager.serviceAccountName" -}}
{{- default (include "modelgate.manager.fullname" .) .Values.manager.serviceAccount.name -}}
{{- end -}}
{{- define "modelgate.gateway.serviceAccountName" -}}
{{- default (include "modelgate.gateway.fullname" .) .Values.gateway.serviceAccount.name -}}
{{- end -}}

{{- define "modelgate.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* Labels on every object. */}}
{{- define "modelgate.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "modelgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: modelgate
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of one component: call with (dict "ctx" $ "component" "gateway"). */}}
{{- define "modelgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "modelgate.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "modelgate.componentLabels" -}}
{{ include "modelgate.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Environment shared by the manager and the gateway. */}}
{{- define "modelgate.commonEnv" -}}
- name: MODELGATE_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ required "database.existingSecret is required: the name of a Secret holding the ledger DSN" .Values.database.existingSecret }}
      key: {{ .Values.database.key }}
- name: MODELGATE_SYSTEM_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- end -}}

{{/* The OpenTelemetry exporter's standard variables (tracing.*), included
only when tracing is enabled: by default no OTEL_* variable is set and the
binaries install no tracer (docs/observability.md). ctx is the root
context, component the service name's suffix. */}}
{{- define "modelgate.tracingEnv" -}}
{{- $t := .ctx.Values.tracing -}}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ required "tracing.endpoint is required when tracing.enabled: the OTLP receiver, such as http://otel-collector.monitoring:4318" $t.endpoint | quote }}
- name: OTEL_EXPORTER_OTLP_PROTOCOL
  value: {{ $t.protocol | quote }}
- name: OTEL_SERVICE_NAME
  value: {{ printf "modelgate-%s" .component | quote }}
- name: OTEL_TRACES_SAMPLER
  value: {{ $t.sampler | quote }}
{{- with $t.samplerArg }}
- name: OTEL_TRACES_SAMPLER_ARG
  value: {{ . | quote }}
{{- end }}
{{- $attrs := list (printf "k8s.namespace.name=%s" .ctx.Release.Namespace) }}
{{- range $k, $v := $t.resourceAttributes }}
{{- $attrs = append $attrs (printf "%s=%s" $k $v) }}
{{- end }}
- name: OTEL_RESOURCE_ATTRIBUTES
  value: {{ join "," $attrs | quote }}
{{- end -}}

{{/* The blob signing key, when configured. */}}
{{- define "modelgate.blobEnv" -}}
- name: MODELGATE_BLOB_DIR
  value: /var/lib/modelgate/blobs
{{- if .Values.blobs.signingKey.existingSecret }}
- name: MODELGATE_BLOB_SIGNING_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .Values.blobs.signingKey.existingSecret }}
      key: {{ .Values.blobs.signingKey.key }}
{{- end }}
{{- end -}}

{{- define "modelgate.blobClaimName" -}}
{{- default (printf "%s-blobs" (include "modelgate.fullname" .)) .Values.blobs.persistence.existingClaim -}}
{{- end -}}
