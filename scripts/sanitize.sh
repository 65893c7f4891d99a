#!/usr/bin/env bash
# Builds the project with a sanitizer and runs tests under it.
#   bash scripts/sanitize.sh address   # ASan + UBSan (+ LeakSanitizer), build-asan/: every test
#                                      # but those labelled `release` (deploy checks, benchmarks,
#                                      # valgrind, docs: they need the shipped build or no binary)
#   bash scripts/sanitize.sh thread    # TSan, build-tsan/: the tests labelled `threads` (lib/
#                                      # server's and lib/kube's, the server's load, signal,
#                                      # eviction, rotation and replica cases), with only what
#                                      # they run built (target thread-checks)
# Any sanitizer report fails the test that triggered it.
# -O1 -g1: line tables are all a sanitizer's stack trace needs, and build in less time than -g.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-address}
case $mode in
  address) dir=build-asan targets=(all) selection=(-LE release) ;;
  thread) dir=build-tsan targets=(thread-checks) selection=(-L threads) ;;
  *) echo "usage: scripts/sanitize.sh address|thread" >&2; exit 2 ;;
esac
root=$PWD
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Debug -DWEBHOOK_SANITIZE="$mode" -DCMAKE_CXX_FLAGS_DEBUG="-g1 -O1" >/dev/null
cmake --build "$dir" -j"$(nproc)" --target "${targets[@]}"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$root/test/sanitizers/lsan.supp"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$root/test/sanitizers/tsan.supp"
ctest --test-dir "$dir" --output-on-failure -j"$(nproc)" "${selection[@]}" --timeout 900
