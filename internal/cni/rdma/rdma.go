package rdma

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/rdmanet/rdmanet/internal/cni/verbs"
	"github.com/rdmanet/rdmanet/internal/cni/vfrecord"
	"github.com/rdmanet/rdmanet/internal/daemon/inproc/nsguard"
	"github.com/rdmanet/rdmanet/internal/netops"
	"github.com/rdmanet/rdmanet/internal/sysfs"
)

// DefaultStateDir is the upstream RDMA CNI's cache dir.
const DefaultStateDir = "/var/lib/cni/rdma"

// ADD steps (failpoint names).
const (
	StepCache = "cache"
	StepMove  = "move"
)

// Steps lists the ADD steps in order.
var Steps = []string{StepCache, StepMove}

// Errors callers may test for.
var (
	ErrNotExclusive = errors.New("RDMA subsystem not in exclusive netns mode")
	ErrNoPrevResult = errors.New("no prevResult")
	ErrNoRDMADevice = errors.New("VF has no RDMA device")
	ErrInUse        = errors.New("RDMA device in use")
)

// Plugin holds what the verbs run over.
type Plugin struct {
	Sysfs    sysfs.FS
	RDMA     netops.RDMA
	StateDir string
	Fault    *netops.Failpoint
}

// Record is the cache entry of a moved RDMA device.
type Record struct {
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifName"`
	Netns       string `json:"netns"`
	DeviceID    string `json:"deviceID"`
	RDMADev     string `json:"rdmaDev"`
}

// records is the plugin's record store, one record per VF in StateDir.
func (p *Plugin) records() vfrecord.Store[Record] {
	return vfrecord.Store[Record]{
		Dir:    p.StateDir,
		Plugin: "rdma",
		Owner:  func(r *Record) (string, string) { return r.ContainerID, r.IfName },
	}
}

// RDMADevice returns the single RDMA device of a VF (sysfs <bdf>/infiniband/).
func (p *Plugin) RDMADevice(bdf string) (string, error) {
	devs := p.Sysfs.RDMADevices(bdf)
	switch len(devs) {
	case 1:
		return devs[0], nil
	case 0:
		return "", fmt.Errorf("%w: %s/bus/pci/devices/%s/infiniband/ is empty; load the RDMA driver (mlx5_ib) on the node, "+
			"and select only RDMA-capable VFs in the pool (isRdma: true)", ErrNoRDMADevice, p.Sysfs.Root, bdf)
	}
	return "", fmt.Errorf("VF %s has %d RDMA devices (%s); expected one", bdf, len(devs), strings.Join(devs, ", "))
}

func (p *Plugin) checkExclusive() error {
	mode, err := p.RDMA.NetnsMode()
	if err != nil {
		return err
	}
	if mode != netops.RDMANetnsExclusive {
		return fmt.Errorf("%w: `rdma system` reports netns %s; a VF's RDMA device can only follow its netdev into the pod in exclusive mode. "+
			"Fix on the node at boot, before pods start: `rdma system set netns exclusive` "+
			"(persist with `options ib_core netns_mode=0` in /etc/modprobe.d/ib_core.conf). "+
			"Shared mode is for the macvlan/shared-HCA setup, which does not use the rdma plugin", ErrNotExclusive, mode)
	}
	return nil
}

// Add moves the VF's RDMA device into the pod and passes prevResult on.
func (p *Plugin) Add(args *skel.CmdArgs) (_ types.Result, err error) {
	conf, err := Parse(args.StdinData)
	if err != nil {
		return nil, err
	}
	if err := version.ParsePrevResult(&conf.NetConf); err != nil {
		return nil, fmt.Errorf("rdma: parse prevResult: %w", err)
	}
	if conf.NetConf.PrevResult == nil {
		return nil, fmt.Errorf("%w: the rdma plugin must be chained after a plugin that attaches the VF (sriov) in the NAD's \"plugins\" list", ErrNoPrevResult)
	}
	dev, err := p.RDMADevice(conf.DeviceID)
	if err != nil {
		return nil, err
	}
	if err := p.checkExclusive(); err != nil {
		return nil, err
	}
	records := p.records()
	held, err := verbs.OpenAddRecord(args.Netns, records, conf.DeviceID, p.reclaim)
	if err != nil {
		return nil, err
	}
	defer held.Close()
	podNS, hostNS := held.PodNS, held.HostNS
	rec := &Record{ContainerID: args.ContainerID, IfName: args.IfName, Netns: args.Netns, DeviceID: conf.DeviceID, RDMADev: dev}
	if err := records.Write(rec.DeviceID, rec); err != nil {
		return nil, err
	}
	success := false
	defer func() {
		if success {
			return
		}
		if rbErr := p.moveBack(rec, hostNS, podNS); rbErr != nil {
			err = fmt.Errorf("%w; rollback also failed (cache kept for DEL): %w", err, rbErr)
			return
		}
		_ = records.Remove(conf.DeviceID)
	}()
	if err := p.Fault.Hit(StepCache); err != nil {
		return nil, err
	}
	if err := p.RDMA.Move(dev, hostNS, podNS); err != nil {
		return nil, err
	}
	if err := p.Fault.Hit(StepMove); err != nil {
		return nil, err
	}
	success = true
	return conf.NetConf.PrevResult, nil
}

// reclaim handles an RDMA device still recorded for another container.
// When that container's network namespace is gone, the kernel has returned
// the device to the host and only the record is left (its DEL is pending):
// it is checked home and the record removed, under the VF's lock. While
// the namespace exists, the device is in use and ADD fails.
func (p *Plugin) reclaim(r *Record, hostNS ns.NetNS) error {
	if _, err := os.Stat(r.Netns); r.Netns == "" || !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: RDMA device %s of VF %s is in use by container %s (netns %s)", ErrInUse, r.RDMADev, r.DeviceID, r.ContainerID, r.Netns)
	}
	if err := p.moveBack(r, hostNS, nil); err != nil {
		return fmt.Errorf("%w: RDMA device %s of VF %s is still recorded for container %s, whose netns %s is gone: %w", ErrInUse, r.RDMADev, r.DeviceID, r.ContainerID, r.Netns, err)
	}
	return p.records().Remove(r.DeviceID)
}

// moveBack returns the device to the host; podNS nil means the pod netns is gone.
func (p *Plugin) moveBack(r *Record, hostNS, podNS ns.NetNS) error {
	if podNS != nil {
		in, err := p.RDMA.InNetns(r.RDMADev, podNS)
		if err != nil {
			return err
		}
		if in {
			return p.RDMA.Move(r.RDMADev, podNS, hostNS)
		}
	}
	in, err := p.RDMA.InNetns(r.RDMADev, hostNS)
	if err != nil {
		return err
	}
	if !in {
		if len(p.Sysfs.RDMADevices(r.DeviceID)) == 0 && !p.Sysfs.Exists(r.DeviceID) {
			return nil // VF gone
		}
		return fmt.Errorf("RDMA device %s of VF %s is in neither the pod netns %s nor the host; the kernel returns it when the pod netns is destroyed — retry DEL",
			r.RDMADev, r.DeviceID, r.Netns)
	}
	return nil
}

// Del moves the RDMA device back; it succeeds when there is nothing to do.
func (p *Plugin) Del(args *skel.CmdArgs) error {
	conf, err := ParseLoose(args.StdinData)
	if err != nil {
		conf = &Config{}
	}
	return verbs.RecordDel[Record]{
		Records: p.records(),
		Device:  func(r *Record) string { return r.DeviceID },
		Warnf:   verbs.Stderr,
		Undo:    p.moveBack,
	}.Run(conf.DeviceID, args)
}

// Check verifies the RDMA device is in the pod netns and the mode is exclusive.
func (p *Plugin) Check(args *skel.CmdArgs) error {
	conf, err := ParseLoose(args.StdinData)
	if err != nil {
		return err
	}
	rec, _, err := verbs.CheckRecord(p.records(), conf.DeviceID, args, nil)
	if err != nil {
		return err
	}
	if err := p.checkExclusive(); err != nil {
		return err
	}
	podNS, err := nsguard.GetNS(args.Netns)
	if err != nil {
		return fmt.Errorf("open pod netns %q: %w", args.Netns, err)
	}
	defer podNS.Close()
	in, err := p.RDMA.InNetns(rec.RDMADev, podNS)
	if err != nil {
		return err
	}
	if !in {
		return fmt.Errorf("rdma CHECK: RDMA device %s of VF %s is not in pod netns %s", rec.RDMADev, rec.DeviceID, args.Netns)
	}
	return nil
}
