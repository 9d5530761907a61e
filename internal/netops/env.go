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
}

// FromEnv returns the kernel implementation, or the Recorder when
// RDMANET_NETOPS=record (then RDMANET_NETOPS_STATE names its state file).
func FromEnv(getenv func(string) string) (Ops, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	switch impl := getenv(EnvImpl); impl {
	case "", "netlink":
		return Ops{VF: Netlink{}, RDMA: Netlink{}}, nil
	case "record":
		p := getenv(EnvState)
		if p == "" {
			return Ops{}, fmt.Errorf("%s=record needs %s=<state file> so that plugin processes share the simulated NIC", EnvImpl, EnvState)
		}
		r := NewRecorder(p)
		return Ops{VF: r, RDMA: r}, nil
	default:
		return Ops{}, fmt.Errorf("%s=%q: want netlink (default) or record", EnvImpl, impl)
	}
}
