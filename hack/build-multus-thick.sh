#!/usr/bin/env bash
# Builds Multus' thick plugin, the node daemon and its CNI shim, that the
# burst benchmark (make bench-burst, test/burstbench) runs next to
# rdmanet-daemon, into the cached tools directory (default .tools/bin,
# gitignored, never committed):
#
#   multus-daemon  from gopkg.in/k8snetworkplumbingwg/multus-cni.v4 v4.3.0, ./cmd/multus-daemon
#   multus-shim    the same module, ./cmd/multus-shim
#
# v4.3.0 is the release with the daemon's connectionLimit (the mitigation
# of the out-of-memory under pod bursts). How the module is fetched and
# built: hack/lib/go-module-tool.sh (shared with hack/build-multus.sh, which
# builds the thin plugin v4.2.3 for bench-meta). Version in ldflags as
# upstream's hack/build-go.sh does, not stripped.
#
# A stamp file (multus-thick.version) records the module version; the
# binaries are rebuilt only when one is missing or the stamp differs.
# Environment: TOOLS_BIN (output dir), FORCE=1 (rebuild), GO (go command).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
bin="${TOOLS_BIN:-$root/.tools/bin}"
GO="${GO:-go}"

module=gopkg.in/k8snetworkplumbingwg/multus-cni.v4
version=v4.3.0
stamp="$bin/multus-thick.version"
want="$module $version"
mkdir -p "$bin"

. hack/lib/go-module-tool.sh
name=multus-thick
if module_tool_current "$stamp" "$want" "$bin/multus-daemon" && [ -x "$bin/multus-shim" ]; then
  echo "multus-thick: $version up to date ($bin/multus-daemon, $bin/multus-shim)"
  exit 0
fi

echo "multus-thick: building $module@$version ./cmd/multus-daemon ./cmd/multus-shim into $bin (first build takes a few minutes)"
start=$(date +%s)
work=$(mktemp -d "${TMPDIR:-/tmp}/rdmanet-multus-thick-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
module_source "$module" "$version" "$work" cmd/multus-daemon/main.go

pkg=$module/pkg/multus
ldflags="-X $pkg.version=$version -X $pkg.releaseStatus=released -X $pkg.date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
module_build "$work" "$bin/multus-daemon" ./cmd/multus-daemon "$ldflags"
module_build "$work" "$bin/multus-shim" ./cmd/multus-shim "$ldflags"
echo "$want" >"$stamp"
echo "multus-thick: built $("$bin/multus-shim" -version) in $(( $(date +%s) - start ))s"
