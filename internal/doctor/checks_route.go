package doctor

// The route layer: the default route stays off the training
// interfaces (route).

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/rdmanet/rdmanet/internal/lint"
)

// ---- route ----

var netN = regexp.MustCompile(`^net\d+$`)

func (c *checker) route() {
	in := c.in
	if in.RouteErr != nil {
		c.add(IDDefaultRoute, Warn, "routing table unreadable: "+in.RouteErr.Error(), "point --proc-root at the procfs of the node or pod (net/route)")
		return
	}
	if len(in.DefaultRouteLinks) == 0 {
		c.add(IDDefaultRoute, Pass, "no default route in this network namespace", "")
		return
	}
	hca, hcaSet := in.Env["NCCL_IB_HCA"]
	training := map[string]string{} // netdev -> why
	for _, t := range in.TrainingIfs {
		training[t] = "named by --training-if"
	}
	for nd := range in.Netdevs {
		if netN.MatchString(nd) {
			training[nd] = "a secondary pod interface (netN)"
		}
	}
	for _, f := range c.node.Functions {
		if !f.HasRDMA() {
			continue
		}
		for _, d := range f.RDMA {
			if hcaSet && lint.FilterSelects(hca, d.Name) {
				for _, nd := range f.Netdevs {
					training[nd] = "netdev of " + d.Name + ", selected by NCCL_IB_HCA=" + hca
				}
			}
		}
		if f.IsVF {
			for _, nd := range f.Netdevs {
				training[nd] = "netdev of the SR-IOV VF " + f.RDMAName()
			}
		}
	}
	var bad []string
	for _, l := range in.DefaultRouteLinks {
		if why, ok := training[l]; ok {
			bad = append(bad, l+" ("+why+")")
		}
	}
	if len(bad) > 0 {
		c.add(IDDefaultRoute, Fail, "the default route is on a training interface: "+strings.Join(bad, ", ")+"; pod/node traffic (DNS, API server, storage) would leave over the RDMA network",
			"no default route on the training net: drop `gateway` and any 0.0.0.0/0 entry from the NAD's IPAM `routes` (keep only the training subnet), or `ip route del default dev <if>` on the node")
		return
	}
	for _, l := range in.DefaultRouteLinks {
		f := c.node.ByNetdev(l)
		if f != nil && f.HasRDMA() && !hcaSet {
			c.add(IDDefaultRoute, Warn, fmt.Sprintf("the default route is on %s, whose RDMA device %s NCCL will also use (NCCL_IB_HCA unset)", l, f.RDMAName()),
				fmt.Sprintf("set NCCL_IB_HCA to the training HCAs (e.g. NCCL_IB_HCA=^%s) and keep %s out of the RDMA device pools", f.RDMAName(), l))
			return
		}
	}
	c.add(IDDefaultRoute, Pass, "default route via "+strings.Join(in.DefaultRouteLinks, ", ")+", not a training interface", "")
}
