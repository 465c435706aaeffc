{{/* The release's full name: resources, the ServiceAccount, the Lease. */}}
{{- define "placer.fullname" -}}
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

{{/* extender, standalone or both: app.kubernetes.io/component. */}}
{{- define "placer.component" -}}
{{- .Values.mode -}}
{{- end -}}

{{- define "placer.serves" -}}
{{- if has .Values.mode (list "extender" "both") }}true{{ end -}}
{{- end -}}

{{- define "placer.schedules" -}}
{{- if has .Values.mode (list "standalone" "both") }}true{{ end -}}
{{- end -}}

{{- define "placer.selectorLabels" -}}
app.kubernetes.io/name: placer
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: {{ include "placer.component" . }}
{{- end -}}

{{- define "placer.labels" -}}
{{ include "placer.selectorLabels" . }}
app.kubernetes.io/part-of: placer
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "placer.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "placer.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "placer.policyConfigMap" -}}
{{- default (printf "%s-policy" (include "placer.fullname" .)) .Values.policy.existingConfigMap -}}
{{- end -}}

{{- define "placer.leaseName" -}}
{{- default (include "placer.fullname" .) .Values.leaderElection.resourceName -}}
{{- end -}}

{{- define "placer.tlsSecret" -}}
{{- default (printf "%s-tls" (include "placer.fullname" .)) .Values.tls.secretName -}}
{{- end -}}

{{- define "placer.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}
{{- end -}}

{{/* The URL kube-scheduler's extender entry calls: the Service, by its cluster DNS name. */}}
{{- define "placer.url" -}}
{{ if .Values.tls.enabled }}https{{ else }}http{{ end }}://{{ include "placer.fullname" . }}.{{ .Release.Namespace }}.svc:{{ .Values.service.port }}
{{- end -}}

{{/* The second kube-scheduler's names. */}}
{{- define "placer.scheduler.fullname" -}}
{{- printf "%s-kube-scheduler" (include "placer.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "placer.scheduler.selectorLabels" -}}
app.kubernetes.io/name: placer-kube-scheduler
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: scheduler
{{- end -}}

{{- define "placer.scheduler.labels" -}}
{{ include "placer.scheduler.selectorLabels" . }}
app.kubernetes.io/part-of: placer
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}
