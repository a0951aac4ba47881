{{/* Names, labels and images shared by the templates. */}}

{{- define "gpushare.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gpushare.fullname" -}}
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

{{- define "gpushare.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{- define "gpushare.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "gpushare.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one component: (dict "root" $ "component" "node") */}}
{{- define "gpushare.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpushare.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "gpushare.node.fullname" -}}
{{- printf "%s-node" (include "gpushare.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gpushare.scheduler.fullname" -}}
{{- printf "%s-scheduler" (include "gpushare.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The node config ConfigMap: an existing one or the chart's. */}}
{{- define "gpushare.node.configName" -}}
{{- default (printf "%s-config" (include "gpushare.node.fullname" .)) .Values.config.name -}}
{{- end -}}

{{/* registry/repository:tag from an image block, with defaults: (dict "image" .x "root" $) */}}
{{- define "gpushare.image" -}}
{{- $registry := default .root.Values.image.registry .image.registry -}}
{{- $tag := default (default .root.Chart.AppVersion .root.Values.image.tag) .image.tag -}}
{{- if $registry -}}
{{- printf "%s/%s:%s" $registry .image.repository $tag -}}
{{- else -}}
{{- printf "%s:%s" .image.repository $tag -}}
{{- end -}}
{{- end -}}

{{- define "gpushare.node.image" -}}
{{- include "gpushare.image" (dict "image" .Values.image "root" .) -}}
{{- end -}}

{{- define "gpushare.scheduler.image" -}}
{{- include "gpushare.image" (dict "image" .Values.scheduler.image "root" .) -}}
{{- end -}}

{{- define "gpushare.scheduler.pullPolicy" -}}
{{- default .Values.image.pullPolicy .Values.scheduler.image.pullPolicy -}}
{{- end -}}

{{/* The upstream kube-scheduler: its tag defaults to the cluster's version. */}}
{{- define "gpushare.kubeScheduler.image" -}}
{{- $i := .Values.scheduler.kubeScheduler.image -}}
{{- $tag := default .Capabilities.KubeVersion.Version $i.tag -}}
{{- if $i.registry -}}
{{- printf "%s/%s:%s" $i.registry $i.repository $tag -}}
{{- else -}}
{{- printf "%s:%s" $i.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* The webhook's Service, Secret and MutatingWebhookConfiguration names. */}}
{{- define "gpushare.webhook.service" -}}
{{- printf "%s-webhook" (include "gpushare.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- define "gpushare.webhook.secret" -}}
{{- default (printf "%s-webhook-cert" (include "gpushare.fullname" .)) .Values.scheduler.webhook.certSecret -}}
{{- end -}}
{{- define "gpushare.webhook.configuration" -}}
{{- printf "%s-%s" (include "gpushare.fullname" .) (include "gpushare.namespace" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gpushare.imagePullSecrets" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Values that fail the install with a message naming the value. */}}
{{- define "gpushare.validate" -}}
{{- if not (has .Values.scheduler.mode (list "second-scheduler" "extender" "none")) -}}
{{- fail (printf "scheduler.mode: must be second-scheduler, extender or none, got %q" .Values.scheduler.mode) -}}
{{- end -}}
{{- if not (has .Values.scheduler.webhook.failurePolicy (list "Fail" "Ignore")) -}}
{{- fail (printf "scheduler.webhook.failurePolicy: must be Fail or Ignore, got %q" .Values.scheduler.webhook.failurePolicy) -}}
{{- end -}}
{{- if not (has .Values.scheduler.memoryUnit (list "GiB" "MiB")) -}}
{{- fail (printf "scheduler.memoryUnit: must be GiB or MiB, got %q" .Values.scheduler.memoryUnit) -}}
{{- end -}}
{{- if and (not .Values.config.name) (not .Values.config.map) -}}
{{- fail "config: give config.name (an existing ConfigMap) or config.map (named configs)" -}}
{{- end -}}
{{- if and (not .Values.config.name) .Values.config.default (not (hasKey .Values.config.map .Values.config.default)) -}}
{{- fail (printf "config.default: %q is not a key of config.map (%s)" .Values.config.default (keys .Values.config.map | sortAlpha | join ", ")) -}}
{{- end -}}
{{- if and .Values.scheduler.webhook.certSecret (not .Values.scheduler.webhook.caBundle) -}}
{{- fail "scheduler.webhook.caBundle: required with scheduler.webhook.certSecret (the base64 PEM CA that signed its certificate)" -}}
{{- end -}}
{{- end -}}

{{/* A list of strings as CEL string literals, comma-separated: 'a', 'b'. */}}
{{- define "gpushare.webhook.quotedList" -}}
{{- $out := list -}}
{{- range . -}}{{- $out = append $out (printf "'%s'" .) -}}{{- end -}}
{{- join ", " $out -}}
{{- end -}}
