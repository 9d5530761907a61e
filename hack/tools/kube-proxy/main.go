// Command kube-proxy is the upstream Service proxy, built from the published
// k8s.io/kubernetes module for rdmanet's multi-node cluster tier (one per node,
// iptables mode inside the node's network namespace).
// hack/build-k8s-tools.sh builds it into .tools/bin.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client metric registration
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric registration
	"k8s.io/kubernetes/cmd/kube-proxy/app"
)

func main() {
	os.Exit(cli.Run(app.NewProxyCommand()))
}
