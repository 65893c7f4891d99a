#!/usr/bin/env bash
# Writes the container image's SBOM, ROOT/usr/share/sbom/kuberay-tpu-webhook.spdx.json, an SPDX
# 2.3 JSON document made from the package records scripts/stage-image-root.sh wrote in
# ROOT/var/lib/dpkg/status.d/: one package for the project (its binaries) and one for each
# Debian package, with its version, architecture, source package and purl
# (pkg:deb/debian/NAME@VERSION?arch=ARCH&distro=debian-12, the name and version percent-encoded
# as the purl specification asks: libstdc++6 is libstdc%2B%2B6, an epoch's `:` is %3A). The
# document's creation time is SOURCE_DATE_EPOCH when set (reproducible builds), else now; its
# namespace is unique to its contents.
#
# Usage: bash scripts/image-sbom.sh ROOT PROJECT_VERSION
#   stage-image-root.sh runs it last; it needs nothing the Debian build stage lacks (bash,
#   coreutils, awk).
set -euo pipefail

me=image-sbom.sh
if (($# != 2)); then
  echo "usage: bash scripts/$me ROOT PROJECT_VERSION" >&2
  exit 2
fi
root=$1
project_version=$2
records=$root/var/lib/dpkg/status.d
out_dir=$root/usr/share/sbom
out=$out_dir/kuberay-tpu-webhook.spdx.json
shopt -s nullglob
files=("$records"/*)
if ((${#files[@]} == 0)); then
  echo "$me: no package records in $records" >&2
  exit 1
fi

# A JSON string: backslashes and quotes escaped, control characters dropped.
json() {
  local s=${1//\\/\\\\}
  s=${s//\"/\\\"}
  printf '"%s"' "$(tr -d '\000-\037' <<<"$s")"
}

# Percent-encoding for a purl's name or version: letters, digits and . - _ ~ stay.
purl_encode() {
  local s=$1 out="" c i
  for ((i = 0; i < ${#s}; i++)); do
    c=${s:i:1}
    if [[ $c == [A-Za-z0-9._~-] ]]; then
      out+=$c
    else
      out+=$(printf '%%%02X' "'$c")
    fi
  done
  printf '%s' "$out"
}

# A field of a record (RFC 822 style, one line per field).
field() {
  awk -v k="$2" 'index($0, k ": ") == 1 { print substr($0, length(k) + 3); exit }' "$1"
}

# The release the packages come from: debian-12 on bookworm.
distro_id=$(. "$root/etc/os-release" && echo "${ID:-}-${VERSION_ID:-}")
if [[ $distro_id != debian-* || $distro_id == *- ]]; then
  echo "$me: $root/etc/os-release names no Debian release ($distro_id)" >&2
  exit 1
fi

if [[ -n ${SOURCE_DATE_EPOCH:-} ]]; then
  created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
else
  created=$(date -u +%Y-%m-%dT%H:%M:%SZ)
fi
digest=$(cat "${files[@]}" | sha256sum | cut -c1-64)
project_id=SPDXRef-Package-kuberay-tpu-webhook

packages=()
relationships=("{\"spdxElementId\": \"SPDXRef-DOCUMENT\", \"relationshipType\": \"DESCRIBES\", \"relatedSpdxElement\": \"$project_id\"}")
packages+=("{\"SPDXID\": \"$project_id\", \"name\": \"kuberay-tpu-webhook\", \"versionInfo\": $(json "$project_version"), \"primaryPackagePurpose\": \"APPLICATION\", \"downloadLocation\": \"NOASSERTION\", \"filesAnalyzed\": false, \"licenseConcluded\": \"NOASSERTION\", \"licenseDeclared\": \"NOASSERTION\", \"copyrightText\": \"NOASSERTION\", \"comment\": \"The binaries in /usr/local/bin: kuberay-tpu-webhook, webhook-dryrun, kubectl-tpu_slice.\", \"externalRefs\": [{\"referenceCategory\": \"PACKAGE-MANAGER\", \"referenceType\": \"purl\", \"referenceLocator\": \"pkg:generic/kuberay-tpu-webhook@$(purl_encode "$project_version")\"}]}")
n=0
for rec in "${files[@]}"; do
  name=$(field "$rec" Package)
  version=$(field "$rec" Version)
  arch=$(field "$rec" Architecture)
  source=$(field "$rec" Source)
  if [[ -z $name || -z $version || -z $arch ]]; then
    echo "$me: $rec lacks Package, Version or Architecture" >&2
    exit 1
  fi
  n=$((n + 1))
  id="SPDXRef-Package-deb-$n-${name//[^A-Za-z0-9.-]/-}"
  purpose=LIBRARY
  [[ $name == base-files ]] && purpose=OPERATING-SYSTEM  # /etc/os-release, /etc/debian_version
  purl="pkg:deb/debian/$(purl_encode "$name")@$(purl_encode "$version")?arch=$arch&distro=$distro_id"
  packages+=("{\"SPDXID\": \"$id\", \"name\": $(json "$name"), \"versionInfo\": $(json "$version"), \"supplier\": \"Organization: Debian\", \"sourceInfo\": $(json "built package from: ${source:-$name}"), \"primaryPackagePurpose\": \"$purpose\", \"downloadLocation\": \"NOASSERTION\", \"filesAnalyzed\": false, \"licenseConcluded\": \"NOASSERTION\", \"licenseDeclared\": \"NOASSERTION\", \"copyrightText\": \"NOASSERTION\", \"comment\": $(json "Debian package, recorded in /var/lib/dpkg/status.d/$name; copyright in /usr/share/doc/$name/copyright."), \"externalRefs\": [{\"referenceCategory\": \"PACKAGE-MANAGER\", \"referenceType\": \"purl\", \"referenceLocator\": $(json "$purl")}]}")
  relationships+=("{\"spdxElementId\": \"$project_id\", \"relationshipType\": \"CONTAINS\", \"relatedSpdxElement\": \"$id\"}")
done

join() {
  local first=1 item
  for item in "$@"; do
    ((first)) || printf ',\n'
    printf '    %s' "$item"
    first=0
  done
}

mkdir -p "$out_dir"
{
  printf '{\n'
  printf '  "spdxVersion": "SPDX-2.3",\n'
  printf '  "dataLicense": "CC0-1.0",\n'
  printf '  "SPDXID": "SPDXRef-DOCUMENT",\n'
  printf '  "name": %s,\n' "$(json "kuberay-tpu-webhook-$project_version image")"
  printf '  "documentNamespace": %s,\n' \
    "$(json "https://spdx.org/spdxdocs/kuberay-tpu-webhook-$project_version-$digest")"
  printf '  "creationInfo": {"created": "%s", "creators": ["Tool: kuberay-tpu-webhook scripts/image-sbom.sh"]},\n' "$created"
  printf '  "packages": [\n%s\n  ],\n' "$(join "${packages[@]}")"
  printf '  "relationships": [\n%s\n  ]\n' "$(join "${relationships[@]}")"
  printf '}\n'
} >"$out"
echo "$me: ${out#"$root"}: $n Debian packages and kuberay-tpu-webhook $project_version"
