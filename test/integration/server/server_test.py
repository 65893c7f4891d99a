#!/usr/bin/env python3
"""kuberay-tpu-webhook driven as kube-apiserver drives it (docs/server.md "Tests"), one case per
run:

    python3 server_test.py CASE        (CTest runs each CASE as its own test)

Needs WEBHOOK_BUILD_DIR and WEBHOOK_SOURCE_DIR (set by CTest), openssl, curl, kubectl, promtool.
Every server listens on 127.0.0.1 only; loads are bounded in count and time."""
import base64
import glob
import http.client
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time

from harness import (BINARY, DRYRUN, FIXTURES, TUTORIAL, Certs, Client, FakeKubeApi, Failure,
                     Webhook, check, decoded_patch, kubectl_patch, make_review, parallel, run,
                     run_cases, served_certificate_cn, tls_context)

CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def config_flags(config):
    flags = []
    names = {"kuberayVersion": "--kuberay-version", "tpuProcessPortBase": "--tpu-process-port-base",
             "megascalePortBase": "--megascale-port-base", "devicePluginPort": "--device-plugin-port"}
    for key, value in sorted(config.items()):
        check(key in names, "unknown fixture config key " + key)
        flags.append("%s=%s" % (names[key], value))
    return flags


@case
def mutate_fixtures(work):
    """Every AdmissionReview fixture of test/fixtures/admission/ through POST /mutate over HTTPS:
    uid echoed, the answer equal to its golden response (docs/spec.md M1-M7, Envelope), every patch
    accepted by kubectl patch --local. Fixtures that need existing cluster objects
    (<case>.cluster.yaml) or legacy placement are answered as this build must: without API access it
    denies Pods lacking KubeRay's index labels, with a message saying how to fix it."""
    certs = Certs(work)
    crt, key = certs.issue("webhook")
    files = sorted(f for f in glob.glob(os.path.join(FIXTURES, "admission", "*.json"))
                   if not f.endswith(".config.json"))
    check(len(files) >= 40, "expected at least 40 admission fixtures, found %d" % len(files))
    by_config = {}
    for f in files:
        cfg_path = f[:-5] + ".config.json"
        cfg = json.load(open(cfg_path)) if os.path.exists(cfg_path) else {}
        by_config.setdefault(json.dumps(cfg, sort_keys=True), []).append(f)
    to_patch, counts = [], {"golden": 0, "legacy-denied": 0, "cluster-state": 0}
    for cfg, group in by_config.items():
        with Webhook(work, crt, key, *config_flags(json.loads(cfg))) as wh:
            client = Client(wh.https_port, certs.ca)
            for f in group:
                name = os.path.basename(f)[:-5]
                review = json.load(open(f))
                uid = review["request"]["uid"]
                r = client.review("/mutate", review)
                check(r["uid"] == uid, "%s: uid %r not echoed (got %r)" % (name, uid, r["uid"]))
                golden = json.load(open(os.path.join(FIXTURES, "responses", name + ".json")))
                readable = dict(r)
                if "patch" in readable:
                    readable["patch"] = decoded_patch(r)
                if os.path.exists(f[:-5] + ".cluster.yaml"):
                    counts["cluster-state"] += 1
                elif readable == golden:
                    counts["golden"] += 1
                else:
                    message = r.get("status", {}).get("message", "")
                    check(golden.get("allowed") and not r["allowed"] and
                          r["status"]["code"] == 400 and "without legacy placement" in message,
                          "%s: answer differs from its golden response\n got: %s\nwant: %s" %
                          (name, json.dumps(readable)[:800], json.dumps(golden)[:800]))
                    counts["legacy-denied"] += 1
                if r["allowed"] and "patch" in r:
                    to_patch.append((name, review["request"]["object"], decoded_patch(r)))
            client.close()
            code = wh.stop()
            check(code == 0, "the webhook exited %s, not 0; its log ends:\n%s" % (code, wh.log_text()[-3000:]))

    def apply(item):
        name, pod, patch = item
        patched = kubectl_patch(work, pod, patch)
        check(patched.get("kind") == "Pod", name + ": kubectl returned no Pod")

    parallel(to_patch, apply)
    print("fixtures: %d equal to golden, %d legacy placement denied, %d need cluster state; "
          "%d patches applied by kubectl" % (counts["golden"], counts["legacy-denied"],
                                             counts["cluster-state"], len(to_patch)))
    check(counts["golden"] >= 40, "too few fixtures matched their golden response")


@case
def tutorial_workers(work):
    """The GKE tutorial's RayClusters: validated through POST /validate, each worker Pod KubeRay
    creates mutated through POST /mutate, the patches applied with kubectl, and the environment of
    the worker the tutorial shows equal to what it shows (test/fixtures/gke-tutorial)."""
    certs = Certs(work)
    crt, key = certs.issue("webhook")
    expected = json.load(open(os.path.join(FIXTURES, "gke-tutorial", "expected-env.json")))
    with Webhook(work, crt, key) as wh:
        client = Client(wh.https_port, certs.ca)
        for file_name, want in expected.items():
            if file_name.startswith("_"):
                continue
            path = os.path.join(TUTORIAL, file_name)
            v = client.review("/validate", make_review("--validate", "--uid", "v-" + file_name, path))
            check(v["allowed"] and v["uid"] == "v-" + file_name, file_name + ": not admitted: %s" % v)
            shown = want["shown_pod"]
            found = False
            for n in range(want["worker_pods"]):
                review = make_review("--worker", str(n), "--uid", "w%d" % n, path)
                r = client.review("/mutate", review)
                check(r["allowed"] and r["uid"] == "w%d" % n, "%s worker %d: %s" % (file_name, n, r))
                pod = kubectl_patch(work, review["request"]["object"], decoded_patch(r))
                env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
                if env.get("TPU_WORKER_ID") == shown["TPU_WORKER_ID"]:
                    found = True
                    for k, v in shown.items():
                        check(env.get(k) == v, "%s %s: got %r, want %r" % (file_name, k, env.get(k), v))
            check(found, file_name + ": no worker with TPU_WORKER_ID " + shown["TPU_WORKER_ID"])
        client.close()
        code = wh.stop()
        check(code == 0, "the webhook exited %s, not 0; its log ends:\n%s" % (code, wh.log_text()[-3000:]))


@case
def validate_fixtures(work):
    """Every RayCluster, RayJob and RayService fixture through POST /validate: valid ones admitted,
    invalid ones denied with code 400 and a message, each answer equal to webhook-dryrun's
    (docs/spec.md V1-V5)."""
    certs = Certs(work)
    crt, key = certs.issue("webhook")
    files = sorted(f for kind in ("rayclusters", "rayjobs", "rayservices")
                   for f in glob.glob(os.path.join(FIXTURES, kind, "*", "*.yaml")))
    check(len(files) >= 30, "expected ray.io fixtures, found %d" % len(files))
    with Webhook(work, crt, key) as wh:
        client = Client(wh.https_port, certs.ca)
        for f in files:
            valid = os.path.basename(os.path.dirname(f)) == "valid"
            review = make_review("--validate", "--uid", "uid-" + os.path.basename(f), f)
            r = client.review("/validate", review)
            check(r["uid"] == "uid-" + os.path.basename(f), f + ": uid not echoed")
            check(r["allowed"] == valid, "%s: allowed=%s" % (f, r["allowed"]))
            if not valid:
                check(r["status"]["code"] == 400 and r["status"]["message"], f + ": no status")
            d = run([DRYRUN, "-o", "review", f])
            offline = json.loads(d.stdout)["response"]
            offline["uid"] = r["uid"]
            check(offline == r, "%s: the server's answer differs from webhook-dryrun's\n %s\n %s"
                  % (f, r, offline))
        client.close()
        code = wh.stop()
        check(code == 0, "the webhook exited %s, not 0; its log ends:\n%s" % (code, wh.log_text()[-3000:]))


def raw_https(port, ca, payload, read_timeout=10, until_closed=False):
    """Sends raw bytes over TLS and returns what the server answers: one whole response, or with
    `until_closed` everything until the server closes the connection."""
    ctx = tls_context(ca)
    with socket.create_connection(("127.0.0.1", port), timeout=read_timeout) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            try:
                s.sendall(payload)
            except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
                pass
            chunks = []
            while True:
                try:
                    data = s.recv(65536)
                except (ConnectionResetError, ssl.SSLError, socket.timeout):
                    break
                if not data:
                    break
                chunks.append(data)
                if not until_closed and b"\r\n\r\n" in b"".join(chunks):
                    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
                    m = re.search(rb"Content-Length: (\d+)", head, re.I)
                    if m and len(body) >= int(m.group(1)):
                        break
            return b"".join(chunks)


def split_response(data):
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1])
    headers = {}
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        headers[k.strip().lower().decode()] = v.strip().decode()
    return status, headers, body


@case
def malformed_requests(work):
    """The refusals of docs/server.md "Endpoints" over HTTPS: 404, 405, 413 (declared and chunked),
    415, 400 for empty, not JSON, truncated, no request; AdmissionReview denials (HTTP 200, uid
    echoed) whenever the uid can be read, else one line of JSON with the HTTP code; the connection
    survives where the body was read whole."""
    certs = Certs(work)
    crt, key = certs.issue("webhook")
    good = json.load(open(os.path.join(FIXTURES, "admission", "v5e-4x4-host2.json")))
    uid = good["request"]["uid"]
    # kube-apiserver writes request.uid first (Go struct order); the fixtures are key-sorted.
    good["request"] = {"uid": uid, **{k: v for k, v in good["request"].items() if k != "uid"}}
    body = json.dumps(good)
    with Webhook(work, crt, key, "--max-body-bytes=65536") as wh:
        c = Client(wh.https_port, certs.ca)

        def status_error(status, data, code, part):
            check(status == code, "want HTTP %d, got %d: %s" % (code, status, data[:200]))
            check(data.count(b"\n") == 0, "error body is not one line: %r" % data)
            s = json.loads(data)
            check(s["kind"] == "Status" and s["code"] == code and part in s["message"],
                  "unexpected error body %s" % data)

        def review_denial(status, data, code, part):
            check(status == 200, "want HTTP 200 with a review, got %d: %s" % (status, data[:200]))
            r = json.loads(data)["response"]
            check(r["uid"] == uid and r["allowed"] is False and r["status"]["code"] == code and
                  part in r["status"]["message"], "unexpected review %s" % r)

        s, h, d = c.request("GET", "/mutate")
        status_error(s, d, 405, "method GET")
        check(h.get("Allow") == "POST", "405 without Allow: POST")
        s, h, d = c.request("PUT", "/mutate", body)
        review_denial(s, d, 405, "method PUT")
        s, h, d = c.request("POST", "/mutate", body, {"Content-Type": "text/plain"})
        review_denial(s, d, 415, "text/plain")
        s, h, d = c.request("POST", "/validate", "garbage", {"Content-Type": "text/plain"})
        status_error(s, d, 415, "expected application/json")
        s, h, d = c.request("POST", "/mutate", "")
        status_error(s, d, 400, "empty request body")
        s, h, d = c.request("POST", "/mutate", "{not json")
        status_error(s, d, 400, "not valid JSON")
        s, h, d = c.request("POST", "/mutate", body[: len(body) // 2])
        review_denial(s, d, 400, "not valid JSON")
        s, h, d = c.request("POST", "/mutate",
                            '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}')
        status_error(s, d, 400, "no request")
        s, h, d = c.request("POST", "/nope", body)
        status_error(s, d, 404, "POST /mutate")
        s, h, d = c.request("GET", "/")
        check(s == 200 and d == b"kuberay-tpu-webhook", "GET / is the Go webhook's probe path")
        # Still the same connection: every body above was read whole.
        check(c.conn is not None, "the server closed a connection whose request it read whole")
        r = c.review("/mutate", good)
        check(r["allowed"] and r["uid"] == uid, "a good review after the bad ones failed")
        c.close()

        # Over the limit: declared by Content-Length, and chunked without one.
        big = body[:-2] + ', "padding": "' + "x" * 100000 + '"}}'
        data = raw_https(wh.https_port, certs.ca,
                         b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n" % len(big) + big.encode())
        s, h, d = split_response(data)
        review_denial(s, d, 413, "larger than 65536 bytes")
        check(h.get("connection") == "close", "413 must close the connection")
        chunked = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in
                           [big.encode()[i:i + 8192] for i in range(0, len(big), 8192)]) + b"0\r\n\r\n"
        data = raw_https(wh.https_port, certs.ca,
                         b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\n" + chunked)
        s, h, d = split_response(data)
        review_denial(s, d, 413, "larger than 65536 bytes")
        data = raw_https(wh.https_port, certs.ca,
                         b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 10000000\r\n\r\n" + b"y" * 70000)
        s, h, d = split_response(data)
        status_error(s, d, 413, "larger than")
        # A method the server does not implement (RFC 9110 9.1), refused by the framing layer.
        data = raw_https(wh.https_port, certs.ca, b"BREW /mutate HTTP/1.1\r\nHost: x\r\n\r\n")
        s, h, d = split_response(data)
        check(s == 501 and json.loads(d)["code"] == 501, "unknown method: %r" % data)
        check(h.get("connection") == "close", "a refused head must close the connection")
        code = wh.stop()
        check(code == 0, "the webhook exited %s, not 0; its log ends:\n%s" % (code, wh.log_text()[-3000:]))


@case
def body_limit_from_memory(work):
    """--memory-limit=64Mi grants no body over about 1 MiB (docs/server.md "Connections and
    limits"): the webhook says so at start, as a warning only when --max-body-bytes asked for
    more; a declared body over that is an AdmissionReview denial (413, uid echoed) naming
    --memory-limit, not a bare error; a chunked review under the default --max-body-bytes is
    charged that smaller limit while it arrives, so it is admitted."""
    certs = Certs(work)
    crt, key = certs.issue("webhook")
    good = json.load(open(os.path.join(FIXTURES, "admission", "v5e-4x4-host2.json")))
    uid = good["request"]["uid"]
    good["request"] = {"uid": uid, **{k: v for k, v in good["request"].items() if k != "uid"}}
    body = json.dumps(good).encode()
    # 48 MiB of budget, 49 bytes per body byte and 64 KiB per request: (48 Mi - 64 Ki) / 49.
    largest = (48 * 1024 * 1024 - 65536) // 49
    with Webhook(work, crt, key, "--memory-limit=64Mi", "--max-body-bytes=4194304") as wh:
        warned = wh.wait_for_log(lambda l: "grants no body over" in l.get("msg", ""), 10)
        check(warned is not None and str(largest) in warned["msg"],
              "no start warning naming %d bytes:\n%s" % (largest, wh.log_text()[-2000:]))
        wh.stop()
    with Webhook(work, crt, key, "--memory-limit=64Mi") as wh:
        serving = wh.wait_for_log(lambda l: l.get("msg") == "serving", 10)
        check(serving.get("max_body_bytes") == largest,
              "the serving line does not give the body limit %d: %s" % (largest, serving))
        big = body[:-2] + b', "padding": "' + b"x" * (largest + 1000) + b'"}}'
        data = raw_https(wh.https_port, certs.ca,
                         b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n" % len(big) + big[:65536])
        s, h, d = split_response(data)
        check(s == 200, "want a review denial, got %d: %r" % (s, d[:300]))
        r = json.loads(d)["response"]
        check(r["uid"] == uid and r["allowed"] is False and r["status"]["code"] == 413 and
              "larger than %d bytes" % largest in r["status"]["message"] and
              "--memory-limit" in r["status"]["message"], "unexpected denial %s" % r)
        check(h.get("connection") == "close", "413 must close the connection")
        chunked = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 4096]), body[i:i + 4096])
                           for i in range(0, len(body), 4096)) + b"0\r\n\r\n"
        for _ in range(3):  # each gives its charge back: none waits for the one before
            data = raw_https(wh.https_port, certs.ca,
                             b"POST /mutate HTTP/1.1\r\nHost: x\r\n"
                             b"Content-Type: application/json\r\n"
                             b"Transfer-Encoding: chunked\r\n\r\n" + chunked)
            s, h, d = split_response(data)
            check(s == 200, "chunked review: HTTP %d %r" % (s, d[:300]))
            r = json.loads(d)["response"]
            check(r["uid"] == uid and r["allowed"] is True, "chunked review refused: %s" % r)
        code = wh.stop()
        check(code == 0, "the webhook exited %s, not 0; its log ends:\n%s"
              % (code, wh.log_text()[-3000:]))
        check("grants no body over" not in wh.log_text(),
              "a warning for the default --max-body-bytes:\n" + wh.log_text()[-2000:])


@case
def slow_clients(work):
    """40 clients that connect and trickle a request byte by byte hold their connections while
    other clients are served; each is cut off once --read-timeout passes (docs/server.md
    "Connections and limits")."""
    certs = Certs(work)
    crt, key = certs.issue("webhook")
    review = make_review("--worker", "1", os.path.join(TUTORIAL, "ray-cluster.tpu-v6e-multihost.yaml"))
    with Webhook(work, crt, key, "--read-timeout=8s") as wh:
        ctx = tls_context(certs.ca)
        slow, cut = [], []
        stop = threading.Event()

        def trickle():
            try:
                raw = socket.create_connection(("127.0.0.1", wh.https_port), timeout=20)
                s = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
                slow.append(s)
                head = b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                for b in head:
                    if stop.is_set():
                        return
                    s.sendall(bytes([b]))
                    time.sleep(0.25)
            except (OSError, ssl.SSLError):
                cut.append(True)  # the server hung up: the read timeout at work

        trickers = [threading.Thread(target=trickle) for _ in range(40)]
        for t in trickers:
            t.start()
        # 40 handshakes take a while on a loaded machine or under a sanitizer: wait for them
        # (bounded, well inside --read-timeout) instead of assuming how long they take.
        deadline = time.monotonic() + 4.0
        while len(slow) < 38 and time.monotonic() < deadline:
            time.sleep(0.05)
        check(len(slow) >= 38, "slow clients could not connect (%d)" % len(slow))
        served, started = 0, time.monotonic()
        client = Client(wh.https_port, certs.ca)
        while time.monotonic() - started < 2.5:
            r = client.review("/mutate", review)
            check(r["allowed"], "a normal client was not served while slow clients held on")
            served += 1
        client.close()
        check(served >= 5, "only %d requests served beside the slow clients" % served)
        for t in trickers:
            t.join(30)
        stop.set()
        check(len(cut) >= 35, "slow clients were not cut off by --read-timeout (%d of 40)" % len(cut))
        for s in slow:
            s.close()
        status, _ = wh.health("/readyz")
        check(status == 200, "not ready after the slow clients")
        code = wh.stop()
        check(code == 0, "the webhook exited %s, not 0; its log ends:\n%s" % (code, wh.log_text()[-3000:]))
        print("served %d requests beside 40 slow clients; %d slow clients cut off" % (served, len(cut)))


@case
def read_timeout_mid_request(work):
    """A request whose head or body stops arriving gets 408 once --read-timeout passes, and its
    connection is closed: the bytes the client sends later are never read as a new request, so a
    client that trickles cannot keep a worker past one read timeout (docs/server.md "Connections and
    limits")."""
    certs = Certs(work)
    crt, key = certs.issue("webhook")
    with Webhook(work, crt, key, "--read-timeout=2s") as wh:
        parts = {
            "headers": b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: applica",
            "body": b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    b"Content-Length: 100\r\n\r\n{\"apiVersion\":",
        }
        for what, first in parts.items():
            started = time.monotonic()
            data = raw_https(wh.https_port, certs.ca, first, read_timeout=15, until_closed=True)
            waited = time.monotonic() - started
            check(data != b"", "%s: no answer before the connection closed" % what)
            status, headers, body = split_response(data)
            check(status == 408 and headers.get("connection") == "close",
                  "%s: want 408 and Connection: close, got %r" % (what, data[:300]))
            err = json.loads(body)
            check(err["code"] == 408 and "--read-timeout" in err["message"],
                  "%s: unexpected error body %s" % (what, body))
            check(waited < 12, "%s: the connection stayed open %.1f s" % (what, waited))
        status, _ = wh.health("/readyz")
        check(status == 200, "not ready after timed-out requests")
        code = wh.stop()
        check(code == 0, "the webhook exited %s, not 0; its log ends:\n%s" % (code, wh.log_text()[-3000:]))


@case
def tls_versions(work):
    """TLS 1.0 and 1.1 are refused, 1.2 and 1.3 accepted, with AEAD ciphers only (item 3)."""
    certs = Certs(work)
    crt, key = certs.issue("webhook")
    with Webhook(work, crt, key) as wh:
        target = "127.0.0.1:%d" % wh.https_port

        def handshake(*flags):
            r = run(["openssl", "s_client", "-connect", target, "-CAfile", certs.ca, *flags],
                    input="", timeout=20)
            return r.returncode == 0 and "Cipher is (NONE)" not in r.stdout, r.stdout + r.stderr

        for version in ("-tls1", "-tls1_1"):
            ok, out = handshake(version, "-cipher", "DEFAULT@SECLEVEL=0")
            check(not ok and "alert protocol version" in out,
                  version + " was not refused by the server:\n" + out[-400:])
        ok, out = handshake("-tls1_2")
        check(ok and "TLSv1.2" in out, "TLS 1.2 refused:\n" + out[-400:])
        ok, out = handshake("-tls1_3")
        check(ok and "TLSv1.3" in out, "TLS 1.3 refused:\n" + out[-400:])
        ok, out = handshake("-tls1_2", "-cipher", "AES128-SHA")
        check(not ok, "a CBC, non-forward-secret cipher was accepted")
        code = wh.stop()
        check(code == 0, "the webhook exited %s, not 0; its log ends:\n%s" % (code, wh.log_text()[-3000:]))


class Load:
    """Client threads sending reviews over keep-alive connections until stopped; counts answers
    and failures. Bounded: stops by itself after `limit` seconds."""

    def __init__(self, port, ca, review, threads=4, limit=60, new_connections=False):
        self.port, self.ca, self.review = port, ca, review
        self.ok = self.failed = self.retried = 0
        self.errors = []
        self.stop_event = threading.Event()
        self.refused = threading.Event()
        self.limit = limit
        self.new_connections = new_connections
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run) for _ in range(threads)]
        for t in self.threads:
            t.start()

    # The server closed a keep-alive connection before reading the request sent on it (at
    # shutdown): nothing was processed, and clients such as Go's transport send it again.
    CLOSED = (ssl.SSLEOFError, http.client.RemoteDisconnected, BrokenPipeError,
              ConnectionResetError)

    def run(self):
        deadline = time.monotonic() + self.limit
        client = Client(self.port, self.ca)
        while not self.stop_event.is_set() and time.monotonic() < deadline:
            try:
                try:
                    r = client.review("/mutate", self.review)
                except self.CLOSED:
                    with self.lock:
                        self.retried += 1
                    r = client.review("/mutate", self.review)  # once, on a new connection
                ok = r["allowed"] is True and r["uid"] == self.review["request"]["uid"]
                with self.lock:
                    self.ok += ok
                    self.failed += not ok
                if self.new_connections:
                    client.close()
            except ConnectionRefusedError:
                self.refused.set()
                return
            except Exception as e:  # noqa: BLE001 - counted as a failed request
                with self.lock:
                    self.failed += 1
                    self.errors.append(repr(e))
        client.close()

    def finish(self):
        self.stop_event.set()
        for t in self.threads:
            t.join(30)


def swap_secret_volume(directory, version, crt, key):
    """What kubelet does to a Secret volume: new files in a new timestamped directory, then the
    ..data symlink replaced atomically."""
    target = os.path.join(directory, "..%s" % version)
    os.mkdir(target)
    for src, name in ((crt, "tls.crt"), (key, "tls.key")):
        with open(src, "rb") as f, open(os.path.join(target, name), "wb") as out:
            out.write(f.read())
    tmp = os.path.join(directory, "..data_tmp")
    os.symlink("..%s" % version, tmp)
    os.rename(tmp, os.path.join(directory, "..data"))


@case
def certificate_rotation(work):
    """Certificates rotated under load without a restart: a kubelet ..data symlink swap, then a
    plain rename over the files; a broken pair keeps the old one; zero failed requests; expiry and
    reloads in /metrics (item 3)."""
    certs = Certs(work)
    first = certs.issue("first")
    second = certs.issue("second")
    third = certs.issue("third")
    volume = os.path.join(work, "volume")
    os.mkdir(volume)
    swap_secret_volume(volume, "v1", *first)
    os.symlink("..data/tls.crt", os.path.join(volume, "tls.crt"))
    os.symlink("..data/tls.key", os.path.join(volume, "tls.key"))
    review = make_review("--worker", "2", os.path.join(TUTORIAL, "ray-cluster.tpu-v6e-multihost.yaml"))
    with Webhook(work, os.path.join(volume, "tls.crt"), os.path.join(volume, "tls.key")) as wh:
        check(served_certificate_cn(wh.https_port, certs.ca) == "first", "not serving the first")
        load = Load(wh.https_port, certs.ca, review, threads=3)
        fresh = Load(wh.https_port, certs.ca, review, threads=1, new_connections=True)

        def wait_for(cn, timeout=60):
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if served_certificate_cn(wh.https_port, certs.ca) == cn:
                    return True
                time.sleep(0.2)
            return False

        time.sleep(1)
        swap_secret_volume(volume, "v2", *second)
        check(wait_for("second"), "the ..data swap was not picked up within 60s")
        time.sleep(1)
        # A broken pair: the third certificate with the second's key.
        swap_secret_volume(volume, "v3", third[0], second[1])
        failed = wh.wait_for_log(lambda l: l.get("msg", "").startswith("certificate reload failed"), 30)
        check(failed is not None, "a broken pair was not reported")
        check("BEGIN" not in json.dumps(failed), "certificate material in the log")
        check(served_certificate_cn(wh.https_port, certs.ca) == "second",
              "a broken pair replaced the served certificate")
        # Plain files renamed over the ones the webhook reads.
        for name in ("tls.crt", "tls.key"):
            os.unlink(os.path.join(volume, name))
        for src, name in ((third[0], "tls.crt"), (third[1], "tls.key")):
            with open(src, "rb") as f, open(os.path.join(volume, name + ".tmp"), "wb") as out:
                out.write(f.read())
        os.rename(os.path.join(volume, "tls.key.tmp"), os.path.join(volume, "tls.key"))
        os.rename(os.path.join(volume, "tls.crt.tmp"), os.path.join(volume, "tls.crt"))
        check(wait_for("third"), "the renamed files were not picked up within 60s")
        time.sleep(1)
        load.finish()
        fresh.finish()
        total = load.ok + fresh.ok
        check(load.failed == 0 and fresh.failed == 0,
              "%d requests failed during rotation: %s" % (load.failed + fresh.failed,
                                                           (load.errors + fresh.errors)[:3]))
        check(total >= 50 and fresh.ok >= 5, "too little load during rotation (%d)" % total)
        status, metrics = wh.health("/metrics")
        check('kuberay_tpu_webhook_tls_reloads_total{result="success"} 2' in metrics,
              "reloads not counted:\n" + metrics)
        check('kuberay_tpu_webhook_tls_reloads_total{result="failure"} 1' in metrics,
              "the failed reload not counted")
        expiry = re.search(r"^kuberay_tpu_webhook_tls_certificate_expiry_timestamp_seconds (\d+)$",
                           metrics, re.M)
        check(expiry and int(expiry.group(1)) > time.time(), "no certificate expiry metric")
        code = wh.stop()
        check(code == 0, "the webhook exited %s, not 0; its log ends:\n%s" % (code, wh.log_text()[-3000:]))
        print("%d requests (%d on new connections) across 2 rotations, 0 failed" % (total, fresh.ok))


@case
def sigterm_under_load(work):
    """SIGTERM under load: /readyz turns 503 first, the port keeps serving for the drain delay,
    in-flight requests finish, no accepted request fails, exit 0 within --shutdown-timeout
    (item 5)."""
    certs = Certs(work)
    crt, key = certs.issue("webhook")
    review = make_review("--worker", "0", os.path.join(TUTORIAL, "ray-cluster.tpu-v6e-multihost.yaml"))
    with Webhook(work, crt, key, "--shutdown-timeout=6s") as wh:
        check(wh.health("/readyz")[0] == 200, "not ready before SIGTERM")
        load = Load(wh.https_port, certs.ca, review, threads=4, limit=30)
        time.sleep(1.5)
        before = load.ok
        sent_at = time.monotonic()
        wh.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 2
        readyz = None
        while time.monotonic() < deadline:
            readyz = wh.health("/readyz")
            if readyz[0] == 503:
                break
            time.sleep(0.05)
        check(readyz and readyz[0] == 503 and "shutting down" in readyz[1],
              "/readyz did not turn 503 after SIGTERM: %s" % (readyz,))
        time.sleep(1)  # within the 2 s drain delay: still answering
        check(wh.proc.poll() is None and load.ok > before, "stopped serving during the drain delay")
        try:
            code = wh.proc.wait(15)
        except subprocess.TimeoutExpired:
            raise Failure("still running 15s after SIGTERM")
        elapsed = time.monotonic() - sent_at
        load.finish()
        check(code == 0, "exit code %d after SIGTERM" % code)
        # Exit 0 already means it finished within --shutdown-timeout (past it the process exits 1
        # by itself); the generous bound here only catches a hang, not a slow machine.
        check(elapsed <= 6 + 5, "exit took %.1fs, far over --shutdown-timeout=6s" % elapsed)
        check(load.failed == 0, "requests failed during shutdown: %s" % load.errors[:3])
        log = wh.log_lines()
        order = [l.get("msg") for l in log if l.get("msg") in ("signal received", "shutting down", "stopped")]
        check(order == ["signal received", "shutting down", "stopped"], "log order %s" % order)
        print("%d requests answered; exit 0 after %.1fs; %d idle connections closed by the stop "
              "(the client sent again)" % (load.ok, elapsed, load.retried))


@case
def sigterm_waits_for_inflight(work):
    """A request whose body is still arriving when SIGTERM comes is answered before the exit
    (in-flight requests finish); SIGINT skips the drain delay."""
    certs = Certs(work)
    crt, key = certs.issue("webhook")
    review = json.dumps(make_review("--worker", "0", os.path.join(TUTORIAL, "ray-cluster.tpu-v6e-multihost.yaml"))).encode()
    with Webhook(work, crt, key, "--shutdown-timeout=10s") as wh:
        ctx = tls_context(certs.ca)
        raw = socket.create_connection(("127.0.0.1", wh.https_port), timeout=15)
        s = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
        s.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(review) + review[:100])
        time.sleep(0.5)
        started = time.monotonic()
        wh.proc.send_signal(signal.SIGINT)
        time.sleep(1.0)
        check(wh.proc.poll() is None, "exited with a request in flight")
        s.sendall(review[100:])
        data = b""
        while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        status, headers, body = split_response(data)
        check(status == 200 and json.loads(body)["response"]["allowed"], "in-flight request lost")
        check(headers.get("connection") == "close", "a response during shutdown must close")
        s.close()
        code = wh.proc.wait(10)
        check(code == 0, "exit code %d" % code)
        check(time.monotonic() - started < 5, "SIGINT waited for a drain delay")


def thread_names(pid, want):
    """The names of process pid's threads once they are want (sorted), or as they were after 10 s:
    a thread is named just after it starts."""
    task = "/proc/%d/task" % pid
    names = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        names = []
        for tid in os.listdir(task):
            try:
                names.append(open(os.path.join(task, tid, "comm")).read().strip())
            except OSError:
                pass  # ended meanwhile
        if sorted(names) == want:
            break
        time.sleep(0.05)
    return sorted(names)


@case
def threads_named(work):
    """The process's threads by the names `top -H` and /proc show (docs/server.md "Connections
    and limits"): on the HTTPS port min(--threads, cores) I/O threads and as many handler threads
    (--threads of them with legacy placement on), one of each on the health port, the log
    flusher, the certificate watcher, the signal thread and the main thread; with legacy
    placement one watch thread per resource (Pods, claim Leases, Nodes, Services) and the claims'
    janitor; no other thread."""
    certs = Certs(work)
    crt, key = certs.issue("webhook")
    cores = os.cpu_count() or 1
    common = ["health-io0", "health-handler0", "log-flush", "cert-watch", "signals",
              "kuberay-tpu-web"]
    with FakeKubeApi(work, tokens=["test-token"], max_seconds=60) as api:
        kubeconfig = api.kubeconfig(os.path.join(work, "kubeconfig"), token="test-token")
        legacy = ["--legacy-indexing=on", "--kube-config-path=" + kubeconfig]
        for threads, flags in ((1, []), (3, []), (3, legacy)):
            io = min(threads, cores)
            handlers = threads if flags else io
            want = sorted(["https-io%d" % i for i in range(io)] +
                          ["https-handler%d" % i for i in range(handlers)] + common +
                          (["watch-pods", "watch-leases", "watch-nodes", "watch-services",
                            "claims-janitor"] if flags else []))
            with Webhook(work, crt, key, "--threads=%d" % threads, *flags,
                         env={"POD_NAMESPACE": "ray-system", "POD_NAME": "webhook-0"}) as wh:
                names = thread_names(wh.proc.pid, want)
                check(names == want, "--threads=%d %s on %d cores: threads %s, want %s" %
                      (threads, " ".join(flags), cores, names, want))
                check(wh.stop(signal.SIGINT) == 0,  # SIGINT: no drain delay
                      "the webhook did not exit 0:\n" + wh.log_text()[-2000:])
    print("threads named and counted at --threads=1 and 3, and with legacy placement, on %d cores"
          % cores)


@case
def metrics_and_health(work):
    """/healthz, /readyz and /metrics on the plain-HTTP port; the metrics pass `promtool check
    metrics` after admissions, denials and HTTP errors (item 7)."""
    certs = Certs(work)
    crt, key = certs.issue("webhook")
    with Webhook(work, crt, key) as wh:
        c = Client(wh.https_port, certs.ca)
        tutorial = os.path.join(TUTORIAL, "ray-cluster.tpu-v6e-multihost.yaml")
        c.review("/mutate", make_review("--worker", "0", tutorial))
        c.review("/validate", make_review("--validate", tutorial))
        c.review("/mutate", json.load(open(os.path.join(FIXTURES, "admission", "deny-missing-topology.json"))))
        c.request("GET", "/mutate")
        c.request("POST", "/nowhere", "{}")
        c.close()
        check(wh.health("/healthz") == (200, "ok\n"), "/healthz")
        check(wh.health("/readyz") == (200, "ok\n"), "/readyz")
        status, text = wh.health("/metrics")
        check(status == 200, "/metrics answered %d" % status)
        for line in ('kuberay_tpu_webhook_requests_total{webhook="mutate",code="200"} 1',
                     'kuberay_tpu_webhook_requests_total{webhook="validate",code="200"} 1',
                     'kuberay_tpu_webhook_requests_total{webhook="mutate",code="400"} 1',
                     'kuberay_tpu_webhook_requests_total{webhook="mutate",code="405"} 1',
                     'kuberay_tpu_webhook_denials_total{webhook="mutate",reason="missing_topology"} 1',
                     'kuberay_tpu_webhook_placements_total{path="labels"} 1',
                     "kuberay_tpu_webhook_ready 1"):
            check(line in text, "missing from /metrics: " + line)
        path = os.path.join(work, "metrics.txt")
        with open(path, "w") as f:
            f.write(text)
        r = run(["promtool", "check", "metrics"], stdin=open(path))
        check(r.returncode == 0, "promtool check metrics:\n" + r.stdout + r.stderr)
        conn = http.client.HTTPConnection("127.0.0.1", wh.health_port, timeout=10)
        conn.request("GET", "/nope")
        r404 = conn.getresponse()
        check(r404.status == 404, "unknown health path answered %d" % r404.status)
        conn.close()
        # The log sink writes in batches (at least every 200 ms): wait for them, bounded.
        deadline = time.monotonic() + 10
        while True:
            lines = [l for l in wh.log_lines() if l.get("msg") == "admission"]
            if len(lines) >= 4 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        check(len(lines) == 4, "want one log line per request to /mutate or /validate, got %d" % len(lines))
        for l in lines:
            for field in ("uid", "namespace", "generateName", "kind", "operation", "outcome",
                          "latency_us"):
                check(field in l, "admission log line without " + field + ": %s" % l)
        patched = [l for l in lines if l["outcome"] == "patched"][0]
        check(patched["replica"] == 0 and patched["host"] == 0, "placement not logged")
        code = wh.stop()
        check(code == 0, "the webhook exited %s, not 0; its log ends:\n%s" % (code, wh.log_text()[-3000:]))


@case
def command_line(work):
    """Item 1: bad flags exit 2 with one line; --help and --version exit 0; a missing or broken
    certificate, or a busy port, exits 1 with a message naming it; --server-cert serves."""
    r = run([BINARY, "--bogus=1"])
    check(r.returncode == 2 and r.stderr.count("\n") == 1 and "unknown flag --bogus" in r.stderr,
          "bad flag: %d %r" % (r.returncode, r.stderr))
    r = run([BINARY, "--read-timeout=10"])
    check(r.returncode == 2 and "missing unit" in r.stderr, "bad value: %r" % r.stderr)
    r = run([BINARY, "--help"])
    check(r.returncode == 0 and "--bind-address" in r.stdout, "--help")
    r = run([BINARY, "--version"])
    check(r.returncode == 0 and r.stdout.startswith("kuberay-tpu-webhook "), "--version")
    with Webhook(work, os.path.join(work, "missing.crt"), os.path.join(work, "missing.key"),
                 expect_start=False) as wh:
        code = wh.proc.wait(15)
        check(code == 1 and "missing.crt" in wh.log_text(), "missing certificate: %d %s" % (code, wh.log_text()))
    certs = Certs(work)
    crt, key = certs.issue("webhook")
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
    r = subprocess.run([BINARY, "--tls-cert-file=" + crt, "--tls-private-key-file=" + key,
                        "--bind-address=127.0.0.1:0", "--health-address=127.0.0.1:0",
                        "--legacy-indexing=on", "--kube-config-path=" + os.path.join(work, "none")],
                       capture_output=True, text=True, timeout=30, env=env)
    check(r.returncode == 1 and "--legacy-indexing=on needs Kubernetes API access" in r.stderr
          and os.path.join(work, "none") in r.stderr,
          "--legacy-indexing=on without an API must fail at start: %r" % r.stderr)
    r = subprocess.run([BINARY, "--tls-cert-file=" + crt, "--tls-private-key-file=" + key,
                        "--bind-address=127.0.0.1:0", "--health-address=127.0.0.1:0",
                        "--legacy-indexing=auto", "--version"], capture_output=True, text=True,
                       timeout=30, env=env)
    check(r.returncode == 0, "--version")
    other_crt, other_key = certs.issue("other")
    with Webhook(work, crt, other_key, expect_start=False) as wh:
        code = wh.proc.wait(15)
        check(code == 1 and "does not belong" in wh.log_text() and "BEGIN" not in wh.log_text(),
              "mismatched key: %s" % wh.log_text())
    b64 = lambda p: base64.b64encode(open(p, "rb").read()).decode()
    with Webhook(work, None, None, "--server-cert=" + b64(crt), "--server-key=" + b64(key)) as wh:
        check(served_certificate_cn(wh.https_port, certs.ca) == "webhook", "--server-cert")
        with Webhook(work, crt, key, "--bind-address=127.0.0.1:%d" % wh.https_port,
                     expect_start=False) as busy:
            code = busy.proc.wait(15)
            check(code == 1 and "cannot listen" in busy.log_text(), "busy port: %s" % busy.log_text())
        code = wh.stop()
        check(code == 0, "the webhook exited %s, not 0; its log ends:\n%s" % (code, wh.log_text()[-3000:]))


@case
def legacy_placement_with_api(work):
    """--legacy-indexing=on with an API (the project's fake kube-apiserver on 127.0.0.1): /readyz
    waits for the first Pod list, Pods without KubeRay's index labels are placed as their golden
    responses say, the next Pod of the group gets the next host (the claim the first wrote to a
    Lease in POD_NAMESPACE), and the watches' and claims' metrics join /metrics."""
    certs = Certs(work)
    crt, key = certs.issue("webhook")
    with FakeKubeApi(work, tokens=["test-token"], max_seconds=100) as api:
        kubeconfig = api.kubeconfig(os.path.join(work, "kubeconfig"), token="test-token")
        with Webhook(work, crt, key, "--legacy-indexing=on", "--kube-config-path=" + kubeconfig,
                     env={"POD_NAMESPACE": "ray-system", "POD_NAME": "webhook-0"}) as wh:
            deadline = time.monotonic() + 20
            while wh.health("/readyz")[0] != 200 and time.monotonic() < deadline:
                time.sleep(0.1)
            check(wh.health("/readyz")[0] == 200, "not ready after the first Pod list")
            claims_line = wh.wait_for_log(lambda l: l.get("msg") == "slot claims", 5)
            check(claims_line is not None and claims_line.get("namespace") == "ray-system" and
                  claims_line.get("namespace_from") == "POD_NAMESPACE",
                  "the startup log does not say where the namespace came from: %s" % claims_line)
            review = json.load(open(os.path.join(FIXTURES, "admission", "legacy-empty-cluster.json")))
            golden = json.load(open(os.path.join(FIXTURES, "responses", "legacy-empty-cluster.json")))
            c = Client(wh.https_port, certs.ca)
            r = c.review("/mutate", review)
            readable = dict(r, patch=decoded_patch(r)) if "patch" in r else r
            check(readable == golden, "legacy placement differs from the golden response:\n%s\n%s"
                  % (json.dumps(readable)[:600], json.dumps(golden)[:600]))
            review["request"]["uid"] = "uid-second"
            second = c.review("/mutate", review)
            env = {}
            for op in decoded_patch(second):
                if op["path"].endswith("/env/-"):
                    env[op["value"]["name"]] = op["value"].get("value")
            check(second["allowed"] and env.get("TPU_WORKER_ID") == "1",
                  "the second Pod of the group did not get host 1: %s" % env.get("TPU_WORKER_ID"))
            c.close()
            leases = api.objects("leases")
            check(len(leases) == 1 and leases[0]["metadata"]["namespace"] == "ray-system",
                  "the claims are not in one Lease of POD_NAMESPACE: %s" % leases)
            status, metrics = wh.health("/metrics")
            check("kuberay_tpu_webhook_placements_total{path=\"legacy\"} 2" in metrics,
                  "legacy placements not counted")
            check("kuberay_tpu_webhook_kube_synced{resource=\"pods\"} 1" in metrics and
                  "kuberay_tpu_webhook_legacy_claims_written_total 2" in metrics,
                  "the watches' and claims' metrics are not in /metrics")
            r = run(["promtool", "check", "metrics"], input=metrics)
            check(r.returncode == 0, "promtool check metrics:\n" + r.stdout + r.stderr)
            check(wh.stop(signal.SIGINT) == 0, "the webhook did not exit 0")


@case
def legacy_placement_needs_a_namespace(work):
    """With API access but no namespace from POD_NAMESPACE, the service account's file or
    --namespace, the webhook refuses to start and says how to fix it."""
    certs = Certs(work)
    crt, key = certs.issue("webhook")
    with FakeKubeApi(work, max_seconds=60) as api:
        kubeconfig = api.kubeconfig(os.path.join(work, "kubeconfig"))
        env = {"POD_NAMESPACE": ""}
        wh = Webhook(work, crt, key, "--legacy-indexing=on", "--kube-config-path=" + kubeconfig,
                     expect_start=False, env=env)
        with wh:
            code = wh.proc.wait(20)
            check(code == 1, "expected exit 1, got %s" % code)
            check("--namespace" in wh.log_text() and "POD_NAMESPACE" in wh.log_text(),
                  "the error does not say how to set the namespace:\n" + wh.log_text())
        with Webhook(work, crt, key, "--legacy-indexing=on", "--kube-config-path=" + kubeconfig,
                     "--namespace=from-flag", env=env) as ok:
            line = ok.wait_for_log(lambda l: l.get("msg") == "slot claims", 10)
            check(line is not None and line.get("namespace") == "from-flag" and
                  line.get("namespace_from") == "--namespace", "--namespace not used: %s" % line)
            check(ok.stop() == 0, "the webhook did not exit 0")


# Cloud Logging's LogSeverity for each spdlog level name (docs/server.md "Logs"), by hand: GKE's
# logging agent reads a JSON line's `severity`, and files a stderr line without one as ERROR.
SEVERITY_OF_LEVEL = {"debug": "DEBUG", "info": "INFO", "warning": "WARNING", "error": "ERROR",
                     "critical": "CRITICAL"}


def check_severities(text, what):
    """Every line of a --log-format=json log is one JSON object whose `severity` is Cloud
    Logging's name for its `level`, with `time` in RFC 3339 UTC and a `msg`. Returns the
    severities seen."""
    seen = set()
    for n, line in enumerate(text.splitlines(), 1):
        try:
            j = json.loads(line)
        except ValueError:
            raise Failure("%s: log line %d is not JSON: %r" % (what, n, line[:200]))
        check(isinstance(j, dict) and j.get("level") in SEVERITY_OF_LEVEL and
              j.get("severity") == SEVERITY_OF_LEVEL[j["level"]],
              "%s: log line %d: severity %r for level %r: %r"
              % (what, n, j.get("severity"), j.get("level"), line[:200]))
        check(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", str(j.get("time"))) and
              isinstance(j.get("msg"), str), "%s: log line %d: time or msg: %r" % (what, n, line[:200]))
        seen.add(j["severity"])
    return seen


@case
def signals_and_files(work):
    """docs/server.md "Signals and certificate files": every signal whose default action would
    end the process is handled, or logged and ignored. SIGHUP re-reads the certificate files,
    SIGQUIT shuts down as SIGTERM does, the others leave the webhook serving. A certificate or
    key path naming a FIFO or a device is refused without blocking: on reload the old
    certificate stays; at start the process exits 1 with one error line. Every line these runs
    log is JSON with Cloud Logging's severity for its level, DEBUG to ERROR all seen."""
    certs = Certs(work)
    crt, key = certs.issue("webhook")
    review = make_review("--worker", "0", os.path.join(TUTORIAL, "ray-cluster.tpu-v6e-multihost.yaml"))
    live_crt, live_key = os.path.join(work, "live.crt"), os.path.join(work, "live.key")
    for src, dst in ((crt, live_crt), (key, live_key)):
        with open(src, "rb") as f, open(dst, "wb") as out:
            out.write(f.read())
    seen = set()
    # --v=1: a debug line per closed connection, so the log has every level the server writes.
    with Webhook(work, live_crt, live_key, "--v=1") as wh:
        client = Client(wh.https_port, certs.ca)

        def serving(after):
            check(wh.proc.poll() is None, "the webhook exited (%s) after %s; its log ends:\n%s"
                  % (wh.proc.returncode, after, wh.log_text()[-2000:]))
            check(wh.health("/healthz") == (200, "ok\n"), "/healthz after " + after)
            r = client.review("/mutate", review)
            check(r["allowed"] is True and r["uid"] == review["request"]["uid"],
                  "/mutate after %s: %s" % (after, r))

        def wait_lines(match, count, what, timeout=10):
            deadline = time.monotonic() + timeout
            while True:
                lines = [l for l in wh.log_lines() if match(l)]
                if len(lines) >= count or time.monotonic() > deadline or wh.proc.poll() is not None:
                    break
                time.sleep(0.05)
            check(len(lines) >= count, "want %d log line(s) %s, got %d (exit %s); the log ends:\n%s"
                  % (count, what, len(lines), wh.proc.poll(), wh.log_text()[-2000:]))
            return lines[-1]

        def signal_lines(msg, name):
            return lambda l: l.get("msg") == msg and l.get("signal") == name

        # SIGHUP: a reload attempt, logged with who sent it; the process keeps serving.
        wh.proc.send_signal(signal.SIGHUP)
        line = wait_lines(signal_lines("signal received", "SIGHUP"), 1, "for SIGHUP")
        check(line.get("action") == "re-read the certificate files" and
              line.get("sender_pid") == os.getpid(), "the SIGHUP line: %s" % line)
        serving("SIGHUP")

        # Each of these is logged and ignored, every time it comes.
        ignored = [(signal.SIGUSR1, "SIGUSR1"), (signal.SIGUSR2, "SIGUSR2"),
                   (signal.SIGALRM, "SIGALRM"), (signal.SIGVTALRM, "SIGVTALRM"),
                   (signal.SIGPROF, "SIGPROF"), (signal.SIGIO, "SIGIO"), (signal.SIGPWR, "SIGPWR"),
                   (signal.SIGRTMIN + 1, "SIGRTMIN+1")]
        for sig, name in ignored:
            wh.proc.send_signal(sig)
            line = wait_lines(signal_lines("signal ignored", name), 1, "for " + name)
            check(line.get("level") == "warning" and line.get("sender_pid") == os.getpid(),
                  "the %s line: %s" % (name, line))
            serving(name)
        wh.proc.send_signal(signal.SIGUSR1)
        wait_lines(signal_lines("signal ignored", "SIGUSR1"), 2, "for a second SIGUSR1")
        serving("a second SIGUSR1")

        # The key file becomes a FIFO: refused at once, the served certificate stays.
        def reload_failures():
            return lambda l: (l.get("msg", "").startswith("certificate reload failed") and
                              live_key + ": is a FIFO, not a regular file" in l.get("error", ""))
        os.unlink(live_key)
        os.mkfifo(live_key)
        wait_lines(reload_failures(), 1, "saying the key is a FIFO")
        serving("the key became a FIFO")
        check(served_certificate_cn(wh.https_port, certs.ca) == "webhook",
              "the previous certificate is not served after the FIFO")
        # Another FIFO and a SIGHUP at once: whichever reads it, neither the watcher nor the
        # signal thread waits on it.
        os.unlink(live_key)
        os.mkfifo(live_key)
        wh.proc.send_signal(signal.SIGHUP)
        wait_lines(reload_failures(), 2, "for the second FIFO")
        wait_lines(signal_lines("signal received", "SIGHUP"), 2, "for the second SIGHUP")
        wh.proc.send_signal(signal.SIGUSR2)
        wait_lines(signal_lines("signal ignored", "SIGUSR2"), 2, "after the FIFO (signals stuck?)")
        serving("the second FIFO")
        with open(key, "rb") as f, open(live_key + ".tmp", "wb") as out:
            out.write(f.read())
        os.rename(live_key + ".tmp", live_key)

        # At start, a key that is a FIFO or a device: exit 1 within 5 s, one error line naming it.
        fifo = os.path.join(work, "fifo.key")
        os.mkfifo(fifo)
        for bad_key, expected in ((fifo, fifo + ": is a FIFO, not a regular file"),
                                  ("/dev/zero", "/dev/zero: is a character device, not a regular file")):
            with Webhook(work, crt, bad_key, expect_start=False) as bad:
                try:
                    code = bad.proc.wait(5)
                except subprocess.TimeoutExpired:
                    raise Failure("still running 5 s after starting with --tls-private-key-file=" + bad_key)
                errors = [l for l in bad.log_lines() if l.get("level") == "error"]
                check(code == 1 and len(errors) == 1 and expected in errors[0].get("error", ""),
                      "--tls-private-key-file=%s: exit %s, log:\n%s" % (bad_key, code, bad.log_text()))
                seen |= check_severities(bad.log_text(), "start with " + bad_key)

        serving("the files were restored")
        client.close()
        code = wh.stop()
        check(code == 0, "the webhook exited %s, not 0; its log ends:\n%s" % (code, wh.log_text()[-3000:]))
        wait_lines(signal_lines("signal received", "SIGTERM"), 1, "for SIGTERM")
        seen |= check_severities(wh.log_text(), "the signals run")
    check(seen == {"DEBUG", "INFO", "WARNING", "ERROR"},
          "the runs logged severities %s, want DEBUG, INFO, WARNING and ERROR" % sorted(seen))

    # --server-cert: SIGHUP has no files to re-read and says so; SIGQUIT shuts down cleanly.
    b64 = lambda p: base64.b64encode(open(p, "rb").read()).decode()
    with Webhook(work, None, None, "--server-cert=" + b64(crt), "--server-key=" + b64(key)) as wh:
        wh.proc.send_signal(signal.SIGHUP)
        line = wh.wait_for_log(lambda l: l.get("msg", "").startswith("nothing to re-read"), 5)
        check(line is not None and wh.proc.poll() is None,
              "SIGHUP with --server-cert: %s" % wh.log_text()[-2000:])
        code = wh.stop(signal.SIGQUIT)
        check(code == 0, "exit %s after SIGQUIT; the log ends:\n%s" % (code, wh.log_text()[-2000:]))
        line = wh.wait_for_log(lambda l: l.get("msg") == "signal received" and
                               l.get("signal") == "SIGQUIT", 1)
        check(line is not None and line.get("action") == "graceful shutdown",
              "SIGQUIT not logged as a graceful shutdown")


def main():
    return run_cases(CASES, sys.argv, "server_test.py")


if __name__ == "__main__":
    sys.exit(main())
