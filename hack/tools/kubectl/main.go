// Command kubectl is the upstream Kubernetes CLI (k8s.io/kubectl v0.37.2),
// built when the kubectl on PATH is missing or outside the supported skew.
// hack/build-k8s-tools.sh builds it into .tools/bin.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
)

func main() {
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		os.Exit(1)
	}
}
