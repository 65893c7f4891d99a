#!/usr/bin/env python3
"""Compiles each source of a unity-built lib/ room on its own, syntax only.

The build compiles each lib/ room as one translation unit (WEBHOOK_UNITY_BUILD), so a file that
uses a header it does not include compiles there as long as an earlier file of its room includes
it, and breaks the day the room is built file by file (the libFuzzer build is) or the earlier
file changes. This check reads the unity units of BUILD_DIR's compile_commands.json and compiles
every source they include by itself, with the unit's own command and -fsyntax-only.

  python3 test/build/compile_each_file.py BUILD_DIR      # exit 0: every file compiles alone
  python3 test/build/compile_each_file.py --self-test    # proves a missing include is caught
"""

import argparse
import concurrent.futures
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

INCLUDE = re.compile(r'^#include\s+"([^"]+\.(?:cpp|cc|cxx))"', re.M)


def syntax_command(command: str, source: str) -> list[str]:
    """The unit's compile command, for `source` alone and without an output."""
    args = shlex.split(command)
    out: list[str] = []
    skip = False
    for a in args:
        if skip:
            skip = False
        elif a == "-o":
            skip = True
        elif a == "-c" or a.endswith((".cxx", ".cpp", ".cc")):
            continue
        else:
            out.append(a)
    return out + ["-fsyntax-only", source]


def units(build_dir: str) -> list[tuple[str, str, str]]:
    """(directory, command, source) for every source a lib/ unity unit includes."""
    with open(os.path.join(build_dir, "compile_commands.json"), encoding="utf-8") as f:
        entries = json.load(f)
    found = []
    for e in entries:
        unit = e["file"]
        if "/Unity/unity_" not in unit:
            continue
        with open(unit, encoding="utf-8") as f:
            sources = INCLUDE.findall(f.read())
        found += [(e["directory"], e["command"], s) for s in sources]
    return found


def compile_alone(job: tuple[str, str, str]) -> tuple[str, str]:
    directory, command, source = job
    r = subprocess.run(syntax_command(command, source), cwd=directory, capture_output=True,
                       text=True, timeout=300, check=False)
    return source, (r.stderr if r.returncode != 0 else "")


def check(jobs: list[tuple[str, str, str]], workers: int) -> list[tuple[str, str]]:
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        return [(s, err) for s, err in pool.map(compile_alone, jobs) if err]


def self_test() -> int:
    """A file that leans on its room-mate's include must fail; with the include it must pass."""
    with tempfile.TemporaryDirectory() as d:
        first = os.path.join(d, "first.cpp")
        second = os.path.join(d, "second.cpp")
        unit = os.path.join(d, "Unity", "unity_0_cxx.cxx")
        os.makedirs(os.path.dirname(unit))
        with open(first, "w", encoding="utf-8") as f:
            f.write("#include <vector>\nstd::vector<int> a;\n")
        with open(second, "w", encoding="utf-8") as f:
            f.write("std::vector<int> b;\n")
        with open(unit, "w", encoding="utf-8") as f:
            f.write(f'#include "{first}"\n#include "{second}"\n')
        cxx = os.environ.get("CXX", "c++")
        with open(os.path.join(d, "compile_commands.json"), "w", encoding="utf-8") as f:
            json.dump([{"directory": d, "file": unit,
                        "command": f"{cxx} -std=c++20 -o unit.o -c {unit}"}], f)
        jobs = units(d)
        if [s for _, _, s in jobs] != [first, second]:
            print(f"self-test: read the unit's sources as {jobs}", file=sys.stderr)
            return 1
        failed = [s for s, _ in check(jobs, 2)]
        if failed != [second]:
            print(f"self-test: expected only second.cpp to fail, got {failed}", file=sys.stderr)
            return 1
        with open(second, "w", encoding="utf-8") as f:
            f.write("#include <vector>\nstd::vector<int> b;\n")
        if check(jobs, 2):
            print("self-test: a file with its include still failed", file=sys.stderr)
            return 1
    print("self-test: a missing include is caught, and only there")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("build_dir", nargs="?")
    p.add_argument("--self-test", action="store_true")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    a = p.parse_args()
    if a.self_test:
        return self_test()
    if not a.build_dir:
        p.error("BUILD_DIR is required")
    jobs = units(a.build_dir)
    if not jobs:
        print("no unity units in compile_commands.json: the build compiles each file already")
        return 0
    failed = check(jobs, a.jobs)
    for source, err in failed:
        print(f"== {source} does not compile alone:\n{err[:2000]}", file=sys.stderr)
    print(f"{len(jobs) - len(failed)} of {len(jobs)} sources of unity units compile alone")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
