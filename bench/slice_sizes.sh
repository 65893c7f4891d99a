#!/usr/bin/env bash
# Benchmark: what one admission costs the server as the slice grows. The same webhook process
# answers, in turn, the AdmissionReview of a worker Pod of the GKE tutorial's 4-host v6e slice
# (examples/gke-tutorial/ray-cluster.tpu-v6e-multihost.yaml, worker 3) and of the last worker Pod
# of the largest tpu7x slice, 16x16x36 on 2,304 hosts (bench/clusters/tpu7x-16x16x36.yaml,
# worker 2303), where the host lists are longest and the slicebuilder list is left out (docs/
# topology.md "At the limits"). The 4-host review is the baseline of the same run.
#
# Driven as kube-apiserver drives a webhook (kube-apiserver's headers, keep-alive TLS on
# 127.0.0.1, one connection: admissions of one slice's Pods arrive one after another from one
# client), wrk for DURATION per review after a WARMUP run. Per review, read from /proc around the
# measured run: the server's CPU time per admission (utime+stime), its context switches per
# admission, its peak RSS after the run (VmHWM, so the 2,304-host row includes the 4-host one);
# then heap allocations per admission from a second webhook process under LD_PRELOAD=
# liballoc-count.so (bench/alloc_count.c) for ALLOC_DURATION per review. Also the request and
# response sizes and wrk's req/s, p50 and p99. Before measuring, each review must be answered 200,
# allowed, with a JSONPatch; after, wrk must have seen no error and the webhook's metrics no
# answer other than 200.
#
# Usage: bash bench/slice_sizes.sh [BUILD_DIR]   (default: build; the three targets it needs are
#                                                 built unless BENCH_NO_BUILD is set)
# Env:   DURATION=8s  WARMUP=2s  ALLOC_DURATION=3s  BENCH_NO_BUILD=1
# About 40 s with the defaults, the build aside. Loopback only; it stops what it starts.
# Exit 0 when the figures were measured; 1 when something could not run or an answer was wrong.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
DURATION="${DURATION:-8s}"
WARMUP="${WARMUP:-2s}"
ALLOC_DURATION="${ALLOC_DURATION:-3s}"
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
need_whole_durations DURATION WARMUP ALLOC_DURATION
need_tools wrk openssl curl python3
LOADAVG_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg)"
STARTED="$(date -u '+%Y-%m-%d %H:%M:%S UTC')"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/webhook-slices.XXXXXX")"
WH_PID=""
trap 'stop_webhook; rm -rf "$WORK"' EXIT
trap 'exit 1' INT TERM

build_targets kuberay-tpu-webhook make-review alloc-count

bench_certificate
# name hosts worker file (the hosts are for the reader: the cluster file says them)
REVIEWS=(
  "v6e-4x4 4 3 $ROOT/examples/gke-tutorial/ray-cluster.tpu-v6e-multihost.yaml"
  "tpu7x-16x16x36 2304 2303 $ROOT/bench/clusters/tpu7x-16x16x36.yaml"
)
for r in "${REVIEWS[@]}"; do
  read -r name _ worker file <<<"$r"
  "$MAKE_REVIEW" --worker "$worker" --uid "bench-$name" "$file" > "$WORK/$name.review.json" ||
    die "make-review could not make the review of $file worker $worker"
  write_post_lua "$WORK/$name.lua" "$WORK/$name.review.json"
done
# start_webhook checks its answer to review.json: the first review.
cp "$WORK/v6e-4x4.review.json" "$WORK/review.json"

# measure ROW DURATION NAME: one review's run at one connection; figures to $WORK/ROW.json.
measure() {
  local row="$1" duration="$2" name="$3" ticks ctx allocs=""
  run_wrk "$WORK/$row.warmup" 1 1 "$WARMUP" "$WH_URL" "$WORK/$name.lua"
  [[ -n "${COUNT_ALLOCS:-}" ]] && allocs="$(alloc_count)"
  ticks="$(cpu_ticks "$WH_PID")"
  ctx="$(ctx_switches "$WH_PID")"
  run_wrk "$WORK/$row.wrk" 1 1 "$duration" "$WH_URL" "$WORK/$name.lua"
  ticks=$(($(cpu_ticks "$WH_PID") - ticks))
  ctx=$(($(ctx_switches "$WH_PID") - ctx))
  [[ -n "$allocs" ]] && allocs=$(($(alloc_count) - allocs))
  echo "{\"ticks\": $ticks, \"hz\": $(getconf CLK_TCK), \"ctx\": $ctx," \
    "\"rss_kib\": $(peak_rss_kib "$WH_PID"), \"allocs\": ${allocs:-null}," \
    "\"wrk\": $(cat "$WORK/$row.wrk.json")}" > "$WORK/$row.json"
}

# Each review answered right before it is measured; its answer's size kept.
check_reviews() {
  local r name
  for r in "${REVIEWS[@]}"; do
    read -r name _ <<<"$r"
    post_review "$WH_URL" "$WORK/$name.answer" "$WORK/$name.review.json" ||
      die "the webhook did not answer the $name review"
    check_answer "$WORK/$name.answer" || die "the webhook's answer to the $name review is wrong"
  done
}

start_webhook "$WORK/webhook.log"
check_reviews
for r in "${REVIEWS[@]}"; do
  read -r name _ <<<"$r"
  measure "cpu-$name" "$DURATION" "$name"
done
NON200="$(webhook_non200)"
stop_webhook

ALLOC_COUNT_FILE="$WORK/alloc.count"
start_webhook "$WORK/webhook-alloc.log" \
  LD_PRELOAD="$ALLOC_HOOK" ALLOC_COUNT_FILE="$ALLOC_COUNT_FILE"
wait_alloc_file
for r in "${REVIEWS[@]}"; do
  read -r name _ <<<"$r"
  COUNT_ALLOCS=1 measure "alloc-$name" "$ALLOC_DURATION" "$name"
done
NON200=$((NON200 + $(webhook_non200)))
stop_webhook

BUILD_TYPE="$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$BUILD/CMakeCache.txt" 2>/dev/null || true)"
ALLOCATOR="$(allocator_of "$WEBHOOK")"
printf '%s\n' "${REVIEWS[@]}" > "$WORK/reviews.txt"
python3 - "$WORK" "$NON200" "$STARTED" "$LOADAVG_BEFORE" "$(nproc)" "${BUILD_TYPE:-?}" \
  "$ALLOCATOR" "$DURATION" "$ALLOC_DURATION" <<'PY'
import json, sys
work, non200, started, load, nproc, build, allocator, duration, alloc_duration = sys.argv[1:]
reviews = [l.split()[:2] for l in open(f"{work}/reviews.txt") if l.strip()]
print(f"kuberay-tpu-webhook, one admission by slice size, {started}: nproc {nproc}, load "
      f"average before {load}; {build} build, {allocator}")
print(f"POST /mutate?timeout=10s with kube-apiserver's headers, one keep-alive TLS connection on "
      f"127.0.0.1; {duration} per review\nafter a warm-up; allocations from {alloc_duration} runs "
      "under the hook\n")
hdr = (f"{'slice':<16}{'hosts':>6}{'request B':>11}{'response B':>12}{'req/s':>8}{'p50 ms':>9}"
       f"{'p99 ms':>9}{'CPU us/adm':>12}{'ctxsw/adm':>11}{'allocs/adm':>12}{'peak RSS MiB':>14}")
print(hdr)
print("-" * len(hdr))
errors, rows = [], {}
for name, hosts in reviews:
    c = json.load(open(f"{work}/cpu-{name}.json"))
    a = json.load(open(f"{work}/alloc-{name}.json"))
    for r in (c, a):
        w = r["wrk"]
        bad = w["status"] + sum(w[k] for k in ("connect", "read", "write", "timeout"))
        if bad:
            errors.append(f"{name}: wrk saw {w['status']} non-2xx and socket errors {w}")
    n, na = max(c["wrk"]["requests"], 1), max(a["wrk"]["requests"], 1)
    row = {
        "req": len(open(f"{work}/{name}.review.json", "rb").read()),
        "resp": len(open(f"{work}/{name}.answer.body", "rb").read()),
        "rps": c["wrk"]["requests"] / (c["wrk"]["duration_us"] / 1e6),
        "p50": c["wrk"]["p50_us"] / 1000, "p99": c["wrk"]["p99_us"] / 1000,
        "cpu": c["ticks"] / c["hz"] * 1e6 / n, "ctx": c["ctx"] / n,
        "allocs": a["allocs"] / na, "rss": c["rss_kib"] / 1024,
    }
    rows[name] = row
    print(f"{name:<16}{int(hosts):>6}{row['req']:>11}{row['resp']:>12}{row['rps']:>8.0f}"
          f"{row['p50']:>9.3f}{row['p99']:>9.3f}{row['cpu']:>12.1f}{row['ctx']:>11.2f}"
          f"{row['allocs']:>12.1f}{row['rss']:>14.1f}")
small, large = rows[reviews[0][0]], rows[reviews[-1][0]]
print(f"\n{reviews[-1][0]} / {reviews[0][0]}: CPU {large['cpu'] / small['cpu']:.1f} x, "
      f"allocations {large['allocs'] / small['allocs']:.2f} x, response "
      f"{large['resp'] / small['resp']:.0f} x")
if int(non200):
    errors.append(f"the webhook's metrics count {non200} answers other than 200")
print("errors: " + ("; ".join(errors) if errors else
                    "none (wrk: 0 non-2xx, 0 socket errors; webhook metrics: 0 non-200)"))
sys.exit(1 if errors else 0)
PY
