#!/usr/bin/env python3
"""webhook-dryrun answers as the deployed server (docs/dryrun.md): every fixture through both, with
the same flags, and the answers compared. One case per flag set:

    python3 agreement_test.py CASE        (CTest runs each CASE as its own test)

For every AdmissionReview fixture, every Pod fixture and every RayCluster, RayJob and RayService
fixture (its validation review and the review of each worker Pod KubeRay creates for it, built by
make-review), the server's response to POST /mutate or /validate must equal the CLI's
`-o review` answer to the same review, uid included; the CLI's answer to the raw file must equal it
but for the uid; and for an admitted ray.io object the CLI's mutated Pods (`-o json`) must be the
Pods make-review builds with the server's patches applied. Needs WEBHOOK_BUILD_DIR and
WEBHOOK_SOURCE_DIR (set by CTest). Servers listen on 127.0.0.1 only; every step is bounded."""
import copy
import glob
import json
import os
import subprocess
import sys
import threading
import time

from harness import (DRYRUN, FIXTURES, MAKE_REVIEW, Certs, Client, FakeKubeApi, Webhook,
                     check, decoded_patch, kubectl_patch, parallel, run_cases)

CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def proc(cmd, timeout=60):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def apply_patch(doc, patch):
    """RFC 6902 add, replace and remove, the operations the webhook writes."""
    doc = copy.deepcopy(doc)
    for op in patch:
        tokens = [t.replace("~1", "/").replace("~0", "~") for t in op["path"].split("/")[1:]]
        parent = doc
        for t in tokens[:-1]:
            parent = parent[int(t)] if isinstance(parent, list) else parent[t]
        last = tokens[-1]
        if op["op"] == "remove":
            del parent[int(last) if isinstance(parent, list) else last]
        elif isinstance(parent, list):
            if last == "-":
                parent.append(op["value"])
            elif op["op"] == "add":
                parent.insert(int(last), op["value"])
            else:
                parent[int(last)] = op["value"]
        else:
            parent[last] = op["value"]
    return doc


def fixture_objects():
    """(name, path) of the raw Pod and ray.io fixtures."""
    out = [(os.path.basename(f), f) for f in sorted(glob.glob(os.path.join(FIXTURES, "pods", "*.json")))]
    for kind in ("rayclusters", "rayjobs", "rayservices"):
        for f in sorted(glob.glob(os.path.join(FIXTURES, kind, "*", "*.yaml"))):
            out.append((os.path.relpath(f, FIXTURES), f))
    for f in sorted(glob.glob(os.path.join(FIXTURES, "gke-tutorial", "*.yaml"))):
        out.append((os.path.relpath(f, FIXTURES), f))
    return out


def review_fixtures(config_flags_allowed):
    """AdmissionReview fixtures that need no cluster state and no flags of their own."""
    out = []
    for f in sorted(glob.glob(os.path.join(FIXTURES, "admission", "*.json"))):
        base = f[:-5]
        if f.endswith(".config.json") or os.path.exists(base + ".cluster.yaml"):
            continue
        if os.path.exists(base + ".config.json") and not config_flags_allowed:
            continue
        out.append(("admission/" + os.path.basename(f), json.load(open(f))))
    return out


def agree(work, answer_flags, with_api, kubectl_patches=True):
    """Starts the server with `answer_flags` (and an API when `with_api`), then compares."""
    certs = Certs(work)
    crt, key = certs.issue("webhook")
    api = FakeKubeApi(work, tokens=["t"], max_seconds=280) if with_api else None
    server_flags = list(answer_flags)
    env = None
    if api is not None:
        # The harness starts servers with --legacy-indexing=off; the default is auto.
        server_flags.append("--legacy-indexing=auto")
        server_flags.append("--kube-config-path=" + api.kubeconfig(os.path.join(work, "kubeconfig"),
                                                                 token="t"))
        env = {"POD_NAMESPACE": "ray-system", "POD_NAME": "webhook-0"}
    dry = ["--dry-run"] if with_api else []  # reserve nothing: every answer is an empty cluster's
    counter = [0]
    lock = threading.Lock()

    def save(review):
        with lock:
            counter[0] += 1
            path = os.path.join(work, "review-%d.json" % counter[0])
        with open(path, "w") as f:
            json.dump(review, f)
        return path

    def build(args):
        r = proc([MAKE_REVIEW] + args)
        return json.loads(r.stdout) if r.returncode == 0 else None

    # The reviews: fixtures as they are, and make-review's for the raw objects.
    reviews = [(name, r, None) for name, r in review_fixtures(False)]
    if with_api:
        for _, r, _ in reviews:
            r["request"]["dryRun"] = True
    raw = fixture_objects()

    def reviews_of(item):
        name, path = item
        if "/" not in name:  # a Pod file
            return [(name, build(["--uid", "uid-" + name] + dry + [path]), path)]
        out = [(name, build(["--validate", "--uid", "uid-" + name, path]), path)]
        i = 0
        while True:
            r = build(["--worker", str(i), "--uid", "uid-%s-%d" % (name, i)] + dry + [path])
            if r is None:
                return out
            out.append(("%s worker %d" % (name, i), r, None))
            i += 1

    for rs in parallel(raw, reviews_of):
        reviews.extend(rs)
    check(all(r is not None for _, r, _ in reviews), "make-review failed on a fixture")

    with Webhook(work, crt, key, *server_flags, env=env) as wh:
        deadline = time.monotonic() + 30  # legacy placement answers once the Pods are listed
        while wh.health("/readyz")[0] != 200 and time.monotonic() < deadline:
            time.sleep(0.1)
        check(wh.health("/readyz")[0] == 200, "the webhook is not ready")
        client = Client(wh.https_port, certs.ca)
        answers = {}
        for name, review, _ in reviews:
            kind = review["request"]["kind"]["kind"]
            answers[name] = client.review("/mutate" if kind == "Pod" else "/validate", review)
        client.close()

        def compare(item):
            name, review, path = item
            server = answers[name]
            d = proc([DRYRUN, "-o", "review"] + answer_flags + [save(review)])
            check(d.returncode in (0, 1), "%s: webhook-dryrun exit %d: %s" % (name, d.returncode, d.stderr[-300:]))
            offline = json.loads(d.stdout)["response"]
            check(offline == server, "%s %s: the server and webhook-dryrun answer the same review "
                  "differently\n server: %s\n   cli: %s" % (name, answer_flags,
                                                            json.dumps(server)[:700],
                                                            json.dumps(offline)[:700]))
            if path is None:
                return 1
            direct = proc([DRYRUN, "-o", "review"] + answer_flags + [path])
            if direct.returncode == 3:  # the selectors would not send it; the server saw it anyway
                return 1
            got = json.loads(direct.stdout)["response"]
            got["uid"] = server["uid"]
            check(got == server, "%s %s: webhook-dryrun on the file answers otherwise than the "
                  "server\n server: %s\n   cli: %s" % (name, answer_flags, json.dumps(server)[:700],
                                                       json.dumps(got)[:700]))
            return 2

        compared = sum(parallel(reviews, compare))

        # The mutated Pods of every admitted ray.io object: the server's patches on make-review's
        # Pods, in creation order.
        def pods_agree(item):
            name, path = item
            if "/" not in name:
                return 0
            d = proc([DRYRUN, "-o", "json"] + answer_flags + [path])
            if d.returncode != 0:
                return 0
            items = json.loads(d.stdout)["items"]
            workers = [(n, r) for n, r, p in reviews if n.startswith(name + " worker ")]
            check(len(items) == len(workers), "%s: %d Pods offline, %d reviews" %
                  (name, len(items), len(workers)))
            for (wname, review), pod in zip(workers, items):
                server = answers[wname]
                patched = review["request"]["object"]
                if "patch" in server:
                    patched = apply_patch(patched, decoded_patch(server))
                check(patched == pod, "%s: the CLI's mutated Pod differs from the server's patch "
                      "applied\n server: %s\n   cli: %s" % (wname, json.dumps(patched)[:500],
                                                            json.dumps(pod)[:500]))
            return len(items)

        pods = sum(parallel(raw, pods_agree))
        code = wh.stop()
        check(code == 0, "the webhook exited %s; its log ends:\n%s" % (code, wh.log_text()[-2000:]))
    if api is not None:
        api.close()

    # Every patch the server wrote goes through kubectl's own JSON Patch code once.
    patches = {}
    for name, review, _ in reviews:
        if answers[name].get("patch"):
            patches.setdefault(json.dumps(decoded_patch(answers[name]), sort_keys=True),
                               (name, review["request"]["object"], decoded_patch(answers[name])))

    def kubectl(item):
        name, pod, patch = item
        check(kubectl_patch(work, pod, patch).get("kind") == "Pod", name + ": kubectl returned no Pod")

    if kubectl_patches:
        parallel(list(patches.values()), kubectl)
    else:
        patches = {}
    print("%s: %d reviews, %d answers compared, %d mutated Pods compared, %d patches applied by "
          "kubectl" % (" ".join(answer_flags) or "defaults", len(reviews), compared, pods,
                       len(patches)))
    check(len(reviews) >= 150 and compared >= 200, "too few answers compared")
    check(pods >= 60, "too few mutated Pods compared")


@case
def agree_defaults(work):
    """Default flags; legacy placement on (auto, with API access as in a Pod)."""
    agree(work, [], with_api=True)


@case
def agree_legacy_off(work):
    """--legacy-indexing=off and no API: label-less multi-host Pods denied by both. (Its patches
    are among agree_defaults', which kubectl applies.)"""
    agree(work, ["--legacy-indexing=off"], with_api=False, kubectl_patches=False)


@case
def agree_custom_flags(work):
    """Every other flag that changes answers, away from its default."""
    agree(work, ["--legacy-indexing=off", "--kuberay-version=1.3", "--tpu-process-port-base=9471",
                 "--megascale-port-base=9081", "--device-plugin-port=3112"], with_api=False)


if __name__ == "__main__":
    sys.exit(run_cases(CASES, sys.argv, __file__))
