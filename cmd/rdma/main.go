// Command rdma is the rdmanet drop-in for the upstream RDMA CNI plugin.
package main

import (
	"os"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/rdmanet/rdmanet/internal/cni/forward"
	"github.com/rdmanet/rdmanet/internal/cni/rdma"
	"github.com/rdmanet/rdmanet/internal/version"
)

func main() {
	version.Handle("rdma", os.Args[1:])
	// The node daemon runs the call in-process when it is up (and this
	// binary is its build); otherwise this process does the work.
	forward.Main("rdma", func() {
		p, err := rdma.FromEnv(nil)
		skel.PluginMainFuncs(rdma.Funcs(p, err), rdma.Versions, rdma.About)
	})
}
