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


def _arguments(tmp, chart_dir, values=None, lookup=None, sets=(), skip_schema=False,
               report=True, extra_args=(), namespace=None, kube_version=None):
    """helmrender's arguments for a render (render()'s keywords), its files written in tmp, and
    the report file it writes (None without report)."""
    args = ["--name", RELEASE, "--namespace", namespace or NAMESPACE,
            "--kube-version", kube_version or KUBE_VERSION, *extra_args]
    if values is not None:
        args += ["-f", _write(tmp, "values.json", values)]
    for s in sets:
        args += ["--set", s]
    if lookup:
        args += ["--lookup", _write(tmp, "lookup.json", lookup)]
    if skip_schema:
        args.append("--skip-schema-validation")
    report_file = os.path.join(tmp, "report.json") if report else None
    if report_file:
        args += ["--report", report_file]
    return args + [chart_dir], report_file


def _rendered(returncode, stdout, stderr, report_file):
    rep = None
    if report_file and os.path.exists(report_file):
        with open(report_file) as f:
            rep = json.load(f)
    return Rendered(returncode, stdout, stderr, rep)


def render(renderer, chart_dir, **job):
    """Runs helmrender on chart_dir with the values (a dict, written as a -f file), --set
    arguments and lookup objects given, in release namespace `namespace` (NAMESPACE) for
    Kubernetes `kube_version` (KUBE_VERSION), and returns a Rendered. The keywords: values,
    lookup, sets, skip_schema, report (True), extra_args, namespace, kube_version."""
    with tempfile.TemporaryDirectory(prefix="helmrender-") as tmp:
        args, report_file = _arguments(tmp, chart_dir, **job)
        try:
            p = subprocess.run([renderer, *args], capture_output=True, text=True,
                               timeout=TIMEOUT, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return Rendered(-1, "", f"helmrender did not finish within {TIMEOUT} s", None)
        return _rendered(p.returncode, p.stdout, p.stderr, report_file)


def render_many(renderer, chart_dir, jobs):
    """Renders [dict of render()'s keyword arguments, ...] in one run of helmrender (--batch:
    each render as a run of its own would, without a process each), results in order."""
    with tempfile.TemporaryDirectory(prefix="helmrender-") as tmp:
        runs = []
        for i, job in enumerate(jobs):
            job_dir = os.path.join(tmp, str(i))
            os.mkdir(job_dir)
            runs.append(_arguments(job_dir, chart_dir, **job))
        batch = _write(tmp, "batch.json", [{"args": args} for args, _ in runs])
        limit = TIMEOUT + 5 * len(jobs)
        results = None
        try:
            p = subprocess.run([renderer, "--batch", batch], capture_output=True, text=True,
                               timeout=limit, stdin=subprocess.DEVNULL)
            why = f"helmrender --batch failed (exit {p.returncode}): {p.stderr.strip()}"
            if p.returncode == 0:
                results = json.loads(p.stdout)
                why = f"helmrender --batch answered {len(jobs)} renders with {p.stdout[:200]!r}"
        except subprocess.TimeoutExpired:
            why = f"helmrender --batch did not finish within {limit} s"
        except ValueError as e:
            why = f"helmrender --batch printed no JSON array of results: {e}"
        if not isinstance(results, list) or len(results) != len(jobs):
            return [Rendered(-1, "", why, None) for _ in jobs]
        return [_rendered(r["code"], r["stdout"], r["stderr"], report_file)
                for r, (_, report_file) in zip(results, runs)]


def _write(tmp, name, data):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        json.dump(data, f)  # JSON is YAML: exact types, no YAML 1.1 surprises
    return path
