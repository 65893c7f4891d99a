#!/usr/bin/env python3
"""deploy.chart_structure: the Helm chart, rendered by Helm's own engine for every value variant.

The templates are rendered by helmrender (test/deploy/helmrender, built by CMake; chart_render.py
runs it), which does what `helm template` does with the parts Helm is made of: Go's
text/template with missingkey=zero, Sprig's functions plus Helm's, sigs.k8s.io/yaml, and
values.schema.json applied with gojsonschema. What this test proves, and how:
  1. Chart.yaml is a valid v2 chart description.
  2. Every `.Values.x.y` the templates name (directly, or through a variable such as
     `$d := .Values.tpuWebhook.deployment` then `$d.bindPort`) exists in values.yaml, read from
     the sources so that untaken branches count too; no render reads a key its values lack; and
     every value in values.yaml is read by some template in some variant (no dead knobs). The
     reads are recorded by helmrender while it renders (its --report, helmrender/coverage.go).
  3. Each variant of VARIANTS renders YAML without duplicate keys that makes a complete install
     (deploy_checks.check_install, plus the variant's own checks), or is refused with the
     expected message (bad values must stop the install with a clear error). A few variants
     skip values.schema.json, as `helm install --skip-schema-validation` does, to show that
     the templates' own guards still refuse what the schema refuses first. Variants render in
     release namespace ray-system unless they name another (helm install -n): the chart's
     objects, references and certificate names must follow it unless the values name a
     namespace; and for Kubernetes 1.32 unless they name another version (the matchConditions
     are rendered from 1.30 on).
  4. Together the variants take every branch of every if/with/range, including those of the
     defines in _helpers.tpl: helmrender counts each branch it takes.
  5. The certManager values (defaults otherwise) render exactly the kustomize base (`kubectl kustomize deploy/manifests`):
     same kinds, names, namespaces, paths, ports, selectors and specs, apart from the labels
     only Helm adds and the image reference.
  6. Every variant that renders, whatever its legacyIndexing value or cert mode, gives the
     validating webhook the kustomize base's rules: rayclusters, rayjobs and rayservices at
     CREATE and UPDATE; and the variants render every legacyIndexing value and cert mode.
  7. Nothing is generated or looked up at render time: the defaults render twice to the same
     text (managed certificates, the default, leave the caBundle to the webhook), and the
     deprecated selfSigned mode renders exactly what managed renders.
  8. Every object of every variant is valid against the Kubernetes API schemas (k8s_schema.py).
deploy.chart_schema checks values.schema.json itself; deploy.chart_helm renders the same
variants with a real helm, when one is installed, and compares the two.

Usage: check_chart.py --root REPO_ROOT --renderer HELMRENDER [--kubectl PATH] [--node PATH]
Exit 77 (skipped) when helmrender is not built, or when node (for the API schemas) is missing
and everything else passed.
"""
import argparse
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import NamedTuple

import yaml

import chart_render
import deploy_checks as dc
import k8s_schema

SKIP = 77
CHART = os.path.join("deploy", "helm", "kuberay-tpu-webhook")


class Variant(NamedTuple):
    """One set of values and what the chart must make of it."""
    name: str
    values: dict            # overrides, passed as a -f values file
    lookup: list | None     # objects lookup finds (an upgrade); None: a fresh install
    expect: dict | None     # check_install's keyword arguments; None: the render must fail
    extra: object           # an extra check (objs, idx, r), or the failure's phrase(s)
    skip_schema: bool = False  # as helm --skip-schema-validation
    release_ns: str | None = None    # helm install -n; None: chart_render.NAMESPACE (ray-system)
    kube_version: str | None = None  # .Capabilities.KubeVersion; None: chart_render.KUBE_VERSION


def phrases(extra):
    """The phrases a refused variant's error must contain."""
    return (extra,) if isinstance(extra, str) else tuple(extra)


def tw(**kw):
    """Overrides under tpuWebhook."""
    return {"tpuWebhook": kw}


def deployment(idx):
    return idx[("Deployment", dc.NAME)]


def container(idx):
    return deployment(idx)["spec"]["template"]["spec"]["containers"][0]


def flags(idx):
    return dc.parse_args(container(idx)["args"])


def expect_legacy(mode, replicas, pdb=True):
    """legacyIndexing changes the flag and the Lease Role, never replicas, strategy or PDB."""
    def check(objs, idx, r):
        f = flags(idx)
        spec = deployment(idx)["spec"]
        r.check(f.get("legacy-indexing") == mode, f"--legacy-indexing={f.get('legacy-indexing')}, want {mode}")
        r.check(spec["replicas"] == replicas, f"legacy {mode}: replicas {spec['replicas']}, want {replicas}")
        r.check(spec["strategy"] == dc.ROLLING_UPDATE, f"legacy {mode}: strategy {spec['strategy']}")
        has_role = ("Role", dc.LEASE_ROLE) in idx and ("RoleBinding", dc.LEASE_ROLE) in idx
        r.check(has_role == (mode != "off"),
                f"legacy {mode}: Lease Role/RoleBinding {'rendered' if has_role else 'missing'}")
        has_pdb = ("PodDisruptionBudget", dc.NAME) in idx
        r.check(has_pdb == pdb, f"{replicas} replicas: PodDisruptionBudget "
                                f"{'rendered' if has_pdb else 'missing'}")
        if has_pdb:
            r.check(idx[("PodDisruptionBudget", dc.NAME)]["spec"] == {
                "minAvailable": 1, "selector": {"matchLabels": dc.SELECTOR}},
                f"PodDisruptionBudget spec {idx[('PodDisruptionBudget', dc.NAME)]['spec']}")
        env = container(idx).get("env")
        r.check(env == [{"name": n, "valueFrom": {"fieldRef": {"fieldPath": p}}}
                        for n, p in dc.POD_ENV.items()] + [MEMORY_ENV], f"legacy {mode}: env {env}")
    return check


# The container's limits.memory, read by kubelet for --memory-limit=$(WEBHOOK_MEMORY_LIMIT).
MEMORY_ENV = {"name": "WEBHOOK_MEMORY_LIMIT", "valueFrom": {"resourceFieldRef": {
    "containerName": "kuberay-tpu-webhook", "resource": "limits.memory"}}}


def expect_default_install(objs, idx, r):
    """The shipped defaults, value by value (check_install checks them too, generically)."""
    expect_legacy("auto", 2)(objs, idx, r)
    c = container(idx)
    r.check(flags(idx).get("memory-limit") == "$(WEBHOOK_MEMORY_LIMIT)"
            and c["resources"]["limits"]["memory"] == "256Mi",
            f"--memory-limit={flags(idx).get('memory-limit')} with limits.memory "
            f"{c['resources']['limits']['memory']}, want $(WEBHOOK_MEMORY_LIMIT) from 256Mi")
    r.check(("NetworkPolicy", dc.NAME) not in idx, "NetworkPolicy rendered by default")
    r.check(not [k for k in idx if k[0] == "Namespace"],
            "a Namespace rendered by default (creating it is opt-in: namespace.create)")
    r.check([p["containerPort"] for p in c["ports"] if p["name"] == "https"] == [10250]
            and flags(idx).get("bind-address") == ":10250",
            f"HTTPS on {flags(idx).get('bind-address')}, want :10250 (open to a GKE private "
            "cluster's control plane)")
    psc = deployment(idx)["spec"]["template"]["spec"]["securityContext"]
    r.check("sysctls" not in psc, f"sysctls {psc.get('sysctls')} on an unprivileged port")
    quota = idx[("ResourceQuota", dc.CRITICAL_QUOTA)]["spec"]
    r.check(quota["hard"] == {"pods": "6"}, f"ResourceQuota hard {quota['hard']}, want pods 6 "
                                             "(2 x (2 replicas + 1 surge))")
    r.check(("PodMonitoring", dc.NAME) not in idx, "PodMonitoring rendered by default")
    r.check(c["image"] == "kuberay-tpu-webhook:0.3.0", f"image {c['image']}, want "
            "kuberay-tpu-webhook:0.3.0 (the repository and the chart's appVersion)")
    role = idx[("Role", dc.LEASE_ROLE)]
    r.check(role["rules"] == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                               "verbs": ["get", "list", "watch", "create", "update", "delete"]}],
            f"Lease Role rules {role['rules']}")
    r.check(idx[("ClusterRole", dc.CLUSTER_ROLE)]["rules"] == [
        {"apiGroups": [""], "resources": ["pods", "nodes", "services"],
         "verbs": ["get", "list", "watch"]}], "ClusterRole is no longer read-only")
    m = idx[("MutatingWebhookConfiguration", dc.MUTATING)]["webhooks"][0]
    v = idx[("ValidatingWebhookConfiguration", dc.VALIDATING)]["webhooks"][0]
    r.check((m["failurePolicy"], m["timeoutSeconds"]) == ("Fail", 5),
            f"mutating {m['failurePolicy']}/{m['timeoutSeconds']}, want Fail/5")
    r.check((v["failurePolicy"], v["timeoutSeconds"]) == ("Ignore", 5),
            f"validating {v['failurePolicy']}/{v['timeoutSeconds']}, want Ignore/5")


def expect_managed(validity, ca_validity, renew_before):
    """managed: the lifetimes reach the binary's flags; no Secret, no caBundle, no file flags."""
    def check(objs, idx, r):
        f = flags(idx)
        got = (f.get("cert-validity"), f.get("cert-ca-validity"), f.get("cert-renew-before"))
        r.check(got == (validity, ca_validity, renew_before),
                f"managed lifetimes {got}, want {(validity, ca_validity, renew_before)}")
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            for o in objs:
                if o["kind"] == kind:
                    r.check(all("caBundle" not in h["clientConfig"] for h in o["webhooks"]),
                            f"{kind}: caBundle rendered in managed mode")
    return check


def same_render(other):
    """A variant that must render exactly the objects of variant `other` (filled in by main)."""
    def check(objs, idx, r):
        SAME_AS.append((other, objs))
    return check


SAME_AS = []


def expect_everything(objs, idx, r):
    f = flags(idx)
    r.check(f.get("kuberay-version") == "1.3", "--kuberay-version not passed")
    r.check(f.get("threads") == "4", "extraArgs not passed")
    r.check(f.get("log-format") == "text" and f.get("v") == "2", "log format/verbosity not passed")
    r.check(f.get("bind-address") == ":10443" and f.get("health-address") == ":10081",
            "ports not passed")
    r.check(f.get("shutdown-timeout") == "20s", "shutdown timeout not passed")
    pod = deployment(idx)["spec"]["template"]
    r.check(pod["spec"].get("terminationGracePeriodSeconds") == 35, "grace period not derived")
    for key in ("nodeSelector", "tolerations", "affinity", "priorityClassName", "imagePullSecrets"):
        r.check(key in pod["spec"], f"{key} not rendered")
    r.check("topologySpreadConstraints" not in pod["spec"], "empty topologySpreadConstraints rendered")
    r.check(pod["spec"].get("imagePullSecrets") == [{"name": "regcred"}], "imagePullSecrets")
    r.check(pod["metadata"].get("annotations") == {"example.com/a": "b"}, "podAnnotations")
    r.check(pod["metadata"]["labels"].get("team") == "ml", "podLabels")
    r.check(container(idx)["image"] == "registry.example.com/kuberay-tpu-webhook:v9", "image")
    m = idx[("MutatingWebhookConfiguration", dc.MUTATING)]["webhooks"][0]
    r.check("ml-batch" in dc.excluded_namespaces(m["namespaceSelector"]), "extraExcludedNamespaces")
    r.check(m["failurePolicy"] == "Ignore" and m["timeoutSeconds"] == 10, "mutating policy values")
    r.check(f.get("claim-timeout") == "2s" and f.get("reservation-ttl") == "20s",
            "claim timeout / reservation TTL extraArgs not passed")
    r.check(m["reinvocationPolicy"] == "IfNeeded", "reinvocationPolicy value")
    r.check(m["clientConfig"]["service"]["port"] == 8443, "service port")
    v = idx[("ValidatingWebhookConfiguration", dc.VALIDATING)]["webhooks"][0]
    r.check(v["failurePolicy"] == "Fail" and v["timeoutSeconds"] == 7, "validating policy values")
    r.check(("PodDisruptionBudget", dc.NAME) not in idx, "PDB rendered although disabled")
    ms = idx.get(("Service", "kuberay-tpu-webhook-metrics"))
    sm = idx.get(("ServiceMonitor", dc.NAME))
    r.check(ms is not None and sm is not None, "metrics Service/ServiceMonitor missing")
    if ms and sm:
        port = ms["spec"]["ports"][0]
        r.check(port["targetPort"] == "health" and port["port"] == 9100, "metrics Service port")
        r.check(dc.subset(sm["spec"]["selector"]["matchLabels"], ms["metadata"]["labels"]),
                "ServiceMonitor does not select the metrics Service")
        r.check(not dc.subset(sm["spec"]["selector"]["matchLabels"],
                               idx[("Service", dc.NAME)]["metadata"]["labels"]),
                "ServiceMonitor also selects the webhook Service (HTTPS, not metrics)")
        ep = sm["spec"]["endpoints"][0]
        r.check(ep["port"] == "metrics" and ep["path"] == "/metrics", "ServiceMonitor endpoint")
        r.check(sm["metadata"]["labels"].get("release") == "prometheus", "ServiceMonitor labels")
        r.check(ep["interval"] == "15s" and ep["scrapeTimeout"] == "5s", "scrape settings")
    cert = idx[("Certificate", dc.CERTIFICATE)]["spec"]
    r.check(cert["duration"] == "720h" and cert["renewBefore"] == "240h", "cert duration values")
    r.check(deployment(idx)["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] == "Always",
            "pullPolicy")
    r.check(deployment(idx)["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"]
            == "1Gi", "resources")
    r.check(MEMORY_ENV in container(idx)["env"] and f.get("memory-limit") == "$(WEBHOOK_MEMORY_LIMIT)",
            "--memory-limit does not follow the changed limits.memory")
    r.check(f.get("max-connections") == "1024" and f.get("idle-timeout") == "30s",
            "connection budget extraArgs not passed")


def expect_metrics_service_only(objs, idx, r):
    r.check(("Service", "kuberay-tpu-webhook-metrics") in idx, "metrics Service missing")
    r.check(("ServiceMonitor", dc.NAME) not in idx, "ServiceMonitor rendered although disabled")
    ns = idx.get(("Namespace", dc.NAMESPACE), {})
    r.check(ns.get("metadata", {}).get("labels", {}).get("pod-security.kubernetes.io/enforce")
            == "restricted", "namespace labels")
    r.check(ns.get("metadata", {}).get("annotations") == {"helm.sh/resource-policy": "keep"},
            f"Namespace annotations {ns.get('metadata', {}).get('annotations')}")
    r.check(container(idx)["securityContext"].get("runAsUser") == 1234, "containerSecurityContext")
    r.check(deployment(idx)["spec"]["template"]["spec"]["securityContext"].get("runAsUser") == 1234,
            "podSecurityContext")


def expect_monitor_brings_service(objs, idx, r):
    r.check(("Service", "kuberay-tpu-webhook-metrics") in idx and ("ServiceMonitor", dc.NAME) in idx,
            "serviceMonitor.enabled without service.enabled must render both")


POD_MONITORING = ("PodMonitoring", dc.NAME)
DIGEST = "sha256:" + "5f0e" * 16  # 64 hex digits, written out
MANAGED_PROMETHEUS = tw(
    image={"repository": "registry.example.com/kuberay-tpu-webhook", "tag": "v9",
           "digest": DIGEST},
    metrics={"podMonitoring": {"enabled": True, "interval": "15s", "scrapeTimeout": "5s",
                               "labels": {"team": "ml"}}})


def expect_pod_monitoring(interval, timeout, labels):
    """A PodMonitoring that scrapes /metrics over plain HTTP on the container's port named
    health, of the webhook's Pods only, every interval with timeout; no Service or
    ServiceMonitor for it."""
    def check(objs, idx, r):
        pod_monitoring_is(idx, interval, timeout, labels, r)
    return check


def expect_managed_prometheus(objs, idx, r):
    """The image by digest (the tag ignored), and the PodMonitoring with its values set."""
    r.check(container(idx)["image"] == "registry.example.com/kuberay-tpu-webhook@sha256:" +
            "5f0e" * 16, f"image {container(idx)['image']}, want repository@digest")
    pod_monitoring_is(idx, "15s", "5s", {"team": "ml"}, r)


def pod_monitoring_is(idx, interval, timeout, labels, r):
    pm = idx.get(POD_MONITORING)
    if not r.check(pm is not None, "PodMonitoring missing"):
        return
    r.check(pm["apiVersion"] == "monitoring.googleapis.com/v1",
            f"PodMonitoring apiVersion {pm['apiVersion']}")
    r.check(pm["metadata"]["namespace"] == dc.NAMESPACE, "PodMonitoring namespace")
    r.check(dc.subset(labels, pm["metadata"]["labels"]) and
            dc.subset(pm["metadata"]["labels"], {**dc.SELECTOR, **labels,
                                                 **idx[("Service", dc.NAME)]["metadata"]["labels"]}),
            f"PodMonitoring labels {pm['metadata']['labels']}, want the chart's and {labels}")
    sel = pm["spec"]["selector"]
    pod_labels = deployment(idx)["spec"]["template"]["metadata"]["labels"]
    r.check(list(sel) == ["matchLabels"] and sel["matchLabels"]
            and dc.subset(sel["matchLabels"], pod_labels),
            f"PodMonitoring selector {sel} does not select the webhook's Pods ({pod_labels})")
    r.check(sel.get("matchLabels") == deployment(idx)["spec"]["selector"]["matchLabels"],
            "PodMonitoring selector is not the Deployment's")
    eps = pm["spec"]["endpoints"]
    health = [p for p in container(idx)["ports"] if p.get("name") == "health"]
    r.check(len(health) == 1 and health[0]["containerPort"] == dc.HEALTH_PORT,
            f"the container's health port {health}")
    r.check(eps == [{"port": "health", "path": "/metrics", "scheme": "http",
                     "interval": interval, "timeout": timeout}], f"PodMonitoring endpoints {eps}")
    r.check(("ServiceMonitor", dc.NAME) not in idx and
            ("Service", "kuberay-tpu-webhook-metrics") not in idx,
            "PodMonitoring alone rendered a metrics Service or ServiceMonitor")


EVERYTHING = tw(
    namespace={"create": False},
    image={"repository": "registry.example.com/kuberay-tpu-webhook", "tag": "v9",
           "pullPolicy": "Always", "pullSecrets": ["regcred"]},
    kuberayVersion="1.3",
    deployment={"verbosity": 2, "logFormat": "text", "bindPort": 10443, "healthPort": 10081,
                "shutdownTimeoutSeconds": 20,
                "extraArgs": ["--threads=4", "--claim-timeout=2s", "--reservation-ttl=20s",
                              "--max-connections=1024", "--idle-timeout=30s"],
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
                              "limits": {"cpu": "2", "memory": "1Gi"}},
                "nodeSelector": {"pool": "system"},
                "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "pool", "operator": "In", "values": ["system"]}]}]}}},
                "topologySpreadConstraints": [], "priorityClassName": "webhooks",
                "podAnnotations": {"example.com/a": "b"}, "podLabels": {"team": "ml"}},
    service={"port": 8443},
    webhook={"extraExcludedNamespaces": ["ml-batch"],
             "mutating": {"failurePolicy": "Ignore", "timeoutSeconds": 10,
                          "reinvocationPolicy": "IfNeeded"},
             "validating": {"failurePolicy": "Fail", "timeoutSeconds": 7}},
    cert={"mode": "certManager", "duration": "720h", "renewBefore": "240h"},
    podDisruptionBudget={"enabled": False},
    metrics={"service": {"port": 9100},
             "serviceMonitor": {"enabled": True, "interval": "15s", "scrapeTimeout": "5s",
                                "labels": {"release": "prometheus"}}},
)

API_SERVER_CIDRS = ["172.16.0.0/28", "fd00:10::/64"]
KONNECTIVITY = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                "podSelector": {"matchLabels": {"k8s-app": "konnectivity-agent"}}}
PROMETHEUS = [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
               "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}},
              {"ipBlock": {"cidr": "10.20.0.0/16", "except": ["10.20.5.0/24"]}}]


def ip_blocks(cidrs):
    return [{"ipBlock": {"cidr": c}} for c in cidrs]


def expect_network_policy(bind, health):
    """The NetworkPolicy opens exactly the configured ports (check_install checks its sources)."""
    def check(objs, idx, r):
        np = idx[("NetworkPolicy", dc.NAME)]
        ports = sorted(p["port"] for rule in np["spec"]["ingress"] for p in rule["ports"])
        r.check(ports in ([bind], sorted([bind, health])),
                f"NetworkPolicy ports {ports}, want the HTTPS port {bind} (and health {health})")
        r.check(set(ports) <= {p["containerPort"] for p in container(idx)["ports"]},
                "NetworkPolicy opens a port the container does not serve")
    return check


DASHBOARD = ("ConfigMap", "kuberay-tpu-webhook-dashboard")
RULE = ("PrometheusRule", dc.NAME)


# The chart directory load_chart() read last (this repository's chart until then): the
# monitoring variants compare what renders with that chart's files/alerts.yaml and
# files/dashboard.json, the one copy of the rules and of the dashboard.
LOADED_CHART_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", CHART)


def chart_file(rel):
    with open(os.path.join(LOADED_CHART_DIR, rel)) as f:
        return f.read()


# Each alert's runbook_url as the chart renders it: (what comes before the alert's name in lower
# case, {alert: the whole URL} for some alerts), written out by hand. By default the path in the
# repository that files/alerts.yaml gives; with runbookBaseURL, that base in front of it.
RELATIVE_RUNBOOKS = ("docs/metrics.md#", {
    "KubeRayTPUWebhookDown": "docs/metrics.md#kuberaytpuwebhookdown",
    "KubeRayTPUWebhookClaimDenials": "docs/metrics.md#kuberaytpuwebhookclaimdenials"})
RUNBOOK_BASE_URL = "https://git.example.com/ml-platform/kuberay-tpu-webhook/blob/v0.3.0/"
HOSTED_RUNBOOKS = (
    "https://git.example.com/ml-platform/kuberay-tpu-webhook/blob/v0.3.0/docs/metrics.md#", {
        "KubeRayTPUWebhookDown": "https://git.example.com/ml-platform/kuberay-tpu-webhook/blob/"
                                 "v0.3.0/docs/metrics.md#kuberaytpuwebhookdown",
        "KubeRayTPUWebhookClaimDenials": "https://git.example.com/ml-platform/"
                                         "kuberay-tpu-webhook/blob/v0.3.0/docs/metrics.md"
                                         "#kuberaytpuwebhookclaimdenials"})


def runbook_urls(groups):
    """{alert: its runbook_url}, and the groups without runbook_url annotations."""
    urls, rest = {}, json.loads(json.dumps(groups))
    for group in rest:
        for rule in group.get("rules") or []:
            urls[rule.get("alert")] = (rule.get("annotations") or {}).pop("runbook_url", None)
    return urls, rest


def check_runbooks(rule, groups, runbooks, r):
    """The PrometheusRule's spec is {groups: <files/alerts.yaml's groups>} but for runbook_url;
    every alert's runbook_url is the prefix then the alert's name in lower case, and the ones
    written out are exactly those."""
    got, rest = runbook_urls((rule.get("spec") or {}).get("groups") or [])
    want, file_rest = runbook_urls(groups)
    r.check(list(rule.get("spec") or {}) == ["groups"] and rest == file_rest,
            "PrometheusRule spec is not {groups: <files/alerts.yaml's groups>}: "
            f"{str(rule.get('spec'))[:200]}")
    r.check(sorted(got) == sorted(want), f"PrometheusRule alerts {sorted(got)}, want {sorted(want)}")
    prefix, exact = runbooks
    for alert, url in sorted(got.items()):
        r.check(url == prefix + str(alert).lower(),
                f"PrometheusRule {alert}: runbook_url {url}, want {prefix}{str(alert).lower()}")
    for alert, url in exact.items():
        r.check(got.get(alert) == url,
                f"PrometheusRule {alert}: runbook_url {got.get(alert)}, want {url}")


def expect_monitoring(labels, namespace, sidecar=("grafana_dashboard", "1"),
                      runbooks=RELATIVE_RUNBOOKS):
    """The PrometheusRule's spec is exactly {groups: <files/alerts.yaml's groups>} with each
    runbook_url as `runbooks` says; the dashboard ConfigMap holds exactly files/dashboard.json,
    under kuberay-tpu-webhook.json, with the sidecar's label (key, value); labels and annotations
    as set."""
    def check(objs, idx, r):
        rule, dash = idx.get(RULE), idx.get(DASHBOARD)
        if not r.check(rule is not None and dash is not None, "PrometheusRule or dashboard missing"):
            return
        r.check(rule.get("apiVersion") == "monitoring.coreos.com/v1",
                f"PrometheusRule apiVersion {rule.get('apiVersion')}")
        groups = yaml.safe_load(chart_file("files/alerts.yaml"))["groups"]
        check_runbooks(rule, groups, runbooks, r)
        r.check(dash["metadata"]["namespace"] == namespace,
                f"dashboard ConfigMap in {dash['metadata']['namespace']}, want {namespace}")
        key, value = sidecar
        r.check(dash["metadata"]["labels"].get(key) == value,
                f"dashboard ConfigMap lacks the sidecar's label {key}: {value!r}")
        data = dash.get("data") or {}
        r.check(list(data) == ["kuberay-tpu-webhook.json"],
                f"dashboard ConfigMap keys {list(data)}, want ['kuberay-tpu-webhook.json']")
        try:
            same = json.loads(data["kuberay-tpu-webhook.json"]) == \
                json.loads(chart_file("files/dashboard.json"))
            r.check(same, "dashboard ConfigMap does not hold files/dashboard.json")
        except (KeyError, ValueError) as e:
            r.check(False, f"dashboard ConfigMap does not hold the dashboard's JSON: {e}")
        for obj, want in ((rule, labels.get("rule", {})), (dash, labels.get("dash", {}))):
            r.check(dc.subset(want, obj["metadata"]["labels"]),
                    f"{obj['kind']} labels {obj['metadata']['labels']}, want {want} among them")
        ann = dash["metadata"].get("annotations") or {}
        r.check(ann == labels.get("annotations", {}), f"dashboard annotations {ann}")
    return check


def expect_dashboard_only(sidecar):
    """The dashboard ConfigMap with the sidecar label asked for, and no PrometheusRule."""
    def check(objs, idx, r):
        r.check(RULE not in idx, "PrometheusRule rendered although disabled")
        dash = idx.get(DASHBOARD)
        if r.check(dash is not None, "dashboard ConfigMap missing"):
            labels = dash["metadata"]["labels"]
            r.check(labels.get(sidecar[0]) == sidecar[1] and "grafana_dashboard" not in labels,
                    f"dashboard ConfigMap labels {labels}, want {sidecar[0]}: {sidecar[1]!r} "
                    "instead of grafana_dashboard")
    return check


MONITORING = tw(metrics={
    "serviceMonitor": {"enabled": True},
    "prometheusRule": {"enabled": True, "labels": {"release": "prometheus"}},
    "grafanaDashboard": {"enabled": True, "labels": {"team": "ml"},
                         "annotations": {"grafana_folder": "Ray"}}})
MONITORING_ELSEWHERE = tw(metrics={
    "prometheusRule": {"enabled": True},
    "grafanaDashboard": {"enabled": True, "namespace": "monitoring"}})
# The docs hosted at a fork's release tag (a trailing slash, which the chart drops).
MONITORING_HOSTED_RUNBOOKS = tw(metrics={
    "prometheusRule": {"enabled": True, "runbookBaseURL": RUNBOOK_BASE_URL},
    "grafanaDashboard": {"enabled": True}})
# A sidecar configured with another label and value (a boolean value, rendered as its text).
MONITORING_OTHER_LABEL = tw(metrics={
    "grafanaDashboard": {"enabled": True, "label": "example.com/grafana-dashboard",
                         "labelValue": True}})

V = Variant

# ---------------------------------------------------------------------------------------------
# The namespace: the release namespace unless a values file names one; the Namespace opt-in.

OTHER_NS = "ml-platform"


def expect_only_namespace(namespace):
    """No string of any object names another namespace than `namespace` where a namespace
    goes (check_install checks each reference; this catches any it does not know)."""
    def check(objs, idx, r):
        left = [f"{o['kind']} {o['metadata']['name']}: {p}" for o in objs
                for p in dc.strings_naming(o, dc.NAMESPACE)] if namespace != dc.NAMESPACE else []
        r.check(not left, f"strings still naming {dc.NAMESPACE}: {left}")
    return check


NAMESPACE_VARIANTS = [
    V("the release namespace, not created", {}, None, {"namespace": OTHER_NS},
      expect_only_namespace(OTHER_NS), release_ns=OTHER_NS),
    V("the release namespace, created by the chart",
      tw(namespace={"create": True, "labels": {"team": "ml"}}), None,
      {"namespace": OTHER_NS, "namespace_created": True}, expect_only_namespace(OTHER_NS),
      release_ns=OTHER_NS),
    V("namespace.create in the release namespace ray-system", tw(namespace={"create": True}), None,
      {"namespace_created": True}, None),
    V("a values file naming the namespace wins over the release namespace",
      tw(namespace={"name": "ray-system", "create": True}), None, {"namespace_created": True},
      None, release_ns="default"),
    V("certManager in the release namespace: the Certificate and the CA injection follow it",
      tw(cert={"mode": "certManager"}), None, {"cert_mode": "certManager", "namespace": OTHER_NS},
      expect_only_namespace(OTHER_NS), release_ns=OTHER_NS),
]

# ---------------------------------------------------------------------------------------------
# The matchConditions (their CEL is evaluated against Pods by check_match_conditions.py).

MATCH_VARIANTS = [
    V("Kubernetes 1.29: no matchConditions", {}, None, {"tpu_pods_only": False}, None,
      kube_version="v1.29.9"),
    V("Kubernetes 1.30 as GKE names it: matchConditions", {}, None, {}, None,
      kube_version="v1.30.5-gke.1014001"),
    V("tpuPodsOnly false: every KubeRay worker Pod", tw(webhook={"mutating": {"tpuPodsOnly": False}}),
      None, {"tpu_pods_only": False}, None),
]

# ---------------------------------------------------------------------------------------------
# A port below 1024 through the safe sysctl.

PSC = {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 65532,
       "seccompProfile": {"type": "RuntimeDefault"}}
PORT_SYSCTL = {"name": "net.ipv4.ip_unprivileged_port_start", "value": "443"}
SHM_SYSCTL = {"name": "kernel.shm_rmid_forced", "value": "1"}


def expect_pod_security(sysctls, port):
    def check(objs, idx, r):
        psc = deployment(idx)["spec"]["template"]["spec"]["securityContext"]
        r.check(psc == dict(PSC, sysctls=sysctls),
                f"Pod securityContext {psc}, want the defaults with sysctls {sysctls}")
        r.check(flags(idx).get("bind-address") == f":{port}"
                and container(idx)["ports"][0]["containerPort"] == port,
                f"--bind-address={flags(idx).get('bind-address')}, want :{port}")
        caps = container(idx)["securityContext"]["capabilities"]
        r.check(caps == {"drop": ["ALL"]}, f"capabilities {caps}: the sysctl needs none")
    return check


PORT_VARIANTS = [
    V("bindPort 443: the sysctl, no capability", tw(deployment={"bindPort": 443}), None,
      {"expect_defaults": False, "replicas": 2}, expect_pod_security([PORT_SYSCTL], 443)),
    V("bindPort 443 next to another sysctl",
      tw(deployment={"bindPort": 443, "podSecurityContext": {"sysctls": [SHM_SYSCTL]}}), None,
      {"expect_defaults": False, "replicas": 2},
      expect_pod_security([SHM_SYSCTL, PORT_SYSCTL], 443)),
    V("bindPort 1000 with the sysctl already set: kept as it is",
      tw(deployment={"bindPort": 1000, "podSecurityContext": {"sysctls": [
          {"name": "net.ipv4.ip_unprivileged_port_start", "value": "0"}]}}), None,
      {"expect_defaults": False, "replicas": 2},
      expect_pod_security([{"name": "net.ipv4.ip_unprivileged_port_start", "value": "0"}], 1000)),
]

# ---------------------------------------------------------------------------------------------
# The priority class and the ResourceQuota a critical one needs outside kube-system.


def expect_quota(cls, pods):
    """The Pods' priority class is cls; the ResourceQuota admits `pods` Pods of it (None: no
    ResourceQuota)."""
    def check(objs, idx, r):
        got = deployment(idx)["spec"]["template"]["spec"].get("priorityClassName")
        r.check(got == cls, f"priorityClassName {got!r}, want {cls!r}")
        q = idx.get(("ResourceQuota", dc.CRITICAL_QUOTA))
        if pods is None:
            r.check(q is None, "ResourceQuota rendered")
        elif r.check(q is not None, "ResourceQuota missing"):
            r.check(q["spec"]["hard"] == {"pods": pods}, f"ResourceQuota hard {q['spec']['hard']}")
    return check


PRIORITY_VARIANTS = [
    V("no priority class: no ResourceQuota", tw(deployment={"priorityClassName": ""}), None,
      {"expect_defaults": False, "replicas": 2}, expect_quota(None, None)),
    V("system-node-critical with 3 replicas: its ResourceQuota",
      tw(deployment={"priorityClassName": "system-node-critical", "replicas": 3}), None,
      {"expect_defaults": False, "replicas": 3}, expect_quota("system-node-critical", "8")),
    V("system-cluster-critical in kube-system: no ResourceQuota",
      tw(namespace={"name": "kube-system"}), None, {"namespace": "kube-system"},
      expect_quota("system-cluster-critical", None)),
]

VARIANTS = [
    V("defaults", {}, None, {}, expect_default_install),
    V("defaults, rendered again: the same objects", {}, None, {}, same_render("defaults")),
    V("certManager, the kustomize base's mode", tw(cert={"mode": "certManager"}), None,
      {"cert_mode": "certManager"}, None),
    V("managed lifetimes", tw(cert={"managed": {"validity": "720h", "caValidity": "8760h",
                                                "renewBefore": "240h"}}), None,
      {"cert_mode": "managed"}, expect_managed("720h", "8760h", "240h")),
    V("selfSigned, deprecated: renders managed", tw(cert={"mode": "selfSigned",
                                                          "selfSigned": {"validityDays": 30}}),
      None, {"cert_mode": "managed"}, same_render("defaults")),
    V("existingSecret", tw(cert={"mode": "existingSecret",
                                 "existingSecret": {"name": "my-tls", "caBundle": "Q0E="}}), None,
      {"cert_mode": "existingSecret", "ca_bundle": "Q0E=", "secret_name": "my-tls"}, None),
    V("existingSecret without caBundle", tw(cert={"mode": "existingSecret",
                                                  "existingSecret": {"name": "my-tls"}}), None,
      None, "existingSecret.caBundle"),
    V("existingSecret without name", tw(cert={"mode": "existingSecret",
                                              "existingSecret": {"caBundle": "Q0E="}}), None,
      None, "existingSecret.name"),
    V("unknown cert mode, schema skipped: the template refuses it too", tw(cert={"mode": "vault"}),
      None, None, "tpuWebhook.cert.mode must be managed, certManager or existingSecret",
      skip_schema=True),
    V("legacy off keeps 2 replicas and drops the Lease Role", tw(legacyIndexing="off"), None,
      {"expect_defaults": False, "replicas": 2}, expect_legacy("off", 2)),
    V("legacy on with 3 replicas", tw(legacyIndexing="on", deployment={"replicas": 3}), None,
      {"expect_defaults": False, "replicas": 3}, expect_legacy("on", 3)),
    V("legacy auto with 3 replicas", tw(deployment={"replicas": 3}), None,
      {"expect_defaults": False, "replicas": 3}, expect_legacy("auto", 3)),
    V("one replica: no PodDisruptionBudget to block drains", tw(deployment={"replicas": 1}), None,
      {"expect_defaults": False, "replicas": 1}, expect_legacy("auto", 1, pdb=False)),
    V("legacy: YAML boolean false means off", tw(legacyIndexing=False), None,
      {"expect_defaults": False, "replicas": 2}, expect_legacy("off", 2)),
    V("legacy: YAML boolean true means on", tw(legacyIndexing=True), None,
      {"expect_defaults": False, "replicas": 2}, expect_legacy("on", 2)),
    V("legacy: unknown value, schema skipped: the template refuses it too",
      tw(legacyIndexing="sometimes"), None, None,
      'tpuWebhook.legacyIndexing must be "on", "off" or "auto", not "sometimes"', skip_schema=True),
    V("every optional value set", EVERYTHING, None,
      {"expect_defaults": False, "namespace_created": False, "cert_mode": "certManager"},
      expect_everything),
    V("metrics Service only, namespace labels, security contexts",
      tw(namespace={"create": True,
                    "labels": {"pod-security.kubernetes.io/enforce": "restricted"}},
         metrics={"service": {"enabled": True}},
         deployment={"containerSecurityContext": {
             "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
             "runAsNonRoot": True, "runAsUser": 1234, "capabilities": {"drop": ["ALL"]},
             "seccompProfile": {"type": "RuntimeDefault"}},
             "podSecurityContext": {"runAsNonRoot": True, "runAsUser": 1234,
                                    "seccompProfile": {"type": "RuntimeDefault"}}}),
      None, {"namespace_created": True}, expect_metrics_service_only),
    V("PodMonitoring for Managed Prometheus, image by digest", MANAGED_PROMETHEUS, None,
      {}, expect_managed_prometheus),
    V("PodMonitoring with its defaults", tw(metrics={"podMonitoring": {"enabled": True}}), None,
      {}, expect_pod_monitoring("30s", "10s", {})),
    V("ServiceMonitor alone brings its Service", tw(metrics={"serviceMonitor": {"enabled": True}}),
      None, {}, expect_monitor_brings_service),
    V("PrometheusRule and Grafana dashboard, with labels", MONITORING, None, {},
      expect_monitoring({"rule": {"release": "prometheus"}, "dash": {"team": "ml"},
                         "annotations": {"grafana_folder": "Ray"}}, dc.NAMESPACE)),
    V("PrometheusRule and Grafana dashboard in Grafana's namespace", MONITORING_ELSEWHERE, None,
      {"elsewhere": {DASHBOARD: "monitoring"}}, expect_monitoring({}, "monitoring")),
    V("PrometheusRule with runbookBaseURL: absolute runbook URLs", MONITORING_HOSTED_RUNBOOKS,
      None, {}, expect_monitoring({}, dc.NAMESPACE, runbooks=HOSTED_RUNBOOKS)),
    V("Grafana dashboard with the sidecar's label changed", MONITORING_OTHER_LABEL, None, {},
      expect_dashboard_only(("example.com/grafana-dashboard", "true"))),
    V("NetworkPolicy: the API server's ranges only",
      tw(networkPolicy={"enabled": True, "apiServerCIDRs": API_SERVER_CIDRS}), None,
      {"network_policy": {"https": ip_blocks(API_SERVER_CIDRS), "health": []}},
      expect_network_policy(dc.INSTALL_BIND_PORT, dc.HEALTH_PORT)),
    V("NetworkPolicy: every source, ports moved",
      tw(networkPolicy={"enabled": True, "apiServerCIDRs": API_SERVER_CIDRS[:1],
                        "apiServerPeers": [KONNECTIVITY], "healthPeers": PROMETHEUS},
         deployment={"bindPort": 10443, "healthPort": 10081}), None,
      {"expect_defaults": False, "replicas": 2,
       "network_policy": {"https": ip_blocks(API_SERVER_CIDRS[:1]) + [KONNECTIVITY],
                          "health": PROMETHEUS}},
      expect_network_policy(10443, 10081)),
    V("NetworkPolicy: peers instead of ranges",
      tw(networkPolicy={"enabled": True, "apiServerPeers": [KONNECTIVITY]}), None,
      {"network_policy": {"https": [KONNECTIVITY], "health": []}},
      expect_network_policy(dc.INSTALL_BIND_PORT, dc.HEALTH_PORT)),
    V("NetworkPolicy that would shut out the API server", tw(networkPolicy={"enabled": True}),
      None, None, "tpuWebhook.networkPolicy.enabled needs tpuWebhook.networkPolicy.apiServerCIDRs"),
] + NAMESPACE_VARIANTS + MATCH_VARIANTS + PORT_VARIANTS + PRIORITY_VARIANTS


# ---------------------------------------------------------------------------------------------
# The chart's files, read without rendering.

DEFINE = re.compile(r'\{\{-?\s*define\s+"([^"]+)"')
INCLUDE = re.compile(r'include\s+"([^"]+)"')


def value_refs(text):
    """`.Values.a.b` paths a template names, resolving `$v := .Values.x` aliases."""
    aliases = dict(re.findall(r"\$(\w+)\s*:=\s*\.Values((?:\.\w+)+)", text))
    refs = re.findall(r"\.Values((?:\.\w+)+)", text)
    for var, chain in re.findall(r"\$(\w+)((?:\.\w+)+)", text):
        if var in aliases:
            refs.append(aliases[var] + chain)
    return {r.lstrip(".") for r in refs}


def resolves(values, path):
    cur = values
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return False
        cur = cur[part]
    return True


def leaf_paths(obj, path=""):
    """Every leaf path of a values tree (empty maps and lists count as leaves)."""
    if isinstance(obj, dict) and obj:
        for k, v in obj.items():
            yield from leaf_paths(v, f"{path}.{k}" if path else k)
    else:
        yield path


def check_chart_yaml(chart_dir, r):
    with open(os.path.join(chart_dir, "Chart.yaml")) as f:
        chart = yaml.safe_load(f)
    r.check(chart.get("apiVersion") == "v2", "Chart.yaml apiVersion is not v2")
    r.check(chart.get("name") == os.path.basename(chart_dir), "Chart.yaml name is not the directory's")
    r.check(re.fullmatch(r"\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?", str(chart.get("version", ""))),
            f"Chart.yaml version {chart.get('version')!r} is not SemVer")
    r.check(isinstance(chart.get("appVersion"), str), "Chart.yaml appVersion must be a quoted string")
    r.check(chart.get("type", "application") == "application", "Chart.yaml type")


def load_chart(chart_dir, r):
    """Checks Chart.yaml and what the template sources name; returns values.yaml."""
    global LOADED_CHART_DIR
    LOADED_CHART_DIR = chart_dir
    check_chart_yaml(chart_dir, r)
    with open(os.path.join(chart_dir, "values.yaml")) as f:
        values = yaml.load(f, Loader=dc.UniqueKeyLoader)
    tdir = os.path.join(chart_dir, "templates")
    sources = {}
    for name in sorted(os.listdir(tdir)):
        r.check(name.endswith((".yaml", ".tpl")) or name == "NOTES.txt",
                f"templates/{name}: Helm renders only .yaml/.yml/.tpl/.txt here")
        with open(os.path.join(tdir, name)) as f:
            sources[name] = f.read()
    defined = {d for src in sources.values() for d in DEFINE.findall(src)}
    for name, src in sources.items():
        for ref in sorted(value_refs(src)):
            r.check(resolves(values, ref), f"templates/{name}: .Values.{ref} is not in values.yaml")
        for inc in INCLUDE.findall(src):
            r.check(inc in defined, f"templates/{name}: include of undefined template {inc!r}")
    return values


# ---------------------------------------------------------------------------------------------
# Rendering the variants.

def render_variants(renderer, chart_dir, variants):
    jobs = [{"values": v.values, "lookup": v.lookup, "skip_schema": v.skip_schema,
             "namespace": v.release_ns, "kube_version": v.kube_version} for v in variants]
    return chart_render.render_many(renderer, chart_dir, jobs)


def objects_of(res, where, r):
    """The objects of a render, each document parsed strictly; NOTES.txt must not be empty."""
    if res.report is not None:
        r.check(bool(res.notes.strip()), f"{where}: NOTES.txt renders empty")
    objs = []
    for i, (source, text) in enumerate(res.documents):
        try:
            objs += dc.load_objects(text, f"{where} {source} document {i + 1}")
        except AssertionError as e:
            r.check(False, f"{e}\n--- rendered text ---\n{text}")
    return objs


def check_refused(v, res, r):
    """A variant the chart must refuse: the render fails with every phrase of v.extra."""
    want = phrases(v.extra)
    if res.ok:
        r.check(False, f"variant {v.name!r}: rendered, but should fail with {want}")
    elif all(p in res.error for p in want):
        print(f"variant {v.name!r}: refused as expected: {' '.join(res.error.split())}")
    else:
        r.check(False, f"variant {v.name!r}: render failed, but not with {want}: {res.error}")


def check_variant(vname, objs, expect, extra, r):
    """Holds one variant's objects to check_install and the variant's own checks."""
    sub = dc.Report()
    try:
        # The chart creates no Namespace unless namespace.create says so.
        idx = dc.check_install(objs, sub, helm=True, **{"namespace_created": False, **expect})
        if extra and not sub.failures:
            extra(objs, idx, sub)
    except (KeyError, TypeError, AttributeError, IndexError, ValueError) as e:
        sub.check(False, f"objects too malformed to check ({type(e).__name__}: {e})")
    for f in sub.failures:
        r.check(False, f"variant {vname!r}: {f}")
    print(f"variant {vname!r}: {len(objs)} objects, {len(sub.failures)} problem(s)")


def check_render(v, res, r):
    """Holds one variant's render to what it must give; returns its objects when it rendered."""
    if v.expect is None:
        check_refused(v, res, r)
        return None
    if not r.check(res.ok, f"variant {v.name!r}: render failed: {res.error}"):
        return None
    objs = objects_of(res, f"variant {v.name!r}", r)
    check_variant(v.name, objs, v.expect, v.extra, r)
    return objs


def short(where):
    """A template location without the chart's name in front."""
    return where.split("/", 1)[1] if where.startswith("kuberay-tpu-webhook/") else where


class Coverage:
    """What the variants' renders took and read, added up from helmrender's reports."""

    def __init__(self):
        self.branches = {}  # (where, kind, branch) -> hits
        self.read, self.missing = set(), {}
        self.defines, self.partials = {}, set()

    def add(self, vname, report, r):
        if not r.check(report is not None, f"variant {vname!r}: helmrender wrote no report"):
            return
        for b in report["branches"]:
            key = (b["where"], b["kind"], b["branch"])
            self.branches[key] = self.branches.get(key, 0) + b["hits"]
        self.read |= set(report["values_read"])
        for p in report["values_missing"]:
            self.missing.setdefault(p, vname)
        self.defines.update(report["defines"])
        self.partials |= set(report["partials_with_output"])

    def check(self, values, r):
        """Every branch taken, every value read, no read of a missing key, one define each."""
        r.check(bool(self.branches), "helmrender reported no if/with/range at all")
        missed = sorted(k for k, n in self.branches.items() if n == 0)
        r.check(not missed, "branches no variant renders (add a variant): "
                + ", ".join(f"{short(w)} {kind} {b}" for w, kind, b in missed))
        # A default leaf counts as read when it, or something a variant put under it, was read.
        unused = sorted(p for p in leaf_paths(values)
                        if not any(u == p or u.startswith(p + ".") for u in self.read))
        r.check(not unused, f"values no template reads: {unused}")
        for p, vname in sorted(self.missing.items()):
            r.check(False, f"variant {vname!r}: a template reads .Values.{p}, which is not in "
                           "values.yaml")
        for name, files in sorted(self.defines.items()):
            r.check(len(files) == 1, f"template {name!r} defined {len(files)} times "
                                     f"({[short(f) for f in files]}): the last parsed wins")
        for f in sorted(self.partials):
            r.check(False, f"{short(f)}: a partial must only define templates (Helm never "
                           "renders its text)")
        print(f"coverage: {len(self.branches) - len(missed)} of {len(self.branches)} "
              f"if/with/range branches taken, {len(self.read)} value paths read")


# ---------------------------------------------------------------------------------------------
# Against the kustomize base and the Kubernetes API.

def kustomize_objects(root, kubectl, r):
    if not r.check(shutil.which(kubectl) is not None,
                   f"kubectl not found ({kubectl}); scripts/setup.sh installs it"):
        return None
    proc = subprocess.run([kubectl, "kustomize", os.path.join(root, "deploy", "manifests")],
                          capture_output=True, text=True)
    if not r.check(proc.returncode == 0, f"kubectl kustomize failed: {proc.stderr}"):
        return None
    return dc.load_objects(proc.stdout, "kustomize")


def compare_with_kustomize(chart_objs, kobjs, r):
    k = {(o["kind"], o["metadata"]["name"]): dc.normalized(o) for o in kobjs}
    h = {(o["kind"], o["metadata"]["name"]): dc.normalized(o) for o in chart_objs}
    r.check(set(k) == set(h),
            f"chart defaults and kustomize base declare different objects: only chart "
            f"{sorted(set(h) - set(k))}, only kustomize {sorted(set(k) - set(h))}")
    for key in sorted(set(k) & set(h)):
        for d in dc.diff(h[key], k[key]):
            r.check(False, f"{key[0]} {key[1]}: chart vs kustomize: {d}")


LEGACY_MODES = {"auto", "on", "off"}
KUSTOMIZE_VARIANT = "certManager, the kustomize base's mode"
CERT_MODES = {"managed", "certManager", "existingSecret"}


def check_validating_everywhere(rendered, kobjs, r, renderer="chart"):
    """Every rendered variant, whatever its legacyIndexing value or cert mode, sends the
    validating webhook exactly what the kustomize base sends it (rayclusters, rayjobs and
    rayservices at CREATE and UPDATE: check_install holds each to dc.check_validating_rules),
    and the variants render every legacyIndexing value and every cert mode, so none goes
    unchecked. rendered: (variant name, objects, check_install keyword args)."""
    want = dc.validating_rules(kobjs) if kobjs is not None else None
    if want is not None:
        dc.check_validating_rules(want, "kustomize base: validating", r)
    legacy_seen, modes_seen = set(), set()
    for vname, objs, expect in rendered:
        rules = dc.validating_rules(objs)
        if want is not None:
            r.check(rules == want, f"{renderer} variant {vname!r}: validating rules {rules}, "
                                   f"want the kustomize base's {want}")
        deps = [o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"] == dc.NAME]
        conts = (deps[0] if deps else {}).get("spec", {}).get("template", {}).get("spec", {}) \
            .get("containers") or [{}]
        legacy_seen.add(dc.parse_args(conts[0].get("args", [])).get("legacy-indexing", "auto"))
        modes_seen.add(expect.get("cert_mode", "managed"))
    r.check(LEGACY_MODES <= legacy_seen,
            f"{renderer}: no variant renders legacyIndexing {sorted(LEGACY_MODES - legacy_seen)}, "
            "so its validating rules go unchecked")
    r.check(CERT_MODES <= modes_seen,
            f"{renderer}: no variant renders cert mode {sorted(CERT_MODES - modes_seen)}, "
            "so its validating rules go unchecked")
    print(f"{renderer}: {len(rendered)} variants (legacyIndexing {sorted(legacy_seen)}, cert "
          f"modes {sorted(modes_seen)}) compared with the kustomize base on what the validating "
          f"webhook is sent: {dc.VALIDATED_OPERATIONS} of {dc.VALIDATED_RESOURCES}")


def check_api_schemas(rendered, node, r):
    """Every rendered variant's objects against the Kubernetes API schemas (k8s_schema.py, one
    run of node for all of them). Returns False when node or its packages are missing."""
    batches = [(f"chart variant {name!r}", objs) for name, objs, _ in rendered]
    try:
        problems = k8s_schema.validate_many(batches, node=node)
    except k8s_schema.ToolMissing as e:
        print(f"SKIP: Kubernetes API schemas not checked: {e}")
        return False
    except RuntimeError as e:
        r.check(False, f"Kubernetes API schemas: {e}")
        return True
    for p in problems:
        r.check(False, f"Kubernetes API schema: {p}")
    print(f"Kubernetes API schemas: {len(batches)} variants checked, {len(problems)} problem(s)")
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--renderer", default="", help="helmrender, built in the build directory")
    ap.add_argument("--kubectl", default="kubectl")
    ap.add_argument("--node", default=None)
    args = ap.parse_args()
    if chart_render.missing(args.renderer):
        return SKIP
    chart_dir = os.path.join(args.root, CHART)
    r = dc.Report()
    values = load_chart(chart_dir, r)

    cov, rendered = Coverage(), []
    for v, res in zip(VARIANTS, render_variants(args.renderer, chart_dir, VARIANTS)):
        cov.add(v.name, res.report, r)
        objs = check_render(v, res, r)
        if objs is not None:
            rendered.append((v.name, objs, v.expect))
    cov.check(values, r)

    # Renders that must be identical: the defaults twice (nothing generated or looked up at
    # render time), selfSigned and managed.
    by_name = {name: objs for name, objs, _ in rendered}
    for other, objs in SAME_AS:
        r.check(objs == by_name.get(other), f"a render differs from variant {other!r}: "
                                            "the chart must render the same objects every time")
    r.check(len(SAME_AS) >= 2, "the same-render checks did not run")

    # The certManager values render exactly the kustomize base (which uses cert-manager), and
    # every variant validates what it validates.
    kobjs = kustomize_objects(args.root, args.kubectl, r)
    base_objs = by_name.get(KUSTOMIZE_VARIANT)
    # The kustomize base creates the Namespace, which the chart creates only when asked.
    ns_obj = [o for o in by_name.get("namespace.create in the release namespace ray-system", [])
              if o["kind"] == "Namespace"]
    if r.check(base_objs is not None and len(ns_obj) == 1,
               f"the {KUSTOMIZE_VARIANT!r} variant, or the Namespace namespace.create renders, "
               "did not render") and kobjs:
        compare_with_kustomize(base_objs + ns_obj, kobjs, r)
    check_validating_everywhere(rendered, kobjs, r)
    api_checked = check_api_schemas(rendered, args.node, r)
    status = r.finish("chart structure")
    if status == 0 and not api_checked:
        print("SKIP: everything else passed; the API schema check needs node (scripts/setup.sh)")
        return SKIP
    return status


if __name__ == "__main__":
    sys.exit(main())
