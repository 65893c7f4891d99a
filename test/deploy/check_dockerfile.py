#!/usr/bin/env python3
"""deploy.dockerfile and deploy.image_libraries: what can be tested of the container image
without a container engine.

  check_dockerfile.py --root REPO
      The Dockerfile's shape: a Debian 12 build stage that uses scripts/setup.sh with
      SETUP_MINIMAL=1 and builds Release without tests; a minimal runtime stage
      (debian:bookworm-slim or distroless/cc) that installs no build tool, copies both
      binaries from the build stage, runs as a numeric non-root USER, exposes the binary's
      default ports and starts the server in exec form; a .dockerignore that keeps .git and
      build trees out but not the sources.

  check_dockerfile.py --root REPO --libs --build-dir BUILD
      For each binary built in BUILD (cmd/webhook/kuberay-tpu-webhook,
      cmd/webhook-dryrun/webhook-dryrun): every shared library `ldd` reports is mapped with
      `dpkg -S` to its Debian package, and the runtime stage must install exactly those
      packages (all of them; and, when both binaries are built, no other). Exit 77 (skipped)
      when a binary is not built yet, after checking the ones that are.
"""
import argparse
import fnmatch
import os
import re
import shlex
import subprocess
import sys

SKIP = 77
BINARIES = [os.path.join("cmd", "webhook", "kuberay-tpu-webhook"),
            os.path.join("cmd", "webhook-dryrun", "webhook-dryrun")]
RUNTIME_BASES = ("debian:bookworm-slim", "debian:12-slim", "gcr.io/distroless/cc-debian12")
BUILD_BASES = ("debian:bookworm", "debian:12")
BUILD_TOOL = re.compile(r"(-dev$|^g\+\+|^gcc|^cpp$|^cmake|^make$|^pkg-config$|^git$|^catch2$|"
                        r"^clang|^build-essential$|^binutils|^libclang)")
# A sanitizer build links these; the image is built without sanitizers.
SANITIZER_LIB = re.compile(r"lib(asan|ubsan|tsan|lsan)\.so")


def instructions(text):
    """Dockerfile instructions as (KEYWORD, argument text), continuations joined."""
    out, buf = [], ""
    for line in text.splitlines():
        s = line.strip()
        if not buf and (not s or s.startswith("#")):
            continue
        if buf and s.startswith("#"):
            continue
        if s.endswith("\\"):
            buf += s[:-1] + " "
            continue
        buf += s
        kw, _, arg = buf.partition(" ")
        out.append((kw.upper(), arg.strip()))
        buf = ""
    return out


def stages(instrs):
    out = []
    for kw, arg in instrs:
        if kw == "FROM":
            parts = arg.split()
            name = parts[2] if len(parts) >= 3 and parts[1].lower() == "as" else None
            out.append({"base": parts[0], "name": name, "instrs": []})
        elif out:
            out[-1]["instrs"].append((kw, arg))
    return out


def apt_packages(stage):
    """Packages named by `apt-get install` in a stage's RUN instructions."""
    pkgs, flags = set(), []
    for kw, arg in stage["instrs"]:
        if kw != "RUN":
            continue
        for cmd in re.split(r"&&|;|\|\|", arg):
            words = shlex.split(cmd)
            while words and re.match(r"^[A-Za-z_]\w*=", words[0]):  # VAR=value prefixes
                words.pop(0)
            if len(words) >= 2 and words[0] in ("apt-get", "apt") and words[1] == "install":
                for w in words[2:]:
                    if w.startswith("-"):
                        flags.append(w)
                    else:
                        pkgs.add(w.split("=")[0])
    return pkgs, flags


def runs(stage):
    return " ".join(arg for kw, arg in stage["instrs"] if kw == "RUN")


def check_static(root, fail):
    with open(os.path.join(root, "Dockerfile")) as f:
        st = stages(instructions(f.read()))
    if len(st) < 2:
        fail(f"want a multi-stage build, got {len(st)} stage(s)")
        return None
    build, final = st[0], st[-1]
    if build["base"] not in BUILD_BASES:
        fail(f"build stage FROM {build['base']}, want Debian 12 ({' or '.join(BUILD_BASES)})")
    r = runs(build)
    if not re.search(r"SETUP_MINIMAL=1\s+bash\s+scripts/setup\.sh", r):
        fail("build stage does not run SETUP_MINIMAL=1 bash scripts/setup.sh")
    for need in ("-DCMAKE_BUILD_TYPE=Release", "-DWEBHOOK_BUILD_TESTS=OFF", "cmake --build",
                 "cmake --install"):
        if need not in r:
            fail(f"build stage lacks {need}")
    for kw, arg in build["instrs"]:
        if kw == "COPY" and not arg.startswith("--from"):
            for src in shlex.split(arg)[:-1]:
                if src != "." and not os.path.exists(os.path.join(root, src)):
                    fail(f"build stage copies {src}, which is not in the repository")

    if final["base"] not in RUNTIME_BASES:
        fail(f"runtime stage FROM {final['base']}, want one of {RUNTIME_BASES}")
    pkgs, flags = apt_packages(final)
    tools = sorted(p for p in pkgs if BUILD_TOOL.search(p))
    if tools:
        fail(f"runtime stage installs build tools: {tools}")
    if pkgs and "--no-install-recommends" not in flags:
        fail("runtime apt-get install without --no-install-recommends")
    if pkgs and "rm -rf /var/lib/apt/lists" not in runs(final):
        fail("runtime stage keeps the apt lists")
    copies = [arg for kw, arg in final["instrs"] if kw == "COPY"]
    from_build = [c for c in copies if re.match(rf"--from=({build['name']}|0)\s", c or "")]
    for b in BINARIES:
        if not any(re.search(rf"/{re.escape(os.path.basename(b))}(\s|$)", c) for c in from_build):
            fail(f"runtime stage does not copy {os.path.basename(b)} from the build stage")
    if [c for c in copies if not c.startswith("--from")]:
        fail("runtime stage copies from the build context (sources do not belong in the image)")
    users = [arg for kw, arg in final["instrs"] if kw == "USER"]
    if not users or not re.fullmatch(r"[1-9]\d*(:\d+)?", users[-1]):
        fail(f"runtime USER {users[-1] if users else None!r}: want a numeric non-root uid[:gid] "
             "(runAsNonRoot can only verify numeric ids)")
    exposed = {p.split("/")[0] for kw, arg in final["instrs"] if kw == "EXPOSE" for p in arg.split()}
    if not {"9443", "8081"} <= exposed:
        fail(f"EXPOSE {sorted(exposed)}: want the binary's default ports 9443 and 8081")
    entry = [arg for kw, arg in final["instrs"] if kw == "ENTRYPOINT"]
    if not entry or not entry[-1].startswith("[") or "kuberay-tpu-webhook" not in entry[-1] \
            or "dryrun" in entry[-1]:
        fail(f"ENTRYPOINT {entry[-1] if entry else None!r}: want the server in exec (JSON) form")

    ignore_path = os.path.join(root, ".dockerignore")
    if not os.path.exists(ignore_path):
        fail("no .dockerignore: the whole work tree, .git and build trees included, would be sent")
    else:
        with open(ignore_path) as f:
            pats = [p.strip() for p in f if p.strip() and not p.startswith("#")]
        for must in (".git", "build"):
            if not any(fnmatch.fnmatch(must, p) for p in pats):
                fail(f".dockerignore does not exclude {must}")
        for keep in ("CMakeLists.txt", "lib", "cmd", "scripts", "scripts/setup.sh"):
            hit = [p for p in pats if not p.startswith("!") and fnmatch.fnmatch(keep, p)]
            if hit:
                fail(f".dockerignore pattern {hit} excludes {keep}, which the build needs")
    return pkgs


def ldd_libraries(binary):
    out = subprocess.run(["ldd", binary], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"ldd {binary}: {out.stderr.strip()}")
    libs = []
    for line in out.stdout.splitlines():
        line = line.strip()
        if "not found" in line:
            raise RuntimeError(f"{binary}: {line}")
        m = re.match(r"\S+\s+=>\s+(/\S+)", line) or re.match(r"(/\S+)\s+\(", line)
        if m:
            libs.append(m.group(1))
    return libs


def package_of(path):
    """The Debian package that owns a library path (trying the /usr-merged spellings)."""
    real = os.path.realpath(path)
    candidates = [path, real]
    for p in (path, real):
        candidates.append(p[4:] if p.startswith("/usr/") else "/usr" + p)
    for c in dict.fromkeys(candidates):
        out = subprocess.run(["dpkg", "-S", c], capture_output=True, text=True)
        if out.returncode == 0:
            for line in out.stdout.splitlines():
                if line.startswith("diversion by"):
                    continue
                pkgs, _, _ = line.partition(": ")
                return pkgs.split(",")[0].strip().split(":")[0]
    raise RuntimeError(f"dpkg -S finds no package owning {path}")


def check_libs(root, build_dir, pkgs, fail):
    built = [b for b in BINARIES if os.path.exists(os.path.join(build_dir, b))]
    missing = [b for b in BINARIES if b not in built]
    need = {}
    for b in built:
        for lib in ldd_libraries(os.path.join(build_dir, b)):
            if SANITIZER_LIB.search(lib):
                print(f"note: {b} links {lib} (a sanitizer build); the image is built without")
                continue
            need.setdefault(package_of(lib), set()).add(f"{os.path.basename(b)}: {lib}")
    for p in sorted(need):
        print(f"{p:22} <- {', '.join(sorted(need[p]))}")
    absent = sorted(set(need) - pkgs)
    if absent:
        fail(f"the runtime stage does not install {absent}, which the binaries link")
    if not missing:
        extra = sorted(pkgs - set(need))
        if extra:
            fail(f"the runtime stage installs {extra}, which no binary links")
    return missing


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--libs", action="store_true")
    ap.add_argument("--build-dir")
    args = ap.parse_args()
    failures = []
    pkgs = check_static(args.root, failures.append)
    missing = []
    if args.libs and pkgs is not None:
        try:
            missing = check_libs(args.root, args.build_dir, pkgs, failures.append)
        except RuntimeError as e:
            failures.append(str(e))
    for f in failures:
        print(f"FAIL: {f}")
    what = "image libraries" if args.libs else "Dockerfile"
    if failures:
        print(f"{what}: {len(failures)} problem(s)")
        return 1
    if missing:
        print(f"SKIP: not built yet in {args.build_dir}: {', '.join(missing)} "
              "(the built ones were checked)")
        return SKIP
    print(f"{what}: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
