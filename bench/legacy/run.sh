#!/usr/bin/env bash
# Issue 6 item 7: legacy placement's cost, in one run on 127.0.0.1.
#
#   bench/legacy/run.sh BUILD/bench/legacy/legacy-bench [--pods 10000] [--requests 20000]
#                       [--threads 2] [--max-ratio 1.5] [--max-rss-mib 50]
#
# Starts a fake kube-apiserver holding --pods KubeRay TPU worker Pods (legacy-bench serve), then
# the webhook's side (legacy-bench client): it lists and watches them through kube::LiveCluster,
# then admits --requests label-less Pods (placed by the SliceRegistry) and as many labelled ones,
# interleaved, through admission::Handler. Passes when the label-less p99 is within --max-ratio of
# the labelled p99 and the client's peak RSS is within --max-rss-mib. Prints every figure.
set -euo pipefail

bin=${1:?usage: run.sh PATH/TO/legacy-bench [flags]}
shift
pods=10000 requests=20000 threads=2 max_ratio=1.5 max_rss=50
while [[ $# -gt 0 ]]; do
  case $1 in
    --pods) pods=$2 ;;
    --requests) requests=$2 ;;
    --threads) threads=$2 ;;
    --max-ratio) max_ratio=$2 ;;
    --max-rss-mib) max_rss=$2 ;;
    *) echo "run.sh: unknown flag $1" >&2; exit 2 ;;
  esac
  shift 2
done

work=$(mktemp -d)
server_pid=
cleanup() {
  if [[ -n $server_pid ]]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
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

"$bin" client --port "$(cat "$work/port")" --requests "$requests" --threads "$threads" \
  | tee "$work/out"

value() { awk -v k="$1" '$1 == k { print $2 }' "$work/out"; }
ratio=$(value p99_ratio)
rss=$(value rss_peak_mib)
listed=$(value pods_listed)
status=0
if [[ $listed != "$pods" ]]; then
  echo "FAIL: the webhook tracked $listed Pods, expected $pods" >&2
  status=1
fi
if awk -v r="$ratio" -v m="$max_ratio" 'BEGIN { exit !(r > m) }'; then
  echo "FAIL: label-less p99 is ${ratio}x the labelled p99 (bound ${max_ratio}x)" >&2
  status=1
fi
if awk -v r="$rss" -v m="$max_rss" 'BEGIN { exit !(r > m) }'; then
  echo "FAIL: peak RSS ${rss} MiB with $pods watched Pods (bound ${max_rss} MiB)" >&2
  status=1
fi
if [[ $status == 0 ]]; then
  echo "PASS: $pods Pods, peak RSS ${rss} MiB (<= ${max_rss}); label-less/labelled p99 ${ratio} (<= ${max_ratio})"
fi
exit $status
