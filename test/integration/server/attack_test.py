#!/usr/bin/env python3
"""kuberay-tpu-webhook under hostile clients on loopback (docs/server.md "Connections and
limits"), one case per run:

    python3 attack_test.py CASE        (CTest runs each CASE as its own test)

Floods of idle, handshaking and trickling connections; the connection cap; malformed and
smuggling request heads; oversized lengths, headers and uids; memory-heavy reviews; and the
metrics of the refusals. Needs WEBHOOK_BUILD_DIR and WEBHOOK_SOURCE_DIR (set by CTest) and
openssl. Every server listens on 127.0.0.1 only; every socket has a timeout, every loop a bound.

Time bounds are multiplied by 4, and memory bounds skipped, when ASAN_OPTIONS or TSAN_OPTIONS
is set (the sanitizer builds run these cases too)."""
import gzip
import http.client
import json
import multiprocessing
import os
import re
import resource
import select
import socket
import ssl
import sys
import threading
import time

from harness import (TUTORIAL, Certs, Failure, Webhook, check, make_review, run_cases,
                     tls_context)

CASES = {}
SANITIZED = bool(os.environ.get("ASAN_OPTIONS") or os.environ.get("TSAN_OPTIONS"))
SLOW = 4 if SANITIZED else 1
MiB = 1024 * 1024
V6E = os.path.join(TUTORIAL, "ray-cluster.tpu-v6e-multihost.yaml")


def case(fn):
    CASES[fn.__name__] = fn
    return fn


# ---------------------------------------------------------------------------------------------
# Raw HTTP over TLS (the HTTPS port) or plain TCP (the health port).


def connect(port, ctx=None, timeout=10):
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    if ctx is None:
        return raw
    try:
        return ctx.wrap_socket(raw, server_hostname="127.0.0.1")
    except Exception:
        raw.close()
        raise


def readable(sock, timeout=0.0):
    if isinstance(sock, ssl.SSLSocket) and sock.pending():
        return True
    p = select.poll()
    p.register(sock.fileno(), select.POLLIN | select.POLLHUP | select.POLLERR)
    return bool(p.poll(int(timeout * 1000)))


def is_closed(sock):
    """Whether the server has closed `sock` (EOF or reset); reads what is there without waiting."""
    if not readable(sock):
        return False
    saved = sock.gettimeout()
    sock.settimeout(0)
    try:
        if isinstance(sock, ssl.SSLSocket):
            return sock.recv(4096) == b""
        return sock.recv(1, socket.MSG_PEEK) == b""
    except (ssl.SSLWantReadError, BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True
    finally:
        sock.settimeout(saved)


def peek_answer(sock):
    """What the server has sent on `sock`, without waiting: (None, b"") for nothing yet (or only
    TLS handshake messages such as session tickets), ("answered", data) or ("closed", b"")."""
    if not readable(sock):
        return None, b""
    saved = sock.gettimeout()
    sock.settimeout(0)
    try:
        data = sock.recv(65536)
    except (ssl.SSLWantReadError, BlockingIOError, InterruptedError):
        return None, b""
    except OSError:
        return "closed", b""
    finally:
        sock.settimeout(saved)
    return ("answered", data) if data else ("closed", b"")


def send_watching(sock, data, deadline, chunk=65536):
    """Sends `data` in chunks, stopping early when the server answers or hangs up (a server
    refusing a head must not have to read a 7 MiB body first). Returns (how, what the server
    sent meanwhile): how is "sent", "answered" or "closed"."""
    view, sent = memoryview(data), 0
    saved = sock.gettimeout()
    sock.settimeout(0.5)
    try:
        while sent < len(data) and time.monotonic() < deadline:
            how, answer = peek_answer(sock)
            if how is not None:
                return how, answer
            try:
                sent += sock.send(view[sent:sent + chunk])
            except socket.timeout:
                continue  # the server is not reading (yet): keep watching for its answer
            except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
                return "closed", b""
        return "sent", b""
    finally:
        sock.settimeout(saved)


def read_until(sock, deadline, done=None, first=b""):
    """Reads until the server closes the connection, `done(data)` holds, or the deadline passes
    (`first`: what was already read). Returns (data, how): how is "eof", "reset", "done" or
    "timeout"."""
    chunks = [first]
    sock.settimeout(0.2)
    while True:
        if done is not None and done(b"".join(chunks)):
            return b"".join(chunks), "done"
        if time.monotonic() > deadline:
            return b"".join(chunks), "timeout"
        try:
            data = sock.recv(65536)
        except socket.timeout:
            continue
        except ssl.SSLWantReadError:
            continue
        except (ConnectionResetError, BrokenPipeError, ssl.SSLError, OSError):
            return b"".join(chunks), "reset"
        if not data:
            return b"".join(chunks), "eof"
        chunks.append(data)


def parse_responses(data):
    """The HTTP responses in `data`, in order, as (status, headers, body); headers' names are
    lower case. The last one may be incomplete: then its body is None."""
    out = []
    while data:
        head, sep, rest = data.partition(b"\r\n\r\n")
        if not sep:
            out.append((None, {}, None))
            break
        lines = head.split(b"\r\n")
        m = re.match(rb"HTTP/1\.[01] (\d{3})", lines[0])
        check(m is not None, "not an HTTP/1.1 response: %r" % data[:200])
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(b":")
            headers[k.strip().lower().decode()] = v.strip().decode("latin-1")
        status = int(m.group(1))
        if 100 <= status < 200:
            out.append((status, headers, b""))
            data = rest
            continue
        if "content-length" in headers:
            n = int(headers["content-length"])
            if len(rest) < n:
                out.append((status, headers, None))
                break
            out.append((status, headers, rest[:n]))
            data = rest[n:]
        else:
            out.append((status, headers, rest))
            break
    return out


def final_response_complete(data):
    """A complete response other than 100 Continue is in `data`."""
    try:
        responses = parse_responses(data)
    except Failure:
        return True  # garbage: let the caller report it
    return any(s is not None and s >= 200 and b is not None for s, _, b in responses)


def exchange(port, payload, ctx=None, timeout=10, until_closed=True):
    """Sends `payload` on a new connection and reads the answer. Returns (responses, how, answer
    seconds, close seconds): with `until_closed`, everything until the server closes."""
    deadline = time.monotonic() + timeout
    sock = connect(port, ctx, timeout=min(timeout, 10))
    try:
        started, first = time.monotonic(), b""
        if len(payload) <= 65536:
            try:
                sock.sendall(payload)
            except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
                pass
        else:
            first = send_watching(sock, payload, deadline)[1]
        data, how = read_until(sock, deadline, final_response_complete, first)
        answered = time.monotonic() - started
        if until_closed and how == "done":
            more, how = read_until(sock, deadline)
            data += more
        return parse_responses(data), how, answered, time.monotonic() - started
    finally:
        sock.close()


def post(body, path=b"/mutate", headers=()):
    lines = [b"POST %s HTTP/1.1" % path, b"Host: 127.0.0.1", b"Content-Type: application/json",
             b"Content-Length: %d" % len(body)] + list(headers)
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def status_body(body, code):
    """`body` is one line of JSON, a metav1 Status with `code`; returns it."""
    check(body is not None, "the response was cut short")
    check(body.rstrip(b"\n").count(b"\n") == 0, "the error body is not one line: %r" % body[:300])
    try:
        s = json.loads(body)
    except ValueError:
        raise Failure("the error body is not JSON: %r" % body[:300])
    check(s.get("kind") == "Status" and s.get("code") == code and s.get("message"),
          "want a Status with code %d and a message, got %r" % (code, body[:300]))
    return s


def admission_response(status, body, uid):
    check(status == 200, "want HTTP 200 with an AdmissionReview, got %s: %r" % (status, body[:300]))
    out = json.loads(body)
    check(out.get("kind") == "AdmissionReview", "not an AdmissionReview: %r" % body[:300])
    r = out["response"]
    check(r["uid"] == uid, "uid %r not echoed (got %r)" % (uid, r["uid"]))
    return r


def vm_status(pid):
    """VmHWM and VmRSS of `pid`, in bytes."""
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmHWM", "VmRSS"):
                out[key] = int(value.split()[0]) * 1024
    return out


def raise_fd_limit(needed):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY:
        check(hard >= needed, "RLIMIT_NOFILE's hard limit %d is below the %d this case needs"
              % (hard, needed))
    target = hard if hard != resource.RLIM_INFINITY else max(soft, needed)
    resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def reviews(prefix, count):
    """`count` AdmissionReviews of the GKE tutorial's v6e worker 0, uids prefix-0..."""
    base = make_review("--worker", "0", V6E)
    out = []
    for i in range(count):
        base["request"]["uid"] = "%s-%d" % (prefix, i)
        out.append(("%s-%d" % (prefix, i), json.dumps(base).encode()))
    return out


def serving(work, *flags):
    certs = Certs(work)
    crt, key = certs.issue("webhook")
    return certs, Webhook(work, crt, key, *flags)


def stop_cleanly(wh):
    code = wh.stop()
    check(code == 0, "the webhook exited %s, not 0; its log ends:\n%s"
          % (code, wh.log_text()[-3000:]))


# ---------------------------------------------------------------------------------------------
# 1. Idle floods.


def open_idle(port, count, deadline, ctx=None):
    socks = []
    try:
        while len(socks) < count and time.monotonic() < deadline:
            socks.append(connect(port, ctx, timeout=3))
    except OSError as e:
        for s in socks:
            s.close()
        raise Failure("opened only %d of %d idle %s connections to port %d: %r"
                      % (len(socks), count, "TLS" if ctx else "TCP", port, e))
    if len(socks) < count:
        for s in socks:
            s.close()
        raise Failure("opened only %d of %d idle connections to port %d in time"
                      % (len(socks), count, port))
    return socks


class Keeper(threading.Thread):
    """Keeps groups of idle connections open: whenever the server closes one, a new one is
    opened in its place (as an attacker would, or a client pool). A group is a name, a count and
    a function opening one connection. Counts the reopenings; bounded by `limit` seconds."""

    def __init__(self, groups, limit):
        super().__init__(daemon=True)
        self.groups, self.limit = groups, limit
        self.reopened = {name: 0 for name, _, _ in groups}
        self.opened = {name: 0 for name, _, _ in groups}
        self.errors = []
        self.stop_event = threading.Event()
        self.epoll = select.epoll()
        self.socks = {}  # fd -> (group name, socket)

    def add(self, name, sock):
        self.socks[sock.fileno()] = (name, sock)
        self.epoll.register(sock.fileno(), select.EPOLLIN | select.EPOLLRDHUP)

    def run(self):
        deadline = time.monotonic() + self.limit
        opener = {name: fn for name, _, fn in self.groups}
        try:
            while not self.stop_event.is_set() and time.monotonic() < deadline:
                # The first connections of each group a few at a time (about 2 s for 64).
                for name, count, fn in self.groups:
                    if self.opened[name] < count:
                        for _ in range(min(2, count - self.opened[name])):
                            self.add(name, fn())
                            self.opened[name] += 1
                for fd, _ in self.epoll.poll(0.03):
                    name, sock = self.socks[fd]
                    if is_closed(sock):
                        self.epoll.unregister(fd)
                        del self.socks[fd]
                        sock.close()
                        self.add(name, opener[name]())
                        self.reopened[name] += 1
        except Exception as e:  # noqa: BLE001 - reported by the case
            self.errors.append(repr(e))

    def finish(self):
        self.stop_event.set()
        if self.ident is not None:
            self.join(30)
        for _, sock in self.socks.values():
            sock.close()
        self.epoll.close()


def served_idle(port, ctx, request, want):
    """A keep-alive connection that was answered once and is now idle."""
    s = connect(port, ctx, timeout=5 * SLOW)
    try:
        s.sendall(request)
        data, how = read_until(s, time.monotonic() + 5 * SLOW, final_response_complete)
        responses = parse_responses(data)
        check(how == "done" and responses[0][0] == 200 and responses[0][2] == want,
              "port %d: an idle client's request was not answered (%s): %r"
              % (port, how, data[:200]))
    except Exception:
        s.close()
        raise
    return s


def timed(fn):
    started = time.monotonic()
    fn()
    return time.monotonic() - started


def hold_floods(pipe, https_port, health_port, ca, sizes, limit):
    """In a child process, so that keeping thousands of sockets costs the probes' timing nothing:
    opens the floods, says "ready", keeps them until told "stop" (or `limit` seconds), waits for
    the keep-alive connections to have been reopened once, and reports what it saw."""
    tcp, tls, keep_alive = sizes
    flood, keeper = [], None
    try:
        ctx = tls_context(ca)
        deadline = time.monotonic() + 30 * SLOW
        flood += open_idle(https_port, tcp, deadline)
        flood += open_idle(https_port, tls, deadline, ctx)
        flood_done = time.monotonic()
        health_flood = open_idle(health_port, tcp + tls, deadline)
        get_root = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        get_healthz = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        keeper = Keeper([
            ("health flood", 0, lambda: connect(health_port, None, timeout=5)),
            ("HTTPS keep-alive", keep_alive,
             lambda: served_idle(https_port, ctx, get_root, b"kuberay-tpu-webhook")),
            ("health keep-alive", keep_alive,
             lambda: served_idle(health_port, None, get_healthz, b"ok\n")),
        ], limit=limit)
        for sock in health_flood:
            keeper.add("health flood", sock)
        keeper.start()
        pipe.send(("ready", len(flood), len(health_flood)))
        pipe.poll(limit)
        deadline = time.monotonic() + 15 * SLOW
        while (min(keeper.reopened["HTTPS keep-alive"], keeper.reopened["health keep-alive"])
               < keep_alive and not keeper.errors and time.monotonic() < deadline):
            time.sleep(0.1)
        held_for = time.monotonic() - flood_done
        closed = sum(1 for sock in flood if is_closed(sock))
        keeper.finish()
        pipe.send(("done", closed, held_for, keeper.reopened, keeper.errors))
    except Exception as e:  # noqa: BLE001 - reported by the case
        pipe.send(("error", repr(e)))
    finally:
        if keeper is not None:
            keeper.finish()
        for sock in flood:
            sock.close()


@case
def idle_floods(work):
    """3,000 idle TCP connections and 200 idle TLS connections (handshake done, nothing sent) on
    the HTTPS port, 3,200 idle TCP connections on the health port (plain HTTP: no handshake to
    finish; reopened whenever the health port's own read deadline closes them), and a client
    keeping 64 idle keep-alive connections on each port, reopening each one the server closes
    (--idle-timeout=3s): fresh clients are still answered, p99 of 20 within 100 ms on each port.
    Idle connections hold no worker (docs/server.md "Connections and limits")."""
    sizes = (3000, 200, 64)
    raise_fd_limit(2 * sum(sizes) + 512)
    # --read-timeout long enough that the HTTPS flood is still held when the probes end;
    # --idle-timeout short so that the keep-alive connections are closed and reopened meanwhile.
    read_timeout = 40 * SLOW
    # --memory-limit=2Gi: 256Mi would hold only 819 connections per port.
    certs, wh = serving(work, "--read-timeout=%ds" % read_timeout, "--idle-timeout=3s",
                        "--memory-limit=2Gi")
    with wh:
        ctx = tls_context(certs.ca)
        probes = reviews("probe", 20)
        here, there = multiprocessing.Pipe()
        holder = multiprocessing.get_context("fork").Process(
            target=hold_floods, daemon=True,
            args=(there, wh.https_port, wh.health_port, certs.ca, sizes, 60 * SLOW))
        holder.start()
        try:
            check(here.poll(60 * SLOW), "the floods were not opened within %d s" % (60 * SLOW))
            msg = here.recv()
            check(msg[0] == "ready", "opening the floods: %s" % (msg,))
            print("flood held: %d idle connections on the HTTPS port (%d TLS), %d on the health "
                  "port" % (msg[1], sizes[1], msg[2]))
            mutate, health = [], []

            def probe_mutate(uid, body):
                conn = http.client.HTTPSConnection("127.0.0.1", wh.https_port, context=ctx,
                                                   timeout=10 * SLOW)
                try:
                    conn.request("POST", "/mutate", body=body,
                                 headers={"Content-Type": "application/json"})
                    r = conn.getresponse()
                    data = r.read()
                finally:
                    conn.close()
                check(admission_response(r.status, data, uid)["allowed"] is True,
                      "a probe review was not admitted")

            def probe_health():
                conn = http.client.HTTPConnection("127.0.0.1", wh.health_port, timeout=10 * SLOW)
                try:
                    conn.request("GET", "/healthz")
                    r = conn.getresponse()
                    data = r.read()
                finally:
                    conn.close()
                check(r.status == 200 and data == b"ok\n",
                      "/healthz answered %d %r" % (r.status, data))

            # Spread over about 6 s, while the keep-alive connections and the health flood churn.
            for uid, body in probes:
                mutate.append(timed(lambda: probe_mutate(uid, body)))
                health.append(timed(probe_health))
                time.sleep(0.3)
            here.send("stop")
            check(here.poll(30 * SLOW), "the flood holder did not report")
            msg = here.recv()
            check(msg[0] == "done", "holding the floods: %s" % (msg,))
            _, closed, held_for, reopened, errors = msg
            check(not errors, "keeping idle connections open: %s" % errors[:3])
            for name in ("HTTPS keep-alive", "health keep-alive"):
                check(reopened[name] >= sizes[2],
                      "%s: the server did not close idle keep-alive connections after "
                      "--idle-timeout=3s (reopened %s)" % (name, reopened))
            check(closed == 0, "%d idle connections on the HTTPS port were closed %.1f s after the "
                  "flood, before --read-timeout=%ds" % (closed, held_for, read_timeout))
            for name, times in (("POST /mutate", mutate), ("GET /healthz", health)):
                p99 = sorted(times)[18]
                check(p99 <= 0.1 * SLOW, "%s beside the flood: p99 %.0f ms > %d ms (all: %s)"
                      % (name, p99 * 1000, 100 * SLOW, ["%.0f" % (t * 1000) for t in times]))
            print("p99 POST /mutate %.1f ms, GET /healthz %.1f ms; reopened %s"
                  % (sorted(mutate)[18] * 1000, sorted(health)[18] * 1000, reopened))
        finally:
            holder.join(1)
            if holder.is_alive():
                holder.kill()
                holder.join(5)
        stop_cleanly(wh)


# ---------------------------------------------------------------------------------------------
# 2. The connection cap.


def served_while_open(port, ctx, payload, check_answer):
    """A new keep-alive client: sends `payload`, checks the answer, returns the open socket."""
    s = connect(port, ctx, timeout=5 * SLOW)
    s.sendall(payload)
    data, how = read_until(s, time.monotonic() + 5 * SLOW, final_response_complete)
    check(how == "done", "a new client at the connection cap was not answered (%s): %r"
          % (how, data[:200]))
    check_answer(parse_responses(data)[0])
    return s


def wait_closed(socks, index, what):
    deadline = time.monotonic() + 2 * SLOW
    while not is_closed(socks[index]) and time.monotonic() < deadline:
        time.sleep(0.02)
    check(is_closed(socks[index]), "%s: idle connection #%d (the oldest) was not closed to make "
          "room" % (what, index + 1))
    still = [i + 1 for i in range(index + 1, len(socks)) if is_closed(socks[i])]
    check(not still, "%s: newer idle connections were closed too: %s" % (what, still[:10]))


@case
def connection_cap(work):
    """--max-connections=64: with 64 idle connections open, a new client is served and the
    oldest idle connection is the one closed; the next new client closes the next oldest; on the
    HTTPS port and on the health port."""
    certs, wh = serving(work, "--max-connections=64")
    with wh:
        ctx = tls_context(certs.ca)
        (uid1, body1), (uid2, body2) = reviews("cap", 2)

        def admitted(uid):
            return lambda r: check(admission_response(r[0], r[2], uid)["allowed"], "not admitted")

        def healthy(r):
            check(r[0] == 200 and r[2] == b"ok\n", "/healthz: %r" % (r,))

        for what, port, c, first, second, answer1, answer2 in (
                ("HTTPS", wh.https_port, ctx, post(body1), post(body2), admitted(uid1),
                 admitted(uid2)),
                ("health", wh.health_port, None, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
                 b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", healthy, healthy)):
            idle = []
            try:
                for _ in range(64):
                    idle.append(connect(port, None, timeout=5))
                    time.sleep(0.01)
                time.sleep(0.5)
                early = [i + 1 for i, s in enumerate(idle) if is_closed(s)]
                check(not early, "%s: idle connections closed below the cap: %s" % (what, early))
                client1 = served_while_open(port, c, first, answer1)
                wait_closed(idle, 0, what)
                client2 = served_while_open(port, c, second, answer2)
                wait_closed(idle, 1, what)
                check(not is_closed(client1), "%s: the newer idle client was closed instead" % what)
                client1.close()
                client2.close()
            finally:
                for s in idle:
                    s.close()
        stop_cleanly(wh)


@case
def connection_cap_from_memory(work):
    """--max-connections holds no more open connections per port than an eighth of
    --memory-limit does at 32 KiB per HTTPS and 8 KiB per health connection (docs/security.md
    "What a connection holds"): the serving line gives the cap (819 at 256Mi; 4096, the default,
    at 2Gi; 64 when asked for at 256Mi), a --max-connections the limit does not hold is warned
    of, and at 32Mi the 102nd idle connection is the last: the next client closes the oldest."""
    certs = Certs(work)
    crt, key = certs.issue("webhook")

    def held(limit):  # from the documented sizes, not read from the binary
        return limit // 8 // ((32 + 8) * 1024)

    for flags, want, warned in ((["--memory-limit=256Mi"], held(256 * MiB), False),
                                (["--memory-limit=2Gi"], 4096, False),
                                (["--memory-limit=256Mi", "--max-connections=64"], 64, False),
                                (["--memory-limit=256Mi", "--max-connections=2000"],
                                 held(256 * MiB), True)):
        with Webhook(work, crt, key, "--shutdown-timeout=3s", *flags) as wh:  # a 1 s drain
            serving_line = wh.wait_for_log(lambda l: l.get("msg") == "serving", 10)
            check(serving_line.get("max_connections") == want,
                  "%s: the serving line gives max_connections %r, want %d"
                  % (flags, serving_line.get("max_connections"), want))
            warning = wh.wait_for_log(lambda l: "open connections per port" in l.get("msg", ""),
                                      1 if warned else 0.3)
            check((warning is not None) == warned and
                  (not warned or str(want) in warning["msg"]),
                  "%s: want %s warning, got %r" % (flags, "a" if warned else "no", warning))
            stop_cleanly(wh)
    cap = held(32 * MiB)
    check(cap == 102, "32Mi holds %d connections per port" % cap)
    with Webhook(work, crt, key, "--shutdown-timeout=3s", "--memory-limit=32Mi") as wh:
        ctx = tls_context(certs.ca)
        idle = []
        try:
            for _ in range(cap):
                idle.append(connect(wh.https_port, None, timeout=5))
            time.sleep(0.5)
            early = [i + 1 for i, sock in enumerate(idle) if is_closed(sock)]
            check(not early, "idle connections closed below the cap: %s" % early)
            (uid, body), = reviews("held", 1)
            client = served_while_open(
                wh.https_port, ctx, post(body),
                lambda r: check(admission_response(r[0], r[2], uid)["allowed"], "not admitted"))
            wait_closed(idle, 0, "HTTPS at --memory-limit=32Mi")
            client.close()
        finally:
            for sock in idle:
                sock.close()
        stop_cleanly(wh)


# ---------------------------------------------------------------------------------------------
# 3. Trickled handshakes.


class Trickler(threading.Thread):
    """A TLS client driven byte by byte: its ClientHello over `hello_seconds`, then (if the
    server has not hung up) the rest of the handshake, `wait` seconds of silence, then a request
    head one byte every 100 ms. Records when the server closed the connection and what it said.
    Bounded by `limit` seconds."""

    REQUEST = b"POST /mutate HTTP/1.1\r\nHost: 127.0.0.1\r\n" + \
        b"".join(b"X-Trickle-%d: 1\r\n" % i for i in range(60))

    def __init__(self, port, ctx, hello_seconds, wait, limit):
        super().__init__(daemon=True)
        self.port, self.ctx, self.hello_seconds, self.wait = port, ctx, hello_seconds, wait
        self.limit = limit
        self.accepted = self.closed_at = self.first_request_byte = None
        self.handshaken = False
        self.plain = b""
        self.error = None
        self.sock = self.inc = self.obj = None

    def pump(self):
        """Takes in what the server sent; False once it has closed the connection."""
        while readable(self.sock):
            try:
                data = self.sock.recv(65536)
            except OSError:
                return False
            if not data:
                return False
            self.inc.write(data)
            if self.handshaken:
                try:
                    while True:
                        data = self.obj.read(65536)
                        if not data:  # close_notify
                            break
                        self.plain += data
                except ssl.SSLError:  # want-read, or a broken record
                    pass
        return True

    def send(self, data):
        try:
            self.sock.sendall(data)
            return True
        except OSError:
            return False

    def run(self):
        try:
            self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        except OSError as e:
            self.error = "connect: %r" % e
            return
        self.accepted = time.monotonic()
        try:
            if not self.drive(self.accepted + self.limit):
                self.closed_at = time.monotonic()
                self.pump()  # what the server sent before closing
        except Exception as e:  # noqa: BLE001 - reported by the case
            self.error = repr(e)
        finally:
            self.sock.close()

    def drive(self, deadline):
        """False as soon as the server closes the connection; True at the deadline."""
        self.inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.obj = self.ctx.wrap_bio(self.inc, out, server_hostname="127.0.0.1")
        try:
            self.obj.do_handshake()
        except ssl.SSLWantReadError:
            pass
        hello = out.read()
        for i in range(len(hello)):
            if not self.send(hello[i:i + 1]) or not self.pump():
                return False
            time.sleep(self.hello_seconds / len(hello))
        while not self.handshaken:
            if time.monotonic() > deadline:
                return True
            try:
                self.obj.do_handshake()
                self.handshaken = True
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLError:
                return False
            pending = out.read()
            if pending and not self.send(pending):
                return False
            if not self.handshaken and readable(self.sock, 0.05) and not self.pump():
                return False
        quiet_until = time.monotonic() + self.wait
        while time.monotonic() < quiet_until:
            if not self.pump():
                return False
            time.sleep(0.02)
        for i in range(len(self.REQUEST)):
            if time.monotonic() > deadline:
                return True
            if self.first_request_byte is None:
                self.first_request_byte = time.monotonic()
            self.obj.write(self.REQUEST[i:i + 1])
            if not self.send(out.read()) or not self.pump():
                return False
            time.sleep(0.1)
        return True


@case
def trickle_handshake(work):
    """--read-timeout=3s, --threads=4: twelve clients trickle, six their ClientHello over 3.6 s
    (then the rest of the handshake, a pause, and a request byte by byte), six their ClientHello
    over 1 s and then, after a pause, a request byte by byte. The first are closed within
    --read-timeout + 1.5 s of accept, silently; the others get 408 within --read-timeout + 1.5 s
    of their request's first byte. Meanwhile fresh clients are served at once: handshaking and
    trickling connections hold no worker."""
    certs, wh = serving(work, "--read-timeout=3s", "--threads=4")
    with wh:
        ctx = tls_context(certs.ca)
        slow_hello = [Trickler(wh.https_port, ctx, 3.6, 1.0, 12 * SLOW) for _ in range(6)]
        slow_request = [Trickler(wh.https_port, ctx, 1.0, 0.5, 12 * SLOW) for _ in range(6)]
        for t in slow_hello + slow_request:
            t.start()
        time.sleep(0.3)
        served, worst = 0, 0.0
        started = time.monotonic()
        for uid, body in reviews("beside", 40):
            if time.monotonic() - started > 6:
                break
            t0 = time.monotonic()
            request = post(body, headers=[b"Connection: close"])
            responses, how, _, _ = exchange(wh.https_port, request, ctx, timeout=10 * SLOW,
                                            until_closed=False)
            worst = max(worst, time.monotonic() - t0)
            check(responses and
                  admission_response(responses[0][0], responses[0][2], uid)["allowed"],
                  "a client beside the tricklers was not served (%s)" % how)
            served += 1
            time.sleep(0.1)
        check(worst <= 1.0 * SLOW, "a client beside the tricklers waited %.2f s" % worst)
        deadline = time.monotonic() + 15 * SLOW
        for t in slow_hello + slow_request:
            t.join(max(0.1, deadline - time.monotonic()))
        for i, t in enumerate(slow_hello):
            check(t.error is None, "slow ClientHello %d: %s" % (i, t.error))
            check(t.closed_at is not None, "slow ClientHello %d was never closed (handshake "
                  "done: %s)" % (i, t.handshaken))
            after = t.closed_at - t.accepted
            check(2.5 <= after <= 3 + 1.5 * SLOW,
                  "slow ClientHello %d closed %.2f s after accept, want --read-timeout=3s + 1.5 s"
                  % (i, after))
            check(b"HTTP/" not in t.plain,
                  "a connection with no request got an answer: %r" % t.plain)
        for i, t in enumerate(slow_request):
            check(t.error is None, "slow request %d: %s" % (i, t.error))
            check(t.handshaken and t.first_request_byte is not None,
                  "slow request %d: closed before its request began (%.2f s after accept)"
                  % (i, (t.closed_at or time.monotonic()) - t.accepted))
            check(t.closed_at is not None, "slow request %d was never closed" % i)
            after = t.closed_at - t.first_request_byte
            check(after <= 3 + 1.5 * SLOW, "slow request %d closed %.2f s after its first byte, "
                  "want --read-timeout=3s + 1.5 s" % (i, after))
            responses = parse_responses(t.plain)
            check(len(responses) == 1 and responses[0][0] == 408 and
                  responses[0][1].get("connection") == "close",
                  "slow request %d: want one 408 with Connection: close, got %r"
                  % (i, t.plain[:300]))
            check("--read-timeout" in status_body(responses[0][2], 408)["message"],
                  "the 408 does not mention --read-timeout")
        print("%d clients served beside 12 tricklers (slowest %.0f ms)" % (served, worst * 1000))
        stop_cleanly(wh)


# ---------------------------------------------------------------------------------------------
# 4. Memory bounds.


def worst_shape_review(uid, size):
    """A real review whose Pod spec carries "x": [{}, {}, ...] up to `size` bytes: many small
    JSON values, the most expensive shape to parse per byte."""
    review = make_review("--worker", "0", V6E)
    review["request"]["uid"] = uid
    review["request"]["object"]["spec"]["x"] = "@PAD@"
    text = json.dumps(review, separators=(",", ":")).encode()
    count = (size - len(text)) // 3
    pad = b"[" + b"{}," * (count - 1) + b"{}]"
    return text.replace(b'"@PAD@"', pad)


def header_flood(size):
    fields = b"a:b\r\n" * (size // 5)
    return b"POST /mutate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" + \
        fields + b"Content-Length: 2\r\n\r\n{}"


def warm_up(port, ctx):
    """One review admitted on a connection of its own: the process's first-request work done."""
    (uid, body), = reviews("warm", 1)
    responses, _, _, _ = exchange(port, post(body), ctx, until_closed=False)
    check(responses and admission_response(responses[0][0], responses[0][2], uid)["allowed"],
          "the warm-up review failed")


@case
def memory_bounds(work):
    """--memory-limit=256Mi: four concurrent 6.9 MiB worst-shape reviews (a Pod carrying
    [{}] x 2.4 M) and three 7 MiB floods of tiny headers at once: each is answered or refused
    clearly within 30 s (no reset without an answer), peak RSS stays within 200 MiB, and RSS
    falls back to within 64 MiB of its value before the burst."""
    certs, wh = serving(work, "--memory-limit=256Mi")
    with wh:
        ctx = tls_context(certs.ca)
        warm_up(wh.https_port, ctx)
        time.sleep(0.3)
        before = vm_status(wh.proc.pid)["VmRSS"]
        worst = [("worst-%d" % i, worst_shape_review("worst-%d" % i, int(6.9 * MiB)))
                 for i in range(4)]
        flood = header_flood(7 * MiB)
        check(len(worst[0][1]) > 6.8 * MiB and b"{},{}," in worst[0][1], "worst-shape review")
        results = {}

        def attack(name, payload):
            started = time.monotonic()
            try:
                results[name] = exchange(wh.https_port, payload, ctx, timeout=30 * SLOW,
                                         until_closed=False)[:2] + (time.monotonic() - started,)
            except Exception as e:  # noqa: BLE001 - reported below
                results[name] = ([], repr(e), time.monotonic() - started)

        threads = [threading.Thread(target=attack, args=(u, post(b))) for u, b in worst]
        threads += [threading.Thread(target=attack, args=("flood-%d" % i, flood)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(40 * SLOW)
        check(wh.proc.poll() is None,
              "the webhook died during the burst:\n" + wh.log_text()[-2000:])
        peak = vm_status(wh.proc.pid)["VmHWM"]
        summary = []
        for name in sorted(results):
            responses, how, took = results[name]
            check(responses and responses[0][0] is not None and responses[0][2] is not None,
                  "%s: no answer (%s after %.1f s)" % (name, how, took))
            status, headers, data = responses[0]
            summary.append("%s: %d in %.1f s" % (name, status, took))
            if name.startswith("flood"):
                check(status == 431, "%s: want 431, got %d %r" % (name, status, data[:200]))
                status_body(data, 431)
            elif status == 200:
                r = admission_response(status, data, name)
                check(r["allowed"] is False and r["status"]["message"],
                      "%s: a worst-shape review was admitted: %r" % (name, data[:300]))
            else:
                check(status in (413, 503), "%s: want a denial, 413 or 503, got %d %r"
                      % (name, status, data[:200]))
                status_body(data, status)
        print("; ".join(summary))
        print("RSS before %.0f MiB, peak %.0f MiB" % (before / MiB, peak / MiB))
        if not SANITIZED:
            check(peak <= 200 * MiB, "peak RSS %.0f MiB > 200 MiB" % (peak / MiB))
            deadline = time.monotonic() + 10
            while (vm_status(wh.proc.pid)["VmRSS"] > before + 64 * MiB and
                   time.monotonic() < deadline):
                time.sleep(0.2)
            after = vm_status(wh.proc.pid)["VmRSS"]
            check(after <= before + 64 * MiB, "RSS %.0f MiB 10 s after the burst, %.0f MiB before"
                  % (after / MiB, before / MiB))
        stop_cleanly(wh)


def big_review(uid, size):
    """A real review whose Pod carries an annotation of `size` bytes."""
    review = make_review("--worker", "0", V6E)
    review["request"]["uid"] = uid
    review["request"]["object"]["metadata"].setdefault("annotations", {})["pad"] = "x" * size
    return json.dumps(review).encode()


@case
def idle_memory(work):
    """What an open connection keeps while it waits (docs/security.md "What a connection
    holds"): 1,000 TCP connections on the HTTPS port that have sent nothing, 1,000 TLS
    connections idle after their handshake, and 100 keep-alive connections idle after the answer
    to a 1 MiB review. The process's RSS grows by at most 8 KiB, 32 KiB and 128 KiB per
    connection: no TLS session before the client's first byte (one takes about 30 KiB while its
    handshake waits), no record buffers between requests, and nothing of the last request (its
    body would be over 1 MiB). Every connection is still open, and a keep-alive one is answered
    again. Under a sanitizer, a fifth of the connections and no memory bounds."""
    share = 5 if SANITIZED else 1
    silent_n, tls_n, big_n = 1000 // share, 1000 // share, 100 // share
    raise_fd_limit(2 * (silent_n + tls_n + big_n) + 512)
    wait = "%ds" % (60 * SLOW)
    # --memory-limit=1Gi holds 3,276 connections per port (256Mi only 819).
    certs, wh = serving(work, "--read-timeout=" + wait, "--idle-timeout=" + wait,
                        "--memory-limit=1Gi")
    with wh:
        ctx = tls_context(certs.ca)
        warm_up(wh.https_port, ctx)
        big = big_review("big", MiB)

        def answered_then_idle():
            sock = connect(wh.https_port, ctx, timeout=10 * SLOW)
            sock.sendall(post(big))
            data, how = read_until(sock, time.monotonic() + 20 * SLOW, final_response_complete)
            got = parse_responses(data)
            check(how == "done" and got and got[0][0] == 200,
                  "a 1 MiB review was not answered (%s): %r" % (how, data[:200]))
            return sock

        deadline = time.monotonic() + 60 * SLOW
        kinds = [("silent TCP", lambda: open_idle(wh.https_port, silent_n, deadline), 8),
                 ("idle TLS", lambda: open_idle(wh.https_port, tls_n, deadline, ctx), 32),
                 ("idle after a 1 MiB review", lambda: [answered_then_idle() for _ in range(big_n)],
                  128)]
        held, figures = [], []
        try:
            for name, open_them, bound_kib in kinds:
                time.sleep(0.5)
                before = vm_status(wh.proc.pid)["VmRSS"]
                socks = open_them()
                held.append(socks)
                time.sleep(1)
                grown = vm_status(wh.proc.pid)["VmRSS"] - before
                per = grown / len(socks) / 1024
                figures.append("%s: %d connections, %.1f KiB each" % (name, len(socks), per))
                closed = sum(1 for sock in socks if is_closed(sock))
                check(closed == 0, "%s: the server closed %d of %d connections" %
                      (name, closed, len(socks)))
                if not SANITIZED:
                    check(per <= bound_kib, "%s: RSS grew by %.1f KiB per connection, more than %d"
                          % (name, per, bound_kib))
            print("; ".join(figures))
            again = held[-1][0]
            (uid, body), = reviews("again", 1)
            again.sendall(post(body))
            data, how = read_until(again, time.monotonic() + 10 * SLOW, final_response_complete)
            got = parse_responses(data)
            check(how == "done" and got, "a keep-alive connection was not answered again (%s): %r"
                  % (how, data[:200]))
            check(admission_response(got[0][0], got[0][2], uid)["allowed"],
                  "a keep-alive connection's second review was not admitted")
        finally:
            for socks in held:
                for sock in socks:
                    sock.close()
        stop_cleanly(wh)


# ---------------------------------------------------------------------------------------------
# 5. Framing and request smuggling.


def bad_heads():
    """(name, head, expected code): heads the parser must refuse; nothing after them is read."""
    ct = b"Content-Type: application/json\r\n"
    return [
        ("garbage request line", b"GARBAGE\r\n\r\n", 400),
        ("no version", b"POST /mutate\r\nHost: x\r\n\r\n", 400),
        ("two spaces", b"POST  /mutate HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        ("bare LF", b"POST /mutate HTTP/1.1\nHost: x\n" + ct.replace(b"\r", b"") + b"\n", 400),
        ("header without colon", b"POST /mutate HTTP/1.1\r\nHost: x\r\nNoColonHere\r\n\r\n", 400),
        ("space before colon", b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length : 0\r\n\r\n",
         400),
        ("obs-fold", b"POST /mutate HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n  folded\r\n\r\n", 400),
        ("Content-Length abc", b"POST /mutate HTTP/1.1\r\nHost: x\r\n" + ct +
         b"Content-Length: abc\r\n\r\n", 400),
        ("Content-Length -1", b"POST /mutate HTTP/1.1\r\nHost: x\r\n" + ct +
         b"Content-Length: -1\r\n\r\n", 400),
        ("Content-Length empty", b"POST /mutate HTTP/1.1\r\nHost: x\r\n" + ct +
         b"Content-Length: \r\n\r\n", 400),
        ("two Content-Lengths", b"POST /mutate HTTP/1.1\r\nHost: x\r\n" + ct +
         b"Content-Length: 5\r\nContent-Length: 6\r\n\r\n", 400),
        ("Content-Length list", b"POST /mutate HTTP/1.1\r\nHost: x\r\n" + ct +
         b"Content-Length: 5, 6\r\n\r\n", 400),
        ("Transfer-Encoding and Content-Length", b"POST /mutate HTTP/1.1\r\nHost: x\r\n" + ct +
         b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", 400),
        ("Transfer-Encoding gzip", b"POST /mutate HTTP/1.1\r\nHost: x\r\n" + ct +
         b"Transfer-Encoding: gzip\r\n\r\n", 501),
        ("64 KB URL", b"GET /" + b"a" * 65536 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414),
        ("17,000-byte header", b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 17000 +
         b"\r\n\r\n", 431),
        ("7 MiB of tiny headers", b"GET / HTTP/1.1\r\nHost: x\r\n" + b"a:b\r\n" * 1470000 +
         b"\r\n", 431),
        ("101 header fields", b"GET / HTTP/1.1\r\nHost: x\r\n" +
         b"".join(b"X-F%d: v\r\n" % i for i in range(100)) + b"\r\n", 431),
        ("HTTP/2.0", b"POST /mutate HTTP/2.0\r\nHost: x\r\n\r\n", 505),
        ("HTTP/3", b"POST /mutate HTTP/3\r\nHost: x\r\n\r\n", 505),
        ("HTTP/1.1 without Host", b"POST /mutate HTTP/1.1\r\n" + ct + b"\r\n", 400),
    ]


def refused_alone(port, ctx, name, payload, code):
    """`payload` gets exactly one answer, `code` with Connection: close and a Status body, and
    the connection is closed right after it."""
    responses, how, answered, closed = exchange(port, payload, ctx, timeout=10 * SLOW)
    check(responses and responses[0][0] is not None,
          "%s: no answer (%s after %.1f s)" % (name, how, closed))
    status, headers, body = responses[0]
    check(status == code, "%s: want %d, got %d: %r" % (name, code, status, (body or b"")[:200]))
    check(headers.get("connection", "").lower() == "close", "%s: %d without Connection: close"
          % (name, code))
    status_body(body, code)
    check(len(responses) == 1, "%s: what followed the bad head was answered too: %r"
          % (name, [r[0] for r in responses]))
    check(how in ("eof", "reset"), "%s: the connection stayed open after the %d (%s)"
          % (name, code, how))
    check(answered <= 2 * SLOW and closed <= 3 * SLOW,
          "%s: answered after %.1f s, closed after %.1f s" % (name, answered, closed))


@case
def framing_desync(work):
    """Each malformed head, followed in the same write by a full valid request, on both ports:
    exactly one answer (400, 414, 431, 501 or 505 as the head deserves) with Connection: close,
    then the connection closes; the hidden request is never parsed (no admission line for it)."""
    certs, wh = serving(work)
    with wh:
        ctx = tls_context(certs.ca)
        heads = bad_heads()
        hidden = dict(reviews("hidden", len(heads)))
        for i, (name, head, code) in enumerate(heads):
            smuggled = post(hidden["hidden-%d" % i])
            refused_alone(wh.https_port, ctx, "HTTPS " + name, head + smuggled, code)
            refused_alone(wh.health_port, None, "health " + name,
                          head + b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", code)
        (uid, body), = reviews("visible", 1)
        responses, how, _, _ = exchange(wh.https_port, post(body), ctx, until_closed=False)
        check(responses and admission_response(responses[0][0], responses[0][2], uid)["allowed"],
              "a good review after the bad heads failed")
        line = wh.wait_for_log(lambda l: l.get("msg") == "admission" and l.get("uid") == uid,
                               10 * SLOW)
        check(line is not None, "no admission line for the good review")
        leaked = [l.get("uid") for l in wh.log_lines()
                  if str(l.get("uid", "")).startswith("hidden-")]
        check(not leaked, "requests hidden after a bad head were parsed: %s" % leaked)
        stop_cleanly(wh)


# ---------------------------------------------------------------------------------------------
# 6. Body limits and Expect: 100-continue.


@case
def body_limits(work):
    """A Content-Length over --max-body-bytes (7 MiB + 1, 99,999,999, 2^63, 2^64 + 1) is answered
    413 at once, with Connection: close, and with Expect: 100-continue no 100 Continue comes
    first; an acceptable length with Expect: 100-continue gets 100 Continue, then the answer."""
    certs, wh = serving(work)
    with wh:
        ctx = tls_context(certs.ca)
        lengths = [b"7340033", b"99999999", b"9223372036854775808", b"18446744073709551617"]
        for length in lengths:
            for expect in (False, True):
                name = "Content-Length %s%s" % (length.decode(), " + Expect" if expect else "")
                head = (b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        b"Content-Length: " + length + b"\r\n" +
                        (b"Expect: 100-continue\r\n" if expect else b"") + b"\r\n")
                responses, how, answered, closed = exchange(wh.https_port, head, ctx,
                                                            timeout=10 * SLOW)
                check(responses and responses[0][0] is not None, "%s: no answer (%s)" % (name, how))
                check(responses[0][0] == 413, "%s: want 413 first, got %s"
                      % (name, [r[0] for r in responses]))
                check(responses[0][1].get("connection", "").lower() == "close",
                      "%s: 413 without Connection: close" % name)
                status_body(responses[0][2], 413)
                check(answered <= 1.0 * SLOW, "%s: the 413 took %.2f s" % (name, answered))
                check(how in ("eof", "reset") and closed <= 2 * SLOW,
                      "%s: the connection was not closed after the 413 (%s)" % (name, how))

        # A body over the limit keeps its 413 on every path, the health port's included: never a
        # 404, or the 200 that GET / and /healthz answer (docs/server.md Endpoints).
        over = [(wh.https_port, ctx, b"POST /nope", b"99999999"),
                (wh.https_port, ctx, b"GET /", b"99999999"),
                (wh.health_port, None, b"GET /healthz", b"65537"),
                (wh.health_port, None, b"POST /metrics", b"99999999")]
        for port, c, line, length in over:
            refused_alone(port, c, "%s with Content-Length %s" % (line.decode(), length.decode()),
                          line + b" HTTP/1.1\r\nHost: x\r\nContent-Length: " + length + b"\r\n\r\n",
                          413)

        (uid, body), = reviews("expect", 1)
        s = connect(wh.https_port, ctx, timeout=5 * SLOW)
        try:
            s.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: %d\r\nExpect: 100-continue\r\n\r\n" % len(body))
            started = time.monotonic()
            data, how = read_until(s, started + 2 * SLOW, lambda d: b"\r\n\r\n" in d)
            check(data.startswith(b"HTTP/1.1 100 Continue\r\n") and data.endswith(b"\r\n\r\n"),
                  "want HTTP/1.1 100 Continue before the body, got %r (%s)" % (data[:200], how))
            check(time.monotonic() - started <= 1.0 * SLOW, "100 Continue came late")
            s.sendall(body)
            data, how = read_until(s, time.monotonic() + 5 * SLOW, final_response_complete)
            responses = parse_responses(data)
            check(how == "done" and len(responses) == 1, "no answer after the body (%s)" % how)
            check(admission_response(responses[0][0], responses[0][2], uid)["allowed"],
                  "the review sent after 100 Continue was not admitted")
        finally:
            s.close()
        stop_cleanly(wh)


# ---------------------------------------------------------------------------------------------
# 7. Encodings, ranges and targets.


@case
def encodings_and_ranges(work):
    """Accept-Encoding (br, gzip, deflate, *) never compresses an answer; Range is ignored (a
    full 200, no 206); a request body with a Content-Encoding other than identity is refused 415
    and the connection closed; an absolute-form target is served as its path."""
    certs, wh = serving(work)
    with wh:
        ctx = tls_context(certs.ca)
        items = iter(reviews("enc", 16))

        def plain_review(extra, name, path=b"/mutate"):
            uid, body = next(items)
            responses, how, _, _ = exchange(wh.https_port, post(body, path, extra), ctx,
                                            until_closed=False)
            check(responses and responses[0][2] is not None, "%s: no answer (%s)" % (name, how))
            status, headers, data = responses[0]
            check("content-encoding" not in headers and "content-range" not in headers,
                  "%s: answer has %s" % (name, headers))
            check(admission_response(status, data, uid)["allowed"], "%s: not admitted" % name)

        for enc in (b"br", b"gzip", b"deflate", b"*", b"gzip, deflate, br"):
            plain_review([b"Accept-Encoding: " + enc], "Accept-Encoding " + enc.decode())
            for port, c, path, want in ((wh.https_port, ctx, b"/", b"kuberay-tpu-webhook"),
                                        (wh.health_port, None, b"/metrics", None)):
                request = b"GET %s HTTP/1.1\r\nHost: x\r\nAccept-Encoding: %s\r\n\r\n" % (path, enc)
                responses, how, _, _ = exchange(port, request, c, until_closed=False)
                check(responses and responses[0][0] == 200, "GET %s: %s" % (path, responses[:1]))
                check("content-encoding" not in responses[0][1],
                      "GET %s with Accept-Encoding %s was compressed"
                      % (path.decode(), enc.decode()))
                body = responses[0][2]
                check(body == want if want else b"kuberay_tpu_webhook_requests_total" in body,
                      "GET %s: not the plain answer: %r" % (path.decode(), body[:100]))

        plain_review([b"Range: bytes=0-10"], "Range")
        for port, c, path in ((wh.https_port, ctx, b"/"), (wh.health_port, None, b"/metrics")):
            responses, how, _, _ = exchange(
                port, b"GET %s HTTP/1.1\r\nHost: x\r\nRange: bytes=0-10\r\n\r\n" % path, c,
                until_closed=False)
            check(responses and responses[0][0] == 200 and "content-range" not in responses[0][1]
                  and len(responses[0][2]) > 11, "GET %s with Range: %r" % (path, responses[:1]))

        plain_review([b"Content-Encoding: identity"], "Content-Encoding identity")
        uid, body = next(items)
        for enc, data in ((b"gzip", gzip.compress(body)), (b"br", body), (b"deflate", body)):
            payload = post(data, headers=[b"Content-Encoding: " + enc])
            name = "request Content-Encoding " + enc.decode()
            responses, how, _, closed = exchange(wh.https_port, payload, ctx, timeout=10 * SLOW)
            check(responses and responses[0][0] == 415, "%s: want 415, got %s (%s)"
                  % (name, responses[:1], how))
            check(responses[0][1].get("connection", "").lower() == "close",
                  "%s: 415 without Connection: close" % name)
            status_body(responses[0][2], 415)
            check(how in ("eof", "reset") and closed <= 3 * SLOW,
                  "%s: the connection stayed open (%s)" % (name, how))

        target = b"https://127.0.0.1:%d/mutate" % wh.https_port
        plain_review([], "absolute-form target", path=target)
        stop_cleanly(wh)


# ---------------------------------------------------------------------------------------------
# 8. Long uids.


@case
def long_uid(work):
    """A request.uid over 128 bytes (129 bytes, 6 MiB) is refused with HTTP 400 and a Status
    body that does not echo it; 128 bytes is served; no log line is longer than 16 KiB. The
    webhook gets a 1Gi --memory-limit, so that the 6 MiB review is granted memory and reaches
    the uid check (at the default 256Mi it is refused sooner, 413 from its length)."""
    certs, wh = serving(work, "--memory-limit=1Gi")
    with wh:
        ctx = tls_context(certs.ca)
        base = make_review("--worker", "0", V6E)

        def send(uid):
            base["request"]["uid"] = uid
            responses, how, _, _ = exchange(wh.https_port, post(json.dumps(base).encode()), ctx,
                                            timeout=20 * SLOW, until_closed=False)
            check(responses and responses[0][2] is not None,
                  "uid of %d bytes: no answer (%s)" % (len(uid), how))
            return responses[0]

        ok = "u" * 128
        status, _, data = send(ok)
        check(admission_response(status, data, ok)["allowed"], "a 128-byte uid was not served")
        for uid in ("v" * 129, "w" * (6 * MiB)):
            status, headers, data = send(uid)
            check(status == 400, "uid of %d bytes: want HTTP 400, got %d: %r"
                  % (len(uid), status, data[:200]))
            status_body(data, 400)
            check(len(data) < 4096 and uid[:64].encode() not in data,
                  "uid of %d bytes echoed in the answer (%d bytes)" % (len(uid), len(data)))
        final = "final-uid"
        status, _, data = send(final)
        check(admission_response(status, data, final)["allowed"], "the review after the long uids")
        line = wh.wait_for_log(lambda l: l.get("msg") == "admission" and l.get("uid") == final,
                               10 * SLOW)
        check(line is not None, "no admission line for the last review")
        with open(wh.log_path, "rb") as f:
            longest = max((len(l) for l in f.read().split(b"\n")), default=0)
        check(longest <= 16384, "a log line of %d bytes (> 16 KiB)" % longest)
        stop_cleanly(wh)


# ---------------------------------------------------------------------------------------------
# 9. Metrics of the framing layer.


def counted_by_code(text):
    out = {}
    for m in re.finditer(r"^kuberay_tpu_webhook_requests_total\{([^}]*)\} (\d+)$", text, re.M):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        out[labels.get("code")] = out.get(labels.get("code"), 0) + int(m.group(2))
    return out


@case
def framing_metrics(work):
    """After a batch of framing errors on the HTTPS port (400, 408, 413, 414, 431, 501, 505),
    kuberay_tpu_webhook_requests_total counts each by its code."""
    certs, wh = serving(work, "--read-timeout=2s")
    with wh:
        ctx = tls_context(certs.ca)
        heads = {name: (head, code) for name, head, code in bad_heads()}
        batch = ["garbage request line", "two spaces", "Content-Length abc", "17,000-byte header",
                 "101 header fields", "64 KB URL", "Transfer-Encoding gzip", "HTTP/2.0"]
        for name in batch:
            head, code = heads[name]
            refused_alone(wh.https_port, ctx, name, head, code)
        big = (b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Content-Length: 99999999\r\n\r\n")
        refused_alone(wh.https_port, ctx, "Content-Length 99999999", big, 413)
        responses, how, _, _ = exchange(wh.https_port, b"POST /mutate HTTP/1.1\r\nHost: x\r\nCont",
                                        ctx, timeout=8 * SLOW)
        check(responses and responses[0][0] == 408, "a stalled head: want 408, got %s (%s)"
              % (responses[:1], how))
        # A stalled body is 408 on every path: never the 200 of GET / or /healthz.
        stalled = b" HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nab"
        for port, c, line in ((wh.https_port, ctx, b"GET /"), (wh.health_port, None,
                                                               b"GET /healthz")):
            responses, how, _, _ = exchange(port, line + stalled, c, timeout=8 * SLOW)
            check(responses and responses[0][0] == 408 and len(responses) == 1,
                  "a stalled body to %s: want one 408, got %s (%s)"
                  % (line.decode(), [r[0] for r in responses], how))
            status_body(responses[0][2], 408)
            check(how in ("eof", "reset"), "a stalled body to %s: the connection stayed open (%s)"
                  % (line.decode(), how))
        (uid, body), = reviews("counted", 1)
        responses, how, _, _ = exchange(wh.https_port, post(body), ctx, until_closed=False)
        check(responses and admission_response(responses[0][0], responses[0][2], uid)["allowed"],
              "the good review failed")
        want = {}
        for name in batch:
            want[str(heads[name][1])] = want.get(str(heads[name][1]), 0) + 1
        want["413"], want["408"] = 1, 2  # the health port's answers are not counted
        # A response is counted once its last byte is written, which the client may see first:
        # read /metrics until the good review is counted (or the time is up).
        good = 'kuberay_tpu_webhook_requests_total{webhook="mutate",code="200"} 1'
        deadline = time.monotonic() + 5 * SLOW
        while True:
            status, text = wh.health("/metrics")
            check(status == 200, "/metrics answered %d" % status)
            if good in text or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        got = counted_by_code(text)
        for code, n in sorted(want.items()):
            check(got.get(code, 0) == n, "requests_total with code=\"%s\": want %d, got %d\n%s"
                  % (code, n, got.get(code, 0),
                     "\n".join(l for l in text.splitlines() if "requests_total" in l)))
        check(good in text, "the good review is not counted")
        stop_cleanly(wh)


def main():
    return run_cases(CASES, sys.argv, "attack_test.py")


if __name__ == "__main__":
    sys.exit(main())
