#!/usr/bin/env python3
"""Applies every JSON Patch the unit tests recorded with `kubectl patch --local --type=json` and
checks that Kubernetes' own patch code accepts it and produces exactly the Pod the webhook meant.

usage: kubectl_patch_test.py RECORD_DIR [MIN_PATCHES]
"""
import concurrent.futures
import glob
import json
import os
import shutil
import subprocess
import sys


def check(base):
    with open(base + ".patch.json") as f:
        patch = f.read()
    with open(base + ".mutated.json") as f:
        want = json.load(f)
    out = subprocess.run(
        ["kubectl", "patch", "--local", "--type=json", "-p", patch, "-f", base + ".pod.json", "-o", "json"],
        capture_output=True, text=True, timeout=60,
        env=dict(os.environ, KUBECONFIG="/dev/null"))
    name = os.path.basename(base)
    if out.returncode != 0:
        return f"{name}: kubectl refused the patch: {out.stderr.strip()}"
    got = json.loads(out.stdout)
    if got != want:
        return f"{name}: kubectl's result differs from the webhook's mutated Pod"
    return None


def main():
    record_dir = sys.argv[1]
    minimum = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    if shutil.which("kubectl") is None:
        print("kubectl not found: run scripts/setup.sh (it installs kubernetes-client)")
        return 1
    bases = sorted(p[: -len(".patch.json")] for p in glob.glob(os.path.join(record_dir, "*.patch.json")))
    if len(bases) < minimum:
        print(f"only {len(bases)} recorded patches in {record_dir}, expected at least {minimum}: "
              "run the unit tests first")
        return 1
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        failures = [r for r in pool.map(check, bases) if r]
    for f in failures:
        print("FAIL", f)
    print(f"{len(bases) - len(failures)}/{len(bases)} patches applied by kubectl as the webhook meant")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
