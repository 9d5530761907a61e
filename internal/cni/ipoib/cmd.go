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

// Run runs one CNI verb of a plugin built from getenv and returns what the
// binary prints on stdout. ipam, when not nil, replaces the exec'd IPAM
// plugin (an in-process caller delegates with the call's environment).
func Run(cmd string, args *skel.CmdArgs, getenv func(string) string, ipam IPAM) ([]byte, error) {
	return verbs.RunFromEnv(FromEnv, getenv, func(p *Plugin) { p.IPAM = verbs.Or[IPAM](ipam, p.IPAM) }, cmd, args)
}

// Funcs adapts the plugin (or the error building it) to skel.
func Funcs(p *Plugin, buildErr error) skel.CNIFuncs { return verbs.Skel(p.Run, buildErr) }

// Run runs one CNI verb and returns what the binary prints on stdout. An
// ADD first warns (CNI log) about every config key the plugin does not read.
func (p *Plugin) Run(cmd string, a *skel.CmdArgs) ([]byte, error) {
	return verbs.Cmd[*Config, types.Result]{Add: p.Add, Del: p.Del, Check: p.Check, ParseLoose: ParseLoose,
		UnknownKeys: UnknownKeys, KeysDoc: "the ipoib keys are listed in docs/infiniband.md", Warnf: p.warnf}.Run(cmd, a)
}

// Header is the config's cniVersion and network name (verbs.Config).
func (c *Config) Header() (cniVersion, network string) { return c.CNIVersion, c.Name }
