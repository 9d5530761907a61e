// Command kube-controller-manager is the upstream controller manager, built
// from the published k8s.io/kubernetes module for rdmanet's real-node tier.
// hack/build-k8s-tools.sh builds it into .tools/bin.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
