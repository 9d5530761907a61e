package lint

import (
	"fmt"

	"github.com/rdmanet/rdmanet/internal/manifest"
)

// RDMA100, RDMA101: ipoib networks, rdmanet's (and ipoib-cni's) shared
// mode on InfiniBand. The plugin refuses both cases at every ADD; lint says
// so before a pod is stuck in ContainerCreating.
func (c *checker) checkIPoIB(n *manifest.NAD, pools []*manifest.Pool) {
	for _, p := range n.Config.Plugins {
		if p.Type != "ipoib" {
			continue
		}
		master, _ := p.Raw["master"].(string)
		field := n.Config.PluginPath(p.Index) + ".master"
		if master == "" && n.ResourceName == "" {
			c.add("RDMA101", n.Obj, n.ConfigField, fmt.Sprintf("%s runs ipoib without \"master\" and without a resourceName: the plugin has no IB port to make the IPoIB child of", n.Ref()),
				"set \"master\" to the IB port's IPoIB netdev (ibdev2netdev shows it), or annotate the NAD with the shared IB pool's k8s.v1.cni.cncf.io/resourceName")
		}
		for _, pl := range pools {
			if len(pl.LinkTypes) > 0 && !poolIsIB(pl) {
				c.add("RDMA100", n.Obj, n.ResourceField, fmt.Sprintf("%s runs ipoib, but its resource %s is a pool of Ethernet links (linkTypes %s): an IPoIB child needs an InfiniBand port", n.Ref(), pl.FullName(), quoteList(pl.LinkTypes)),
					"point the resourceName at a shared pool of the IB port (linkTypes [\"infiniband\"]); on RoCE use macvlan")
			}
		}
		if master == "" {
			continue
		}
		for _, pl := range c.in.pools {
			if len(pl.LinkTypes) > 0 && !poolIsIB(pl) && contains(pl.Interfaces(), master) {
				c.add("RDMA100", n.Obj, field, fmt.Sprintf("%s makes an IPoIB child of master %q, which pool %s selects as an Ethernet link (linkTypes %s): an Ethernet netdev is no IPoIB parent", n.Ref(), master, pl.FullName(), quoteList(pl.LinkTypes)),
					"set master to the IB port's IPoIB netdev; on a RoCE port shared mode is macvlan")
			}
		}
	}
}
