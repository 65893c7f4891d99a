#!/usr/bin/env bash
# Benchmark: what webhook-dryrun costs as the slice grows. It expands, in turn, the GKE
# tutorial's 4-host v6e RayCluster (examples/gke-tutorial/ray-cluster.tpu-v6e-multihost.yaml, the
# baseline of the same run) and the tutorial's tpu7x RayCluster grown to 16x16x36, 2,304 hosts
# (bench/clusters/tpu7x-16x16x36.yaml), once per output format, and reads each run's wall time,
# CPU time (user+system) and peak RSS from wait4(2) and counts the bytes it printed.
#
# The dry run streams: it holds one Pod at a time, so its peak RSS must not grow with the slice
# (docs/dryrun.md "Large clusters"). The run fails when a dry run exits other than 0, prints
# nothing, or peaks over DRYRUN_RSS_LIMIT_MIB (200) in any format.
#
# Usage: bash bench/dryrun_sizes.sh [BUILD_DIR]   (default: build; webhook-dryrun is built unless
#                                                  BENCH_NO_BUILD is set)
# Env:   OUTPUTS="table json yaml"  DRYRUN_RSS_LIMIT_MIB=200  BENCH_NO_BUILD=1
# About a minute with the defaults on a 2-core machine (the 2,304-host json and yaml runs print
# some 400 MB each, counted and dropped), the build aside.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
OUTPUTS="${OUTPUTS:-table json yaml}"
LIMIT_MIB="${DRYRUN_RSS_LIMIT_MIB:-200}"
die() { echo "bench: $*" >&2; exit 1; }

if [[ -z "${BENCH_NO_BUILD:-}" ]]; then
  [[ -f "$BUILD/CMakeCache.txt" ]] ||
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$BUILD" -j"$(nproc)" --target webhook-dryrun >/dev/null ||
    die "the build failed (cmake --build $BUILD --target webhook-dryrun)"
fi
DRYRUN="$BUILD/cmd/webhook-dryrun/webhook-dryrun"
[[ -x "$DRYRUN" ]] || die "$DRYRUN is not built (cmake --build $BUILD --target webhook-dryrun)"
BUILD_TYPE="$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$BUILD/CMakeCache.txt" 2>/dev/null || true)"

python3 - "$DRYRUN" "$LIMIT_MIB" "${BUILD_TYPE:-?}" "$ROOT" $OUTPUTS <<'PY'
import os, subprocess, sys, time
dryrun, limit_mib, build, root, *outputs = sys.argv[1:]
clusters = [("v6e-4x4", 4, f"{root}/examples/gke-tutorial/ray-cluster.tpu-v6e-multihost.yaml"),
            ("tpu7x-16x16x36", 2304, f"{root}/bench/clusters/tpu7x-16x16x36.yaml")]
with open("/proc/loadavg") as f:
    load = " ".join(f.read().split()[:3])
print(f"webhook-dryrun by slice size, {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}: "
      f"nproc {os.cpu_count()}, load average before {load}; {build} build\n")
hdr = f"{'slice':<16}{'hosts':>6}{'output':>8}{'printed B':>13}{'wall s':>8}{'CPU s':>8}{'peak RSS MiB':>14}"
print(hdr)
print("-" * len(hdr))
errors, rss = [], {}
for name, hosts, path in clusters:
    for out in outputs:
        args = [dryrun, path] + ([] if out == "table" else ["-o", out])
        start = time.monotonic()
        p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        printed = 0
        while chunk := p.stdout.read(1 << 20):
            printed += len(chunk)
        err = p.stderr.read()
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.monotonic() - start
        code = os.waitstatus_to_exitcode(status)
        peak = usage.ru_maxrss / 1024  # KiB on Linux
        rss[(name, out)] = peak
        print(f"{name:<16}{hosts:>6}{out:>8}{printed:>13,}{wall:>8.2f}"
              f"{usage.ru_utime + usage.ru_stime:>8.2f}{peak:>14.1f}")
        if code != 0:
            errors.append(f"{name} -o {out}: exit {code}: "
                          f"{err.decode(errors='replace').strip().splitlines()[-1:]}")
        if printed == 0:
            errors.append(f"{name} -o {out}: printed nothing")
        if peak > float(limit_mib):
            errors.append(f"{name} -o {out}: peak RSS {peak:.1f} MiB, over {limit_mib} MiB")
small, large = clusters[0][0], clusters[-1][0]
print("\npeak RSS, 2,304 hosts / 4 hosts: " +
      ", ".join(f"{o} {rss[(large, o)] / rss[(small, o)]:.2f} x" for o in outputs))
print("errors: " + ("; ".join(errors) if errors else f"none (every run exit 0, under {limit_mib} MiB)"))
sys.exit(1 if errors else 0)
PY
