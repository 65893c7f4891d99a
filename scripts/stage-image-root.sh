#!/usr/bin/env bash
# Lays out the root filesystem of the container image (a FROM scratch stage copies it whole):
#   /usr/local/bin/     the given binaries
#   (ldd's paths)       every shared library `ldd` reports for them, and the dynamic loader, each
#                       at the path ldd reports it (the file itself, not a symlink)
#   /etc/passwd, /etc/group   root and nonroot (65532), the image's user
#   /etc/nsswitch.conf  users, groups and hosts from files, then hosts from DNS
#   /tmp                empty, mode 1777, for a writable volume
# and then starts every binary (`--version`) with the staged loader and nothing but the staged
# libraries: no ld.so cache, and a library that would be found only outside ROOT fails the run.
#
# Usage: bash scripts/stage-image-root.sh ROOT BINARY...
#   The Dockerfile's build stage runs it on the installed binaries; the deploy.image_libraries
#   test runs it on a local build.
set -euo pipefail

me=stage-image-root.sh
if (($# < 2)); then
  echo "usage: bash scripts/$me ROOT BINARY..." >&2
  exit 2
fi
mkdir -p "$1"
root=$(cd "$1" && pwd)
shift

# The absolute paths in `ldd BINARY`: "libfoo.so.1 => /lib/.../libfoo.so.1 (0x...)" for each
# library and "/lib64/ld-linux-x86-64.so.2 (0x...)" (or the architecture's own) for the loader.
# linux-vdso is in the kernel, not in a file.
ldd_paths() {
  local out
  if ! out=$(ldd "$1"); then
    echo "$me: ldd $1 failed (a static binary needs no staging script)" >&2
    return 1
  fi
  if grep -q 'not found' <<<"$out"; then
    echo "$me: $1: $(grep 'not found' <<<"$out")" >&2
    return 1
  fi
  awk '$2 == "=>" && $3 ~ /^\// { print $3; next }
       $1 ~ /^\// { print $1 }' <<<"$out"
}

mkdir -p "$root/usr/local/bin" "$root/etc" "$root/tmp"
chmod 1777 "$root/tmp"
for bin in "$@"; do
  install -m 0755 "$bin" "$root/usr/local/bin/"
done

paths=$(for bin in "$@"; do ldd_paths "$bin" || exit 1; done | sort -u)
mapfile -t paths <<<"$paths"
staged=()
for path in "${paths[@]}"; do
  dest=$root$path
  mkdir -p "$(dirname "$dest")"
  cp -L "$path" "$dest"
  staged+=("$dest")
  echo "$me: $path"
done

cat >"$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/sbin/nologin
nonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin
EOF
cat >"$root/etc/group" <<'EOF'
root:x:0:
nonroot:x:65532:
EOF
cat >"$root/etc/nsswitch.conf" <<'EOF'
passwd: files
group: files
hosts: files dns
EOF

# The start check. The image has no ld.so cache, so the loader finds a library only in its
# built-in system directories: every staged library must be in one of them. Then each binary
# starts with the staged loader, without the cache and with the staged directories first; the
# loader would still fall back to the build machine's system directories, so the paths it
# resolves must all be inside ROOT.
mapfile -t libdirs < <(for lib in "${staged[@]}"; do dirname "$lib"; done | sort -u)
status=0
declare -A reported=()
for bin in "$@"; do
  name=$(basename "$bin")
  loader=$root$(ldd "$bin" | awk '$1 ~ /^\// { print $1; exit }')  # its PT_INTERP
  if [[ ! -x $loader ]]; then
    echo "$me: $name: its loader ${loader#"$root"} is not staged" >&2
    status=1
    continue
  fi
  search=$("$loader" --help | awk '/\(system search path\)/ { print $1 }')
  for dir in "${libdirs[@]}"; do
    [[ $dir == "$(dirname "$loader")" ]] && continue  # the loader is found by its path
    if ! grep -qxF "${dir#"$root"}" <<<"$search" && [[ -z ${reported[$dir]:-} ]]; then
      reported[$dir]=1
      echo "$me: ${dir#"$root"} is not in the loader's search path" \
        "($(paste -sd' ' <<<"$search"))" >&2
      status=1
    fi
  done
  # An empty environment, as in the image: no LD_LIBRARY_PATH or LD_PRELOAD from the build.
  run=(env -i "$loader" --inhibit-cache --library-path "$(IFS=:; echo "${libdirs[*]}")")
  if ! resolved=$("${run[@]}" --list "$root/usr/local/bin/$name"); then
    echo "$me: $name: the staged loader cannot load it" >&2
    status=1
    continue
  fi
  outside=$(awk -v root="$root/" '$2 == "=>" && index($3, root) != 1 { print $3 }' <<<"$resolved")
  if [[ -n $outside ]]; then
    echo "$me: $name loads from outside $root: $(paste -sd' ' <<<"$outside")" >&2
    status=1
    continue
  fi
  if ! version=$("${run[@]}" "$root/usr/local/bin/$name" --version); then
    echo "$me: $name --version fails from $root" >&2
    status=1
    continue
  fi
  echo "$me: $name starts from $root: $version"
done
exit "$status"
