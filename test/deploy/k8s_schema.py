"""Checks Kubernetes objects against the Kubernetes API schemas with test/deploy/schema/validate.mjs
(Node.js; the models of the npm packages kubernetes-models, @kubernetes-models/cert-manager and
@kubernetes-models/prometheus-operator): types, required fields, enums, formats, unknown fields.

    import k8s_schema
    problems = k8s_schema.validate(objs, "chart defaults")
    problems = k8s_schema.validate_many([("chart defaults", objs), ("chart ha", objs2), ...])

Each returns the problem lines, `<where>: <kind> <namespace>/<name>: <JSON path>: <message>`;
an empty list means every object is valid. validate_many starts node once for all the batches:
pass every variant in one call. Both raise ToolMissing when node or the npm packages are not
installed (scripts/setup.sh installs both) and RuntimeError when the validator fails otherwise.
"""

import datetime
import json
import os
import shutil
import subprocess

SCHEMA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schema")
VALIDATOR = os.path.join(SCHEMA_DIR, "validate.mjs")
TIMEOUT = 120  # seconds for one run of the validator, however many batches


class ToolMissing(RuntimeError):
    """node or the validator's npm packages are not installed."""


def find_node(node=None):
    """The node executable: `node` if given (a path or a name on PATH), else node or nodejs on
    PATH; raises ToolMissing when there is none."""
    for name in ([node] if node else ["node", "nodejs"]):
        path = shutil.which(name) if name else None
        if path:
            return path
    raise ToolMissing(f"node not found ({node or 'node, nodejs'} on PATH): scripts/setup.sh "
                      "installs nodejs and npm and the validator's packages")


def _installed_mismatch():
    """Why test/deploy/schema/node_modules does not match package-lock.json, or None."""
    lock_path = os.path.join(SCHEMA_DIR, "package-lock.json")
    installed_path = os.path.join(SCHEMA_DIR, "node_modules", ".package-lock.json")
    if not os.path.exists(installed_path):
        return "test/deploy/schema/node_modules is missing"
    with open(lock_path) as f:
        want = json.load(f).get("packages", {})
    with open(installed_path) as f:
        have = json.load(f).get("packages", {})
    for path, entry in want.items():
        if path and have.get(path, {}).get("version") != entry.get("version"):
            return (f"test/deploy/schema/{path} is {have.get(path, {}).get('version')}, "
                    f"package-lock.json wants {entry.get('version')}")
    return None


def check_installed(node=None):
    """Returns the node executable; raises ToolMissing when node is missing or node_modules does
    not match package-lock.json."""
    exe = find_node(node)
    why = _installed_mismatch()
    if why:
        raise ToolMissing(f"{why}: run scripts/setup.sh "
                          "(or: npm ci --prefix test/deploy/schema --no-audit --no-fund)")
    return exe


def _json_default(value):
    # PyYAML reads an unquoted timestamp as a datetime; Kubernetes keeps it as an RFC 3339 string.
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat().replace("+00:00", "Z")
    raise TypeError(f"not JSON: {value!r} ({type(value).__name__})")


def validate_many(batches, node=None):
    """Validates [(where, [obj, ...]), ...] in one run of the validator and returns the problem
    lines of all of them, in order; each line starts with its batch's where."""
    exe = check_installed(node)
    payload = json.dumps([{"where": str(where), "objects": list(objs)} for where, objs in batches],
                         default=_json_default)
    try:
        proc = subprocess.run([exe, VALIDATOR, "--batches"], input=payload, capture_output=True,
                              text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{VALIDATOR} took over {TIMEOUT} s") from None
    if proc.returncode not in (0, 1) or (proc.returncode == 1) != bool(proc.stdout.strip()):
        raise RuntimeError(f"{VALIDATOR} exited {proc.returncode}:\n{proc.stderr}{proc.stdout}")
    return proc.stdout.splitlines()


def validate(objs, where, node=None):
    """Validates the objects of one source (a file, a chart variant) named `where`."""
    return validate_many([(where, objs)], node=node)
