#!/usr/bin/env bash
# Benchmark: kuberay-tpu-webhook against nginx, in the same run, on this machine, driven as
# kube-apiserver drives a webhook.
#
# Both serve HTTPS on 127.0.0.1 with the same certificate (ECDSA P-256). wrk POSTs the same
# AdmissionReview (make-review of the GKE tutorial's v6e worker Pod) to /mutate?timeout=10s over
# HTTP/1.1 keep-alive TLS connections, with the headers kube-apiserver's Go webhook client sends:
# Content-Type: application/json, Accept: application/json, */*, Accept-Encoding: gzip (Go's
# transport adds it) and User-Agent: kube-apiserver-admission. nginx (worker_processes 1,
# access_log off: the fairest baseline on a small box) answers every request with the webhook's
# own response, fixed (`return 200`), so it measures what TLS, HTTP and loopback cost here; the
# webhook additionally reads the review, decides the mutation, writes its patch, encodes and logs a JSON line
# per admission (to a file, as a container runtime would collect it).
#
# Each server is measured at 1 connection (wrk -c1 -t1) and at CONNECTIONS (wrk -c16 -t2), the
# two servers alternating, each run after a WARMUP run. Per run: req/s, p50, p99 (wrk), and the
# figures least shaken by other load on the machine, read from /proc before and after:
#   CPU us/req   utime+stime of the server's process(es) (nginx: master + worker) / requests
#   ctxsw/req    voluntary + nonvoluntary context switches summed over /proc/PID/task/*/status
#   allocs/req   heap allocations per request, webhook only: a second webhook process runs under
#                LD_PRELOAD=liballoc-count.so (bench/alloc_count.c, which counts malloc & co. and
#                operator new) for ALLOC_DURATION per connection count; the hook costs CPU, so the
#                CPU figures come from the run without it
#   peak RSS     VmHWM (nginx: master + worker)
# and the ratios webhook/nginx of req/s and of p50. (jemalloc's own counters agree with the hook,
# but without code they are printed only at exit, with MALLOC_CONF=stats_print:true, startup
# included; the hook counts a measured window.)
#
# Before measuring, both servers must answer the headers correctly (the webhook: 200, allowed,
# patchType JSONPatch, no Content-Encoding although the request accepts gzip; nginx: the
# webhook's bytes); after, wrk must have seen no non-2xx and no socket error, the webhook's own
# metrics no non-200 answer, and keep-alive must have held (requests per connection the webhook
# accepted, from its metrics). Then one line per target, "met" or "MISSED by X": server CPU
# <= 60 us/req at 16 connections; <= 100 allocations/req; throughput >= 0.4 x nginx at 16
# connections; p50 at 1 connection <= 2 x nginx's; peak RSS <= 30 MiB.
#
# Usage: bash bench/run.sh [BUILD_DIR]   (default: build; configured Release if new, and the three
#                                         targets it needs are built unless BENCH_NO_BUILD is set)
# Env:   DURATION=8s  WARMUP=2s  ALLOC_DURATION=3s  CONNECTIONS=16  THREADS=2 (wrk threads of the
#        CONNECTIONS run)  WEBHOOK=path/to/kuberay-tpu-webhook  BENCH_NO_BUILD=1
# The defaults take about 60 s, the build aside. Loopback only; every process it starts is stopped on exit.
# Exit 0 when the figures were measured, a target missed or not (it is a measurement); 1 when
# something could not run, or a server answered wrongly before or during the runs.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
DURATION="${DURATION:-8s}"
WARMUP="${WARMUP:-2s}"
ALLOC_DURATION="${ALLOC_DURATION:-3s}"
CONNECTIONS="${CONNECTIONS:-16}"
THREADS="${THREADS:-2}"

# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
need_whole_durations DURATION WARMUP ALLOC_DURATION
[[ "$CONNECTIONS" =~ ^[1-9][0-9]*$ && "$THREADS" =~ ^[1-9][0-9]*$ && "$CONNECTIONS" -ge 2 &&
   "$THREADS" -le "$CONNECTIONS" ]] ||
  die "CONNECTIONS=$CONNECTIONS THREADS=$THREADS: give whole numbers, 2 <= CONNECTIONS" \
    "(1 is always run), THREADS <= CONNECTIONS"
need_tools wrk nginx openssl curl python3
NGINX="$(command -v nginx)"
LOADAVG_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg)"
STARTED="$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
T0=$SECONDS

WORK="$(mktemp -d "${TMPDIR:-/tmp}/webhook-bench.XXXXXX")"
WH_PID="" NG_PID=""
stop_nginx() {  # SIGTERM to the master, which stops its worker
  [[ -n "$NG_PID" ]] || return 0
  kill -TERM "$NG_PID" 2>/dev/null || true
  wait "$NG_PID" 2>/dev/null || true
  NG_PID=""
}
cleanup() {
  stop_webhook
  stop_nginx
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

build_targets kuberay-tpu-webhook make-review alloc-count
BUILD_SECONDS=$((SECONDS - T0))
BUILD_TYPE="$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$BUILD/CMakeCache.txt" 2>/dev/null || true)"
ALLOCATOR="$(allocator_of "$WEBHOOK")"

bench_certificate
"$MAKE_REVIEW" --worker 3 --uid bench-uid \
  "$ROOT/examples/gke-tutorial/ray-cluster.tpu-v6e-multihost.yaml" > "$WORK/review.json"


start_webhook "$WORK/webhook.log"
cp "$WORK/check.body" "$WORK/response.json"

# nginx: the same response, fixed, over TLS; one worker, no access log.
NG_PORT="$(free_port)"
mkdir -p "$WORK/nginx"
python3 - "$WORK" "$NG_PORT" <<'EOF'
import sys
work, port = sys.argv[1], sys.argv[2]
# In an nginx quoted string \\ and \' are escapes (and \n, \t, \r): keep the bytes as they are.
body = open(work + "/response.json").read().replace("\\", "\\\\").replace("'", "\\'")
conf = f"""
worker_processes 1;
pid {work}/nginx/nginx.pid;
error_log {work}/nginx/error.log warn;
daemon off;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  client_body_temp_path {work}/nginx/body;
  proxy_temp_path {work}/nginx/proxy;
  fastcgi_temp_path {work}/nginx/fastcgi;
  uwsgi_temp_path {work}/nginx/uwsgi;
  scgi_temp_path {work}/nginx/scgi;
  keepalive_requests 10000000;
  keepalive_timeout 60s;
  server {{
    listen 127.0.0.1:{port} ssl;
    ssl_certificate {work}/tls.crt;
    ssl_certificate_key {work}/tls.key;
    ssl_protocols TLSv1.2 TLSv1.3;
    client_body_buffer_size 16k;
    location / {{
      default_type application/json;
      return 200 '{body}';
    }}
  }}
}}
"""
open(work + "/nginx/nginx.conf", "w").write(conf)
EOF
"$NGINX" -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" 2>"$WORK/nginx/stderr" &
NG_PID=$!
NG_URL="https://127.0.0.1:$NG_PORT/mutate?timeout=10s"
for _ in $(seq 100); do
  post_review "$NG_URL" "$WORK/ngcheck" && break
  kill -0 "$NG_PID" 2>/dev/null || die "nginx exited at start: $(cat "$WORK/nginx/stderr")"
  sleep 0.1
done
cmp -s "$WORK/ngcheck.body" "$WORK/response.json" ||
  die "nginx does not answer the webhook's response"
grep -qi '^content-encoding' "$WORK/ngcheck.headers" && die "nginx compressed its answer"
NG_WORKERS="$(pgrep -P "$NG_PID" | tr '\n' ' ')"
[[ -n "$NG_WORKERS" ]] || die "nginx has no worker process"

write_post_lua "$WORK/post.lua" "$WORK/review.json"

# Connections the webhook has accepted so far (its metrics), to check that keep-alive holds.
# Read outside the CPU and allocation windows (the scrape costs both).
connections_accepted() {
  curl -sf --max-time 5 "$METRICS" |
    awk '/^kuberay_tpu_webhook_connections_total / {print $2; found = 1} END {exit !found}' ||
    die "no kuberay_tpu_webhook_connections_total in $METRICS"
}

# [METRICS=URL] [COUNT_ALLOCS=1] measure NAME URL CONNS THREADS DURATION PIDS... -> $WORK/NAME.json
measure() {
  local name="$1" url="$2" conns="$3" threads="$4" duration="$5"
  shift 5
  run_wrk "$WORK/$name.warmup" "$threads" "$conns" "$WARMUP" "$url"
  local ticks ctx allocs="" accepted="null" roles_before="null" roles_after="null"
  [[ -n "${METRICS:-}" ]] && accepted="$(connections_accepted)"
  [[ -n "${COUNT_ALLOCS:-}" ]] && allocs="$(alloc_count)"
  [[ -n "${METRICS:-}" ]] && roles_before="$(ctx_by_role "$1")"
  ticks="$(cpu_ticks "$@")"
  ctx="$(ctx_switches "$@")"
  run_wrk "$WORK/$name.wrk" "$threads" "$conns" "$duration" "$url"
  ticks=$(($(cpu_ticks "$@") - ticks))
  ctx=$(($(ctx_switches "$@") - ctx))
  [[ -n "${METRICS:-}" ]] && roles_after="$(ctx_by_role "$1")"
  [[ -n "$allocs" ]] && allocs=$(($(alloc_count) - allocs))
  if [[ -n "${METRICS:-}" ]]; then
    local now
    now="$(connections_accepted)"
    accepted=$((now - accepted))
  fi
  echo "{\"name\": \"$name\", \"conns\": $conns, \"ticks\": $ticks, \"hz\": $(getconf CLK_TCK)," \
    "\"ctx\": $ctx, \"rss_kib\": $(peak_rss_kib "$@"), \"allocs\": ${allocs:-null}," \
    "\"accepted\": $accepted, \"roles_before\": $roles_before, \"roles_after\": $roles_after," \
    "\"wrk\": $(cat "$WORK/$name.wrk.json")}" > "$WORK/$name.json"
}

for c in 1 "$CONNECTIONS"; do
  t=1
  [[ "$c" == 1 ]] || t="$THREADS"
  measure "nginx-c$c" "$NG_URL" "$c" "$t" "$DURATION" "$NG_PID" $NG_WORKERS
  METRICS="$WH_METRICS" measure "webhook-c$c" "$WH_URL" "$c" "$t" "$DURATION" "$WH_PID"
done
WH_NON200="$(webhook_non200)"
WH_THREADS="$(ls "/proc/$WH_PID/task" | wc -l)"
stop_webhook
stop_nginx

# The allocation count: a second webhook process, under the hook.
ALLOC_COUNT_FILE="$WORK/alloc.count"
start_webhook "$WORK/webhook-alloc.log" \
  LD_PRELOAD="$ALLOC_HOOK" ALLOC_COUNT_FILE="$ALLOC_COUNT_FILE"
wait_alloc_file
for c in 1 "$CONNECTIONS"; do
  t=1
  [[ "$c" == 1 ]] || t="$THREADS"
  METRICS="$WH_METRICS" COUNT_ALLOCS=1 \
    measure "alloc-c$c" "$WH_URL" "$c" "$t" "$ALLOC_DURATION" "$WH_PID"
done
WH_NON200=$((WH_NON200 + $(webhook_non200)))
stop_webhook

BMETA_NPROC="$(nproc)" BMETA_DATE="$STARTED" BMETA_LOAD="$LOADAVG_BEFORE" \
BMETA_BUILD="${BUILD_TYPE:-?}" \
BMETA_ALLOCATOR="$ALLOCATOR" BMETA_THREADS="$WH_THREADS" BMETA_ELAPSED=$((SECONDS - T0)) \
BMETA_BUILD_SECONDS="${BUILD_SECONDS:-0}" \
BMETA_WRK="$(wrk --version 2>&1 | head -1 | cut -d' ' -f1-2 || true)" \
BMETA_NGINX="$("$NGINX" -v 2>&1 | sed 's/.*: //')" \
python3 - "$WORK" "$CONNECTIONS" "$DURATION" "$ALLOC_DURATION" "$WH_NON200" <<'EOF'
import json, os, sys
work, conns, duration, alloc_duration, wh_non200 = sys.argv[1:]
conns, wh_non200 = int(conns), int(wh_non200)
meta = {k[6:].lower(): v for k, v in os.environ.items() if k.startswith("BMETA_")}

def load(name):
    r = json.load(open(f"{work}/{name}.json"))
    w = r["wrk"]
    n = max(w["requests"], 1)
    r["rps"] = w["requests"] / (w["duration_us"] / 1e6)
    r["p50"], r["p99"] = w["p50_us"] / 1000, w["p99_us"] / 1000
    r["cpu_us"] = r["ticks"] / r["hz"] * 1e6 / n
    r["ctx_per_req"] = r["ctx"] / n
    r["allocs_per_req"] = None if r["allocs"] is None else r["allocs"] / n
    r["socket_errors"] = sum(w[k] for k in ("connect", "read", "write", "timeout"))
    return r

rows = {(s, c): load(f"{s}-c{c}") for s in ("nginx", "webhook", "alloc") for c in (1, conns)}
for c in (1, conns):
    rows[("webhook", c)]["allocs_per_req"] = rows[("alloc", c)]["allocs_per_req"]

print(f"kuberay-tpu-webhook vs nginx, {meta['date']}: nproc {meta['nproc']}, load average "
      f"before {meta['load']}")
print(f"webhook: {meta['build']} build, {meta['allocator']}, {meta['threads']} threads; "
      f"{meta['nginx']}: worker_processes 1, access_log off")
print(f"{meta['wrk']}: POST /mutate?timeout=10s, the tutorial's v6e worker Pod AdmissionReview "
      f"({len(open(work + '/review.json', 'rb').read())} B),")
print(f"  kube-apiserver's headers, keep-alive TLS on 127.0.0.1; {duration} per run after a "
      f"warm-up; allocs/req from {alloc_duration} runs under the hook\n")
hdr = (f"{'server':<9}{'conns':>6}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'CPU us/req':>12}"
       f"{'ctxsw/req':>11}{'allocs/req':>12}{'peak RSS MiB':>14}")
print(hdr)
print("-" * len(hdr))
for c in (1, conns):
    for s in ("nginx", "webhook"):
        r = rows[(s, c)]
        a = "-" if r["allocs_per_req"] is None else f"{r['allocs_per_req']:.1f}"
        print(f"{s:<9}{c:>6}{r['rps']:>9.0f}{r['p50']:>9.3f}{r['p99']:>9.3f}{r['cpu_us']:>12.1f}"
              f"{r['ctx_per_req']:>11.2f}{a:>12}{r['rss_kib'] / 1024:>14.1f}")
w1, n1 = rows[("webhook", 1)], rows[("nginx", 1)]
wc, nc = rows[("webhook", conns)], rows[("nginx", conns)]
print(f"\nwebhook/nginx: req/s {w1['rps'] / n1['rps']:.2f} at 1 connection, "
      f"{wc['rps'] / nc['rps']:.2f} at {conns}; p50 {w1['p50'] / n1['p50']:.2f} at 1 connection")
for c in (1, conns):
    r = rows[("webhook", c)]
    n = max(r["wrk"]["requests"], 1)
    before, after = r["roles_before"] or {}, r["roles_after"] or {}
    per_role = {k: [(a - b) / n for a, b in zip(v, before.get(k, [0, 0]))]
                for k, v in after.items()}
    shown = ", ".join(f"{k} {v + i:.2f} ({v:.2f} + {i:.2f})"
                      for k, (v, i) in sorted(per_role.items(), key=lambda kv: -sum(kv[1]))
                      if v + i >= 0.005)
    print(f"webhook ctxsw/req by thread at {c} connection{'s' if c > 1 else ''} "
          f"(sleeps + preemptions): {shown}")
print("CPU us/req, ctxsw/req and allocs/req are the server's own (from /proc and the hook): the "
      "figures least\nshaken by other load on the machine; req/s and latency move with it")

errors = []
for (s, c), r in sorted(rows.items()):
    w = r["wrk"]
    if w["status"] or r["socket_errors"]:
        errors.append(f"{s} at {c} connections: wrk saw {w['status']} non-2xx, socket errors "
                      f"connect {w['connect']} read {w['read']} write {w['write']} "
                      f"timeout {w['timeout']}")
    if r["accepted"] is not None and r["wrk"]["requests"] / max(r["accepted"], 1) < 10:
        errors.append(f"{s} at {c} connections: the webhook accepted {r['accepted']} connections "
                      f"for {r['wrk']['requests']} requests (keep-alive does not hold)")
if wh_non200:
    errors.append(f"the webhook's metrics count {wh_non200} answers other than 200")
def per_conn(c):
    r = rows[("webhook", c)]
    return r["wrk"]["requests"] / max(r["accepted"], 1)
print(f"keep-alive: the webhook served {per_conn(1):.0f} requests per connection it accepted at 1 "
      f"connection, {per_conn(conns):.0f} at {conns}\n  (it closes a connection after its 1000th "
      "request, docs/server.md; nginx: keepalive_requests 10000000)")
print("errors: " + ("; ".join(errors) if errors else
                    "none (wrk: 0 non-2xx, 0 socket errors; webhook metrics: 0 non-200)"))

def target(label, value, limit, unit, fmt="{:.1f}", higher_is_better=False):
    ok = value >= limit if higher_is_better else value <= limit
    miss = "" if ok else f"MISSED by {fmt.format(abs(value - limit))}{unit}"
    print(f"  {label:<50} {fmt.format(value) + unit:>14}   {'met' if ok else miss}")

allocs = max(rows[("alloc", c)]["allocs_per_req"] for c in (1, conns))
print("targets:")
target(f"server CPU <= 60 us/req at {conns} connections", wc["cpu_us"], 60, " us/req")
target("allocations <= 100/req (worse of 1 and %d conns)" % conns, allocs, 100, "/req")
target(f"throughput >= 0.4 x nginx at {conns} connections", wc["rps"] / nc["rps"], 0.4, " x",
       fmt="{:.2f}", higher_is_better=True)
target("p50 at 1 connection <= 2 x nginx's", w1["p50"] / n1["p50"], 2, " x", fmt="{:.2f}")
target("peak RSS <= 30 MiB", wc["rss_kib"] / 1024, 30, " MiB")
print(f"\n({meta['elapsed']} s, the build {meta['build_seconds']} s of it)")
sys.exit(1 if errors else 0)
EOF
