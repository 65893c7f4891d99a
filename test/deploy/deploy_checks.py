"""Checks shared by the kustomize and Helm tests: does a set of Kubernetes objects make a
complete, least-privilege, drop-in install of kuberay-tpu-webhook?

Every expectation below is a fact about the binary or about the Go webhook it replaces; they
are written once here so that the kustomize base and every chart variant are held to the same
ones.
"""

import ipaddress
import re

import yaml

# The binary's defaults (cmd/webhook flags). --bind-address's :9443 is what scripts/run-dev.sh
# serves locally; installs pass --bind-address=:INSTALL_BIND_PORT.
BINARY_BIND_PORT = 9443
HEALTH_PORT = 8081
# The HTTPS port of the kustomize base and of the chart's defaults: a GKE private cluster's
# default firewall rule lets the control plane reach the nodes on TCP 443 and 10250 only
# (PRIVATE_CLUSTER_PORTS); 10250 needs no privilege.
INSTALL_BIND_PORT = 10250
PRIVATE_CLUSTER_PORTS = {443, 10250}
# A container port below 1024 is bound without a capability through this namespaced sysctl, safe
# (allowed by kubelet without configuration) since Kubernetes 1.22.
UNPRIVILEGED_PORT_SYSCTL = "net.ipv4.ip_unprivileged_port_start"
# The namespace label that opts a namespace out of both webhooks.
IGNORE_LABEL = "kuberay-tpu-webhook.ray.io/ignore"
# The mutating webhook's matchCondition (CEL) sending only TPU Pods; its expression is evaluated
# against Pods by check_match_conditions.py.
TPU_CONDITION = "tpu-pods-only"
# Priority classes kube-apiserver may confine to kube-system unless a ResourceQuota names them.
CRITICAL_CLASSES = {"system-cluster-critical", "system-node-critical"}
DEFAULT_PRIORITY_CLASS = "system-cluster-critical"
CRITICAL_QUOTA = "kuberay-tpu-webhook-critical-pods"
CERT_DIR = "/etc/kuberay-tpu-webhook/tls"
BINARY_FLAGS = {
    "bind-address", "health-address", "tls-cert-file", "tls-private-key-file", "server-cert",
    "server-key", "kube-config-path", "legacy-indexing", "reservation-ttl", "claim-timeout",
    "namespace", "kuberay-version",
    "tpu-process-port-base", "megascale-port-base", "device-plugin-port", "max-body-bytes",
    "read-timeout", "shutdown-timeout", "threads", "max-connections", "max-header-bytes",
    "idle-timeout", "memory-limit", "log-format", "v",
    "cert-mode", "cert-secret-name", "cert-service-name", "mutating-webhook-config-name",
    "validating-webhook-config-name", "cert-validity", "cert-ca-validity", "cert-renew-before",
}
# The Go webhook's object names, kept so that ours replaces it in place.
NAMESPACE = "ray-system"
NAME = "kuberay-tpu-webhook"
SECRET = "kuberay-tpu-webhook-certs"
CLUSTER_ROLE = "kuberay-tpu-webhook-pod-reader"
MUTATING = "kuberay-tpu-mutating-webhook-cfg"
VALIDATING = "kuberay-tpu-validating-webhook-cfg"
ISSUER = "selfsigned-issuer"
CERTIFICATE = "kuberay-tpu-webhook-certs"
SELECTOR = {"app": "kuberay-tpu-webhook"}
EXCLUDED_NAMESPACES = {"kube-system", "kube-node-lease"}
RBAC = {("", r, v) for r in ("pods", "nodes", "services") for v in ("get", "list", "watch")}
# Legacy placement's slot claims: Leases in the webhook's own namespace, nothing else.
LEASE_ROLE = "kuberay-tpu-webhook-leases"
LEASE_RBAC = {("coordination.k8s.io", "leases", v)
              for v in ("get", "list", "watch", "create", "update", "delete")}
# What the validating webhook is sent: RayClusters, and the RayJobs and RayServices whose embedded
# RayCluster spec (spec.rayClusterSpec, spec.rayClusterConfig) KubeRay generates a RayCluster
# from, at CREATE and UPDATE; in one rule, ray.io/v1, namespaced, for every install variant.
VALIDATED_RESOURCES = ["rayclusters", "rayjobs", "rayservices"]
VALIDATED_OPERATIONS = ["CREATE", "UPDATE"]
# The binary's --claim-timeout default; it must stay inside the mutating webhook's timeout.
CLAIM_TIMEOUT_DEFAULT = 3.0
# The Downward API env the binary reads: its namespace (where the Leases live) and its name.
POD_ENV = {"POD_NAMESPACE": "metadata.namespace", "POD_NAME": "metadata.name"}
# --memory-limit comes from the container's own limits.memory through this Downward API variable,
# so the in-flight request budget (three quarters of it) follows the resources.
MEMORY_ENV = "WEBHOOK_MEMORY_LIMIT"
MEMORY_ARG = f"$({MEMORY_ENV})"
# The smallest --memory-limit the binary accepts (32Mi).
MIN_MEMORY_LIMIT = 32 << 20
# Managed certificates (--cert-mode=managed): a Role for the one Secret (get and update by name;
# create cannot be limited by name) and a ClusterRole for the two webhook configurations, by name.
CERT_ROLE = "kuberay-tpu-webhook-certs"
CERT_ROLE_RBAC = {("", "secrets", "get", SECRET), ("", "secrets", "update", SECRET),
                  ("", "secrets", "create", None)}
CERT_CLUSTER_RBAC = {("admissionregistration.k8s.io", res, v, name)
                     for res, name in (("mutatingwebhookconfigurations", MUTATING),
                                       ("validatingwebhookconfigurations", VALIDATING))
                     for v in ("get", "update", "patch")}
ROLLING_UPDATE = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}

CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding",
                  "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}


class UniqueKeyLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """A YAML loader that refuses duplicate mapping keys (PyYAML keeps the last silently;
    kubectl and Helm's parsers reject or mangle them). libyaml's parser when PyYAML has it (the
    constructor, and so this check, is the same Python code either way): the deploy tests parse
    every chart variant, many times over in deploy.checks_catch_breakage."""


def _construct_mapping(loader, node, deep=False):
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep)


UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_objects(text, where):
    """Parses a multi-document YAML stream into objects, refusing duplicate keys."""
    try:
        docs = [d for d in yaml.load_all(text, Loader=UniqueKeyLoader) if d is not None]
    except yaml.YAMLError as e:
        raise AssertionError(f"{where}: not valid YAML: {e}") from None
    for d in docs:
        if not isinstance(d, dict) or not d.get("kind") or not d.get("apiVersion") \
                or not (d.get("metadata") or {}).get("name"):
            raise AssertionError(f"{where}: a document without apiVersion/kind/metadata.name: "
                                 f"{str(d)[:120]}")
    return docs


class Report:
    """Collects failures so one run shows all of them."""

    def __init__(self):
        self.failures = []

    def check(self, cond, msg):
        if not cond:
            self.failures.append(msg)
        return cond

    def finish(self, what):
        for f in self.failures:
            print(f"FAIL: {f}")
        if self.failures:
            print(f"{what}: {len(self.failures)} problem(s)")
            return 1
        print(f"{what}: ok")
        return 0


def index(objs, r):
    out = {}
    for o in objs:
        key = (o["kind"], o["metadata"]["name"])
        r.check(key not in out, f"{key[0]} {key[1]} declared twice")
        out[key] = o
    return out


def parse_args(args):
    """--name=value args into a dict; flags must be known to the binary and Go style. Args not
    in that form are listed under "__bad__", flags given twice (the last silently wins) under
    "__twice__"."""
    out = {}
    for a in args:
        if not isinstance(a, str) or not a.startswith("--") or "=" not in a:
            out.setdefault("__bad__", []).append(a)
            continue
        k, v = a[2:].split("=", 1)
        if k in out:
            out.setdefault("__twice__", []).append(k)
        out[k] = v
    return out


QUANTITY_SUFFIXES = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15,
                     "E": 10**18, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50,
                     "Ei": 2**60}


def quantity_bytes(text):
    """Bytes of a Kubernetes memory quantity ("256Mi", "1G", "268435456", "1e9"), rounded up as
    the Downward API reports limits.memory with the default divisor 1; None when it is not a
    quantity."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(?:([kMGTPE]i?)|[eE](\d+))?", str(text))
    if not m or (m.group(2) or "") == "ki":
        return None
    number, suffix, exp = m.groups()
    whole, _, frac = number.partition(".")
    scale = QUANTITY_SUFFIXES.get(suffix or "")
    if scale is None:
        return None
    if exp is not None:
        scale = 10 ** int(exp)
    num, den = (int(whole + frac) * scale), 10 ** len(frac)
    return -(-num // den)


def go_duration(text):
    """Seconds of a Go duration such as 3s, 500ms, 1m30s; None when it is not one."""
    units = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)", text or "")
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * units[u] for n, u in parts)


def port_of(addr):
    return int(addr.rsplit(":", 1)[1])


def subset(small, big):
    return all(big.get(k) == v for k, v in (small or {}).items())


def excluded_namespaces(ns_selector):
    """The namespaces a namespaceSelector keeps out via kubernetes.io/metadata.name NotIn."""
    out = set()
    for e in (ns_selector or {}).get("matchExpressions", []):
        if e.get("key") == "kubernetes.io/metadata.name" and e.get("operator") == "NotIn":
            out |= set(e.get("values", []))
    return out


def check_install(objs, r, cert_mode="managed", expect_defaults=True, namespace_created=True,
                  ca_bundle=None, secret_name=SECRET, replicas=None, helm=False,
                  network_policy=None, elsewhere=None, namespace=NAMESPACE, tpu_pods_only=True):
    """Checks one rendered install. expect_defaults: also pin the shipped defaults (2 replicas,
    --legacy-indexing=auto, PodDisruptionBudget, mutating Fail, validating Ignore, 5 s, no
    NetworkPolicy unless network_policy says otherwise); cert_mode: managed | certManager | existingSecret; replicas: the
    Deployment's replicas (2 when expect_defaults, unchecked otherwise); helm: the chart's own
    additions (the created Namespace's helm.sh/resource-policy: keep); network_policy: None when
    no NetworkPolicy may be rendered, else the sources it must allow, as
    {"https": [peer, ...], "health": [peer, ...]} (check_network_policy); elsewhere: the
    namespaced objects that belong in another namespace than NAMESPACE, {(kind, name): namespace}
    (a Grafana dashboard ConfigMap in Grafana's namespace); namespace: the webhook's namespace,
    which every namespaced object, reference and DNS name must name; tpu_pods_only: whether the
    mutating webhook carries the matchCondition that sends only TPU Pods."""
    NAMESPACE = namespace  # every check below is about this install's namespace
    if replicas is None and expect_defaults:
        replicas = 2
    idx = index(objs, r)
    kinds = {k for k, _ in idx}

    def get(kind, name):
        o = idx.get((kind, name))
        r.check(o is not None, f"missing {kind} {name}")
        return o or {}

    # Namespaces: every namespaced object in the webhook's (unless elsewhere says otherwise),
    # cluster-scoped ones without one.
    for (kind, name), o in idx.items():
        ns = o["metadata"].get("namespace")
        if kind in CLUSTER_SCOPED:
            r.check(ns is None, f"{kind} {name} is cluster-scoped but has namespace {ns}")
        else:
            want_ns = (elsewhere or {}).get((kind, name), NAMESPACE)
            r.check(ns == want_ns, f"{kind} {name} in namespace {ns!r}, want {want_ns}")
    if namespace_created:
        ns_obj = get("Namespace", NAMESPACE)
        if helm:
            keep = (ns_obj.get("metadata", {}).get("annotations") or {}).get("helm.sh/resource-policy")
            r.check(keep == "keep", f"Namespace {NAMESPACE}: helm.sh/resource-policy is {keep!r}, "
                                    "want 'keep' (helm uninstall must not delete the namespace)")
    else:
        r.check(("Namespace", NAMESPACE) not in idx, "Namespace created although disabled")

    # RBAC: the ClusterRole exactly get/list/watch on pods, nodes, services; with legacy placement
    # also a Role in the webhook's namespace exactly get/list/create/update/delete on Leases;
    # each bound to our ServiceAccount and nothing else.
    get("ServiceAccount", NAME)
    dep = get("Deployment", NAME)
    conts = dep.get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])
    flags = parse_args((conts[0] if conts else {}).get("args", []))
    legacy = flags.get("legacy-indexing", "auto")  # the binary's default
    r.check(legacy in ("on", "off", "auto"), f"--legacy-indexing={legacy}")
    if expect_defaults:
        r.check(legacy == "auto", f"default --legacy-indexing={legacy}, want auto")
    managed = cert_mode == "managed"
    r.check((flags.get("cert-mode", "files") == "managed") == managed,
            f"--cert-mode={flags.get('cert-mode')} in {cert_mode} mode")
    want_roles = [("ClusterRole", CLUSTER_ROLE)] + ([("Role", LEASE_ROLE)] if legacy != "off" else [])
    want_roles += [("Role", CERT_ROLE), ("ClusterRole", CERT_ROLE)] if managed else []
    roles = [(o["kind"], o["metadata"]["name"]) for o in objs if o["kind"] in ("Role", "ClusterRole")]
    r.check(sorted(roles) == sorted(want_roles),
            f"roles {sorted(roles)}, want exactly {sorted(want_roles)} (legacy-indexing {legacy})")

    def granted_by(role, what):
        granted = set()
        for rule in role.get("rules", []):
            r.check(set(rule) <= {"apiGroups", "resources", "verbs"},
                    f"{what} rule with more than apiGroups/resources/verbs: {rule}")
            for g in rule.get("apiGroups", []):
                for res in rule.get("resources", []):
                    for v in rule.get("verbs", []):
                        granted.add((g, res, v))
        return granted

    def check_binding(kind, name, role_kind):
        b = get(kind, name)
        r.check(b.get("roleRef") == {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind,
                                     "name": name}, f"{kind} {name} roleRef {b.get('roleRef')}")
        r.check(b.get("subjects") == [{"kind": "ServiceAccount", "name": NAME,
                                       "namespace": NAMESPACE}],
                f"{kind} {name} subjects {b.get('subjects')}")

    granted = granted_by(get("ClusterRole", CLUSTER_ROLE), f"ClusterRole {CLUSTER_ROLE}")
    r.check(granted == RBAC, f"ClusterRole grants {sorted(granted)}, want exactly {sorted(RBAC)}")
    check_binding("ClusterRoleBinding", CLUSTER_ROLE, "ClusterRole")
    want_bindings = [("ClusterRoleBinding", CLUSTER_ROLE)]
    if legacy != "off":
        role = get("Role", LEASE_ROLE)
        r.check(role.get("metadata", {}).get("namespace") == NAMESPACE,
                f"Role {LEASE_ROLE} not in the webhook's namespace {NAMESPACE}")
        lease = granted_by(role, f"Role {LEASE_ROLE}")
        r.check(lease == LEASE_RBAC,
                f"Role {LEASE_ROLE} grants {sorted(lease)}, want exactly {sorted(LEASE_RBAC)}")
        check_binding("RoleBinding", LEASE_ROLE, "Role")
        want_bindings.append(("RoleBinding", LEASE_ROLE))
    if managed:
        check_cert_rbac(get("Role", CERT_ROLE), get("ClusterRole", CERT_ROLE), r, namespace)
        check_binding("RoleBinding", CERT_ROLE, "Role")
        check_binding("ClusterRoleBinding", CERT_ROLE, "ClusterRole")
        want_bindings += [("RoleBinding", CERT_ROLE), ("ClusterRoleBinding", CERT_ROLE)]
        for flag, want in (("cert-secret-name", SECRET), ("cert-service-name", NAME),
                           ("mutating-webhook-config-name", MUTATING),
                           ("validating-webhook-config-name", VALIDATING)):
            r.check(flags.get(flag, want) == want, f"--{flag}={flags.get(flag)}, want {want}")
    bindings = [(o["kind"], o["metadata"]["name"]) for o in objs
                if o["kind"] in ("RoleBinding", "ClusterRoleBinding")]
    r.check(sorted(bindings) == sorted(want_bindings),
            f"bindings {sorted(bindings)}, want exactly {sorted(want_bindings)}")

    # Deployment.
    spec = dep.get("spec", {})
    pod = spec.get("template", {}).get("spec", {})
    pod_labels = spec.get("template", {}).get("metadata", {}).get("labels", {})
    r.check(spec.get("selector", {}).get("matchLabels") == SELECTOR,
            f"Deployment selector {spec.get('selector')}, want the Go webhook's {SELECTOR}")
    r.check(subset(SELECTOR, pod_labels), "Pod template lacks the selector labels")
    r.check(pod_labels.get("app.kubernetes.io/name") != "kuberay",
            "the webhook's own Pods would match its objectSelector")
    r.check(pod.get("serviceAccountName") == NAME, f"serviceAccountName {pod.get('serviceAccountName')}")
    r.check(not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC"),
            "host namespaces used")
    conts = pod.get("containers", [])
    r.check(len(conts) == 1, f"want one container, got {len(conts)}")
    c = conts[0] if conts else {}
    r.check("__bad__" not in flags, f"args not in --name=value form: {flags.get('__bad__')}")
    r.check("__twice__" not in flags, f"args given twice (the last one wins): {flags.get('__twice__')}")
    unknown = set(flags) - BINARY_FLAGS - {"__bad__", "__twice__"}
    r.check(not unknown, f"args the binary does not have: {sorted(unknown)}")
    r.check(not c.get("command"), "command overrides the image's entrypoint")
    bind = port_of(flags.get("bind-address", f":{BINARY_BIND_PORT}"))
    health = port_of(flags.get("health-address", f":{HEALTH_PORT}"))
    ports = {p.get("name"): p.get("containerPort") for p in c.get("ports", [])}
    r.check(ports.get("https") == bind, f"container port https {ports.get('https')} != --bind-address {bind}")
    r.check(ports.get("health") == health, f"container port health {ports.get('health')} != --health-address {health}")
    if expect_defaults:
        r.check(bind == INSTALL_BIND_PORT and health == HEALTH_PORT,
                f"ports {bind}/{health}, want {INSTALL_BIND_PORT} (a port a GKE private cluster's "
                f"firewall opens to the control plane: {sorted(PRIVATE_CLUSTER_PORTS)}) and "
                f"{HEALTH_PORT}")

    def probe_port(p):
        port = p.get("httpGet", {}).get("port")
        return ports.get(port) if isinstance(port, str) else port

    for name, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        p = c.get(name) or {}
        r.check(p.get("httpGet", {}).get("path") == path, f"{name} path {p.get('httpGet')}, want {path}")
        r.check(probe_port(p) == health, f"{name} not on the health port {health}")
        r.check(p.get("httpGet", {}).get("scheme", "HTTP") == "HTTP", f"{name} scheme not HTTP")
    res = c.get("resources", {})
    for part in ("requests", "limits"):
        for what in ("cpu", "memory"):
            r.check(what in res.get(part, {}), f"resources.{part}.{what} missing")

    # Security context: non-root, read-only root fs, no escalation, drop ALL, seccomp.
    psc, csc = pod.get("securityContext") or {}, c.get("securityContext") or {}
    r.check(psc.get("runAsNonRoot") is True or csc.get("runAsNonRoot") is True, "runAsNonRoot not true")
    for sc in (psc, csc):
        r.check(sc.get("runAsUser", 1) != 0, "runAsUser 0")
    r.check(csc.get("readOnlyRootFilesystem") is True, "readOnlyRootFilesystem not true")
    r.check(csc.get("allowPrivilegeEscalation") is False, "allowPrivilegeEscalation not false")
    r.check(csc.get("privileged") is not True, "privileged container")
    r.check("ALL" in (csc.get("capabilities") or {}).get("drop", []), "capabilities do not drop ALL")
    r.check(not (csc.get("capabilities") or {}).get("add"), "capabilities added")
    check_port_privilege(psc, csc, bind, r)
    seccomp = (csc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type")
    r.check(seccomp == "RuntimeDefault", f"seccompProfile {seccomp}, want RuntimeDefault")
    r.check(not [v for v in pod.get("volumes", []) if "hostPath" in v], "hostPath volume")

    # Certificates: files at the binary's default paths, from the mounted Secret.
    r.check(flags.get("tls-cert-file", f"{CERT_DIR}/tls.crt") == f"{CERT_DIR}/tls.crt"
            and flags.get("tls-private-key-file", f"{CERT_DIR}/tls.key") == f"{CERT_DIR}/tls.key",
            "certificate files not at the binary's default paths")
    r.check("server-cert" not in flags and "server-key" not in flags,
            "certificate passed in args (visible in the Pod spec)")
    mounts = {m["name"]: m for m in c.get("volumeMounts", [])}
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    tls_vol = [n for n, m in mounts.items() if m.get("mountPath") == CERT_DIR]
    if managed:
        r.check(not tls_vol and not vols and "tls-cert-file" not in flags,
                "managed mode: a certificate file or volume, though the webhook keeps its own")
    else:
        r.check(len(tls_vol) == 1, f"nothing mounted at {CERT_DIR}")
    if tls_vol:
        r.check(mounts[tls_vol[0]].get("readOnly") is True, "certificate mount not read-only")
        r.check(vols.get(tls_vol[0], {}).get("secret", {}).get("secretName") == secret_name,
                f"certificate volume is not Secret {secret_name}: {vols.get(tls_vol[0])}")

    # Downward API env: the namespace the Leases live in and the replica's name.
    env = {e.get("name"): e for e in c.get("env", [])}
    for var, field in POD_ENV.items():
        e = env.get(var)
        ref = ((e or {}).get("valueFrom") or {}).get("fieldRef") or {}
        r.check(e is not None and "value" not in e and ref.get("fieldPath") == field
                and ref.get("apiVersion", "v1") == "v1",
                f"env {var} is {e}, want valueFrom.fieldRef.fieldPath {field}")
    r.check("namespace" not in flags or flags["namespace"] == NAMESPACE,
            f"--namespace={flags.get('namespace')} is not the webhook's namespace {NAMESPACE}")
    check_memory_limit(c, flags, r)

    # NetworkPolicy: optional, never by default.
    policies = [o for o in objs if o["kind"] == "NetworkPolicy"]
    if network_policy is None:
        r.check(not policies, f"NetworkPolicy rendered although not enabled: "
                              f"{[o['metadata']['name'] for o in policies]}")
    elif r.check(len(policies) == 1, f"want one NetworkPolicy, got {len(policies)}"):
        check_network_policy(policies[0], r, pod_labels, bind, health, network_policy)

    # Replicas share legacy placement's claims: any count, always rolled without downtime.
    strategy = spec.get("strategy", {})
    r.check(strategy == ROLLING_UPDATE,
            f"strategy {strategy}, want {ROLLING_UPDATE} (a new Pod ready before an old one stops)")
    if replicas is not None:
        r.check(spec.get("replicas") == replicas, f"replicas {spec.get('replicas')}, want {replicas}")
    pdb = idx.get(("PodDisruptionBudget", NAME))
    if expect_defaults:
        r.check(pdb is not None, "missing PodDisruptionBudget")
    if pdb:
        pspec = pdb.get("spec", {})
        r.check(pspec.get("selector", {}).get("matchLabels") == SELECTOR, "PDB selector")
        r.check("maxUnavailable" not in pspec, "PDB sets maxUnavailable; want minAvailable")
        if expect_defaults:
            r.check(pspec.get("minAvailable") == 1, f"PDB minAvailable {pspec.get('minAvailable')}, "
                                                   "want 1")
        r.check(isinstance(pspec.get("minAvailable"), int)
                and 1 <= pspec["minAvailable"] < (spec.get("replicas") or 0),
                f"PDB minAvailable {pspec.get('minAvailable')} with {spec.get('replicas')} replicas: "
                "drains would block or evict every webhook Pod")

    check_priority(pod, idx, NAMESPACE, r, expect_defaults)
    check_spread(pod, r, expect_defaults)

    # Service: kube-apiserver calls NAME.<namespace>.svc:443, which reaches the HTTPS port.
    svc = get("Service", NAME)
    r.check(svc.get("spec", {}).get("selector") == SELECTOR, f"Service selector {svc.get('spec', {}).get('selector')}")
    r.check(subset(svc.get("spec", {}).get("selector"), pod_labels), "Service selects no webhook Pod")
    sports = svc.get("spec", {}).get("ports", [])
    r.check(len(sports) == 1, "Service should expose only the HTTPS port")
    sp = sports[0] if sports else {}
    target = sp.get("targetPort")
    target = ports.get(target) if isinstance(target, str) else target
    r.check(target == bind, f"Service targets {sp.get('targetPort')}, not the HTTPS port {bind}")
    svc_port = sp.get("port")
    if expect_defaults:
        r.check(svc_port == 443, f"Service port {svc_port}, want 443 (the Go webhook's)")

    # Webhook configurations.
    def one_hook(kind, name, path):
        cfg = get(kind, name)
        hooks = cfg.get("webhooks", [])
        r.check(len(hooks) == 1, f"{name}: want one webhook, got {len(hooks)}")
        h = hooks[0] if hooks else {}
        cc = h.get("clientConfig", {})
        r.check("url" not in cc, f"{name}: url instead of service")
        s = cc.get("service", {})
        r.check(s.get("name") == NAME and s.get("namespace") == NAMESPACE and s.get("path") == path,
                f"{name}: calls {s}, want {NAME}.{NAMESPACE} {path}")
        r.check(s.get("port", 443) == svc_port, f"{name}: port {s.get('port')} != Service port {svc_port}")
        r.check(h.get("admissionReviewVersions") == ["v1"], f"{name}: admissionReviewVersions")
        r.check(h.get("failurePolicy") in ("Fail", "Ignore"), f"{name}: failurePolicy not explicit")
        r.check(isinstance(h.get("timeoutSeconds"), int) and 1 <= h["timeoutSeconds"] <= 30,
                f"{name}: timeoutSeconds {h.get('timeoutSeconds')}")
        if expect_defaults:
            r.check(h.get("timeoutSeconds") == 5, f"{name}: default timeoutSeconds not 5")
        r.check(EXCLUDED_NAMESPACES <= excluded_namespaces(h.get("namespaceSelector")),
                f"{name}: namespaceSelector does not exclude {sorted(EXCLUDED_NAMESPACES)}")
        ignore = {"key": IGNORE_LABEL, "operator": "DoesNotExist"}
        r.check(ignore in (h.get("namespaceSelector") or {}).get("matchExpressions", []),
                f"{name}: namespaceSelector does not leave out namespaces labelled {IGNORE_LABEL}")
        ann = cfg.get("metadata", {}).get("annotations") or {}
        inject = ann.get("cert-manager.io/inject-ca-from")
        if cert_mode == "certManager":
            r.check(inject == f"{NAMESPACE}/{CERTIFICATE}", f"{name}: inject-ca-from {inject}")
            r.check(not cc.get("caBundle"), f"{name}: caBundle set although cert-manager injects it")
        elif cert_mode == "managed":
            r.check(inject is None, f"{name}: cert-manager annotation in managed mode")
            r.check("caBundle" not in cc, f"{name}: caBundle rendered although the webhook fills it")
        else:
            r.check(inject is None, f"{name}: cert-manager annotation in {cert_mode} mode")
            r.check(bool(cc.get("caBundle")), f"{name}: no caBundle in {cert_mode} mode")
            if ca_bundle is not None:
                r.check(cc.get("caBundle") == ca_bundle, f"{name}: caBundle is not the CA in use")
        return h

    m = one_hook("MutatingWebhookConfiguration", MUTATING, "/mutate")
    if expect_defaults:
        r.check(m.get("failurePolicy") == "Fail",
                f"mutating: default failurePolicy {m.get('failurePolicy')}, want Fail "
                "(an unmutated TPU Pod hangs its slice)")
    claim = go_duration(flags.get("claim-timeout")) if "claim-timeout" in flags \
        else CLAIM_TIMEOUT_DEFAULT
    r.check(claim is not None and claim > 0, f"--claim-timeout={flags.get('claim-timeout')}")
    if claim and isinstance(m.get("timeoutSeconds"), int):
        r.check(claim < m["timeoutSeconds"],
                f"claim timeout {claim}s not inside the mutating webhook's timeoutSeconds "
                f"{m['timeoutSeconds']}: kube-apiserver would give up first")
    r.check(m.get("name") == f"{NAME}.{NAMESPACE}.svc", f"mutating webhook name {m.get('name')}")
    r.check(m.get("rules") == [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                                "resources": ["pods"], "scope": "Namespaced"}],
            f"mutating rules {m.get('rules')}")
    r.check(m.get("objectSelector") == {"matchLabels": {"app.kubernetes.io/name": "kuberay",
                                                        "ray.io/node-type": "worker"}},
            f"mutating objectSelector {m.get('objectSelector')}")
    r.check(m.get("sideEffects") == "NoneOnDryRun", f"mutating sideEffects {m.get('sideEffects')}")
    conds = m.get("matchConditions")
    if tpu_pods_only:
        r.check(isinstance(conds, list) and [c.get("name") for c in conds] == [TPU_CONDITION]
                and isinstance(conds[0].get("expression"), str) and conds[0]["expression"].strip(),
                f"mutating matchConditions {conds}, want the one named {TPU_CONDITION} (only TPU "
                "Pods depend on the webhook)")
    else:
        r.check(conds is None, f"mutating matchConditions {conds}, want none")
    r.check(m.get("reinvocationPolicy") in ("Never", "IfNeeded"), "reinvocationPolicy not explicit")
    if expect_defaults:
        r.check(m.get("reinvocationPolicy") == "Never", "default reinvocationPolicy not Never")
    v = one_hook("ValidatingWebhookConfiguration", VALIDATING, "/validate")
    if expect_defaults:
        r.check(v.get("failurePolicy") == "Ignore",
                f"validating: default failurePolicy {v.get('failurePolicy')}, want Ignore "
                "(a down webhook must not block every RayCluster, RayJob and RayService update)")
    r.check(v.get("name") == f"raycluster-{NAME}.{NAMESPACE}.svc", f"validating webhook name {v.get('name')}")
    check_validating_rules(v.get("rules"), "validating", r)
    r.check(v.get("sideEffects") in ("None", "NoneOnDryRun"), "validating sideEffects")
    r.check(not [o for o in objs if o["kind"] in ("MutatingWebhookConfiguration",
                                                   "ValidatingWebhookConfiguration")
                 and o["metadata"]["name"] not in (MUTATING, VALIDATING)],
            "extra webhook configurations")

    # Certificate objects per mode.
    cm = {("Issuer", ISSUER), ("Certificate", CERTIFICATE)}
    secrets = [o for o in objs if o["kind"] == "Secret"]
    if cert_mode == "certManager":
        r.check(cm <= set(idx), "cert-manager Issuer/Certificate missing")
        iss = idx.get(("Issuer", ISSUER), {})
        r.check(iss.get("spec") == {"selfSigned": {}}, f"Issuer spec {iss.get('spec')}")
        cert = idx.get(("Certificate", CERTIFICATE), {}).get("spec", {})
        r.check(cert.get("secretName") == SECRET, f"Certificate secretName {cert.get('secretName')}")
        r.check(cert.get("dnsNames") == [f"{NAME}.{NAMESPACE}.svc", f"{NAME}.{NAMESPACE}.svc.cluster.local"],
                f"Certificate dnsNames {cert.get('dnsNames')}, want the Service's DNS names in "
                f"{NAMESPACE}")
        r.check(cert.get("issuerRef", {}).get("name") == ISSUER, "Certificate issuerRef")
        r.check(not secrets, "a Secret is rendered although cert-manager issues it")
    else:
        r.check(not (cm & set(idx)) and "Issuer" not in kinds and "Certificate" not in kinds,
                f"cert-manager objects in {cert_mode} mode")
        # managed: the webhook writes the Secret; a rendered one would be overwritten by every
        # helm upgrade or GitOps sync. existingSecret: the user's.
        r.check(not secrets, f"{cert_mode}: the chart must not render a Secret")
    return idx


def strings_naming(obj, ns, path=""):
    """Paths of the strings in obj that hold namespace ns as a word between dots and slashes (a
    DNS name, <ns>/<name>, or the namespace itself)."""
    if isinstance(obj, dict):
        return [p for k, v in obj.items() for p in strings_naming(v, ns, f"{path}.{k}")]
    if isinstance(obj, list):
        return [p for i, v in enumerate(obj) for p in strings_naming(v, ns, f"{path}[{i}]")]
    if isinstance(obj, str) and ns in obj.replace("/", ".").split("."):
        return [f"{path}={obj}"]
    return []


def check_port_privilege(psc, csc, bind, r):
    """A container port below 1024 is bound by a non-root process without capabilities only when
    the Pod's net.ipv4.ip_unprivileged_port_start is at most that port; no capability may stand
    in for it (check_install refuses added capabilities on the installs it holds to that)."""
    sysctls = {s.get("name"): s.get("value") for s in psc.get("sysctls") or []}
    if bind >= 1024:
        return
    value = sysctls.get(UNPRIVILEGED_PORT_SYSCTL)
    r.check(value is not None and str(value).isdigit() and int(value) <= bind,
            f"HTTPS port {bind} is privileged, and the Pod's sysctls {sysctls} do not set "
            f"{UNPRIVILEGED_PORT_SYSCTL} at or below it: a non-root process cannot bind it")
    r.check(isinstance(value, str), f"sysctl {UNPRIVILEGED_PORT_SYSCTL} value {value!r} must be a "
                                    "string (the API's type)")


def check_priority(pod, idx, namespace, r, expect_defaults):
    """The Pods' priority class, and the ResourceQuota that admits a critical class outside
    kube-system: present exactly when the class is critical and the namespace is not
    kube-system, scoped to that class alone."""
    cls = pod.get("priorityClassName")
    if expect_defaults:
        r.check(cls == DEFAULT_PRIORITY_CLASS,
                f"priorityClassName {cls!r}, want {DEFAULT_PRIORITY_CLASS} (the mutating webhook "
                "fails closed)")
    quotas = [k for k in idx if k[0] == "ResourceQuota"]
    want = cls in CRITICAL_CLASSES and namespace != "kube-system"
    if not want:
        r.check(not quotas, f"ResourceQuota {quotas} rendered for priority class {cls!r} in "
                            f"{namespace}")
        return
    q = idx.get(("ResourceQuota", CRITICAL_QUOTA))
    if not r.check(q is not None and quotas == [("ResourceQuota", CRITICAL_QUOTA)],
                   f"priority class {cls} in {namespace}: want exactly ResourceQuota "
                   f"{CRITICAL_QUOTA}, got {quotas} (kube-apiserver may refuse the Pods otherwise)"):
        return
    spec = q.get("spec") or {}
    r.check(spec.get("scopeSelector") == {"matchExpressions": [
        {"scopeName": "PriorityClass", "operator": "In", "values": [cls]}]},
        f"ResourceQuota {CRITICAL_QUOTA} scopeSelector {spec.get('scopeSelector')}, want "
        f"PriorityClass In [{cls}]")
    pods = quantity_bytes((spec.get("hard") or {}).get("pods"))
    replicas = ((idx.get(("Deployment", NAME)) or {}).get("spec") or {}).get("replicas") or 0
    r.check(set(spec.get("hard") or {}) == {"pods"} and pods is not None and pods > replicas,
            f"ResourceQuota {CRITICAL_QUOTA} hard {spec.get('hard')}: want only pods, more than "
            f"the {replicas} replicas (a rolling update adds one)")


def check_spread(pod, r, expect_defaults):
    """By default the replicas spread over nodes and over zones, without refusing to schedule."""
    if not expect_defaults:
        return
    got = {(c.get("topologyKey"), c.get("whenUnsatisfiable"), c.get("maxSkew"),
            str((c.get("labelSelector") or {}).get("matchLabels")))
           for c in pod.get("topologySpreadConstraints") or []}
    want = {(key, "ScheduleAnyway", 1, str(SELECTOR))
            for key in ("kubernetes.io/hostname", "topology.kubernetes.io/zone")}
    r.check(got == want, f"topologySpreadConstraints {sorted(got)}, want {sorted(want)}")
def check_cert_rbac(role, cluster_role, r, namespace=NAMESPACE):
    """Managed certificates: the Role and ClusterRole grant exactly CERT_ROLE_RBAC and
    CERT_CLUSTER_RBAC, every verb but create limited to its object by resourceNames."""
    for obj, want in ((role, CERT_ROLE_RBAC), (cluster_role, CERT_CLUSTER_RBAC)):
        what = f"{obj.get('kind')} {CERT_ROLE}"
        granted = set()
        for rule in obj.get("rules", []):
            r.check(set(rule) <= {"apiGroups", "resources", "verbs", "resourceNames"},
                    f"{what}: rule with more than apiGroups/resources/verbs/resourceNames: {rule}")
            for g in rule.get("apiGroups", []):
                for res in rule.get("resources", []):
                    for v in rule.get("verbs", []):
                        for n in rule.get("resourceNames") or [None]:
                            granted.add((g, res, v, n))
        r.check(granted == want, f"{what} grants {sorted(granted, key=str)}, "
                                 f"want exactly {sorted(want, key=str)}")
    r.check(role.get("metadata", {}).get("namespace") == namespace,
            f"Role {CERT_ROLE} not in the webhook's namespace {namespace}")


def validating_rules(objs):
    """The rules of the validating webhook in a set of objects (None when there is none)."""
    for o in objs:
        if o["kind"] == "ValidatingWebhookConfiguration" and o["metadata"]["name"] == VALIDATING:
            hooks = o.get("webhooks") or [{}]
            return hooks[0].get("rules")
    return None


def check_validating_rules(rules, what, r):
    """The validating webhook's rules: exactly one, for ray.io/v1, namespaced, resources exactly
    VALIDATED_RESOURCES (each once: no wildcard, no subresource such as rayjobs/status, nothing
    left out) and operations exactly CREATE and UPDATE (no DELETE, no CONNECT, no "*")."""
    want = {"operations": VALIDATED_OPERATIONS, "apiGroups": ["ray.io"], "apiVersions": ["v1"],
            "resources": VALIDATED_RESOURCES, "scope": "Namespaced"}
    ok = isinstance(rules, list) and len(rules) == 1 and isinstance(rules[0], dict)
    rule = rules[0] if ok else {}
    ok = ok and set(rule) == set(want)
    for key in ("operations", "apiGroups", "apiVersions", "resources"):
        got = rule.get(key)
        ok = ok and isinstance(got, list) and sorted(got) == sorted(want[key]) \
            and len(set(got)) == len(got)
    ok = ok and rule.get("scope") == "Namespaced"
    r.check(ok, f"{what} rules {rules}, want exactly one rule: operations "
                f"{VALIDATED_OPERATIONS} of ray.io/v1 {VALIDATED_RESOURCES}, scope Namespaced")
    return ok


def check_memory_limit(c, flags, r):
    """--memory-limit is the container's own limits.memory, through the Downward API: the flag is
    $(WEBHOOK_MEMORY_LIMIT), which kubelet expands from an env var with a resourceFieldRef to
    this container's limits.memory in bytes (divisor 1). The limit itself must be a quantity the
    binary accepts (at least 32Mi)."""
    r.check(flags.get("memory-limit") == MEMORY_ARG,
            f"--memory-limit={flags.get('memory-limit')}, want {MEMORY_ARG} (the container's "
            "limits.memory through the Downward API)")
    env = [e for e in c.get("env", []) if e.get("name") == MEMORY_ENV]
    ref = ((env[0] if env else {}).get("valueFrom") or {}).get("resourceFieldRef") or {}
    r.check(len(env) == 1 and "value" not in env[0]
            and ref.get("resource") == "limits.memory"
            and ref.get("containerName") == c.get("name")
            and str(ref.get("divisor", "1")) == "1",
            f"env {MEMORY_ENV} is {env}, want valueFrom.resourceFieldRef "
            f"{{containerName: {c.get('name')}, resource: limits.memory}} (bytes: divisor 1)")
    limit = (c.get("resources", {}).get("limits") or {}).get("memory")
    n = quantity_bytes(limit) if limit is not None else None
    r.check(n is not None and n >= MIN_MEMORY_LIMIT,
            f"resources.limits.memory {limit!r}: the webhook needs a limit of at least 32Mi "
            "(--memory-limit)")


def _check_selector(sel, what, r):
    """A LabelSelector as the API server validates it."""
    if not r.check(isinstance(sel, dict) and set(sel) <= {"matchLabels", "matchExpressions"},
                   f"{what}: not a label selector: {sel}"):
        return
    labels = sel.get("matchLabels") or {}
    r.check(isinstance(labels, dict) and all(isinstance(k, str) and isinstance(v, str)
                                             for k, v in labels.items()),
            f"{what}: matchLabels must map strings to strings: {labels}")
    for e in sel.get("matchExpressions") or []:
        op, values = e.get("operator"), e.get("values") or []
        ok = isinstance(e.get("key"), str) and (
            (op in ("In", "NotIn") and values) or (op in ("Exists", "DoesNotExist") and not values))
        r.check(ok, f"{what}: bad matchExpression {e}")


def _check_peer(peer, what, r):
    """A NetworkPolicyPeer as the API server validates it: a podSelector and/or a
    namespaceSelector, or an ipBlock alone, whose cidr and except are valid and nested."""
    if not r.check(isinstance(peer, dict) and peer
                   and set(peer) <= {"podSelector", "namespaceSelector", "ipBlock"},
                   f"{what}: not a NetworkPolicy peer: {peer}"):
        return
    if "ipBlock" in peer:
        r.check(len(peer) == 1, f"{what}: ipBlock together with a selector: {peer}")
        block = peer["ipBlock"] or {}
        r.check(set(block) <= {"cidr", "except"}, f"{what}: ipBlock fields {sorted(block)}")
        try:
            net = ipaddress.ip_network(str(block.get("cidr")), strict=False)
        except ValueError:
            r.check(False, f"{what}: ipBlock.cidr {block.get('cidr')!r} is not a CIDR")
            return
        r.check("/" in str(block.get("cidr")), f"{what}: ipBlock.cidr {block['cidr']!r} lacks a /prefix")
        for ex in block.get("except") or []:
            try:
                sub = ipaddress.ip_network(str(ex), strict=False)
                r.check(sub.version == net.version and sub.subnet_of(net) and sub != net,
                        f"{what}: except {ex} is not strictly inside {block['cidr']}")
            except ValueError:
                r.check(False, f"{what}: except {ex!r} is not a CIDR")
    for key in ("podSelector", "namespaceSelector"):
        if key in peer:
            _check_selector(peer[key], f"{what} {key}", r)


def check_network_policy(np, r, pod_labels, bind, health, want):
    """The optional NetworkPolicy: valid as the API server would check it, selecting exactly the
    webhook's Pods, restricting ingress only (egress stays open for the API calls), and
    allowing the HTTPS port from exactly want["https"] and the health port from exactly
    want["health"] (no rule when empty); no rule may be open to every source or reach any
    other port."""
    r.check(np.get("apiVersion") == "networking.k8s.io/v1",
            f"NetworkPolicy apiVersion {np.get('apiVersion')}, want networking.k8s.io/v1")
    spec = np.get("spec") or {}
    r.check(set(spec) <= {"podSelector", "policyTypes", "ingress", "egress"},
            f"NetworkPolicy spec fields {sorted(spec)}")
    sel = spec.get("podSelector")
    _check_selector(sel, "NetworkPolicy podSelector", r)
    r.check(isinstance(sel, dict) and sel.get("matchLabels") == SELECTOR
            and not sel.get("matchExpressions"),
            f"NetworkPolicy podSelector {sel}, want the webhook's Pods {SELECTOR}")
    r.check(subset((sel or {}).get("matchLabels"), pod_labels),
            "NetworkPolicy selects no webhook Pod")
    r.check(spec.get("policyTypes") == ["Ingress"] and "egress" not in spec,
            f"NetworkPolicy policyTypes {spec.get('policyTypes')}, want [Ingress] (egress to "
            "kube-apiserver must stay open)")
    allowed = {bind: [], health: []}
    for i, rule in enumerate(spec.get("ingress") or []):
        what = f"NetworkPolicy ingress[{i}]"
        if not r.check(isinstance(rule, dict) and set(rule) <= {"from", "ports"},
                       f"{what}: fields {rule}"):
            continue
        peers, ports = rule.get("from"), rule.get("ports")
        r.check(isinstance(peers, list) and peers,
                f"{what}: no 'from': open to every source in and outside the cluster")
        r.check(isinstance(ports, list) and ports, f"{what}: no 'ports': opens every port")
        for j, peer in enumerate(peers or []):
            _check_peer(peer, f"{what}.from[{j}]", r)
        for port in ports or []:
            r.check(isinstance(port, dict) and set(port) <= {"protocol", "port"}
                    and port.get("protocol", "TCP") == "TCP" and isinstance(port.get("port"), int)
                    and 1 <= port["port"] <= 65535,
                    f"{what}: port {port}, want a TCP port number")
            p = port.get("port") if isinstance(port, dict) else None
            if r.check(p in allowed, f"{what}: opens port {p}, neither HTTPS {bind} nor health "
                                     f"{health}"):
                allowed[p] += list(peers or [])

    def keyed(peers):
        return sorted(yaml.safe_dump(p, sort_keys=True) for p in peers)

    for port, name in ((bind, "https"), (health, "health")):
        r.check(keyed(allowed[port]) == keyed(want.get(name, [])),
                f"NetworkPolicy lets {allowed[port]} reach the {name} port {port}, "
                f"want exactly {want.get(name, [])}")


def normalized(obj):
    """An object without the labels only Helm adds, for comparing the chart with kustomize."""
    obj = yaml.safe_load(yaml.safe_dump(obj))
    helm_only = ("helm.sh/chart", "app.kubernetes.io/instance", "app.kubernetes.io/managed-by",
                 "app.kubernetes.io/version")

    def strip(labels):
        for k in helm_only:
            labels.pop(k, None)

    strip(obj["metadata"].get("labels") or {})
    if obj["kind"] == "Namespace":
        # Helm's keep policy has no kustomize counterpart; check_install checks it on the chart.
        ann = obj["metadata"].get("annotations") or {}
        ann.pop("helm.sh/resource-policy", None)
        if not ann:
            obj["metadata"].pop("annotations", None)
    if obj["kind"] == "Deployment":
        strip(obj["spec"]["template"]["metadata"].get("labels") or {})
        for c in obj["spec"]["template"]["spec"]["containers"]:
            c.pop("image", None)
    return obj


def diff(a, b, path=""):
    """Human-readable differences between two parsed objects."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            if k not in a:
                out.append(f"{path}.{k}: only in the second")
            elif k not in b:
                out.append(f"{path}.{k}: only in the first")
            else:
                out += diff(a[k], b[k], f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in diff(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]

