#!/usr/bin/env bash
# Installs every Debian 12 package kuberay-tpu-webhook needs to build, test, lint and benchmark.
# Usage: bash scripts/setup.sh            (as root, or as a user with sudo)
#        SETUP_MINIMAL=1 bash scripts/setup.sh   (build dependencies only, for container builds)
set -euo pipefail

build_packages=(
  cmake g++ make pkg-config git ca-certificates
  libcpp-httplib-dev nlohmann-json3-dev libyaml-cpp-dev libspdlog-dev libfmt-dev libssl-dev
  zlib1g-dev libbrotli-dev libjemalloc-dev libsimdjson-dev catch2
)
test_packages=(
  curl openssl python3 python3-yaml yamllint prometheus wrk nginx-light procps
  clang-14 libclang-rt-14-dev valgrind
  clang-format-14 clang-tidy-14  # scripts/lint.sh
)

packages=("${build_packages[@]}")
if [[ "${SETUP_MINIMAL:-0}" != "1" ]]; then
  packages+=("${test_packages[@]}")
fi

SUDO=""
if [[ "$(id -u)" != "0" ]]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
  else
    echo "setup.sh: run as root or install sudo" >&2
    exit 1
  fi
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# kubectl proves in tests that the API server's patch logic accepts our JSON Patches.
# Any kubectl works; Debian's kubernetes-client is the fallback when none is installed.
if [[ "${SETUP_MINIMAL:-0}" != "1" ]] && ! command -v kubectl >/dev/null 2>&1; then
  missing+=(kubernetes-client)
fi

if ((${#missing[@]})); then
  echo "setup.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup.sh: all packages present"
fi
