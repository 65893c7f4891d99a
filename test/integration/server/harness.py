"""Shared pieces of the server integration tests: certificates made with openssl at test time,
the kuberay-tpu-webhook binary started on 127.0.0.1 with ports chosen by the kernel, HTTPS
requests as kube-apiserver makes them, and kubectl patch --local.

Everything talks to loopback only, and every wait has a deadline."""
import base64
import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

BUILD = os.environ["WEBHOOK_BUILD_DIR"]
SOURCE = os.environ["WEBHOOK_SOURCE_DIR"]
BINARY = os.path.join(BUILD, "cmd/webhook/kuberay-tpu-webhook")
MAKE_REVIEW = os.path.join(BUILD, "bench/make-review")
DRYRUN = os.path.join(BUILD, "cmd/webhook-dryrun/webhook-dryrun")
FIXTURES = os.path.join(SOURCE, "test/fixtures")
TUTORIAL = os.path.join(SOURCE, "examples/gke-tutorial")


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


def run(cmd, timeout=60, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


class Certs:
    """A CA and serving certificates it signs for 127.0.0.1 and localhost."""

    def __init__(self, directory):
        self.dir = directory
        self.ca_key = os.path.join(directory, "ca.key")
        self.ca = os.path.join(directory, "ca.crt")
        self._openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                      "-nodes", "-days", "2", "-subj", "/CN=test-ca", "-keyout", self.ca_key,
                      "-out", self.ca)

    def _openssl(self, *args):
        r = run(["openssl", *args])
        check(r.returncode == 0, "openssl " + " ".join(args[:2]) + ": " + r.stderr)

    def issue(self, name, days=1):
        """Writes <name>.crt and <name>.key signed by the CA; returns their paths."""
        key = os.path.join(self.dir, name + ".key")
        csr = os.path.join(self.dir, name + ".csr")
        crt = os.path.join(self.dir, name + ".crt")
        ext = os.path.join(self.dir, name + ".ext")
        with open(ext, "w") as f:
            f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
        self._openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=" + name,
                      "-keyout", key, "-out", csr)
        self._openssl("x509", "-req", "-in", csr, "-CA", self.ca, "-CAkey", self.ca_key,
                      "-CAcreateserial", "-days", str(days), "-extfile", ext, "-out", crt)
        return crt, key


class Webhook:
    """The binary on 127.0.0.1, ports chosen by the kernel and read from its 'serving' line."""

    def __init__(self, workdir, cert, key, *flags, expect_start=True, env=None):
        self.log_path = os.path.join(workdir, "webhook-%d.log" % time.monotonic_ns())
        self.log_file = open(self.log_path, "wb")
        args = [BINARY, "--bind-address=127.0.0.1:0", "--health-address=127.0.0.1:0",
                "--log-format=json", "--legacy-indexing=off"]
        if cert:
            args += ["--tls-cert-file=" + cert, "--tls-private-key-file=" + key]
        environment = dict(os.environ)
        environment.update(env or {})
        self.proc = subprocess.Popen(args + list(flags), stdout=subprocess.DEVNULL,
                                     stderr=self.log_file, stdin=subprocess.DEVNULL,
                                     env=environment)
        self.https_port = self.health_port = None
        if expect_start:
            serving = self.wait_for_log(lambda l: l.get("msg") == "serving", 20)
            check(serving is not None, "the webhook did not start:\n" + self.log_text())
            self.https_port = int(serving["https"].rsplit(":", 1)[1])
            self.health_port = int(serving["health"].rsplit(":", 1)[1])

    def log_text(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def log_lines(self):
        out = []
        for line in self.log_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out

    def wait_for_log(self, predicate, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.log_lines():
                if predicate(line):
                    return line
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        for line in self.log_lines():
            if predicate(line):
                return line
        return None

    def health(self, path):
        conn = http.client.HTTPConnection("127.0.0.1", self.health_port, timeout=10)
        try:
            conn.request("GET", path)
            r = conn.getresponse()
            return r.status, r.read().decode()
        finally:
            conn.close()

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
                raise Failure("the webhook did not exit within %ss of %s" % (timeout, sig))
        self.log_file.close()
        return self.proc.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        self.log_file.close()


def tls_context(ca):
    ctx = ssl.create_default_context(cafile=ca)
    ctx.check_hostname = True
    return ctx


class Client:
    """A keep-alive HTTPS client, as kube-apiserver's: POST with Content-Type application/json."""

    def __init__(self, port, ca, timeout=15):
        self.port, self.ctx, self.timeout = port, tls_context(ca), timeout
        self.conn = None

    def request(self, method, path, body=b"", headers=None):
        if isinstance(body, str):
            body = body.encode()
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        if self.conn is None:
            self.conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx,
                                                    timeout=self.timeout)
        try:
            self.conn.request(method, path, body=body, headers=h)
            r = self.conn.getresponse()
            data = r.read()
            if r.getheader("Connection", "").lower() == "close":
                self.close()
            return r.status, dict(r.getheaders()), data
        except Exception:
            self.close()
            raise

    def review(self, path, review):
        status, headers, data = self.request("POST", path, json.dumps(review))
        check(status == 200, "%s answered HTTP %d: %s" % (path, status, data[:300]))
        out = json.loads(data)
        check(out.get("kind") == "AdmissionReview" and "response" in out,
              "not an AdmissionReview: %s" % data[:300])
        return out["response"]

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def decoded_patch(response):
    if "patch" not in response:
        return []
    check(response.get("patchType") == "JSONPatch", "patch without patchType JSONPatch")
    return json.loads(base64.b64decode(response["patch"]))


def kubectl_patch(workdir, pod, patch):
    """Applies `patch` to `pod` with kubectl patch --local and returns the patched Pod."""
    fd, path = tempfile.mkstemp(suffix=".json", dir=workdir)
    with os.fdopen(fd, "w") as f:
        json.dump(pod, f)
    try:
        r = run(["kubectl", "patch", "--local", "-f", path, "--type=json", "-p",
                 json.dumps(patch), "-o", "json"], timeout=120)
        check(r.returncode == 0, "kubectl patch --local refused the patch: " + r.stderr)
        return json.loads(r.stdout)
    finally:
        os.unlink(path)


def parallel(items, fn, workers=4):
    """Runs fn over items on a few threads; returns the results in order, re-raising the first
    failure."""
    items = list(items)
    results, errors, lock, nxt = [None] * len(items), [], threading.Lock(), [0]

    def worker():
        while True:
            with lock:
                i = nxt[0]
                nxt[0] += 1
            if i >= len(items) or errors:
                return
            try:
                results[i] = fn(items[i])
            except Exception as e:  # noqa: BLE001 - reported below
                with lock:
                    errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def make_review(*args):
    r = run([MAKE_REVIEW, *args])
    check(r.returncode == 0, "make-review failed: " + r.stderr)
    return json.loads(r.stdout)


def served_certificate_cn(port, ca):
    """The CN of the certificate the server presents now."""
    ctx = tls_context(ca)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            subject = dict(x[0] for x in s.getpeercert()["subject"])
            return subject["commonName"]


def run_cases(cases, argv, script):
    """Runs the one case argv[1] names in a fresh work directory; the process's exit status."""
    if len(argv) != 2 or argv[1] not in cases:
        print("usage: %s CASE\ncases: %s" % (script, " ".join(cases)), file=sys.stderr)
        return 2
    name = argv[1]
    with Workdir() as work:
        try:
            cases[name](work)
        except Failure as e:
            print("FAILED %s: %s" % (name, e), file=sys.stderr)
            print_log_tails(work)
            return 1
    print("passed: " + name)
    return 0


def print_log_tails(work, lines=20):
    """The last lines of every process log the case wrote (webhooks, the fake API server), so a
    failure in CI shows what the processes said before the work directory is removed."""
    for name in sorted(os.listdir(work)):
        if not name.endswith(".log"):
            continue
        with open(os.path.join(work, name), "rb") as f:
            tail = f.read().decode("utf-8", "replace").splitlines()[-lines:]
        print("--- last %d lines of %s:" % (len(tail), name), file=sys.stderr)
        for line in tail:
            print("    " + line, file=sys.stderr)


class Workdir:
    def __enter__(self):
        self.path = tempfile.mkdtemp(prefix="server-it.")
        return self.path

    def __exit__(self, *exc):
        if exc[0] is None or not os.environ.get("KEEP_WORKDIR"):
            shutil.rmtree(self.path, ignore_errors=True)
        else:
            print("work dir kept:", self.path)


FAKE_API = os.path.join(BUILD, "test/integration/fakeapi/fake-kube-apiserver")


class FakeKubeApi:
    """The project's fake kube-apiserver (test/integration/fakeapi) as its own process on
    127.0.0.1: list/watch of Pods, Nodes and Services, reads and writes of Leases with
    kube-apiserver's semantics, and fault injection through its /fake/ control endpoints.
    It exits by itself after `max_seconds`."""

    def __init__(self, workdir, tokens=(), max_seconds=600):
        self.workdir = workdir
        port_file = os.path.join(workdir, "fake-api-%d.port" % time.monotonic_ns())
        args = [FAKE_API, "--port-file", port_file, "--max-seconds", str(max_seconds)]
        for t in tokens:
            args += ["--token", t]
        self.log = open(os.path.join(workdir, "fake-api.log"), "wb")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=self.log,
                                     stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        self.port = None
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                with open(port_file) as f:
                    text = f.read().strip()
                if text:
                    self.port = int(text)
                    break
            except OSError:
                pass
            time.sleep(0.05)
        check(self.port is not None, "the fake kube-apiserver did not start")

    def call(self, method, path, body=None, timeout=30):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            data = json.dumps(body).encode() if body is not None else None
            conn.request(method, path, body=data,
                         headers={"Content-Type": "application/json"} if data else {})
            r = conn.getresponse()
            text = r.read()
            check(r.status < 300, "%s %s: HTTP %d %s" % (method, path, r.status, text[:300]))
            return json.loads(text) if text else None
        finally:
            conn.close()

    def create(self, resource, obj):
        return self.call("POST", "/fake/objects/" + resource, obj)

    def objects(self, resource):
        return self.call("GET", "/fake/objects/" + resource)["items"]

    def stats(self):
        return self.call("GET", "/fake/stats")

    def kubeconfig(self, path, token=None):
        user = "  user:\n    token: %s\n" % token if token else "  user: {}\n"
        with open(path, "w") as f:
            f.write("apiVersion: v1\nkind: Config\ncurrent-context: fake\n"
                    "clusters:\n- name: fake\n  cluster:\n    server: http://127.0.0.1:%d\n"
                    "contexts:\n- name: fake\n  context: {cluster: fake, user: webhook}\n"
                    "users:\n- name: webhook\n%s" % (self.port, user))
        return path

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
