#!/usr/bin/env bash
# Benchmark: the instructions the server executes per admission, counted by valgrind's callgrind.
# CPU time moves with whatever else the machine runs; an instruction count does not, so two builds
# compared this way differ by their code, not by the hour: the figure to settle whether a change
# made the request path dearer. What it counts is the server's user-space instructions: the
# kernel's share of a request (socket calls, wake-ups), which bench/run.sh's CPU time includes, is
# not in it, so it compares builds, not slices (a 2,304-host admission counts far more times a
# 4-host one than its CPU time is). Under callgrind the server runs about 50 x slower and one
# thread at a time: its wall clock, context switches and latency mean nothing here.
#
# Driven as kube-apiserver drives a webhook: POST /mutate?timeout=10s of a worker Pod's review
# with kube-apiserver's headers, over one keep-alive TLS connection on 127.0.0.1, one request
# after another (a Python client; its own instructions are not counted). The review is by default
# the one bench/run.sh sends (the GKE tutorial's v6e slice, worker 3); CLUSTER and WORKER name
# another. After WARMUP_REQUESTS the server's counters are zeroed (callgrind_control -z),
# REQUESTS more are sent, and the counters are dumped (callgrind_control -d): instructions per
# admission are every server thread's, divided by REQUESTS, so they include TLS, the event loop,
# the handler pool's hand-offs and the log line. Every answer must be 200, and the first allowed
# with a JSONPatch. Work the server does on a clock (log flushes, timers) while it runs under
# callgrind, slowly, is counted too, and weighs more per admission the fewer are counted: compare
# runs of the same REQUESTS.
#
# Usage: bash bench/instructions.sh [BUILD_DIR]   (default: build; the targets it needs are built
#                                                  unless BENCH_NO_BUILD is set)
# Env:   REQUESTS=1000  WARMUP_REQUESTS=100  WEBHOOK=path/to/kuberay-tpu-webhook
#        CLUSTER=path/to/raycluster.yaml WORKER=N   (the review of that cluster's worker N;
#        bench/clusters/tpu7x-16x16x36.yaml with WORKER=2303 is bench/slice_sizes.sh's largest)
#        BASELINE=path/to/another/kuberay-tpu-webhook   (measured first, the same way; the ratio
#                                                        WEBHOOK / BASELINE is printed)
# About 10 s per binary with the defaults. Loopback only; it stops what it starts.
# Exit 0 when the figures were measured; 1 when something could not run or an answer was wrong.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
REQUESTS="${REQUESTS:-1000}"
WARMUP_REQUESTS="${WARMUP_REQUESTS:-100}"
CLUSTER="${CLUSTER:-$ROOT/examples/gke-tutorial/ray-cluster.tpu-v6e-multihost.yaml}"
WORKER="${WORKER:-3}"
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
[[ "$REQUESTS" =~ ^[1-9][0-9]*$ && "$WARMUP_REQUESTS" =~ ^[1-9][0-9]*$ ]] ||
  die "REQUESTS=$REQUESTS WARMUP_REQUESTS=$WARMUP_REQUESTS: give whole numbers above 0"
[[ "$WORKER" =~ ^[0-9]+$ ]] || die "WORKER=$WORKER: give a worker's index, 0 or more"
need_tools valgrind callgrind_control openssl curl python3

WORK="$(mktemp -d "${TMPDIR:-/tmp}/webhook-instructions.XXXXXX")"
WH_PID=""
trap 'stop_webhook; rm -rf "$WORK"' EXIT
trap 'exit 1' INT TERM

build_targets kuberay-tpu-webhook make-review
[[ -z "${BASELINE:-}" || -x "$BASELINE" ]] || die "BASELINE=$BASELINE is not an executable"

bench_certificate
"$MAKE_REVIEW" --worker "$WORKER" --uid bench-uid "$CLUSTER" > "$WORK/review.json" \
  2> "$WORK/review.err" ||
  die "cannot make the review of worker $WORKER of $CLUSTER: $(tail -1 "$WORK/review.err")"

# send PORT COUNT: COUNT admissions over one keep-alive TLS connection, each checked.
send() {
  python3 - "$WORK" "$1" "$2" "$USER_AGENT" <<'PY'
import http.client, json, ssl, sys
work, port, count, agent = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
ctx = ssl.create_default_context(cafile=work + "/tls.crt")
conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=120)
body = open(work + "/review.json", "rb").read()
headers = {"Content-Type": "application/json", "Accept": "application/json, */*",
           "Accept-Encoding": "gzip", "User-Agent": agent}
for i in range(count):
    conn.request("POST", "/mutate?timeout=10s", body, headers)
    r = conn.getresponse()
    answer = r.read()
    if r.status != 200:
        sys.exit("bench: answer %d was HTTP %d: %r" % (i, r.status, answer[:300]))
    if i == 0:
        review = json.loads(answer)["response"]
        if review.get("allowed") is not True or review.get("patchType") != "JSONPatch":
            sys.exit("bench: the webhook's answer is not allowed with a JSONPatch: %r"
                     % answer[:300])
PY
}

# measure BINARY NAME: sets IR to the instructions per admission of BINARY.
measure() {
  local port health out
  port="$(free_port)"
  health="$(free_port)"
  out="$WORK/$2.callgrind"
  valgrind --tool=callgrind --callgrind-out-file="$out" "$1" \
    --bind-address="127.0.0.1:$port" --health-address="127.0.0.1:$health" \
    --tls-cert-file="$WORK/tls.crt" --tls-private-key-file="$WORK/tls.key" \
    --legacy-indexing=off --log-format=json 2> "$WORK/$2.log" &
  WH_PID=$!
  for _ in $(seq 600); do
    curl -sf --max-time 2 "http://127.0.0.1:$health/readyz" >/dev/null 2>&1 && break
    kill -0 "$WH_PID" 2>/dev/null || die "$1 exited at start: $(tail -5 "$WORK/$2.log")"
    sleep 0.1
  done
  send "$port" "$WARMUP_REQUESTS"
  callgrind_control -z "$WH_PID" >/dev/null 2>&1
  send "$port" "$REQUESTS"
  callgrind_control -d "$WH_PID" >/dev/null 2>&1
  [[ -s "$out.1" ]] || die "callgrind wrote no dump for $1"
  stop_webhook
  IR="$(awk -v n="$REQUESTS" '/^summary:/ { printf "%.0f\n", $2 / n; found = 1 }
    END { if (!found) exit 1 }' "$out.1")" || die "no instruction count in callgrind's dump"
}

echo "kuberay-tpu-webhook, instructions per admission ($(valgrind --version) callgrind)," \
  "$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "POST /mutate?timeout=10s, the review of worker $WORKER of $(basename "$CLUSTER")" \
  "($(wc -c < "$WORK/review.json") B),"
echo "kube-apiserver's headers, one keep-alive TLS connection on 127.0.0.1;" \
  "$REQUESTS admissions counted after $WARMUP_REQUESTS"
echo
if [[ -n "${BASELINE:-}" ]]; then
  measure "$BASELINE" baseline
  base="$IR"
  printf '%-10s %14s  %s\n' baseline "$base" "$BASELINE"
fi
measure "$WEBHOOK" webhook
ir="$IR"
printf '%-10s %14s  %s\n' webhook "$ir" "$WEBHOOK"
if [[ -n "${BASELINE:-}" ]]; then
  awk -v a="$ir" -v b="$base" 'BEGIN { printf "webhook / baseline: %.4f\n", a / b }'
fi
