{{/*
Names and labels shared by the chart's templates.
*/}}

{{/* The chart name, or nameOverride. */}}
{{- define "narad-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The base name of every object: fullnameOverride, else the release name when it already contains
the chart name, else "<release>-<chart>". Truncated to 63 characters (the DNS label limit).
*/}}
{{- define "narad-operator.fullname" -}}
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

{{/* "<chart>-<version>" for the helm.sh/chart label. */}}
{{- define "narad-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The labels that select the manager pods; never change them in an upgrade. */}}
{{- define "narad-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "narad-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: manager
{{- end }}

{{/* Labels on every object of the release. */}}
{{- define "narad-operator.labels" -}}
helm.sh/chart: {{ include "narad-operator.chart" . }}
{{ include "narad-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: narad
{{- end }}

{{/* The ServiceAccount the manager runs as. */}}
{{- define "narad-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "narad-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The manager image reference. */}}
{{- define "narad-operator.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
