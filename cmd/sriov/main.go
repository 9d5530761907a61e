// Command sriov is the rdmanet drop-in for the upstream SR-IOV CNI plugin.
package main

import (
	"os"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/rdmanet/rdmanet/internal/cni/forward"
	"github.com/rdmanet/rdmanet/internal/cni/sriov"
	"github.com/rdmanet/rdmanet/internal/version"
)

func main() {
	version.Handle("sriov", os.Args[1:])
	// The node daemon runs the call in-process when it is up (and this
	// binary is its build); otherwise this process does the work.
	forward.Main("sriov", func() {
		p, err := sriov.FromEnv(nil)
		skel.PluginMainFuncs(sriov.Funcs(p, err), sriov.Versions, sriov.About)
	})
}
