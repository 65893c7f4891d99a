# shellcheck shell=bash
# Shared by bench/run.sh, bench/slice_sizes.sh and bench/instructions.sh (sourced, not run):
# building and finding the binaries, starting the webhook as kube-apiserver reaches it, driving
# it with wrk, and reading a server's own CPU, context switches, peak RSS and allocations from
# /proc and the allocation hook.
# The caller sets ROOT, BUILD and WORK (a scratch directory), builds and finds the
# binaries (build_targets), makes the certificate $WORK/tls.crt/tls.key (bench_certificate), and
# stops the webhook on exit (stop_webhook).

die() { echo "bench: $*" >&2; exit 1; }

# kube-apiserver's User-Agent on its admission calls: every request the benchmarks send carries it.
USER_AGENT="kube-apiserver-admission"

# need_whole_durations NAME...: dies unless each named variable is whole seconds, minutes or hours
# (10s, 2m): wrk takes whole units only.
need_whole_durations() {
  local name
  for name in "$@"; do
    [[ "${!name}" =~ ^[1-9][0-9]*[smh]?$ ]] ||
      die "$name=${!name}: give whole seconds such as 10s (or 2m)"
  done
}

# need_tools TOOL...: dies naming the first one that is not on PATH.
need_tools() {
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool is missing (bash scripts/setup.sh installs it)"
  done
}

# build_targets TARGET...: builds TARGETs (kuberay-tpu-webhook, make-review, alloc-count,
# tls-memory) in $BUILD, configured Release when new, unless BENCH_NO_BUILD is set (the log:
# $WORK/build.log); then sets WEBHOOK (unless set), MAKE_REVIEW, ALLOC_HOOK and TLS_MEMORY, and
# dies when a TARGET's file is missing.
build_targets() {
  if [[ -z "${BENCH_NO_BUILD:-}" ]]; then
    [[ -f "$BUILD/CMakeCache.txt" ]] ||
      cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$BUILD" -j"$(nproc)" --target "$@" > "$WORK/build.log" 2>&1 ||
      { tail -40 "$WORK/build.log" >&2; die "the build failed"; }
  fi
  WEBHOOK="${WEBHOOK:-$BUILD/cmd/webhook/kuberay-tpu-webhook}"
  MAKE_REVIEW="$BUILD/bench/make-review"
  ALLOC_HOOK="$BUILD/bench/liballoc-count.so"
  TLS_MEMORY="$BUILD/bench/tls-memory"
  local target file
  for target in "$@"; do
    case "$target" in
      kuberay-tpu-webhook) file="$WEBHOOK" ;;
      make-review) file="$MAKE_REVIEW" ;;
      alloc-count) file="$ALLOC_HOOK" ;;
      tls-memory) file="$TLS_MEMORY" ;;
      *) die "build_targets: no such target: $target" ;;
    esac
    [[ -f "$file" ]] || die "$file is not built (cmake --build $BUILD --target $*)"
  done
}

# The allocator BINARY links: "jemalloc" or "glibc malloc". (ldd's whole output is read first:
# `ldd | grep -q` under pipefail fails at random, when grep quits before ldd has written all.)
allocator_of() {
  case "$(ldd "$1" 2>/dev/null || true)" in
    *libjemalloc*) echo "jemalloc" ;;
    *) echo "glibc malloc" ;;
  esac
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# An ECDSA P-256 certificate for 127.0.0.1, in $WORK/tls.crt and $WORK/tls.key.
bench_certificate() {
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
    -keyout "$WORK/tls.key" -out "$WORK/tls.crt" -subj "/CN=127.0.0.1" \
    -addext "subjectAltName=IP:127.0.0.1" 2>/dev/null
}

# One request as kube-apiserver sends it: $1 URL, $2 prefix of the .headers/.body files written,
# $3 the AdmissionReview file (default $WORK/review.json).
post_review() {
  curl -s --max-time 30 --cacert "$WORK/tls.crt" -D "$2.headers" -o "$2.body" \
    -H 'Content-Type: application/json' -H 'Accept: application/json, */*' \
    -H 'Accept-Encoding: gzip' -A "$USER_AGENT" --data-binary @"${3:-$WORK/review.json}" "$1"
}

# Checks the answer post_review wrote to $1.headers/.body: 200, JSON, never compressed, allowed
# with a JSONPatch.
check_answer() {
  python3 - "$1" <<'PY'
import json, sys
prefix = sys.argv[1]
head = open(prefix + ".headers", "rb").read().decode("latin-1").split("\r\n")
status = head[0]
fields = {k.strip().lower(): v.strip() for k, sep, v in (l.partition(":") for l in head[1:]) if sep}
problems = []
if " 200 " not in status + " ":
    problems.append(f"status line {status!r}, expected 200")
if "content-encoding" in fields:
    problems.append(f"Content-Encoding: {fields['content-encoding']} (it must never compress)")
if not fields.get("content-type", "").startswith("application/json"):
    problems.append(f"Content-Type {fields.get('content-type')!r}, expected application/json")
try:
    r = json.load(open(prefix + ".body", "rb"))["response"]
    if r.get("allowed") is not True:
        problems.append(f"not allowed: {r.get('status')}")
    if r.get("patchType") != "JSONPatch" or not r.get("patch"):
        problems.append(f"patchType {r.get('patchType')!r} / patch missing, expected a JSONPatch")
except (ValueError, KeyError, TypeError) as e:
    problems.append(f"body is not an AdmissionReview response: {e}")
for p in problems:
    print("bench: webhook answer:", p, file=sys.stderr)
sys.exit(1 if problems else 0)
PY
}

# The webhook: $1 log file, then NAME=VALUE pairs for its environment only (the allocation hook).
# Sets WH_PID, WH_URL, WH_METRICS, and checks its answer to $WORK/review.json.
start_webhook() {
  local log="$1" port health
  shift
  port="$(free_port)"
  health="$(free_port)"
  env "$@" "$WEBHOOK" --bind-address="127.0.0.1:$port" --health-address="127.0.0.1:$health" \
    --tls-cert-file="$WORK/tls.crt" --tls-private-key-file="$WORK/tls.key" \
    --legacy-indexing=off --log-format=json 2> "$log" &
  WH_PID=$!
  WH_URL="https://127.0.0.1:$port/mutate?timeout=10s"
  WH_METRICS="http://127.0.0.1:$health/metrics"
  for _ in $(seq 100); do
    curl -sf --max-time 1 "http://127.0.0.1:$health/readyz" >/dev/null 2>&1 && break
    kill -0 "$WH_PID" 2>/dev/null || die "the webhook exited at start: $(tail -5 "$log")"
    sleep 0.1
  done
  post_review "$WH_URL" "$WORK/check" || die "the webhook did not answer $WH_URL"
  check_answer "$WORK/check" || die "the webhook's answer to kube-apiserver's headers is wrong"
}

stop_webhook() {  # SIGKILL: nothing to drain here, and SIGTERM would wait out the drain delay
  [[ -n "${WH_PID:-}" ]] || return 0
  kill -KILL "$WH_PID" 2>/dev/null || true
  wait "$WH_PID" 2>/dev/null || true
  WH_PID=""
}

# write_post_lua OUT REVIEW: a wrk script POSTing the REVIEW file with kube-apiserver's headers,
# whose done() writes the run's figures as JSON to the file named by env WRK_OUT.
write_post_lua() {
  cat > "$1" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, */*"
wrk.headers["Accept-Encoding"] = "gzip"
wrk.headers["User-Agent"] = "$USER_AGENT"
local f = assert(io.open("$2", "rb"))
wrk.body = f:read("*a")
f:close()

function done(summary, latency, requests)
  local out = os.getenv("WRK_OUT")
  if not out then return end
  local e = summary.errors
  local o = assert(io.open(out, "w"))
  o:write(string.format(
    '{"requests": %d, "duration_us": %d, "p50_us": %d, "p99_us": %d, "connect": %d, ' ..
    '"read": %d, "write": %d, "timeout": %d, "status": %d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.connect, e.read, e.write, e.timeout, e.status))
  o:close()
end
LUA
}

# Sums over the given PIDs: CPU clock ticks (utime+stime of the process: /proc/PID/stat counts
# every thread), context switches (per thread: /proc/PID/task/*/status), VmHWM KiB.
cpu_ticks() {
  local p total=0
  for p in "$@"; do
    total=$((total + $(sed 's/.*) //' "/proc/$p/stat" | awk '{print $12 + $13}')))
  done
  echo "$total"
}
ctx_switches() {
  local p
  for p in "$@"; do cat /proc/"$p"/task/*/status 2>/dev/null; done |
    awk '/^(non)?voluntary_ctxt_switches:/ {s += $2} END {print s + 0}'
}
# {"ROLE": [voluntary, involuntary]} context switches so far over the threads of one PID, a
# thread's role being its name (/proc/PID/task/TID/comm) without its trailing digits: the
# webhook's https-io0 and https-io1 are both https-io. A voluntary switch is a thread going to
# sleep (waiting for a socket, a lock or work); an involuntary one is the kernel preempting it.
ctx_by_role() {
  local t
  for t in /proc/"$1"/task/*; do
    printf '%s %s\n' "$(cat "$t/comm" 2>/dev/null || echo gone)" "$(awk \
      '/^voluntary_ctxt_switches:/ {v = $2} /^nonvoluntary_ctxt_switches:/ {n = $2}
       END {print v + 0, n + 0}' "$t/status" 2>/dev/null || echo 0 0)"
  done | awk '{sub(/[0-9]+$/, "", $1); v[$1] += $2; n[$1] += $3}
    END {printf "{"; k = 0
         for (r in v) printf "%s\"%s\": [%d, %d]", (k++ ? ", " : ""), r, v[r], n[r]; print "}"}'
}
peak_rss_kib() {
  local p
  for p in "$@"; do cat "/proc/$p/status"; done | awk '/^VmHWM:/ {s += $2} END {print s + 0}'
}
alloc_count() {  # the hook's count so far, from $ALLOC_COUNT_FILE
  sleep 0.3  # the hook writes its file every 100 ms
  awk '/^allocations / {print $2}' "$ALLOC_COUNT_FILE"
}
wait_alloc_file() {
  for _ in $(seq 50); do [[ -s "$ALLOC_COUNT_FILE" ]] && return 0; sleep 0.1; done
  die "the allocation hook wrote no $ALLOC_COUNT_FILE"
}

# run_wrk OUT THREADS CONNS DURATION URL [LUA]: one wrk run, its figures to OUT.json.
run_wrk() {
  WRK_OUT="$1.json" wrk -t"$2" -c"$3" -d"$4" -s "${6:-$WORK/post.lua}" "$5" > "$1.txt" 2>&1 ||
    die "wrk failed: $(cat "$1.txt")"
  [[ -s "$1.json" ]] || die "wrk wrote no figures: $(cat "$1.txt")"
}

# The webhook's answers other than 200 so far, from its own metrics.
webhook_non200() {
  curl -sf --max-time 5 "$WH_METRICS" |
    awk '/^kuberay_tpu_webhook_requests_total\{/ && !/code="200"/ {s += $2} END {print s + 0}'
}
