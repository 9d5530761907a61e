#!/usr/bin/env bash
# Builds the release tools into the cached tools directory (default
# .tools/bin, gitignored), from their Go modules like Multus and Whereabouts
# (hack/lib/go-module-tool.sh):
#
#   cyclonedx-gomod   github.com/CycloneDX/cyclonedx-gomod v1.10.0, ./cmd/cyclonedx-gomod:
#                     the CycloneDX SBOM of each image (make release)
#   krew              sigs.k8s.io/krew v0.4.3, ./cmd/krew: `krew install --manifest
#                     --archive` of the generated plugin manifest, offline (make test-release)
#
# A stamp file per tool (<tool>.version) records the module version; a tool
# is rebuilt only when missing or its stamp differs. FORCE=1 rebuilds.
# Environment: TOOLS_BIN, FORCE, GO. Cold: about a minute each on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
bin="${TOOLS_BIN:-$root/.tools/bin}"
GO="${GO:-go}"
mkdir -p "$bin"
. hack/lib/go-module-tool.sh

build_tool() { # build_tool NAME MODULE VERSION PKG FILE LDFLAGS
  name=$1
  local module=$2 version=$3 pkg=$4 file=$5 ldflags=$6
  local out="$bin/$name" stamp="$bin/$name.version" want="$module $version"
  if module_tool_current "$stamp" "$want" "$out"; then
    echo "$name: $version up to date ($out)"
    return 0
  fi
  echo "$name: building $module@$version $pkg into $out"
  local start work
  start=$(date +%s)
  work=$(mktemp -d "${TMPDIR:-/tmp}/rdmanet-$name-build.XXXXXX")
  module_source "$module" "$version" "$work" "$file"
  module_build "$work" "$out" "$pkg" "$ldflags" CGO_ENABLED=0
  rm -rf "$work"
  echo "$want" >"$stamp"
  echo "$name: built in $(( $(date +%s) - start ))s"
}

build_tool cyclonedx-gomod github.com/CycloneDX/cyclonedx-gomod v1.10.0 ./cmd/cyclonedx-gomod cmd/cyclonedx-gomod/main.go "-s -w"
build_tool krew sigs.k8s.io/krew v0.4.3 ./cmd/krew cmd/krew/main.go "-s -w -X sigs.k8s.io/krew/internal/version.gitTag=v0.4.3"
