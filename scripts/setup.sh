#!/usr/bin/env bash
# Installs the Debian 12 packages kuberay-tpu-webhook needs (as root, or as a user with sudo).
# Usage: bash scripts/setup.sh          everything to build, test, lint and benchmark (test.sh)
#        bash scripts/setup.sh --run    only what building and running it locally needs (run.sh)
#        bash scripts/setup.sh --build  build dependencies only, for container builds
#                                       (SETUP_MINIMAL=1 means the same)
#        add --list to print the packages instead of installing them
set -euo pipefail

profile="test"
list=0
[[ "${SETUP_MINIMAL:-0}" == "1" ]] && profile=build
for arg in "$@"; do
  case "$arg" in
    --run) profile=run ;;
    --build) profile=build ;;
    --list) list=1 ;;  # print the profile's Debian packages, one a line, and install nothing
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown argument $arg; use --run, --build or none (see --help)" >&2; exit 2 ;;
  esac
done

build_packages=(
  cmake g++ make pkg-config git ca-certificates
  libasio-dev libcpp-httplib-dev nlohmann-json3-dev libyaml-cpp-dev libspdlog-dev libfmt-dev
  libssl-dev
  zlib1g-dev libbrotli-dev libjemalloc-dev libsimdjson-dev catch2
)
test_packages=(
  curl openssl python3 python3-yaml yamllint prometheus wrk nginx-light procps
  clang-14 libclang-rt-14-dev valgrind
  clang-format-14 clang-tidy-14 shellcheck  # scripts/lint.sh
  gcovr  # scripts/coverage.sh
  # test/deploy/helmrender, Helm's template engine, which renders the chart for the deploy tests
  golang-go golang-github-masterminds-sprig-dev golang-k8s-sigs-yaml-dev
  golang-github-xeipuuv-gojsonschema-dev golang-github-burntsushi-toml-dev
)

# scripts/run-dev.sh: the dev certificates, the banner's decoder, the self-check's requests.
run_packages=(openssl python3 curl)

packages=("${build_packages[@]}")
case "$profile" in
  run) packages+=("${run_packages[@]}") ;;
  test) packages+=("${run_packages[@]}" "${test_packages[@]}") ;;
esac

if ((list)); then
  printf '%s\n' "${packages[@]}"
  exit 0
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
# kubectl proves in tests that the API server's patch logic accepts our JSON Patches, and renders
# the kustomize base. Any kubectl works; Debian's kubernetes-client (1.20) is the fallback when
# none is installed, but deploy.kustomize's overlay check needs kubectl 1.22 or newer (kustomize
# replacements) and is skipped with an older one.
if [[ $profile == test ]] && ! command -v kubectl >/dev/null 2>&1; then
  missing+=(kubernetes-client)
fi
# node runs test/deploy/schema/validate.mjs (deploy.api_schemas). A node and npm already on PATH
# (NodeSource's nodejs bundles npm) are kept; otherwise Debian's nodejs and npm.
if [[ $profile == test ]]; then
  command -v node >/dev/null 2>&1 || missing+=(nodejs)
  command -v npm >/dev/null 2>&1 || missing+=(npm)
fi

if ((${#missing[@]})); then
  echo "setup.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup.sh: all packages present"
fi

# The validator's npm packages, pinned by test/deploy/schema/package-lock.json: installed when
# node_modules is missing or the lock changed since the last install.
if [[ $profile == test ]]; then
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  stamp="$root/test/deploy/schema/node_modules/.package-lock.sha256"
  lock_sum="$(sha256sum "$root/test/deploy/schema/package-lock.json" | cut -d' ' -f1)"
  if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$lock_sum" ]]; then
    echo "setup.sh: npm ci in test/deploy/schema"
    (cd "$root" && npm ci --prefix test/deploy/schema --no-audit --no-fund)
    echo "$lock_sum" >"$stamp"
  else
    echo "setup.sh: test/deploy/schema/node_modules matches its package-lock.json"
  fi
fi
