#!/usr/bin/env bash
# bench/instructions.sh refuses bad settings before it measures anything: exit 1 and one line on
# stderr that says what to give instead.
#   bash bench/instructions_input_test.sh BUILD_DIR
set -uo pipefail
script="$(cd "$(dirname "$0")" && pwd)/instructions.sh"
build="$1"
failures=0

# refuses EXPECTED NAME=VALUE...: instructions.sh with those settings exits 1 and says EXPECTED
# in its one line on stderr.
refuses() {
  local expected="$1" err code
  shift
  err="$(env BENCH_NO_BUILD=1 "$@" bash "$script" "$build" 2>&1 >/dev/null)"
  code=$?
  if [[ $code -ne 1 || "$(wc -l <<<"$err")" -ne 1 || "$err" != *"$expected"* ]]; then
    echo "FAIL: $* gave exit $code and: $err (want exit 1 and one line with: $expected)"
    failures=$((failures + 1))
  fi
}

refuses "REQUESTS=0 WARMUP_REQUESTS=100: give whole numbers above 0" REQUESTS=0
refuses "give whole numbers above 0" WARMUP_REQUESTS=ten
refuses "WORKER=x: give a worker's index, 0 or more" WORKER=x
refuses "BASELINE=/nonexistent/kuberay-tpu-webhook is not an executable" \
  BASELINE=/nonexistent/kuberay-tpu-webhook
refuses "but the RayCluster has 4 worker Pod(s)" WORKER=99
refuses "/nonexistent/webhook" REQUESTS=1 WEBHOOK=/nonexistent/webhook

[[ $failures -eq 0 ]] && echo "passed: every bad setting refused in one line"
exit $((failures > 0))
