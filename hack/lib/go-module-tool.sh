# Sourced by hack/build-multus.sh and hack/build-whereabouts.sh: the steps
# they share to build a peer's tool from its Go module for the benchmarks.
# The module comes from the Go module cache (`go mod download`, through the
# configured GOPROXY) and is built in a writable temporary copy with its own
# go.mod/go.sum, outside this repository's module and workspace, so neither
# the module cache nor rdmanet's go.mod/go.sum is touched; nothing is
# vendored or committed. The caller sets GO and name (for messages).

# module_tool_current STAMP WANT OUT: true when OUT exists and STAMP holds
# WANT (and FORCE is not 1).
module_tool_current() {
  [ "${FORCE:-0}" != 1 ] && [ -x "$3" ] && [ "$(cat "$1" 2>/dev/null)" = "$2" ]
}

# module_source MODULE VERSION WORK FILE: copies MODULE@VERSION's source to
# WORK/src (writable) and checks that FILE exists in it.
module_source() {
  local module=$1 version=$2 work=$3 file=$4 src
  src=$(cd "$work" && GOWORK=off GOFLAGS="-mod=mod -buildvcs=false" "$GO" mod download -json "$module@$version" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  if [ -z "$src" ] || [ ! -f "$src/go.mod" ] || [ ! -f "$src/$file" ]; then
    echo "$name: go mod download $module@$version gave no source directory with $file" >&2
    return 1
  fi
  # The module cache is read-only; build in a writable copy.
  cp -R "$src" "$work/src"
  chmod -R u+w "$work/src"
}

# module_build WORK OUT PKG LDFLAGS [VAR=VALUE...]: builds PKG of WORK/src
# (-trimpath, LDFLAGS, the environment given) to a temporary name and
# renames it to OUT, so an interrupted build never leaves a truncated binary
# that later looks up to date.
module_build() {
  local work=$1 out=$2 pkg=$3 ldflags=$4
  shift 4
  (cd "$work/src" && env GOWORK=off GOFLAGS="-mod=mod -buildvcs=false" "$@" "$GO" build -trimpath -ldflags "$ldflags" -o "$out.tmp.$$" "$pkg")
  mv -f "$out.tmp.$$" "$out"
}
