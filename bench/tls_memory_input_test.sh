#!/usr/bin/env bash
# bench/tls_memory.sh and tls-memory refuse bad settings before they measure anything, each with
# one line on stderr: the script exits 1 (as the other benchmarks), tls-memory 2 on bad arguments
# and 1 when it cannot run (a file it cannot read, too few open files allowed).
#   bash bench/tls_memory_input_test.sh BUILD_DIR
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="$1"
tool="$build/bench/tls-memory"
work="$(mktemp -d "${TMPDIR:-/tmp}/tls-memory-input.XXXXXX")"
trap 'rm -rf "$work"' EXIT
failures=0

# gives CODE EXPECTED COMMAND...: COMMAND exits CODE with one line on stderr that says EXPECTED.
gives() {
  local want="$1" expected="$2" err code
  shift 2
  err="$("$@" 2>&1 >/dev/null)"
  code=$?
  if [[ $code -ne $want || "$(wc -l <<<"$err")" -ne 1 || "$err" != *"$expected"* ]]; then
    echo "FAIL: $* gave exit $code and: $err (want exit $want and one line with: $expected)"
    failures=$((failures + 1))
  fi
}

for n in 0 abc 20001 007 -5; do
  gives 1 "CONNECTIONS=$n: give a whole number from 1 to 20000" \
    env BENCH_NO_BUILD=1 CONNECTIONS="$n" bash "$here/tls_memory.sh" "$build"
done

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
  -keyout "$work/tls.key" -out "$work/tls.crt" -subj "/CN=127.0.0.1" 2>/dev/null
echo "not a certificate" > "$work/bad.crt"
gives 2 "usage: tls-memory CERT KEY [N]" "$tool"
gives 2 "usage: tls-memory CERT KEY [N]" "$tool" "$work/tls.crt" "$work/tls.key" 0
gives 2 "usage: tls-memory CERT KEY [N]" "$tool" "$work/tls.crt" "$work/tls.key" 20001
gives 1 "cannot read $work/none.crt" "$tool" "$work/none.crt" "$work/tls.key"
gives 1 "tls-memory: " "$tool" "$work/bad.crt" "$work/tls.key"
gives 1 "N=1000 needs 1064 open files per process; ulimit -n allows 256" \
  bash -c 'ulimit -n 256 && exec "$@"' _ "$tool" "$work/tls.crt" "$work/tls.key" 1000

[[ $failures -eq 0 ]] && echo "passed: every bad setting refused in one line"
exit $((failures > 0))
