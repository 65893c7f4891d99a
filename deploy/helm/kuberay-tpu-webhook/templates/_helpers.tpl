{{/*
Shared pieces of the kuberay-tpu-webhook chart. Object names are fixed (the Go webhook's), not
derived from the release name: the webhook configurations are cluster-wide, so one install per
cluster.
*/}}

{{/*
Namespace of every namespaced object: tpuWebhook.namespace.name when a values file names one (the
Go webhook's chart named ray-system), else the release namespace (helm install -n, Argo CD's
destination namespace).
*/}}
{{- define "kuberay-tpu-webhook.namespace" -}}
{{- .Values.tpuWebhook.namespace.name | default .Release.Namespace -}}
{{- end }}

{{/*
The label that opts a namespace out of both webhooks: Pods, RayClusters, RayJobs and RayServices
in a namespace carrying it (with any value) are never sent to the webhook.
*/}}
{{- define "kuberay-tpu-webhook.ignoreLabel" -}}
kuberay-tpu-webhook.ray.io/ignore
{{- end }}

{{/*
The namespaceSelector of both webhooks: never kube-system, kube-node-lease, the namespaces of
webhook.extraExcludedNamespaces, nor a namespace labelled with the opt-out label.
*/}}
{{- define "kuberay-tpu-webhook.namespaceSelector" -}}
{{- $excluded := concat (list "kube-system" "kube-node-lease") .Values.tpuWebhook.webhook.extraExcludedNamespaces -}}
matchExpressions:
  - key: kubernetes.io/metadata.name
    operator: NotIn
    values: {{ toJson $excluded }}
  - key: {{ include "kuberay-tpu-webhook.ignoreLabel" . }}
    operator: DoesNotExist
{{- end }}

{{/*
The Pod security context: deployment.podSecurityContext, plus, when deployment.bindPort is below
1024, the namespaced sysctl net.ipv4.ip_unprivileged_port_start=<bindPort>, so that the
non-root container, without any capability, may listen there (a "safe" sysctl since Kubernetes
1.22: kubelet allows it without configuration). A sysctl of that name already in the values wins.
*/}}
{{- define "kuberay-tpu-webhook.podSecurityContext" -}}
{{- $d := .Values.tpuWebhook.deployment -}}
{{- $psc := deepCopy ($d.podSecurityContext | default dict) -}}
{{- $port := $d.bindPort | int -}}
{{- if lt $port 1024 -}}
{{- $sysctls := $psc.sysctls | default list -}}
{{- $set := false -}}
{{- range $sysctls -}}
{{- if eq (toString .name) "net.ipv4.ip_unprivileged_port_start" -}}
{{- $set = true -}}
{{- end -}}
{{- end -}}
{{- if not $set -}}
{{- $_ := set $psc "sysctls" (append $sysctls (dict "name" "net.ipv4.ip_unprivileged_port_start" "value" (toString $port))) -}}
{{- end -}}
{{- end -}}
{{- toYaml $psc -}}
{{- end }}

{{/*
Whether the Pods' priority class is one that kube-apiserver may confine to kube-system (GKE
does): system-cluster-critical or system-node-critical. Such Pods are admitted elsewhere only in
a namespace with a ResourceQuota that names the class (templates/resourcequota.yaml).
*/}}
{{- define "kuberay-tpu-webhook.criticalPriority" -}}
{{- if has .Values.tpuWebhook.deployment.priorityClassName (list "system-cluster-critical" "system-node-critical") -}}
true
{{- end -}}
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
