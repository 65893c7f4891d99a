#!/usr/bin/env python3
"""deploy.chart_helm: the chart through a real helm, when one is installed (skipped otherwise).

`helm lint --strict`, then `helm template` for every variant of check_chart.VARIANTS: refused
variants must fail with the same message; the others must pass the same install checks, and
their objects must equal what helmrender renders for them (so deploy.chart_structure, which
runs without helm, is known to agree with Helm), and every one must give the validating
webhook the kustomize base's rules (rayclusters, rayjobs and rayservices at CREATE and UPDATE).
The chart generates nothing and looks nothing up at render time, so helm's output and
helmrender's must be equal in every mode. The values of check_chart_schema.SCHEMA_CASES must be refused by
values.schema.json, naming the field, and those of ACCEPTED_CASES accepted. Variants that skip
the schema need helm 3.16 or newer (--skip-schema-validation); older ones skip those variants.

Usage: check_chart_helm.py --root REPO_ROOT --renderer HELMRENDER [--helm PATH] [--kubectl PATH]
Exit 77 (skipped) when no helm is found on PATH or given with --helm / $HELM.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import yaml

import chart_render
import check_chart as cc
import check_chart_schema as cs
import deploy_checks as dc

SKIP = 77
TIMEOUT = 120


def helm_template(helm, chart_dir, tmp, values, sets=(), skip_schema=False, namespace=None,
                  kube_version=None):
    vfile = os.path.join(tmp, "values.json")
    with open(vfile, "w") as f:
        json.dump(values, f)
    cmd = [helm, "template", chart_render.RELEASE, chart_dir, "--namespace",
           namespace or chart_render.NAMESPACE, "--kube-version",
           kube_version or chart_render.KUBE_VERSION, "-f", vfile]
    for s in sets:
        cmd += ["--set", s]
    if skip_schema:
        cmd.append("--skip-schema-validation")
    return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)


def strip_generated(objs):
    """Objects without the generated certificate material, which differs between renders."""
    out = []
    for o in objs:
        o = yaml.safe_load(yaml.safe_dump(o))
        if o["kind"] == "Secret":
            o["data"] = {k: "<generated>" for k in o.get("data", {})}
        for h in o.get("webhooks", []):
            if "caBundle" in h.get("clientConfig", {}):
                h["clientConfig"]["caBundle"] = "<generated>"
        out.append(o)
    return {(o["kind"], o["metadata"]["name"]): o for o in out}


def compare(vname, helm_objs, mine, r):
    """helm and helmrender render the same objects for a variant."""
    a, b = strip_generated(helm_objs), strip_generated(mine)
    r.check(set(a) == set(b), f"variant {vname!r}: helm renders {sorted(a)}, helmrender {sorted(b)}")
    for key in sorted(set(a) & set(b)):
        for d in dc.diff(a[key], b[key]):
            r.check(False, f"variant {vname!r} {key}: helm vs helmrender: {d}")


def check_variant(args, chart_dir, tmp, v, r):
    """One variant through helm; returns its objects when it renders."""
    proc = helm_template(args.helm, chart_dir, tmp, v.values, skip_schema=v.skip_schema,
                         namespace=v.release_ns, kube_version=v.kube_version)
    if v.skip_schema and "unknown flag: --skip-schema-validation" in proc.stderr:
        print(f"variant {v.name!r}: this helm has no --skip-schema-validation (3.16+); not run")
        return None
    if v.expect is None:
        want = cc.phrases(v.extra)
        r.check(proc.returncode != 0 and all(p in proc.stderr for p in want),
                f"variant {v.name!r}: helm should refuse with {want}, got rc "
                f"{proc.returncode}: {proc.stderr.strip()}")
        return None
    if not r.check(proc.returncode == 0, f"variant {v.name!r}: helm template failed: {proc.stderr}"):
        return None
    objs = dc.load_objects(proc.stdout, f"helm template, variant {v.name!r}")
    cc.check_variant(v.name, objs, v.expect, v.extra, r)
    mine = chart_render.render(args.renderer, chart_dir, values=v.values, report=False,
                               skip_schema=v.skip_schema, namespace=v.release_ns,
                               kube_version=v.kube_version)
    if r.check(mine.ok, f"variant {v.name!r}: helmrender failed: {mine.error}"):
        compare(v.name, objs, cc.objects_of(mine, f"helmrender {v.name!r}", r), r)
    return objs


def check_schema_cases(args, chart_dir, tmp, r):
    """values.schema.json through helm: the refused cases fail naming their field, the
    accepted ones render."""
    for what, values, sets, want in cs.SCHEMA_CASES:
        proc = helm_template(args.helm, chart_dir, tmp, values, sets)
        r.check(proc.returncode != 0 and all(p in proc.stderr for p in want),
                f"{what}: helm should refuse with {want}, got rc {proc.returncode}: "
                f"{proc.stderr.strip()}")
    for what, values in cs.ACCEPTED_CASES:
        proc = helm_template(args.helm, chart_dir, tmp, values)
        r.check(proc.returncode == 0, f"{what}: helm refuses it: {proc.stderr.strip()}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--helm", default=os.environ.get("HELM") or shutil.which("helm"))
    ap.add_argument("--renderer", default="")
    ap.add_argument("--kubectl", default="kubectl")
    args = ap.parse_args()
    if not args.helm or not os.path.exists(args.helm):
        print("SKIP: no helm binary (put one on PATH or set HELM) - deploy.chart_structure "
              "covers the chart without it")
        return SKIP
    if chart_render.missing(args.renderer):
        return SKIP
    chart_dir = os.path.join(args.root, cc.CHART)
    r = dc.Report()
    print(subprocess.run([args.helm, "version", "--short"], capture_output=True, text=True).stdout.strip())
    lint = subprocess.run([args.helm, "lint", "--strict", chart_dir], capture_output=True, text=True)
    r.check(lint.returncode == 0, f"helm lint --strict failed:\n{lint.stdout}{lint.stderr}")

    kobjs = cc.kustomize_objects(args.root, args.kubectl, r)
    rendered = []
    with tempfile.TemporaryDirectory() as tmp:
        for v in cc.VARIANTS:
            if v.lookup:
                print(f"variant {v.name!r}: needs a cluster for lookup; deploy.chart_structure "
                      "checks it with helmrender's stub")
                continue
            objs = check_variant(args, chart_dir, tmp, v, r)
            if objs is not None:
                rendered.append((v.name, objs, v.expect))
                if v.name == cc.KUSTOMIZE_VARIANT and kobjs is not None:
                    cc.compare_with_kustomize(objs, kobjs, r)
        check_schema_cases(args, chart_dir, tmp, r)
    # Every variant helm renders validates what the kustomize base validates.
    cc.check_validating_everywhere(rendered, kobjs, r, renderer="helm")
    return r.finish("chart with helm")


if __name__ == "__main__":
    sys.exit(main())
