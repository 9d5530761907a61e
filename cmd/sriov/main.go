// Command sriov is the rdmanet drop-in for the upstream SR-IOV CNI plugin.
package main

import (
	"os"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/rdmanet/rdmanet/internal/cni/sriov"
	"github.com/rdmanet/rdmanet/internal/version"
)

func main() {
	version.Handle("sriov", os.Args[1:])
	p, err := sriov.FromEnv(nil)
	skel.PluginMainFuncs(sriov.Funcs(p, err), sriov.Versions, sriov.About)
}
