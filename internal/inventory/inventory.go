// Package inventory answers "what RDMA hardware does this node have": every
// PCI network function with its PF/VF relation, netdevs, RDMA devices and
// ports, GID tables, /dev/infiniband char devices, NUMA node and PCIe
// placement. It reads sysfs through internal/sysfs (root is a parameter) and
// never writes anything.
package inventory

import (
	"fmt"
	"net"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/rdmanet/rdmanet/internal/sysfs"
)

// Link layers as the kernel names them in ports/N/link_layer.
const (
	LinkEthernet   = "Ethernet"
	LinkInfiniBand = "InfiniBand"
)

// RDMA subsystem netns modes.
const (
	NetnsExclusive = "exclusive"
	NetnsShared    = "shared"
	NetnsUnknown   = "unknown"
)

// GID is one entry of a port's GID table (what show_gids prints).
type GID struct {
	Index  int    `json:"index"`
	GID    string `json:"gid"`
	Type   string `json:"type"` // "v1" or "v2"
	Netdev string `json:"netdev,omitempty"`
	IPv4   string `json:"ipv4,omitempty"`
}

// Port of an RDMA device.
type Port struct {
	Num       int    `json:"port"`
	LinkLayer string `json:"link_layer"`
	State     string `json:"state"` // ACTIVE, DOWN, INIT, ...
	GIDs      []GID  `json:"gids,omitempty"`
	// GIDTableLen is the number of slots of an Ethernet port's GID table
	// (entries of ports/N/gids, used or not).
	GIDTableLen int `json:"gid_table_len,omitempty"`
	// IB is what the subnet manager gave an InfiniBand port (nil on
	// Ethernet ports): see IBPort.
	IB *IBPort `json:"ib,omitempty"`
}

// RecommendedGIDIndex returns the RoCEv2 IPv4 GID index of an Ethernet port:
// the value NCCL_IB_GID_INDEX should have on this node. ok is false on IB
// ports and when no RoCEv2 IPv4 entry exists (no address on the netdev).
func (p Port) RecommendedGIDIndex() (int, bool) {
	if p.LinkLayer != LinkEthernet {
		return 0, false
	}
	for _, g := range p.GIDs {
		if g.Type == "v2" && g.IPv4 != "" {
			return g.Index, true
		}
	}
	return 0, false
}

// FirstIPv4GIDIndex returns the index the kernel will give the RoCE v2 GID
// of the first IPv4 address a RoCE port gets once it is fresh: the
// NCCL_IB_GID_INDEX of an exclusive VF, read at DRA Prepare time, before
// the VF is in its pod and has its address.
//
// The kernel's GID cache (drivers/infiniband/core/cache.c,
// roce_gid_mgmt.c) reserves the lowest slots for the port's default GIDs,
// one per supported GID type (0: RoCE v1, 1: RoCE v2 on a port with both),
// and fills every other entry into the lowest free non-default slot; each
// new IP address adds one entry per supported type, RoCE v1 before RoCE v2.
// The VF's other entries now (addresses its netdev has in the host's
// namespace) go when the sriov CNI moves the netdev into the pod, and
// moving its RDMA device into the pod (exclusive netns mode) rebuilds the
// table. So the pod's first IPv4 address lands right after the default
// slots: 3 on a port with both types, 1 on a RoCE v2-only port.
//
// Assumption: the address is the only IP on the VF whose GID is not a
// default one (rdmanet's IPAM gives one IPv4 address; an IPv6 link-local
// address derived from the MAC equals the default GID). The supported types
// are read from gid_attrs/types; without any the table cannot tell, and
// FirstIPv4GIDIndex says why. Not for InfiniBand ports (no GID index).
func (p Port) FirstIPv4GIDIndex() (int, error) {
	if p.LinkLayer != LinkEthernet {
		return 0, fmt.Errorf("port %d is not RoCE (link layer %q)", p.Num, p.LinkLayer)
	}
	var v1, v2 bool
	for _, g := range p.GIDs {
		switch g.Type {
		case "v1":
			v1 = true
		case "v2":
			v2 = true
		}
	}
	switch {
	case !v1 && !v2:
		return 0, fmt.Errorf("port %d: the GID table shows no typed entry (gid_attrs/types missing or empty), so which RoCE versions the port supports is unknown", p.Num)
	case !v2:
		return 0, fmt.Errorf("port %d supports RoCE v1 only (no RoCE v2 GID)", p.Num)
	}
	// v2 only: default slot 0, the address's v2 entry at 1; both types:
	// default slots 0 and 1, the address's v1 entry at 2 and v2 at 3
	idx := 1
	if v1 {
		idx = 3
	}
	if p.GIDTableLen > 0 && idx >= p.GIDTableLen {
		return 0, fmt.Errorf("port %d: its GID table has %d slots, too few for an IPv4 RoCE v2 entry at index %d", p.Num, p.GIDTableLen, idx)
	}
	return idx, nil
}

// RDMADevice is an RDMA device (HCA) of a function.
type RDMADevice struct {
	Name     string   `json:"name"`
	NodeGUID string   `json:"node_guid,omitempty"`
	Ports    []Port   `json:"ports"`
	CharDevs []string `json:"char_devices"` // /dev/infiniband/uverbsN, umadN, issmN
}

// Function is one PCI network function.
type Function struct {
	BDF      string   `json:"pci"`
	Vendor   string   `json:"vendor"`
	Device   string   `json:"device"`
	Driver   string   `json:"driver,omitempty"`
	IsVF     bool     `json:"is_vf,omitempty"`
	PF       string   `json:"pf,omitempty"` // PF address of a VF
	VFIndex  int      `json:"vf_index,omitempty"`
	TotalVFs int      `json:"sriov_totalvfs,omitempty"`
	NumVFs   int      `json:"sriov_numvfs,omitempty"`
	VFs      []string `json:"vfs,omitempty"`
	// Netdevs are the function's own netdevs: those in its sysfs directory
	// and, for a virtio-pci function, its virtio device's (a cloud VM's
	// devices/pci0000:00/0000:00:03.0/virtio2/net/eth0).
	Netdevs []string `json:"netdevs,omitempty"`
	// SubNetdevs are netdevs of devices of other buses below the function
	// (an mlx5 sub-function's, another auxiliary device's): not the
	// function's to hand out, but on its hardware, so one carrying the
	// default route keeps the function from being handed out.
	SubNetdevs []SubNetdev  `json:"sub_netdevs,omitempty"`
	OperState  string       `json:"operstate,omitempty"` // of the first netdev; "" when not visible
	AdminUp    bool         `json:"admin_up,omitempty"`  // IFF_UP of the first netdev
	LinkLayer  string       `json:"link_layer,omitempty"`
	RDMA       []RDMADevice `json:"rdma,omitempty"`
	NUMA       int          `json:"numa"`
	PCIRoot    string       `json:"pci_root,omitempty"`   // pci0000:40
	Upstream   string       `json:"pci_parent,omitempty"` // upstream bridge / switch port
	// DefaultRoute is set when one of the netdevs carries the node's default
	// route: the route's own device, or a device under it (a bond's slave,
	// a VLAN's parent, a bridge's port, recursively).
	DefaultRoute bool `json:"default_route,omitempty"`
	// DefaultRouteVia is the route's device when the function's netdev is
	// under it (bond0, vlan200, br0); empty when the route is on the netdev.
	DefaultRouteVia string `json:"default_route_via,omitempty"`
	// DefaultRouteNetdev is the function's netdev that carries the route
	// or is under the route's device; DefaultRouteDevice is set when that
	// netdev is a sub-device's (SubNetdevs): the sub-device's name.
	DefaultRouteNetdev string `json:"default_route_netdev,omitempty"`
	DefaultRouteDevice string `json:"default_route_device,omitempty"`
}

// SubNetdev is a netdev of a device below a PCI function on another bus.
type SubNetdev struct {
	Name   string `json:"name"`
	Device string `json:"device"`        // mlx5_core.sf.2
	Bus    string `json:"bus,omitempty"` // auxiliary
}

// DefaultRouteLabel names the netdev by which the function carries the
// default route, for messages: "ens8f0np0", or "enp59s0f0s1 of
// mlx5_core.sf.2" for a sub-function's netdev. "" when it carries none.
func (f *Function) DefaultRouteLabel() string {
	switch {
	case !f.DefaultRoute:
		return ""
	case f.DefaultRouteDevice != "":
		return f.DefaultRouteNetdev + " of " + f.DefaultRouteDevice
	case f.DefaultRouteNetdev != "":
		return f.DefaultRouteNetdev
	}
	return f.Netdev()
}

// NUMALabel is the function's NUMA node for people: its number, or
// "unknown" when the platform reports none (numa_node -1: single-socket
// machines and VMs without a NUMA topology).
func (f *Function) NUMALabel() string { return NUMALabel(f.NUMA) }

// NUMALabel renders a NUMA node as NUMALabel does.
func NUMALabel(numa int) string {
	if numa < 0 {
		return "unknown"
	}
	return strconv.Itoa(numa)
}

// Netdev returns the first netdev name, or "".
func (f *Function) Netdev() string {
	if len(f.Netdevs) == 0 {
		return ""
	}
	return f.Netdevs[0]
}

// RDMAName returns the first RDMA device name, or "".
func (f *Function) RDMAName() string {
	if len(f.RDMA) == 0 {
		return ""
	}
	return f.RDMA[0].Name
}

// HasRDMA reports whether the function has an RDMA device.
func (f *Function) HasRDMA() bool { return len(f.RDMA) > 0 }

// IsPF reports whether the function is SR-IOV capable.
func (f *Function) IsPF() bool { return f.TotalVFs > 0 }

// Node is the discovered inventory.
type Node struct {
	Functions []*Function `json:"functions"`
	// RDMANetnsMode is exclusive, shared or unknown; NetnsModeSource says where it came from.
	RDMANetnsMode   string   `json:"rdma_netns_mode"`
	NetnsModeSource string   `json:"rdma_netns_mode_source"`
	RDMACM          bool     `json:"rdma_cm"`
	Problems        []string `json:"problems,omitempty"`
	byBDF           map[string]*Function
}

// Function returns the function at bdf, or nil.
func (n *Node) Function(bdf string) *Function { return n.byBDF[bdf] }

// ByNetdev returns the function owning netdev, or nil.
func (n *Node) ByNetdev(name string) *Function {
	for _, f := range n.Functions {
		for _, nd := range f.Netdevs {
			if nd == name {
				return f
			}
		}
	}
	return nil
}

// Options for Discover.
type Options struct {
	SysfsRoot string // default /sys
	// DefaultRouteLinks names the netdevs that carry the node's default
	// route (from the routing table, optionally with their lower devices
	// from netlink: DefaultRouteNetdevs). Discover resolves each further
	// down through the sysfs model's upper/lower links; the functions of
	// every netdev found are never handed out.
	DefaultRouteLinks []string
	// NetnsMode is the RDMA netns mode as read from netlink ("" when the
	// kernel cannot say) and NetnsModeFlag the operator's statement of it.
	NetnsMode     string
	NetnsModeFlag string
	// NetnsModeErr explains why netlink could not report the mode.
	NetnsModeErr error
}

// Discover reads every PCI network function under the sysfs root.
// Functions that cannot be read completely are kept with what was readable
// and a problem is recorded; Discover fails only when the PCI bus itself
// cannot be listed.
func Discover(o Options) (*Node, error) {
	fs := sysfs.New(o.SysfsRoot)
	bdfs, err := fs.PCIDevices()
	if err != nil {
		return nil, fmt.Errorf("discover: %w", err)
	}
	node := &Node{byBDF: map[string]*Function{}, RDMACM: fs.HasRDMACM()}
	vfIdx := vfIndexer(fs)
	defRoute := ResolveLower(fs, o.DefaultRouteLinks)
	below := fs.NetdevsByFunction()
	for _, bdf := range bdfs {
		if !fs.Exists(bdf) {
			node.Problems = append(node.Problems, fmt.Sprintf("%s: bus/pci/devices link is dangling (device removed while scanning?); skipped", bdf))
			continue
		}
		class := fs.HexID(bdf, "class")
		rdma := fs.RDMADevices(bdf)
		// network (0x02xxxx) functions, and anything with an RDMA device
		if !strings.HasPrefix(class, "02") && len(rdma) == 0 {
			continue
		}
		f := readFunction(fs, bdf, rdma, vfIdx, below[bdf])
		markDefaultRoute(f, defRoute)
		node.Functions = append(node.Functions, f)
		node.byBDF[bdf] = f
	}
	switch {
	case o.NetnsMode != "":
		node.RDMANetnsMode, node.NetnsModeSource = o.NetnsMode, "netlink"
		if o.NetnsModeFlag != "" && o.NetnsModeFlag != o.NetnsMode {
			node.Problems = append(node.Problems, fmt.Sprintf("--rdma-netns-mode=%s disagrees with the kernel (%s); using the kernel's", o.NetnsModeFlag, o.NetnsMode))
		}
	case o.NetnsModeFlag != "":
		node.RDMANetnsMode, node.NetnsModeSource = o.NetnsModeFlag, "flag"
	default:
		node.RDMANetnsMode, node.NetnsModeSource = NetnsUnknown, "none"
		msg := "RDMA netns mode unknown: the kernel did not report it over netlink"
		if o.NetnsModeErr != nil {
			msg += " (" + o.NetnsModeErr.Error() + ")"
		}
		node.Problems = append(node.Problems, msg+"; state it with --rdma-netns-mode=exclusive|shared")
	}
	return node, nil
}

// markDefaultRoute sets the function's DefaultRoute fields when one of its
// netdevs, own or a sub-device's, is in defRoute (netdev -> the route's
// device it was found under). The first such netdev, own ones first,
// names it.
func markDefaultRoute(f *Function, defRoute map[string]string) {
	type cand struct{ netdev, device string }
	var cands []cand
	for _, nd := range f.Netdevs {
		cands = append(cands, cand{netdev: nd})
	}
	for _, sn := range f.SubNetdevs {
		cands = append(cands, cand{netdev: sn.Name, device: sn.Device})
	}
	for _, c := range cands {
		via, ok := defRoute[c.netdev]
		if !ok {
			continue
		}
		if !f.DefaultRoute {
			f.DefaultRoute = true
			f.DefaultRouteNetdev, f.DefaultRouteDevice = c.netdev, c.device
		}
		if via != c.netdev && f.DefaultRouteVia == "" {
			f.DefaultRouteVia = via
		}
	}
}

// vfIndexer returns a lookup of a VF's index under its PF that lists each
// PF's virtfnN links once (a per-VF scan of the PF directory is quadratic
// in VFs per PF: 512 VFs cost ~50k syscalls per discovery).
func vfIndexer(fs sysfs.FS) func(pf, vf string) (int, bool) {
	byPF := map[string]map[string]int{}
	return func(pf, vf string) (int, bool) {
		m, ok := byPF[pf]
		if !ok {
			m = map[string]int{}
			for _, v := range fs.VFs(pf) {
				m[v.BDF] = v.Index
			}
			byPF[pf] = m
		}
		i, ok := m[vf]
		return i, ok
	}
}

// readFunction reads one function; below are the netdevs class/net places
// at or below it (sysfs.FS.NetdevsByFunction).
func readFunction(fs sysfs.FS, bdf string, rdma []string, vfIndex func(pf, vf string) (int, bool), below []sysfs.FunctionNetdev) *Function {
	f := &Function{
		BDF:    bdf,
		Vendor: fs.HexID(bdf, "vendor"),
		Device: fs.HexID(bdf, "device"),
		Driver: fs.Driver(bdf),
		NUMA:   -1,
	}
	if n, ok := fs.IntAttr(bdf, "numa_node"); ok {
		f.NUMA = n
	}
	if pf := fs.PhysFn(bdf); pf != "" {
		f.IsVF, f.PF = true, pf
		if idx, ok := vfIndex(pf, bdf); ok {
			f.VFIndex = idx
		}
	}
	f.TotalVFs, _ = fs.IntAttr(bdf, "sriov_totalvfs")
	f.NumVFs, _ = fs.IntAttr(bdf, "sriov_numvfs")
	for _, vf := range fs.VFs(bdf) {
		f.VFs = append(f.VFs, vf.BDF)
	}
	f.Netdevs, f.SubNetdevs = netdevsOf(fs.Netdevs(bdf), below)
	if nd := f.Netdev(); nd != "" {
		f.OperState, _ = fs.NetdevAttr(nd, "operstate")
		if fl, err := fs.NetdevAttr(nd, "flags"); err == nil {
			if v, err := strconv.ParseUint(strings.TrimPrefix(fl, "0x"), 16, 32); err == nil {
				f.AdminUp = v&0x1 != 0
			}
		}
	}
	if rel, err := fs.ResolvedPath(bdf); err == nil {
		parts := strings.Split(rel, string(filepath.Separator))
		// the outermost PCI host bridge, not the path's first component:
		// on Hyper-V VMs that is an ACPI device (LNXSYSTM:00)
		f.PCIRoot = sysfs.PCIeRootOfPath(rel)
		if len(parts) >= 2 {
			f.Upstream = parts[len(parts)-2]
		}
	}
	cds := fs.CharDevs(bdf)
	for _, ib := range rdma {
		d := RDMADevice{Name: ib}
		d.NodeGUID, _ = readPortless(fs, ib, "node_guid")
		for _, p := range fs.RDMAPorts(ib) {
			d.Ports = append(d.Ports, readPort(fs, ib, p))
		}
		for _, c := range cds {
			if c.IBDev == ib {
				d.CharDevs = append(d.CharDevs, "/dev/infiniband/"+c.Name)
			}
		}
		f.RDMA = append(f.RDMA, d)
	}
	switch {
	case len(f.RDMA) > 0 && len(f.RDMA[0].Ports) > 0:
		f.LinkLayer = f.RDMA[0].Ports[0].LinkLayer
	case f.Netdev() != "":
		if t, err := fs.NetdevAttr(f.Netdev(), "type"); err == nil {
			f.LinkLayer = linkLayerFromType(t)
		}
	}
	return f
}

// netdevsOf merges the netdevs listed in a function's net/ directory
// (direct) with those class/net places below it: own ones (virtio) join
// the direct ones, the others are sub-devices'. Direct ones come first,
// each list sorted.
func netdevsOf(direct []string, below []sysfs.FunctionNetdev) ([]string, []SubNetdev) {
	own := append([]string(nil), direct...)
	seen := map[string]bool{}
	for _, nd := range direct {
		seen[nd] = true
	}
	var extra []string
	var subs []SubNetdev
	for _, b := range below {
		switch {
		case seen[b.Name]:
		case b.OwnNetdev():
			extra = append(extra, b.Name)
		default:
			subs = append(subs, SubNetdev{Name: b.Name, Device: b.Via, Bus: b.Bus})
		}
		seen[b.Name] = true
	}
	sort.Strings(extra)
	sort.Slice(subs, func(i, j int) bool { return subs[i].Name < subs[j].Name })
	return append(own, extra...), subs
}

func readPortless(fs sysfs.FS, ib, attr string) (string, error) {
	return fs.ReadFile(filepath.Join(fs.RDMAPath(ib), attr))
}

func readPort(fs sysfs.FS, ib string, port int) Port {
	p := Port{Num: port}
	p.LinkLayer, _ = fs.PortAttr(ib, port, "link_layer")
	if st, err := fs.PortAttr(ib, port, "state"); err == nil {
		// "4: ACTIVE"
		if i := strings.Index(st, ":"); i >= 0 {
			st = strings.TrimSpace(st[i+1:])
		}
		p.State = st
	}
	if p.LinkLayer == LinkInfiniBand {
		p.IB = readIBPort(fs, ib, port)
	}
	if p.LinkLayer != LinkEthernet {
		return p
	}
	base := filepath.Join(fs.RDMAPath(ib), "ports", strconv.Itoa(port))
	idxs := sysfs.ListInts(filepath.Join(base, "gids"))
	p.GIDTableLen = len(idxs)
	for _, i := range idxs {
		g, err := fs.ReadFile(filepath.Join(base, "gids", strconv.Itoa(i)))
		if err != nil || g == "0000:0000:0000:0000:0000:0000:0000:0000" {
			continue
		}
		typ, err := fs.ReadFile(filepath.Join(base, "gid_attrs/types", strconv.Itoa(i)))
		if err != nil {
			continue // entry without a type is not usable (and the kernel reports EINVAL)
		}
		e := GID{Index: i, GID: g, Type: "v1"}
		if strings.Contains(strings.ToLower(typ), "v2") {
			e.Type = "v2"
		}
		e.Netdev, _ = fs.ReadFile(filepath.Join(base, "gid_attrs/ndevs", strconv.Itoa(i)))
		e.IPv4 = gidIPv4(g)
		p.GIDs = append(p.GIDs, e)
	}
	return p
}

// gidIPv4 returns the IPv4 address of an IPv4-mapped GID, or "".
func gidIPv4(g string) string {
	ip := net.ParseIP(g)
	if ip == nil {
		return ""
	}
	if v4 := ip.To4(); v4 != nil && strings.HasPrefix(strings.ToLower(g), "0000:0000:0000:0000:0000:ffff:") {
		return v4.String()
	}
	return ""
}

func linkLayerFromType(t string) string {
	switch t {
	case "1":
		return LinkEthernet
	case "32":
		return LinkInfiniBand
	}
	return ""
}

// Sorted returns the functions sorted by PCI address (Discover already
// returns them so; this is for callers that built a Node by hand).
func (n *Node) Sorted() []*Function {
	out := append([]*Function(nil), n.Functions...)
	sort.Slice(out, func(i, j int) bool { return out[i].BDF < out[j].BDF })
	return out
}

// RefreshHealth re-reads only what health depends on — each known
// function's netdev operstate and IFF_UP, its RDMA devices' port states,
// and each PF's sriov_numvfs — updating n in place. It reports whether the
// node's structure changed (a function or RDMA device appeared or vanished,
// VFs were added or removed), in which case the caller runs Discover again.
// It costs a few reads per function instead of a full discovery's dozens.
func (n *Node) RefreshHealth(sysfsRoot string) (structural bool) {
	fs := sysfs.New(sysfsRoot)
	for _, f := range n.Functions {
		if !fs.Exists(f.BDF) {
			return true
		}
		if f.IsPF() {
			if num, _ := fs.IntAttr(f.BDF, "sriov_numvfs"); num != f.NumVFs {
				return true
			}
		}
		if nd := f.Netdev(); nd != "" {
			f.OperState, _ = fs.NetdevAttr(nd, "operstate")
			f.AdminUp = false
			if fl, err := fs.NetdevAttr(nd, "flags"); err == nil {
				if v, err := strconv.ParseUint(strings.TrimPrefix(fl, "0x"), 16, 32); err == nil {
					f.AdminUp = v&0x1 != 0
				}
			}
		}
		names := fs.RDMADevices(f.BDF)
		if len(names) != len(f.RDMA) {
			return true
		}
		for i := range f.RDMA {
			d := &f.RDMA[i]
			if names[i] != d.Name {
				return true
			}
			for j := range d.Ports {
				if st, err := fs.PortAttr(d.Name, d.Ports[j].Num, "state"); err == nil {
					if k := strings.Index(st, ":"); k >= 0 {
						st = strings.TrimSpace(st[k+1:])
					}
					d.Ports[j].State = st
				}
			}
		}
	}
	return false
}
