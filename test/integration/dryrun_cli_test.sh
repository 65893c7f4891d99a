#!/usr/bin/env bash
# webhook-dryrun as a user runs it: the README's main job, every Pod fixture's patch applied by
# kubectl to the same Pod (it must give exactly the Pod the CLI prints), and the bad-input battery
# as real processes (exit 2, one line on stderr, never a crash or a hang).
# usage: dryrun_cli_test.sh WEBHOOK_DRYRUN PROJECT_DIR
set -uo pipefail
BIN=$1
ROOT=$2
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# 1. The README's main job on the GKE tutorial clusters.
for f in "$ROOT"/examples/gke-tutorial/ray-cluster.*.yaml; do
  out=$(timeout 30 "$BIN" "$f") || fail "$f: exit $?"
  grep -q "admitted" <<<"$out" || fail "$f: no admitted summary"
done

# 2. For every Pod fixture: kubectl applies the CLI's patch and gets the CLI's mutated Pod.
n=0
for f in "$ROOT"/test/fixtures/pods/*.json; do
  patch=$(timeout 30 "$BIN" -o patch "$f" 2>/dev/null) || { fail "$f: -o patch exit $?"; continue; }
  timeout 30 "$BIN" -o json "$f" >"$WORK/want.json" 2>/dev/null || fail "$f: -o json"
  KUBECONFIG=/dev/null timeout 60 kubectl patch --local --type=json -p "$patch" -f "$f" -o json \
    >"$WORK/got.json" 2>"$WORK/kubectl.err" || { fail "$f: kubectl refused: $(cat "$WORK/kubectl.err")"; continue; }
  python3 - "$WORK/got.json" "$WORK/want.json" <<'PY' || fail "$f: kubectl result differs from -o json"
import json, sys
sys.exit(0 if json.load(open(sys.argv[1])) == json.load(open(sys.argv[2])) else 1)
PY
  n=$((n + 1))
done
[ "$n" -ge 4 ] || fail "only $n Pod fixtures checked"

# 3. Bad inputs: exit 2 with exactly one line on stderr, nothing on stdout.
printf '' >"$WORK/empty.yaml"
printf '{"kind": "Pod", "metadata": {' >"$WORK/truncated.json"
printf 'kind: Pod\nmetadata: [a\n' >"$WORK/broken.yaml"
head -c 4096 /dev/urandom >"$WORK/binary.bin"; printf '\0' >>"$WORK/binary.bin"
python3 -c "print('[' * 200000 + ']' * 200000)" >"$WORK/deep.json"
python3 -c "print('a: ' + '[' * 200000)" >"$WORK/deep.yaml"
python3 - >"$WORK/bomb.yaml" <<'PY'
print("a: &a [x, x, x, x, x, x, x, x, x, x]")
for i in range(1, 12):
    prev, cur = chr(ord('a') + i - 1), chr(ord('a') + i)
    print(f"{cur}: &{cur} [" + ", ".join(["*" + prev] * 10) + "]")
PY
printf 'apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n' >"$WORK/deployment.yaml"
printf '42\n' >"$WORK/scalar.yaml"
regressions=()
# Unreadable inputs fuzzing once broke the CLI on (fuzz.replay.documents replays every finding;
# these three must also be refused as unreadable, exit 2).
for f in "$ROOT"/fuzz/regressions/documents/{invalid-utf8-in-tpu-quantity,raycluster-without-name,yaml-cpp-loadall-hang}.yaml; do
  cp "$f" "$WORK/"
  regressions+=("$(basename "$f")")
done
for case in empty.yaml truncated.json broken.yaml binary.bin deep.json deep.yaml bomb.yaml \
            deployment.yaml scalar.yaml does-not-exist.yaml "${regressions[@]}"; do
  timeout 30 "$BIN" "$WORK/$case" >"$WORK/out" 2>"$WORK/err"
  code=$?
  [ "$code" -eq 2 ] || fail "$case: exit $code, want 2"
  [ ! -s "$WORK/out" ] || fail "$case: wrote to stdout"
  [ "$(wc -l <"$WORK/err")" -eq 1 ] || fail "$case: stderr is not one line: $(cat "$WORK/err")"
  grep -q "$case" "$WORK/err" || fail "$case: stderr does not name the file"
done
timeout 30 "$BIN" --no-such-flag >/dev/null 2>&1; [ $? -eq 2 ] || fail "unknown flag: want exit 2"
timeout 30 "$BIN" </dev/null >/dev/null 2>&1; [ $? -eq 2 ] || fail "no arguments: want exit 2"

# 4. stdin and exit 1 for a denial.
timeout 30 "$BIN" -o patch - <"$ROOT/test/fixtures/pods/v6e-2x4-singlehost-worker.json" >/dev/null || fail "stdin"
timeout 30 "$BIN" "$ROOT/test/fixtures/rayclusters/invalid/num-of-hosts-mismatch.yaml" >/dev/null
[ $? -eq 1 ] || fail "a denied RayCluster must exit 1"

if [ "$fails" -gt 0 ]; then
  echo "$fails failure(s)"
  exit 1
fi
echo "ok: $n Pod fixtures through kubectl, bad-input battery passed"
