#!/usr/bin/env bash
# Runs the whole test suite: the main module, then every test module under test/*/go.mod.
# Root is needed for the netns tier; CI runs as root.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOFLAGS="${GOFLAGS:--buildvcs=auto}"
start=$(date +%s)
echo "== go vet ./..."
go vet ./...
echo "== go test ./... (main module)"
go test -count=1 -timeout 30m ./...
for mod in test/*/go.mod; do
  [ -e "$mod" ] || continue
  dir=$(dirname "$mod")
  echo "== go test ./... in $dir"
  (cd "$dir" && go test -count=1 -timeout 30m ./...)
done
echo "== all tests passed in $(( $(date +%s) - start ))s"
