// Command rdma is the rdmanet drop-in for the upstream RDMA CNI plugin.
package main

import (
	"github.com/containernetworking/cni/pkg/skel"

	"github.com/rdmanet/rdmanet/internal/cni/rdma"
)

func main() {
	p, err := rdma.FromEnv(nil)
	skel.PluginMainFuncs(rdma.Funcs(p, err), rdma.Versions, rdma.About)
}
