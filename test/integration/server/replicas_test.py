"""Several kuberay-tpu-webhook processes against one fake kube-apiserver, on 127.0.0.1: legacy
placement (Pods without KubeRay's index labels) shared through slot claims in Leases.

Each case starts the fake API server (test/integration/fakeapi) and three webhook replicas with
--legacy-indexing=on, sends label-less worker Pods of one group (v6e 4x4: 4 hosts a slice) as
kube-apiserver would — concurrently, spread over the replicas — applies every answer's JSON Patch
with kubectl patch --local, and creates the patched Pods in the fake API server, whose watch the
replicas see. Every wait has a deadline; everything stops by itself.

    replicas_test.py CASE      cases: burst sigkill partition api_faults dry_run_and_cleanup
"""
import concurrent.futures
import copy
import json
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import (FIXTURES, Certs, Client, FakeKubeApi, Failure, Webhook, check,
                     decoded_patch, kubectl_patch, run_cases)

HOSTS = 4  # v6e 4x4 with 4 chips a host
TTL = "4s"
TTL_SECONDS = 4
DEADLINE = 5.0  # the chart's timeoutSeconds: kube-apiserver gives up on the webhook after this


def base_review():
    with open(os.path.join(FIXTURES, "admission", "legacy-empty-cluster.json")) as f:
        return json.load(f)


def review_for(uid, dry_run=False):
    r = base_review()
    r["request"]["uid"] = uid
    r["request"]["dryRun"] = dry_run
    return r


class Cluster:
    """The fake API server and `n` webhook replicas, each with its own token."""

    def __init__(self, work, n=3, ttl=TTL, extra=()):
        self.work = work
        certs = Certs(work)
        self.ca = certs.ca
        crt, key = certs.issue("webhook")
        self.tokens = ["token-%d" % i for i in range(n)]
        self.api = FakeKubeApi(work, tokens=self.tokens, max_seconds=300)
        self.replicas = []
        try:
            for i in range(n):
                kubeconfig = self.api.kubeconfig(os.path.join(work, "kubeconfig-%d" % i),
                                                 token=self.tokens[i])
                wh = Webhook(work, crt, key, "--legacy-indexing=on",
                             "--kube-config-path=" + kubeconfig, "--reservation-ttl=" + ttl,
                             *extra, env={"POD_NAMESPACE": "ray-system",
                                          "POD_NAME": "webhook-%d" % i})
                self.replicas.append(wh)
            for wh in self.replicas:
                wait_ready(wh)
        except Exception:
            self.close()
            raise
        self.local = threading.local()

    def client(self, i):
        clients = getattr(self.local, "clients", None)
        if clients is None:
            clients = self.local.clients = {}
        if i not in clients:
            clients[i] = Client(self.replicas[i].https_port, self.ca, timeout=DEADLINE + 5)
        return clients[i]

    def mutate(self, i, review):
        """The answer of replica i, and how long it took."""
        start = time.monotonic()
        response = self.client(i).review("/mutate", review)
        return response, time.monotonic() - start

    def close(self):
        for wh in self.replicas:
            if wh.proc.poll() is None:
                wh.proc.kill()
                wh.proc.wait(5)
            wh.log_file.close()
        self.api.close()


def wait_ready(wh, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if wh.health("/readyz")[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise Failure("a replica was not ready after the first Pod list:\n" + wh.log_text()[-2000:])


def placed_pod(work, review, response):
    """The Pod kube-apiserver would store: the request's Pod with the answer's patch applied
    by kubectl patch --local."""
    check(response["allowed"], "denied: %s" % response.get("status"))
    return kubectl_patch(work, review["request"]["object"], decoded_patch(response))


def slot_of(pod):
    """(replica, host) from what the webhook wrote: replicaIndex=<group>-<r> and TPU_WORKER_ID."""
    label = pod["metadata"]["labels"]["replicaIndex"]
    replica = int(label.rsplit("-", 1)[1])
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0].get("env", [])}
    return replica, int(env["TPU_WORKER_ID"])


def check_consistent(pods):
    """Every slot once, and the Pods of each replica agree on TPU_WORKER_HOSTNAMES."""
    slots = [slot_of(p) for p in pods]
    dupes = sorted({s for s in slots if slots.count(s) > 1})
    check(not dupes, "slots handed out twice: %s" % dupes)
    hostnames = {}
    for p in pods:
        env = {e["name"]: e.get("value") for e in p["spec"]["containers"][0]["env"]}
        r = slot_of(p)[0]
        hostnames.setdefault(r, set()).add(env["TPU_WORKER_HOSTNAMES"])
    for r, names in hostnames.items():
        check(len(names) == 1, "replica %d's Pods disagree on their peers: %s" % (r, names))
    return set(slots)


def denial_is_retryable(response):
    status = response.get("status", {})
    message = status.get("message", "")
    return (not response["allowed"] and status.get("code") == 503 and
            "KubeRay retries" in message), message


def wait_until(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise Failure("timed out waiting for " + what)


def wait_for_watch(cluster, count):
    """Until every replica's metrics show `count` Pods holding slots."""
    def seen():
        for wh in cluster.replicas:
            if wh.proc.poll() is not None:
                continue
            metrics = wh.health("/metrics")[1]
            if "kuberay_tpu_webhook_legacy_pods %d\n" % count not in metrics:
                return False
        return True
    wait_until(seen, 20, "the replicas' watches to show %d Pods" % count)


def send_all(cluster, reviews, targets, workers=16):
    """Sends reviews[k] to replica targets[k], concurrently. Returns [(response, seconds)]."""
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        futures = [pool.submit(cluster.mutate, t, r) for r, t in zip(reviews, targets)]
        return [f.result() for f in futures]


def claim_ids(cluster, holder):
    """The ids of the claims `holder` (a replica's POD_NAME) holds in the claim Leases."""
    ids = set()
    for lease in cluster.api.objects("leases"):
        text = lease["metadata"].get("annotations", {}).get("kuberay-tpu-webhook/claims")
        ids.update(cl["id"] for cl in (json.loads(text) if text else []) if cl["holder"] == holder)
    return ids


def create_all(cluster, reviews, responses):
    """kubectl-patches each answer onto its Pod and creates the Pods in the fake API server."""
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        pods = list(pool.map(lambda rr: placed_pod(cluster.work, rr[0], rr[1]),
                             zip(reviews, responses)))
    return [cluster.api.create("pods", p) for p in pods]


def wait_for_cleanup(cluster, ttl_seconds=TTL_SECONDS):
    # Claims expire after the TTL; the janitor (every max(TTL/2, 1 s)) deletes empty Leases.
    wait_until(lambda: not cluster.api.objects("leases"), ttl_seconds * 3 + 10,
               "the claim Leases to be deleted")


# ---- Cases ----------------------------------------------------------------------------------

def burst(work):
    """64 label-less Pods of one group (16 slices x 4 hosts) admitted concurrently, spread over
    3 replicas: every slot exactly once, every slice's Pods agree on their peers; the claims are
    in one Lease of the webhook's namespace, and it is deleted once they expire. The Lease and
    the API's write counts are read as soon as the answers are in, and the claims live 20 s:
    long enough for that on a slow (sanitizer) build or a loaded machine, though not always for
    the 64 kubectl patches that follow: once the first claims expire, a janitor rewrites the
    Lease, a write that is not a Pod's. The 64 claims are 64 writes of that one Lease, so the
    last of them waits for most of the others: about 1 s under TSan on an idle 2-core machine,
    2 s beside two busy loops, past the default --claim-timeout of 3 s with three TSan tests
    running at once. This test is about each slot once, not that budget (`partition` is), so
    it gets 8 s."""
    c = Cluster(work, ttl="20s", extra=("--claim-timeout=8s",))
    try:
        reviews = [review_for("burst-%d" % k) for k in range(64)]
        answers = send_all(c, reviews, [k % 3 for k in range(64)])
        leases = c.api.objects("leases")
        writes = c.api.stats()["writes"]
        responses = [a for a, _ in answers]
        for a in responses:
            check(a["allowed"], "a Pod was denied: %s" % a.get("status"))
        pods = create_all(c, reviews, responses)
        slots = check_consistent(pods)
        check(slots == {(r, h) for r in range(16) for h in range(HOSTS)},
              "not exactly 16 slices x 4 hosts: %s" % sorted(slots))
        check(len(leases) == 1, "expected one claim Lease, found %d" % len(leases))
        lease = leases[0]
        check(lease["metadata"]["namespace"] == "ray-system", "Lease not in POD_NAMESPACE")
        claims = json.loads(lease["metadata"]["annotations"]["kuberay-tpu-webhook/claims"])
        holders = {cl["holder"] for cl in claims}
        check(holders == {"webhook-0", "webhook-1", "webhook-2"},
              "claims not made by every replica (POD_NAME): %s" % holders)
        check(len(claims) == 64, "expected 64 open claims, found %d" % len(claims))
        check(writes.get("leases", 0) == 64, "expected one Lease write per Pod, got %s" % writes)
        # Every replica sees the 64 Pods: the next Pod opens slice 16, whoever answers it.
        wait_for_watch(c, 64)
        for i in range(3):
            extra = review_for("after-%d" % i, dry_run=True)
            a, _ = c.mutate(i, extra)
            check(slot_of(placed_pod(work, extra, a)) == (16, 0),
                  "replica %d would not open a new slice" % i)
        wait_for_cleanup(c, ttl_seconds=20)
        for i, wh in enumerate(c.replicas):
            metrics = wh.health("/metrics")[1]
            check("kuberay_tpu_webhook_legacy_claims_written_total" in metrics,
                  "replica %d has no claim metrics" % i)
    finally:
        c.close()


def sigkill(work):
    """Replica 2 claims two slots for Pods that are never created, then is SIGKILLed in the
    middle of a burst. The others place every Pod sent to them, no slot twice; Pods whose request
    died with replica 2 are sent again to the others; the dead replica's unconfirmed claims hold
    their slots until the TTL, after which the next Pods fill exactly those holes."""
    # Claims live 10 s: the burst and its retries must end within the TTL even on a loaded
    # machine, or the test could not tell a hole from a reused slot.
    ttl_seconds = 10
    c = Cluster(work, ttl="%ds" % ttl_seconds)
    try:
        # The first orphan's claim is written after this, so it expires after first_claim + TTL.
        first_claim = time.monotonic()
        orphan_answers = []
        for k in range(2):
            r = review_for("orphan-%d" % k)
            orphan_answers.append((r, c.mutate(2, r)[0]))

        reviews = [review_for("kill-%d" % k) for k in range(30)]
        results = [None] * len(reviews)
        killed = threading.Event()

        def one(k):
            target = k % 3
            try:
                results[k] = c.mutate(target, reviews[k])[0]
            except (OSError, Failure) as e:
                check(target == 2 and killed.is_set(), "replica %d failed: %s" % (target, e))
                results[k] = None  # kube-apiserver: the call failed; KubeRay retries later

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            futures = [pool.submit(one, k) for k in range(len(reviews))]
            time.sleep(0.05)
            killed.set()
            c.replicas[2].proc.send_signal(signal.SIGKILL)
            killed_at = time.monotonic()  # every claim of replica 2 is written before this
            for f in futures:
                f.result()
        c.replicas[2].proc.wait(5)
        # The Pods whose request died with replica 2 are retried on the survivors.
        retried = [k for k, a in enumerate(results) if a is None]
        for k in retried:
            results[k] = c.mutate(k % 2, reviews[k])[0]
        # Every placement is made: what follows (kubectl patch, the creations) may take its time.
        check(time.monotonic() - first_claim < ttl_seconds,
              "the burst outlasted the claim TTL; the test cannot tell holes from reuse")
        orphans = [slot_of(placed_pod(work, r, a)) for r, a in orphan_answers]
        check(orphans == [(0, 0), (0, 1)], "replica 2 claimed %s" % orphans)
        for k, a in enumerate(results):
            check(a["allowed"], "Pod %d was denied: %s" % (k, a.get("status")))
        pods = create_all(c, reviews, results)
        slots = check_consistent(pods)
        check(not (slots & set(orphans)),
              "a live claim of the killed replica was handed out again: %s" % (slots & set(orphans)))

        # After the TTL the holes — the orphans' slots and any claims the killed replica wrote
        # for requests that died with it — are filled lowest first.
        wait_for_watch(c, len(pods))
        time.sleep(max(0.0, ttl_seconds + 0.5 - (time.monotonic() - killed_at)))
        top = max(r for r, _ in slots)
        holes = sorted((r, h) for r in range(top + 1) for h in range(HOSTS)
                       if (r, h) not in slots)
        check(set(orphans) <= set(holes), "the orphans' slots are not free: %s" % holes)
        fill = [review_for("fill-%d" % k) for k in range(len(holes))]
        got = []
        for k, r in enumerate(fill):
            got.append(slot_of(placed_pod(work, r, c.mutate(k % 2, r)[0])))
        check(got == holes, "after the TTL the next Pods got %s, expected the holes %s"
              % (got, holes))
    finally:
        c.close()


def partition(work):
    """Replica 2 is cut off from the API server: it denies label-less Pods with a retryable
    answer saying why, and never guesses; labelled Pods are still admitted there; the other
    replicas place normally; once healed, replica 2 places again without duplicates."""
    c = Cluster(work)
    try:
        first = [review_for("p-%d" % k) for k in range(4)]
        before = [c.mutate(k % 3, r)[0] for k, r in enumerate(first)]
        pods = create_all(c, first, before)
        wait_for_watch(c, 4)

        c.api.call("POST", "/fake/partition", {"token": c.tokens[2]})
        # Not a count of all Lease writes: the other replicas' janitors may rewrite meanwhile.
        held = claim_ids(c, "webhook-2")
        for k in range(3):
            a, took = c.mutate(2, review_for("cut-%d" % k))
            ok, message = denial_is_retryable(a)
            check(ok, "a cut-off replica answered %s" % json.dumps(a)[:400])
            check(took < DEADLINE, "the denial took %.1fs, past the admission deadline" % took)
            check("Lease" in message or "watch of Pods" in message,
                  "the denial does not say why: " + message)
        check(claim_ids(c, "webhook-2") <= held, "a cut-off replica recorded a claim")

        labelled = base_review()
        labels = labelled["request"]["object"]["metadata"]["labels"]
        labels["ray.io/worker-group-replica-index"] = "7"
        labels["ray.io/replica-host-index"] = "2"
        labelled["request"]["uid"] = "labelled"
        a, _ = c.mutate(2, labelled)
        check(a["allowed"], "a labelled Pod was denied by the cut-off replica: %s"
              % a.get("status"))

        more = [review_for("q-%d" % k) for k in range(4)]
        answers = [c.mutate(k % 2, r)[0] for k, r in enumerate(more)]
        pods += create_all(c, more, answers)
        c.api.call("POST", "/fake/heal")
        wait_for_watch(c, 8)
        last = [review_for("r-%d" % k) for k in range(4)]
        answers = []
        for r in last:
            deadline = time.monotonic() + 20
            while True:  # as KubeRay retries: the healed replica's watch is reconnecting
                a, _ = c.mutate(2, r)
                if a["allowed"] or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            answers.append(a)
        pods += create_all(c, last, answers)
        slots = check_consistent(pods)
        check(slots == {(r, h) for r in range(3) for h in range(HOSTS)},
              "not exactly 3 full slices: %s" % sorted(slots))
    finally:
        c.close()


def api_faults(work):
    """Injected 409 Conflicts, 500s and a 2 s slow API on writes: every answer comes within the
    admission deadline and is either a correct, unique slot or a clear retryable denial.
    Through the slow API the replicas' claims race: the first write to land is placed and the
    others conflict, and with the 3 s --claim-timeout have no time for a second 2 s write. A
    janitor's write would be one more in that race and could be the one to land, leaving no Pod
    placed, so the claims outlive the test (60 s) and a janitor has nothing to rewrite."""
    c = Cluster(work, ttl="60s")
    try:
        pods = []
        c.api.call("POST", "/fake/fail-writes", {"resource": "leases", "status": 409, "count": 6})
        c.api.call("POST", "/fake/fail-writes", {"resource": "leases", "status": 500, "count": 3})
        reviews = [review_for("f-%d" % k) for k in range(12)]
        answers = send_all(c, reviews, [k % 3 for k in range(12)], workers=6)
        for a, took in answers:
            check(took < DEADLINE, "an answer took %.1fs" % took)
            check(a["allowed"], "a Pod was denied despite retries: %s" % a.get("status"))
        pods += create_all(c, reviews, [a for a, _ in answers])

        c.api.call("POST", "/fake/write-delay", {"ms": 2000})
        slow = [review_for("s-%d" % k) for k in range(6)]
        answers = send_all(c, slow, [k % 3 for k in range(6)], workers=6)
        c.api.call("POST", "/fake/write-delay", {"ms": 0})
        placed_reviews, placed = [], []
        denied = 0
        for r, (a, took) in zip(slow, answers):
            check(took < DEADLINE, "an answer took %.1fs, past the admission deadline" % took)
            if a["allowed"]:
                placed_reviews.append(r)
                placed.append(a)
            else:
                ok, message = denial_is_retryable(a)
                check(ok and "claim-timeout" in message, "unclear denial: %s" % message)
                denied += 1
        check(placed, "no Pod was placed through a 2 s slow API")
        pods += create_all(c, placed_reviews, placed)
        check_consistent(pods)
        print("slow API: %d placed, %d denied as retryable" % (len(placed), denied))
    finally:
        c.close()


def dry_run_and_cleanup(work):
    """Dry-run requests write nothing; real ones write one claim each; the claims expire and
    their Lease is deleted."""
    c = Cluster(work)
    try:
        for i in range(3):
            a, _ = c.mutate(i, review_for("dry-%d" % i, dry_run=True))
            check(a["allowed"], "a dry run was denied: %s" % a.get("status"))
        stats = c.api.stats()
        check(stats["write_attempts"].get("leases", 0) == 0, "a dry run wrote: %s" % stats)
        check(not c.api.objects("leases"), "a dry run created a Lease")
        reviews = [review_for("real-%d" % k) for k in range(3)]
        answers = [c.mutate(k, r)[0] for k, r in enumerate(reviews)]
        pods = create_all(c, reviews, answers)
        check_consistent(pods)
        check(len(c.api.objects("leases")) == 1, "no claim Lease")
        wait_for_cleanup(c)

        def deleted():
            return sum(int(line.split()[1]) for wh in c.replicas
                       for line in wh.health("/metrics")[1].splitlines()
                       if line.startswith(
                           "kuberay_tpu_webhook_legacy_claim_objects_deleted_total "))
        # The janitor counts the deletion once the API server's answer is read: a moment after
        # the Lease is gone.
        wait_until(lambda: deleted() >= 1, 10, "a replica to count the Lease's deletion")
    finally:
        c.close()


CASES = {f.__name__: f for f in (burst, sigkill, partition, api_faults, dry_run_and_cleanup)}


def main():
    return run_cases(CASES, sys.argv, "replicas_test.py")


if __name__ == "__main__":
    sys.exit(main())
