#!/usr/bin/env python3
"""deploy.chart_match_conditions: the mutating webhook's matchConditions send exactly the TPU Pods.

The chart (rendered by helmrender for Kubernetes 1.30, where matchConditions are GA) and the
kustomize base give the Pod webhook CEL matchConditions. kube-apiserver calls the webhook for a
Pod only when every condition is true, and a condition that fails to evaluate fails the request
under failurePolicy Fail, so the conditions must be true for every TPU Pod, false for every other
Pod, and never fail. This test takes the conditions from the rendered objects and evaluates them
with a CEL evaluator (@bufbuild/cel, test/deploy/schema/cel_eval.mjs) with `object` bound to each
Pod of PODS, and compares with the answers written by hand: TPU in a container's limits, in its
requests, in a second container, in an init container only; CPU, GPU (nvidia.com/gpu),
resource-less Pods, Pods with empty or missing resources, requests, limits, containers, init
containers or spec.

kube-apiserver decodes a Pod into its Go type before CEL sees it, so a field sent as null (or as
an empty list or map) reaches the expression absent; decoded() models that, and the Pods sent
with nulls are evaluated in that form. An expression that reads an optional field without has()
is shown to fail on such a Pod (so the evaluator does report errors).

Usage: check_match_conditions.py --root REPO_ROOT --renderer HELMRENDER [--kubectl PATH]
                                 [--node PATH]
Exit 77 (skipped) when helmrender is not built, or node or the npm packages are missing.
"""
import argparse
import json
import os
import subprocess
import sys

import chart_render
import deploy_checks as dc
import k8s_schema

SKIP = 77
CHART = os.path.join("deploy", "helm", "kuberay-tpu-webhook")
EVALUATOR = os.path.join(k8s_schema.SCHEMA_DIR, "cel_eval.mjs")
TPU = "google.com/tpu"


def pod(containers=None, init=None, **spec):
    """A KubeRay worker Pod with these containers and init containers (None: no such key)."""
    s = dict(spec)
    if containers is not None:
        s["containers"] = containers
    if init is not None:
        s["initContainers"] = init
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": "tpu-cluster-tpu-group-worker-",
                         "labels": {"app.kubernetes.io/name": "kuberay",
                                    "ray.io/node-type": "worker"}},
            "spec": s}


def c(name="ray-worker", **resources):
    """A container; resources given as requests={...}, limits={...} (or resources=...)."""
    out = {"name": name, "image": "rayproject/ray:2.46.0"}
    if "resources" in resources:
        out["resources"] = resources["resources"]
    elif resources:
        out["resources"] = resources
    return out


CPU = {"cpu": "4", "memory": "16Gi"}
TPU_SELECTOR = {"cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                "cloud.google.com/gke-tpu-topology": "4x4"}

# (what, Pod, sent to the webhook?), answers written by hand.
PODS = [
    ("TPU in the limits (what KubeRay's TPU samples set)",
     pod([c(limits={TPU: 4, **CPU}, requests={TPU: 4, **CPU})], nodeSelector=TPU_SELECTOR), True),
    ("TPU in the limits only", pod([c(limits={TPU: 4})]), True),
    ("TPU in the requests only", pod([c(requests={TPU: "4"})]), True),
    ("TPU in the second container", pod([c("sidecar", limits=CPU), c(limits={TPU: 4})]), True),
    ("TPU in an init container only", pod([c(limits=CPU)], init=[c("init", limits={TPU: 1})]),
     True),
    ("TPU in an init container, main container without resources",
     pod([c()], init=[c("warmup"), c("init", requests={TPU: 4})]), True),
    ("TPU with the value 0 (sent; the webhook leaves it unchanged)",
     pod([c(limits={TPU: 0})]), True),
    ("CPU worker", pod([c(limits=CPU, requests=CPU)]), False),
    ("GPU worker", pod([c(limits={"nvidia.com/gpu": 1, **CPU}, requests=CPU)]), False),
    ("TPU node selector but no TPU resource", pod([c(limits=CPU)], nodeSelector=TPU_SELECTOR),
     False),
    ("a similar resource name",
     pod([c(limits={"google.com/tpu-v5": 4, "example.com/google.com/tpu": 1})]), False),
    ("TPU as a label, not a resource",
     {"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": {TPU: "4"}},
      "spec": {"containers": [c(limits=CPU)]}}, False),
    ("no resources", pod([c()]), False),
    ("empty resources", pod([c(resources={})]), False),
    ("empty requests and limits", pod([c(requests={}, limits={})]), False),
    ("requests only, without TPU", pod([c(requests=CPU)]), False),
    ("no containers key", pod(), False),
    ("no containers, an init container without resources", pod(init=[c("init")]), False),
    ("empty init containers", pod([c(limits=CPU)], init=[]), False),
    ("no spec", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}, False),
    ("null resources, requests, limits and init containers",
     {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
      "spec": {"containers": [c(resources=None), c("b", requests=None, limits=None)],
               "initContainers": None}}, False),
    ("null limits beside TPU requests",
     pod([c(requests={TPU: 4}, limits=None)]), True),
    ("null containers, TPU init container",
     {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
      "spec": {"containers": None, "initContainers": [c(limits={TPU: 4})]}}, True),
]

# The evaluator reports errors: an expression without has() fails on a Pod without resources.
NO_HAS = {"name": "no-has", "expression":
          f"object.spec.containers.exists(c, '{TPU}' in c.resources.limits)"}


def decoded(obj):
    """The object as kube-apiserver hands it to CEL: decoded into the Pod type and converted back
    to a map, where a null, or an empty list or map, of an optional field is left out."""
    if isinstance(obj, dict):
        out = {k: decoded(v) for k, v in obj.items()}
        return {k: v for k, v in out.items() if v is not None and v != {} and v != []}
    if isinstance(obj, list):
        return [decoded(v) for v in obj]
    return obj


def evaluate(node, conditions, cases):
    """Runs cel_eval.mjs; returns {case name: {condition name: result}}."""
    payload = json.dumps({"conditions": conditions,
                          "cases": [{"name": n, "object": o} for n, o in cases]})
    p = subprocess.run([node, EVALUATOR], input=payload, capture_output=True, text=True,
                       timeout=60)
    if p.returncode != 0:
        raise RuntimeError(f"cel_eval.mjs exited {p.returncode}: {p.stderr.strip()}")
    return {row["case"]: row["results"] for row in json.loads(p.stdout)}


def conditions_of(objs, where, r):
    """The matchConditions of the mutating webhook among objs."""
    for o in objs:
        if o["kind"] == "MutatingWebhookConfiguration" and o["metadata"]["name"] == dc.MUTATING:
            conds = (o.get("webhooks") or [{}])[0].get("matchConditions")
            r.check(isinstance(conds, list) and conds and all(
                isinstance(x, dict) and set(x) == {"name", "expression"} for x in conds),
                f"{where}: matchConditions {conds}, want a list of {{name, expression}}")
            return conds if isinstance(conds, list) else []
    r.check(False, f"{where}: no MutatingWebhookConfiguration {dc.MUTATING}")
    return []


def check_conditions(node, where, conds, r):
    """Every Pod of PODS: sent exactly when the hand-written answer says, no error."""
    results = evaluate(node, conds, [(n, decoded(p)) for n, p, _ in PODS])
    for name, _, want in PODS:
        got = results.get(name, {})
        errors = {k: v for k, v in got.items() if not isinstance(v, bool)}
        if not r.check(not errors, f"{where}: Pod {name!r}: {errors}"):
            continue
        sent = all(got.values())
        r.check(sent == want, f"{where}: Pod {name!r}: sent to the webhook {sent}, want {want} "
                              f"({got})")
    print(f"{where}: {len(conds)} matchCondition(s) against {len(PODS)} Pods")


def check_evaluator_reports_errors(node, r):
    got = evaluate(node, [NO_HAS], [("no resources", decoded(pod([c()])))])
    r.check(str(got["no resources"]["no-has"]).startswith("error"),
            f"an expression reading an absent field without has() gave {got}, want an error: "
            "the evaluator does not report errors, so this test proves nothing")


def kustomize_objects(root, kubectl, r):
    proc = subprocess.run([kubectl, "kustomize", os.path.join(root, "deploy", "manifests")],
                          capture_output=True, text=True, timeout=60)
    if not r.check(proc.returncode == 0, f"kubectl kustomize failed: {proc.stderr}"):
        return []
    return dc.load_objects(proc.stdout, "kustomize")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--renderer", default="")
    ap.add_argument("--kubectl", default="kubectl")
    ap.add_argument("--node", default=None)
    args = ap.parse_args()
    if chart_render.missing(args.renderer):
        return SKIP
    try:
        node = k8s_schema.check_installed(args.node)
    except k8s_schema.ToolMissing as e:
        print(f"SKIP: {e}")
        return SKIP
    r = dc.Report()
    res = chart_render.render(args.renderer, os.path.join(args.root, CHART), report=False,
                              kube_version="v1.30.0")
    if not r.check(res.ok, f"chart render for Kubernetes 1.30 failed: {res.error}"):
        return r.finish("matchConditions")
    objs = [o for _, text in res.documents for o in dc.load_objects(text, "chart")]
    try:
        check_evaluator_reports_errors(node, r)
        check_conditions(node, "chart (Kubernetes 1.30)", conditions_of(objs, "chart", r), r)
        kobjs = kustomize_objects(args.root, args.kubectl, r)
        if kobjs:
            check_conditions(node, "kustomize base", conditions_of(kobjs, "kustomize base", r), r)
    except (RuntimeError, subprocess.TimeoutExpired, ValueError, KeyError) as e:
        r.check(False, f"evaluating the matchConditions: {e}")
    return r.finish("matchConditions")


if __name__ == "__main__":
    sys.exit(main())
