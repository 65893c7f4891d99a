#!/usr/bin/env python3
"""kubectl-tpu_slice, the binary, as a user runs it: against the fake kube-apiserver process on
127.0.0.1 seeded with a recorded cluster (test/fixtures/tpu-slice/), through kubectl's plugin
lookup once installed with `cmake --install`, and with the errors a user meets. Expected values
are written by hand from the fixtures.

  python3 tpu_slice_test.py CASE     (WEBHOOK_BUILD_DIR, WEBHOOK_SOURCE_DIR set; see CMakeLists)

The kubeconfig cases use an exec credential plugin that the test writes as a shell script, as
gke-gcloud-auth-plugin is used on GKE, and $KUBECONFIG naming several files.
"""
import json
import os
import shutil
import socket
import subprocess
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
    return run([PLUGIN, *args], timeout=60, env=env or {"PATH": os.environ.get("PATH", "")},
               stdin=subprocess.DEVNULL)


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


# A stand-in for gke-gcloud-auth-plugin: it checks its args and the env the kubeconfig adds,
# keeps KUBERNETES_EXEC_INFO, counts its runs, and prints the token of line N of `tokens` on its
# Nth run, with an expirationTimestamp an hour ahead.
AUTH_PLUGIN = """#!/bin/sh
[ $# -eq 2 ] && [ "$1" = get-token ] && [ "$2" = --cluster=v6e ] || {
  echo "fake-auth-plugin: bad args: $*" >&2; exit 3; }
[ "$PLUGIN_REGION" = us-east5 ] || { echo "fake-auth-plugin: PLUGIN_REGION unset" >&2; exit 4; }
[ -n "$KUBERNETES_EXEC_INFO" ] || { echo "fake-auth-plugin: no KUBERNETES_EXEC_INFO" >&2; exit 5; }
printf '%s' "$KUBERNETES_EXEC_INFO" > "$(dirname "$0")/../info.json"
echo run >> "$(dirname "$0")/../runs"
n=$(wc -l < "$(dirname "$0")/../runs")
token=$(sed -n "${n}p" "$(dirname "$0")/../tokens")
printf '{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential",'
printf '"status":{"token":"%s","expirationTimestamp":"%s"}}' "$token" "$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)"
"""


def exec_kubeconfig(path, port, command, extra=""):
    with open(path, "w") as f:
        f.write("apiVersion: v1\nkind: Config\ncurrent-context: gke\n"
                "clusters:\n- name: gke_proj_us-east5_v6e\n  cluster:\n"
                "    server: http://127.0.0.1:%d\n"
                "    extensions:\n    - name: client.authentication.k8s.io/exec\n"
                "      extension: {project: proj}\n"
                "contexts:\n- name: gke\n  context: {cluster: gke_proj_us-east5_v6e, user: gke}\n"
                "users:\n- name: gke\n  user:\n    exec:\n"
                "      apiVersion: client.authentication.k8s.io/v1beta1\n"
                "      command: %s\n      args: [get-token, --cluster=v6e]\n"
                "      env:\n      - {name: PLUGIN_REGION, value: us-east5}\n"
                "      provideClusterInfo: true\n%s" % (port, command, extra))
    return path


def auth_plugin(work):
    os.makedirs(os.path.join(work, "bin"), exist_ok=True)
    script = os.path.join(work, "bin", "fake-auth-plugin")
    with open(script, "w") as f:
        f.write(AUTH_PLUGIN)
    os.chmod(script, 0o755)
    with open(os.path.join(work, "tokens"), "w") as f:
        f.write("tok-1\ntok-2\ntok-3\n")
    return script


def runs(work):
    try:
        with open(os.path.join(work, "runs")) as f:
            return len(f.readlines())
    except FileNotFoundError:
        return 0


def exec_credentials(work):
    auth_plugin(work)
    env = {"PATH": os.path.join(work, "bin") + os.pathsep + os.environ.get("PATH", "")}
    with seeded(work, "healthy-v6e-4x4") as api:
        api.call("POST", "/fake/tokens", {"tokens": ["tok-1"]})
        kc = exec_kubeconfig(os.path.join(work, "kubeconfig"), api.port, "fake-auth-plugin")
        env["KUBECONFIG"] = kc
        r = plugin("check", "v6e-cluster", "-n", "ml", env=env)
        check(r.returncode == 0, "exec plugin: exit %d\n%s%s" % (r.returncode, r.stdout, r.stderr))
        check(r.stdout == "No findings: 1 slices checked, each consistent.\n", r.stdout)
        # Five lists (RayClusters, Pods, Nodes, Services, EndpointSlices), one plugin run.
        check(runs(work) == 1, "plugin runs: %d" % runs(work))
        with open(os.path.join(work, "info.json")) as f:
            info = json.load(f)
        check(info == {"apiVersion": "client.authentication.k8s.io/v1beta1",
                       "kind": "ExecCredential",
                       "spec": {"interactive": False,
                                "cluster": {"server": "http://127.0.0.1:%d" % api.port,
                                            "config": {"project": "proj"}}}}, info)
        check(api.stats()["tokens_seen"] == ["tok-1"], api.stats()["tokens_seen"])
        # The server now accepts only tok-3: the first request of a new run gets tok-2 from the
        # plugin, a 401, runs the plugin once more (tok-3) and goes on.
        api.call("POST", "/fake/tokens", {"tokens": ["tok-3"]})
        r = plugin("status", "v6e-cluster", "-n", "ml", "-o", "json", env=env)
        check(r.returncode == 0, "after rotation: exit %d %s" % (r.returncode, r.stderr))
        check(json.loads(r.stdout)["slices"][0]["verdict"] == "ready", r.stdout)
        check(runs(work) == 3, "plugin runs after a 401: %d" % runs(work))
        check(sorted(api.stats()["tokens_seen"]) == ["tok-1", "tok-2", "tok-3"],
              api.stats()["tokens_seen"])


def exec_errors(work):
    auth_plugin(work)
    env = {"PATH": os.path.join(work, "bin") + os.pathsep + os.environ.get("PATH", "")}
    kc = exec_kubeconfig(
        os.path.join(work, "missing"), 1, "gke-gcloud-auth-plugin",
        "      installHint: Install gke-gcloud-auth-plugin for use with kubectl by following\n"
        "        https://cloud.google.com/kubernetes-engine/docs/how-to/cluster-access-for-kubectl"
        "#install_plugin\n")
    # PATH holds only the test's plugin, whatever the machine has installed.
    r = plugin("check", "--kubeconfig", kc, env={"PATH": os.path.join(work, "bin")})
    check(r.returncode == 2 and one_line(r.stderr), "missing: exit %d %r" % (r.returncode, r.stderr))
    check(r.stderr == "kubectl-tpu_slice: kubeconfig %s: user \"gke\": exec plugin "
          "\"gke-gcloud-auth-plugin\": is not found on PATH; Install gke-gcloud-auth-plugin for "
          "use with kubectl by following https://cloud.google.com/kubernetes-engine/docs/how-to/"
          "cluster-access-for-kubectl#install_plugin\n" % kc, r.stderr)
    kc = exec_kubeconfig(os.path.join(work, "always"), 1, "fake-auth-plugin",
                         "      interactiveMode: Always\n")
    r = plugin("check", "--kubeconfig", kc, env=env)
    check(r.returncode == 2 and one_line(r.stderr)
          and "standard input is not a terminal" in r.stderr, r.stderr)
    check(runs(work) == 0, "the plugin ran without a terminal")
    for provider, names in (("gcp", ["gke-gcloud-auth-plugin", "1.26"]),
                            ("azure", ["kubelogin convert-kubeconfig"]),
                            ("oidc", ["kubectl oidc-login", "or a token"])):
        kc = os.path.join(work, provider)
        with open(kc, "w") as f:
            f.write("current-context: c\ncontexts:\n- name: c\n  context: {cluster: k, user: u}\n"
                    "clusters:\n- name: k\n  cluster: {server: 'http://127.0.0.1:1'}\n"
                    "users:\n- name: u\n  user:\n    auth-provider: {name: %s, config: {}}\n"
                    % provider)
        r = plugin("check", "--kubeconfig", kc, env=env)
        check(r.returncode == 2 and one_line(r.stderr)
              and ("auth-provider \"%s\" is not supported" % provider) in r.stderr
              and all(n in r.stderr for n in names), "%s: %r" % (provider, r.stderr))


def merged_kubeconfig(work):
    with seeded(work, "healthy-v6e-4x4") as api:
        first_dir = os.path.join(work, "first")
        second_dir = os.path.join(work, "second")
        os.makedirs(first_dir)
        os.makedirs(second_dir)
        with open(os.path.join(first_dir, "token"), "w") as f:
            f.write("t\n")
        # The first file holds the context, cluster and user (a tokenFile relative to it) but no
        # current-context; the second sets current-context and a user of the same name with a
        # token the server refuses, which must lose.
        first = os.path.join(first_dir, "config")
        with open(first, "w") as f:
            f.write("contexts:\n- name: fake\n  context: {cluster: fake, user: me, namespace: ml}\n"
                    "clusters:\n- name: fake\n  cluster: {server: 'http://127.0.0.1:%d'}\n"
                    "users:\n- name: me\n  user: {tokenFile: token}\n" % api.port)
        second = os.path.join(second_dir, "config")
        with open(second, "w") as f:
            f.write("current-context: fake\n"
                    "users:\n- name: me\n  user: {token: refused}\n")
        missing = os.path.join(work, "absent")
        env = {"PATH": os.environ.get("PATH", ""),
               "KUBECONFIG": ":".join([first, missing, "", second])}
        r = plugin("check", "v6e-cluster", env=env)
        check(r.returncode == 0, "merged: exit %d %s" % (r.returncode, r.stderr))
        check(r.stdout == "No findings: 1 slices checked, each consistent.\n", r.stdout)
        check(api.stats()["tokens_seen"] == ["t"], api.stats()["tokens_seen"])
        env["KUBECONFIG"] = missing + ":" + os.path.join(work, "absent-too")
        r = plugin("check", env=env)
        check(r.returncode == 2 and one_line(r.stderr)
              and "none of the files of KUBECONFIG exists" in r.stderr, r.stderr)


CASES = {"healthy_and_broken": healthy_and_broken, "user_errors": user_errors,
         "kubectl_finds_it": kubectl_finds_it, "exec_credentials": exec_credentials,
         "exec_errors": exec_errors, "merged_kubeconfig": merged_kubeconfig}

if __name__ == "__main__":
    sys.exit(run_cases(CASES, sys.argv, "tpu_slice_test.py"))
