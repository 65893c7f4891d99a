#!/usr/bin/env python3
"""kubectl-tpu_slice, the binary, as a user runs it: against the fake kube-apiserver process on
127.0.0.1 seeded with a recorded cluster (test/fixtures/tpu-slice/), through kubectl's plugin
lookup once installed with `cmake --install`, and with the errors a user meets. Expected values
are written by hand from the fixtures.

  python3 tpu_slice_test.py CASE     (WEBHOOK_BUILD_DIR, WEBHOOK_SOURCE_DIR set; see CMakeLists)
"""
import json
import os
import shutil
import socket
import sys

import yaml

from harness import BUILD, FIXTURES, FakeKubeApi, check, run, run_cases

PLUGIN = os.path.join(BUILD, "cmd/kubectl-tpu-slice/kubectl-tpu_slice")
RESOURCES = {"Pod": "pods", "Node": "nodes", "Service": "services", "RayCluster": "rayclusters",
             "EndpointSlice": "endpointslices"}


def seeded(work, fixture):
    api = FakeKubeApi(work, tokens=["t"], max_seconds=120)
    with open(os.path.join(FIXTURES, "tpu-slice", fixture + ".cluster.yaml")) as f:
        for obj in yaml.safe_load(f)["items"]:
            api.create(RESOURCES[obj["kind"]], obj)
    return api


def plugin(*args, env=None):
    return run([PLUGIN, *args], timeout=60, env=env or {"PATH": os.environ.get("PATH", "")})


def one_line(text):
    return text.endswith("\n") and text.count("\n") == 1


def healthy_and_broken(work):
    with seeded(work, "healthy-v6e-4x4") as api:
        kc = api.kubeconfig(os.path.join(work, "kubeconfig"), token="t")
        r = plugin("check", "v6e-cluster", "-n", "ml", "--kubeconfig", kc)
        check(r.returncode == 0, "healthy check: exit %d\n%s%s" % (r.returncode, r.stdout, r.stderr))
        check(r.stdout == "No findings: 1 slices checked, each consistent.\n", r.stdout)
        r = plugin("status", "v6e-cluster", "-n", "ml", "-o", "yaml",
                   env={"KUBECONFIG": kc, "PATH": os.environ.get("PATH", "")})
        check(r.returncode == 0, "status via $KUBECONFIG: exit %d %s" % (r.returncode, r.stderr))
        status = yaml.safe_load(r.stdout)
        check(status["slices"][0]["verdict"] == "ready", r.stdout)
        check([p["workerId"] for p in status["slices"][0]["pods"]] == ["0", "1", "2", "3"],
              r.stdout)
        api.call("POST", "/fake/forbid", {"resource": "nodes"})
        r = plugin("check", "v6e-cluster", "-n", "ml", "-o", "json", "--kubeconfig", kc)
        check(r.returncode == 0, "with Nodes forbidden: exit %d %s" % (r.returncode, r.stderr))
        unchecked = json.loads(r.stdout)["unchecked"]
        check(len(unchecked) == 1 and "nodes is forbidden" in unchecked[0], r.stdout)
    with seeded(work, "duplicate-worker-id") as api:
        kc = api.kubeconfig(os.path.join(work, "kubeconfig"), token="t")
        r = plugin("check", "v6e-cluster", "-n", "ml", "--kubeconfig", kc)
        check(r.returncode == 1, "broken check: exit %d %s" % (r.returncode, r.stderr))
        check(r.stdout.startswith("[duplicate-worker-id] slice ml/v6e-cluster group v6e-16 "
                                  "replica 0: TPU_WORKER_ID 1 is on 2 Pods"), r.stdout)
        check("[missing-worker-id]" in r.stdout and "[env-differs]" in r.stdout, r.stdout)


def user_errors(work):
    bad = os.path.join(work, "bad")
    with open(bad, "w") as f:
        f.write("current-context: [unclosed")
    r = plugin("check", "--kubeconfig", bad)
    check(r.returncode == 2 and one_line(r.stderr) and "not valid YAML" in r.stderr, r.stderr)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    dead = os.path.join(work, "dead")
    with open(dead, "w") as f:
        f.write("current-context: c\ncontexts:\n- name: c\n  context: {cluster: k}\n"
                "clusters:\n- name: k\n  cluster: {server: 'http://127.0.0.1:%d'}\n" % port)
    r = plugin("status", "--kubeconfig", dead, "--request-timeout", "5s")
    check(r.returncode == 2 and one_line(r.stderr) and "127.0.0.1:%d" % port in r.stderr,
          "unreachable: exit %d %r" % (r.returncode, r.stderr))
    r = plugin("frobnicate")
    check(r.returncode == 2 and one_line(r.stderr), r.stderr)


def kubectl_finds_it(work):
    prefix = os.path.join(work, "prefix")
    r = run(["cmake", "--install", BUILD, "--prefix", prefix, "--component", "Unspecified"],
            timeout=120)
    check(r.returncode == 0, "cmake --install: %s" % r.stderr)
    installed = sorted(os.listdir(os.path.join(prefix, "bin")))
    check("kubectl-tpu_slice" in installed and "webhook-dryrun" in installed
          and "kuberay-tpu-webhook" in installed, "installed: %s" % installed)
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        print("kubectl not on PATH: the plugin lookup is not exercised")
        return
    env = {"PATH": os.path.join(prefix, "bin") + os.pathsep + os.environ.get("PATH", ""),
           "HOME": work}
    r = run([kubectl, "tpu-slice", "--help"], timeout=60, env=env)
    check(r.returncode == 0 and "kubectl tpu-slice check my-cluster -n ray" in r.stdout,
          "kubectl tpu-slice --help: exit %d %s" % (r.returncode, r.stderr))


CASES = {"healthy_and_broken": healthy_and_broken, "user_errors": user_errors,
         "kubectl_finds_it": kubectl_finds_it}

if __name__ == "__main__":
    sys.exit(run_cases(CASES, sys.argv, "tpu_slice_test.py"))
