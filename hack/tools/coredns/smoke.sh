#!/usr/bin/env bash
# Smoke test of the built coredns (root): serves a `hosts` block on
# 127.0.0.1:PORT in a throwaway network namespace, next to a kubernetes-plugin
# block whose kubeconfig points at nothing (so the cluster's Corefile shape is
# parsed and started too), resolves a name with busybox nslookup, then removes
# the namespace.
#
#   hack/build-k8s-tools.sh coredns && sudo hack/tools/coredns/smoke.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
coredns="${TOOLS_BIN:-$(pwd)/.tools/bin}/coredns"
port="${PORT:-1053}"
ns="rdmanet-coredns-smoke-$$"
dir=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

cat >"$dir/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters: [{name: none, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: none, user: {token: none}}]
contexts: [{name: none, context: {cluster: none, user: none}}]
current-context: none
KC
cat >"$dir/Corefile" <<CF
.:$port {
    bind 127.0.0.1
    errors
    hosts {
        10.96.0.10 rank0.smoke.test
        fallthrough
    }
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $dir/kubeconfig
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        startup_timeout 1s
    }
    cache 5
}
CF

ip netns add "$ns"
ip -n "$ns" link set lo up
ip netns exec "$ns" "$coredns" -conf "$dir/Corefile" >"$dir/log" 2>&1 &
pid=$!
for _ in $(seq 50); do
  grep -q "^\.:$port on 127.0.0.1" "$dir/log" && break
  kill -0 "$pid" 2>/dev/null || { cat "$dir/log" >&2; exit 1; }
  sleep 0.2
done
out=$(ip netns exec "$ns" busybox nslookup -port="$port" rank0.smoke.test 127.0.0.1) ||
  { echo "$out" >&2; cat "$dir/log" >&2; echo "coredns smoke: FAIL" >&2; exit 1; }
grep -q 'Address: 10.96.0.10' <<<"$out" ||
  { echo "$out" >&2; echo "coredns smoke: FAIL (wrong answer)" >&2; exit 1; }
echo "coredns smoke: ok ($("$coredns" -version | head -1) answered rank0.smoke.test = 10.96.0.10 on 127.0.0.1:$port in netns $ns)"
