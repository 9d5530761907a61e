#!/usr/bin/env bash
# Builds the real Multus thin plugin (the `multus` CNI binary) that the meta
# CNI benchmark runs next to rdmanet, into the cached tools directory
# (default .tools/bin, gitignored):
#
#   multus  from gopkg.in/k8snetworkplumbingwg/multus-cni.v4 v4.2.3, ./cmd/multus
#
# How the module is fetched and built: hack/lib/go-module-tool.sh (shared with
# hack/build-whereabouts.sh). Built like upstream's hack/build-go.sh
# (version in ldflags, not stripped — the same as the rdmanet binaries the
# benchmark compares it with).
#
# A stamp file (multus.version) records the module version; the binary is
# rebuilt only when it is missing or the stamp differs, so repeated
# `make bench-meta` runs cost nothing. The cold build takes 2-4 minutes.
# Environment: TOOLS_BIN (output dir), FORCE=1 (rebuild), GO (go command).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
bin="${TOOLS_BIN:-$root/.tools/bin}"
GO="${GO:-go}"

module=gopkg.in/k8snetworkplumbingwg/multus-cni.v4
version=v4.2.3
out="$bin/multus"
stamp="$bin/multus.version"
want="$module $version"
mkdir -p "$bin"

. hack/lib/go-module-tool.sh
name=multus
if module_tool_current "$stamp" "$want" "$out"; then
  echo "multus: $version up to date ($out)"
  exit 0
fi

echo "multus: building $module@$version ./cmd/multus into $out (first build takes a few minutes)"
start=$(date +%s)
work=$(mktemp -d "${TMPDIR:-/tmp}/rdmanet-multus-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
module_source "$module" "$version" "$work" cmd/multus/main.go

pkg=$module/pkg/multus
module_build "$work" "$out" ./cmd/multus \
  "-X $pkg.version=$version -X $pkg.releaseStatus=released -X $pkg.date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "$want" >"$stamp"
echo "multus: built $("$out" -version) in $(( $(date +%s) - start ))s"
