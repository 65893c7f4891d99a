#!/usr/bin/env bash
# README command (b), and what CI runs: sets up a fresh Debian 12 machine, builds everything, runs
# every test, then builds again with ASan+UBSan and runs the suite under them.
#   SKIP_SANITIZERS=1 bash scripts/test.sh   # the first pass only
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"$(nproc)"
ctest --test-dir build --output-on-failure -j"$(nproc)"
if [[ "${SKIP_SANITIZERS:-0}" != "1" ]]; then
  bash scripts/sanitize.sh address
fi
