#!/usr/bin/env python3
"""PodView::label and ::annotation take only the keys the server's fast decode keeps.

The fast decode (lib/admission/pod_review.cpp) builds of a Pod's labels and annotations only
those in podpatch::keys::kPodLabelsRead and kPodAnnotationsRead, so reading any other key would
see nothing in the server and the real value in webhook-dryrun. PodView's key parameter is a
keys::Listed, checked as the program compiles. This test compiles one read of each kind of key:
a listed one must compile, an unlisted one (another known key, or any string) must not, and
the compiler's message must say what to do.

  CXX=g++ python3 test/build/listed_keys.py SOURCE_DIR
"""

import concurrent.futures
import os
import subprocess
import sys

# (accessor, key expression, compiles)
CASES = [
    ("label", "podpatch::keys::kClusterLabel", True),
    ("label", "podpatch::keys::kKueueQueueLabel", True),
    ("label", "podpatch::keys::kNodeTypeLabel", False),
    ("label", '"missing"', False),
    ("label", '"ray.io/group"', True),
    ("label", "podpatch::keys::kSubsliceAnnotation", False),
    ("annotation", "podpatch::keys::kSubsliceAnnotation", True),
    ("annotation", '"example.com/x"', False),
    ("annotation", "podpatch::keys::kClusterLabel", False),
]
ADVICE = "a key the fast decode does not keep: add it to kPodLabelsRead or kPodAnnotationsRead"


def compile_read(source_dir, accessor, key):
    program = ('#include "podpatch/pod_view.h"\n'
               "std::optional<std::string_view> read(const podpatch::PodView& v) {\n"
               f"  return v.{accessor}({key});\n"
               "}\n")
    cxx = os.environ.get("CXX", "c++")
    command = [cxx, "-std=c++20", "-fsyntax-only", "-I", os.path.join(source_dir, "lib"),
               "-x", "c++", "-"]
    return subprocess.run(command, input=program, capture_output=True, text=True, timeout=120,
                          check=False)


def main():
    source_dir = sys.argv[1]
    failures = []
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        runs = [pool.submit(compile_read, source_dir, a, k) for a, k, _ in CASES]
        for (accessor, key, compiles), run in zip(CASES, runs):
            r = run.result()
            what = f"PodView::{accessor}({key})"
            if compiles and r.returncode != 0:
                failures.append(f"{what} does not compile:\n{r.stderr[-2000:]}")
            elif not compiles and r.returncode == 0:
                failures.append(f"{what} compiles, but the fast decode does not keep that key")
            elif not compiles and ADVICE not in r.stderr:
                failures.append(f"{what} fails without saying what to do:\n{r.stderr[-2000:]}")
            else:
                print(f"ok: {what} {'compiles' if compiles else 'is refused'}")
    for f in failures:
        print("FAILED: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
