#!/usr/bin/env bash
# README command (a): sets up a fresh Debian 12 machine, builds, and runs the main job: the
# webhook in dev mode on https://localhost:9443 with a freshly generated self-signed CA and serving
# certificate, printing a curl line that sends it the GKE tutorial's v6e worker Pod as an
# AdmissionReview. Ctrl-C stops it. Arguments go to scripts/run-dev.sh (e.g. --self-check,
# --help). Installs only what building and running need; scripts/test.sh installs the rest.
set -euo pipefail
cd "$(dirname "$0")/.."
for arg in "$@"; do
  [[ $arg == -h || $arg == --help ]] && exec bash scripts/run-dev.sh --help
done
bash scripts/setup.sh --run
exec bash scripts/run-dev.sh "$@"
