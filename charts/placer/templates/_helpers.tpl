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

{{/* kube-scheduler's client certificate Secret (tls.crt, tls.key, ca.crt). */}}
{{- define "placer.clientSecret" -}}
{{- default (printf "%s-scheduler-client" (include "placer.fullname" .)) .Values.tls.clientSecretName -}}
{{- end -}}

{{/* Where the certificates come from: secret (the operator's), certManager or generated. */}}
{{- define "placer.tlsSource" -}}
{{- if .Values.tls.secretName -}}secret
{{- else if .Values.tls.certManager.enabled -}}certManager
{{- else -}}generated
{{- end -}}
{{- end -}}

{{/* The chart made the client certificate (generated or cert-manager), so it knows its name. */}}
{{- define "placer.chartMadeClientCert" -}}
{{- if and .Values.tls.enabled .Values.tls.clientCA.enabled (ne (include "placer.tlsSource" .) "secret") (not .Values.tls.clientSecretName) }}true{{ end -}}
{{- end -}}

{{/*
The generated certificates as JSON {"serving": {...}, "client": {...}} of base64 Secret data. The
existing Secrets are kept across upgrades (lookup; empty under `helm template`, which then makes
new ones), unless tls.generated.rotate. Made once per render and kept in .Values, so the Secrets
and the Deployments' checksums see the same certificates.
*/}}
{{- define "placer.generatedTLS" -}}
{{- if not (hasKey .Values "_placerGeneratedTLS") -}}
{{- $fullname := include "placer.fullname" . -}}
{{- $ns := .Release.Namespace -}}
{{- $serving := lookup "v1" "Secret" $ns (include "placer.tlsSecret" .) -}}
{{- $client := lookup "v1" "Secret" $ns (include "placer.clientSecret" .) -}}
{{- $data := dict -}}
{{- if and $serving $client (not .Values.tls.generated.rotate) -}}
{{- $_ := set $data "serving" $serving.data -}}
{{- $_ := set $data "client" $client.data -}}
{{- else -}}
{{- $days := int .Values.tls.generated.validityDays -}}
{{- $ca := genCA (printf "%s-ca" $fullname) $days -}}
{{- $dns := list $fullname (printf "%s.%s" $fullname $ns) (printf "%s.%s.svc" $fullname $ns) (printf "%s.%s.svc.cluster.local" $fullname $ns) -}}
{{- $srv := genSignedCert $fullname nil $dns $days $ca -}}
{{- $cli := genSignedCert .Values.tls.clientCommonName nil nil $days $ca -}}
{{- $_ := set $data "serving" (dict "tls.crt" ($srv.Cert | b64enc) "tls.key" ($srv.Key | b64enc) "ca.crt" ($ca.Cert | b64enc)) -}}
{{- $_ := set $data "client" (dict "tls.crt" ($cli.Cert | b64enc) "tls.key" ($cli.Key | b64enc) "ca.crt" ($ca.Cert | b64enc)) -}}
{{- end -}}
{{- $_ := set .Values "_placerGeneratedTLS" $data -}}
{{- end -}}
{{- toJson .Values._placerGeneratedTLS -}}
{{- end -}}

{{/* A pod-template annotation that changes when the generated CA does, so a rotation rolls both Deployments. */}}
{{- define "placer.tlsChecksum" -}}
{{- if and .Values.tls.enabled (eq (include "placer.tlsSource" .) "generated") -}}
checksum/placer-ca: {{ (include "placer.generatedTLS" . | fromJson).serving | toJson | sha256sum | trunc 16 }}
{{- end -}}
{{- end -}}
