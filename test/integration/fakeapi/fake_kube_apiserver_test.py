#!/usr/bin/env python3
"""fake-kube-apiserver as a multi-process test drives it: it writes its port file, checks
tokens, answers the kube API and the /fake/ control endpoints on one port, and exits 0 at once on
SIGTERM, on SIGINT and when --max-seconds elapse.

usage: fake_kube_apiserver_test.py PATH-TO-fake-kube-apiserver
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

LEASES = "/apis/coordination.k8s.io/v1/namespaces/ns1/leases"
SECRETS = "/api/v1/namespaces/ns1/secrets"
WEBHOOKS = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"


class Api:
    def __init__(self, port):
        self.base = f"http://127.0.0.1:{port}"

    def call(self, method, path, body=None, token=None,
             content_type="application/json"):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", content_type)
        if token:
            req.add_header("Authorization", "Bearer " + token)
        try:
            with urllib.request.urlopen(req, timeout=5) as res:
                return res.status, json.loads(res.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")


def start(binary, tmp, *flags):
    port_file = os.path.join(tmp, "port")
    if os.path.exists(port_file):
        os.remove(port_file)
    proc = subprocess.Popen([binary, "--port-file", port_file, *flags])
    deadline = time.monotonic() + 10
    while not os.path.exists(port_file):
        if proc.poll() is not None:
            sys.exit(f"fake-kube-apiserver exited with {proc.returncode} before listening")
        if time.monotonic() > deadline:
            proc.kill()
            sys.exit("no port file after 10 s")
        time.sleep(0.01)
    with open(port_file) as f:
        return proc, Api(int(f.read()))


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print("ok:", what)


def stops(proc, sig, within):
    if sig is not None:
        proc.send_signal(sig)
    start_time = time.monotonic()
    try:
        rc = proc.wait(timeout=within)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return False
    print(f"   exited {rc} after {time.monotonic() - start_time:.2f} s")
    return rc == 0


def main():
    binary = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        proc, api = start(binary, tmp, "--token", "t1", "--token", "t2", "--max-seconds", "60")
        try:
            status, stats = api.call("GET", "/fake/stats")
            check(status == 200 and stats["open_watches"] == 0 and stats["writes"]["leases"] == 0,
                  "/fake/stats answers before any request")

            lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                     "metadata": {"name": "leader"},
                     "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15,
                              "renewTime": "2025-05-01T10:00:00.000000Z"}}
            status, _ = api.call("POST", LEASES, lease)
            check(status == 401, "the API wants a token")
            status, created = api.call("POST", LEASES, lease, token="t1")
            check(status == 201 and created["metadata"]["resourceVersion"],
                  "a Lease is created with a resourceVersion")

            status, _ = api.call("POST", "/fake/fail-writes",
                                 {"resource": "leases", "status": 409, "count": 1})
            check(status == 200, "fail-writes is accepted")
            renewed = dict(created, spec=dict(created["spec"], holderIdentity="b"))
            status, body = api.call("PUT", LEASES + "/leader", renewed, token="t1")
            check(status == 409 and body["reason"] == "Conflict", "the injected write fails")
            status, body = api.call("PUT", LEASES + "/leader", renewed, token="t1")
            check(status == 200 and body["spec"]["holderIdentity"] == "b", "the next write succeeds")
            status, body = api.call("PUT", LEASES + "/leader", renewed, token="t2")
            check(status == 409, "a stale resourceVersion is a Conflict")

            status, stats = api.call("GET", "/fake/stats")
            check(stats["writes"]["leases"] == 2 and stats["write_attempts"]["leases"] == 5
                  and stats["conflicts"]["leases"] == 2 and stats["creates"]["leases"] == 1
                  and stats["updates"]["leases"] == 1,
                  "/fake/stats counts the writes: " + json.dumps(stats["totals"]))

            status, _ = api.call("POST", "/fake/objects/leases",
                                 {"metadata": {"name": "seeded", "namespace": "ns1"}})
            check(status == 201, "/fake/objects creates")
            status, body = api.call("GET", LEASES + "/seeded", token="t2")
            check(status == 200 and body["kind"] == "Lease", "the seeded Lease is served")
            status, body = api.call("GET", "/fake/objects/leases")
            check(status == 200 and len(body["items"]) == 2, "/fake/objects lists")
            status, _ = api.call("DELETE", "/fake/objects/leases/ns1/seeded")
            check(status == 200, "/fake/objects deletes")
            status, _ = api.call("DELETE", "/fake/objects/leases/ns1/seeded")
            check(status == 404, "a second delete finds nothing")

            api.call("POST", "/fake/partition", {"token": "t2"})
            status, _ = api.call("GET", LEASES + "/leader", token="t2")
            check(status == 503, "a partitioned token gets 503")
            status, _ = api.call("GET", LEASES + "/leader", token="t1")
            check(status == 200, "other tokens do not")
            api.call("POST", "/fake/heal")
            status, _ = api.call("GET", LEASES + "/leader", token="t2")
            check(status == 200, "heal lifts the partition")

            api.call("POST", "/fake/write-delay", {"ms": 300})
            began = time.monotonic()
            status, _ = api.call("PATCH", LEASES + "/leader", {"spec": {"holderIdentity": "c"}},
                                 token="t1", content_type="application/merge-patch+json")
            took = time.monotonic() - began
            check(status == 200 and took >= 0.3, f"write-delay slows writes ({took:.2f} s)")
            api.call("POST", "/fake/write-delay", {"ms": 0})
            status, _ = api.call("POST", "/fake/drop-watches")
            check(status == 200, "drop-watches is accepted")
            status, _ = api.call("POST", "/fake/fail-writes", {"status": 500})
            check(status == 400, "a control request without its fields is a 400")

            # What --cert-mode=managed writes: a Secret and the cluster-scoped configurations.
            cfg = {"metadata": {"name": "cfg"},
                   "webhooks": [{"name": "a.example.com", "clientConfig": {}}]}
            status, _ = api.call("POST", "/fake/objects/mutatingwebhookconfigurations", cfg)
            check(status == 201, "/fake/objects seeds a webhook configuration")
            status, body = api.call("GET", WEBHOOKS + "/cfg", token="t1")
            check(status == 200 and "namespace" not in body["metadata"],
                  "a webhook configuration is served, cluster-scoped")
            secret = {"metadata": {"name": "certs"}, "type": "kubernetes.io/tls",
                      "data": {"tls.crt": "Y3J0", "tls.key": "a2V5"}}
            status, _ = api.call("POST", SECRETS, secret, token="t1")
            check(status == 201, "a Secret is created")
            status, body = api.call("POST", SECRETS, secret, token="t1")
            check(status == 409 and body["reason"] == "AlreadyExists", "twice: AlreadyExists")
            api.call("POST", "/fake/forbid-writes", {"resource": "secrets"})
            status, body = api.call("POST", SECRETS, dict(secret, metadata={"name": "x"}),
                                    token="t1")
            check(status == 403 and body["reason"] == "Forbidden",
                  "forbid-writes: a write is refused as RBAC refuses it")
            status, _ = api.call("GET", SECRETS + "/certs", token="t1")
            check(status == 200, "forbid-writes leaves reads alone")
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        check(stops(proc, signal.SIGTERM, 5), "SIGTERM: exit status 0 within 5 s")

        proc, api = start(binary, tmp)
        check(api.call("GET", LEASES)[0] == 200, "without --token, no token is needed")
        check(stops(proc, signal.SIGINT, 5), "SIGINT: exit status 0 within 5 s")

        proc, _ = start(binary, tmp, "--max-seconds", "1")
        check(stops(proc, None, 5), "--max-seconds 1: exits by itself with status 0")

        rc = subprocess.run([binary, "--bogus", "x"], stderr=subprocess.DEVNULL).returncode
        check(rc == 2, "an unknown flag: exit status 2")


if __name__ == "__main__":
    main()
