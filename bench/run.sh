#!/usr/bin/env bash
# Benchmark: kuberay-tpu-webhook against nginx, in the same run, on this machine.
#
# Both serve HTTPS on 127.0.0.1 with the same certificate; wrk sends the same AdmissionReview (the
# GKE tutorial's v6e worker Pod, POST with Content-Type application/json) over 16 keep-alive
# TLS connections. nginx answers with a fixed AdmissionReview response (the webhook's own answer,
# `return 200`), so it measures what TLS, HTTP and the network cost on this machine; the webhook
# additionally parses the review, mutates the Pod, diffs, encodes and logs a line per request.
#
# Usage: bash bench/run.sh [BUILD_DIR]      (default: build; builds the two targets it needs)
# Env:   DURATION=20s  CONNECTIONS=16  THREADS=2 (wrk threads)  WARMUP=3s
# Prints req/s, p50, p99 and peak RSS of both, the ratio, and whether the targets are met
# (webhook >= 0.25 x nginx req/s, p99 <= 2 ms, peak RSS <= 30 MiB). Exit 0 even when a target
# is missed (it is a measurement); 1 when something could not run.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
DURATION="${DURATION:-20s}"
CONNECTIONS="${CONNECTIONS:-16}"
THREADS="${THREADS:-2}"
WARMUP="${WARMUP:-3s}"

for tool in wrk nginx openssl curl python3; do
  command -v "$tool" >/dev/null 2>&1 || { echo "bench: $tool is missing (bash scripts/setup.sh installs it)" >&2; exit 1; }
done
NGINX="$(command -v nginx)"

if [[ ! -x "$BUILD/cmd/webhook/kuberay-tpu-webhook" || ! -x "$BUILD/bench/make-review" ]]; then
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
[[ -n "${BENCH_NO_BUILD:-}" ]] || cmake --build "$BUILD" -j"$(nproc)" --target kuberay-tpu-webhook make-review >/dev/null
WEBHOOK="${WEBHOOK:-$BUILD/cmd/webhook/kuberay-tpu-webhook}"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/webhook-bench.XXXXXX")"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# One certificate for both servers (ECDSA P-256, as cert-manager can issue).
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
  -keyout "$WORK/tls.key" -out "$WORK/tls.crt" -subj "/CN=127.0.0.1" \
  -addext "subjectAltName=IP:127.0.0.1" 2>/dev/null

"$BUILD/bench/make-review" --worker 3 --uid bench-uid \
  "$ROOT/examples/gke-tutorial/ray-cluster.tpu-v6e-multihost.yaml" > "$WORK/review.json"

# The webhook, logging one JSON line per admission to a file (as a container runtime would
# collect it).
WH_PORT="$(free_port)"
HEALTH_PORT="$(free_port)"
"$WEBHOOK" --bind-address="127.0.0.1:$WH_PORT" --health-address="127.0.0.1:$HEALTH_PORT" \
  --tls-cert-file="$WORK/tls.crt" --tls-private-key-file="$WORK/tls.key" \
  --legacy-indexing=off --log-format=json 2> "$WORK/webhook.log" &
WH_PID=$!
PIDS+=("$WH_PID")
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$HEALTH_PORT/readyz" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -sf --cacert "$WORK/tls.crt" -H 'Content-Type: application/json' \
  --data-binary @"$WORK/review.json" "https://127.0.0.1:$WH_PORT/mutate" > "$WORK/response.json"
python3 - "$WORK/response.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))["response"]
assert r["allowed"] and r.get("patchType") == "JSONPatch", r
EOF

# nginx: the same response, fixed, over TLS; two workers (one per core), a buffered access log.
NG_PORT="$(free_port)"
mkdir -p "$WORK/nginx"
python3 - "$WORK" "$NG_PORT" <<'EOF'
import json, sys
work, port = sys.argv[1], sys.argv[2]
body = open(work + "/response.json").read().strip().replace("'", "\\'")
conf = f"""
worker_processes 2;
pid {work}/nginx/nginx.pid;
error_log {work}/nginx/error.log warn;
daemon off;
events {{ worker_connections 1024; }}
http {{
  access_log {work}/nginx/access.log combined buffer=64k flush=1s;
  client_body_temp_path {work}/nginx/body;
  proxy_temp_path {work}/nginx/proxy;
  fastcgi_temp_path {work}/nginx/fastcgi;
  uwsgi_temp_path {work}/nginx/uwsgi;
  scgi_temp_path {work}/nginx/scgi;
  keepalive_requests 100000;
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
PIDS+=("$NG_PID")
for _ in $(seq 100); do
  curl -sf --cacert "$WORK/tls.crt" -X POST --data-binary @"$WORK/review.json" \
    "https://127.0.0.1:$NG_PORT/mutate" >/dev/null 2>&1 && break
  sleep 0.1
done

cat > "$WORK/post.lua" <<EOF
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = assert(io.open("$WORK/review.json", "rb"))
wrk.body = f:read("*a")
f:close()
EOF

cpu_ticks() {  # user+system clock ticks of the given processes
  local total=0
  for p in "$@"; do
    total=$((total + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
  done
  echo "$total"
}

run_wrk() {  # name url pids... -> $WORK/<name>.wrk and $WORK/<name>.cpu (server CPU seconds)
  local name="$1" url="$2"
  shift 2
  wrk -t"$THREADS" -c"$CONNECTIONS" -d"$WARMUP" -s "$WORK/post.lua" "$url" >/dev/null
  local before
  before="$(cpu_ticks "$@")"
  wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" -s "$WORK/post.lua" --latency "$url" > "$WORK/$name.wrk"
  echo "$(( $(cpu_ticks "$@") - before )) $(getconf CLK_TCK)" > "$WORK/$name.cpu"
}

run_wrk nginx "https://127.0.0.1:$NG_PORT/mutate" $(pgrep -P "$NG_PID") "$NG_PID"
run_wrk webhook "https://127.0.0.1:$WH_PORT/mutate" "$WH_PID"

peak_rss_kib() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status"; }
WH_RSS="$(peak_rss_kib "$WH_PID")"
NG_RSS=0
for p in $(pgrep -P "$NG_PID") "$NG_PID"; do
  r="$(peak_rss_kib "$p" 2>/dev/null || echo 0)"
  NG_RSS=$((NG_RSS + r))
done
ADMISSIONS="$(grep -c '"msg":"admission"' "$WORK/webhook.log" || true)"

python3 - "$WORK" "$WH_RSS" "$NG_RSS" "$ADMISSIONS" "$CONNECTIONS" "$DURATION" <<'EOF'
import re, sys
work, wh_rss, ng_rss, admissions, conns, duration = sys.argv[1:]

def parse(name):
    text = open(f"{work}/{name}.wrk").read()
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
    def pct(p):
        m = re.search(rf"^\s+{p}%\s+([\d.]+)(us|ms|s)\s*$", text, re.M)
        v, unit = float(m.group(1)), m.group(2)
        return v / 1000 if unit == "us" else v * 1000 if unit == "s" else v
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    sock = re.search(r"Socket errors: (.*)", text)
    ticks, hz = open(f"{work}/{name}.cpu").read().split()
    total = float(re.search(r"(\d+) requests in", text).group(1))
    cpu_us = int(ticks) / int(hz) * 1e6 / max(total, 1)
    return {"rps": rps, "p50": pct(50), "p99": pct(99), "cpu_us": cpu_us,
            "non2xx": int(errors.group(1)) if errors else 0,
            "socket": sock.group(1) if sock else "none"}

w, n = parse("webhook"), parse("nginx")
ratio = w["rps"] / n["rps"]
rss_mib = int(wh_rss) / 1024
print(f"kuberay-tpu-webhook benchmark: {conns} keep-alive TLS connections, {duration}, wrk POST of the")
print("GKE tutorial's v6e worker Pod AdmissionReview (3.8 KB) on 127.0.0.1\n")
print(f"{'server':<22}{'req/s':>10}{'p50 ms':>10}{'p99 ms':>10}{'peak RSS MiB':>15}{'CPU us/req':>12}")
print(f"{'nginx (static answer)':<22}{n['rps']:>10.0f}{n['p50']:>10.2f}{n['p99']:>10.2f}{int(ng_rss)/1024:>15.1f}{n['cpu_us']:>12.0f}")
print(f"{'kuberay-tpu-webhook':<22}{w['rps']:>10.0f}{w['p50']:>10.2f}{w['p99']:>10.2f}{rss_mib:>15.1f}{w['cpu_us']:>12.0f}")
print(f"\nthroughput ratio webhook/nginx: {ratio:.2f}")
print("CPU us/req: the server's own CPU time per request (less sensitive to other load than req/s)")
print(f"webhook errors: non-2xx {w['non2xx']}, socket {w['socket']}; admission log lines: {admissions}")
def verdict(ok): return "met" if ok else "MISSED"
print(f"targets: ratio >= 0.25 {verdict(ratio >= 0.25)}; p99 <= 2 ms {verdict(w['p99'] <= 2)}; "
      f"peak RSS <= 30 MiB {verdict(rss_mib <= 30)}")
EOF
