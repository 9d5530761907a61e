// Command ib-sriov is the rdmanet drop-in for ib-sriov-cni: installed under
// the same name, it reads the same NetworkAttachmentDefinition config. See
// docs/infiniband.md.
package main

import (
	"os"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/rdmanet/rdmanet/internal/cni/ibsriov"
	"github.com/rdmanet/rdmanet/internal/version"
)

func main() {
	version.Handle("ib-sriov", os.Args[1:])
	p, err := ibsriov.FromEnv(nil)
	skel.PluginMainFuncs(ibsriov.Funcs(p, err), ibsriov.Versions, ibsriov.About)
}
