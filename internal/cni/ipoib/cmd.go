package ipoib

import (
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/rdmanet/rdmanet/internal/cni/verbs"
	"github.com/rdmanet/rdmanet/internal/netops"
)

// Versions are the CNI spec versions the plugin speaks.
// Every version, as ipoib-cni (its README examples name no cniVersion,
// which libcni reads as 0.1.0).
var Versions = version.All

// About is the plugin's description.
const About = "ipoib CNI plugin (rdmanet): an IPoIB child of the IB port's netdev as the pod's interface (shared mode on InfiniBand)"

// FromEnv builds the plugin from the process environment (verbs.FromEnv:
// RDMANET_SYSFS_ROOT and the test switches RDMANET_NETOPS(_STATE) and
// RDMANET_CNI_FAULT, which only a -tags rdmanet_testhooks build honours;
// the plugin keeps no state dir). Warnings go to stderr, the CNI log.
func FromEnv(getenv func(string) string) (*Plugin, error) {
	e, err := verbs.FromEnv(getenv, "ipoib", "", nil)
	if err != nil {
		return nil, err
	}
	return &Plugin{Sysfs: e.Sysfs, IPoIB: netops.IPoIBOf(e.Ops), RDMA: e.Ops.RDMA, IPAM: ExecIPAM{}, Fault: e.Fault, Warnf: e.Warnf}, nil
}

// Funcs adapts the plugin (or the error building it) to skel.
func Funcs(p *Plugin, buildErr error) skel.CNIFuncs { return verbs.Skel(p.Run, buildErr) }

// Run runs one CNI verb of a plugin built from getenv and returns what the
// binary prints on stdout. ipam, when not nil, replaces the exec'd IPAM
// plugin (an in-process caller delegates with the call's environment).
func Run(cmd string, args *skel.CmdArgs, getenv func(string) string, ipam IPAM) ([]byte, error) {
	p, err := FromEnv(getenv)
	if err != nil {
		return nil, err
	}
	if ipam != nil {
		p.IPAM = ipam
	}
	return p.Run(cmd, args)
}

// Run runs one CNI verb and returns what the binary prints on stdout. An
// ADD first warns (CNI log) about every config key the plugin does not read.
func (p *Plugin) Run(cmd string, a *skel.CmdArgs) ([]byte, error) {
	if cmd == "ADD" {
		verbs.WarnUnknownKeys(p.warnf, a, network(a.StdinData), UnknownKeys(a.StdinData), "the ipoib keys are listed in docs/infiniband.md")
	}
	return verbs.Verbs{
		Add:        func(a *skel.CmdArgs) (types.Result, error) { return p.Add(a) },
		Del:        p.Del,
		Check:      p.Check,
		CNIVersion: func(stdin []byte) string { c, _ := ParseLoose(stdin); return c.CNIVersion },
	}.Run(cmd, a)
}

// network is the config's network name ("" when it does not read).
func network(stdin []byte) string {
	if c, err := ParseLoose(stdin); err == nil {
		return c.Name
	}
	return ""
}
