#!/usr/bin/env bash
# Builds real Kubernetes components from their Go modules into a cached tools
# directory (default .tools/bin, gitignored).
#
#   hack/build-k8s-tools.sh            etcd + kube-apiserver (the apiserver test tier)
#   hack/build-k8s-tools.sh NAME...    just those, e.g. the real node's
#                                      kubelet kube-controller-manager kube-scheduler kubectl,
#                                      the multi-node cluster's kube-proxy coredns
#
#   kube-apiserver, kubelet,        from k8s.io/kubernetes v1.37.2 (staging modules
#   kube-controller-manager,        replaced by their published v0.37.2), one tool
#   kube-scheduler, kube-proxy      module each under hack/tools/<name>
#   kubectl                         from k8s.io/kubectl v0.37.2, hack/tools/kubectl
#   etcd                            from go.etcd.io/etcd/server/v3 v3.6.8, hack/tools/etcd
#   coredns                         from github.com/coredns/coredns v1.15.0, hack/tools/coredns:
#                                   a main with only the cluster's plugins (its
#                                   smoke test: sudo hack/tools/coredns/smoke.sh)
#
# The modules share the Go build cache: after kube-apiserver, each further
# Kubernetes binary costs a few minutes cold, seconds warm. coredns pins its own
# dependency versions, so it shares little of it: 10 minutes cold on a loaded
# 2-core machine.
#
# The Kubernetes binaries report their release (`kubectl version`, the API
# server's /version, the Node's kubeletVersion) as an upstream build does:
# the version variables of k8s.io/component-base/version are set from the
# tool module's k8s.io/component-base (v0.37.2 -> v1.37.2). Without them
# they report v0.0.0-master, which clients that check the server's version
# refuse (a chart's kubeVersion constraint, for one).
#
# A binary is rebuilt only when it is missing, older than its tool module's
# go.mod/go.sum/main.go, or built with other linker flags (a stamp
# <binary>.ldflags records them), so repeated `make test` runs cost nothing.
# Environment: TOOLS_BIN (output dir), FORCE=1 (rebuild), GO (go command).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
bin="${TOOLS_BIN:-$root/.tools/bin}"
GO="${GO:-go}"
export GOFLAGS="${GOFLAGS:--buildvcs=false}"
mkdir -p "$bin"

# ldflags_for $1 source dir: the linker flags of its tool (the version
# variables for a module that builds on k8s.io/component-base).
ldflags_for() {
  local src="$1" cb major minor
  cb=$(awk '$1 == "k8s.io/component-base" && $2 ~ /^v0\./ { print $2; exit }' "$src/go.mod")
  if [ -z "$cb" ]; then
    echo "-s -w"
    return
  fi
  # v0.37.2 -> v1.37.2, major 1, minor 37
  local v="v1.${cb#v0.}"
  minor="${cb#v0.}"; minor="${minor%%.*}"; major=1
  local p=k8s.io/component-base/version
  echo "-s -w -X $p.gitVersion=$v -X $p.gitMajor=$major -X $p.gitMinor=$minor -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
}

needs_build() { # $1 binary, $2 source dir
  local out="$1" src="$2"
  [ "${FORCE:-0}" = 1 ] && return 0
  [ -x "$out" ] || return 0
  [ "$(cat "$out.ldflags" 2>/dev/null)" = "$(ldflags_for "$src")" ] || return 0
  local f
  for f in "$src"/go.mod "$src"/go.sum "$src"/main.go; do
    [ "$f" -nt "$out" ] && return 0
  done
  return 1
}

build() { # $1 name
  local name="$1" src="$root/hack/tools/$1" out="$bin/$1"
  if ! needs_build "$out" "$src"; then
    echo "k8s-tools: $name up to date ($out)"
    return 0
  fi
  echo "k8s-tools: building $name into $out (first build takes several minutes)"
  local start; start=$(date +%s)
  # Build to a temp name and rename, so an interrupted build never leaves a
  # truncated binary that later looks "up to date".
  local ldflags; ldflags=$(ldflags_for "$src")
  (cd "$src" && "$GO" build -trimpath -ldflags="$ldflags" -o "$out.tmp.$$" .)
  mv -f "$out.tmp.$$" "$out"
  echo "$ldflags" > "$out.ldflags"
  echo "k8s-tools: built $name in $(( $(date +%s) - start ))s"
}

if [ $# -eq 0 ]; then
  set -- etcd kube-apiserver
fi
for name in "$@"; do
  if [ ! -f "$root/hack/tools/$name/go.mod" ]; then
    echo "k8s-tools: unknown tool $name (no hack/tools/$name/go.mod)" >&2
    exit 2
  fi
  build "$name"
done
