package ibsriov

import (
	"cmp"
	"fmt"
	"os"
	"sync"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/rdmanet/rdmanet/internal/cni/sriov"
	"github.com/rdmanet/rdmanet/internal/cni/verbs"
	"github.com/rdmanet/rdmanet/internal/guidpool"
	rdmaipam "github.com/rdmanet/rdmanet/internal/ipam"
	"github.com/rdmanet/rdmanet/internal/netops"
	"github.com/rdmanet/rdmanet/internal/sysfs"
)

// Versions are the CNI spec versions the plugin speaks (ib-sriov-cni: all).
var Versions = version.PluginSupports("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")

// About is printed for CNI VERSION-less invocations.
const About = "ib-sriov CNI plugin (rdmanet): gives a pod an InfiniBand VF with its GUID (from the pod or the GUID pool) and restores it on DEL"

// FromEnv builds the plugin from the process environment: RDMANET_SYSFS_ROOT,
// RDMANET_CNI_STATE_DIR, RDMANET_GUID_POOL_CONFIG, NODENAME, and the test
// switches netops.FromEnv honours in test builds.
func FromEnv(getenv func(string) string) (*Plugin, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	ops, err := netops.FromEnv(getenv)
	if err != nil {
		return nil, err
	}
	ib, ok := ops.VF.(netops.IBVF)
	if !ok {
		return nil, fmt.Errorf("ib-sriov: the VF implementation %T cannot set InfiniBand GUIDs", ops.VF)
	}
	p := &Plugin{
		Sysfs:    sysfs.New(getenv(netops.EnvSysfsRoot)),
		VF:       ops.VF,
		IB:       ib,
		RDMA:     ops.RDMA,
		IPAM:     sriov.ExecIPAM{},
		StateDir: netops.PluginStateDir(getenv, "ib-sriov", DefaultStateDir),
		Fault:    netops.FailpointFromEnv(getenv, "ib-sriov"),
		Warnf:    func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) },
	}
	p.Pool = sync.OnceValues(func() (*guidpool.Pool, error) {
		cfg, err := guidpool.FromEnv(getenv)
		if err != nil || cfg == nil {
			return nil, err
		}
		for _, w := range cfg.Warnings {
			p.warnf("ib-sriov: %s", w)
		}
		host, _ := os.Hostname()
		return guidpool.Open(cfg, cmp.Or(getenv(rdmaipam.EnvNodeName), host))
	})
	for _, w := range ops.Warnings {
		p.warnf("ib-sriov: %s", w)
	}
	return p, nil
}

// Funcs adapts the plugin (or the error building it) to skel.
func Funcs(p *Plugin, buildErr error) skel.CNIFuncs { return verbs.Skel(p.Run, buildErr) }

// Run runs one CNI verb and returns what the binary prints on stdout.
func (p *Plugin) Run(cmd string, a *skel.CmdArgs) ([]byte, error) {
	return verbs.Verbs{
		Add:        func(a *skel.CmdArgs) (types.Result, error) { return p.Add(a) },
		Del:        p.Del,
		Check:      p.Check,
		CNIVersion: func(stdin []byte) string { c, _ := ParseLoose(stdin); return c.CNIVersion },
	}.Run(cmd, a)
}
