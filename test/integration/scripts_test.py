#!/usr/bin/env python3
"""The README's scripts as a user meets them: scripts/run.sh and scripts/run-dev.sh (command
(a)) and scripts/setup.sh.

  - --help prints the script's usage comment, and nothing of its code;
  - a busy PORT or HEALTH_PORT is reported before anything else is printed or built: exit 1,
    nothing on stdout, one line on stderr naming the port and another, free one to pick;
  - a PORT that is no port number: exit 2, one line;
  - setup.sh --run (what run.sh installs) lists the build packages and what running needs,
    none of the test toolchain; unknown arguments are refused;
  - run-dev.sh --self-check against the built binaries answers the tutorial's worker Pod.

Usage: scripts_test.py REPO_ROOT BUILD_DIR
"""
import os
import re
import socket
import subprocess
import sys

ROOT, BUILD = sys.argv[1], sys.argv[2]
FAILURES = []
TIMEOUT = 120


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        FAILURES.append(what)
    return ok


def run(script, *args, env=None):
    full = dict(os.environ, BUILD_DIR=BUILD)
    full.update(env or {})
    return subprocess.run(["bash", os.path.join(ROOT, "scripts", script), *args], cwd=ROOT,
                          env=full, capture_output=True, text=True, timeout=TIMEOUT)


def usage_comment(script):
    """The comment block after the shebang, as --help should print it."""
    lines = []
    with open(os.path.join(ROOT, "scripts", script)) as f:
        for line in f.read().splitlines()[1:]:
            if not line.startswith("#"):
                break
            lines.append(re.sub(r"^# ?", "", line))
    return "\n".join(lines) + "\n"


def check_help():
    for script, args in (("run-dev.sh", ["--help"]), ("run.sh", ["--help"]),
                         ("run.sh", ["-h"]), ("setup.sh", ["--help"])):
        p = run(script, *args)
        want = usage_comment("run-dev.sh" if script == "run.sh" else script)
        check(p.returncode == 0 and p.stdout == want and not p.stderr,
              f"{script} {args[0]} prints exactly the usage comment: {p.stdout!r}")
        check(not re.search(r"set -euo|\$\(|=\"\$", p.stdout), f"{script} {args[0]}: no code")
        check("Usage:" in p.stdout, f"{script} {args[0]}: has a Usage line")


def busy_listener():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s, s.getsockname()[1]


def check_busy_port():
    for var in ("PORT", "HEALTH_PORT"):
        s, port = busy_listener()
        try:
            env = {"PORT": "0", "HEALTH_PORT": "0", var: str(port)}
            for script, args in (("run-dev.sh", ["--no-build"]), ("run-dev.sh", [])):
                p = run(script, *args, env=env)
                err = p.stderr.splitlines()
                check(p.returncode == 1, f"{script} {args} {var} busy: exit 1 (got {p.returncode})")
                check(p.stdout == "", f"{script} {var} busy: nothing printed first: {p.stdout!r}")
                ok = len(err) == 1 and f"port {port} " in err[0] and "already in use" in err[0]
                check(ok, f"{script} {var} busy: one line naming port {port}: {p.stderr!r}")
                other = re.search(var + r"=(\d+) bash scripts/run.sh", p.stderr)
                check(other is not None and int(other.group(1)) != port,
                      f"{script} {var} busy: suggests another {var}")
        finally:
            s.close()
    p = run("run-dev.sh", "--no-build", env={"PORT": "9x"})
    check(p.returncode == 2 and p.stdout == "" and len(p.stderr.splitlines()) == 1
          and "PORT=9x is not a port number" in p.stderr, f"PORT=9x refused: {p.stderr!r}")
    # Both 0 (free ports) is the self-check's default; equal fixed ports are refused.
    p = run("run-dev.sh", "--no-build", env={"PORT": "18443", "HEALTH_PORT": "18443"})
    check(p.returncode == 2 and "different ports" in p.stderr, f"equal ports refused: {p.stderr!r}")


def check_setup_profiles():
    build = run("setup.sh", "--build", "--list").stdout.split()
    run_pkgs = run("setup.sh", "--run", "--list").stdout.split()
    test = run("setup.sh", "--list").stdout.split()
    check(bool(build) and set(build) < set(run_pkgs) < set(test),
          "setup.sh: build ⊂ run ⊂ test packages")
    check(set(run_pkgs) - set(build) == {"openssl", "python3", "curl"},
          f"setup.sh --run adds only what run-dev.sh needs: {sorted(set(run_pkgs) - set(build))}")
    for tool in ("prometheus", "wrk", "nginx-light", "valgrind", "clang-14", "yamllint"):
        check(tool not in run_pkgs and tool in test, f"setup.sh: {tool} only in the test path")
    with open(os.path.join(ROOT, "scripts", "run.sh")) as f:
        check("scripts/setup.sh --run" in f.read(), "run.sh installs with setup.sh --run")
    p = run("setup.sh", "--bogus")
    check(p.returncode == 2 and "unknown argument --bogus" in p.stderr and p.stdout == "",
          f"setup.sh --bogus refused: {p.stderr!r}")


def check_self_check():
    p = run("run-dev.sh", "--self-check", "--no-build")
    check(p.returncode == 0 and "run-dev self-check: passed" in p.stdout,
          f"run-dev.sh --self-check passes: {p.stdout[-400:]!r} {p.stderr[-400:]!r}")


def main():
    check_help()
    check_busy_port()
    check_setup_profiles()
    check_self_check()
    if FAILURES:
        print(f"{len(FAILURES)} failure(s)")
        return 1
    print("scripts: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
