#!/usr/bin/env python3
"""deploy.chart_structure: a structural test of the Helm chart that needs no helm binary.

What it proves, and how:
  1. Chart.yaml is a valid v2 chart description.
  2. Every `.Values.x.y` the templates read (directly, or through a variable such as
     `$d := .Values.tpuWebhook.deployment` then `$d.bindPort`) exists in values.yaml, and every
     value in values.yaml is read by some template in some variant (no dead knobs).
  3. The templates are rendered by gotemplate.py, a strict renderer for the Go-template subset
     the chart uses (see its docstring: unknown functions or actions are errors, not guesses),
     for a list of value variants. Each variant's output must be YAML without duplicate keys and
     make a complete install (deploy_checks.check_install), or fail with the expected message
     (bad values must stop the install with a clear error).
  4. Together the variants take every branch of every if/with/range, including the helpers in
     _helpers.tpl, so every line of every template is rendered and parsed at least once.
  5. The default values render exactly the kustomize base (`kubectl kustomize deploy/manifests`):
     same kinds, names, namespaces, paths, ports, selectors and specs, apart from the labels
     only Helm adds and the image reference.
  6. Every variant that renders, whatever its legacyIndexing value or cert mode, gives the
     validating webhook the kustomize base's rules: rayclusters, rayjobs and rayservices at
     CREATE and UPDATE; and the variants render every legacyIndexing value and cert mode.
What it cannot prove: that Helm itself agrees with gotemplate.py. deploy.chart_helm checks
that with a real helm when one is installed, and compares the two renderers' output.

Usage: check_chart.py --root REPO_ROOT [--kubectl PATH]
"""
import argparse
import base64
import copy
import os
import re
import shutil
import subprocess
import sys

import yaml

import deploy_checks as dc
import gotemplate as gt

CHART = os.path.join("deploy", "helm", "kuberay-tpu-webhook")
EXISTING = {"ca.crt": "RVhJU1RJTkctQ0E=", "tls.crt": "RVhJU1RJTkctQ1JU", "tls.key": "RVhJU1RJTkctS0VZ"}


def merge(base, over):
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = v
    return out


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
    ns = idx[("Namespace", dc.NAMESPACE)]["metadata"]
    r.check(ns.get("annotations") == {"helm.sh/resource-policy": "keep"},
            f"Namespace annotations {ns.get('annotations')}")
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


def expect_self_signed(existing):
    def check(objs, idx, r):
        data = idx[("Secret", dc.SECRET)]["data"]
        if existing:
            r.check(data == EXISTING, "upgrade did not keep the Secret already in the cluster")
        else:
            ca = base64.b64decode(data["ca.crt"]).decode()
            r.check(ca == gt.STAND_IN_PEM["ca"], "Secret ca.crt is not the generated CA")
    return check


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
    r.check(container(idx)["securityContext"].get("runAsUser") == 1234, "containerSecurityContext")
    r.check(deployment(idx)["spec"]["template"]["spec"]["securityContext"].get("runAsUser") == 1234,
            "podSecurityContext")


def expect_monitor_brings_service(objs, idx, r):
    r.check(("Service", "kuberay-tpu-webhook-metrics") in idx and ("ServiceMonitor", dc.NAME) in idx,
            "serviceMonitor.enabled without service.enabled must render both")


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
    cert={"duration": "720h", "renewBefore": "240h"},
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


# (name, overrides, lookup stub, check_install keyword args or None, extra check or failure text)
VARIANTS = [
    ("defaults", {}, None, {}, expect_default_install),
    ("selfSigned", tw(cert={"mode": "selfSigned"}), None,
     {"cert_mode": "selfSigned", "ca_bundle": base64.b64encode(gt.STAND_IN_PEM["ca"].encode()).decode()},
     expect_self_signed(False)),
    ("selfSigned upgrade keeps the Secret", tw(cert={"mode": "selfSigned"}),
     {("v1", "Secret", dc.NAMESPACE, dc.SECRET): {"data": dict(EXISTING)}},
     {"cert_mode": "selfSigned", "ca_bundle": EXISTING["ca.crt"]}, expect_self_signed(True)),
    ("existingSecret", tw(cert={"mode": "existingSecret",
                                "existingSecret": {"name": "my-tls", "caBundle": "Q0E="}}), None,
     {"cert_mode": "existingSecret", "ca_bundle": "Q0E=", "secret_name": "my-tls"}, None),
    ("existingSecret without caBundle", tw(cert={"mode": "existingSecret",
                                                 "existingSecret": {"name": "my-tls"}}), None,
     None, "existingSecret.caBundle"),
    ("existingSecret without name", tw(cert={"mode": "existingSecret",
                                             "existingSecret": {"caBundle": "Q0E="}}), None,
     None, "existingSecret.name"),
    ("unknown cert mode", tw(cert={"mode": "vault"}), None, None, "tpuWebhook.cert.mode must be"),
    ("legacy off keeps 2 replicas and drops the Lease Role", tw(legacyIndexing="off"), None,
     {"expect_defaults": False, "replicas": 2}, expect_legacy("off", 2)),
    ("legacy on with 3 replicas", tw(legacyIndexing="on", deployment={"replicas": 3}), None,
     {"expect_defaults": False, "replicas": 3}, expect_legacy("on", 3)),
    ("legacy auto with 3 replicas", tw(deployment={"replicas": 3}), None,
     {"expect_defaults": False, "replicas": 3}, expect_legacy("auto", 3)),
    ("one replica: no PodDisruptionBudget to block drains", tw(deployment={"replicas": 1}), None,
     {"expect_defaults": False, "replicas": 1}, expect_legacy("auto", 1, pdb=False)),
    ("legacy: YAML boolean false means off", tw(legacyIndexing=False), None,
     {"expect_defaults": False, "replicas": 2}, expect_legacy("off", 2)),
    ("legacy: YAML boolean true means on", tw(legacyIndexing=True), None,
     {"expect_defaults": False, "replicas": 2}, expect_legacy("on", 2)),
    ("legacy: unknown value", tw(legacyIndexing="sometimes"), None, None,
     "tpuWebhook.legacyIndexing must be"),
    ("no namespace name", tw(namespace={"name": ""}), None, None, "tpuWebhook.namespace.name"),
    ("every optional value set", EVERYTHING, None,
     {"expect_defaults": False, "namespace_created": False}, expect_everything),
    ("metrics Service only, namespace labels, security contexts",
     tw(namespace={"labels": {"pod-security.kubernetes.io/enforce": "restricted"}},
        metrics={"service": {"enabled": True}},
        deployment={"containerSecurityContext": {
            "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
            "runAsNonRoot": True, "runAsUser": 1234, "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"}},
            "podSecurityContext": {"runAsNonRoot": True, "runAsUser": 1234,
                                   "seccompProfile": {"type": "RuntimeDefault"}}}),
     None, {}, expect_metrics_service_only),
    ("ServiceMonitor alone brings its Service", tw(metrics={"serviceMonitor": {"enabled": True}}),
     None, {}, expect_monitor_brings_service),
    ("NetworkPolicy: the API server's ranges only",
     tw(networkPolicy={"enabled": True, "apiServerCIDRs": API_SERVER_CIDRS}), None,
     {"network_policy": {"https": ip_blocks(API_SERVER_CIDRS), "health": []}},
     expect_network_policy(dc.BIND_PORT, dc.HEALTH_PORT)),
    ("NetworkPolicy: every source, ports moved",
     tw(networkPolicy={"enabled": True, "apiServerCIDRs": API_SERVER_CIDRS[:1],
                       "apiServerPeers": [KONNECTIVITY], "healthPeers": PROMETHEUS},
        deployment={"bindPort": 10443, "healthPort": 10081}), None,
     {"expect_defaults": False, "replicas": 2,
      "network_policy": {"https": ip_blocks(API_SERVER_CIDRS[:1]) + [KONNECTIVITY],
                         "health": PROMETHEUS}},
     expect_network_policy(10443, 10081)),
    ("NetworkPolicy: peers instead of ranges",
     tw(networkPolicy={"enabled": True, "apiServerPeers": [KONNECTIVITY]}), None,
     {"network_policy": {"https": [KONNECTIVITY], "health": []}},
     expect_network_policy(dc.BIND_PORT, dc.HEALTH_PORT)),
    ("NetworkPolicy that would shut out the API server", tw(networkPolicy={"enabled": True}),
     None, None, "tpuWebhook.networkPolicy.enabled needs tpuWebhook.networkPolicy.apiServerCIDRs"),
]


def value_refs(text):
    """`.Values.a.b` paths read by a template, resolving `$v := .Values.x` aliases."""
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


def split_docs(text):
    return [d for d in re.split(r"(?m)^---[ \t]*$", text) if d.strip()]


def render(files, defines, chart, values, lookup, coverage, used):
    ctx = {"Values": gt.wrap_values(values),
           "Release": {"Name": "kuberay-tpu-webhook", "Namespace": "default", "Service": "Helm",
                       "IsInstall": True, "IsUpgrade": False},
           "Chart": {"Name": chart["name"], "Version": chart["version"],
                     "AppVersion": chart.get("appVersion", "")}}
    rnd = gt.Renderer(defines, ctx, lookup=lookup, coverage=coverage, used=used)
    out = {}
    for name, nodes in files.items():
        out[name] = rnd.render_nodes(nodes, ctx, [{"$": ctx}])
    return out


def load_chart(chart_dir, r):
    """Checks Chart.yaml and parses every template. Returns (chart, values, files, defines)."""
    with open(os.path.join(chart_dir, "Chart.yaml")) as f:
        chart = yaml.safe_load(f)
    r.check(chart.get("apiVersion") == "v2", "Chart.yaml apiVersion is not v2")
    r.check(chart.get("name") == os.path.basename(chart_dir), "Chart.yaml name is not the directory's")
    r.check(re.fullmatch(r"\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?", str(chart.get("version", ""))),
            f"Chart.yaml version {chart.get('version')!r} is not SemVer")
    r.check(isinstance(chart.get("appVersion"), str), "Chart.yaml appVersion must be a quoted string")
    r.check(chart.get("type", "application") == "application", "Chart.yaml type")
    with open(os.path.join(chart_dir, "values.yaml")) as f:
        values = yaml.load(f, Loader=dc.UniqueKeyLoader)

    tdir = os.path.join(chart_dir, "templates")
    files, defines, sources = {}, {}, {}
    for name in sorted(os.listdir(tdir)):
        r.check(name.endswith((".yaml", ".tpl")) or name == "NOTES.txt",
                f"templates/{name}: Helm renders only .yaml/.yml/.tpl/.txt here")
        with open(os.path.join(tdir, name)) as f:
            src = f.read()
        sources[name] = src
        try:
            nodes, defs = gt.parse(src, f"templates/{name}")
        except gt.TemplateError as e:
            r.check(False, str(e))
            continue
        for d in defs:
            r.check(d not in defines, f"template {d!r} defined twice")
        defines.update(defs)
        if name.startswith("_"):
            r.check(all(n.kind == "text" and not n.text.strip() for n in nodes),
                    f"templates/{name}: a partial must only define templates")
        else:
            files[name] = nodes
        for ref in sorted(value_refs(src)):
            r.check(resolves(values, ref), f"templates/{name}: .Values.{ref} is not in values.yaml")
    for name, src in sources.items():
        for inc in re.findall(r'include\s+"([^"]+)"', src):
            r.check(inc in defines, f"templates/{name}: include of undefined template {inc!r}")
    return chart, values, files, defines


def objects_of(rendered, where, r):
    """The objects of rendered template files (NOTES.txt aside), each document parsed strictly."""
    objs = []
    for fname, text in rendered.items():
        if fname == "NOTES.txt":
            r.check(bool(text.strip()), f"{where}: NOTES.txt renders empty")
            continue
        for i, doc in enumerate(split_docs(text)):
            try:
                objs += dc.load_objects(doc, f"{where} templates/{fname} document {i + 1}")
            except AssertionError as e:
                r.check(False, f"{e}\n--- rendered text ---\n{doc}")
    return objs


def check_variant(vname, objs, expect, extra, r):
    """Holds one variant's objects to check_install and the variant's own checks."""
    sub = dc.Report()
    try:
        idx = dc.check_install(objs, sub, helm=True, **expect)
        if extra and not sub.failures:
            extra(objs, idx, sub)
    except (KeyError, TypeError, AttributeError, IndexError, ValueError) as e:
        sub.check(False, f"objects too malformed to check ({type(e).__name__}: {e})")
    for f in sub.failures:
        r.check(False, f"variant {vname!r}: {f}")
    print(f"variant {vname!r}: {len(objs)} objects, {len(sub.failures)} problem(s)")


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
CERT_MODES = {"certManager", "selfSigned", "existingSecret"}


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
        modes_seen.add(expect.get("cert_mode", "certManager"))
    r.check(LEGACY_MODES <= legacy_seen,
            f"{renderer}: no variant renders legacyIndexing {sorted(LEGACY_MODES - legacy_seen)}, "
            "so its validating rules go unchecked")
    r.check(CERT_MODES <= modes_seen,
            f"{renderer}: no variant renders cert mode {sorted(CERT_MODES - modes_seen)}, "
            "so its validating rules go unchecked")
    print(f"{renderer}: {len(rendered)} variants (legacyIndexing {sorted(legacy_seen)}, cert "
          f"modes {sorted(modes_seen)}) compared with the kustomize base on what the validating "
          f"webhook is sent: {dc.VALIDATED_OPERATIONS} of {dc.VALIDATED_RESOURCES}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--kubectl", default="kubectl")
    args = ap.parse_args()
    chart_dir = os.path.join(args.root, CHART)
    r = dc.Report()
    chart, values, files, defines = load_chart(chart_dir, r)

    coverage, used = set(), set()
    default_objs = None
    rendered = []
    for vname, over, lookup, expect, extra in VARIANTS:
        try:
            out = render(files, defines, chart, merge(values, over), lookup, coverage, used)
        except gt.RenderFail as e:
            if expect is None and extra in str(e):
                print(f"variant {vname!r}: refused as expected: {e}")
            else:
                r.check(False, f"variant {vname!r}: render failed: {e}")
            continue
        except gt.TemplateError as e:
            r.check(False, f"variant {vname!r}: {e}")
            continue
        if expect is None:
            r.check(False, f"variant {vname!r}: rendered, but should fail with {extra!r}")
            continue
        objs = objects_of(out, f"variant {vname!r}", r)
        check_variant(vname, objs, expect, extra, r)
        rendered.append((vname, objs, expect))
        if vname == "defaults":
            default_objs = objs

    # Every branch rendered by some variant; every value read by some template.
    points = set()
    for nodes in files.values():
        points |= set(gt.branch_points(nodes))
    for d in defines.values():
        points |= set(gt.branch_points(d.body))
    missed = sorted(points - coverage, key=str)
    r.check(not missed, "branches no variant renders (add a variant): "
            + ", ".join(f"{w} {'else' if b == 'else' else 'branch ' + str(b)}" for w, b in missed))
    # A default leaf counts as read when it, or something a variant put under it, was read.
    unused = sorted(p for p in gt.leaf_paths(values)
                    if not any(u == p or u.startswith(p + ".") for u in used))
    r.check(not unused, f"values no template reads: {unused}")

    # The default values render exactly the kustomize base, and every variant validates what it
    # validates.
    kobjs = kustomize_objects(args.root, args.kubectl, r)
    if r.check(default_objs is not None, "the defaults variant did not render"):
        if kobjs is not None:
            compare_with_kustomize(default_objs, kobjs, r)
    check_validating_everywhere(rendered, kobjs, r)
    return r.finish("chart structure")


if __name__ == "__main__":
    sys.exit(main())
