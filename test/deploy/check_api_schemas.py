#!/usr/bin/env python3
"""deploy.api_schemas: the Kubernetes objects the project ships and tests with are valid against
the Kubernetes API schemas (k8s_schema.py, test/deploy/schema/validate.mjs: types, required
fields, enums, formats, unknown fields):

- the kustomize base, rendered offline with `kubectl kustomize deploy/manifests`;
- every object in the YAML and JSON files under examples/ and test/fixtures/: core objects, the
  items of v1 Lists, the Pods inside AdmissionReviews (request.object, request.oldObject), and
  the pod templates inside RayClusters, RayJobs and RayServices, checked as v1 PodTemplates
  (ray.io has no model: the rest of those objects is not checked). Files that hold no
  Kubernetes object (expected responses, configs) are listed as skipped, and so are the files
  in UNPARSEABLE, which are not YAML on purpose (none today);
- and that the validator catches breakage: each case of breakage_cases() breaks a copy of one
  object and must be reported exactly at the broken field, and the command line keeps its
  contract (exit 0 valid, 1 problems, 2 parse or usage error).

Usage: check_api_schemas.py --root REPO_ROOT --kubectl PATH [--node PATH]
Exits 77 (skipped; a failure under WEBHOOK_REQUIRE_ALL_TESTS) when node or the validator's npm
packages are missing: scripts/setup.sh installs them.
"""
import argparse
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile

import yaml

import deploy_checks as dc
import k8s_schema

FIXTURE_DIRS = ("examples", os.path.join("test", "fixtures"))


class FixtureLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """deploy_checks.UniqueKeyLoader, with libyaml's parser when PyYAML has it (the fixtures
    are large)."""


FixtureLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
                              dc._construct_mapping)

# Files that are not YAML on purpose, with the reason; any other file that does not parse fails.
UNPARSEABLE: dict = {}  # none today: the fuzzers' malformed inputs live in fuzz/regressions/

# Objects in fixtures that are invalid on purpose (the webhook's answer to input the API server
# would reject), each with exactly the problems it must be reported with: (JSON path, message).
EXPECTED_INVALID = {
    "test/fixtures/admission/deny-bad-tpu-quantity.json#request.object": [
        ('.spec.containers[0].resources.limits["google.com/tpu"]', 'format "quantity"')],
    "test/fixtures/admission/deny-env-not-array.json#request.object": [
        (".spec.containers[0].env", "must be array")],
}


def load_file(path):
    """The documents of a YAML or JSON file."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if path.endswith(".json"):
        return [json.loads(text)]
    return [d for d in yaml.load_all(text, Loader=FixtureLoader) if d is not None]


def is_object(doc):
    return isinstance(doc, dict) and ("apiVersion" in doc or "kind" in doc)


def pod_templates(obj):
    """(JSON path, template) of every pod template in a RayCluster, RayJob or RayService."""
    spec = obj.get("spec") or {}
    out = []
    cluster, prefix = spec, ".spec"
    if obj.get("kind") == "RayJob":
        cluster, prefix = spec.get("rayClusterSpec") or {}, ".spec.rayClusterSpec"
        if spec.get("submitterPodTemplate") is not None:
            out.append((".spec.submitterPodTemplate", spec["submitterPodTemplate"]))
    elif obj.get("kind") == "RayService":
        cluster, prefix = spec.get("rayClusterConfig") or {}, ".spec.rayClusterConfig"
    head = cluster.get("headGroupSpec")
    if isinstance(head, dict) and "template" in head:
        out.append((f"{prefix}.headGroupSpec.template", head["template"]))
    for i, group in enumerate(cluster.get("workerGroupSpecs") or []):
        if isinstance(group, dict) and "template" in group:
            out.append((f"{prefix}.workerGroupSpecs[{i}].template", group["template"]))
    return out


def list_items(docs):
    """docs with each v1 List replaced by its items, so that ray.io objects and AdmissionReviews
    inside a List are taken apart like top-level ones."""
    for doc in docs:
        if is_object(doc) and doc.get("apiVersion") == "v1" and doc.get("kind") == "List" \
                and isinstance(doc.get("items"), list):
            yield from doc["items"]
        else:
            yield doc


def fixture_batches(root, r):
    """The (where, objects) batches of examples/ and test/fixtures/, and what was skipped."""
    batches, skipped = [], {"no Kubernetes object": [], "not YAML on purpose": []}
    seen_unparseable = set()
    ray = {}
    for top in FIXTURE_DIRS:
        for d, dirs, files in os.walk(os.path.join(root, top)):
            dirs.sort()
            for name in sorted(files):
                if not name.endswith((".yaml", ".yml", ".json")):
                    continue
                path = os.path.join(d, name)
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                try:
                    docs = load_file(path)
                except (ValueError, UnicodeDecodeError, yaml.YAMLError) as e:
                    if r.check(rel in UNPARSEABLE, f"{rel}: does not parse: {e}"):
                        seen_unparseable.add(rel)
                        skipped["not YAML on purpose"].append(rel)
                    continue
                r.check(rel not in UNPARSEABLE,
                        f"{rel} parses now: take it off UNPARSEABLE ({UNPARSEABLE.get(rel)})")
                objs = []
                for doc in list_items(docs):
                    if not is_object(doc):
                        continue
                    api, kind = doc.get("apiVersion"), doc.get("kind")
                    if isinstance(api, str) and api.startswith("ray.io/"):
                        ray[kind] = ray.get(kind, 0) + 1
                        owner = (doc.get("metadata") or {}).get("name") or "(no name)"
                        for i, (where, tpl) in enumerate(pod_templates(doc)):
                            batches.append((f"{rel} ({kind} {owner} {where})", [{
                                "apiVersion": "v1", "kind": "PodTemplate",
                                "metadata": {"name": f"{owner}-template-{i}"},
                                "template": tpl}]))
                    elif api == "admission.k8s.io/v1" and kind == "AdmissionReview":
                        request = doc.get("request") or {}
                        for key in ("object", "oldObject"):
                            if request.get(key) is not None:
                                batches.append((f"{rel}#request.{key}", [request[key]]))
                    else:
                        objs.append(doc)
                if objs:
                    batches.append((rel, objs))
                elif not any(is_object(doc) for doc in docs):
                    skipped["no Kubernetes object"].append(rel)
    for rel in sorted(set(UNPARSEABLE) - seen_unparseable):
        r.check(os.path.exists(os.path.join(root, rel)), f"UNPARSEABLE lists {rel}, which is gone")
    return batches, skipped, ray


def named(objs, kind):
    return copy.deepcopy(next(o for o in objs if o["kind"] == kind))


def container(dep):
    return dep["spec"]["template"]["spec"]["containers"][0]


def breakage_cases(base):
    """(name, objects, [(JSON path, message)]) for each deliberate breakage: every expected
    problem must be reported and nothing else."""
    cases = []

    def case(name, kind, breaker, expect):
        obj = named(base, kind)
        breaker(obj)  # changes obj in place
        cases.append((name, [obj], expect))

    case("unknown field in a Deployment spec", "Deployment",
         lambda d: d["spec"].update(replicass=2), [(".spec.replicass", "unknown field")])
    case("a string where an integer goes", "Deployment",
         lambda d: d["spec"].update(replicas="2"), [(".spec.replicas", "must be integer")])
    case("a container without its name", "Deployment",
         lambda d: container(d).pop("name"),
         [(".spec.template.spec.containers[0].name", "required field is missing")])
    case("a webhook's sideEffects not in the enum", "MutatingWebhookConfiguration",
         lambda w: w["webhooks"][0].update(sideEffects="Sometimes"),
         [(".webhooks[0].sideEffects", 'must be one of "None", "NoneOnDryRun"')])
    case("a misspelt field deep in the pod template", "Deployment",
         lambda d: container(d).setdefault("securityContext", {}).update(readOnlyRootFS=True),
         [(".spec.template.spec.containers[0].securityContext.readOnlyRootFS", "unknown field")])
    case("a memory limit that is not a quantity", "Deployment",
         lambda d: container(d)["resources"].setdefault("limits", {}).update(memory="256MB"),
         [(".spec.template.spec.containers[0].resources.limits.memory", 'format "quantity"')])
    case("a label value that is not a string", "Service",
         lambda s: s["metadata"].setdefault("labels", {}).update(tier=1),
         [(".metadata.labels.tier", "must be string")])
    case("a Service port as a string", "Service",
         lambda s: s["spec"]["ports"][0].update(port="443"),
         [(".spec.ports[0].port", "must be integer")])
    case("a failurePolicy not in the enum", "ValidatingWebhookConfiguration",
         lambda w: w["webhooks"][0].update(failurePolicy="ignore"),
         [(".webhooks[0].failurePolicy", 'must be one of "Fail", "Ignore"')])
    case("an object without metadata.name", "ServiceAccount",
         lambda s: s["metadata"].pop("name"), [(".metadata.name", "required field is missing")])
    case("an unknown field in a cert-manager Certificate", "Certificate",
         lambda c: c["spec"].update(dnsName="x"), [(".spec.dnsName", "unknown field")])
    case("a wrong type in a cert-manager Issuer", "Issuer",
         lambda i: i["spec"].update(selfSigned="yes"), [(".spec.selfSigned", "must be object")])
    case("a removed API version", "PodDisruptionBudget",
         lambda p: p.update(apiVersion="policy/v1beta1"), [(".", "not a GA version")])
    case("a kind without a model", "Service",
         lambda o: o.update(apiVersion="example.com/v1", kind="Widget"),
         [(".", "no schema for apiVersion example.com/v1")])
    item = named(base, "Deployment")
    item["spec"]["paused"] = "no"
    cases.append(("a broken item of a v1 List", [{"apiVersion": "v1", "kind": "List",
                                                   "items": [item]}],
                  [(".items[0].spec.paused", "must be boolean")]))

    monitor = {"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
               "metadata": {"name": dc.NAME, "namespace": dc.NAMESPACE},
               "spec": {"selector": {"matchLabels": dict(dc.SELECTOR)},
                        "endpoints": [{"port": "https", "scheme": "https", "interval": "30s",
                                       "path": "/metrics",
                                       "tlsConfig": {"insecureSkipVerify": True}}]}}
    rule = {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
            "metadata": {"name": dc.NAME, "namespace": dc.NAMESPACE},
            "spec": {"groups": [{"name": "kuberay-tpu-webhook", "rules": [
                {"alert": "KuberayTpuWebhookDown", "expr": "up == 0", "for": "5m",
                 "labels": {"severity": "page"}, "annotations": {"summary": "down"}}]}]}}
    cases.append(("a valid ServiceMonitor and PrometheusRule", [monitor, rule], []))
    # The models' schemas lack fields named description; the validator must not call them unknown.
    cases.append(("a valid PriorityClass with a description", [{
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": dc.NAME}, "value": 1000, "description": "the webhook"}], []))
    broken_monitor = copy.deepcopy(monitor)
    broken_monitor["spec"]["endpoints"][0]["intervall"] = "30s"
    cases.append(("an unknown field in a ServiceMonitor", [broken_monitor],
                  [(".spec.endpoints[0].intervall", "unknown field")]))
    # PodMonitoring has no model in the packages: schema/crds/ holds one written from its CRD.
    pod_monitoring = {"apiVersion": "monitoring.googleapis.com/v1", "kind": "PodMonitoring",
                      "metadata": {"name": dc.NAME, "namespace": dc.NAMESPACE},
                      "spec": {"selector": {"matchLabels": dict(dc.SELECTOR)},
                               "endpoints": [{"port": "health", "path": "/metrics",
                                              "scheme": "http", "interval": "30s",
                                              "timeout": "10s"}]}}
    cases.append(("a valid PodMonitoring", [pod_monitoring], []))

    def broken_pm(name, breaker, expect):
        obj = copy.deepcopy(pod_monitoring)
        breaker(obj["spec"])
        cases.append((name, [obj], expect))
    broken_pm("a ServiceMonitor's field in a PodMonitoring",
              lambda s: s["endpoints"][0].update(scrapeTimeout="5s"),
              [(".spec.endpoints[0].scrapeTimeout", "unknown field")])
    broken_pm("an unknown field in a PodMonitoring's selector",
              lambda s: s["selector"].update(namespaceSelector={}),
              [(".spec.selector.namespaceSelector", "unknown field")])
    broken_pm("a PodMonitoring without endpoints", lambda s: s.pop("endpoints"),
              [(".spec.endpoints", "required field is missing")])
    broken_pm("a PodMonitoring interval that is no Prometheus duration",
              lambda s: s["endpoints"][0].update(interval="1.5s"),
              [(".spec.endpoints[0].interval", "must match pattern")])
    broken_pm("a PodMonitoring scheme not in the enum",
              lambda s: s["endpoints"][0].update(scheme="HTTP"),
              [(".spec.endpoints[0].scheme", 'must be one of "http", "https"')])
    broken_pm("a PodMonitoring scrape timeout longer than its interval",
              lambda s: s["endpoints"][0].update(interval="10s", timeout="1m"),
              [(".spec.endpoints[0].timeout", "must not be greater than scrape interval")])
    broken_rule = copy.deepcopy(rule)
    del broken_rule["spec"]["groups"][0]["rules"][0]["expr"]
    cases.append(("a PrometheusRule rule without expr", [broken_rule],
                  [(".spec.groups[0].rules[0].expr", "required field is missing")]))
    return cases


def split_lines(lines, wheres):
    """Problem lines by the batch they belong to (the longest where that prefixes the line)."""
    by_where = {w: [] for w in wheres}
    ordered = sorted(by_where, key=len, reverse=True)
    stray = []
    for line in lines:
        w = next((w for w in ordered if line.startswith(w + ": ")), None)
        (by_where[w] if w is not None else stray).append(line)
    return by_where, stray


def matches(lines, expect):
    """Whether lines are exactly the expected problems, one line each, in any order."""
    if len(lines) != len(expect):
        return False
    rest = list(lines)
    for path, msg in expect:
        sep = f": {path}: "
        hit = next((ln for ln in rest if sep in ln and msg in ln.split(sep, 1)[1]), None)
        if hit is None:
            return False
        rest.remove(hit)
    return True


def check_cli(node, base_text, r):
    """The command line: files and stdin, exit 0 / 1 / 2, one line per problem naming the file."""
    exe = [node, k8s_schema.VALIDATOR]
    with tempfile.TemporaryDirectory(prefix="api-schemas-") as tmp:
        good = os.path.join(tmp, "good.yaml")
        bad = os.path.join(tmp, "bad.yaml")
        dup = os.path.join(tmp, "dup.yaml")
        with open(good, "w") as f:
            f.write(base_text)
        with open(bad, "w") as f:
            # YAML 1.1 as kubectl reads it: an unquoted `on` is a boolean, not a string.
            f.write("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: ns}\n"
                    "data: {flag: on}\n---\napiVersion: v1\nkind: Service\n"
                    "metadata: {name: s, namespace: ns}\nspec: {portz: []}\n")
        with open(dup, "w") as f:
            f.write("apiVersion: v1\nkind: Service\nkind: Service\nmetadata: {name: s}\n")

        def run(args, stdin=None):
            return subprocess.run(exe + args, input=stdin, capture_output=True, text=True,
                                  timeout=k8s_schema.TIMEOUT)

        p = run([good])
        r.check(p.returncode == 0 and not p.stdout,
                f"validate.mjs on the kustomize base: exit {p.returncode}, want 0:\n"
                f"{p.stdout}{p.stderr}")
        p = run([good, bad])
        want = [f"{bad}: ConfigMap ns/c: .data.flag: must be string (got true)",
                f"{bad}: Service ns/s: .spec.portz: unknown field"]
        r.check(p.returncode == 1 and p.stdout.splitlines() == want,
                f"validate.mjs on a broken file: exit {p.returncode}, want 1 and\n"
                + "\n".join(want) + f"\ngot:\n{p.stdout}{p.stderr}")
        p = run([], stdin=open(bad).read())
        r.check(p.returncode == 1 and p.stdout.startswith("-: ConfigMap ns/c: "),
                f"validate.mjs reading stdin: exit {p.returncode}:\n{p.stdout}{p.stderr}")
        for args, what in (([dup], "a duplicate key"), ([os.path.join(tmp, "none.yaml")],
                                                         "a missing file"),
                           (["--bogus"], "an unknown option")):
            p = run(args)
            r.check(p.returncode == 2 and p.stderr,
                    f"validate.mjs on {what}: exit {p.returncode}, want 2 with a message")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--kubectl", default="kubectl")
    ap.add_argument("--node", default=None)
    args = ap.parse_args()
    try:
        node = k8s_schema.check_installed(args.node)
    except k8s_schema.ToolMissing as e:
        print(f"SKIP: {e}")
        return 77
    r = dc.Report()
    if not shutil.which(args.kubectl):
        print(f"FAIL: kubectl not found ({args.kubectl}); scripts/setup.sh installs it")
        return 1
    base_dir = os.path.join(args.root, "deploy", "manifests")
    proc = subprocess.run([args.kubectl, "kustomize", base_dir], capture_output=True, text=True,
                          timeout=120)
    if proc.returncode != 0:
        print(f"FAIL: kubectl kustomize {base_dir} exited {proc.returncode}:\n{proc.stderr}")
        return 1
    base = dc.load_objects(proc.stdout, "kubectl kustomize output")
    base_where = "deploy/manifests (kubectl kustomize)"

    batches = [(base_where, base)]
    fixtures, skipped, ray = fixture_batches(args.root, r)
    batches += fixtures
    cases = breakage_cases(base)
    batches += [(f"breakage: {name}", objs) for name, objs, _ in cases]
    lines = k8s_schema.validate_many(batches, node=node)
    by_where, stray = split_lines(lines, [w for w, _ in batches])
    r.check(not stray, "problem lines of no batch:\n  " + "\n  ".join(stray))

    for where, _ in [(base_where, base)] + fixtures:
        got = by_where[where]
        if where in EXPECTED_INVALID:
            r.check(matches(got, EXPECTED_INVALID[where]),
                    f"{where}: invalid on purpose, want exactly {EXPECTED_INVALID[where]}, got:\n  "
                    + "\n  ".join(got))
        else:
            r.check(not got, "not valid against the Kubernetes API schemas:\n  " + "\n  ".join(got))
    wheres = {w for w, _ in fixtures}
    for where in sorted(set(EXPECTED_INVALID) - wheres):
        r.check(False, f"EXPECTED_INVALID lists {where}, which is no longer among the fixtures")

    for name, _, expect in cases:
        where = f"breakage: {name}"
        got = by_where[where]
        if r.check(matches(got, expect), f"{where}: want exactly {expect}, got:\n  "
                                         + "\n  ".join(got)):
            print(f"caught: {name}: " + "; ".join(ln[len(where) + 2:] for ln in got)
                  if got else f"valid: {name}")

    check_cli(node, proc.stdout, r)

    n_objs = sum(len(objs) for w, objs in fixtures)
    templates = sum(1 for w, _ in fixtures if " (Ray" in w)
    print(f"validated the kustomize base ({len(base)} objects) and {n_objs} objects from "
          f"{len({w.split(' (')[0].split('#')[0] for w, _ in fixtures})} files under examples/ "
          f"and test/fixtures/, {templates} of them pod templates of ray.io objects")
    print("ray.io objects without a model (only their pod templates checked): "
          + ", ".join(f"{n} {k}" for k, n in sorted(ray.items())))
    for why, files in skipped.items():
        print(f"skipped, {why}: {len(files)} files"
              + (f" ({', '.join(files)})" if len(files) <= 5 else
                 f" (in {', '.join(sorted({os.path.dirname(f) for f in files}))})"))
    return r.finish("API schemas")


if __name__ == "__main__":
    sys.exit(main())
