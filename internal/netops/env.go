package netops

import (
	"fmt"
	"os"
	"path/filepath"
)

// Environment variables that select the implementation in CNI plugin
// processes (the CNI config stays upstream-compatible).
const (
	EnvImpl  = "RDMANET_NETOPS"
	EnvState = "RDMANET_NETOPS_STATE"
	// EnvSysfsRoot is the sysfs root the plugins read (default /sys).
	EnvSysfsRoot = "RDMANET_SYSFS_ROOT"
	// EnvCNIStateDir is the state root of the sriov and rdma plugins;
	// each keeps its caches and locks in <dir>/<plugin>.
	EnvCNIStateDir = "RDMANET_CNI_STATE_DIR"
)

// PluginStateDir is <RDMANET_CNI_STATE_DIR>/<plugin>, or def when unset.
func PluginStateDir(getenv func(string) string, plugin, def string) string {
	if d := getenv(EnvCNIStateDir); d != "" {
		return filepath.Join(d, plugin)
	}
	return def
}

// Ops bundles the hardware-facing implementations a plugin needs.
type Ops struct {
	VF   VFConfigurator
	RDMA RDMA
	// Warnings name the test switches the environment set and this build
	// ignored; the plugin logs them (once per process).
	Warnings []string
}

// FromEnv returns the kernel implementation, or the Recorder when
// RDMANET_NETOPS=record (then RDMANET_NETOPS_STATE names its state file)
// in a build that honours test switches (TestHooks).
//
// A production build fails closed on RDMANET_NETOPS=record: every CNI
// command but DEL is refused with ErrTestSwitch (the data plane is never
// silently turned into a no-op, nor is a NIC someone meant to simulate
// configured for real); DEL runs against the kernel with a warning, since
// what it restores can only have been done by the kernel (this build
// refused every recorded ADD) and a refused DEL would leave the pod stuck.
// RDMANET_CNI_FAULT is ignored there with a warning (FailpointFromEnv
// returns nil).
func FromEnv(getenv func(string) string) (Ops, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	return fromEnv(getenv, TestHooks())
}

func fromEnv(getenv func(string) string, hooks bool) (Ops, error) {
	ops := Ops{VF: Netlink{}, RDMA: Netlink{}}
	if v := getenv(EnvFault); v != "" && !hooks {
		ops.Warnings = append(ops.Warnings, fmt.Sprintf("%s=%q ignored: failpoints are a test switch and this is a production build (no -tags %s); remove it from the plugin's environment",
			EnvFault, v, TestHooksTag))
	}
	switch impl := getenv(EnvImpl); impl {
	case "", "netlink":
		return ops, nil
	case "record":
		if !hooks {
			if getenv("CNI_COMMAND") != "DEL" {
				return Ops{}, testSwitchError(EnvImpl, impl)
			}
			ops.Warnings = append(ops.Warnings, fmt.Sprintf("%s=%s ignored for DEL: this is a production build (no -tags %s); restoring through the kernel, "+
				"which made whatever this build set up; remove %s from the plugin's environment", EnvImpl, impl, TestHooksTag, EnvImpl))
			return ops, nil
		}
		p := getenv(EnvState)
		if p == "" {
			return Ops{}, fmt.Errorf("%s=record needs %s=<state file> so that plugin processes share the simulated NIC", EnvImpl, EnvState)
		}
		r := NewRecorder(p)
		return Ops{VF: r, RDMA: r, Warnings: ops.Warnings}, nil
	default:
		return Ops{}, fmt.Errorf("%s=%q: want netlink (default) or record", EnvImpl, impl)
	}
}
