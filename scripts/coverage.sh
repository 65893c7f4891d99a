#!/usr/bin/env bash
# Line coverage of the unit and integration suites, to steer tests and fuzzing: builds with gcov
# instrumentation in build-cov/, runs every test but those labelled `release` (deployment, docs,
# benchmarks, valgrind, the agreement cases), and prints with gcovr (Debian's gcovr package;
# scripts/setup.sh installs it):
#   - the summary per room of lib/ and cmd/ (lines and branches covered);
#   - the lines of lib/admission, lib/podpatch and lib/server no test reached, file by file.
#   bash scripts/coverage.sh               # build, test, report
#   COVERAGE_REPORT_ONLY=1 bash scripts/coverage.sh   # report on the last run's data again
# Also writes build-cov/coverage.txt (the full per-file table) and build-cov/coverage.json.
# A failing test (at -O0 with counters, a timing bound may be missed) is named, the report is
# still printed from what ran, and the script exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${COVERAGE_BUILD_DIR:-build-cov}
failed=0
command -v gcovr >/dev/null || { echo "coverage.sh: gcovr not found; run scripts/setup.sh" >&2; exit 2; }
if [[ "${COVERAGE_REPORT_ONLY:-0}" != "1" ]]; then
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-g -O0 --coverage -fprofile-update=atomic" \
    -DCMAKE_EXE_LINKER_FLAGS=--coverage -DWEBHOOK_JEMALLOC=OFF >/dev/null
  cmake --build "$dir" -j"$(nproc)"
  find "$dir" -name '*.gcda' -delete
  ctest --test-dir "$dir" -j"$(nproc)" -LE release --timeout 900 \
    --output-on-failure >"$dir/coverage-ctest.log" 2>&1 || failed=1
  sed -n '/tests passed/p; /The following tests FAILED/,$p' "$dir/coverage-ctest.log"
fi
# Counters updated atomically: the server's threads would otherwise race on them, and gcov
# prints negative branch counts gcovr cannot parse (older data: --gcov-ignore-parse-errors).
common=(--root . --object-directory "$dir" --exclude-unreachable-branches --exclude-throw-branches
        --gcov-ignore-parse-errors)
# gcovr's filters are alternatives: the summary takes lib/ and cmd/, each room listing its own.
gcovr "${common[@]}" --filter 'lib/' --filter 'cmd/' --txt "$dir/coverage.txt" --json-summary "$dir/coverage.json" >/dev/null
echo "== coverage per room (lines)"
python3 - "$dir/coverage.json" <<'PY'
import json, sys, collections
files = json.load(open(sys.argv[1]))["files"]
rooms = collections.OrderedDict()
for f in sorted(files, key=lambda f: f["filename"]):
    parts = f["filename"].split("/")
    room = "/".join(parts[:2])
    r = rooms.setdefault(room, [0, 0, 0, 0])
    r[0] += f["line_covered"]; r[1] += f["line_total"]
    r[2] += f["branch_covered"]; r[3] += f["branch_total"]
print(f"{'room':<16} {'lines':>15} {'branches':>17}")
tot = [0, 0, 0, 0]
pct = lambda a, b: f"{100.0 * a / b:5.1f}%" if b else "    -"
for room, (lc, lt, bc, bt) in rooms.items():
    tot = [tot[0] + lc, tot[1] + lt, tot[2] + bc, tot[3] + bt]
    print(f"{room:<16} {lc:>5}/{lt:<5} {pct(lc, lt)} {bc:>5}/{bt:<5} {pct(bc, bt)}")
print(f"{'total':<16} {tot[0]:>5}/{tot[1]:<5} {pct(tot[0], tot[1])} {tot[2]:>5}/{tot[3]:<5} {pct(tot[2], tot[3])}")
PY
for room in lib/admission lib/podpatch lib/server; do
  echo "== lines no test reached in $room"
  gcovr "${common[@]}" --filter "$room/" --txt - 2>/dev/null |
    awk 'NR > 3 && $1 ~ /\.(cpp|h)$/ && $NF != "" && $4 != "100%" { print }' | sed 's/^/   /'
done
if ((failed)); then
  echo "coverage.sh: tests failed (listed above; their log: $dir/coverage-ctest.log)" >&2
  exit 1
fi
