#!/usr/bin/env python3
"""deploy.yamllint: yamllint --strict (config test/deploy/yamllint.yaml) over the chart's
Chart.yaml, values.yaml and alert rules (files/alerts.yaml), the kustomize base, the krew
manifest template and the config itself. Templates are Go templates, not YAML; deploy.chart_structure parses what they render.

Usage: run_yamllint.py --root REPO_ROOT [--yamllint PATH]
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys


def targets(root):
    chart = os.path.join(root, "deploy", "helm", "kuberay-tpu-webhook")
    return ([os.path.join(chart, "Chart.yaml"), os.path.join(chart, "values.yaml"),
             os.path.join(chart, "files", "alerts.yaml"),
             os.path.join(root, "test", "deploy", "yamllint.yaml"),
             os.path.join(root, "deploy", "krew", "tpu-slice.yaml")]
            + sorted(glob.glob(os.path.join(root, "deploy", "manifests", "**", "*.yaml"),
                               recursive=True)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--yamllint", default=shutil.which("yamllint"))
    args = ap.parse_args()
    if not args.yamllint or not os.path.exists(args.yamllint):
        print("FAIL: yamllint not found (Debian: yamllint; scripts/setup.sh installs it)")
        return 1
    files = targets(args.root)
    cfg = os.path.join(args.root, "test", "deploy", "yamllint.yaml")
    proc = subprocess.run([args.yamllint, "--strict", "-f", "parsable", "-c", cfg] + files,
                          capture_output=True, text=True)
    sys.stdout.write(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        print(f"yamllint: problems in {len(files)} files")
        return 1
    print(f"yamllint: {len(files)} files clean")
    return 0


if __name__ == "__main__":
    sys.exit(main())
