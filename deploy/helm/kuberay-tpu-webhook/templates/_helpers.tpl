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

{{/* Certificate mode, checked. */}}
{{- define "kuberay-tpu-webhook.certMode" -}}
{{- $mode := .Values.tpuWebhook.cert.mode -}}
{{- if has $mode (list "certManager" "selfSigned" "existingSecret") -}}
{{ $mode }}
{{- else -}}
{{ fail (printf "tpuWebhook.cert.mode must be certManager, selfSigned or existingSecret, not %q" $mode) }}
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

{{/*
selfSigned mode: the CA and serving certificate, as base64 PEM in a YAML map {ca, crt, key}.
Reuses the Secret already in the cluster so that upgrades keep the certificate (and the caBundle
stays valid); generates a new pair at install, or after the Secret was deleted.
*/}}
{{- define "kuberay-tpu-webhook.selfSignedPair" -}}
{{- $ns := include "kuberay-tpu-webhook.namespace" . -}}
{{- $existing := lookup "v1" "Secret" $ns "kuberay-tpu-webhook-certs" -}}
{{- if and $existing (hasKey $existing "data") (hasKey $existing.data "ca.crt") -}}
ca: {{ index $existing.data "ca.crt" }}
crt: {{ index $existing.data "tls.crt" }}
key: {{ index $existing.data "tls.key" }}
{{- else -}}
{{- $host := include "kuberay-tpu-webhook.serviceHost" . -}}
{{- $days := .Values.tpuWebhook.cert.selfSigned.validityDays | int -}}
{{- $ca := genCA "kuberay-tpu-webhook-ca" $days -}}
{{- $names := list "kuberay-tpu-webhook" (printf "kuberay-tpu-webhook.%s" $ns) $host (printf "%s.cluster.local" $host) -}}
{{- $cert := genSignedCert $host nil $names $days $ca -}}
ca: {{ $ca.Cert | b64enc }}
crt: {{ $cert.Cert | b64enc }}
key: {{ $cert.Key | b64enc }}
{{- end -}}
{{- end }}
