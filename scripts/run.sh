#!/usr/bin/env bash
# README command (a): sets up a fresh Debian 12 machine, builds, and runs the main job:
# webhook-dryrun on the GKE tutorial's v6e RayCluster, printing the slice the webhook builds.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target webhook-dryrun
./build/cmd/webhook-dryrun/webhook-dryrun examples/gke-tutorial/ray-cluster.tpu-v6e-multihost.yaml
