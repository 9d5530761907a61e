#!/usr/bin/env bash
# Builds the real Multus thin plugin (the `multus` CNI binary) that the meta
# CNI benchmark runs next to rdmanet, into the cached tools directory
# (default .tools/bin, gitignored):
#
#   multus  from gopkg.in/k8snetworkplumbingwg/multus-cni.v4 v4.2.3, ./cmd/multus
#
# The module comes from the Go module cache (`go mod download`, through the
# configured GOPROXY); it is built in a writable temporary copy with its own
# go.mod/go.sum, outside this repository's module, so neither the module cache
# nor rdmanet's go.mod/go.sum is touched. Built like upstream's hack/build-go.sh
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

if [ "${FORCE:-0}" != 1 ] && [ -x "$out" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "multus: $version up to date ($out)"
  exit 0
fi

echo "multus: building $module@$version ./cmd/multus into $out (first build takes a few minutes)"
start=$(date +%s)
work=$(mktemp -d "${TMPDIR:-/tmp}/rdmanet-multus-build.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Outside any module and workspace: the build sees only Multus' own go.mod.
export GOWORK=off GOFLAGS="-mod=mod -buildvcs=false"
src=$(cd "$work" && "$GO" mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
if [ -z "$src" ] || [ ! -f "$src/go.mod" ]; then
  echo "multus: go mod download $module@$version gave no source directory" >&2
  exit 1
fi
# The module cache is read-only; build in a writable copy.
cp -R "$src" "$work/src"
chmod -R u+w "$work/src"

pkg=$module/pkg/multus
ldflags="-X $pkg.version=$version -X $pkg.releaseStatus=released -X $pkg.date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
# Build to a temp name and rename, so an interrupted build never leaves a
# truncated binary that later looks "up to date".
(cd "$work/src" && "$GO" build -trimpath -ldflags "$ldflags" -o "$out.tmp.$$" ./cmd/multus)
mv -f "$out.tmp.$$" "$out"
echo "$want" >"$stamp"
echo "multus: built $("$out" -version) in $(( $(date +%s) - start ))s"
