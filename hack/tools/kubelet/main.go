// Command kubelet is the upstream Kubernetes node agent, built from the
// published k8s.io/kubernetes module for rdmanet's real-node tier
// (hack/cluster). hack/build-k8s-tools.sh builds it into .tools/bin.
package main

import (
	"context"
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	os.Exit(cli.Run(app.NewKubeletCommand(context.Background())))
}
