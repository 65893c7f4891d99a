#!/usr/bin/env bash
# valgrind memcheck on webhook-dryrun over every fixture: no memory error, no leak.
# usage: valgrind_cli_test.sh WEBHOOK_DRYRUN PROJECT_DIR
set -uo pipefail
BIN=$1
ROOT=$2
if ! command -v valgrind >/dev/null; then
  echo "valgrind not found: run scripts/setup.sh"
  exit 1
fi
fails=0
run() {  # run <args...>: memcheck must report nothing; the CLI's exit status is left in $status
  valgrind --tool=memcheck --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect \
    --quiet "$BIN" "$@" >/dev/null 2>"$WORK/vg.err"
  status=$?
  if [ $status -eq 99 ]; then
    echo "FAIL: memcheck on webhook-dryrun $*"
    head -40 "$WORK/vg.err"
    fails=$((fails + 1))
  fi
}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
# The Pod and ray.io fixtures in one process (valgrind's start costs about a second; a denied
# file does not stop the CLI, which answers every file it is given); the fuzz regressions, some
# of which are refused as bad input (exit 2, which ends the run), one process each.
fixtures=("$ROOT"/test/fixtures/pods/*.json "$ROOT"/test/fixtures/rayclusters/*/*.yaml
          "$ROOT"/test/fixtures/rayjobs/*/*.yaml "$ROOT"/test/fixtures/rayservices/*/*.yaml)
[ "${#fixtures[@]}" -ge 30 ] || { echo "FAIL: only ${#fixtures[@]} fixtures found"; exit 1; }
run -o json "${fixtures[@]}"; n=${#fixtures[@]}
if [ "$status" -gt 1 ]; then  # 0 admitted, 1 a denial; anything else stopped before the last file
  echo "FAIL: webhook-dryrun exited $status on the fixtures, so not every one was checked"
  fails=$((fails + 1))
fi
for f in "$ROOT"/fuzz/regressions/documents/*; do
  run -o json "$f"; n=$((n + 1))
done
# AdmissionReviews in batches (one process per file is slow under valgrind).
reviews=()
for f in "$ROOT"/test/fixtures/admission/*.json; do
  case $f in *.config.json) ;; *) reviews+=("$f") ;; esac
done
run "${reviews[@]}"; n=$((n + ${#reviews[@]}))
run --explain --kuberay-indexing=off --existing "$ROOT/test/fixtures/admission/legacy-gap.cluster.yaml" \
  -o yaml "$ROOT/test/fixtures/gke-tutorial/ray-cluster.tpu-v6e-multihost.yaml"
run -o patch "$ROOT/test/fixtures/pods/v6e-16-multihost-worker-no-indexing.json"
[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "ok: memcheck clean over $n fixtures"
