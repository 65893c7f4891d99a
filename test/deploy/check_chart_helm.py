#!/usr/bin/env python3
"""deploy.chart_helm: the chart through a real helm, when one is installed (skipped otherwise).

`helm lint`, then `helm template` for every variant of check_chart.VARIANTS: refused variants
must fail with the same message; the others must pass the same install checks, and their
objects must equal what gotemplate.py renders for them (so the helm-less structural test is
known to agree with Helm), and every one must give the validating webhook the kustomize base's
rules (rayclusters, rayjobs and rayservices at CREATE and UPDATE). In selfSigned mode the
generated certificate is inspected with openssl: it must be signed by the CA in caBundle and
name the webhook Service.

Usage: check_chart_helm.py --root REPO_ROOT [--helm PATH] [--kubectl PATH]
Exit 77 (skipped) when no helm is found on PATH or given with --helm / $HELM.
"""
import argparse
import base64
import os
import shutil
import subprocess
import sys
import tempfile

import yaml

import check_chart as cc
import deploy_checks as dc

SKIP = 77


def helm_template(helm, chart_dir, values_file):
    return subprocess.run([helm, "template", "kuberay-tpu-webhook", chart_dir, "--namespace",
                           "default", "-f", values_file], capture_output=True, text=True)


def check_certificate(objs, r, tmp):
    """selfSigned: the Secret's certificate is signed by caBundle's CA and names the Service."""
    secret = next(o for o in objs if o["kind"] == "Secret")
    paths = {}
    for key in ("ca.crt", "tls.crt", "tls.key"):
        paths[key] = os.path.join(tmp, key)
        with open(paths[key], "wb") as f:
            f.write(base64.b64decode(secret["data"][key]))
    openssl = shutil.which("openssl")
    if not r.check(openssl is not None, "openssl not found (scripts/setup.sh installs it)"):
        return
    v = subprocess.run([openssl, "verify", "-CAfile", paths["ca.crt"], paths["tls.crt"]],
                       capture_output=True, text=True)
    r.check(v.returncode == 0, f"selfSigned: certificate not signed by the CA: {v.stdout}{v.stderr}")
    t = subprocess.run([openssl, "x509", "-in", paths["tls.crt"], "-noout", "-text"],
                       capture_output=True, text=True)
    r.check(f"DNS:{dc.NAME}.{dc.NAMESPACE}.svc" in t.stdout,
            "selfSigned: certificate does not name the webhook Service")
    for cfg in objs:
        for h in cfg.get("webhooks", []):
            r.check(h["clientConfig"].get("caBundle") == secret["data"]["ca.crt"],
                    f"{cfg['metadata']['name']}: caBundle is not the Secret's CA")


def strip_generated(objs):
    """Objects without the generated certificate material, which differs between renderers."""
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--helm", default=os.environ.get("HELM") or shutil.which("helm"))
    ap.add_argument("--kubectl", default="kubectl")
    args = ap.parse_args()
    if not args.helm or not os.path.exists(args.helm):
        print("SKIP: no helm binary (put one on PATH or set HELM) - deploy.chart_structure "
              "covers the chart without it")
        return SKIP
    chart_dir = os.path.join(args.root, cc.CHART)
    r = dc.Report()
    print(subprocess.run([args.helm, "version", "--short"], capture_output=True, text=True).stdout.strip())

    lint = subprocess.run([args.helm, "lint", "--strict", chart_dir], capture_output=True, text=True)
    r.check(lint.returncode == 0, f"helm lint --strict failed:\n{lint.stdout}{lint.stderr}")

    chart, values, files, defines = cc.load_chart(chart_dir, r)
    rendered = []
    with tempfile.TemporaryDirectory() as tmp:
        vfile = os.path.join(tmp, "values.yaml")
        for vname, over, lookup, expect, extra in cc.VARIANTS:
            if lookup:
                print(f"variant {vname!r}: needs a cluster for lookup; gotemplate.py checks it")
                continue
            with open(vfile, "w") as f:
                yaml.safe_dump(over, f)
            proc = helm_template(args.helm, chart_dir, vfile)
            if expect is None:
                r.check(proc.returncode != 0 and extra in proc.stderr,
                        f"variant {vname!r}: helm should refuse with {extra!r}, got rc "
                        f"{proc.returncode}: {proc.stderr.strip()}")
                continue
            if not r.check(proc.returncode == 0, f"variant {vname!r}: helm template failed: {proc.stderr}"):
                continue
            objs = dc.load_objects(proc.stdout, f"helm template, variant {vname!r}")
            self_signed = expect.get("cert_mode") == "selfSigned"
            exp = dict(expect, ca_bundle=None) if self_signed else expect
            cc.check_variant(vname, objs, exp, None if self_signed else extra, r)
            rendered.append((vname, objs, expect))
            if self_signed:
                check_certificate(objs, r, tmp)
            # gotemplate.py must agree with helm on this variant.
            mine = cc.objects_of(cc.render(files, defines, chart, cc.merge(values, over), None,
                                           set(), set()), f"gotemplate {vname!r}", r)
            a, b = strip_generated(objs), strip_generated(mine)
            r.check(set(a) == set(b), f"variant {vname!r}: helm renders {sorted(a)}, "
                                      f"gotemplate.py {sorted(b)}")
            for key in sorted(set(a) & set(b)):
                for d in dc.diff(a[key], b[key]):
                    r.check(False, f"variant {vname!r} {key}: helm vs gotemplate.py: {d}")
            if vname == "defaults":
                kobjs = cc.kustomize_objects(args.root, args.kubectl, r)
                if kobjs is not None:
                    cc.compare_with_kustomize(objs, kobjs, r)
    # Every variant helm renders validates what the kustomize base validates.
    cc.check_validating_everywhere(rendered, cc.kustomize_objects(args.root, args.kubectl, r), r,
                                   renderer="helm")
    return r.finish("chart with helm")


if __name__ == "__main__":
    sys.exit(main())
