#!/usr/bin/env python3
"""deploy.krew_manifest: deploy/krew/tpu-slice.yaml, the krew plugin manifest template of
kubectl tpu-slice, is YAML with the fields krew requires (apiVersion
krew.googlecontainertools.github.com/v1alpha2, kind Plugin, metadata.name, spec.version,
spec.shortDescription, spec.platforms each with selector, uri, sha256 and bin), uses only the
placeholders its header documents, and, filled in as a release fills it (envsubst), has a version
of the form vX.Y.Z, https archive URIs, 64-hex sha256 sums and as `bin` the binary CMake builds.

Usage: check_krew.py --root REPO_ROOT
"""
import argparse
import os
import re
import string
import sys

import yaml

PLACEHOLDERS = {"VERSION", "HOMEPAGE", "DOWNLOAD_URL", "SHA256_LINUX_AMD64", "SHA256_LINUX_ARM64"}
SAMPLE = {"VERSION": "1.2.3", "HOMEPAGE": "https://example.com/kuberay-tpu-webhook",
          "DOWNLOAD_URL": "https://example.com/releases/v1.2.3",
          "SHA256_LINUX_AMD64": "a" * 64, "SHA256_LINUX_ARM64": "b" * 64}


def problems_of(manifest, filled):
    """What krew would refuse in `manifest` (`filled`: placeholders substituted)."""
    out = []
    if manifest.get("apiVersion") != "krew.googlecontainertools.github.com/v1alpha2":
        out.append("apiVersion is %r" % manifest.get("apiVersion"))
    if manifest.get("kind") != "Plugin":
        out.append("kind is %r" % manifest.get("kind"))
    if (manifest.get("metadata") or {}).get("name") != "tpu-slice":
        out.append("metadata.name is not tpu-slice")
    spec = manifest.get("spec") or {}
    for field in ("version", "shortDescription", "platforms"):
        if not spec.get(field):
            out.append("spec.%s is missing" % field)
    if filled and not re.fullmatch(r"v\d+\.\d+\.\d+", str(spec.get("version", ""))):
        out.append("spec.version %r is not vX.Y.Z" % spec.get("version"))
    arches = set()
    for i, p in enumerate(spec.get("platforms") or []):
        labels = ((p.get("selector") or {}).get("matchLabels") or {})
        if not labels.get("os") or not labels.get("arch"):
            out.append("platform %d: selector.matchLabels needs os and arch" % i)
        arches.add((labels.get("os"), labels.get("arch")))
        for field in ("uri", "sha256", "bin"):
            if not p.get(field):
                out.append("platform %d: %s is missing" % (i, field))
        # krew links the plugin as kubectl-<name with - as _>; the archive holds what CMake builds
        if p.get("bin") != "kubectl-tpu_slice":
            out.append("platform %d: bin is %r, not kubectl-tpu_slice" % (i, p.get("bin")))
        if filled:
            if not re.fullmatch(r"https://\S+\.tar\.gz", str(p.get("uri", ""))):
                out.append("platform %d: uri %r is not an https .tar.gz" % (i, p.get("uri")))
            if not re.fullmatch(r"[0-9a-f]{64}", str(p.get("sha256", ""))):
                out.append("platform %d: sha256 %r is not 64 hex digits" % (i, p.get("sha256")))
    if arches != {("linux", "amd64"), ("linux", "arm64")}:
        out.append("platforms are %s, not linux amd64 and arm64" % sorted(arches, key=str))
    return out


def check(path):
    with open(path) as f:
        text = f.read()
    problems = problems_of(yaml.safe_load(text), filled=False)
    used = set(re.findall(r"\$\{(\w+)\}", text))
    if used - PLACEHOLDERS:
        problems.append("undocumented placeholders %s" % sorted(used - PLACEHOLDERS))
    for name in PLACEHOLDERS - used:
        problems.append("placeholder ${%s} is not used" % name)
    filled = string.Template(text).substitute(SAMPLE)
    manifest = yaml.safe_load(filled)
    problems += problems_of(manifest, filled=True)
    spec = manifest.get("spec") or {}
    if spec.get("version") != "v1.2.3":
        problems.append("spec.version %r is not v${VERSION}" % spec.get("version"))
    for p in spec.get("platforms") or []:
        arch = ((p.get("selector") or {}).get("matchLabels") or {}).get("arch")
        if p.get("sha256") != SAMPLE.get("SHA256_LINUX_%s" % str(arch).upper()):
            problems.append("platform %s: sha256 is not ${SHA256_LINUX_%s}"
                            % (arch, str(arch).upper()))
        if "1.2.3" not in str(p.get("uri")) or arch not in str(p.get("uri")):
            problems.append("platform %s: uri %r names another version or arch"
                            % (arch, p.get("uri")))
    return problems


def self_test():
    """The checks fail on broken manifests."""
    good = {"apiVersion": "krew.googlecontainertools.github.com/v1alpha2", "kind": "Plugin",
            "metadata": {"name": "tpu-slice"},
            "spec": {"version": "v1.2.3", "shortDescription": "x",
                     "platforms": [{"selector": {"matchLabels": {"os": "linux", "arch": a}},
                                    "uri": "https://e.com/x_%s.tar.gz" % a, "sha256": "c" * 64,
                                    "bin": "kubectl-tpu_slice"} for a in ("amd64", "arm64")]}}
    assert problems_of(good, True) == [], problems_of(good, True)
    breakages = [
        lambda m: m.update(kind="Plugins"),
        lambda m: m["metadata"].update(name="tpu_slice"),
        lambda m: m["spec"].update(version="1.2.3"),
        lambda m: m["spec"].pop("shortDescription"),
        lambda m: m["spec"]["platforms"][0].pop("selector"),
        lambda m: m["spec"]["platforms"][0].update(sha256="abc"),
        lambda m: m["spec"]["platforms"][1].update(bin="kubectl-tpu-slice"),
        lambda m: m["spec"]["platforms"][1].update(uri="http://e.com/x.tar.gz"),
        lambda m: m["spec"]["platforms"].pop(),
    ]
    for i, breaking in enumerate(breakages):
        m = yaml.safe_load(yaml.safe_dump(good))
        breaking(m)
        assert problems_of(m, True), "breakage %d went unnoticed" % i


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    args = ap.parse_args()
    self_test()
    path = os.path.join(args.root, "deploy", "krew", "tpu-slice.yaml")
    problems = check(path)
    for p in problems:
        print("FAIL: %s: %s" % (path, p))
    if problems:
        return 1
    print("krew manifest: %s has krew's fields and fills in as a release does" % path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
