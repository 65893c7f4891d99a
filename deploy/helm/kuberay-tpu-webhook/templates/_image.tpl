{{- /*
The container image reference: repository@digest when image.digest is set (the image exactly as
built and scanned, whatever its tag now points at), else repository:tag, the tag defaulting to
the chart's appVersion.
*/}}
{{- define "kuberay-tpu-webhook.image" -}}
{{- $img := .Values.tpuWebhook.image -}}
{{- if $img.digest -}}
{{- printf "%s@%s" $img.repository $img.digest -}}
{{- else -}}
{{- printf "%s:%s" $img.repository ($img.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end }}
