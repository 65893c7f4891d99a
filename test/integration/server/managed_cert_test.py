"""--cert-mode=managed: two kuberay-tpu-webhook processes against one fake kube-apiserver on
127.0.0.1 keep one serving certificate in Secret ray-system/kuberay-tpu-webhook-certs, fill the
caBundle of both webhook configurations and rotate it every few seconds (a validity of 6s), while
a client sends AdmissionReviews to both, trusting only the caBundle it reads from the fake API
server at that moment, as kube-apiserver does. Every wait has a deadline.

    managed_cert_test.py CASE      cases: two_replicas_rotate bad_flags
"""
import base64
import http.client
import json
import os
import socket
import ssl
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import (BINARY, FIXTURES, FakeKubeApi, Webhook, check, run, run_cases)

NS = "ray-system"
HOST = "kuberay-tpu-webhook.ray-system.svc"
SECRET = "kuberay-tpu-webhook-certs"
MUTATING = "kuberay-tpu-mutating-webhook-cfg"
VALIDATING = "kuberay-tpu-validating-webhook-cfg"
FLAGS = ["--cert-mode=managed", "--cert-validity=6s", "--cert-ca-validity=12s",
         "--cert-renew-before=3s"]


def webhook_config(kind, name, path):
    hook = {"name": name.replace("-cfg", "") + ".tpu.example.com",
            "clientConfig": {"service": {"name": "kuberay-tpu-webhook", "namespace": NS,
                                         "path": path, "port": 443}},
            "sideEffects": "None", "admissionReviewVersions": ["v1"]}
    second = dict(hook, name="second-" + hook["name"])
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
            "metadata": {"name": name}, "webhooks": [hook, second]}


def ca_bundles(api, resource):
    """Every webhook's caBundle of the one configuration of `resource`, decoded."""
    items = api.objects(resource)
    check(len(items) == 1, "%d %s" % (len(items), resource))
    return [base64.b64decode(h["clientConfig"].get("caBundle", "")).decode()
            for h in items[0]["webhooks"]]


def secret(api):
    items = [s for s in api.objects("secrets") if s["metadata"]["name"] == SECRET]
    check(len(items) == 1, "expected one Secret %s, found %d" % (SECRET, len(items)))
    return items[0]


def pem_blocks(text):
    end = "-----END CERTIFICATE-----"
    return {b.strip() + "\n" + end for b in text.split(end) if "BEGIN CERTIFICATE" in b}


class Pinned(http.client.HTTPSConnection):
    """HTTPS to 127.0.0.1 verifying the certificate for the Service's DNS name, as
    kube-apiserver dials kuberay-tpu-webhook.ray-system.svc."""

    def connect(self):
        raw = socket.create_connection(("127.0.0.1", self.port), self.timeout)
        self.sock = self._context.wrap_socket(raw, server_hostname=self.host)


def post_review(port, bundle, review, path="/mutate"):
    """One review on a new connection (each one a handshake verified against `bundle`); the
    served certificate (DER) and the answer."""
    ctx = ssl.create_default_context(cadata=bundle)
    conn = Pinned(HOST, port, context=ctx, timeout=5)
    try:
        conn.request("POST", path, body=json.dumps(review),
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        data = r.read()
        served = conn.sock.getpeercert(binary_form=True)
        check(r.status == 200, "HTTP %d: %s" % (r.status, data[:200]))
        out = json.loads(data)
        check(out.get("kind") == "AdmissionReview", "not an AdmissionReview")
        return served
    finally:
        conn.close()


def served_der(port, bundle):
    ctx = ssl.create_default_context(cadata=bundle)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname=HOST) as s:
            return s.getpeercert(binary_form=True)


def two_replicas_rotate(work):
    with open(os.path.join(FIXTURES, "admission", "legacy-empty-cluster.json")) as f:
        review = json.load(f)
    with FakeKubeApi(work, max_seconds=120) as api:
        api.create("mutatingwebhookconfigurations",
                   webhook_config("MutatingWebhookConfiguration", MUTATING, "/mutate"))
        api.create("validatingwebhookconfigurations",
                   webhook_config("ValidatingWebhookConfiguration", VALIDATING, "/validate"))
        replicas = []
        try:
            for i in range(2):
                kubeconfig = api.kubeconfig(os.path.join(work, "kubeconfig-%d" % i))
                replicas.append(Webhook(work, None, None, *FLAGS,
                                        "--kube-config-path=" + kubeconfig,
                                        env={"POD_NAMESPACE": NS, "POD_NAME": "wh-%d" % i}))
            run_rotation(api, replicas, review)
        finally:
            for wh in replicas:
                wh.__exit__(None, None, None)


def run_rotation(api, replicas, review):
    # Both started from one Secret: one create, and the configurations trust its bundle.
    first = secret(api)
    stats = api.stats()
    check(stats["creates"]["secrets"] == 1, "Secret creates: %s" % stats["creates"]["secrets"])
    first_bundle = base64.b64decode(first["data"]["ca-bundle.crt"]).decode()

    failures, served, sent, stop = [], [set(), set()], [0], threading.Event()

    def client():
        i = 0
        while not stop.is_set():
            i += 1
            port = replicas[i % 2].https_port
            try:
                bundle = "".join(ca_bundles(api, "mutatingwebhookconfigurations")[:1])
                served[i % 2].add(post_review(port, bundle, dict(review)))
                sent[0] += 1
            except Exception as e:  # noqa: BLE001 - every failure is the finding
                failures.append("replica %d: %s" % (i % 2, e))
            time.sleep(0.02)

    threads = [threading.Thread(target=client) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        # A forced expiry: the 6s certificate is renewed 3s before its end, twice or more.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and min(len(s) for s in served) < 3:
            time.sleep(0.2)
    finally:
        stop.set()
        for t in threads:
            t.join(15)
    check(not failures, "%d of %d reviews failed across the rotation, first: %s"
          % (len(failures), sent[0] + len(failures), failures[:3]))
    check(min(len(s) for s in served) >= 3,
          "each replica should have served 3 certificates in 20s: %s" % [len(s) for s in served])
    check(sent[0] >= 40, "only %d reviews were answered" % sent[0])

    # Converged: both serve the Secret's leaf, both configurations trust its bundle.
    deadline = time.monotonic() + 10
    while True:
        s = secret(api)
        leaf = base64.b64decode(s["data"]["tls.crt"]).decode()
        bundle = base64.b64decode(s["data"]["ca-bundle.crt"]).decode()
        want = ssl.PEM_cert_to_DER_cert(leaf)
        on_wire = [served_der(wh.https_port, bundle) for wh in replicas]
        if all(d == want for d in on_wire):
            break
        check(time.monotonic() < deadline, "the replicas did not converge on the Secret's leaf")
        time.sleep(0.1)
    check(s["metadata"]["resourceVersion"] != first["metadata"]["resourceVersion"],
          "the Secret was never rotated")
    check(bundle != first_bundle, "the CA was never rotated")
    for resource in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
        for b in ca_bundles(api, resource):
            check(pem_blocks(bundle) <= pem_blocks(b),
                  "%s does not trust the Secret's CA bundle" % resource)
    stats = api.stats()
    check(stats["creates"]["secrets"] == 1, "the Secret was created more than once")
    check(stats["updates"]["secrets"] >= 2, "rotations: %d" % stats["updates"]["secrets"])
    for wh in replicas:
        check(wh.wait_for_log(lambda l: l.get("msg") == "certificate reloaded", 1) is not None,
              "no 'certificate reloaded' log line:\n" + wh.log_text()[-2000:])
        check(wh.proc.poll() is None, "a replica exited:\n" + wh.log_text()[-2000:])
    print("reviews answered across the rotations: %d, certificates served: %s, Secret writes: "
          "%d, conflicts %d, already-exists %d"
          % (sent[0], [len(x) for x in served], stats["writes"]["secrets"],
             stats["conflicts"]["secrets"], stats["already_exists"]["secrets"]))


def bad_flags(work):
    cases = [
        (["--cert-mode=auto"], "--cert-mode=auto: expected files or managed"),
        (["--cert-mode=managed", "--cert-validity=5s", "--cert-renew-before=5s"],
         "--cert-renew-before must be less than --cert-validity"),
        (["--cert-mode=managed", "--cert-validity=10s", "--cert-renew-before=1s",
          "--cert-ca-validity=15s"],
         "--cert-ca-validity must be at least twice --cert-validity"),
        (["--cert-mode=managed", "--cert-validity=1s"], "--cert-validity must be at least 2s"),
        (["--cert-mode=managed", "--tls-cert-file=/x.crt"], "--cert-mode=managed makes its own"),
        (["--cert-mode=managed", "--cert-secret-name="], "--cert-secret-name and"),
        (["--cert-validity=soon"], "--cert-validity"),
    ]
    for args, expected in cases:
        r = run([BINARY] + args, timeout=10)
        lines = r.stderr.strip().splitlines()
        check(r.returncode == 2, "%s: exit %d, not 2" % (args, r.returncode))
        check(len(lines) == 1 and expected in lines[0], "%s: stderr %r" % (args, r.stderr))
    # Managed without any API access: a clear startup failure, exit 1.
    r = run([BINARY, "--cert-mode=managed", "--legacy-indexing=off",
             "--kube-config-path=" + os.path.join(work, "missing")], timeout=10)
    check(r.returncode == 1 and "--cert-mode=managed" in r.stderr,
          "no API: exit %d: %s" % (r.returncode, r.stderr[-400:]))


if __name__ == "__main__":
    sys.exit(run_cases({"two_replicas_rotate": two_replicas_rotate, "bad_flags": bad_flags},
                       sys.argv, __file__))
