#!/usr/bin/env bash
# Runs kuberay-tpu-webhook locally in dev mode: builds it, makes a throwaway CA and a serving
# certificate for localhost, prints a curl line that sends the GKE tutorial's v6e worker Pod as
# an AdmissionReview, and serves HTTPS on 127.0.0.1 in the foreground (Ctrl-C stops it).
#
# Usage: bash scripts/run-dev.sh [--self-check] [--no-build]
#   --self-check  start the webhook, send the review, check the answer (the tutorial's
#                 TPU_WORKER_ID, TPU_WORKER_HOSTNAMES, ... on worker 3), stop it; exit 0 or 1
#   --no-build    use the binaries already in the build directory
# Env: BUILD_DIR (default build), PORT (default 9443), HEALTH_PORT (default 8081); with
#      --self-check the ports default to free ones.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD_DIR="$(realpath -m "${BUILD_DIR:-$ROOT/build}")"
SELF_CHECK=0
BUILD=1
for arg in "$@"; do
  case "$arg" in
    --self-check) SELF_CHECK=1 ;;
    --no-build) BUILD=0 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "run-dev.sh: unknown argument $arg (see --help)" >&2; exit 2 ;;
  esac
done

# A port already taken is reported before anything is built or printed. Binding it is the test
# (the webhook binds 127.0.0.1 too); port 0 picks a free one, as --self-check does by default.
port_free() {
  python3 -c 'import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)' "$1"
}
free_port_near() {
  local p
  for ((p = $1 + 1; p < $1 + 100 && p <= 65535; p++)); do
    port_free "$p" && { echo "$p"; return; }
  done
  echo 0
}
check_port() {  # NAME VALUE
  [[ "$2" =~ ^[0-9]+$ ]] && (($2 <= 65535)) ||
    { echo "run-dev: $1=$2 is not a port number (0-65535)" >&2; exit 2; }
  if [[ "$2" != 0 ]] && ! port_free "$2"; then
    echo "run-dev: port $2 on 127.0.0.1 is already in use (another webhook, or another" \
      "program: ss -ltnp 'sport = :$2' shows which); pick another with $1=, for example" \
      "$1=$(free_port_near "$2") bash scripts/run.sh" >&2
    exit 1
  fi
}
if [[ "$SELF_CHECK" == 0 ]]; then
  PORT="${PORT:-9443}"
  HEALTH_PORT="${HEALTH_PORT:-8081}"
else
  PORT="${PORT:-0}"
  HEALTH_PORT="${HEALTH_PORT:-0}"
fi
check_port PORT "$PORT"
check_port HEALTH_PORT "$HEALTH_PORT"
if [[ "$PORT" != 0 && "$PORT" == "$HEALTH_PORT" ]]; then
  echo "run-dev: PORT and HEALTH_PORT are both $PORT; give them different ports" >&2
  exit 2
fi

if [[ "$BUILD" == 1 ]]; then
  if [[ ! -f "$BUILD_DIR/CMakeCache.txt" ]]; then
    cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  fi
  echo "run-dev: building kuberay-tpu-webhook (first build takes a few minutes) ..."
  cmake --build "$BUILD_DIR" -j"$(nproc)" --target kuberay-tpu-webhook make-review >/dev/null
fi
WEBHOOK="$BUILD_DIR/cmd/webhook/kuberay-tpu-webhook"
MAKE_REVIEW="$BUILD_DIR/bench/make-review"
for bin in "$WEBHOOK" "$MAKE_REVIEW"; do
  [[ -x "$bin" ]] || { echo "run-dev: $bin is missing; run without --no-build" >&2; exit 1; }
done

DEV="$BUILD_DIR/dev"
rm -rf "$DEV"
mkdir -p "$DEV"

# A CA of its own, and a serving certificate it signs, as cert-manager would issue in a cluster.
openssl req -x509 -newkey rsa:2048 -nodes -days 7 -subj "/CN=kuberay-tpu-webhook dev CA" \
  -keyout "$DEV/ca.key" -out "$DEV/ca.crt" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" \
  -keyout "$DEV/tls.key" -out "$DEV/tls.csr" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' > "$DEV/tls.ext"
openssl x509 -req -in "$DEV/tls.csr" -CA "$DEV/ca.crt" -CAkey "$DEV/ca.key" -CAcreateserial \
  -days 7 -extfile "$DEV/tls.ext" -out "$DEV/tls.crt" 2>/dev/null

# The 4th worker Pod KubeRay creates for the tutorial's RayCluster (host 3 of the v6e-16 slice),
# as kube-apiserver would send it.
TUTORIAL="$ROOT/examples/gke-tutorial/ray-cluster.tpu-v6e-multihost.yaml"
"$MAKE_REVIEW" --worker 3 --uid dev-review-1 "$TUTORIAL" > "$DEV/review.json"

DECODE="python3 -c 'import base64,json,sys; r=json.load(sys.stdin)[\"response\"]; print(json.dumps(dict(r, patch=json.loads(base64.b64decode(r[\"patch\"]))) if \"patch\" in r else r, indent=2))'"

if [[ "$SELF_CHECK" == 0 ]]; then
  cat <<EOF

kuberay-tpu-webhook dev mode: HTTPS on https://localhost:$PORT, health on http://localhost:$HEALTH_PORT
Certificates (fresh each run): $DEV/ca.crt signs $DEV/tls.crt

Send it the GKE tutorial's v6e worker Pod (host 3) as an AdmissionReview, from another terminal:

  curl -s --cacert $DEV/ca.crt -H 'Content-Type: application/json' --data-binary @$DEV/review.json https://localhost:$PORT/mutate

and to read the JSON Patch it answers, append:  | $DECODE

Also: curl -s http://localhost:$HEALTH_PORT/readyz   curl -s http://localhost:$HEALTH_PORT/metrics
Press Ctrl-C to stop.

EOF
  exec "$WEBHOOK" --bind-address="127.0.0.1:$PORT" --health-address="127.0.0.1:$HEALTH_PORT" \
    --tls-cert-file="$DEV/tls.crt" --tls-private-key-file="$DEV/tls.key" \
    --legacy-indexing=off --v=1
fi

# --self-check: the same, unattended.
"$WEBHOOK" --bind-address="127.0.0.1:$PORT" --health-address="127.0.0.1:$HEALTH_PORT" \
  --tls-cert-file="$DEV/tls.crt" --tls-private-key-file="$DEV/tls.key" \
  --legacy-indexing=off --log-format=json 2> "$DEV/webhook.log" &
PID=$!
trap 'kill "$PID" 2>/dev/null || true' EXIT
SERVING=""
for _ in $(seq 100); do
  SERVING="$(grep -m1 '"msg":"serving"' "$DEV/webhook.log" || true)"
  [[ -n "$SERVING" ]] && break
  kill -0 "$PID" 2>/dev/null || break
  sleep 0.1
done
[[ -n "$SERVING" ]] || { echo "run-dev: the webhook did not start:" >&2; cat "$DEV/webhook.log" >&2; exit 1; }
HTTPS="$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["https"])' "$SERVING")"
HEALTH="$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["health"])' "$SERVING")"
HTTPS_PORT="${HTTPS##*:}"
curl -sf "http://$HEALTH/readyz" >/dev/null
curl -sf --cacert "$DEV/ca.crt" -H 'Content-Type: application/json' \
  --data-binary @"$DEV/review.json" "https://localhost:$HTTPS_PORT/mutate" > "$DEV/response.json"
python3 - "$DEV/response.json" "$DEV/review.json" "$ROOT/test/fixtures/gke-tutorial/expected-env.json" <<'EOF'
import base64, json, sys
response = json.load(open(sys.argv[1]))["response"]
review = json.load(open(sys.argv[2]))
shown = json.load(open(sys.argv[3]))["ray-cluster.tpu-v6e-multihost.yaml"]["shown_pod"]
assert response["uid"] == review["request"]["uid"], "uid not echoed"
assert response["allowed"] is True, response
env = {}
for op in json.loads(base64.b64decode(response["patch"])):
    if op["path"] == "/spec/containers/0/env/-":
        env[op["value"]["name"]] = op["value"].get("value")
    elif op["path"] == "/spec/containers/0/env":
        env.update({e["name"]: e.get("value") for e in op["value"]})
for k, v in shown.items():
    assert env.get(k) == v, "%s: got %r, want %r" % (k, env.get(k), v)
print("run-dev self-check: the webhook answered the tutorial's worker Pod with "
      "TPU_WORKER_ID=%s, TPU_NAME=%s, TORCH_TPU_TOPOLOGY=%s" % (
          env["TPU_WORKER_ID"], env["TPU_NAME"], env["TORCH_TPU_TOPOLOGY"]))
EOF
kill -INT "$PID"
wait "$PID"
trap - EXIT
echo "run-dev self-check: passed"
