// Command ipoib is rdmanet's drop-in for ipoib-cni (installed under the same
// name): shared mode on InfiniBand, an IPoIB child of the IB port's netdev
// as the pod's interface. It runs the whole call in its own process; the
// node daemon execs it as it execs any delegate. See docs/infiniband.md.
package main

import (
	"os"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/rdmanet/rdmanet/internal/cni/ipoib"
	"github.com/rdmanet/rdmanet/internal/version"
)

func main() {
	version.Handle("ipoib", os.Args[1:])
	p, err := ipoib.FromEnv(nil)
	skel.PluginMainFuncs(ipoib.Funcs(p, err), ipoib.Versions, ipoib.About)
}
