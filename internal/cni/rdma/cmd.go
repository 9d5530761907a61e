package rdma

import (
	"fmt"
	"os"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/rdmanet/rdmanet/internal/cni/verbs"
	"github.com/rdmanet/rdmanet/internal/netops"
	"github.com/rdmanet/rdmanet/internal/sysfs"
)

// Versions are the CNI spec versions the plugin speaks.
var Versions = version.PluginSupports("0.3.1", "0.4.0", "1.0.0", "1.1.0")

// About is the plugin's description.
const About = "rdma CNI plugin (rdmanet): moves a VF's RDMA device into the pod netns (exclusive mode)"

// FromEnv builds the plugin from the process environment (see
// sriov.FromEnv: the same knobs and test switches; warnings go to stderr).
func FromEnv(getenv func(string) string) (*Plugin, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	ops, err := netops.FromEnv(getenv)
	if err != nil {
		return nil, err
	}
	dir := netops.PluginStateDir(getenv, "rdma", DefaultStateDir)
	for _, w := range ops.Warnings {
		warnf("rdma: %s", w)
	}
	return &Plugin{Sysfs: sysfs.New(getenv(netops.EnvSysfsRoot)), RDMA: ops.RDMA, StateDir: dir, Fault: netops.FailpointFromEnv(getenv, "rdma")}, nil
}

// warnf writes a warning to stderr: the CNI log (the runtime's for the
// binary, the daemon's in-process). Errors are returned, not logged.
func warnf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

// Funcs adapts the plugin (or the error building it) to skel.
func Funcs(p *Plugin, buildErr error) skel.CNIFuncs { return verbs.Skel(p.Run, buildErr) }

// Run runs one CNI verb (ADD, DEL or CHECK) of a plugin built from getenv
// and returns what the binary prints on stdout: ADD's result in the
// config's cniVersion, nothing for DEL and CHECK. The CNI_* checks skel
// does before a verb are the caller's.
func Run(cmd string, args *skel.CmdArgs, getenv func(string) string) ([]byte, error) {
	p, err := FromEnv(getenv)
	if err != nil {
		return nil, err
	}
	return p.Run(cmd, args)
}

// Run runs one CNI verb and returns what the binary prints on stdout. An
// ADD first warns (CNI log) about every config key the plugin does not read.
func (p *Plugin) Run(cmd string, a *skel.CmdArgs) ([]byte, error) {
	if cmd == "ADD" {
		p.warnUnknownKeys(a)
	}
	return verbs.Verbs{
		Add:        func(a *skel.CmdArgs) (types.Result, error) { return p.Add(a) },
		Del:        p.Del,
		Check:      p.Check,
		CNIVersion: func(stdin []byte) string { c, _ := ParseLoose(stdin); return c.CNIVersion },
	}.Run(cmd, a)
}

// warnUnknownKeys logs a warning per key of the config that the plugin does
// not read, with the key probably meant (`vlan_id` → `vlan`).
func (p *Plugin) warnUnknownKeys(a *skel.CmdArgs) {
	name := ""
	if c, err := ParseLoose(a.StdinData); err == nil {
		name = c.Name
	}
	for _, f := range UnknownKeys(a.StdinData) {
		warnf("%s (network %q, container %s); the upstream RDMA CNI keys are listed in docs/cni.md", f, name, a.ContainerID)
	}
}
