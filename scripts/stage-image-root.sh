#!/usr/bin/env bash
# Lays out the root filesystem of the container image (a FROM scratch stage copies it whole):
#   /usr/local/bin/     the given binaries
#   (ldd's paths)       every shared library `ldd` reports for them, and the dynamic loader, each
#                       at the path ldd reports it (the file itself, not a symlink)
#   /etc/passwd, /etc/group   root and nonroot (65532), the image's user
#   /etc/nsswitch.conf  users, groups and hosts from files, then hosts from DNS
#   /tmp                empty, mode 1777, for a writable volume
#   /etc/os-release, /etc/debian_version   base-files' (the Debian release scanners match
#                       package versions against)
#   /var/lib/dpkg/status.d/PACKAGE   for every Debian package that owns a staged file (dpkg -S on
#                       its path, else on the path with its symlinks resolved): Package,
#                       Version, Architecture, Source and more, as distroless images record
#                       them, which Trivy, Grype/Syft and Artifact Analysis read
#   /usr/share/doc/PACKAGE/copyright   each such package's copyright file
#   /usr/share/sbom/kuberay-tpu-webhook.spdx.json   an SPDX 2.3 SBOM of those packages and of
#                       the project (scripts/image-sbom.sh), written after the start check
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
  mkdir -p "${dest%/*}"
  cp -L "$path" "$dest"
  staged+=("$dest")
  echo "$me: $path"
done

# base-files' release files, as files (/etc/os-release is a symlink on Debian).
owned=("${staged[@]}")
for path in /etc/os-release /etc/debian_version; do
  cp -L "$path" "$root$path"
  owned+=("$root$path")
done

# The Debian package that owns PATH: dpkg -S on the path itself, on it with its directories'
# symlinks resolved (/lib is /usr/lib), then with the file's own resolved too (libfoo.so.1 ->
# libfoo.so.1.2.3). One package, or the run fails. dpkg reads its whole file database for each
# query, so every candidate of every file is asked in one query first (dpkg_owned).
candidates_of() {
  local dir=${1%/*}
  printf '%s\n' "$1" "$(realpath -e "${dir:-/}")/${1##*/}" "$(realpath -e "$1")"
}
declare -A dpkg_owned=()  # path -> "pkg[:arch][, pkg2...]"
load_owners() {
  local line
  # "pkg[:arch][, pkg2...]: path" lines; diversions ("diversion by ...") are not owners.
  while IFS= read -r line; do
    [[ $line == "diversion "* || $line != *": "* ]] && continue
    dpkg_owned[${line#*: }]=${line%%: *}
  done < <(dpkg-query -S "$@" 2>/dev/null || true)
}
owner_of() {
  local c out
  while IFS= read -r c; do
    out=${dpkg_owned[$c]:-}
    [[ -z $out ]] && continue
    if [[ $out == *,* ]]; then
      echo "$me: $1 is owned by more than one package: $out" >&2
      return 1
    fi
    echo "${out%%:*}"
    return 0
  done < <(candidates_of "$1")
  echo "$me: no Debian package owns $1 (dpkg -S $(candidates_of "$1" | paste -sd' '))" >&2
  return 1
}

# The status.d records of PACKAGE..., from one dpkg-query (it reads dpkg's whole database each
# time it runs): each package's control fields as dpkg has them, the fields distroless writes (no
# Status: a record in status.d is an installed package). Source names the source package, with
# its version when it differs (a binNMU's +bN); an empty field is left out.
write_records() {
  local fmt
  fmt='Package: ${Package}\nVersion: ${Version}\nArchitecture: ${Architecture}\n'
  fmt+='Maintainer: ${Maintainer}\n${source:Package}|${source:Version}\n'
  fmt+='Depends: ${Depends}\nHomepage: ${Homepage}\nDescription: ${binary:Synopsis}\n'
  dpkg-query -W -f="$fmt" "$@" | awk -v dir="$records" '
    /^Package: / { if (out != "") close(out); out = dir "/" substr($0, 10); line = 0 }
    { ++line }
    line == 2 { version = substr($0, 10) }
    line == 5 { split($0, source, "|")
                print "Source: " source[1] (source[2] != version ? " (" source[2] ")" : "") > out
                next }
    !/^[A-Za-z-]+: $/ { print > out }'
}

records=$root/var/lib/dpkg/status.d
mkdir -p "$records"
mapfile -t asked < <(for file in "${owned[@]}"; do candidates_of "${file#"$root"}"; done | sort -u)
load_owners "${asked[@]}"
declare -A owners=()
for file in "${owned[@]}"; do
  pkg=$(owner_of "${file#"$root"}") || exit 1
  owners[$pkg]=1
done
mapfile -t packages < <(printf '%s\n' "${!owners[@]}" | sort)
write_records "${packages[@]}"
for pkg in "${packages[@]}"; do
  doc=/usr/share/doc/$pkg/copyright
  if [[ ! -f $doc ]]; then
    echo "$me: $pkg has no $doc" >&2
    exit 1
  fi
  mkdir -p "$root/usr/share/doc/$pkg"
  cp -L "$doc" "$root$doc"
  echo "$me: $pkg $(awk '$1 == "Version:" { v = $2 } $1 == "Architecture:" { a = $2 }
                         END { print v, a }' "$records/$pkg")"
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
mapfile -t libdirs < <(printf '%s\n' "${staged[@]%/*}" | sort -u)
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
  [[ $name == kuberay-tpu-webhook ]] && project_version=${version##* }
done
((status == 0)) || exit "$status"

# The SBOM, from the records just written.
bash "$(dirname "$0")/image-sbom.sh" "$root" "${project_version:-NOASSERTION}"
