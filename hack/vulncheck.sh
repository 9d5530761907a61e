#!/usr/bin/env bash
# govulncheck against an offline vulnerability database, built from Go
# modules alone (the machine reaches only the Go module proxy):
#
#   - govulncheck from golang.org/x/vuln@$GOVULNCHECK_VERSION
#   - the database from the OSV JSON files golang.org/x/vulndb@$VULNDB_VERSION
#     carries under data/osv, indexed into govulncheck's v1 layout
#     (index/db.json, index/modules.json, ID/<id>.json) by that module's own
#     cmd/indexdb
#
# Both tools go to .tools/bin, the database to .tools/vulndb/<version>; a
# rerun rebuilds nothing. Binaries and the database are never committed
# (.tools/ is ignored). Then: govulncheck -db file://... ./...
#
#   hack/vulncheck.sh [govulncheck args]    default: ./...
#
# The standard library is checked at the version of the go command that
# runs (go env GOVERSION). VULNCHECK_GO=go1.26.11 scans as if built with that
# release (the go command fetches it from the proxy as the module
# golang.org/toolchain): that answer holds only for binaries built with it.
set -euo pipefail
cd "$(dirname "$0")/.."
GOVULNCHECK_VERSION="${GOVULNCHECK_VERSION:-v1.9.0}"
VULNDB_VERSION="${VULNDB_VERSION:-v0.0.0-20261105234957-e22db6528018}"
tools="$PWD/.tools"
bin="$tools/bin"
db="$tools/vulndb/$VULNDB_VERSION"
mkdir -p "$bin"
start=$(date +%s)

# install <binary> <package>@<version>: once per version (stamp file)
install() {
  local name=$1 pkg=$2 version=$3
  if [ -x "$bin/$name" ] && [ "$(cat "$bin/$name.version" 2>/dev/null)" = "$version" ]; then
    return
  fi
  echo "vulncheck: building $name from $pkg@$version into $bin" >&2
  local tmp
  tmp=$(mktemp -d)
  # module mode outside this module: the tool's own go.mod and go.sum decide
  (cd "$tmp" && GOFLAGS=-buildvcs=false GOBIN="$tmp" go install "$pkg@$version")
  mv "$tmp/$(basename "$pkg")" "$bin/$name"
  rm -rf "$tmp"
  echo "$version" >"$bin/$name.version"
}
install govulncheck golang.org/x/vuln/cmd/govulncheck "$GOVULNCHECK_VERSION"
install vulndb-indexdb golang.org/x/vulndb/cmd/indexdb "$VULNDB_VERSION"

if [ ! -s "$db/index/modules.json" ]; then
  echo "vulncheck: indexing golang.org/x/vulndb@$VULNDB_VERSION data/osv into $db" >&2
  src=$(cd / && go mod download -json "golang.org/x/vulndb@$VULNDB_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  if [ ! -d "$src/data/osv" ]; then
    echo "vulncheck: golang.org/x/vulndb@$VULNDB_VERSION has no data/osv (module dir '$src')" >&2
    exit 1
  fi
  rm -rf "$db.tmp"
  "$bin/vulndb-indexdb" -vulns "$src/data/osv" -out "$db.tmp"
  rm -rf "$db" && mv "$db.tmp" "$db"
  echo "vulncheck: $(find "$db/ID" -name '*.json' | wc -l) entries" >&2
fi
prep=$(( $(date +%s) - start ))
[ "$#" -gt 0 ] || set -- ./...
t0=$(date +%s)
rc=0
if [ -n "${VULNCHECK_GO:-}" ]; then
  export GOTOOLCHAIN="$VULNCHECK_GO"
fi
gover=$(go env GOVERSION)
"$bin/govulncheck" -db "file://$db" "$@" || rc=$?
echo "vulncheck: database golang.org/x/vulndb@$VULNDB_VERSION, govulncheck $GOVULNCHECK_VERSION, standard library of $gover; setup ${prep}s, scan $(( $(date +%s) - t0 ))s, exit $rc" >&2
exit "$rc"
