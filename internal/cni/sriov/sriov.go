package sriov

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ip"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/rdmanet/rdmanet/internal/cni/verbs"
	"github.com/rdmanet/rdmanet/internal/cni/vfrecord"
	"github.com/rdmanet/rdmanet/internal/netops"
	"github.com/rdmanet/rdmanet/internal/sysfs"
)

// DefaultStateDir is where the upstream SR-IOV CNI keeps its cache too.
const DefaultStateDir = "/var/lib/cni/sriov"

// ADD steps, in order; each is a failpoint name (netops.EnvFault).
const (
	StepCache    = "cache"     // original state recorded
	StepVFConfig = "vf-config" // VF configured through the PF
	StepMove     = "move"      // netdev moved into the pod netns
	StepRename   = "rename"    // renamed to the pod's ifname
	StepMAC      = "mac"       // netdev MAC set
	StepMTU      = "mtu"       // MTU set
	StepUp       = "up"        // link up
	StepIPAM     = "ipam"      // IPAM plugin allocated
	StepAddr     = "addr"      // addresses and routes applied
	StepResult   = "result"    // result cached
)

// Steps lists the ADD steps in order.
var Steps = []string{StepCache, StepVFConfig, StepMove, StepRename, StepMAC, StepMTU, StepUp, StepIPAM, StepAddr, StepResult}

// ErrVFInUse is returned by ADD when another container holds the VF.
var ErrVFInUse = errors.New("VF in use")

// IPAM runs the IPAM plugin named in the config (verbs.RecordIPAM: it
// also releases the address of a recorded attachment not the call's).
type IPAM = verbs.RecordIPAM

// ExecIPAM execs the IPAM plugin from CNI_PATH, as plugins do.
type ExecIPAM = verbs.ExecIPAM

// Plugin holds what the verbs run over.
type Plugin struct {
	Sysfs    sysfs.FS
	VF       netops.VFConfigurator
	IPAM     IPAM
	StateDir string
	Fault    *netops.Failpoint
	// Warnf reports what DEL tolerated (nil discards). Errors are returned, not logged.
	Warnf func(format string, args ...any)
}

// Record is the cache entry of one attached VF: everything needed to undo ADD.
type Record struct {
	vfrecord.Attachment
	PF      string `json:"pf"`      // PF netdev
	VFIndex int    `json:"vfIndex"` // N of virtfnN
	// Original state of the VF netdev in the host namespace.
	Netdev    string         `json:"netdev"`
	NetdevMAC string         `json:"netdevMAC"`
	MTU       int            `json:"mtu"`
	Up        bool           `json:"up"`
	VF        netops.VFState `json:"vf"`
	// What ADD did.
	Conf   Config `json:"conf"`
	PodMAC string `json:"podMAC,omitempty"`
	vfrecord.Call
}

func (p *Plugin) warnf(format string, args ...any) { verbs.Warn(p.Warnf, format, args...) }

// records is the plugin's record store, one record per VF in StateDir.
func (p *Plugin) records() vfrecord.Store[Record] {
	return vfrecord.Store[Record]{Dir: p.StateDir, Plugin: "sriov", CorruptHint: " (remove it after checking the VF by hand)", NameCaller: true}
}

// vfInfo is what sysfs says about a VF.
type vfInfo struct {
	PFBDF, PF string
	Index     int
	Netdev    string
}

func (p *Plugin) resolve(bdf string) (vfInfo, error) {
	if !p.Sysfs.Exists(bdf) {
		return vfInfo{}, cfgErr(ErrBadDeviceID, "deviceID", fmt.Sprintf("%q", bdf),
			fmt.Sprintf("must be a PCI function present under %s/bus/pci/devices", p.Sysfs.Root),
			"the device plugin pool lists a VF that no longer exists (sriov_numvfs changed?); restart the device plugin so it re-discovers VFs")
	}
	pf := p.Sysfs.PhysFn(bdf)
	if pf == "" {
		return vfInfo{}, cfgErr(ErrBadDeviceID, "deviceID", fmt.Sprintf("%q", bdf),
			"must be an SR-IOV VF (it has no physfn link: it is a PF or a plain NIC)",
			"select VFs in the device plugin pool (e.g. by VF device ID or pfNames), not PFs")
	}
	if drv := p.Sysfs.Driver(bdf); drv == "vfio-pci" || drv == "uio_pci_generic" || drv == "igb_uio" {
		return vfInfo{}, cfgErr(ErrBadDeviceID, "deviceID", fmt.Sprintf("%q", bdf),
			fmt.Sprintf("must be bound to a kernel netdev driver, is bound to %s (DPDK mode is not supported)", drv),
			"bind the VF to its kernel driver (e.g. mlx5_core) or select only kernel-driver VFs in the pool")
	}
	idx, err := p.Sysfs.VFIndex(pf, bdf)
	if err != nil {
		return vfInfo{}, fmt.Errorf("deviceID %s: %w", bdf, err)
	}
	pfNet := p.Sysfs.Netdevs(pf)
	if len(pfNet) == 0 {
		return vfInfo{}, fmt.Errorf("deviceID %s: its PF %s has no netdev in the host namespace, so the VF cannot be configured through it", bdf, pf)
	}
	return vfInfo{PFBDF: pf, PF: pfNet[0], Index: idx}, nil
}

// Add attaches the VF named by the config to the pod.
func (p *Plugin) Add(args *skel.CmdArgs) (*current.Result, error) {
	conf, err := Parse(args.StdinData)
	if err != nil {
		return nil, err
	}
	vf, err := p.resolve(conf.DeviceID)
	if err != nil {
		return nil, err
	}
	return verbs.AddRecorded(args.Netns, p.records(), conf.DeviceID, p.Fault, p.reclaim, func(at *verbs.Attach[Record]) (*current.Result, error) {
		podNS := at.PodNS

		nd := p.Sysfs.Netdevs(conf.DeviceID)
		if len(nd) == 0 {
			return nil, fmt.Errorf("%w: VF %s has no netdev in the host namespace (held by a pod that left no sriov cache, or its driver is not loaded)", ErrVFInUse, conf.DeviceID)
		}
		vf.Netdev = nd[0]
		link, err := netops.LinkByName(vf.Netdev)
		if errors.Is(err, netops.ErrLinkNotFound) {
			return nil, fmt.Errorf("%w: VF %s netdev %s is not in the host namespace (another pod holds it?): %w", ErrVFInUse, conf.DeviceID, vf.Netdev, err)
		}
		if err != nil {
			return nil, err
		}
		orig, err := p.VF.VFState(vf.PF, vf.Index)
		if err != nil {
			return nil, fmt.Errorf("read VF %d of %s: %w", vf.Index, vf.PF, err)
		}
		rec := &Record{
			Attachment: vfrecord.AttachmentOf(args, conf.DeviceID), PF: vf.PF, VFIndex: vf.Index,
			Netdev: vf.Netdev, NetdevMAC: link.MAC.String(), MTU: link.MTU, Up: link.Up, VF: orig,
			Conf: *conf, Call: vfrecord.Call{Stdin: args.StdinData},
		}
		if err := at.Begin(rec, func(hostNS, podNS ns.NetNS) error { return p.teardown(rec, hostNS, podNS, args.StdinData) }); err != nil {
			return nil, err
		}
		step := at.Step
		if err := step(StepCache); err != nil {
			return nil, err
		}

		if err := p.configureVF(vf.PF, vf.Index, conf); err != nil {
			return nil, err
		}
		if err := step(StepVFConfig); err != nil {
			return nil, err
		}

		if err := netops.SetLinkDown(vf.Netdev); err != nil {
			return nil, err
		}
		if err := netops.SetLinkNetns(vf.Netdev, podNS); err != nil {
			return nil, err
		}
		if err := step(StepMove); err != nil {
			return nil, err
		}

		var podLink netops.Link
		err = podNS.Do(func(ns.NetNS) error {
			if err := netops.RenameLink(vf.Netdev, args.IfName); err != nil {
				return err
			}
			if err := step(StepRename); err != nil {
				return err
			}
			if conf.MAC != "" {
				hw, _ := net.ParseMAC(conf.MAC)
				if err := netops.SetLinkMAC(args.IfName, hw); err != nil {
					return err
				}
			}
			if err := step(StepMAC); err != nil {
				return err
			}
			if conf.MTU != 0 {
				if err := netops.SetLinkMTU(args.IfName, conf.MTU); err != nil {
					return err
				}
			}
			if err := step(StepMTU); err != nil {
				return err
			}
			if err := netops.SetLinkUp(args.IfName); err != nil {
				return err
			}
			if err := step(StepUp); err != nil {
				return err
			}
			var err error
			podLink, err = netops.LinkByName(args.IfName)
			return err
		})
		if err != nil {
			return nil, err
		}
		rec.PodMAC = podLink.MAC.String()

		result := &current.Result{
			CNIVersion: current.ImplementedSpecVersion,
			Interfaces: []*current.Interface{{Name: args.IfName, Mac: podLink.MAC.String(), Mtu: podLink.MTU, Sandbox: args.Netns, PciID: conf.DeviceID}},
		}
		if err := verbs.AddIPAM(p.IPAM, conf.IPAMType, args.StdinData, result, podNS, args.IfName, func() error { return step(StepIPAM) }); err != nil {
			return nil, err
		}
		if err := at.Finish(StepAddr, &rec.Result, result, StepResult); err != nil {
			return nil, err
		}
		return result, nil
	})
}

func (p *Plugin) configureVF(pf string, idx int, c *Config) error {
	if c.MAC != "" {
		hw, _ := net.ParseMAC(c.MAC)
		if err := p.VF.SetVFMAC(pf, idx, hw); err != nil {
			return err
		}
	}
	if err := p.VF.SetVFVlan(pf, idx, c.Vlan, c.VlanQoS, c.VlanProto); err != nil {
		return err
	}
	if c.SpoofChk != nil {
		if err := p.VF.SetVFSpoofchk(pf, idx, *c.SpoofChk); err != nil {
			return err
		}
	}
	if c.Trust != nil {
		if err := p.VF.SetVFTrust(pf, idx, *c.Trust); err != nil {
			return err
		}
	}
	if c.LinkState != "" {
		if err := p.VF.SetVFLinkState(pf, idx, c.LinkState); err != nil {
			return err
		}
	}
	if c.MinTxRate != nil || c.MaxTxRate != nil {
		st, err := p.VF.VFState(pf, idx)
		if err != nil {
			return err
		}
		mn, mx := st.MinTxRate, st.MaxTxRate
		if c.MinTxRate != nil {
			mn = *c.MinTxRate
		}
		if c.MaxTxRate != nil {
			mx = *c.MaxTxRate
		}
		if err := p.VF.SetVFRate(pf, idx, mn, mx); err != nil {
			return err
		}
	}
	return nil
}

// restoreVF puts back what configureVF may have changed.
func (p *Plugin) restoreVF(r *Record) error {
	c, o := &r.Conf, r.VF
	var errs []error
	if c.MAC != "" {
		if hw, err := net.ParseMAC(o.MAC); err == nil {
			errs = append(errs, p.VF.SetVFMAC(r.PF, r.VFIndex, hw))
		}
	}
	errs = append(errs, p.VF.SetVFVlan(r.PF, r.VFIndex, o.Vlan, o.QoS, o.Proto))
	if c.SpoofChk != nil {
		errs = append(errs, p.VF.SetVFSpoofchk(r.PF, r.VFIndex, o.Spoofchk))
	}
	if c.Trust != nil {
		errs = append(errs, p.VF.SetVFTrust(r.PF, r.VFIndex, o.Trust))
	}
	if c.LinkState != "" {
		errs = append(errs, p.VF.SetVFLinkState(r.PF, r.VFIndex, o.LinkState))
	}
	if c.MinTxRate != nil || c.MaxTxRate != nil {
		errs = append(errs, p.VF.SetVFRate(r.PF, r.VFIndex, o.MinTxRate, o.MaxTxRate))
	}
	return errors.Join(errs...)
}

// Del detaches the pod's VF. It succeeds when there is nothing left to do.
func (p *Plugin) Del(args *skel.CmdArgs) error {
	conf, err := ParseLoose(args.StdinData)
	if err != nil {
		conf = &Config{} // a DEL must not fail on a config it cannot read: fall back to the cache
		p.warnf("sriov DEL: %v; using the cache", err)
	}
	stdin := args.StdinData
	if conf.IPAMType == "" {
		stdin = nil // use the cached config for IPAM DEL
	}
	return verbs.RecordDel[Record]{
		Records:     p.records(),
		StrictNetns: true,
		Warnf:       p.warnf,
		// ADD never recorded anything (it failed before touching the VF), or DEL already ran.
		Unrecorded: func() error { return verbs.DelIPAM(p.IPAM, conf.IPAMType, args.StdinData) },
		Undo:       func(r *Record, hostNS, podNS ns.NetNS) error { return p.teardown(r, hostNS, podNS, stdin) },
	}.Run(conf.DeviceID, args)
}

// Check verifies the interface, its addresses and routes and the VF
// settings against the cache and the previous result.
func (p *Plugin) Check(args *skel.CmdArgs) error {
	var problems []string
	conf, rec, prev, err := verbs.CheckRecord(p.records(), ParseLoose, args, func(r *Record) json.RawMessage { return r.Result })
	if err != nil {
		return err
	}
	if err := verbs.CheckIPAM(p.IPAM, conf.IPAMType, args.StdinData); err != nil {
		return err
	}
	podNS, err := verbs.OpenPodNS(args.Netns)
	if err != nil {
		return err
	}
	defer podNS.Close()
	err = podNS.Do(func(ns.NetNS) error {
		l, err := netops.LinkByName(args.IfName)
		if err != nil {
			return fmt.Errorf("interface %s of VF %s: %w", args.IfName, rec.DeviceID, err)
		}
		if l.MAC.String() != rec.PodMAC {
			problems = append(problems, fmt.Sprintf("%s MAC is %s, want %s", args.IfName, l.MAC, rec.PodMAC))
		}
		if rec.Conf.MTU != 0 && l.MTU != rec.Conf.MTU {
			problems = append(problems, fmt.Sprintf("%s MTU is %d, want %d", args.IfName, l.MTU, rec.Conf.MTU))
		}
		if !l.Up {
			problems = append(problems, fmt.Sprintf("%s is down", args.IfName))
		}
		if len(prev.IPs) > 0 {
			if err := ip.ValidateExpectedInterfaceIPs(args.IfName, prev.IPs); err != nil {
				problems = append(problems, err.Error())
			}
			if err := ip.ValidateExpectedRoute(prev.Routes); err != nil {
				problems = append(problems, err.Error())
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	st, err := p.VF.VFState(rec.PF, rec.VFIndex)
	if err != nil {
		return err
	}
	c := rec.Conf
	want := func(field string, got, exp any) {
		if fmt.Sprint(got) != fmt.Sprint(exp) {
			problems = append(problems, fmt.Sprintf("VF %d of %s: %s is %v, want %v", rec.VFIndex, rec.PF, field, got, exp))
		}
	}
	want("vlan", st.Vlan, c.Vlan)
	want("qos", st.QoS, c.VlanQoS)
	want("proto", strings.ToLower(st.Proto), strings.ToLower(c.VlanProto))
	if c.MAC != "" {
		want("mac", st.MAC, c.MAC)
	}
	if c.SpoofChk != nil {
		want("spoofchk", st.Spoofchk, *c.SpoofChk)
	}
	if c.Trust != nil {
		want("trust", st.Trust, *c.Trust)
	}
	if c.LinkState != "" {
		want("state", st.LinkState, c.LinkState)
	}
	if c.MinTxRate != nil {
		want("min_tx_rate", st.MinTxRate, *c.MinTxRate)
	}
	if c.MaxTxRate != nil {
		want("max_tx_rate", st.MaxTxRate, *c.MaxTxRate)
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return fmt.Errorf("sriov CHECK for container %s: %s", args.ContainerID, strings.Join(problems, "; "))
	}
	return nil
}

// Device is the device the config names (verbs.DeviceConfig).
func (c *Config) Device() string { return c.DeviceID }
