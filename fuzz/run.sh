#!/usr/bin/env bash
# A fuzzing campaign: builds the libFuzzer targets (clang-14, -fsanitize=fuzzer,address,undefined)
# and runs each for a bounded time, seeded from fuzz/seeds.txt and fuzz/regressions/<target>/.
# Prints, per target, the executions, the coverage libFuzzer reached, peak RSS and the findings;
# fails on any crash, trapped property, leak, timeout or out-of-memory.
#   bash fuzz/run.sh                                  # every target, 60 s each
#   FUZZ_SECONDS=600 bash fuzz/run.sh admission_fuzz  # one target, 10 minutes
#   FUZZ_RUNS=1000000 bash fuzz/run.sh watch_fuzz     # until 1,000,000 executions (or the time)
#   FUZZ_TIMEOUT=60                                   # seconds one input may take (default 60)
# The grown corpus stays in build-fuzz/corpus/<target>/ for the next run. A finding is left in
# build-fuzz/findings/<target>/: fix it, and commit the input to fuzz/regressions/<target>/, which
# CTest replays on every run (fuzz.replay.<target>).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
SECONDS_EACH=${FUZZ_SECONDS:-60}
# A unit slower than this (wall clock) is a finding. Wall clock, so on a loaded machine an honest
# input (a 64-host RayCluster expanded Pod by Pod under ASan) can pass 10 s; a hang passes any.
UNIT_TIMEOUT=${FUZZ_TIMEOUT:-60}
RUNS=${FUZZ_RUNS:--1}
BUILD=${FUZZ_BUILD_DIR:-$ROOT/build-fuzz}
mkdir -p "$BUILD"
CXX=${FUZZ_CXX:-clang++-14} cmake -S . -B "$BUILD" -DWEBHOOK_SANITIZE=fuzz -DWEBHOOK_BUILD_TESTS=OFF \
  -DWEBHOOK_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$BUILD/configure.log" 2>&1 ||
  { cat "$BUILD/configure.log"; exit 1; }
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(admission_fuzz topology_fuzz documents_fuzz watch_fuzz http1_fuzz)
fi
cmake --build "$BUILD" -j"$(nproc)" --target "${targets[@]}" >"$BUILD/build.log" 2>&1 ||
  { tail -50 "$BUILD/build.log"; exit 1; }

seeds() {  # seeds <target>: the seed paths fuzz/seeds.txt gives it, then its regressions
  awk -v t="$1" '$1 == t { print $2 }' fuzz/seeds.txt
  echo "fuzz/regressions/$1"
}

status=0
summary=()
for t in "${targets[@]}"; do
  name=${t%_fuzz}
  corpus=$BUILD/corpus/$t
  findings=$BUILD/findings/$t
  rm -rf "$findings"; mkdir -p "$findings" "$corpus"
  seed_paths=()
  while read -r p; do  # libFuzzer reads directories: a single seed file joins the grown corpus
    if [[ -d $p ]]; then seed_paths+=("$p"); else cp "$p" "$corpus/"; fi
  done < <(seeds "$name")
  echo "== $t: ${SECONDS_EACH}s${FUZZ_RUNS:+ or $RUNS runs}, seeds: ${seed_paths[*]}"
  # The first directory is the one libFuzzer grows; the seed paths are only read.
  "$BUILD/fuzz/$t" -max_total_time="$SECONDS_EACH" -runs="$RUNS" -timeout="$UNIT_TIMEOUT" \
    -rss_limit_mb=2048 -malloc_limit_mb=1024 -dict=fuzz/webhook.dict -artifact_prefix="$findings/" \
    -print_final_stats=1 "$corpus" "${seed_paths[@]}" >"$BUILD/$t.log" 2>&1
  code=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$BUILD/$t.log" | tail -1)
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$BUILD/$t.log" | tail -1)
  cov=$(grep -oE ' cov: [0-9]+' "$BUILD/$t.log" | tail -1 | grep -oE '[0-9]+')
  ft=$(grep -oE ' ft: [0-9]+' "$BUILD/$t.log" | tail -1 | grep -oE '[0-9]+')
  # crash-, leak-, timeout- and oom- files are findings; slow-unit- files (an input that took
  # over 10 s, usually a loaded machine) are reported beside them and do not fail the run.
  found=$(find "$findings" -type f ! -name 'slow-unit-*' | wc -l)
  slow=$(find "$findings" -type f -name 'slow-unit-*' | wc -l)
  units=$(find "$corpus" -type f | wc -l)
  summary+=("| $t | ${execs:-?} | ${cov:-?} | ${ft:-?} | $units | ${rss:-?} | $found | $slow |")
  if [ $code -ne 0 ] || [ "$found" -ne 0 ]; then
    echo "FAIL: $t (exit $code); findings in $findings, log $BUILD/$t.log"
    grep -m3 -E "ERROR|SUMMARY" "$BUILD/$t.log"
    status=1
  fi
done
echo
echo "| target | executions | coverage (edges) | features | corpus | peak RSS (MB) | findings | slow inputs |"
echo "|---|---|---|---|---|---|---|---|"
printf '%s\n' "${summary[@]}"
exit $status
