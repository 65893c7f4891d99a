#!/usr/bin/env python3
"""deploy.dockerfile and deploy.image_libraries: what can be tested of the container image
without a container engine.

  check_dockerfile.py --root REPO
      The Dockerfile's shape: a Debian 12 build stage that uses scripts/setup.sh with
      SETUP_MINIMAL=1 and builds Release without tests; a runtime stage with no shell (FROM
      scratch, or distroless/cc) and therefore no RUN step, that gets every binary from the
      build stage (on scratch: the root tree that scripts/stage-image-root.sh stages there, named
      with every binary), runs as a numeric non-root USER, exposes the binary's default ports
      and starts the server in exec form by an absolute path; a .dockerignore that keeps .git and
      build trees out but not the sources nor the staging script.

  check_dockerfile.py --root REPO --libs --build-dir BUILD
      Runs the Dockerfile's staging script on the binaries built in BUILD
      (cmd/webhook/kuberay-tpu-webhook, cmd/webhook-dryrun/webhook-dryrun,
      cmd/kubectl-tpu-slice/kubectl-tpu_slice) into a temporary
      root, as the build stage does, and checks that tree on its own: its libraries are exactly
      the files `ldd` reports for the binaries (and the loader), regular files equal to the build
      machine's, in directories the loader searches without an ld.so cache; the binaries are
      there, the ENTRYPOINT names one, the USER is in its /etc/passwd and /etc/group; and each
      binary starts (`--version`) through the staged loader with only the staged libraries
      resolved (and, as root, chrooted into the tree). Exit 77 (skipped) when a binary is not
      built yet, after checking the ones that are.
      And what scanners read: every file of the staged root that comes from Debian (each
      library, the loader, /etc/os-release, /etc/debian_version) belongs, by `dpkg -S` run here
      on its path (or the path with its symlinks resolved), to a package that has a record in
      /var/lib/dpkg/status.d/<package> whose Package, Version, Architecture and Source are
      dpkg-query's, and a /usr/share/doc/<package>/copyright equal to the build machine's;
      there is no record of any other package; the SPDX 2.3 SBOM in /usr/share/sbom/ parses
      and names each package with its version and purl, and the project with its version.
"""
import argparse
import filecmp
import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import urllib.parse

SKIP = 77
BINARIES = [os.path.join("cmd", "webhook", "kuberay-tpu-webhook"),
            os.path.join("cmd", "webhook-dryrun", "webhook-dryrun"),
            os.path.join("cmd", "kubectl-tpu-slice", "kubectl-tpu_slice")]
# Bases without a shell or package manager; distroless may carry a tag (:nonroot) or digest.
RUNTIME_BASES = ("scratch", "gcr.io/distroless/cc-debian12")
BUILD_BASES = ("debian:bookworm", "debian:12", "debian:bookworm-slim", "debian:12-slim")
# The build stage's base comes from a build argument whose default is pinned by digest.
PINNED = re.compile(r"^(?P<name>[^@]+)@sha256:[0-9a-f]{64}$")
# What the staging script adds for scanners, besides the binaries, the libraries and /etc.
RECORDS_DIR = "/var/lib/dpkg/status.d/"
DOC_DIR = "/usr/share/doc/"
SBOM = "/usr/share/sbom/kuberay-tpu-webhook.spdx.json"
RELEASE_FILES = ("/etc/os-release", "/etc/debian_version")
STAGE_SCRIPT = "scripts/stage-image-root.sh"
SBOM_SCRIPT = "scripts/image-sbom.sh"  # which the staging script runs
BIN_DIR = "/usr/local/bin"  # where the staging script puts the binaries
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


def global_args(instrs):
    """{name: default} of the ARGs before the first FROM (the ones a FROM may use)."""
    out = {}
    for kw, arg in instrs:
        if kw == "FROM":
            break
        if kw == "ARG":
            name, _, default = arg.partition("=")
            out[name.strip()] = default.strip().strip('"')
    return out


def stages(instrs):
    """The stages: {"base", "name", "instrs"}, and "written" (the FROM's own text) when the
    base comes from a build argument, whose default it is resolved to."""
    out = []
    args = global_args(instrs)
    for kw, arg in instrs:
        if kw == "FROM":
            parts = arg.split()
            name = parts[2] if len(parts) >= 3 and parts[1].lower() == "as" else None
            base = re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?",
                          lambda m: args.get(m.group(1), m.group(0)), parts[0])
            stage = {"base": base, "name": name, "instrs": []}
            if base != parts[0]:
                stage["written"] = parts[0]
            out.append(stage)
        elif out:
            out[-1]["instrs"].append((kw, arg))
    return out


def staging_call(stage):
    """(script, root, binaries) of the RUN in a stage that calls the staging script, or None."""
    for kw, arg in stage["instrs"]:
        if kw != "RUN":
            continue
        for cmd in re.split(r"&&|;|\|\|", arg):
            words = shlex.split(cmd)
            if words and words[0] in ("bash", "sh"):
                words.pop(0)
            if words and words[0].lstrip("./").endswith(STAGE_SCRIPT) and len(words) >= 3:
                return words[0].lstrip("./"), words[1].rstrip("/") or "/", words[2:]
    return None


def base_name(base):
    return re.split(r"[@:]", base, maxsplit=1)[0] if base.startswith("gcr.io/") else base


def runs(stage):
    return " ".join(arg for kw, arg in stage["instrs"] if kw == "RUN")


def check_static(root, fail):
    with open(os.path.join(root, "Dockerfile")) as f:
        st = stages(instructions(f.read()))
    if len(st) < 2:
        fail(f"want a multi-stage build, got {len(st)} stage(s)")
        return None
    build, final = st[0], st[-1]
    pinned = PINNED.match(build["base"])
    if not pinned or pinned.group("name") not in BUILD_BASES:
        fail(f"build stage FROM {build['base']}, want Debian 12 ({' or '.join(BUILD_BASES)}) "
             "pinned by digest (@sha256:<64 hex digits>)")
    if "written" not in build:
        fail(f"build stage FROM {build['base']} names its base itself: take it from a build "
             "argument (ARG BASE_IMAGE=...@sha256:... before FROM ${BASE_IMAGE}), so that a "
             "local or mirrored base can be given with --build-arg")
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

    if base_name(final["base"]) not in RUNTIME_BASES:
        fail(f"runtime stage FROM {final['base']}, want one of {RUNTIME_BASES} "
             "(no shell, no package manager)")
    for kw, arg in final["instrs"]:
        if kw == "RUN":
            fail(f"RUN in the runtime stage ({arg[:60]!r}): it has no shell to run it; do the work "
                 "in the build stage")
    copies = [arg for kw, arg in final["instrs"] if kw == "COPY"]
    from_build = [shlex.split(re.sub(rf"^--from=({build['name']}|0)\s+", "", c))
                  for c in copies if re.match(rf"--from=({build['name']}|0)\s", c or "")]
    call = staging_call(build)
    staged_root = None
    if call:
        script, sroot, sbins = call
        if not os.path.exists(os.path.join(root, script)):
            fail(f"build stage runs {script}, which is not in the repository")
        if [sroot, "/"] in ([c[0].rstrip("/") or "/", c[-1]] for c in from_build if len(c) == 2):
            staged_root = sroot
        elif final["base"] == "scratch":
            fail(f"the runtime stage does not copy the staged root ({sroot}/ to /): a scratch "
                 "image has no loader or libraries of its own")
    elif final["base"] == "scratch":
        fail(f"the build stage does not run {STAGE_SCRIPT}: a scratch image needs the loader "
             "and the libraries it stages")
    for b in BINARIES:
        name = os.path.basename(b)
        explicit = any(any(os.path.basename(src.rstrip("/")) == name for src in c[:-1])
                       for c in from_build)
        staged = staged_root is not None and any(os.path.basename(x) == name for x in call[2])
        if not (explicit or staged):
            fail(f"runtime stage does not copy {name} from the build stage")
    if [c for c in copies if not c.startswith("--from")]:
        fail("runtime stage copies from the build context (sources do not belong in the image)")
    users = [arg for kw, arg in final["instrs"] if kw == "USER"]
    if not users or not re.fullmatch(r"[1-9]\d*(:\d+)?", users[-1]):
        fail(f"runtime USER {users[-1] if users else None!r}: want a numeric non-root uid[:gid] "
             "(runAsNonRoot can only verify numeric ids)")
    exposed = {p.split("/")[0] for kw, arg in final["instrs"] if kw == "EXPOSE"
               for p in arg.split()}
    if not {"9443", "8081"} <= exposed:
        fail(f"EXPOSE {sorted(exposed)}: want the binary's default ports 9443 and 8081")
    entries = [arg for kw, arg in final["instrs"] if kw == "ENTRYPOINT"]
    try:
        entry = json.loads(entries[-1]) if entries else None
    except ValueError:
        entry = None
    if not isinstance(entry, list) or not entry or not str(entry[0]).startswith("/") \
            or os.path.basename(str(entry[0])) != "kuberay-tpu-webhook":
        fail(f"ENTRYPOINT {entries[-1] if entries else None!r}: want the server in exec (JSON) "
             "form by its absolute path (there is no shell to find or start it)")
        entry = None

    ignore_path = os.path.join(root, ".dockerignore")
    if not os.path.exists(ignore_path):
        fail("no .dockerignore: the whole work tree, .git and build trees included, would be sent")
    else:
        with open(ignore_path) as f:
            pats = [p.strip() for p in f if p.strip() and not p.startswith("#")]
        for must in (".git", "build"):
            if not any(fnmatch.fnmatch(must, p) for p in pats):
                fail(f".dockerignore does not exclude {must}")
        for keep in ("CMakeLists.txt", "lib", "cmd", "scripts", "scripts/setup.sh", STAGE_SCRIPT,
                     SBOM_SCRIPT):
            hit = [p for p in pats if not p.startswith("!") and fnmatch.fnmatch(keep, p)]
            if hit:
                fail(f".dockerignore pattern {hit} excludes {keep}, which the build needs")
    return {"staging": call if staged_root else None, "entry": entry,
            "user": users[-1] if users else None}


def ldd_paths(binary):
    """The files `ldd` reports for a binary: (every library and the loader, the loader)."""
    out = subprocess.run(["ldd", binary], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"ldd {binary}: {(out.stderr or out.stdout).strip()}")
    paths, loader = [], None
    for line in out.stdout.splitlines():
        line = line.strip()
        if "not found" in line:
            raise RuntimeError(f"{binary}: {line}")
        m = re.match(r"(\S+)\s+=>\s+(/\S+)", line)
        if m:
            paths.append(m.group(2))
            if m.group(1).startswith("/"):
                loader = m.group(2)
            continue
        m = re.match(r"(/\S+)\s+\(", line)
        if m:
            paths.append(m.group(1))
            loader = m.group(1)
    if loader is None:
        raise RuntimeError(f"ldd {binary} names no loader")
    return paths, loader


def tree_files(rootfs):
    """Every non-directory in a tree, as its path inside the tree."""
    out = {}
    for d, dirs, files in os.walk(rootfs):
        for f in files + [x for x in dirs if os.path.islink(os.path.join(d, x))]:
            full = os.path.join(d, f)
            out["/" + os.path.relpath(full, rootfs)] = full
    return out


def id_in(path, ident, field=2):
    try:
        with open(path) as f:
            return any(line.split(":")[field:field + 1] == [ident] for line in f)
    except OSError:
        return False


def check_tree(rootfs, bins, need, loaders, info, fail, sanitized=False):
    """The staged root, checked without trusting the script that staged it."""
    files = tree_files(rootfs)
    for path, full in sorted(files.items()):
        kind = "symlink" if os.path.islink(full) else f"{os.path.getsize(full):>10} bytes"
        print(f"staged {path:48} {kind}")
    links = sorted(p for p, full in files.items() if os.path.islink(full))
    if links:
        fail(f"the staged root has symlinks {links}: stage the files themselves")
    names = [os.path.basename(b) for b in bins]
    staged_bins = {f"{BIN_DIR}/{n}": b for n, b in zip(names, bins)}
    libs = {p for p in files if p not in staged_bins and not p.startswith("/etc/")
            and not p.startswith((RECORDS_DIR, DOC_DIR)) and p != SBOM}
    lacking, extra = sorted(need - libs), sorted(libs - need)
    if lacking:
        fail(f"the staged root lacks {lacking}, which ldd reports")
    if extra:
        fail(f"the staged root has {extra}, which ldd does not report for the binaries")
    for lib in sorted(need & libs):
        if not os.path.islink(files[lib]) and \
                not filecmp.cmp(files[lib], os.path.realpath(lib), shallow=False):
            fail(f"the staged {lib} differs from the build machine's")
    check_records(rootfs, files, sorted(libs | set(RELEASE_FILES)), fail)
    for path, b in staged_bins.items():
        if path not in files:
            fail(f"the staged root lacks {path}")
        elif not filecmp.cmp(files[path], b, shallow=False):
            fail(f"the staged {path} differs from {b}")
    entry = info["entry"]
    if entry and os.path.basename(entry[0]) in names and entry[0] not in staged_bins:
        fail(f"ENTRYPOINT {entry[0]} is not in the staged root (it has {sorted(staged_bins)})")
    uid, _, gid = (info["user"] or "").partition(":")
    if uid and not id_in(os.path.join(rootfs, "etc/passwd"), uid):
        fail(f"USER {info['user']}: uid {uid} is not in the staged /etc/passwd")
    if gid and not id_in(os.path.join(rootfs, "etc/group"), gid):
        fail(f"USER {info['user']}: gid {gid} is not in the staged /etc/group")

    # No ld.so cache in the image: only the loader's built-in directories are searched.
    libdirs = sorted({os.path.dirname(lib) for lib in libs - loaders})
    for loader in sorted(loaders):
        staged = os.path.join(rootfs, loader.lstrip("/"))
        if not os.access(staged, os.X_OK):
            fail(f"the loader {loader} is not staged")
            return
        out = subprocess.run([staged, "--help"], capture_output=True, text=True).stdout
        search = re.findall(r"^\s*(/\S*) \(system search path\)", out, re.M)
        for d in libdirs:
            if d not in search:
                fail(f"{d} is not in the search path of {loader} ({' '.join(search)}): the "
                     "image has no ld.so cache, so its libraries there would not be found")

    lib_path = ":".join(os.path.join(rootfs, d.lstrip("/")) for d in libdirs)
    for path, b in staged_bins.items():
        name = os.path.basename(path)
        if path not in files:
            continue
        _, loader = ldd_paths(b)
        run = [os.path.join(rootfs, loader.lstrip("/")), "--inhibit-cache",
               "--library-path", lib_path]
        # An empty environment, as in the image: no LD_LIBRARY_PATH or LD_PRELOAD of ours.
        listed = subprocess.run(run + ["--list", files[path]], capture_output=True, text=True,
                                env={})
        resolved = re.findall(r"=>\s+(/\S+)", listed.stdout)
        outside = [r for r in resolved if not r.startswith(rootfs + os.sep)]
        if listed.returncode != 0 or outside:
            fail(f"{name} with the staged loader resolves {outside or listed.stderr.strip()} "
                 "outside the staged root")
            continue
        ver = subprocess.run(run + [files[path], "--version"], capture_output=True, text=True,
                             env={})
        if ver.returncode != 0 or not ver.stdout.startswith(name):
            fail(f"{name} --version from the staged root: exit {ver.returncode}, "
                 f"{(ver.stdout + ver.stderr).strip()[:200]!r}")
            continue
        print(f"{name} starts with the staged loader and libraries: {ver.stdout.strip()}")
        if sanitized:
            print(f"note: {name} not started chrooted (a sanitizer runtime needs /proc)")
        elif os.geteuid() == 0 and shutil.which("chroot"):
            ch = subprocess.run([shutil.which("chroot"), rootfs, path, "--version"],
                                capture_output=True, text=True, env={})
            if "Operation not permitted" in ch.stderr:
                print(f"note: chroot not permitted here; {name} not started chrooted")
            elif ch.returncode != 0 or not ch.stdout.startswith(name):
                fail(f"{name} --version chrooted into the staged root: exit {ch.returncode}, "
                     f"{(ch.stdout + ch.stderr).strip()[:200]!r}")
            else:
                print(f"{name} starts chrooted into the staged root: {ch.stdout.strip()}")


def owner_candidates(path):
    """The path, the path with its directories' symlinks resolved (/lib is /usr/lib on Debian
    12), then with the file's own symlink resolved too (libfoo.so.1 -> libfoo.so.1.2.3)."""
    real_dir = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
    return list(dict.fromkeys([path, real_dir, os.path.realpath(path)]))


def dpkg_owners(paths):
    """{path: the Debian package that owns it, by `dpkg -S` (first of its owner_candidates that
    a package owns), "a,b" when several do, None when none does}. One dpkg run for all: dpkg
    reads its whole file database for each."""
    asked = sorted({c for p in paths for c in owner_candidates(p)})
    out = subprocess.run(["dpkg", "-S"] + asked, capture_output=True, text=True)
    owned = {}
    for line in out.stdout.splitlines():
        if line.startswith("diversion ") or ": " not in line:
            continue
        pkgs, _, path = line.partition(": ")
        owned[path] = ",".join(sorted({o.split(":")[0] for o in pkgs.split(", ")}))
    return {p: next((owned[c] for c in owner_candidates(p) if c in owned), None) for p in paths}


def dpkg_fields(pkgs):
    """{package: {"Version", "Architecture", "Source"}} from dpkg-query, in one run."""
    out = subprocess.run(["dpkg-query", "-W", "-f=${Package}\\t${Version}\\t${Architecture}\\t"
                          "${source:Package}\\n"] + sorted(pkgs), capture_output=True, text=True)
    fields = {}
    for line in out.stdout.splitlines():
        name, version, arch, source = line.split("\t")
        fields[name] = {"Version": version, "Architecture": arch, "Source": source}
    missing = set(pkgs) - set(fields)
    if missing:
        raise RuntimeError(f"dpkg-query -W {sorted(missing)}: {out.stderr.strip()}")
    return fields


def read_record(path):
    """A status.d record's fields (one stanza, `Key: value` lines)."""
    fields = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip() and not line[0].isspace():
                key, _, value = line.rstrip("\n").partition(": ")
                fields[key] = value
    return fields


def purl(name, version, arch):
    """The purl of a Debian 12 package, by the purl specification: name and version
    percent-encoded (letters, digits and . - _ ~ stay)."""
    q = lambda s: urllib.parse.quote(s, safe="")
    return f"pkg:deb/debian/{q(name)}@{q(version)}?arch={arch}&distro=debian-12"


def check_records(rootfs, files, debian_files, fail):
    """What scanners read, checked against dpkg on this machine (see the module's doc)."""
    owners = {}
    owner_of = dpkg_owners(debian_files)
    for path in debian_files:
        pkg = owner_of[path]
        if pkg is None or "," in pkg:
            fail(f"{path}: owned by {pkg or 'no Debian package'} (dpkg -S): a scanner cannot "
                 "name the package it comes from")
            continue
        owners.setdefault(pkg, []).append(path)
    records = {p[len(RECORDS_DIR):] for p in files if p.startswith(RECORDS_DIR)}
    dpkg = dpkg_fields(owners) if owners else {}
    for extra in sorted(records - set(owners)):
        fail(f"{RECORDS_DIR}{extra}: a record of a package no staged file comes from")
    for pkg, paths in sorted(owners.items()):
        rec_path = os.path.join(rootfs, RECORDS_DIR.lstrip("/"), pkg)
        if pkg not in records:
            fail(f"{', '.join(paths)} come(s) from {pkg}, which has no {RECORDS_DIR}{pkg}")
            continue
        rec = read_record(rec_path)
        want = {"Package": pkg, "Version": dpkg[pkg]["Version"],
                "Architecture": dpkg[pkg]["Architecture"]}
        for key, value in want.items():
            if rec.get(key) != value:
                fail(f"{RECORDS_DIR}{pkg}: {key} {rec.get(key)!r}, dpkg-query says {value!r}")
        source = dpkg[pkg]["Source"]
        if (rec.get("Source") or "").split(" (")[0] != source:
            fail(f"{RECORDS_DIR}{pkg}: Source {rec.get('Source')!r}, dpkg-query says {source!r}")
        if "Status" in rec and rec["Status"] != "install ok installed":
            fail(f"{RECORDS_DIR}{pkg}: Status {rec['Status']!r}: scanners skip it")
        doc = f"{DOC_DIR}{pkg}/copyright"
        if doc not in files:
            fail(f"the staged root lacks {doc}")
        elif not filecmp.cmp(files[doc], os.path.realpath(doc), shallow=False):
            fail(f"the staged {doc} differs from the build machine's")
        print(f"package {pkg} {want['Version']} {want['Architecture']}: {', '.join(paths)}")
    for path in RELEASE_FILES:
        if path not in files or not filecmp.cmp(files[path], path, shallow=False):
            fail(f"the staged {path} is missing or differs from the build machine's")
    check_sbom(files, owners, dpkg, fail)


def check_sbom(files, owners, dpkg, fail):
    """The SPDX 2.3 SBOM names each package of the records with its version and purl, and the
    project with the version its binary reports."""
    if SBOM not in files:
        fail(f"the staged root lacks the SBOM {SBOM}")
        return
    try:
        with open(files[SBOM], encoding="utf-8") as f:
            doc = json.load(f)
    except ValueError as e:
        fail(f"{SBOM} is not JSON: {e}")
        return
    for key, value in (("spdxVersion", "SPDX-2.3"), ("dataLicense", "CC0-1.0"),
                       ("SPDXID", "SPDXRef-DOCUMENT")):
        if doc.get(key) != value:
            fail(f"{SBOM}: {key} {doc.get(key)!r}, want {value!r}")
    if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ",
                        str((doc.get("creationInfo") or {}).get("created"))):
        fail(f"{SBOM}: creationInfo.created {doc.get('creationInfo')!r}")
    if not str(doc.get("documentNamespace", "")).startswith("https://"):
        fail(f"{SBOM}: documentNamespace {doc.get('documentNamespace')!r}")
    pkgs = doc.get("packages") or []
    ids = [p.get("SPDXID") for p in pkgs]
    if len(set(ids)) != len(ids):
        fail(f"{SBOM}: SPDXIDs used twice: {ids}")
    by_name = {}
    for p in pkgs:
        by_name.setdefault(p.get("name"), []).append(p)
    for pkg in sorted(owners):
        version, arch = dpkg[pkg]["Version"], dpkg[pkg]["Architecture"]
        got = by_name.get(pkg, [])
        if len(got) != 1:
            fail(f"{SBOM}: {len(got)} packages named {pkg}, want 1")
            continue
        refs = [r.get("referenceLocator") for r in got[0].get("externalRefs") or []
                if r.get("referenceType") == "purl"]
        if got[0].get("versionInfo") != version or refs != [purl(pkg, version, arch)]:
            fail(f"{SBOM}: {pkg}: version {got[0].get('versionInfo')!r}, purl {refs}; want "
                 f"{version!r}, {purl(pkg, version, arch)!r}")
    # The encoding, by hand, where Debian 12's names and versions need it.
    locators = {r.get("referenceLocator") for p in pkgs for r in p.get("externalRefs") or []}
    for pkg, prefix in (("libstdc++6", "pkg:deb/debian/libstdc%2B%2B6@"),
                        ("zlib1g", "pkg:deb/debian/zlib1g@1%3A")):
        if pkg in owners and not any(str(x).startswith(prefix) for x in locators):
            fail(f"{SBOM}: no purl of {pkg} starts with {prefix}")
    others = set(by_name) - set(owners) - {"kuberay-tpu-webhook"}
    if others:
        fail(f"{SBOM}: packages {sorted(others)} that no staged file comes from")
    project = by_name.get("kuberay-tpu-webhook", [])
    server = files.get(f"{BIN_DIR}/kuberay-tpu-webhook")
    if len(project) != 1:
        fail(f"{SBOM}: no package kuberay-tpu-webhook (the project)")
    elif server:
        out = subprocess.run([server, "--version"], capture_output=True, text=True)
        version = out.stdout.split()[-1] if out.stdout.split() else None
        if project[0].get("versionInfo") != version:
            fail(f"{SBOM}: kuberay-tpu-webhook version {project[0].get('versionInfo')!r}, the "
                 f"binary says {version!r}")
    described = [r.get("relatedSpdxElement") for r in doc.get("relationships") or []
                 if r.get("spdxElementId") == "SPDXRef-DOCUMENT"
                 and r.get("relationshipType") == "DESCRIBES"]
    if project and described != [project[0].get("SPDXID")]:
        fail(f"{SBOM}: the document DESCRIBES {described}, want the project")
    for r in doc.get("relationships") or []:
        for end in (r.get("spdxElementId"), r.get("relatedSpdxElement")):
            if end != "SPDXRef-DOCUMENT" and end not in ids:
                fail(f"{SBOM}: a relationship names {end}, which is no package")
    print(f"SBOM: {len(pkgs)} packages checked")


def check_libs(root, build_dir, info, fail):
    built = [b for b in BINARIES if os.path.exists(os.path.join(build_dir, b))]
    missing = [b for b in BINARIES if b not in built]
    if not built:
        return missing
    if not info["staging"]:
        fail(f"the Dockerfile copies no root staged by {STAGE_SCRIPT} into the runtime stage: "
             "nothing to run on the local build")
        return missing
    script = info["staging"][0]
    bins = [os.path.join(build_dir, b) for b in built]
    need, loaders, sanitized = set(), set(), False
    for b in bins:
        paths, loader = ldd_paths(b)
        for lib in paths:
            if SANITIZER_LIB.search(lib):
                print(f"note: {b} links {lib} (a sanitizer build); the image is built without")
                sanitized = True
        need.update(paths)
        loaders.add(loader)
    with tempfile.TemporaryDirectory(prefix="image-root-") as tmp:
        rootfs = os.path.join(tmp, "rootfs")
        p = subprocess.run(["bash", os.path.join(root, script), rootfs] + bins,
                           capture_output=True, text=True)
        if p.returncode != 0:
            fail(f"{script} fails on the local build (exit {p.returncode}): {p.stderr.strip()}")
        if os.path.isdir(rootfs):
            check_tree(rootfs, bins, need, loaders, info, fail, sanitized)
    return missing


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--libs", action="store_true")
    ap.add_argument("--build-dir")
    args = ap.parse_args()
    failures = []
    info = check_static(args.root, failures.append)
    missing = []
    if args.libs and info is not None:
        try:
            missing = check_libs(args.root, args.build_dir, info, failures.append)
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
