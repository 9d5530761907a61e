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
# Built exactly the way hack/build-multus.sh builds Multus: the module comes
# from the Go module cache (`go mod download`, through the configured GOPROXY)
# and is built in a writable temporary copy with its own go.mod/go.sum,
# outside this repository's module, so neither the module cache nor rdmanet's
# go.mod/go.sum is touched; nothing is vendored or committed. Flags follow
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

if [ "${FORCE:-0}" != 1 ] && [ -x "$out" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] &&
  ls "$crds"/whereabouts.cni.cncf.io_ippools.yaml >/dev/null 2>&1; then
  echo "whereabouts: $version up to date ($out, $crds)"
  exit 0
fi

echo "whereabouts: building $module@$version ./cmd into $out (first build takes a few minutes)"
start=$(date +%s)
work=$(mktemp -d "${TMPDIR:-/tmp}/rdmanet-whereabouts-build.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Outside any module and workspace: the build sees only Whereabouts' own go.mod.
export GOWORK=off GOFLAGS="-mod=mod -buildvcs=false"
src=$(cd "$work" && "$GO" mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
if [ -z "$src" ] || [ ! -f "$src/go.mod" ] || [ ! -f "$src/cmd/whereabouts.go" ]; then
  echo "whereabouts: go mod download $module@$version gave no source directory with cmd/whereabouts.go" >&2
  exit 1
fi
# The module cache is read-only; build in a writable copy.
cp -R "$src" "$work/src"
chmod -R u+w "$work/src"

pkg=$module/pkg/version
ldflags="-X $pkg.Version=$version -X $pkg.ReleaseStatus=released"
# Build to a temp name and rename, so an interrupted build never leaves a
# truncated binary that later looks "up to date".
(cd "$work/src" && CGO_ENABLED=0 "$GO" build -trimpath -ldflags "$ldflags" -o "$out.tmp.$$" ./cmd)
mv -f "$out.tmp.$$" "$out"

# CRDs: copy into a fresh dir and swap it in, so a partial copy is never seen.
rm -rf "$crds.tmp.$$"
mkdir -p "$crds.tmp.$$"
cp "$src"/doc/crds/whereabouts.cni.cncf.io_*.yaml "$crds.tmp.$$/"
chmod -R u+w "$crds.tmp.$$"
rm -rf "$crds"
mv "$crds.tmp.$$" "$crds"

echo "$want" >"$stamp"
echo "whereabouts: built $("$out" version 2>&1 | head -1) and $(ls "$crds" | wc -l) CRDs in $(( $(date +%s) - start ))s"
