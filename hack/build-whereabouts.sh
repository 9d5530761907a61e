#!/usr/bin/env bash
# Builds the real Whereabouts IPAM plugin (the `whereabouts` CNI binary) that
# the cluster benchmark installs instead of rdmanet-ipam, into the cached tools
# directory (default .tools/bin, gitignored), and copies its CRD manifests:
#
#   whereabouts        from github.com/k8snetworkplumbingwg/whereabouts v0.9.2, ./cmd
#                      (the plugin's main package is cmd/whereabouts.go; cmd/controlloop
#                      and cmd/nodeslicecontroller are the optional controllers, not built)
#   whereabouts-crds/  the module's doc/crds/whereabouts.cni.cncf.io_*.yaml
#                      (ippools, overlappingrangeipreservations, nodeslicepools)
#
# Fetched and built like Multus (hack/lib/go-module-tool.sh); flags follow
# upstream's hack/build-go.sh (CGO_ENABLED=0, version in ldflags, not stripped).
#
# A stamp file (whereabouts.version) records the module version; the binary
# and the CRDs are rebuilt/copied only when missing or the stamp differs.
# The cold build takes a few minutes on 2 cores.
# Environment: TOOLS_BIN (binary dir), TOOLS_CRDS (CRD dir), FORCE=1 (rebuild),
# GO (go command).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
bin="${TOOLS_BIN:-$root/.tools/bin}"
crds="${TOOLS_CRDS:-$root/.tools/whereabouts-crds}"
GO="${GO:-go}"

module=github.com/k8snetworkplumbingwg/whereabouts
version=v0.9.2
out="$bin/whereabouts"
stamp="$bin/whereabouts.version"
want="$module $version"
mkdir -p "$bin"

. hack/lib/go-module-tool.sh
name=whereabouts
if module_tool_current "$stamp" "$want" "$out" && ls "$crds"/whereabouts.cni.cncf.io_ippools.yaml >/dev/null 2>&1; then
  echo "whereabouts: $version up to date ($out, $crds)"
  exit 0
fi

echo "whereabouts: building $module@$version ./cmd into $out (first build takes a few minutes)"
start=$(date +%s)
work=$(mktemp -d "${TMPDIR:-/tmp}/rdmanet-whereabouts-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
module_source "$module" "$version" "$work" cmd/whereabouts.go

pkg=$module/pkg/version
module_build "$work" "$out" ./cmd "-X $pkg.Version=$version -X $pkg.ReleaseStatus=released" CGO_ENABLED=0

# CRDs: copy into a fresh dir and swap it in, so a partial copy is never seen.
rm -rf "$crds.tmp.$$"
mkdir -p "$crds.tmp.$$"
cp "$work"/src/doc/crds/whereabouts.cni.cncf.io_*.yaml "$crds.tmp.$$/"
chmod -R u+w "$crds.tmp.$$"
rm -rf "$crds"
mv "$crds.tmp.$$" "$crds"

echo "$want" >"$stamp"
echo "whereabouts: built $("$out" version 2>&1 | head -1) and $(ls "$crds" | wc -l) CRDs in $(( $(date +%s) - start ))s"
