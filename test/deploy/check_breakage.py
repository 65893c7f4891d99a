#!/usr/bin/env python3
"""deploy.checks_catch_breakage: the deploy checks are not vacuous.

Each case copies the deployment files to a scratch tree, breaks one thing a user or a careless
edit could break (a webhook path, a port, an RBAC verb, a security setting, a values key, a
template directive, the Dockerfile's runtime stage, ...), runs the check that guards it and
expects it to fail naming the problem. The untouched copy must pass first.

A case may edit more than one file: its file is then a list of (file, old text, new text).
Cases run two at a time (each in its own copy of the tree).

Usage: check_breakage.py --root REPO_ROOT --kubectl PATH --yamllint PATH [--build-dir DIR]
                         [--renderer HELMRENDER] [--node PATH]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
CHART = "deploy/helm/kuberay-tpu-webhook"
SCHEMA = f"{CHART}/values.schema.json"

# (what breaks, checker, file, old text, new text, a phrase the failure must contain)
CASES = [
    ("mutating path", "kustomize", "deploy/manifests/webhooks.yaml",
     "path: /mutate", "path: /mutate-pods", "want kuberay-tpu-webhook.ray-system /mutate"),
    ("RBAC verb beyond read-only", "kustomize", "deploy/manifests/rbac.yaml",
     'verbs: ["get", "list", "watch"]', 'verbs: ["get", "list", "watch", "create"]',
     "want exactly"),
    ("capabilities not dropped", "kustomize", "deploy/manifests/deployment.yaml",
     "              drop:\n                - ALL", "              drop: []", "do not drop ALL"),
    ("container port off --bind-address", "kustomize", "deploy/manifests/deployment.yaml",
     "containerPort: 10250", "containerPort: 10251", "!= --bind-address"),
    ("served where a private cluster's firewall shuts the control plane out", "kustomize",
     [("deploy/manifests/deployment.yaml", "--bind-address=:10250", "--bind-address=:9443"),
      ("deploy/manifests/deployment.yaml", "containerPort: 10250", "containerPort: 9443")],
     None, None, "want 10250 (a port a GKE private cluster's firewall opens"),
    ("no zone spread", "kustomize", "deploy/manifests/deployment.yaml",
     "          topologyKey: topology.kubernetes.io/zone\n",
     "          topologyKey: example.com/rack\n", "topologySpreadConstraints"),
    ("namespace opt-out label no longer honoured", "kustomize", "deploy/manifests/webhooks.yaml",
     "          operator: DoesNotExist\n    objectSelector:",
     "          operator: Exists\n    objectSelector:", "leave out namespaces labelled"),
    ("critical priority without its ResourceQuota", "kustomize",
     "deploy/manifests/kustomization.yaml", "  - resourcequota.yaml\n", "",
     "want exactly ResourceQuota"),
    ("follow-namespace forgets the CA injection", "kustomize",
     "deploy/manifests/follow-namespace/replacements.yaml",
     "name: kuberay-tpu-mutating-webhook-cfg\n        fieldPaths:\n"
     "          - metadata.annotations.[cert-manager.io/inject-ca-from]",
     "name: kuberay-tpu-mutating-webhook-cfg-old\n        fieldPaths:\n"
     "          - metadata.annotations.[cert-manager.io/inject-ca-from]",
     "overlay to other-ns: kuberay-tpu-mutating-webhook-cfg: inject-ca-from"),
    ("writable root filesystem", "kustomize", "deploy/manifests/deployment.yaml",
     "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false", "readOnlyRootFilesystem"),
    ("objectSelector loses the worker label", "kustomize", "deploy/manifests/webhooks.yaml",
     "        ray.io/node-type: worker\n", "", "objectSelector"),
    ("Service renamed", "kustomize", "deploy/manifests/service.yaml",
     "  name: kuberay-tpu-webhook\n", "  name: tpu-webhook\n", "missing Service kuberay-tpu-webhook"),
    ("legacy placement no longer the default", "kustomize", "deploy/manifests/deployment.yaml",
     "            - --legacy-indexing=auto\n", "            - --legacy-indexing=off\n",
     "default --legacy-indexing=off"),
    ("Lease Role grants patch", "kustomize", "deploy/manifests/rbac.yaml",
     '"create", "update", "delete"]', '"create", "update", "patch", "delete"]',
     "Role kuberay-tpu-webhook-leases grants"),
    ("Lease Role reaches Secrets", "kustomize", "deploy/manifests/rbac.yaml",
     'resources: ["leases"]', 'resources: ["leases", "secrets"]',
     "Role kuberay-tpu-webhook-leases grants"),
    ("Lease Role widened to a ClusterRole", "kustomize", "deploy/manifests/rbac.yaml",
     "kind: Role\nmetadata:\n  name: kuberay-tpu-webhook-leases\n  namespace: ray-system\n",
     "kind: ClusterRole\nmetadata:\n  name: kuberay-tpu-webhook-leases\n", "want exactly"),
    ("Lease RoleBinding for another account", "kustomize", "deploy/manifests/rbac.yaml",
     "roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: kuberay-tpu-webhook-leases\n"
     "subjects:\n  - kind: ServiceAccount\n    name: kuberay-tpu-webhook\n",
     "roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: kuberay-tpu-webhook-leases\n"
     "subjects:\n  - kind: ServiceAccount\n    name: default\n",
     "RoleBinding kuberay-tpu-webhook-leases subjects"),
    ("Lease Role renamed, its binding dangles", "kustomize", "deploy/manifests/rbac.yaml",
     "kind: Role\nmetadata:\n  name: kuberay-tpu-webhook-leases\n",
     "kind: Role\nmetadata:\n  name: kuberay-tpu-webhook-lease\n", "want exactly"),
    ("Recreate strategy", "kustomize", "deploy/manifests/deployment.yaml",
     "    type: RollingUpdate\n    rollingUpdate:\n      maxSurge: 1\n      maxUnavailable: 0\n",
     "    type: Recreate\n", "want {'type': 'RollingUpdate'"),
    ("one replica", "kustomize", "deploy/manifests/deployment.yaml",
     "  replicas: 2\n", "  replicas: 1\n", "replicas 1, want 2"),
    ("POD_NAMESPACE a literal", "kustomize", "deploy/manifests/deployment.yaml",
     "              valueFrom:\n                fieldRef:\n                  fieldPath: metadata.namespace\n",
     "              value: ray-system\n", "env POD_NAMESPACE"),
    ("POD_NAME from the wrong field", "kustomize", "deploy/manifests/deployment.yaml",
     "fieldPath: metadata.name\n", "fieldPath: spec.nodeName\n", "env POD_NAME"),
    ("PodDisruptionBudget back to maxUnavailable", "kustomize", "deploy/manifests/pdb.yaml",
     "  minAvailable: 1\n", "  maxUnavailable: 1\n", "want minAvailable"),
    ("PodDisruptionBudget blocks every drain", "kustomize", "deploy/manifests/pdb.yaml",
     "  minAvailable: 1\n", "  minAvailable: 2\n", "drains would block"),
    ("validating webhook fails closed", "kustomize", "deploy/manifests/webhooks.yaml",
     "failurePolicy: Ignore", "failurePolicy: Fail", "validating: default failurePolicy Fail"),
    ("validating webhook no longer sent RayJobs", "kustomize", "deploy/manifests/webhooks.yaml",
     'resources: ["rayclusters", "rayjobs", "rayservices"]',
     'resources: ["rayclusters", "rayservices"]', "validating rules"),
    ("validating webhook skips UPDATE", "kustomize", "deploy/manifests/webhooks.yaml",
     'operations: ["CREATE", "UPDATE"]', 'operations: ["CREATE"]', "validating rules"),
    ("validating webhook sent a status subresource", "kustomize", "deploy/manifests/webhooks.yaml",
     'resources: ["rayclusters", "rayjobs", "rayservices"]',
     'resources: ["rayclusters", "rayjobs", "rayservices", "rayservices/status"]',
     "validating rules"),
    ("mutating webhook fails open", "kustomize", "deploy/manifests/webhooks.yaml",
     "failurePolicy: Fail", "failurePolicy: Ignore", "mutating: default failurePolicy Ignore"),
    ("claim timeout outlives the webhook timeout", "kustomize", "deploy/manifests/deployment.yaml",
     "            - --legacy-indexing=auto\n",
     "            - --legacy-indexing=auto\n            - --claim-timeout=5s\n",
     "not inside the mutating webhook's timeoutSeconds"),
    ("probe on the wrong path", "kustomize", "deploy/manifests/deployment.yaml",
     "path: /readyz", "path: /healthz", "readinessProbe path"),
    ("a manifest left out of the kustomization", "kustomize", "deploy/manifests/kustomization.yaml",
     "  - pdb.yaml\n", "", "missing PodDisruptionBudget"),
    ("values key renamed", "chart", f"{CHART}/values.yaml",
     "    healthPort: 8081", "    healthzPort: 8081", ".Values.tpuWebhook.deployment.healthPort"),
    ("template reads a value that does not exist", "chart", f"{CHART}/templates/service.yaml",
     ".Values.tpuWebhook.service.type", ".Values.tpuWebhook.service.kind", "is not in values.yaml"),
    ("function name typo", "chart", f"{CHART}/templates/deployment.yaml",
     "toYaml $d.resources", "toYml $d.resources", 'function "toYml" not defined'),
    ("a template calls env, which Helm's function map leaves out", "chart",
     f"{CHART}/templates/service.yaml", "type: {{ .Values.tpuWebhook.service.type }}",
     'type: {{ env "SERVICE_TYPE" | default .Values.tpuWebhook.service.type }}',
     'function "env" not defined'),
    ("unclosed block", "chart", f"{CHART}/templates/pdb.yaml", "{{- end }}\n", "", "unexpected EOF"),
    ("a branch no variant renders", "chart", f"{CHART}/templates/service.yaml",
     "  ports:\n", '  {{- if eq .Values.tpuWebhook.service.type "NodePort" }}\n'
     "  externalTrafficPolicy: Local\n  {{- end }}\n  ports:\n",
     "branches no variant renders (add a variant): templates/service.yaml:"),
    ("duplicate key in a template", "chart", f"{CHART}/templates/deployment.yaml",
     "  revisionHistoryLimit: 3\n", "  revisionHistoryLimit: 3\n  revisionHistoryLimit: 5\n",
     "duplicate key"),
    ("chart default drifts from the kustomize base", "chart", f"{CHART}/values.yaml",
     "    replicas: 2", "    replicas: 3", "replicas 3, want 2"),
    ("chart validating default back to Fail", "chart", f"{CHART}/values.yaml",
     "      failurePolicy: Ignore\n", "      failurePolicy: Fail\n",
     "validating: default failurePolicy Fail"),
    ("chart default legacyIndexing off", "chart", f"{CHART}/values.yaml",
     'legacyIndexing: "auto"', 'legacyIndexing: "off"', "default --legacy-indexing=off"),
    ("chart forces one replica with legacy placement again", "chart",
     f"{CHART}/templates/deployment.yaml",
     "  replicas: {{ $d.replicas | int }}\n",
     '  replicas: {{ if eq $legacy "off" }}{{ $d.replicas | int }}{{ else }}1{{ end }}\n',
     "replicas 1, want 2"),
    ("chart Lease Role even with legacy placement off", "chart", f"{CHART}/templates/rbac.yaml",
     '{{- if ne (include "kuberay-tpu-webhook.legacyIndexing" .) "off" }}', "{{- if true }}",
     "(legacy-indexing off)"),
    ("chart Namespace loses the keep policy", "chart", f"{CHART}/templates/namespace.yaml",
     "    helm.sh/resource-policy: keep\n", "    example.com/other: x\n",
     "helm.sh/resource-policy is None"),
    ("chart PodDisruptionBudget over a single replica", "chart", f"{CHART}/templates/pdb.yaml",
     "(gt (.Values.tpuWebhook.deployment.replicas | int) 1)",
     "(gt (.Values.tpuWebhook.deployment.replicas | int) 0)",
     "PDB minAvailable 1 with 1 replicas"),
    ("chart POD_NAME env dropped", "chart", f"{CHART}/templates/deployment.yaml",
     "            - name: POD_NAME\n              valueFrom:\n                fieldRef:\n"
     "                  fieldPath: metadata.name\n", "", "env POD_NAME"),
    ("chart path differs", "chart", f"{CHART}/templates/webhook.yaml",
     "path: /validate", "path: /validating", "/validate"),
    ("chart validating webhook no longer sent RayServices", "chart",
     f"{CHART}/templates/webhook.yaml", 'resources: ["rayclusters", "rayjobs", "rayservices"]',
     'resources: ["rayclusters", "rayjobs"]', "variant 'defaults': validating rules"),
    ("chart validates only RayClusters with legacy placement off", "chart",
     f"{CHART}/templates/webhook.yaml", 'resources: ["rayclusters", "rayjobs", "rayservices"]',
     'resources: {{ if eq (include "kuberay-tpu-webhook.legacyIndexing" .) "off" }}["rayclusters"]'
     '{{ else }}["rayclusters", "rayjobs", "rayservices"]{{ end }}',
     "'legacy off keeps 2 replicas and drops the Lease Role': validating rules"),
    ("chart validates only RayClusters in existingSecret mode", "chart",
     f"{CHART}/templates/webhook.yaml", 'resources: ["rayclusters", "rayjobs", "rayservices"]',
     'resources: {{ if eq $mode "existingSecret" }}["rayclusters"]'
     '{{ else }}["rayclusters", "rayjobs", "rayservices"]{{ end }}',
     "variant 'existingSecret': validating rules"),
    ("chart renders a new value on every render", "chart",
     f"{CHART}/templates/deployment.yaml", "  revisionHistoryLimit: 3\n",
     "  revisionHistoryLimit: 3\n  minReadySeconds: {{ randInt 0 1000000 }}\n",
     "a render differs from variant 'defaults'"),
    ("managed mode lets the webhook update any Secret", "chart",
     f"{CHART}/templates/rbac.yaml",
     '    resourceNames: ["kuberay-tpu-webhook-certs"]\n    verbs: ["get", "update"]',
     '    verbs: ["get", "update"]', "Role kuberay-tpu-webhook-certs grants"),
    ("a value no template reads", "chart",
     [(f"{CHART}/values.yaml", "  kuberayVersion: \"\"\n",
       "  kuberayVersion: \"\"\n  unusedKnob: 1\n"),
      (SCHEMA, '"kuberayVersion": {',
       '"unusedKnob": {"type": "integer"},\n        "kuberayVersion": {')],
     None, None, "values no template reads: ['tpuWebhook.unusedKnob']"),
    ("the schema lets misspelt keys through", "schema", SCHEMA,
     '"tpuWebhook": {\n      "type": "object",\n      "additionalProperties": false,\n',
     '"tpuWebhook": {\n      "type": "object",\n',
     "a misspelt key in a values file: rendered, but the schema should refuse it"),
    ("the schema takes any replicas", "schema", SCHEMA,
     '"replicas": {"type": "integer", "minimum": 1},', '"replicas": {},',
     "replicas as a string: rendered, but the schema should refuse it"),
    ("the schema forgets a value", "schema", SCHEMA,
     '            "priorityClassName": {\n              "description": "Priority class of the '
     'Pods; system-cluster-critical and system-node-critical also render a ResourceQuota '
     'admitting them outside kube-system.",\n              "type": "string"\n            },\n',
     "", "values.yaml tpuWebhook.deployment.priorityClassName: not described"),
    ("the schema refuses the Go chart's keys", "schema", SCHEMA,
     '"pullPolicy": {"type": "string", "enum": ["Always", "IfNotPresent", "Never"]},',
     '"pullPolicy": {"type": "string", "enum": ["Always", "Never"]},',
     "the Go chart's values file is refused"),
    ("the schema refuses the Go chart's port 443", "schema", SCHEMA,
     '"$ref": "#/definitions/port"\n            },\n            "healthPort"',
     '"type": "integer", "minimum": 1024\n            },\n            "healthPort"',
     "the Go chart's values file is refused"),
    ("the schema refuses the defaults", "chart", SCHEMA,
     '"port": {"type": "integer", "minimum": 1, "maximum": 65535},',
     '"port": {"type": "integer", "minimum": 20000, "maximum": 65535},',
     "tpuWebhook.deployment.bindPort: Must be greater than or equal to 20000"),
    ("chart ignores the release namespace", "chart", f"{CHART}/templates/_helpers.tpl",
     "| default .Release.Namespace", '| default "ray-system"',
     "in namespace 'ray-system', want ml-platform"),
    ("chart binds a privileged port without the sysctl", "chart",
     f"{CHART}/templates/_helpers.tpl", "{{- if lt $port 1024 -}}", "{{- if lt $port 0 -}}",
     "do not set net.ipv4.ip_unprivileged_port_start"),
    ("chart matchConditions on every Kubernetes version", "chart",
     f"{CHART}/templates/webhook.yaml",
     '(semverCompare ">=1.30.0-0" .Capabilities.KubeVersion.Version)', "true",
     "'Kubernetes 1.29: no matchConditions'"),
    ("matchCondition blind to init containers", "cel", f"{CHART}/templates/webhook.yaml",
     "has(object.spec.initContainers) ? object.spec.initContainers : []", "[]",
     "Pod 'TPU in an init container only': sent to the webhook False, want True"),
    ("a bad value is accepted", "chart", f"{CHART}/templates/_helpers.tpl",
     '{{- else if has $mode (list "managed" "certManager" "existingSecret") -}}',
     "{{- else if true -}}",
     "should fail"),
    ("unquoted off in values", "yamllint", f"{CHART}/values.yaml",
     'legacyIndexing: "auto"', "legacyIndexing: off", "truthy"),
    ("runtime stage runs a command", "dockerfile", "Dockerfile",
     "COPY --from=build /rootfs/ /\n", "COPY --from=build /rootfs/ /\nRUN mkdir -p /data\n",
     "RUN in the runtime stage"),
    ("runtime stage on a base with a shell", "dockerfile", "Dockerfile",
     "FROM scratch AS runtime", "FROM debian:bookworm-slim AS runtime", "runtime stage FROM"),
    ("runtime stage runs as root", "dockerfile", "Dockerfile",
     "USER 65532:65532", "USER root", "numeric non-root"),
    ("scratch stage without the loader and libraries", "dockerfile", "Dockerfile",
     "COPY --from=build /rootfs/ /\n",
     "COPY --from=build /staging/bin/kuberay-tpu-webhook /staging/bin/webhook-dryrun "
     "/usr/local/bin/\n", "does not copy the staged root"),
    ("ENTRYPOINT in shell form", "dockerfile", "Dockerfile",
     'ENTRYPOINT ["/usr/local/bin/kuberay-tpu-webhook"]',
     "ENTRYPOINT /usr/local/bin/kuberay-tpu-webhook", "exec (JSON) form"),
    ("build stage skips the setup script", "dockerfile", "Dockerfile",
     "SETUP_MINIMAL=1 bash scripts/setup.sh", "apt-get install -y g++", "scripts/setup.sh"),
    ("the staging script leaves a library out", "libs", "scripts/stage-image-root.sh",
     '$2 == "=>" && $3 ~ /^\\// {', '$2 == "=>" && $3 ~ /^\\// && $1 !~ /^libssl/ {',
     "libssl.so.3'], which ldd reports"),
    ("the staging script leaves the loader out", "libs", "scripts/stage-image-root.sh",
     "$1 ~ /^\\// { print $1 }", "$1 ~ /^\\/nowhere/ { print $1 }", "is not staged"),
    ("the staging script stages symlinks", "libs", "scripts/stage-image-root.sh",
     'cp -L "$path" "$dest"', 'cp -P "$path" "$dest"', "has symlinks"),
    ("build base not pinned by digest", "dockerfile", "Dockerfile",
     "ARG BASE_IMAGE=debian:bookworm-slim@sha256:", "ARG BASE_IMAGE=debian:bookworm-slim#",
     "pinned by digest"),
    ("build base written in the FROM, not a build argument", "dockerfile", "Dockerfile",
     "FROM ${BASE_IMAGE} AS build", "FROM debian:bookworm-slim@sha256:" + "0" * 64 + " AS build",
     "names its base itself"),
    ("the staging script writes no package records", "libs", "scripts/stage-image-root.sh",
     'write_records "${packages[@]}"\n', "", "which has no /var/lib/dpkg/status.d/"),
    ("a package record with another version", "libs", "scripts/stage-image-root.sh",
     "Version: ${Version}\\n", "Version: ${Version}.1\\n", "Version '"),
    ("a package record without its copyright", "libs", "scripts/stage-image-root.sh",
     '  cp -L "$doc" "$root$doc"\n', "", "/copyright"),
    ("the SBOM leaves a package out", "libs", "scripts/image-sbom.sh",
     'for rec in "${files[@]}"; do', 'for rec in "${files[@]:1}"; do', "packages named"),
    ("the SBOM's purl without the architecture", "libs", "scripts/image-sbom.sh",
     "?arch=$arch&distro", "?distro", "?distro=debian-12']; want"),
    ("ENTRYPOINT where no binary is staged", "libs", "Dockerfile",
     'ENTRYPOINT ["/usr/local/bin/kuberay-tpu-webhook"]',
     'ENTRYPOINT ["/usr/bin/kuberay-tpu-webhook"]', "is not in the staged root"),
    ("USER missing from the image's /etc/passwd", "libs", "Dockerfile",
     "USER 65532:65532", "USER 10001:10001", "is not in the staged /etc/passwd"),
    ("--memory-limit not passed", "kustomize", "deploy/manifests/deployment.yaml",
     "            - --memory-limit=$(WEBHOOK_MEMORY_LIMIT)\n", "",
     "--memory-limit=None, want $(WEBHOOK_MEMORY_LIMIT)"),
    ("--memory-limit from the memory request", "kustomize", "deploy/manifests/deployment.yaml",
     "resource: limits.memory", "resource: requests.memory", "env WEBHOOK_MEMORY_LIMIT"),
    ("--memory-limit from another variable", "args", "deploy/manifests/deployment.yaml",
     "--memory-limit=$(WEBHOOK_MEMORY_LIMIT)", "--memory-limit=$(MEMORY_LIMIT)",
     "references $(MEMORY_LIMIT)"),
    ("a memory limit below the binary's minimum", "args", "deploy/manifests/deployment.yaml",
     "              memory: 256Mi", "              memory: 16Mi",
     "the binary refuses the rendered args"),
    ("a flag value the binary refuses", "args", "deploy/manifests/deployment.yaml",
     "--shutdown-timeout=15s", "--shutdown-timeout=15", "the binary refuses the rendered args"),
    ("chart memory limit below the binary's minimum", "chart", f"{CHART}/values.yaml",
     "        memory: 256Mi", "        memory: 16Mi", "needs a limit of at least 32Mi"),
    ("chart NetworkPolicy on by default", "chart", f"{CHART}/templates/networkpolicy.yaml",
     "{{- if $np.enabled }}\n{{- if not (or $np.apiServerCIDRs $np.apiServerPeers) }}",
     "{{- if true }}\n{{- if false }}", "NetworkPolicy rendered although not enabled"),
    ("chart NetworkPolicy restricts egress", "chart", f"{CHART}/templates/networkpolicy.yaml",
     "    - Ingress\n", "    - Ingress\n    - Egress\n", "want [Ingress]"),
    ("chart NetworkPolicy opens the health port to the API server's ranges", "chart",
     f"{CHART}/templates/networkpolicy.yaml", "port: {{ $d.bindPort }}",
     "port: {{ $d.healthPort }}", "NetworkPolicy lets"),
    ("chart NetworkPolicy health rule open to every source", "chart",
     f"{CHART}/templates/networkpolicy.yaml",
     "    - from:\n        {{- toYaml . | nindent 8 }}\n",
     "    - from: []\n", "open to every source"),
    ("chart NetworkPolicy selects other Pods", "chart", f"{CHART}/templates/networkpolicy.yaml",
     '{{- include "kuberay-tpu-webhook.selectorLabels" . | nindent 6 }}',
     "app: something-else", "NetworkPolicy podSelector"),
    ("chart NetworkPolicy without the API server guard", "chart",
     f"{CHART}/templates/networkpolicy.yaml",
     "{{- if not (or $np.apiServerCIDRs $np.apiServerPeers) }}", "{{- if false }}",
     "should fail"),
    ("chart PrometheusRule not the rule file's groups", "chart",
     f"{CHART}/templates/prometheusrule.yaml", "spec:\n  groups:\n", "spec:\n  rules:\n",
     "PrometheusRule spec is not"),
    ("chart PrometheusRule ignores runbookBaseURL", "chart",
     f"{CHART}/templates/prometheusrule.yaml",
     '(printf "%s/%s" $base $alert.annotations.runbook_url)', "$alert.annotations.runbook_url",
     "KubeRayTPUWebhookDown: runbook_url docs/metrics.md#kuberaytpuwebhookdown, want https://"),
    ("chart PrometheusRule keeps runbookBaseURL's trailing slash", "chart",
     f"{CHART}/templates/prometheusrule.yaml", '| toString | trimSuffix "/" }}', "| toString }}",
     "blob/v0.3.0//docs/metrics.md#kuberaytpuwebhookdown, want"),
    ("chart dashboard ConfigMap ignores the sidecar label value", "chart",
     f"{CHART}/templates/dashboard.yaml", "{{ $dash.labelValue | toString | quote }}", '"1"',
     "dashboard ConfigMap labels"),
    ("chart dashboard ConfigMap always in the webhook's namespace", "chart",
     f"{CHART}/templates/dashboard.yaml",
     '{{ $dash.namespace | default (include "kuberay-tpu-webhook.namespace" .) }}',
     '{{ include "kuberay-tpu-webhook.namespace" . }}',
     "in namespace 'ray-system', want monitoring"),
    ("chart PodMonitoring scrapes the HTTPS port", "chart",
     f"{CHART}/templates/podmonitoring.yaml", "    - port: health\n", "    - port: https\n",
     "PodMonitoring endpoints"),
    ("chart PodMonitoring with a ServiceMonitor's field", "chart",
     f"{CHART}/templates/podmonitoring.yaml", "      timeout: {{", "      scrapeTimeout: {{",
     "scrapeTimeout: unknown field"),
    ("chart ignores image.digest", "chart", f"{CHART}/templates/_image.tpl",
     "{{- if $img.digest -}}", "{{- if false -}}", "want repository@digest"),
    ("chart dashboard ConfigMap loses the dashboard", "chart", f"{CHART}/templates/dashboard.yaml",
     "  kuberay-tpu-webhook.json: |-\n", "  dashboard.json: |-\n", "dashboard ConfigMap keys"),
]


def copy_tree(root, dst):
    for rel in ("deploy", "test/deploy", "scripts"):
        shutil.copytree(os.path.join(root, rel), os.path.join(dst, rel),
                        ignore=shutil.ignore_patterns("node_modules", "__pycache__"))
    for rel in ("Dockerfile", ".dockerignore"):
        shutil.copy(os.path.join(root, rel), os.path.join(dst, rel))


def run(checker, root, args):
    py = sys.executable
    cmd = {
        "kustomize": [py, f"{HERE}/check_kustomize.py", "--root", root, "--kubectl", args.kubectl],
        "chart": [py, f"{HERE}/check_chart.py", "--root", root, "--kubectl", args.kubectl,
                  "--renderer", args.renderer, "--node", args.node or "node"],
        "schema": [py, f"{HERE}/check_chart_schema.py", "--root", root,
                   "--renderer", args.renderer],
        "cel": [py, f"{HERE}/check_match_conditions.py", "--root", root, "--kubectl",
                args.kubectl, "--renderer", args.renderer, "--node", args.node or "node"],
        "yamllint": [py, f"{HERE}/run_yamllint.py", "--root", root, "--yamllint", args.yamllint],
        "dockerfile": [py, f"{HERE}/check_dockerfile.py", "--root", root],
        "libs": [py, f"{HERE}/check_dockerfile.py", "--root", root, "--libs",
                 "--build-dir", args.build_dir or "/nonexistent"],
        "args": [py, f"{HERE}/check_args.py", "--root", root, "--kubectl", args.kubectl,
                 "--build-dir", args.build_dir or "/nonexistent", "--renderer", args.renderer],
    }[checker]
    p = subprocess.run(cmd, capture_output=True, text=True,
                       env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
    return p.returncode, p.stdout + p.stderr


def edits_of(rel, old, new):
    """A case's edits: [(file, old text, new text), ...]."""
    return rel if old is None else [(rel, old, new)]


def run_case(i, case, tmp, args):
    """Breaks a fresh copy of the tree as the case says and runs its checker. Returns (missed,
    the line to print)."""
    what, checker, rel, old, new, phrase = case
    work = os.path.join(tmp, f"case{i}")
    copy_tree(args.root, work)
    for path_rel, before, after in edits_of(rel, old, new):
        path = os.path.join(work, path_rel)
        with open(path) as f:
            text = f.read()
        if text.count(before) != 1:
            return True, (f"FAIL: {what}: {path_rel} no longer contains {before!r} exactly once; "
                          "update the case")
        with open(path, "w") as f:
            f.write(text.replace(before, after))
    rc, out = run(checker, work, args)
    shutil.rmtree(work, ignore_errors=True)
    if rc == 0 or rc == 77:
        return True, f"FAIL: {what}: the {checker} check still passes"
    if phrase not in out:
        return True, f"FAIL: {what}: the {checker} check fails, but without {phrase!r}:\n{out}"
    line = next((ln for ln in out.splitlines() if phrase in ln), "")
    return False, f"caught: {what}: {line.strip()[:150]}"


# Checkers that need something built: their cases are skipped when the unbroken tree skips.
NEEDS_BUILD = {"libs": "the binaries built in --build-dir", "args": "the binaries and helmrender",
               "chart": "helmrender", "schema": "helmrender", "cel": "helmrender and node"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--kubectl", default="kubectl")
    ap.add_argument("--yamllint", default=shutil.which("yamllint") or "yamllint")
    ap.add_argument("--build-dir")
    ap.add_argument("--renderer", default="")
    ap.add_argument("--node", default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        clean = os.path.join(tmp, "clean")
        copy_tree(args.root, clean)
        ready = {}
        for checker in ("kustomize", "chart", "schema", "cel", "yamllint", "dockerfile", "libs",
                        "args"):
            rc, out = run(checker, clean, args)
            if rc not in (0, 77):
                print(f"FAIL: the unbroken tree fails {checker}:\n{out}")
                return 1
            ready[checker] = rc == 0
        todo = []
        for i, case in enumerate(CASES):
            if case[1] in NEEDS_BUILD and not ready[case[1]]:
                print(f"skip: {case[0]} (needs {NEEDS_BUILD[case[1]]})")
            else:
                todo.append((i, case))
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            results = list(pool.map(lambda ic: run_case(ic[0], ic[1], tmp, args), todo))
    for _, line in results:
        print(line)
    failures = sum(missed for missed, _ in results)
    print(f"breakage cases: {len(CASES)}, run: {len(todo)}, missed: {failures}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
