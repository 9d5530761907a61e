package verbs

import (
	"fmt"
	"os"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/rdmanet/rdmanet/internal/cni/confkeys"
	"github.com/rdmanet/rdmanet/internal/netops"
	"github.com/rdmanet/rdmanet/internal/sysfs"
)

// Env is what each of rdmanet's plugins (sriov, rdma, ib-sriov, ipoib)
// builds itself from.
type Env struct {
	// Ops are the hardware-facing implementations the environment selects.
	Ops   netops.Ops
	Sysfs sysfs.FS
	// StateDir is the plugin's state dir ("" for a plugin without one).
	StateDir string
	Fault    *netops.Failpoint
	// Warnf is where the plugin's warnings go.
	Warnf func(format string, args ...any)
}

// Stderr writes a warning line to stderr: the CNI log (the runtime's for a
// binary, the daemon's in-process). Errors are returned, not logged.
func Stderr(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

// Warn writes a warning through warnf; nil discards it.
func Warn(warnf func(format string, args ...any), format string, args ...any) {
	if warnf != nil {
		warnf(format, args...)
	}
}

// FromEnv reads the environment (getenv; nil is os.Getenv) of the plugin
// named plugin: RDMANET_SYSFS_ROOT, RDMANET_CNI_STATE_DIR (the plugin's
// state dir is <dir>/<plugin>, else defStateDir; none when defStateDir is
// ""), and the test switches RDMANET_NETOPS, RDMANET_NETOPS_STATE and
// RDMANET_CNI_FAULT, which only a -tags rdmanet_testhooks build honours
// (netops.FromEnv). Each switch this build ignores is warned of through
// warnf (nil is Stderr), which becomes the Env's Warnf.
func FromEnv(getenv func(string) string, plugin, defStateDir string, warnf func(format string, args ...any)) (*Env, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if warnf == nil {
		warnf = Stderr
	}
	ops, err := netops.FromEnv(getenv)
	if err != nil {
		return nil, err
	}
	e := &Env{Ops: ops, Sysfs: sysfs.New(getenv(netops.EnvSysfsRoot)), Fault: netops.FailpointFromEnv(getenv, plugin), Warnf: warnf}
	if defStateDir != "" {
		e.StateDir = netops.PluginStateDir(getenv, plugin, defStateDir)
	}
	for _, w := range ops.Warnings {
		warnf("%s: %s", plugin, w)
	}
	return e, nil
}

// WarnUnknownKeys warns, through warnf, of each key of an ADD's config that
// the plugin does not read (findings, with the key probably meant: `vlan_id`
// → `vlan`), naming the network, the container and where the plugin's keys
// are listed (keysDoc, e.g. "the upstream RDMA CNI keys are listed in
// docs/cni.md").
func WarnUnknownKeys(warnf func(format string, args ...any), a *skel.CmdArgs, network string, findings []confkeys.Finding, keysDoc string) {
	for _, f := range findings {
		warnf("%s (network %q, container %s); %s", f, network, a.ContainerID, keysDoc)
	}
}
