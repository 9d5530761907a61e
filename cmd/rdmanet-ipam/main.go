// Command rdmanet-ipam is rdmanet's cluster-wide CNI IPAM plugin. It accepts
// Whereabouts' config fields verbatim, so it can be installed under its own
// name or as "whereabouts". It is a thin client: it hands each call to the
// node's rdmanet-daemon (package forward), which runs it with warm API
// clients, and runs rdmanet-ipam-direct (installed next to it) when no
// daemon answers. `rdmanet-ipam gc [flags]` runs garbage collection (in
// rdmanet-ipam-direct). See docs/ipam.md.
package main

import (
	"bytes"
	"fmt"
	"os"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	cniversion "github.com/containernetworking/cni/pkg/version"

	"github.com/rdmanet/rdmanet/internal/cni/forward"
	"github.com/rdmanet/rdmanet/internal/version"
)

// direct is the per-call plugin this one falls back to.
const direct = "rdmanet-ipam-direct"

func main() {
	version.Handle("rdmanet-ipam", os.Args[1:])
	if len(os.Args) > 1 && os.Args[1] == "gc" {
		bin, err := forward.Find(direct, "")
		if err != nil {
			fmt.Fprintf(os.Stderr, "rdmanet-ipam gc: %v\n", err)
			os.Exit(2)
		}
		if err := forward.Run(bin, os.Args[1:], os.Stdin); err != nil {
			fmt.Fprintf(os.Stderr, "rdmanet-ipam gc: %v\n", err)
			os.Exit(2)
		}
		return
	}
	forward.Main("rdmanet-ipam", func() {
		run := func(a *skel.CmdArgs) error {
			bin, err := forward.Find(direct, a.Path)
			if err != nil {
				return types.NewError(types.ErrInternal, "rdmanet-ipam: no rdmanet daemon answered, and "+err.Error(), "")
			}
			if err := forward.Run(bin, nil, bytes.NewReader(a.StdinData)); err != nil {
				return types.NewError(types.ErrInternal, "rdmanet-ipam: "+err.Error(), "")
			}
			return nil
		}
		skel.PluginMainFuncs(skel.CNIFuncs{Add: run, Del: run, Check: run, GC: run, Status: run},
			cniversion.All, "rdmanet-ipam: cluster-wide IPAM (Whereabouts-compatible)")
	})
}
