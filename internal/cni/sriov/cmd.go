package sriov

import (
	"github.com/containernetworking/cni/pkg/skel"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/rdmanet/rdmanet/internal/cni/verbs"
)

// Versions are the CNI spec versions the plugin speaks.
var Versions = version.PluginSupports("0.3.1", "0.4.0", "1.0.0", "1.1.0")

// About is printed for CNI VERSION-less invocations.
const About = "sriov CNI plugin (rdmanet): moves an allocated SR-IOV VF into the pod and restores it on DEL"

// FromEnv builds the plugin for a CNI invocation from the process
// environment, as every rdmanet plugin (verbs.FromEnv: RDMANET_SYSFS_ROOT,
// RDMANET_CNI_STATE_DIR and the test switches only a -tags
// rdmanet_testhooks build honours). Warnings (test switches this build
// ignores) go to stderr, the CNI log.
func FromEnv(getenv func(string) string) (*Plugin, error) {
	e, err := verbs.FromEnv(getenv, "sriov", DefaultStateDir, nil)
	if err != nil {
		return nil, err
	}
	return &Plugin{Sysfs: e.Sysfs, VF: e.Ops.VF, IPAM: ExecIPAM{}, StateDir: e.StateDir, Fault: e.Fault, Warnf: e.Warnf}, nil
}

// Funcs adapts the plugin (or the error building it) to skel.
func Funcs(p *Plugin, buildErr error) skel.CNIFuncs { return verbs.Skel(p.Run, buildErr) }

// Run runs one CNI verb (ADD, DEL or CHECK) of a plugin built from getenv
// and returns what the binary prints on stdout: ADD's result in the
// config's cniVersion, nothing for DEL and CHECK. ipam, when not nil,
// replaces the exec'd IPAM plugin (an in-process caller passes one that
// delegates with the call's environment, not its own). The CNI_* checks
// skel does before a verb are the caller's.
func Run(cmd string, args *skel.CmdArgs, getenv func(string) string, ipam IPAM) ([]byte, error) {
	return verbs.RunFromEnv(FromEnv, getenv, func(p *Plugin) { p.IPAM = verbs.Or[IPAM](ipam, p.IPAM) }, cmd, args)
}

// Run runs one CNI verb and returns what the binary prints on stdout. An
// ADD first warns (CNI log) about every config key the plugin does not read.
func (p *Plugin) Run(cmd string, a *skel.CmdArgs) ([]byte, error) {
	return verbs.Cmd[*Config, *current.Result]{Add: p.Add, Del: p.Del, Check: p.Check, ParseLoose: ParseLoose,
		UnknownKeys: UnknownKeys, KeysDoc: "the upstream SR-IOV CNI keys are listed in docs/cni.md", Warnf: p.warnf}.Run(cmd, a)
}

// Header is the config's cniVersion and network name (verbs.Config).
func (c *Config) Header() (cniVersion, network string) { return c.CNIVersion, c.Name }
