#!/usr/bin/env bash
# Builds the container runtime of the real-node tier from its Go modules into
# the cached tools directory (default .tools/bin, gitignored):
#
#   containerd, containerd-shim-runc-v2, ctr   github.com/containerd/containerd/v2 v2.4.2
#   runc                                       github.com/opencontainers/runc v1.4.0
#                                              (cgo, -tags seccomp: needs libseccomp-dev)
#
# Debian's containerd 1.6 is too old for kubelet 1.37 (no CRI RuntimeConfig) and
# Debian's runc 1.1.5 / crun 1.8.1 fail with today's runtime-spec, so both are
# built (see docs/cluster.md). Each binary is rebuilt only when missing or when
# its stamp (<name>.version) names another module version. `go install
# module@version` builds with the module's own go.mod, exactly as released.
# Environment: TOOLS_BIN (output dir), FORCE=1 (rebuild), GO (go command).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
bin="${TOOLS_BIN:-$root/.tools/bin}"
GO="${GO:-go}"
mkdir -p "$bin"
export GOWORK=off GOFLAGS=-buildvcs=false

# install NAME PACKAGE VERSION [go build flags...]
install() {
  local name="$1" pkg="$2" version="$3"; shift 3
  local out="$bin/$name" stamp="$bin/$name.version" want="$pkg@$version $*"
  if [ "${FORCE:-0}" != 1 ] && [ -x "$out" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    echo "runtime-tools: $name $version up to date ($out)"
    return 0
  fi
  echo "runtime-tools: building $name from $pkg@$version"
  local start tmp; start=$(date +%s); tmp=$(mktemp -d "$bin/.build-$name.XXXXXX")
  # Build into a temporary GOBIN and rename, so an interrupted build never
  # leaves a truncated binary that looks up to date.
  if ! GOBIN="$tmp" "$GO" install -trimpath "$@" "$pkg@$version"; then
    rm -rf "$tmp"; return 1
  fi
  mv -f "$tmp/$(basename "$pkg")" "$out"
  rm -rf "$tmp"
  echo "$want" > "$stamp"
  echo "runtime-tools: built $name in $(( $(date +%s) - start ))s"
}

need_seccomp() {
  if [ -e /usr/include/seccomp.h ]; then return 0; fi
  echo "runtime-tools: runc needs libseccomp-dev; installing it with apt-get"
  if ! { apt-get install -y --no-install-recommends libseccomp-dev >/dev/null 2>&1 ||
         { apt-get update >/dev/null 2>&1 && apt-get install -y --no-install-recommends libseccomp-dev >/dev/null; }; }; then
    echo "runtime-tools: cannot install libseccomp-dev (apt-get failed); install it and rerun" >&2
    return 1
  fi
}

containerd=github.com/containerd/containerd/v2
install containerd "$containerd/cmd/containerd" v2.4.2
install containerd-shim-runc-v2 "$containerd/cmd/containerd-shim-runc-v2" v2.4.2
install ctr "$containerd/cmd/ctr" v2.4.2
need_seccomp
CGO_ENABLED=1 install runc github.com/opencontainers/runc v1.4.0 -tags seccomp
