package sriov

import (
	"fmt"
	"os"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/rdmanet/rdmanet/internal/netops"
	"github.com/rdmanet/rdmanet/internal/sysfs"
)

// Versions are the CNI spec versions the plugin speaks.
var Versions = version.PluginSupports("0.3.1", "0.4.0", "1.0.0", "1.1.0")

// About is printed for CNI VERSION-less invocations.
const About = "sriov CNI plugin (rdmanet): moves an allocated SR-IOV VF into the pod and restores it on DEL"

// FromEnv builds the plugin for a CNI invocation from the process
// environment (RDMANET_SYSFS_ROOT, RDMANET_CNI_STATE_DIR, RDMANET_NETOPS,
// RDMANET_NETOPS_STATE, RDMANET_CNI_FAULT).
func FromEnv(getenv func(string) string) (*Plugin, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	ops, err := netops.FromEnv(getenv)
	if err != nil {
		return nil, err
	}
	stateDir := netops.PluginStateDir(getenv, "sriov", DefaultStateDir)
	return &Plugin{
		Sysfs:    sysfs.New(getenv(netops.EnvSysfsRoot)),
		VF:       ops.VF,
		IPAM:     ExecIPAM{},
		StateDir: stateDir,
		Fault:    netops.FailpointFromEnv(getenv, "sriov"),
		Warnf:    func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) },
	}, nil
}

// Funcs adapts the plugin (or the error building it) to skel.
func Funcs(p *Plugin, buildErr error) skel.CNIFuncs {
	wrap := func(f func(*skel.CmdArgs) error) func(*skel.CmdArgs) error {
		return func(a *skel.CmdArgs) error {
			if buildErr != nil {
				return buildErr
			}
			return f(a)
		}
	}
	return skel.CNIFuncs{
		Add: wrap(func(a *skel.CmdArgs) error {
			res, err := p.Add(a)
			if err != nil {
				return err
			}
			c, _ := ParseLoose(a.StdinData)
			return types.PrintResult(res, c.CNIVersion)
		}),
		Del:   wrap(func(a *skel.CmdArgs) error { return p.Del(a) }),
		Check: wrap(func(a *skel.CmdArgs) error { return p.Check(a) }),
	}
}
