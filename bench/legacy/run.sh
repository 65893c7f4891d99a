#!/usr/bin/env bash
# Legacy placement's cost with replicas sharing slot claims, in one run on 127.0.0.1.
#
#   bench/legacy/run.sh BUILD/bench/legacy/legacy-bench [--pods 10000] [--requests 2000]
#                       [--replicas 3] [--threads 2] [--groups 512] [--stagger 21]
#                       [--max-ratio R] [--max-rss-mib 50]
#
# Starts a fake kube-apiserver holding --pods KubeRay TPU worker Pods (legacy-bench serve), then
# --replicas webhook replicas at once (legacy-bench client --replica i): each lists and watches the
# Pods through kube::LiveCluster, then admits --requests label-less Pods (each placed through a
# slot claim written to a Lease of the fake API server, shared with the other replicas) and as
# many labelled ones, interleaved, through admission::Handler. The label-less Pods belong to
# --groups worker groups, which the replicas walk through starting --stagger groups apart (with
# --stagger 0 they place Pods of the same groups at the same time: the contended case). Prints
# every replica's figures, then the run's: the worst label-less p99 / labelled p99 ratio, the API
# writes per placed Pod, and the largest peak RSS. Passes when the ratio is within --max-ratio,
# every replica's peak RSS within --max-rss-mib, and no Pod was denied.
set -euo pipefail

bin=${1:?usage: run.sh PATH/TO/legacy-bench [flags]}
shift
pods=10000 requests=2000 replicas=3 threads=2 groups=512 stagger=21 max_ratio=10 max_rss=50
while [[ $# -gt 0 ]]; do
  case $1 in
    --pods) pods=$2 ;;
    --requests) requests=$2 ;;
    --replicas) replicas=$2 ;;
    --threads) threads=$2 ;;
    --groups) groups=$2 ;;
    --stagger) stagger=$2 ;;
    --max-ratio) max_ratio=$2 ;;
    --max-rss-mib) max_rss=$2 ;;
    *) echo "run.sh: unknown flag $1" >&2; exit 2 ;;
  esac
  shift 2
done

work=$(mktemp -d)
server_pid=
client_pids=()
cleanup() {
  for pid in "${client_pids[@]}" $server_pid; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

"$bin" serve --pods "$pods" --port-file "$work/port" &
server_pid=$!
for _ in $(seq 1 1200); do  # at most 120 s to build the fake cluster
  [[ -s $work/port ]] && break
  kill -0 "$server_pid" 2>/dev/null || { echo "run.sh: the fake API server exited" >&2; exit 1; }
  sleep 0.1
done
[[ -s $work/port ]] || { echo "run.sh: the fake API server did not start" >&2; exit 1; }

port=$(cat "$work/port")
for ((i = 0; i < replicas; i++)); do
  timeout 600 "$bin" client --port "$port" --requests "$requests" --threads "$threads" \
    --replica "$i" --groups "$groups" --stagger "$stagger" >"$work/out.$i" &
  client_pids+=($!)
done
status=0
for ((i = 0; i < replicas; i++)); do
  if ! wait "${client_pids[$i]}"; then
    echo "FAIL: replica $i exited with an error (denied Pods or no sync)" >&2
    status=1
  fi
done
client_pids=()

value() { awk -v k="$1" '$1 == k { print $2 }' "$2"; }
worst_ratio=0 worst_rss=0 written=0 writes=0 reads=0 conflicts=0
for ((i = 0; i < replicas; i++)); do
  out=$work/out.$i
  echo "--- replica $i"
  cat "$out"
  listed=$(value pods_listed "$out")
  if [[ $listed != "$pods" ]]; then
    echo "FAIL: replica $i tracked $listed Pods, expected $pods" >&2
    status=1
  fi
  w=$(value claims_written "$out")
  written=$((written + w))
  writes=$(awk -v a="$writes" -v b="$(value writes_per_pod "$out")" -v n="$w" 'BEGIN { printf "%.0f", a + b * n }')
  reads=$(awk -v a="$reads" -v b="$(value reads_per_pod "$out")" -v n="$w" 'BEGIN { printf "%.0f", a + b * n }')
  conflicts=$((conflicts + $(value claim_conflicts "$out")))
  worst_ratio=$(awk -v a="$worst_ratio" -v b="$(value p99_ratio "$out")" 'BEGIN { print (b > a ? b : a) }')
  worst_rss=$(awk -v a="$worst_rss" -v b="$(value rss_peak_mib "$out")" 'BEGIN { print (b > a ? b : a) }')
done
echo "--- all $replicas replicas"
echo "claims_written $written"
echo "claim_conflicts $conflicts"
awk -v w="$writes" -v r="$reads" -v n="$written" \
  'BEGIN { printf "writes_per_pod %.3f\nreads_per_pod %.3f\n", w / n, r / n }'
echo "worst_p99_ratio $worst_ratio"
echo "worst_rss_peak_mib $worst_rss"
if awk -v r="$worst_ratio" -v m="$max_ratio" 'BEGIN { exit !(r > m) }'; then
  echo "FAIL: label-less p99 is ${worst_ratio}x the labelled p99 (bound ${max_ratio}x)" >&2
  status=1
fi
if awk -v r="$worst_rss" -v m="$max_rss" 'BEGIN { exit !(r > m) }'; then
  echo "FAIL: peak RSS ${worst_rss} MiB with $pods watched Pods (bound ${max_rss} MiB)" >&2
  status=1
fi
if [[ $status == 0 ]]; then
  echo "PASS: $replicas replicas, $pods Pods each watched, peak RSS ${worst_rss} MiB (<= ${max_rss}); label-less/labelled p99 ${worst_ratio} (<= ${max_ratio})"
fi
exit $status
