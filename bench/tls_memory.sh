#!/usr/bin/env bash
# Benchmark: what an open connection keeps on the server while its client is silent, with the
# transport's TLS stream (server::ByteStream) and with Asio's asio::ssl::stream, the stream the
# transport would otherwise use (docs/architecture.md "The transport" says why it does not).
# bench/tls_memory.cpp measures both on the server's own TLS settings: CONNECTIONS connections on
# 127.0.0.1 accepted and silent, then the same after a TLS handshake, the server side waiting for
# a request; the growth of the process's resident memory per connection (clients in another
# process). Each figure is then compared with the 32 KiB the attack test idle_memory allows a
# whole server per TLS connection idle after its handshake (test/integration/server).
#
# Usage: bash bench/tls_memory.sh [BUILD_DIR]   (default: build; tls-memory is built unless
#                                                BENCH_NO_BUILD is set)
# Env:   CONNECTIONS=1000 (1 to 20000; fewer than a few hundred measure the allocator's
#        granularity more than the streams)
# About 3 s. Loopback only; it stops what it starts.
# Exit 0 when the figures were measured; 1 when something could not run or a setting is bad (one
# line on stderr).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
CONNECTIONS="${CONNECTIONS:-1000}"
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
[[ "$CONNECTIONS" =~ ^[1-9][0-9]{0,4}$ ]] && ((CONNECTIONS <= 20000)) ||
  die "CONNECTIONS=$CONNECTIONS: give a whole number from 1 to 20000"
need_tools openssl

WORK="$(mktemp -d "${TMPDIR:-/tmp}/webhook-tls-memory.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
trap 'exit 1' INT TERM

build_targets tls-memory
bench_certificate

echo "kuberay-tpu-webhook's TLS stream against Asio's, $(date -u '+%Y-%m-%d %H:%M:%S UTC')," \
  "$(allocator_of "$TLS_MEMORY"), $(openssl version | cut -d' ' -f1-2)"
"$TLS_MEMORY" "$WORK/tls.crt" "$WORK/tls.key" "$CONNECTIONS" | tee "$WORK/figures.txt"
echo "idle after TLS against the 32 KiB per connection the attack test idle_memory allows:"
awk '$NF == "connections)" { verdict = ($(NF - 2) <= 32) ? "within" : "over";
                             printf "  %-20s %s\n", $1, verdict }' "$WORK/figures.txt"
