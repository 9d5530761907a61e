// Command rdmanet-ipam is rdmanet's cluster-wide CNI IPAM plugin. It accepts
// Whereabouts' config fields verbatim, so it can be installed under its own
// name or as "whereabouts". `rdmanet-ipam gc [flags]` runs garbage collection.
// See docs/ipam.md.
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
	version.Handle("rdmanet-ipam", os.Args[1:])
	if len(os.Args) > 1 && os.Args[1] == "gc" {
		os.Exit(gc.Main(os.Args[2:], os.Stdout, os.Stderr))
	}
	p := ipam.NewPlugin()
	skel.PluginMainFuncs(p.Funcs(),
		cniversion.All, "rdmanet-ipam: cluster-wide IPAM (Whereabouts-compatible)")
}
