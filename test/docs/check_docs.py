#!/usr/bin/env python3
"""docs.consistency: the docs and the code that cites them agree.

  check_docs.py --root REPO
      1. rooms:     every lib/<room>/ directory is named (as `lib/<room>`) in docs/architecture.md.
      2. rule ids:  every rule id cited in lib/ cmd/ test/ bench/ fuzz/ exists: M<n>[.<m>] and V<n>
                    as a heading of docs/spec.md, E<n> as a worked example of docs/topology.md,
                    Terms/<term> and Terms "<term>" as a term of docs/spec.md, and
                    `topology.md §<n>[.<m>]` as a section of docs/topology.md.
      3. citations: no file in lib/ cmd/ docs/ or README.md cites "issue N", "SPEC " or
                    tpu-topology.md (the repository's documents are the only references).
      Exit 1 with one line per finding (file:line) when any check fails.

  check_docs.py --self-test
      Runs the checks on small made-up trees and fails unless each one catches what it checks
      (and a consistent tree passes).
"""
import argparse
import os
import re
import sys
import tempfile

CODE_DIRS = ("lib", "cmd", "test", "bench", "fuzz")
# libFuzzer inputs are not prose; this checker's own made-up trees cite made-up ids on purpose.
SKIP_DIRS = {os.path.join("fuzz", "corpus"), os.path.join("test", "docs")}
CITATION_DIRS = ("lib", "cmd", "docs")
TEXT_EXT = (".h", ".cpp", ".py", ".sh", ".txt", ".cmake", ".json", ".yaml", ".yml", ".md", ".dict")

# A rule id stands alone: not inside a word, a path or a version ("v1.6", "0xE1", "2E9").
RULE_ID = re.compile(r"(?<![\w./])([MV][0-9]+(?:\.[0-9]+)*|E[0-9]+)(?![\w])")
TERM_SLASH = re.compile(r"\bTerms/([^:\"\n]+):")
TERM_QUOTED = re.compile(r"\bTerms \"([^\"]+)\"")
TOPOLOGY_SECTION = re.compile(r"topology\.md §([0-9]+(?:\.[0-9]+)?)")
BANNED = [
    ("issue N", re.compile(r"\bissue\s+#?[0-9]+", re.IGNORECASE)),
    ("SPEC ", re.compile(r"SPEC ")),
    ("tpu-topology.md", re.compile(r"tpu-topology\.md")),
]


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def files_under(root, top):
    base = os.path.join(root, top)
    if os.path.isfile(base):
        yield top
        return
    for dirpath, dirnames, filenames in os.walk(base):
        rel_dir = os.path.relpath(dirpath, root)
        # npm's installs (test/deploy/schema/node_modules) are not the project's text either.
        dirnames[:] = sorted(d for d in dirnames
                             if os.path.join(rel_dir, d) not in SKIP_DIRS and d != "node_modules")
        for name in sorted(filenames):
            if name.endswith(TEXT_EXT):
                yield os.path.join(rel_dir, name)


def lines_of(root, rel):
    for number, line in enumerate(read(os.path.join(root, rel)).splitlines(), 1):
        yield number, line


def spec_ids(spec):
    """Rule ids (M3.3, V2) and term names of docs/spec.md."""
    ids = set(re.findall(r"^#{2,4} ([MV][0-9]+(?:\.[0-9]+)?)\b", spec, re.MULTILINE))
    terms_section = spec.split("## Terms", 1)[-1].split("\n## ", 1)[0]
    terms = {a.lower() for a in re.findall(r"<a id=\"([^\"]+)\"></a>", terms_section)}
    for title, alias in re.findall(r"^\*\*([^*]+)\*\*(?: \(\*?\"?([^)\"*]+)\"?\*?\))?",
                                   terms_section, re.MULTILINE):
        for name in title.rstrip(".").split(", "):
            terms.add(name.strip().lower())
        if alias:
            terms.add(alias.strip().lower())
    return ids, terms


def topology_ids(topology):
    examples = {e.upper() for e in re.findall(r"<a id=\"(e[0-9]+)\"></a>", topology)}
    sections = set(re.findall(r"^#{2,3} ([0-9]+(?:\.[0-9]+)?)\.? ", topology, re.MULTILINE))
    return examples, sections


def check_rooms(root, findings):
    arch = read(os.path.join(root, "docs", "architecture.md"))
    for room in sorted(os.listdir(os.path.join(root, "lib"))):
        if not os.path.isdir(os.path.join(root, "lib", room)):
            continue
        if not re.search(r"\blib/" + re.escape(room) + r"(?![\w-])", arch):
            findings.append(("rooms", f"lib/{room}/ is not named in docs/architecture.md"))


def check_rule_ids(root, findings):
    ids, terms = spec_ids(read(os.path.join(root, "docs", "spec.md")))
    examples, sections = topology_ids(read(os.path.join(root, "docs", "topology.md")))
    for top in CODE_DIRS:
        if not os.path.exists(os.path.join(root, top)):
            continue
        for rel in files_under(root, top):
            for number, line in lines_of(root, rel):
                where = f"{rel}:{number}"
                for m in RULE_ID.finditer(line):
                    rule = m.group(1)
                    # A whole string literal that is only the id is test data, not a citation.
                    if line[m.start() - 1:m.start()] == '"' and line[m.end():m.end() + 1] == '"':
                        continue
                    known = examples if rule.startswith("E") else ids
                    where_doc = "docs/topology.md" if rule.startswith("E") else "docs/spec.md"
                    if rule not in known:
                        findings.append(("rule ids", f"{where}: {rule} is not in {where_doc}"))
                for m in list(TERM_SLASH.finditer(line)) + list(TERM_QUOTED.finditer(line)):
                    term = m.group(1).strip().lower()
                    if term not in terms and term.replace(" ", "-") not in terms:
                        findings.append(("rule ids", f"{where}: Terms {m.group(1)!r} is not a term "
                                                     "of docs/spec.md"))
                for m in TOPOLOGY_SECTION.finditer(line):
                    if m.group(1) not in sections:
                        findings.append(("rule ids", f"{where}: docs/topology.md §{m.group(1)} "
                                                     "does not exist"))


def check_citations(root, findings):
    tops = CITATION_DIRS + ("README.md",)
    for top in tops:
        if not os.path.exists(os.path.join(root, top)):
            continue
        for rel in files_under(root, top):
            for number, line in lines_of(root, rel):
                for what, pattern in BANNED:
                    m = pattern.search(line)
                    if m:
                        findings.append(("citations", f"{rel}:{number}: cites {what!r}: "
                                                      f"{line.strip()[:80]}"))


def run_checks(root):
    findings = []
    check_rooms(root, findings)
    check_rule_ids(root, findings)
    check_citations(root, findings)
    return findings


# ---- --self-test: each check must catch what it checks --------------------------------------

SPEC = """# Spec
## Terms
<a id="present"></a>
**Env var present** ("present"). Words.

<a id="slice"></a>
**Slice.** Words.

## Mutation
<a id="m3"></a>
### M3 Placement
#### M3.3 Legacy placement
### V2 Host count
"""
TOPOLOGY = """# Topology
## 2. Formulas
### 2.7 Addresses
| <a id="e1"></a>E1 | row |
"""
CLEAN = {
    "docs/spec.md": SPEC,
    "docs/topology.md": TOPOLOGY,
    "docs/architecture.md": "| `lib/base/` | x |\n| `lib/kube/` | y |\n",
    "README.md": "See docs/spec.md.\n",
    "lib/base/a.cpp": "// M3.3 and V2, E1 (docs/topology.md §2.7); Terms \"Slice\"\n",
    "lib/kube/b.cpp": "// docs/spec.md M3\n",
    "test/unit/a_test.cpp": "TEST_CASE(\"Terms/present: x\") { check(\"V1.6\"); }  // M3.3\n",
}
BREAKAGES = [
    ("a room missing from architecture.md", "rooms", "lib/server/c.cpp", "// M3\n"),
    ("an M id not in spec.md", "rule ids", "lib/base/d.cpp", "// docs/spec.md M3.9\n"),
    ("a V id not in spec.md", "rule ids", "test/unit/b_test.cpp", "TEST_CASE(\"V7: x\")\n"),
    ("an E id not in topology.md", "rule ids", "test/unit/c_test.cpp", "// as in E9\n"),
    ("a term not in spec.md", "rule ids", "test/unit/d_test.cpp", "TEST_CASE(\"Terms/pod: x\")\n"),
    ("a topology section that does not exist", "rule ids", "lib/base/e.h",
     "// docs/topology.md §2.8\n"),
    ("an issue number", "citations", "lib/kube/f.cpp", "// fixes issue 12\n"),
    ("SPEC in capitals", "citations", "docs/x.md", "As SPEC 4 says.\n"),
    ("tpu-topology.md", "citations", "README.md", "See tpu-topology.md.\n"),
]


def write_tree(root, files):
    for rel, text in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)


def self_test():
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        clean = os.path.join(tmp, "clean")
        write_tree(clean, CLEAN)
        found = run_checks(clean)
        if found:
            print("FAIL: the consistent tree has findings:", *found, sep="\n  ")
            failures += 1
        for i, (what, check, rel, text) in enumerate(BREAKAGES):
            work = os.path.join(tmp, f"case{i}")
            files = dict(CLEAN)
            files[rel] = files.get(rel, "") + text
            write_tree(work, files)
            got = {c for c, _ in run_checks(work)}
            if got != {check}:
                print(f"FAIL: {what}: expected a '{check}' finding only, got {sorted(got) or 'none'}")
                failures += 1
            else:
                print(f"ok: {what} -> {check}")
    print(f"{failures} self-test failure(s)" if failures else f"{len(BREAKAGES)} breakages caught")
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root")
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    if not args.root:
        ap.error("--root is required")
    findings = run_checks(args.root)
    for check, message in findings:
        print(f"FAIL [{check}] {message}")
    for check in ("rooms", "rule ids", "citations"):
        n = sum(1 for c, _ in findings if c == check)
        print(f"{check}: {'ok' if n == 0 else f'{n} finding(s)'}")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
