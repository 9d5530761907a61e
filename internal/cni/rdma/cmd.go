package rdma

import (
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/rdmanet/rdmanet/internal/cni/verbs"
)

// Versions are the CNI spec versions the plugin speaks.
var Versions = version.PluginSupports("0.3.1", "0.4.0", "1.0.0", "1.1.0")

// About is the plugin's description.
const About = "rdma CNI plugin (rdmanet): moves a VF's RDMA device into the pod netns (exclusive mode)"

// FromEnv builds the plugin from the process environment (verbs.FromEnv:
// the same knobs and test switches as every rdmanet plugin; warnings go
// to stderr).
func FromEnv(getenv func(string) string) (*Plugin, error) {
	e, err := verbs.FromEnv(getenv, "rdma", DefaultStateDir, nil)
	if err != nil {
		return nil, err
	}
	return &Plugin{Sysfs: e.Sysfs, RDMA: e.Ops.RDMA, StateDir: e.StateDir, Fault: e.Fault}, nil
}

// Funcs adapts the plugin (or the error building it) to skel.
func Funcs(p *Plugin, buildErr error) skel.CNIFuncs { return verbs.Skel(p.Run, buildErr) }

// Run runs one CNI verb (ADD, DEL or CHECK) of a plugin built from getenv
// and returns what the binary prints on stdout: ADD's result in the
// config's cniVersion, nothing for DEL and CHECK. The CNI_* checks skel
// does before a verb are the caller's.
func Run(cmd string, args *skel.CmdArgs, getenv func(string) string) ([]byte, error) {
	return verbs.RunFromEnv(FromEnv, getenv, nil, cmd, args)
}

// Run runs one CNI verb and returns what the binary prints on stdout. An
// ADD first warns (CNI log) about every config key the plugin does not read.
func (p *Plugin) Run(cmd string, a *skel.CmdArgs) ([]byte, error) {
	return verbs.Cmd[*Config, types.Result]{Add: p.Add, Del: p.Del, Check: p.Check, ParseLoose: ParseLoose,
		UnknownKeys: UnknownKeys, KeysDoc: "the upstream RDMA CNI keys are listed in docs/cni.md"}.Run(cmd, a)
}

// Header is the config's cniVersion and network name (verbs.Config).
func (c *Config) Header() (cniVersion, network string) { return c.CNIVersion, c.Name }
