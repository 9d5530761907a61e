// Command sriov-direct is the rdmanet sriov plugin doing the whole call in its
// own process, as the upstream SR-IOV CNI plugin does. The sriov binary the
// runtime execs hands its call to the node daemon and becomes this one
// (exec) only when no daemon answers. See docs/cni.md.
package main

import (
	"os"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/rdmanet/rdmanet/internal/cni/sriov"
	"github.com/rdmanet/rdmanet/internal/version"
)

func main() {
	version.Handle("sriov-direct", os.Args[1:])
	p, err := sriov.FromEnv(nil)
	skel.PluginMainFuncs(sriov.Funcs(p, err), sriov.Versions, sriov.About)
}
