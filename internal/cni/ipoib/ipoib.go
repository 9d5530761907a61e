package ipoib

import (
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/containernetworking/plugins/pkg/ip"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/utils/sysctl"

	"github.com/rdmanet/rdmanet/internal/cni/verbs"
	"github.com/rdmanet/rdmanet/internal/daemon/inproc/nsguard"
	"github.com/rdmanet/rdmanet/internal/netops"
	"github.com/rdmanet/rdmanet/internal/sysfs"
)

// ADD steps (failpoint names).
const (
	StepCreate = "create" // child created in the host netns
	StepMove   = "move"   // child in the pod netns as ifName, up
	StepIPAM   = "ipam"   // IPAM allocated and applied
)

// Steps lists the ADD steps in order.
var Steps = []string{StepCreate, StepMove, StepIPAM}

// IPAM runs the IPAM plugin named in the config (the daemon passes one
// that delegates through its own exec; sriov's IPAM satisfies it).
type IPAM = verbs.IPAM

// ExecIPAM execs the IPAM plugin from CNI_PATH, as plugins do.
type ExecIPAM = verbs.ExecIPAM

// Plugin holds what the verbs run over.
type Plugin struct {
	Sysfs sysfs.FS
	IPoIB netops.IPoIB
	// RDMA, when set, is asked for the RDMA subsystem's netns mode: the
	// pod shares the port's HCA only in shared mode (warned otherwise).
	RDMA  netops.RDMA
	IPAM  IPAM
	Fault *netops.Failpoint
	Warnf func(format string, args ...any)
}

func (p *Plugin) warnf(format string, args ...any) { verbs.Warn(p.Warnf, format, args...) }

// TempName is the host-side name of the child of (containerID, ifName)
// before it moves into the pod: fixed per attachment, so that a DEL finds
// and removes what an ADD that died between creating and moving it left.
func TempName(containerID, ifName string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(containerID + "/" + ifName))
	return fmt.Sprintf("ipoib%08x", h.Sum32())
}

// ResolveMaster returns the netdev the child is made from: the config's
// master, or the IPoIB netdev of the PCI function the meta plugin injected
// (deviceID of the shared pool's HCA), which must be an InfiniBand port.
func (p *Plugin) ResolveMaster(c *Config) (string, error) {
	if c.Master != "" {
		return c.Master, nil
	}
	nds := p.Sysfs.Netdevs(c.DeviceID)
	for _, nd := range nds {
		if t, _ := p.Sysfs.NetdevAttr(nd, "type"); t == "32" { // ARPHRD_INFINIBAND
			return nd, nil
		}
	}
	if len(nds) == 0 {
		return "", &ConfigError{Network: c.Name, Field: "master", Value: `""`,
			Rule: fmt.Sprintf("no master named and the injected deviceID %s has no netdev under %s (an IB-only function has no IPoIB interface)", c.DeviceID, p.Sysfs.PCIDevicePath(c.DeviceID)),
			Fix:  fixMaster, Err: ErrNoMaster}
	}
	return "", &ConfigError{Network: c.Name, Field: "master", Value: `""`,
		Rule: fmt.Sprintf("no master named and the netdevs of the injected deviceID %s (%v) are not IPoIB (link type 32): it is not an InfiniBand port", c.DeviceID, nds),
		Fix:  "on RoCE (Ethernet) ports use macvlan for shared mode; point the NAD's resourceName at an IB port's shared pool", Err: ErrNotInfiniBand}
}

// Add creates the IPoIB child, moves it into the pod as ifName, runs IPAM.
func (p *Plugin) Add(args *skel.CmdArgs) (_ types.Result, err error) {
	conf, err := Parse(args.StdinData)
	if err != nil {
		return nil, err
	}
	master, err := p.ResolveMaster(conf)
	if err != nil {
		return nil, err
	}
	podNS, err := verbs.OpenPodNS(args.Netns)
	if err != nil {
		return nil, err
	}
	defer podNS.Close()
	parent, err := p.IPoIB.IPoIBParent(master)
	if err != nil {
		if errors.Is(err, netops.ErrNotIPoIB) {
			return nil, fmt.Errorf("ipoib (network %q): master %q: %w; fix: name the IB port's IPoIB netdev (`ip -d link show` says ipoib); on a RoCE port shared mode is macvlan", conf.Name, master, err)
		}
		return nil, fmt.Errorf("ipoib (network %q): master %q: %w", conf.Name, master, err)
	}
	p.warnSharedHCA(conf.Name)
	child := netops.IPoIBChild{Name: TempName(args.ContainerID, args.IfName), Parent: parent.Name, PKey: parent.PKey, Mode: parent.Mode, Umcast: true, MTU: conf.MTU}
	if conf.HasPKey {
		child.PKey = conf.PKey
	}
	// a child left by an ADD that died before moving it
	if err := p.IPoIB.DelIPoIBChild(child.Name); err != nil {
		return nil, err
	}
	if err := p.IPoIB.AddIPoIBChild(child); err != nil {
		return nil, err
	}
	ipamDone, success := false, false
	defer func() {
		if success {
			return
		}
		var rb []error
		if ipamDone {
			rb = append(rb, p.IPAM.Del(conf.IPAMType, args.StdinData))
		}
		rb = append(rb, p.IPoIB.DelIPoIBChild(child.Name))
		rb = append(rb, podNS.Do(func(ns.NetNS) error { return p.IPoIB.DelIPoIBChild(args.IfName) }))
		if rbErr := errors.Join(rb...); rbErr != nil {
			err = fmt.Errorf("%w; rollback also failed (DEL removes the rest): %w", err, rbErr)
		}
	}()
	if err := p.Fault.Hit(StepCreate); err != nil {
		return nil, err
	}
	if err := netops.SetLinkNetns(child.Name, podNS); err != nil {
		return nil, err
	}
	var link netops.Link
	err = podNS.Do(func(ns.NetNS) error {
		if err := netops.RenameLink(child.Name, args.IfName); err != nil {
			return err
		}
		if conf.MTU > 0 {
			if err := netops.SetLinkMTU(args.IfName, conf.MTU); err != nil {
				return err
			}
		}
		// as ipoib-cni: the child answers ARP for its addresses on behalf of the port
		if _, err := sysctl.Sysctl(fmt.Sprintf("net/ipv4/conf/%s/proxy_arp", args.IfName), "1"); err != nil {
			return fmt.Errorf("set proxy_arp on %s: %w", args.IfName, err)
		}
		if err := netops.SetLinkUp(args.IfName); err != nil {
			return err
		}
		link, err = netops.LinkByName(args.IfName)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := p.Fault.Hit(StepMove); err != nil {
		return nil, err
	}
	result := &current.Result{
		CNIVersion: current.ImplementedSpecVersion,
		Interfaces: []*current.Interface{{Name: args.IfName, Mac: link.MAC.String(), Mtu: link.MTU, Sandbox: args.Netns}},
		DNS:        conf.NetConf.DNS,
	}
	if err := verbs.AddIPAM(p.IPAM, conf.IPAMType, args.StdinData, result, podNS, args.IfName, func() error { ipamDone = true; return nil }); err != nil {
		return nil, err
	}
	if len(result.DNS.Nameservers) == 0 && result.DNS.Domain == "" {
		result.DNS = conf.NetConf.DNS // the IPAM's answer names no DNS: the config's stays
	}
	if err := p.Fault.Hit(StepIPAM); err != nil {
		return nil, err
	}
	success = true
	return result, nil
}

// warnSharedHCA warns when the RDMA subsystem is in exclusive netns mode:
// the pod then gets net1 but does not see the port's RDMA device.
func (p *Plugin) warnSharedHCA(network string) {
	if p.RDMA == nil {
		return
	}
	if mode, err := p.RDMA.NetnsMode(); err == nil && mode == netops.RDMANetnsExclusive {
		p.warnf("ipoib (network %q): the RDMA subsystem is in exclusive netns mode, so the pod gets its IPoIB interface but not the port's RDMA device "+
			"(shared IPoIB mode shares the HCA; fix at boot: `rdma system set netns shared`)", network)
	}
}

// Del removes the child from the pod (and a child an interrupted ADD left
// in the host) and releases the address. It succeeds when the netns, the
// link or the allocation is already gone.
func (p *Plugin) Del(args *skel.CmdArgs) error {
	conf, err := ParseLoose(args.StdinData)
	if err != nil {
		conf = &Config{}
	}
	if err := p.IPoIB.DelIPoIBChild(TempName(args.ContainerID, args.IfName)); err != nil {
		p.warnf("ipoib DEL: host-side leftover: %v", err)
	}
	if args.Netns != "" {
		podNS, err := nsguard.GetNS(args.Netns)
		switch {
		case err == nil:
			err = podNS.Do(func(ns.NetNS) error { return p.IPoIB.DelIPoIBChild(args.IfName) })
			podNS.Close()
			if errors.Is(err, netops.ErrNotIPoIB) {
				p.warnf("ipoib DEL (container %s): %v; left in place", args.ContainerID, err)
			} else if err != nil {
				return err
			}
		case !verbs.NetnsGone(err):
			return fmt.Errorf("open pod netns %q: %w", args.Netns, err)
		}
	}
	return verbs.DelIPAM(p.IPAM, conf.IPAMType, args.StdinData)
}

// Check verifies the child is in the pod, of the IPoIB kind, up, and holds
// the prevResult's addresses and routes.
func (p *Plugin) Check(args *skel.CmdArgs) error {
	conf, err := ParseLoose(args.StdinData)
	if err != nil {
		return err
	}
	if err := verbs.CheckIPAM(p.IPAM, conf.IPAMType, args.StdinData); err != nil {
		return err
	}
	var res *current.Result
	if conf.NetConf.RawPrevResult != nil {
		if err := version.ParsePrevResult(&conf.NetConf); err != nil {
			return fmt.Errorf("ipoib CHECK: parse prevResult: %w", err)
		}
		if res, err = current.NewResultFromResult(conf.NetConf.PrevResult); err != nil {
			return fmt.Errorf("ipoib CHECK: prevResult: %w", err)
		}
	}
	podNS, err := verbs.OpenPodNS(args.Netns)
	if err != nil {
		return err
	}
	defer podNS.Close()
	return podNS.Do(func(ns.NetNS) error {
		l, err := netops.LinkByName(args.IfName)
		if err != nil {
			return fmt.Errorf("ipoib CHECK: %w", err)
		}
		if l.Kind != p.IPoIB.ChildKind() {
			return fmt.Errorf("ipoib CHECK: %s in pod netns %s is a %q link, want %q", args.IfName, args.Netns, l.Kind, p.IPoIB.ChildKind())
		}
		if !l.Up {
			return fmt.Errorf("ipoib CHECK: %s in pod netns %s is down", args.IfName, args.Netns)
		}
		if res == nil {
			return nil
		}
		if err := ip.ValidateExpectedInterfaceIPs(args.IfName, res.IPs); err != nil {
			return fmt.Errorf("ipoib CHECK: %w", err)
		}
		if err := ip.ValidateExpectedRoute(res.Routes); err != nil {
			return fmt.Errorf("ipoib CHECK: %w", err)
		}
		return nil
	})
}
