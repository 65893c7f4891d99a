#!/usr/bin/env python3
"""deploy.kustomize: renders the kustomize base offline with `kubectl kustomize deploy/manifests`
and checks every object (deploy_checks.check_install): webhook paths, ports and Service name
against the binary's defaults, selectors, security context, least-privilege RBAC, certificate
wiring. Also checks that the kustomization lists every manifest file beside it.

Then an overlay to another namespace, written to a scratch directory next to a copy of the base:
`namespace: other-ns` with follow-namespace/ under `transformers:` (docs/install.md, 3c). Every
object and every reference must then name other-ns — the Certificate's DNS names, the
cert-manager.io/inject-ca-from annotations, the webhooks' Service and names, the RBAC subjects —
and no string may still hold ray-system. The same overlay without the transformer must fail that
check, naming the references it leaves behind (so the check is not vacuous).

The overlay needs kustomize 4.1 or newer (replacements), which kubectl embeds from 1.22 on. With
an older kubectl (Debian 12's kubernetes-client is 1.20) the overlay is not rendered, and the test
exits 77 (skipped) once everything else passed.

Usage: check_kustomize.py --kubectl PATH --root REPO_ROOT
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

import deploy_checks as dc

OTHER_NS = "other-ns"
SKIP = 77


def overlay_text(with_transformer):
    text = ("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
            f"namespace: {OTHER_NS}\nresources:\n  - ../manifests\n")
    if with_transformer:
        text += "transformers:\n  - ../manifests/follow-namespace\n"
    return text


def kustomize_version(kubectl):
    """(major, minor) of the kustomize kubectl embeds, or None when it is older than 4.1. kubectl
    1.24 and newer name it; 1.22 and 1.23 embed 4.2 and 4.4 without saying."""
    p = subprocess.run([kubectl, "version", "--client", "-o", "json"], capture_output=True,
                       text=True, timeout=30)
    try:
        info = json.loads(p.stdout)
    except ValueError:
        return None
    m = re.match(r"v?(\d+)\.(\d+)", info.get("kustomizeVersion", ""))
    if m:
        return (int(m.group(1)), int(m.group(2)))
    minor = re.match(r"\d+", str(info.get("clientVersion", {}).get("minor", "")))
    return (4, 2) if minor and int(minor.group()) >= 22 else None


def render_overlay(kubectl, base, with_transformer):
    """Renders the overlay next to a copy of the base; returns (objects or None, error)."""
    with tempfile.TemporaryDirectory(prefix="kustomize-overlay-") as tmp:
        shutil.copytree(base, os.path.join(tmp, "manifests"))
        os.mkdir(os.path.join(tmp, "overlay"))
        with open(os.path.join(tmp, "overlay", "kustomization.yaml"), "w") as f:
            f.write(overlay_text(with_transformer))
        proc = subprocess.run([kubectl, "kustomize", os.path.join(tmp, "overlay")],
                              capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        return None, proc.stderr.strip()
    return dc.load_objects(proc.stdout, "kubectl kustomize overlay output"), ""


def check_overlay(kubectl, base, r):
    """An overlay to OTHER_NS with follow-namespace keeps every reference consistent; without it,
    the same check fails."""
    objs, err = render_overlay(kubectl, base, True)
    if not r.check(objs is not None,
                   f"kubectl kustomize of an overlay with namespace: {OTHER_NS} and transformers: "
                   f"[follow-namespace] failed (replacements need kustomize 4.1 or newer, "
                   f"in kubectl 1.22 or newer):\n{err}"):
        return
    sub = dc.Report()
    try:
        dc.check_install(objs, sub, cert_mode="certManager", namespace=OTHER_NS)
    except (KeyError, TypeError, AttributeError, IndexError, ValueError) as e:
        sub.check(False, f"objects too malformed to check ({type(e).__name__}: {e})")
    left = [f"{o['kind']} {o['metadata']['name']}: {p}" for o in objs
            for p in dc.strings_naming(o, dc.NAMESPACE)]
    sub.check(not left, f"strings still naming {dc.NAMESPACE}: {left}")
    for f in sub.failures:
        r.check(False, f"overlay to {OTHER_NS}: {f}")
    print(f"overlay to {OTHER_NS} with follow-namespace: {len(objs)} objects, "
          f"{len(sub.failures)} problem(s)")

    bare, err = render_overlay(kubectl, base, False)
    if not r.check(bare is not None, f"kubectl kustomize of an overlay without "
                                     f"follow-namespace failed:\n{err}"):
        return
    sub = dc.Report()
    dc.check_install(bare, sub, cert_mode="certManager", namespace=OTHER_NS)
    caught = " | ".join(sub.failures)
    r.check("inject-ca-from" in caught and "dnsNames" in caught,
            "the overlay without follow-namespace passes the consistency check, which then "
            f"proves nothing: {caught or 'no failure'}")
    print(f"overlay to {OTHER_NS} without follow-namespace: caught as inconsistent "
          f"({len(sub.failures)} problem(s))")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kubectl", default="kubectl")
    ap.add_argument("--root", required=True)
    args = ap.parse_args()
    base = os.path.join(args.root, "deploy", "manifests")
    r = dc.Report()
    if not shutil.which(args.kubectl):
        print(f"FAIL: kubectl not found ({args.kubectl}); scripts/setup.sh installs it")
        return 1
    proc = subprocess.run([args.kubectl, "kustomize", base], capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"FAIL: kubectl kustomize {base} exited {proc.returncode}:\n{proc.stderr}")
        return 1
    objs = dc.load_objects(proc.stdout, "kubectl kustomize output")
    print(f"rendered {len(objs)} objects: "
          + ", ".join(f"{o['kind']}/{o['metadata']['name']}" for o in objs))
    try:
        dc.check_install(objs, r, cert_mode="certManager", expect_defaults=True)
    except (KeyError, TypeError, AttributeError, IndexError, ValueError) as e:
        r.check(False, f"objects too malformed to check ({type(e).__name__}: {e})")

    with open(os.path.join(base, "kustomization.yaml")) as f:
        k = yaml.safe_load(f)
    listed = set(k.get("resources", []))
    present = {n for n in os.listdir(base) if n.endswith((".yaml", ".yml"))} - {"kustomization.yaml"}
    r.check(listed == present, f"kustomization resources {sorted(listed)} != files {sorted(present)}")
    for key in ("namespace", "namePrefix", "nameSuffix", "commonLabels", "labels"):
        r.check(key not in k, f"kustomization sets {key}: it would rename or relabel objects "
                              "whose names and selectors must stay the Go webhook's")
    version = kustomize_version(args.kubectl)
    if version is None or version < (4, 1):
        status = r.finish("kustomize base")
        print(f"SKIP: the overlay to {OTHER_NS} is not checked: {args.kubectl} embeds kustomize "
              f"{version or 'older than 4.1'}, without replacements (kubectl 1.22 or newer has it)")
        return status or SKIP
    check_overlay(args.kubectl, base, r)
    return r.finish("kustomize base")


if __name__ == "__main__":
    sys.exit(main())
