"""Renders the Helm chart with helmrender and reads what it prints.

helmrender (test/deploy/helmrender, built by CMake into the build directory) does what
`helm template` does, with Helm's own parts: Go's text/template with missingkey=zero, Sprig's
functions plus Helm's (include, tpl, required, lookup, toYaml, ...), sigs.k8s.io/yaml, and
values.schema.json applied with gojsonschema. Its --report adds what Helm does not print: the
rendered NOTES.txt, which branch of every if/with/range the render took and which values it
read (helmrender/coverage.go).

    res = chart_render.render(renderer, chart_dir, values={"tpuWebhook": {...}})
    res.ok, res.error          # exit status 0; helmrender's "Error: ..." message
    res.documents              # [(source file, document text)], in helm template's order
    res.notes, res.report      # NOTES.txt; the --report JSON (None without report=True)
"""

import json
import os
import re
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor

RELEASE = "kuberay-tpu-webhook"
# The release namespace (helm install -n) of a render unless a test gives another: the Go
# webhook's ray-system, where the chart's defaults then put every object, as the kustomize base.
NAMESPACE = "ray-system"
# The Kubernetes version of .Capabilities unless a test gives another (helm install reads it from
# the cluster; helm template takes --kube-version).
KUBE_VERSION = "v1.32.0"
TIMEOUT = 60  # seconds for one render (a selfSigned render generates two RSA keys)
SOURCE = re.compile(r"(?m)^---\n# Source: (.+)\n")


class Rendered:
    """What one run of helmrender gave."""

    def __init__(self, returncode, stdout, stderr, report):
        self.ok = returncode == 0
        self.returncode = returncode
        self.stdout = stdout
        self.error = stderr.strip()
        self.report = report
        self.notes = (report or {}).get("notes", "")
        parts = SOURCE.split(stdout)
        self.documents = list(zip(parts[1::2], parts[2::2]))


def available(renderer):
    """True when renderer is an executable file."""
    return bool(renderer) and os.path.isfile(renderer) and os.access(renderer, os.X_OK)


def missing(renderer):
    """False when renderer is usable; else prints why a check must skip, and returns True."""
    if available(renderer):
        return False
    print(f"SKIP: helmrender is not built ({renderer or 'no --renderer'}); CMake builds "
          "it with go, which scripts/setup.sh installs")
    return True


def render(renderer, chart_dir, values=None, lookup=None, sets=(), skip_schema=False,
           report=True, extra_args=(), namespace=None, kube_version=None):
    """Runs helmrender on chart_dir with the values (a dict, written as a -f file), --set
    arguments and lookup objects given, in release namespace `namespace` (NAMESPACE) for
    Kubernetes `kube_version` (KUBE_VERSION), and returns a Rendered."""
    with tempfile.TemporaryDirectory(prefix="helmrender-") as tmp:
        cmd = [renderer, "--name", RELEASE, "--namespace", namespace or NAMESPACE,
               "--kube-version", kube_version or KUBE_VERSION, *extra_args]
        if values is not None:
            cmd += ["-f", _write(tmp, "values.json", values)]
        for s in sets:
            cmd += ["--set", s]
        if lookup:
            cmd += ["--lookup", _write(tmp, "lookup.json", lookup)]
        if skip_schema:
            cmd.append("--skip-schema-validation")
        report_file = os.path.join(tmp, "report.json")
        if report:
            cmd += ["--report", report_file]
        cmd.append(chart_dir)
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT,
                               stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return Rendered(-1, "", f"helmrender did not finish within {TIMEOUT} s", None)
        rep = None
        if report and os.path.exists(report_file):
            with open(report_file) as f:
                rep = json.load(f)
        return Rendered(p.returncode, p.stdout, p.stderr, rep)


def render_many(renderer, chart_dir, jobs):
    """Renders [dict of render()'s keyword arguments, ...] concurrently, results in order."""
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        futures = [pool.submit(render, renderer, chart_dir, **job) for job in jobs]
        return [f.result() for f in futures]


def _write(tmp, name, data):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        json.dump(data, f)  # JSON is YAML: exact types, no YAML 1.1 surprises
    return path
