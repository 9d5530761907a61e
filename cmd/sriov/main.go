// Command sriov is the rdmanet drop-in for the upstream SR-IOV CNI plugin.
package main

import (
	"github.com/containernetworking/cni/pkg/skel"

	"github.com/rdmanet/rdmanet/internal/cni/sriov"
)

func main() {
	p, err := sriov.FromEnv(nil)
	skel.PluginMainFuncs(sriov.Funcs(p, err), sriov.Versions, sriov.About)
}
