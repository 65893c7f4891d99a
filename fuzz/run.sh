#!/usr/bin/env bash
# Builds the libFuzzer targets (clang-14, -fsanitize=fuzzer,address,undefined) and runs each for a
# bounded time, seeded from test/fixtures. Fails on any crash, leak, timeout or out-of-memory.
#   bash fuzz/run.sh                 # every target, 60 s each
#   FUZZ_SECONDS=600 bash fuzz/run.sh admission_fuzz
# Findings are left in build-fuzz/findings/<target>/; turn each into a regression test.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SECONDS_EACH=${FUZZ_SECONDS:-60}
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

seed() {  # seed <target> <corpus dir>
  local dir=$2 t
  mkdir -p "$dir"
  case $1 in
    admission_fuzz)
      for f in test/fixtures/admission/*.json; do
        case $f in *.config.json) ;; *) cp "$f" "$dir/" ;; esac
      done
      cp fuzz/corpus/admission/*.json "$dir/" ;;
    topology_fuzz)
      for t in tpu-v6e-slice:4x4 tpu7x:2x2x2 tpu-v4-podslice:2x2x4 tpu-v5p-slice:2x2x2 \
               tpu-v5-lite-podslice:2x4 tpu-v5-lite-device:1x1 unknown:4x; do
        printf '%s\n%s\n\004' "${t%%:*}" "${t#*:}" >"$dir/${t//[:\/]/_}"
      done ;;
    documents_fuzz)
      cp test/fixtures/rayclusters/*/*.yaml test/fixtures/pods/*.json test/fixtures/regressions/* "$dir/"
      cp test/fixtures/admission/legacy-gap.json "$dir/" ;;
    watch_fuzz)
      cp fuzz/corpus/watch/* "$dir/" ;;
    http1_fuzz)  # the first byte says where the rest is split
      printf 'xPOST /mutate HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabcGET / HTTP/1.1\r\nHost: b\r\n\r\n' >"$dir/pipelined"
      printf '\005POST /m HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5;x\r\nhello\r\n0\r\nT: v\r\n\r\n' >"$dir/chunked" ;;
  esac
}

status=0
for t in "${targets[@]}"; do
  corpus=$BUILD/corpus/$t
  findings=$BUILD/findings/$t
  rm -rf "$findings"; mkdir -p "$findings"
  seed "$t" "$corpus"
  echo "== $t: ${SECONDS_EACH}s"
  "$BUILD/fuzz/$t" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
    -dict=fuzz/webhook.dict -artifact_prefix="$findings/" -print_final_stats=1 "$corpus" \
    >"$BUILD/$t.log" 2>&1
  code=$?
  grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|cov: " "$BUILD/$t.log" | tail -3
  if [ $code -ne 0 ] || ls "$findings"/* >/dev/null 2>&1; then
    echo "FAIL: $t (exit $code); findings in $findings, log $BUILD/$t.log"
    grep -m3 -E "ERROR|SUMMARY" "$BUILD/$t.log"
    status=1
  fi
done
exit $status
