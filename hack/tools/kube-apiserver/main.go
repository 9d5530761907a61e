// Command kube-apiserver is the upstream Kubernetes API server, built from the
// published k8s.io/kubernetes module for rdmanet's apiserver test tier.
// hack/build-k8s-tools.sh builds it into .tools/bin.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
