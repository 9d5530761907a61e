package ibsriov

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/rdmanet/rdmanet/internal/cni/verbs"
	"github.com/rdmanet/rdmanet/internal/cni/vfrecord"
	"github.com/rdmanet/rdmanet/internal/guidpool"
	rdmaipam "github.com/rdmanet/rdmanet/internal/ipam"
	"github.com/rdmanet/rdmanet/internal/netops"
	"github.com/rdmanet/rdmanet/internal/sysfs"
)

// DefaultStateDir is where the plugin keeps its per-VF records and locks.
const DefaultStateDir = "/var/lib/cni/ib-sriov"

// ADD steps, in order; each is a failpoint name (netops.EnvFault).
const (
	StepCache  = "cache"  // original state recorded
	StepGUID   = "guid"   // GUID chosen (pool allocation, hook)
	StepVF     = "vf"     // link state, GUIDs set, VF rebound
	StepRDMA   = "rdma"   // RDMA device moved into the pod
	StepMove   = "move"   // IPoIB netdev moved and renamed
	StepIPAM   = "ipam"   // addresses allocated and applied
	StepResult = "result" // result recorded
)

// Steps lists the ADD steps in order.
var Steps = []string{StepCache, StepGUID, StepVF, StepRDMA, StepMove, StepIPAM, StepResult}

// Errors callers may test for.
var (
	ErrInUse        = errors.New("IB function in use")
	ErrNoGUID       = errors.New("no usable GUID")
	ErrNoRDMADevice = errors.New("function has no RDMA device")
	ErrNotExclusive = verbs.ErrNotExclusive
)

// Plugin holds what the verbs run over.
type Plugin struct {
	Sysfs sysfs.FS
	VF    netops.VFConfigurator
	IB    netops.IBVF
	RDMA  netops.RDMA
	// IPAM runs the IPAM plugin (the sriov plugin's: exec'd from CNI_PATH,
	// or delegated in-process by the daemon).
	IPAM     verbs.RecordIPAM
	StateDir string
	// Pool returns the node's GUID pool; nil (or a nil pool) means none is
	// configured. Called only when a pod names no GUID.
	Pool  func() (*guidpool.Pool, error)
	Fault *netops.Failpoint
	// Warnf reports what the plugin tolerated (nil discards).
	Warnf func(format string, args ...any)
}

// Record is the per-function cache entry: everything DEL needs to undo ADD.
type Record struct {
	vfrecord.Attachment
	IsVF    bool   `json:"isVF"`
	PFBDF   string `json:"pfBDF,omitempty"`
	PF      string `json:"pf,omitempty"` // PF netdev ("" when the PF has none)
	VFIndex int    `json:"vfIndex"`
	Driver  string `json:"driver,omitempty"`
	// Netdev is the function's IPoIB netdev in the host ("" for IB-only).
	Netdev  string `json:"netdev,omitempty"`
	RDMADev string `json:"rdmaDev,omitempty"`
	// Original state.
	LinkState    string `json:"linkState,omitempty"`
	NodeGUID     string `json:"nodeGUID,omitempty"`
	PortGUID     string `json:"portGUID,omitempty"`
	NetdevWasUp  bool   `json:"netdevWasUp,omitempty"`
	NetdevOrigMT int    `json:"netdevMTU,omitempty"`
	// What ADD did.
	GUID         string         `json:"guid,omitempty"` // GUID set on the VF ("" when left)
	GUIDFromPool bool           `json:"guidFromPool,omitempty"`
	Owner        rdmaipam.Owner `json:"owner"`
	RDMAMoved    bool           `json:"rdmaMoved,omitempty"`
	vfrecord.Call
	Conf Config `json:"conf"`
}

func (p *Plugin) warnf(format string, args ...any) { verbs.Warn(p.Warnf, format, args...) }

func (p *Plugin) records() vfrecord.Store[Record] {
	return vfrecord.Store[Record]{Dir: p.StateDir, Plugin: "ib-sriov", CorruptHint: " (remove it after checking the VF's GUID by hand)", NameCaller: true}
}

// fn is what sysfs says about the function.
type fn struct {
	isVF    bool
	pfBDF   string
	pf      string
	index   int
	driver  string
	netdev  string
	rdmaDev string
}

func (p *Plugin) resolve(bdf string) (fn, error) {
	if !p.Sysfs.Exists(bdf) {
		return fn{}, cfgErr(ErrBadDeviceID, "deviceID", fmt.Sprintf("%q", bdf),
			fmt.Sprintf("must be a PCI function present under %s/bus/pci/devices", p.Sysfs.Root),
			"the device plugin pool lists a function that no longer exists (sriov_numvfs changed?); restart the device plugin")
	}
	f := fn{driver: p.Sysfs.Driver(bdf), index: -1}
	if f.driver == "vfio-pci" {
		return fn{}, cfgErr(ErrVfio, "deviceID", fmt.Sprintf("%q", bdf), "is bound to vfio-pci", "bind it to mlx5_core, or keep ib-sriov-cni for VFIO networks")
	}
	devs := p.Sysfs.RDMADevices(bdf)
	if len(devs) != 1 {
		return fn{}, fmt.Errorf("%w: %s has %d RDMA devices (%s) under %s; load mlx5_ib and select only RDMA-capable functions (isRdma: true) in the pool",
			ErrNoRDMADevice, bdf, len(devs), strings.Join(devs, ", "), p.Sysfs.Root)
	}
	f.rdmaDev = devs[0]
	if nd := p.Sysfs.Netdevs(bdf); len(nd) > 0 {
		f.netdev = nd[0]
	}
	if pf := p.Sysfs.PhysFn(bdf); pf != "" {
		idx, err := p.Sysfs.VFIndex(pf, bdf)
		if err != nil {
			return fn{}, fmt.Errorf("deviceID %s: %w", bdf, err)
		}
		f.isVF, f.pfBDF, f.index = true, pf, idx
		if nd := p.Sysfs.Netdevs(pf); len(nd) > 0 {
			f.pf = nd[0]
		}
	}
	return f, nil
}

// currentGUIDs reads the RDMA device's node GUID and port GUID (GID 0's low half).
func (p *Plugin) currentGUIDs(ibdev string) (node, port guidpool.GUID, err error) {
	s, err := p.Sysfs.ReadFile(p.Sysfs.RDMAPath(ibdev) + "/node_guid")
	if err != nil {
		return 0, 0, fmt.Errorf("read node GUID of %s: %w", ibdev, err)
	}
	if node, err = guidpool.ParseGUID(s); err != nil {
		return 0, 0, fmt.Errorf("node GUID of %s: %w", ibdev, err)
	}
	g, err := p.Sysfs.PortAttr(ibdev, 1, "gids/0")
	if err != nil {
		return node, node, nil // no GID table readable: the port GUID follows the node GUID on VFs
	}
	g = strings.TrimSpace(g)
	if len(g) != 39 {
		return 0, 0, fmt.Errorf("GID 0 of %s is %q, not a GID", ibdev, g)
	}
	if port, err = guidpool.ParseGUID(g[20:]); err != nil {
		return 0, 0, fmt.Errorf("port GUID of %s: %w", ibdev, err)
	}
	return node, port, nil
}

func (p *Plugin) pool() (*guidpool.Pool, error) {
	if p.Pool == nil {
		return nil, nil
	}
	return p.Pool()
}

func ctxTimeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 2*time.Minute)
}

// Add gives the pod the function named by the config.
func (p *Plugin) Add(args *skel.CmdArgs) (*current.Result, error) {
	conf, err := Parse(args.StdinData)
	if err != nil {
		return nil, err
	}
	if conf.IBKubernetesEnabled && !conf.IBKubernetesConfigured {
		return nil, fmt.Errorf("%w: ibKubernetesEnabled is true and the CNI arg %q is not %q; ib-kubernetes has not put the pod's GUID into the PKey yet. "+
			"With rdmanet's GUID pool and hook, set ibKubernetesEnabled to false (docs/infiniband.md)", ErrIBKubernetes, IBKubernetesAnnotation, IBKubernetesConfigured)
	}
	f, err := p.resolve(conf.DeviceID)
	if err != nil {
		return nil, err
	}
	owner, err := rdmaipam.OwnerFromArgs(args.ContainerID, args.IfName, args.Args)
	if err != nil {
		return nil, err
	}
	return verbs.AddRecorded(args.Netns, p.records(), conf.DeviceID, p.Fault, p.reclaim, func(at *verbs.Attach[Record]) (*current.Result, error) {
		podNS, hostNS := at.PodNS, at.HostNS
		rec := &Record{Attachment: vfrecord.AttachmentOf(args, conf.DeviceID),
			IsVF: f.isVF, PFBDF: f.pfBDF, PF: f.pf, VFIndex: f.index, Driver: f.driver, Netdev: f.netdev, RDMADev: f.rdmaDev,
			Owner: owner, Conf: *conf, Call: vfrecord.Call{Stdin: args.StdinData}}
		node, port, err := p.currentGUIDs(f.rdmaDev)
		if err != nil {
			return nil, err
		}
		rec.NodeGUID, rec.PortGUID = node.String(), port.String()
		if f.netdev != "" {
			l, err := netops.LinkByName(f.netdev)
			if errors.Is(err, netops.ErrLinkNotFound) {
				return nil, fmt.Errorf("%w: %s's IPoIB netdev %s is not in the host namespace (another pod holds it?): %w", ErrInUse, conf.DeviceID, f.netdev, err)
			}
			if err != nil {
				return nil, err
			}
			rec.NetdevWasUp, rec.NetdevOrigMT = l.Up, l.MTU
		}
		if f.pf == "" && (conf.LinkState != "" || conf.GUID != 0) {
			return nil, fmt.Errorf("function %s: its PF %s has no netdev in the host namespace, so its GUID and link state cannot be set through it; "+
				"drop infiniband-guid and link_state for this IB-only network, or load ib_ipoib so the PF has a netdev", conf.DeviceID, f.pfBDF)
		}
		if f.isVF && f.pf != "" {
			st, err := p.VF.VFState(f.pf, f.index)
			if err != nil {
				return nil, fmt.Errorf("read VF %d of %s: %w", f.index, f.pf, err)
			}
			rec.LinkState = st.LinkState
		}
		if err := at.Begin(rec, func(hostNS, podNS ns.NetNS) error { return p.teardown(rec, hostNS, podNS, args.StdinData) }); err != nil {
			return nil, err
		}
		step := at.Step
		if err := step(StepCache); err != nil {
			return nil, err
		}

		// The GUID: the pod's, else the pool's, else the VF's own.
		guid := conf.GUID
		if guid == 0 && f.isVF && f.pf != "" {
			if conf.IBKubernetesEnabled {
				return nil, fmt.Errorf("%w: ibKubernetesEnabled is true but the pod names no GUID (infiniband-guid); ib-kubernetes must provide it", ErrNoGUID)
			}
			pool, err := p.pool()
			if err != nil {
				return nil, err
			}
			if pool != nil {
				ctx, cancel := ctxTimeout()
				g, err := pool.Allocate(ctx, owner)
				cancel()
				if err != nil {
					return nil, fmt.Errorf("%w for VF %s: %w", ErrNoGUID, conf.DeviceID, err)
				}
				guid, rec.GUIDFromPool = g, true
				rec.GUID = g.String()
				if err := at.Save(); err != nil {
					return nil, err
				}
				ctx, cancel = ctxTimeout()
				err = pool.RunHook(ctx, p.hookEvent(guidpool.ActionAllocate, rec))
				cancel()
				if err != nil {
					return nil, err
				}
			}
		}
		if guid == 0 && f.isVF && f.pf == "" && (port == guidpool.Zero || port == guidpool.AllOnes) {
			p.warnf("ib-sriov: VF %s (RDMA device %s) has GUID %s and its PF has no netdev to set one through; the subnet manager cannot admit it to a partition",
				conf.DeviceID, f.rdmaDev, port)
		}
		if guid == 0 && f.isVF && f.pf != "" && (port == guidpool.Zero || port == guidpool.AllOnes) {
			return nil, fmt.Errorf("%w: VF %s (RDMA device %s) has GUID %s and the pod names none; "+
				"add infiniband-guid to the pod's networks annotation, or configure rdmanet's GUID pool (%s)", ErrNoGUID, conf.DeviceID, f.rdmaDev, port, guidpool.DefaultConfigPath)
		}
		if err := step(StepGUID); err != nil {
			return nil, err
		}

		if conf.LinkState != "" {
			if err := p.VF.SetVFLinkState(f.pf, f.index, conf.LinkState); err != nil {
				return nil, err
			}
		}
		if guid != 0 {
			rec.GUID = guid.String()
			if err := at.Save(); err != nil {
				return nil, err
			}
			if err := p.setGUID(rec, guid); err != nil {
				return nil, err
			}
			// the rebind recreates the netdev and RDMA device: read their names again
			if nf, err := p.resolve(conf.DeviceID); err == nil {
				rec.Netdev, rec.RDMADev = nf.netdev, nf.rdmaDev
			}
		}
		if err := step(StepVF); err != nil {
			return nil, err
		}

		// RDMA device first: moving it recreates its IPoIB netdev in the host (ib-sriov-cni's order).
		if conf.RdmaIsolation {
			mode, err := p.RDMA.NetnsMode()
			if err != nil {
				return nil, err
			}
			if mode != netops.RDMANetnsExclusive {
				return nil, fmt.Errorf("%w: rdmaIsolation is true and `rdma system` reports netns %s; fix at boot: `rdma system set netns exclusive` "+
					"(persist with `options ib_core netns_mode=0`), or set rdmaIsolation to false", ErrNotExclusive, mode)
			}
			rec.RDMAMoved = true
			if err := at.Save(); err != nil {
				return nil, err
			}
			if err := p.RDMA.Move(rec.RDMADev, hostNS, podNS); err != nil {
				return nil, err
			}
		}
		if err := step(StepRDMA); err != nil {
			return nil, err
		}

		result := &current.Result{CNIVersion: current.ImplementedSpecVersion}
		iface := &current.Interface{Name: args.IfName, Sandbox: args.Netns, PciID: conf.DeviceID}
		if guid != 0 {
			iface.Mac = guid.String()
		} else {
			iface.Mac = port.String()
		}
		if rec.Netdev != "" {
			if err := netops.SetLinkDown(rec.Netdev); err != nil {
				return nil, err
			}
			if err := netops.SetLinkNetns(rec.Netdev, podNS); err != nil {
				return nil, err
			}
			err = podNS.Do(func(ns.NetNS) error {
				if err := netops.RenameLink(rec.Netdev, args.IfName); err != nil {
					return err
				}
				if err := netops.SetLinkUp(args.IfName); err != nil {
					return err
				}
				l, err := netops.LinkByName(args.IfName)
				iface.Mtu = l.MTU
				return err
			})
			if err != nil {
				return nil, err
			}
		} else {
			// IB-only: no netdev; the attachment is the RDMA device.
			iface.Name = rec.RDMADev
		}
		result.Interfaces = []*current.Interface{iface}
		if err := step(StepMove); err != nil {
			return nil, err
		}

		switch {
		case conf.IPAMType != "" && rec.Netdev == "":
			p.warnf("ib-sriov: %s (RDMA device %s) has no netdev; ipam %q not run (network %q, container %s): IB-only functions carry no IP addresses",
				conf.DeviceID, rec.RDMADev, conf.IPAMType, conf.Name, args.ContainerID)
		default:
			if err := verbs.AddIPAM(p.IPAM, conf.IPAMType, args.StdinData, result, podNS, args.IfName, nil); err != nil {
				return nil, err
			}
		}
		if err := at.Finish(StepIPAM, &rec.Result, result, StepResult); err != nil {
			return nil, err
		}
		return result, nil
	})
}

// setGUID sets node and port GUID through the PF and rebinds an mlx5 VF so
// they take effect (as ib-sriov-cni does).
func (p *Plugin) setGUID(r *Record, g guidpool.GUID) error {
	if err := p.IB.SetVFNodeGUID(r.PF, r.VFIndex, g.Bytes()); err != nil {
		return err
	}
	if err := p.IB.SetVFPortGUID(r.PF, r.VFIndex, g.Bytes()); err != nil {
		return err
	}
	if r.Driver == "mlx5_core" {
		return p.IB.RebindVF(p.Sysfs.Root, r.DeviceID, r.Driver)
	}
	return nil
}

func (p *Plugin) hookEvent(action string, r *Record) guidpool.HookEvent {
	g, _ := guidpool.ParseGUID(r.GUID)
	return guidpool.HookEvent{Action: action, GUID: g, PKey: r.Conf.PKey, PodNamespace: r.Owner.PodNamespace, PodName: r.Owner.PodName,
		PodUID: r.Owner.PodUID, Network: r.Conf.Name, DeviceID: r.DeviceID}
}

// Device is the device the config names (verbs.DeviceConfig).
func (c *Config) Device() string { return c.DeviceID }
