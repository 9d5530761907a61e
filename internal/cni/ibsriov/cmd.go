package ibsriov

import (
	"cmp"
	"fmt"
	"os"
	"sync"

	"github.com/containernetworking/cni/pkg/skel"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/rdmanet/rdmanet/internal/cni/verbs"
	"github.com/rdmanet/rdmanet/internal/guidpool"
	rdmaipam "github.com/rdmanet/rdmanet/internal/ipam"
	"github.com/rdmanet/rdmanet/internal/netops"
)

// Versions are the CNI spec versions the plugin speaks (ib-sriov-cni: all).
var Versions = version.PluginSupports("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")

// About is printed for CNI VERSION-less invocations.
const About = "ib-sriov CNI plugin (rdmanet): gives a pod an InfiniBand VF with its GUID (from the pod or the GUID pool) and restores it on DEL"

// FromEnv builds the plugin from the process environment: what every
// rdmanet plugin reads (verbs.FromEnv: RDMANET_SYSFS_ROOT,
// RDMANET_CNI_STATE_DIR, the test switches of test builds), and
// RDMANET_GUID_POOL_CONFIG and NODENAME for the GUID pool.
func FromEnv(getenv func(string) string) (*Plugin, error) {
	if getenv == nil {
		getenv = os.Getenv // the GUID pool's settings are read later, from the same environment
	}
	e, err := verbs.FromEnv(getenv, "ib-sriov", DefaultStateDir, nil)
	if err != nil {
		return nil, err
	}
	ib, ok := e.Ops.VF.(netops.IBVF)
	if !ok {
		return nil, fmt.Errorf("ib-sriov: the VF implementation %T cannot set InfiniBand GUIDs", e.Ops.VF)
	}
	p := &Plugin{Sysfs: e.Sysfs, VF: e.Ops.VF, IB: ib, RDMA: e.Ops.RDMA, IPAM: verbs.ExecIPAM{}, StateDir: e.StateDir, Fault: e.Fault, Warnf: e.Warnf}
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
	return p, nil
}

// Funcs adapts the plugin (or the error building it) to skel.
func Funcs(p *Plugin, buildErr error) skel.CNIFuncs { return verbs.Skel(p.Run, buildErr) }

// Run runs one CNI verb and returns what the binary prints on stdout.
func (p *Plugin) Run(cmd string, a *skel.CmdArgs) ([]byte, error) {
	return verbs.Cmd[*Config, *current.Result]{Add: p.Add, Del: p.Del, Check: p.Check, ParseLoose: ParseLoose}.Run(cmd, a)
}

// Header is the config's cniVersion and network name (verbs.Config).
func (c *Config) Header() (cniVersion, network string) { return c.CNIVersion, c.Name }
