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
	ErrNotExclusive = verbs.ErrNotExclusive
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
	vfrecord.Attachment
	RDMADev string `json:"rdmaDev"`
}

// records is the plugin's record store, one record per VF in StateDir.
func (p *Plugin) records() vfrecord.Store[Record] {
	return vfrecord.Store[Record]{Dir: p.StateDir, Plugin: "rdma"}
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
func (p *Plugin) Add(args *skel.CmdArgs) (types.Result, error) {
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
	return verbs.AddRecorded(args.Netns, p.records(), conf.DeviceID, p.Fault, p.reclaim, func(at *verbs.Attach[Record]) (types.Result, error) {
		rec := &Record{Attachment: vfrecord.AttachmentOf(args, conf.DeviceID), RDMADev: dev}
		if err := at.Begin(rec, func(hostNS, podNS ns.NetNS) error { return p.moveBack(rec, hostNS, podNS) }); err != nil {
			return nil, err
		}
		if err := at.Step(StepCache); err != nil {
			return nil, err
		}
		if err := p.RDMA.Move(dev, at.HostNS, at.PodNS); err != nil {
			return nil, err
		}
		if err := at.Step(StepMove); err != nil {
			return nil, err
		}
		return conf.NetConf.PrevResult, nil
	})
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
	return verbs.RDMABack(p.RDMA, p.Sysfs, r.RDMADev, r.DeviceID, r.Netns, hostNS, podNS)
}

// Del moves the RDMA device back; it succeeds when there is nothing to do.
func (p *Plugin) Del(args *skel.CmdArgs) error {
	conf, err := ParseLoose(args.StdinData)
	if err != nil {
		conf = &Config{}
	}
	return verbs.RecordDel[Record]{
		Records: p.records(),
		Warnf:   verbs.Stderr,
		Undo:    p.moveBack,
	}.Run(conf.DeviceID, args)
}

// Check verifies the RDMA device is in the pod netns and the mode is exclusive.
func (p *Plugin) Check(args *skel.CmdArgs) error {
	_, rec, _, err := verbs.CheckRecord(p.records(), ParseLoose, args, nil)
	if err != nil {
		return err
	}
	if err := p.checkExclusive(); err != nil {
		return err
	}
	podNS, err := verbs.OpenPodNS(args.Netns)
	if err != nil {
		return err
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

// Device is the device the config names (verbs.DeviceConfig).
func (c *Config) Device() string { return c.DeviceID }
