// Command rdmanet-ipam-direct is rdmanet-ipam doing the whole call in its
// own process (kubeconfig, API client, allocation). The rdmanet-ipam binary
// the runtime execs hands its call to the node daemon and runs this one only
// when no daemon answers; `rdmanet-ipam gc` runs here too. See docs/ipam.md.
package main

import (
	"os"

	"github.com/containernetworking/cni/pkg/skel"
	cniversion "github.com/containernetworking/cni/pkg/version"

	"github.com/rdmanet/rdmanet/internal/ipam"
	"github.com/rdmanet/rdmanet/internal/ipam/gc"
	"github.com/rdmanet/rdmanet/internal/version"
)

func main() {
	version.Handle("rdmanet-ipam-direct", os.Args[1:])
	if len(os.Args) > 1 && os.Args[1] == "gc" {
		os.Exit(gc.Main(os.Args[2:], os.Stdout, os.Stderr))
	}
	p := ipam.NewPlugin()
	skel.PluginMainFuncs(p.Funcs(),
		cniversion.All, "rdmanet-ipam: cluster-wide IPAM (Whereabouts-compatible), per call")
}
