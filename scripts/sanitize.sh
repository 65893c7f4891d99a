#!/usr/bin/env bash
# Builds the project with sanitizers and runs the whole test suite under them.
#   bash scripts/sanitize.sh address   # ASan + UBSan (+ LeakSanitizer), build-asan/
#   bash scripts/sanitize.sh thread    # TSan, build-tsan/
# Any sanitizer report fails the test that triggered it. The tests labelled `release` (deploy
# checks, benchmarks, valgrind, docs: they need the shipped build or no binary) are left out.
# -O1 -g1: line tables are all a sanitizer's stack trace needs, and build in less time than -g.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-address}
case $mode in
  address) dir=build-asan ;;
  thread) dir=build-tsan ;;
  *) echo "usage: scripts/sanitize.sh address|thread" >&2; exit 2 ;;
esac
root=$PWD
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Debug -DWEBHOOK_SANITIZE="$mode" -DCMAKE_CXX_FLAGS_DEBUG="-g1 -O1" >/dev/null
cmake --build "$dir" -j"$(nproc)"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$root/test/sanitizers/lsan.supp"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$root/test/sanitizers/tsan.supp"
ctest --test-dir "$dir" --output-on-failure -j"$(nproc)" -LE release --timeout 900
