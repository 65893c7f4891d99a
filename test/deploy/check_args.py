#!/usr/bin/env python3
"""deploy.args_accepted: the built binary accepts the args every install renders.

For the kustomize base and every chart variant of check_chart.VARIANTS that renders, takes the
webhook container's args, expands their $(VAR) references as kubelet does from the container's
env (a fieldRef becomes a stand-in value, a resourceFieldRef to limits.memory the limit in
bytes, as the Downward API reports it), and runs the binary with them followed by --help. The
binary applies flags left to right and stops at --help, so exit 0 means every rendered flag and
value was accepted; a bad one exits 2 naming it. Also checks that deploy_checks.BINARY_FLAGS,
the list the other deploy checks hold args to, is exactly the flag list of the binary's --help.

The chart variants are rendered by helmrender (chart_render.py), Helm's engine built from
test/deploy/helmrender.

Usage: check_args.py --root REPO_ROOT --build-dir BUILD --renderer HELMRENDER [--kubectl PATH]
Exit 77 (skipped) when the binary or helmrender is not built.
"""
import argparse
import os
import re
import subprocess
import sys

import chart_render
import check_chart as cc
import deploy_checks as dc

SKIP = 77
BINARY = os.path.join("cmd", "webhook", "kuberay-tpu-webhook")
# Stand-ins for the Downward API fields the manifests read.
FIELD_VALUES = {"metadata.namespace": dc.NAMESPACE, "metadata.name": "kuberay-tpu-webhook-0"}


def env_values(pod, container, where, r):
    """The container's env as kubelet resolves it: value, fieldRef or resourceFieldRef."""
    out = {}
    limits = {c.get("name"): (c.get("resources") or {}).get("limits") or {}
              for c in pod.get("containers", [])}
    for e in container.get("env", []):
        name, src = e.get("name"), e.get("valueFrom") or {}
        if "value" in e:
            out[name] = str(e["value"])
        elif "fieldRef" in src:
            path = src["fieldRef"].get("fieldPath")
            r.check(path in FIELD_VALUES, f"{where}: env {name} reads field {path!r}")
            out[name] = FIELD_VALUES.get(path, "stand-in")
        elif "resourceFieldRef" in src:
            ref = src["resourceFieldRef"]
            owner = ref.get("containerName") or container.get("name")
            res = ref.get("resource", "")
            if not r.check(res == "limits.memory" and str(ref.get("divisor", "1")) == "1"
                           and owner in limits,
                           f"{where}: env {name} reads {ref}; this check knows limits.memory "
                           "of a container of the Pod, in bytes"):
                continue
            n = dc.quantity_bytes(limits[owner].get("memory", ""))
            if r.check(n is not None, f"{where}: env {name}: container {owner} has no "
                                      f"limits.memory quantity ({limits[owner]})"):
                out[name] = str(n)
        else:
            r.check(False, f"{where}: env {name} has a source this check does not know: {e}")
    return out


def expand(arg, env, where, r):
    """Kubernetes' $(VAR) expansion in args: $$ escapes a $, an unknown $(VAR) stays as it is
    (and here is an error: the binary would get the literal text)."""
    def sub(m):
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        r.check(name in env, f"{where}: arg {arg!r} references $({name}), which the container's "
                             "env does not define (kubelet would pass it unexpanded)")
        return env.get(name, m.group(0))
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)", sub, arg)


def help_flags(text):
    """The flag names --help lists: each line that starts with --name."""
    return set(re.findall(r"(?m)^\s+(?:-\w,\s+)?--([a-z][a-z0-9-]*)", text))


def run_binary(binary, args, where, r):
    try:
        p = subprocess.run([binary, *args, "--help"], capture_output=True, text=True, timeout=20,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        r.check(False, f"{where}: the binary did not exit within 20 s with --help")
        return None
    ok = r.check(p.returncode == 0 and "Usage:" in p.stdout,
                 f"{where}: the binary refuses the rendered args (exit {p.returncode}): "
                 f"{p.stderr.strip()[:400]}\nargs: {args}")
    return p if ok else None


def check_deployment(binary, objs, where, r):
    dep = [o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"] == dc.NAME]
    if not r.check(len(dep) == 1, f"{where}: no Deployment {dc.NAME}"):
        return
    pod = dep[0]["spec"]["template"]["spec"]
    c = pod["containers"][0]
    env = env_values(pod, c, where, r)
    args = [expand(a, env, where, r) for a in c.get("args", [])]
    if run_binary(binary, args, where, r):
        print(f"{where}: accepted {' '.join(args)}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--kubectl", default="kubectl")
    ap.add_argument("--renderer", default="")
    args = ap.parse_args()
    binary = os.path.join(args.build_dir, BINARY)
    if not os.path.exists(binary):
        print(f"SKIP: {binary} is not built yet")
        return SKIP
    if chart_render.missing(args.renderer):
        return SKIP
    r = dc.Report()

    # The binary's own flag list is the one the other checks use.
    p = run_binary(binary, [], "--help alone", r)
    if p:
        listed = help_flags(p.stdout) - {"help", "version"}
        r.check(listed == dc.BINARY_FLAGS,
                f"deploy_checks.BINARY_FLAGS differs from the binary's --help: only in --help "
                f"{sorted(listed - dc.BINARY_FLAGS)}, only in BINARY_FLAGS "
                f"{sorted(dc.BINARY_FLAGS - listed)}")

    kobjs = cc.kustomize_objects(args.root, args.kubectl, r)
    if kobjs is not None:
        check_deployment(binary, kobjs, "kustomize base", r)

    chart_dir = os.path.join(args.root, cc.CHART)
    variants = [v for v in cc.VARIANTS if v.expect is not None]  # refused ones: check_chart
    for v, res in zip(variants, cc.render_variants(args.renderer, chart_dir, variants)):
        if r.check(res.ok, f"chart variant {v.name!r}: render failed: {res.error}"):
            objs = cc.objects_of(res, f"variant {v.name!r}", r)
            check_deployment(binary, objs, f"chart variant {v.name!r}", r)
    return r.finish("rendered args")


if __name__ == "__main__":
    sys.exit(main())
