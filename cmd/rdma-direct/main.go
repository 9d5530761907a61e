// Command rdma-direct is the rdmanet rdma plugin doing the whole call in its
// own process, as the upstream RDMA CNI plugin does. The rdma binary the
// runtime execs hands its call to the node daemon and becomes this one
// (exec) only when no daemon answers. See docs/cni.md.
package main

import (
	"os"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/rdmanet/rdmanet/internal/cni/rdma"
	"github.com/rdmanet/rdmanet/internal/version"
)

func main() {
	version.Handle("rdma-direct", os.Args[1:])
	p, err := rdma.FromEnv(nil)
	skel.PluginMainFuncs(rdma.Funcs(p, err), rdma.Versions, rdma.About)
}
