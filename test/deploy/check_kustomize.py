#!/usr/bin/env python3
"""deploy.kustomize: renders the kustomize base offline with `kubectl kustomize deploy/manifests`
and checks every object (deploy_checks.check_install): webhook paths, ports and Service name
against the binary's defaults, selectors, security context, least-privilege RBAC, certificate
wiring. Also checks that the kustomization lists every manifest file beside it.

Usage: check_kustomize.py --kubectl PATH --root REPO_ROOT
"""
import argparse
import os
import shutil
import subprocess
import sys

import yaml

import deploy_checks as dc


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
    return r.finish("kustomize base")


if __name__ == "__main__":
    sys.exit(main())
