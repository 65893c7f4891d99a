#!/usr/bin/env bash
# The written habits, checked (CI runs this before the build; see CONTRIBUTING.md):
#   clang-format  every .h/.cpp of lib/ cmd/ test/ bench/ fuzz/ is formatted as .clang-format says
#   clang-tidy    lib/ and cmd/ hold the checks of .clang-tidy (naming, function size, bugprone-*,
#                 modernize-*), with the compile commands of a configured build directory: one
#                 run per translation unit the build compiles, so a lib/ room built as one unit
#                 (WEBHOOK_UNITY_BUILD) is read once, its heavy headers with it
# Usage: bash scripts/lint.sh [--format-only | --tidy-only]
#   BUILD_DIR=build   the build directory whose compile_commands.json clang-tidy reads (configured
#                     here when it has none)
#   JOBS=$(nproc)     parallel clang-tidy processes
# Exit status 0 when both are clean, 1 when either has findings, 2 on bad usage or a missing tool.
# To fix formatting: the same file list through `clang-format -i`.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build_dir=${BUILD_DIR:-build}
jobs=${JOBS:-$(nproc)}
do_format=1
do_tidy=1
case ${1:-} in
  "") ;;
  --format-only) do_tidy=0 ;;
  --tidy-only) do_format=0 ;;
  *) echo "usage: scripts/lint.sh [--format-only | --tidy-only]" >&2; exit 2 ;;
esac

pick() {  # pick NAME...: the first of the tools found (version 14 first: its output is the rule)
  local t
  for t in "$@"; do
    if command -v "$t" >/dev/null 2>&1; then echo "$t"; return 0; fi
  done
  echo "scripts/lint.sh: none of $* found: run scripts/setup.sh" >&2
  return 1
}

# Tracked and new (not ignored) files, so a file added but not committed yet is checked too.
sources() {  # sources DIR...
  local f
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -co --exclude-standard -- "$@" | grep -E '\.(h|cpp)$' | sort -u |
      while read -r f; do [[ -f $f ]] && echo "$f"; done
  else
    find "$@" -type f \( -name '*.h' -o -name '*.cpp' \) | sort
  fi
}

status=0

if ((do_format)); then
  clang_format=$(pick clang-format-14 clang-format) || exit 2
  mapfile -t files < <(sources lib cmd test bench fuzz)
  start=$SECONDS
  out=$("$clang_format" --dry-run -Werror "${files[@]}" 2>&1)
  rc=$?
  bad=$(grep -oE "^[^:]+\.(h|cpp):[0-9]+:[0-9]+: error: .*\[-Wclang-format-violations\]" <<<"$out" |
        cut -d: -f1 | sort -u)
  if [[ -n $bad ]]; then
    echo "clang-format: $(wc -l <<<"$bad") of ${#files[@]} files differ from .clang-format" \
         "(fix: clang-format -i FILE...):"
    sed 's/^/  /' <<<"$bad"
    status=1
  elif ((rc != 0)); then
    echo "clang-format: failed without a finding:"
    tail -20 <<<"$out"
    status=1
  else
    echo "clang-format: ${#files[@]} files ok ($((SECONDS - start)) s)"
  fi
fi

if ((do_tidy)); then
  clang_tidy=$(pick clang-tidy-14 clang-tidy) || exit 2
  if [[ ! -f $build_dir/compile_commands.json ]]; then
    cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 2
  fi
  # The lib/ and cmd/ sources the build compiles (a file CMake does not list has no flags), or
  # the unity units that include a room's sources.
  build_abs=$(cd "$build_dir" && pwd)
  mapfile -t units < <(grep -oE "\"file\": \"($root/(lib|cmd)/[^\"]+\.cpp|$build_abs/lib/[^\"]+/Unity/[^\"]+\.cxx)\"" \
                         "$build_dir/compile_commands.json" | cut -d'"' -f4 | sort -u)
  if ((${#units[@]} == 0)); then
    echo "clang-tidy: no lib/ or cmd/ source in $build_dir/compile_commands.json" >&2
    exit 2
  fi
  start=$SECONDS
  logs=$(mktemp -d)
  # GCC's compile commands, read by clang: flags clang does not know are not errors. Only the
  # repository's own files under lib/ and cmd/ are reported. One log per unit. The configuration
  # is named: a unit in a build directory outside the tree would not find .clang-tidy.
  printf '%s\n' "${units[@]}" |
    xargs -P "$jobs" -I{} sh -c '"$1" -p "$2" --config-file="$6/.clang-tidy" --quiet \
        --use-color=false --header-filter="$3" --extra-arg=-Wno-unknown-warning-option "$4" \
        >"$5/$(echo "$4" | tr / _).log" 2>&1' \
      _ "$clang_tidy" "$build_dir" "^$root/(lib|cmd)/" {} "$logs" "$root"
  # One finding a line, each once (a header's finding is reported by every file including it).
  # readability-function-size gives the size in the note that follows; it is appended.
  findings=$(cat "$logs"/*.log | awk '
      / (warning|error): .*\[[a-zA-Z0-9.,-]+\]$/ { if (w != "") print w; w = $0; next }
      w ~ /readability-function-size/ && / note: [0-9]+ lines including/ {
        match($0, /[0-9]+ lines/); print w " (" substr($0, RSTART, RLENGTH) ")"; w = ""; next }
      END { if (w != "") print w }' |
    sed -e "s|^$root/||" -e 's/,-warnings-as-errors\]/]/' | sort -u)
  if [[ -n $findings ]]; then
    echo "clang-tidy: $(wc -l <<<"$findings") finding(s) in lib/ and cmd/" \
         "(${#units[@]} units, $((SECONDS - start)) s):"
    sed 's/^/  /' <<<"$findings"
    echo "clang-tidy: per check:"
    grep -oE "\[[a-zA-Z0-9.,-]+\]( \([0-9]+ lines\))?$" <<<"$findings" | cut -d' ' -f1 |
      sort | uniq -c | sort -rn | sed 's/^/  /'
    status=1
  elif grep -qE "^Error while processing|error:" "$logs"/*.log; then
    echo "clang-tidy: failed without a finding:"
    grep -hE "error" "$logs"/*.log | head -20
    status=1
  else
    echo "clang-tidy: ${#units[@]} units of lib/ and cmd/ ok ($((SECONDS - start)) s)"
  fi
  rm -rf "$logs"
fi
exit $status
