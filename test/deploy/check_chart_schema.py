#!/usr/bin/env python3
"""deploy.chart_schema: values.schema.json describes values.yaml, and refuses what it should.

  1. The schema is JSON Schema draft-07. Every leaf of values.yaml is described in it: a key of
     an object the chart owns has an entry of its own with a type or an enum; a Kubernetes
     object or map passed through as it is (resources, security contexts, affinity,
     tolerations, topologySpreadConstraints, NetworkPolicy peers, labels, annotations, node
     selectors) is described as a whole. Every object the chart owns (one with "properties")
     has additionalProperties: false, and the schema describes no key that values.yaml lacks.
  2. The defaults validate: helmrender (Helm's engine and JSON-schema library; chart_render.py)
     renders them with the schema applied.
  3. Each of SCHEMA_CASES is refused with Helm's message naming the field: a misspelt key
     (tpuWebhook.legacyindexing, in a values file and with --set), a wrong type, an unknown
     top-level key, ports out of range, an unknown enum value, ...; the misspelt key's message
     is exactly Helm's. Each of ACCEPTED_CASES (free-form Kubernetes fields, YAML booleans for
     legacyIndexing, ...) validates.
  4. A values file written for the Go webhook's chart validates and renders as it is, in a
     release namespace other than the one it names: everything in its namespace (ray-system),
     serving on its bindPort 443 through the safe sysctl net.ipv4.ip_unprivileged_port_start,
     the Service on 443, its user, capabilities, image, replicas and certificate lifetime.

Usage: check_chart_schema.py --root REPO_ROOT --renderer HELMRENDER
Exit 77 (skipped) when helmrender is not built.
"""
import argparse
import json
import os
import sys

import yaml

import chart_render
import deploy_checks as dc

SKIP = 77
CHART = os.path.join("deploy", "helm", "kuberay-tpu-webhook")
DRAFT_07 = "http://json-schema.org/draft-07/schema#"
# Helm's words for values the schema refuses (every Helm 3 version says them).
REFUSED = "values don't meet the specifications of the schema(s)"
# What helmrender (gojsonschema, as Helm up to 3.18.4) says for the misspelt key, exactly.
TYPO_MESSAGE = ("Error: values don't meet the specifications of the schema(s) in the following "
                "chart(s):\nkuberay-tpu-webhook:\n"
                "- tpuWebhook: Additional property legacyindexing is not allowed")
# Keys whose value is a Kubernetes object, list or string map that the chart passes through.
FREE_FORM = {"resources", "podSecurityContext", "containerSecurityContext", "nodeSelector",
             "tolerations", "affinity", "topologySpreadConstraints", "podAnnotations",
             "podLabels", "labels", "annotations", "apiServerPeers", "healthPeers"}
DESCRIBED_BY = ("type", "enum", "const", "anyOf", "oneOf", "allOf")


def tw(**kw):
    return {"tpuWebhook": kw}


# (what, values, --set arguments, the phrases the error must contain)
SCHEMA_CASES = [
    ("a misspelt key in a values file", tw(legacyindexing="on"), (), (REFUSED, "legacyindexing")),
    ("a misspelt key with --set", {}, ("tpuWebhook.legacyindexing=on",),
     (REFUSED, "legacyindexing")),
    ("replicas as a string", tw(deployment={"replicas": "two"}), (), (REFUSED, "replicas")),
    ("no replica", tw(deployment={"replicas": 0}), (), (REFUSED, "replicas")),
    ("an unknown top-level key", {"tpuwebhook": {"legacyIndexing": "on"}}, (),
     (REFUSED, "tpuwebhook")),
    ("a Service port out of range", tw(service={"port": 70000}), (), (REFUSED, "port")),
    ("a bindPort of 0", tw(deployment={"bindPort": 0}), (), (REFUSED, "bindPort")),
    ("a bindPort out of range", tw(deployment={"bindPort": 65536}), (), (REFUSED, "bindPort")),
    ("tpuPodsOnly as a string", tw(webhook={"mutating": {"tpuPodsOnly": "yes"}}), (),
     (REFUSED, "tpuPodsOnly")),
    ("a healthPort of 0", {}, ("tpuWebhook.deployment.healthPort=0",), (REFUSED, "healthPort")),
    ("verbosity 5", tw(deployment={"verbosity": 5}), (), (REFUSED, "verbosity")),
    ("an unknown log format", tw(deployment={"logFormat": "xml"}), (), (REFUSED, "logFormat")),
    ("an unknown cert mode", tw(cert={"mode": "vault"}), (), (REFUSED, "mode")),
    ("an unknown legacyIndexing value", tw(legacyIndexing="sometimes"), (),
     (REFUSED, "legacyIndexing")),
    ("an unknown Service type", tw(service={"type": "ExternalName"}), (), (REFUSED, "type")),
    ("an unknown pull policy", tw(image={"pullPolicy": "Sometimes"}), (), (REFUSED, "pullPolicy")),
    ("an image digest that is a tag", tw(image={"digest": "latest"}), (), (REFUSED, "digest")),
    ("an image digest without its algorithm",
     tw(image={"digest": "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}), (),
     (REFUSED, "digest")),
    ("a PodMonitoring interval Prometheus cannot read (a fraction)",
     tw(metrics={"podMonitoring": {"enabled": True, "interval": "1.5s"}}), (),
     (REFUSED, "interval")),
    ("a misspelt PodMonitoring key", tw(metrics={"podMonitoring": {"enable": True}}), (),
     (REFUSED, "enable")),
    ("a runbookBaseURL that is not a string",
     tw(metrics={"prometheusRule": {"runbookBaseURL": ["https://git.example.com/a/b"]}}), (),
     (REFUSED, "runbookBaseURL")),
    ("a mutating failure policy in lower case", tw(webhook={"mutating": {"failurePolicy": "fail"}}),
     (), (REFUSED, "failurePolicy")),
    ("a webhook timeout the API refuses", tw(webhook={"validating": {"timeoutSeconds": 31}}), (),
     (REFUSED, "timeoutSeconds")),
    ("a flag the chart sets, again in extraArgs", tw(deployment={"extraArgs": ["--v=3"]}), (),
     (REFUSED, "extraArgs")),
    ("a certificate mode in extraArgs (cert.mode sets it)",
     tw(deployment={"extraArgs": ["--threads=4", "--cert-mode=files"]}), (), (REFUSED, "extraArgs")),
    ("a managed certificate's lifetime in extraArgs (cert.managed sets it)",
     tw(deployment={"extraArgs": ["--cert-validity=24h"]}), (), (REFUSED, "extraArgs")),
    ("a base64 certificate in extraArgs (exclusive with the chart's files and managed mode)",
     tw(deployment={"extraArgs": ["--server-cert=LS0t"]}), (), (REFUSED, "extraArgs")),
    ("kuberayVersion as a number (1.10 would read as 1.1)", tw(kuberayVersion=1.3), (),
     (REFUSED, "kuberayVersion")),
    ("a label value that is not a string", tw(namespace={"labels": {"team": 1}}), (),
     (REFUSED, "labels")),
    ("a misspelt key in a nested object", tw(cert={"selfSigned": {"validitydays": 30}}), (),
     (REFUSED, "validitydays")),
]

# (what, values): values the schema must accept.
ACCEPTED_CASES = [
    ("legacyIndexing as a YAML boolean", tw(legacyIndexing=False)),
    ("free-form Kubernetes fields", tw(deployment={
        "resources": {"limits": {"memory": "512Mi", "example.com/device": 1}},
        "containerSecurityContext": {"runAsNonRoot": True, "readOnlyRootFilesystem": True,
                                     "allowPrivilegeEscalation": False, "procMount": "Default",
                                     "capabilities": {"drop": ["ALL"]}},
        "tolerations": [{"key": "k", "operator": "Exists"}],
        "affinity": {"podAntiAffinity": {}},
        "podLabels": {"example.com/team": "ml"}},
        networkPolicy={"enabled": True, "apiServerCIDRs": ["10.0.0.0/28"],
                       "apiServerPeers": [{"podSelector": {"matchLabels": {"a": "b"}}}]})),
    ("a PodDisruptionBudget percentage", tw(podDisruptionBudget={"minAvailable": "50%"})),
    ("a privileged bindPort (the Go webhook's 443)", tw(deployment={"bindPort": 443})),
    ("the release namespace (an empty name)", tw(namespace={"name": ""})),
]

# A values file written for the Go webhook's chart: its keys, with its values (its image
# stands in as registry.example.com).
GO_CHART_VALUES = tw(
    namespace={"name": "ray-system", "labels": {}},
    image={"repository": "registry.example.com/go-webhook/tpu-webhook", "tag": "v1.3.1",
           "pullPolicy": "IfNotPresent"},
    deployment={"replicas": 1, "verbosity": 0, "bindPort": 443,
                "containerSecurityContext": {
                    "allowPrivilegeEscalation": False,
                    "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
                    "readOnlyRootFilesystem": True, "runAsUser": 2007,
                    "seccompProfile": {"type": "RuntimeDefault"}},
                "podSecurityContext": {}},
    service={"type": "ClusterIP", "port": 443},
    cert={"duration": "2160h", "renewBefore": "360h"})


def resolve(schema, node):
    """A schema node with its $ref ("#/definitions/x") followed."""
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        if not ref.startswith("#/"):
            return {}
        node = schema
        for part in ref[2:].split("/"):
            node = node.get(part, {})
    return node


def check_closed(schema, node, where, r):
    """Every object of the schema that lists its properties refuses others."""
    node = resolve(schema, node)
    if not isinstance(node, dict):
        return
    if "properties" in node:
        r.check(node.get("additionalProperties") is False,
                f"values.schema.json: {where or '(root)'} lists its keys but lacks "
                "additionalProperties: false, so a misspelt key would pass")
        for k, sub in node["properties"].items():
            check_closed(schema, sub, f"{where}.{k}" if where else k, r)
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            check_closed(schema, node[key], f"{where}[]", r)


def check_described(schema, node, value, path, r):
    """values.yaml's value at path is described by the schema node."""
    node = resolve(schema, node)
    if not r.check(isinstance(node, dict) and node,
                   f"values.yaml {path}: not described in values.schema.json"):
        return
    if isinstance(value, dict) and "properties" in node:
        props = node["properties"]
        for k, v in value.items():
            sub = f"{path}.{k}" if path else k
            if r.check(k in props, f"values.yaml {sub}: not described in values.schema.json"):
                check_described(schema, props[k], v, sub, r)
        for k in sorted(set(props) - set(value)):
            r.check(False, f"values.schema.json describes {path}.{k}, which values.yaml lacks")
        return
    r.check(any(k in node for k in DESCRIBED_BY),
            f"values.schema.json: {path} has no type or enum")
    if isinstance(value, list):
        items = resolve(schema, node.get("items"))
        r.check(isinstance(items, dict) and any(k in items for k in DESCRIBED_BY),
                f"values.schema.json: {path} does not describe its items")
        node = items if isinstance(items, dict) else {}
    if isinstance(value, dict) or (node.get("type") == "object" and "properties" not in node):
        r.check(path.rsplit(".", 1)[-1] in FREE_FORM,
                f"values.schema.json: {path} is described as a whole, but it is not a "
                f"Kubernetes object the chart passes through ({sorted(FREE_FORM)})")


def check_schema_file(chart_dir, values, r):
    with open(os.path.join(chart_dir, "values.schema.json")) as f:
        try:
            schema = json.load(f)
        except ValueError as e:
            r.check(False, f"values.schema.json is not JSON: {e}")
            return
    r.check(schema.get("$schema") == DRAFT_07, f"values.schema.json $schema {schema.get('$schema')}, "
                                               f"want {DRAFT_07}")
    check_closed(schema, schema, "", r)
    check_described(schema, schema, values, "", r)


def check_cases(renderer, chart_dir, r):
    """The defaults, SCHEMA_CASES and ACCEPTED_CASES through helmrender."""
    jobs = [{"values": {}, "report": False}]
    jobs += [{"values": v, "sets": s, "report": False} for _, v, s, _ in SCHEMA_CASES]
    jobs += [{"values": v, "report": False} for _, v in ACCEPTED_CASES]
    results = chart_render.render_many(renderer, chart_dir, jobs)
    defaults, refused, accepted = results[0], results[1:len(SCHEMA_CASES) + 1], \
        results[len(SCHEMA_CASES) + 1:]
    r.check(defaults.ok, f"the default values do not validate: {defaults.error}")
    for (what, _, _, want), res in zip(SCHEMA_CASES, refused):
        if res.ok:
            r.check(False, f"{what}: rendered, but the schema should refuse it with {want}")
        elif r.check(all(p in res.error for p in want),
                     f"{what}: refused, but not with {want}: {res.error}"):
            print(f"refused as expected: {what}: {' '.join(res.error.split())}")
    r.check(refused[0].error == TYPO_MESSAGE,
            f"the misspelt key's message is {refused[0].error!r}, want {TYPO_MESSAGE!r}")
    for (what, _), res in zip(ACCEPTED_CASES, accepted):
        r.check(res.ok, f"{what}: refused: {res.error}")


def check_go_chart_values(renderer, chart_dir, r):
    """The Go webhook's values file, unchanged, in release namespace "default": validates, and
    renders an install in its own namespace that serves on its port 443."""
    res = chart_render.render(renderer, chart_dir, values=GO_CHART_VALUES, report=False,
                              namespace="default")
    if not r.check(res.ok, f"the Go chart's values file is refused: {res.error}"):
        return
    objs = [o for _, text in res.documents for o in dc.load_objects(text, "Go chart values")]
    idx = {(o["kind"], o["metadata"]["name"]): o for o in objs}
    dep = idx[("Deployment", dc.NAME)]["spec"]
    pod = dep["template"]["spec"]
    c = pod["containers"][0]
    flags = dc.parse_args(c["args"])
    r.check(dep["replicas"] == 1 and ("PodDisruptionBudget", dc.NAME) not in idx,
            f"Go chart values: replicas {dep['replicas']}, want 1 and no PodDisruptionBudget")
    r.check(c["securityContext"].get("runAsUser") == 2007 and c["image"].startswith(
        "registry.example.com/go-webhook/tpu-webhook:v1.3.1"), "Go chart values: not applied")
    r.check(c["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
            f"Go chart values: capabilities {c['securityContext']['capabilities']}, want its own")
    # It names no cert.mode: it gets the default, managed certificates, and no cert-manager
    # objects (its cert.duration is cert-manager's and stays unused).
    r.check(("Certificate", dc.CERTIFICATE) not in idx and "--cert-mode=managed" in c["args"],
            "Go chart values: not the default managed certificates")
    # Serves where it says: port 443, bound by a non-root user through the sysctl.
    r.check(flags.get("bind-address") == ":443"
            and [p["containerPort"] for p in c["ports"] if p["name"] == "https"] == [443],
            f"Go chart values: --bind-address={flags.get('bind-address')}, ports {c['ports']}, "
            "want 443")
    r.check(pod["securityContext"].get("sysctls") == [
        {"name": "net.ipv4.ip_unprivileged_port_start", "value": "443"}],
        f"Go chart values: Pod sysctls {pod['securityContext'].get('sysctls')}, want "
        "net.ipv4.ip_unprivileged_port_start=443")
    r.check(pod["securityContext"].get("runAsNonRoot") is True,
            "Go chart values: the Pod no longer runs as non-root")
    svc = idx[("Service", dc.NAME)]["spec"]["ports"]
    r.check(svc == [{"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"}],
            f"Go chart values: Service ports {svc}, want 443 to the https port")
    # In the namespace it names, not the release namespace.
    wrong = sorted(f"{o['kind']} {o['metadata']['name']}" for o in objs
                   if o["metadata"].get("namespace") not in (None, "ray-system"))
    r.check(not wrong, f"Go chart values: objects outside ray-system: {wrong}")
    m = idx[("MutatingWebhookConfiguration", dc.MUTATING)]
    r.check(m["webhooks"][0]["clientConfig"]["service"]["namespace"] == "ray-system",
            "Go chart values: the webhook does not call the Service in ray-system")
    print("the Go chart's values file validates and renders as it is: ray-system, port 443")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--renderer", default="")
    args = ap.parse_args()
    if chart_render.missing(args.renderer):
        return SKIP
    chart_dir = os.path.join(args.root, CHART)
    r = dc.Report()
    with open(os.path.join(chart_dir, "values.yaml")) as f:
        values = yaml.load(f, Loader=dc.UniqueKeyLoader)
    check_schema_file(chart_dir, values, r)
    check_cases(args.renderer, chart_dir, r)
    check_go_chart_values(args.renderer, chart_dir, r)
    return r.finish(f"chart schema ({len(SCHEMA_CASES)} refused, {len(ACCEPTED_CASES)} accepted "
                    "cases)")


if __name__ == "__main__":
    sys.exit(main())
