{{/*
Shared pieces of the kuberay-tpu-webhook chart. Object names are fixed (the Go webhook's), not
derived from the release name: the webhook configurations are cluster-wide, so one install per
cluster.
*/}}

{{/* Namespace of every namespaced object. */}}
{{- define "kuberay-tpu-webhook.namespace" -}}
{{- required "tpuWebhook.namespace.name must be set" .Values.tpuWebhook.namespace.name -}}
{{- end }}

{{/* Labels of every object. */}}
{{- define "kuberay-tpu-webhook.labels" -}}
app.kubernetes.io/name: kuberay-tpu-webhook
app.kubernetes.io/component: admission-webhook
app.kubernetes.io/part-of: kuberay
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/*
Selector of the webhook's Pods: the Go webhook's, because a Deployment's selector cannot change
and an upgrade from it must update its Deployment in place.
*/}}
{{- define "kuberay-tpu-webhook.selectorLabels" -}}
app: kuberay-tpu-webhook
{{- end }}

{{/* --legacy-indexing value: "on", "off" or "auto" (YAML booleans mapped to "on"/"off"). */}}
{{- define "kuberay-tpu-webhook.legacyIndexing" -}}
{{- $v := .Values.tpuWebhook.legacyIndexing | toString -}}
{{- if eq $v "true" -}}
on
{{- else if eq $v "false" -}}
off
{{- else if has $v (list "on" "off" "auto") -}}
{{ $v }}
{{- else -}}
{{ fail (printf "tpuWebhook.legacyIndexing must be \"on\", \"off\" or \"auto\", not %q" $v) }}
{{- end -}}
{{- end }}

{{/*
Certificate mode, checked. selfSigned, the mode that generated a certificate at render time with
lookup, is a deprecated alias of managed, so that values files written for it still install.
*/}}
{{- define "kuberay-tpu-webhook.certMode" -}}
{{- $mode := .Values.tpuWebhook.cert.mode -}}
{{- if eq $mode "selfSigned" -}}
managed
{{- else if has $mode (list "managed" "certManager" "existingSecret") -}}
{{ $mode }}
{{- else -}}
{{ fail (printf "tpuWebhook.cert.mode must be managed, certManager or existingSecret, not %q" $mode) }}
{{- end -}}
{{- end }}

{{/* Name of the Secret holding tls.crt and tls.key. */}}
{{- define "kuberay-tpu-webhook.tlsSecretName" -}}
{{- if eq (include "kuberay-tpu-webhook.certMode" .) "existingSecret" -}}
{{ required "tpuWebhook.cert.existingSecret.name is required with cert.mode=existingSecret" .Values.tpuWebhook.cert.existingSecret.name }}
{{- else -}}
kuberay-tpu-webhook-certs
{{- end -}}
{{- end }}

{{/* DNS name of the webhook Service, which the serving certificate must name. */}}
{{- define "kuberay-tpu-webhook.serviceHost" -}}
kuberay-tpu-webhook.{{ include "kuberay-tpu-webhook.namespace" . }}.svc
{{- end }}
