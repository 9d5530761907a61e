package rdma

import (
	"os"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/rdmanet/rdmanet/internal/netops"
	"github.com/rdmanet/rdmanet/internal/sysfs"
)

// Versions are the CNI spec versions the plugin speaks.
var Versions = version.PluginSupports("0.3.1", "0.4.0", "1.0.0", "1.1.0")

// About is the plugin's description.
const About = "rdma CNI plugin (rdmanet): moves a VF's RDMA device into the pod netns (exclusive mode)"

// FromEnv builds the plugin from the process environment.
func FromEnv(getenv func(string) string) (*Plugin, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	ops, err := netops.FromEnv(getenv)
	if err != nil {
		return nil, err
	}
	dir := netops.PluginStateDir(getenv, "rdma", DefaultStateDir)
	return &Plugin{Sysfs: sysfs.New(getenv(netops.EnvSysfsRoot)), RDMA: ops.RDMA, StateDir: dir, Fault: netops.FailpointFromEnv(getenv, "rdma")}, nil
}

// Funcs adapts the plugin (or the error building it) to skel.
func Funcs(p *Plugin, buildErr error) skel.CNIFuncs {
	wrap := func(f func(*Plugin, *skel.CmdArgs) error) func(*skel.CmdArgs) error {
		return func(a *skel.CmdArgs) error {
			if buildErr != nil {
				return buildErr
			}
			return f(p, a)
		}
	}
	return skel.CNIFuncs{
		Add: wrap(func(p *Plugin, a *skel.CmdArgs) error {
			res, err := p.Add(a)
			if err != nil {
				return err
			}
			c, _ := ParseLoose(a.StdinData)
			return types.PrintResult(res, c.CNIVersion)
		}),
		Del:   wrap((*Plugin).Del),
		Check: wrap((*Plugin).Check),
	}
}
