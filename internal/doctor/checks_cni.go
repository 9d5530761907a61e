package doctor

// The CNI section: the node's CNI bin directory (whereabouts, -direct fallbacks).

import "strings"

// cni: a whereabouts binary that is not rdmanet's serves every NAD of
// "type": "whereabouts" with its own store (issue 13, defect 5); a thin
// rdmanet binary without its -direct binary fails every call while the
// daemon is down.
func (c *checker) cni() {
	c.whereabouts()
	c.fallbacks()
}

func (c *checker) fallbacks() {
	in := c.in
	switch {
	case in.CNIBinDir == "":
		c.add(IDCNIFallbacks, Pass, "CNI bin directory not checked (--cni-bin-dir is empty)", "")
	case in.FallbacksErr != nil:
		c.add(IDCNIFallbacks, Warn, "cannot check "+in.CNIBinDir+": "+in.FallbacksErr.Error(), "run doctor on the node, --cni-bin-dir=/opt/cni/bin")
	case len(in.MissingFallbacks) == 0:
		c.add(IDCNIFallbacks, Pass, "every thin rdmanet binary in "+in.CNIBinDir+" has its -direct binary", "")
	default:
		var missing []string
		for _, m := range in.MissingFallbacks {
			missing = append(missing, m.Binary+" without "+m.Direct)
		}
		c.add(IDCNIFallbacks, Fail, in.CNIBinDir+": "+strings.Join(missing, ", ")+": these forward each call to rdmanet-daemon and, when it does not answer, become their -direct binary; without it every call fails while the daemon is down",
			"rerun rdmanet-install (the rdmanet-node DaemonSet's install-cni init container does, on its next start), or copy the -direct binaries from the image's /opt/rdmanet/bin next to them")
	}
}

func (c *checker) whereabouts() {
	in := c.in
	p := in.CNIBinDir + "/whereabouts"
	switch {
	case in.CNIBinDir == "":
		c.add(IDWhereabouts, Pass, "CNI bin directory not checked (--cni-bin-dir is empty)", "")
	case in.WhereaboutsErr != nil:
		c.add(IDWhereabouts, Warn, "cannot check "+p+": "+in.WhereaboutsErr.Error(), "run doctor on the node, --cni-bin-dir=/opt/cni/bin")
	case in.WhereaboutsOwner == "":
		c.add(IDWhereabouts, Pass, "no whereabouts binary in "+in.CNIBinDir, "")
	case in.WhereaboutsOwner == "rdmanet":
		c.add(IDWhereabouts, Pass, p+" is rdmanet's rdmanet-ipam: NADs of \"type\": \"whereabouts\" use rdmanet-ipam", "")
	default:
		c.add(IDWhereabouts, Warn, p+" is not rdmanet's ("+in.WhereaboutsOwner+"): NADs of \"type\": \"whereabouts\" use it and its own store, not rdmanet-ipam; rdmanet-install leaves it in place",
			"use \"type\": \"rdmanet-ipam\" in the NADs meant for rdmanet, or migrate (docs/deploy.md \"Migrating from Whereabouts\")")
	}
}
