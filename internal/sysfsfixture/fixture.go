// Package sysfsfixture writes realistic Linux sysfs trees for PCI network
// functions, SR-IOV PFs/VFs and RDMA devices into a directory, so the
// inventory, the device plugin, the CNI plugins and the simulated-node demo
// can run on a machine without RDMA hardware.
//
// The layout follows the kernel's:
//
//	devices/pci0000:40/0000:40:01.1/0000:41:00.0/      the function
//	    vendor device class numa_node driver->          attributes
//	    sriov_numvfs sriov_totalvfs virtfnN-> physfn->  SR-IOV links
//	    net/<ifname>/{address,operstate,type,mtu,...}   netdevs
//	    infiniband/<ibdev>/ports/1/{link_layer,state,gids/N,gid_attrs/...}
//	    infiniband_verbs/uverbsN/{ibdev,dev}            char devices
//	    infiniband_mad/{umadN,issmN}/{ibdev,port,dev}
//	bus/pci/devices/<bdf> -> ../../../devices/...       index symlinks
//	bus/pci/drivers/<driver>/                            drivers
//	class/net/<ifname> -> ../../devices/.../net/<ifname>
//	class/infiniband/<ibdev> -> ../../devices/.../infiniband/<ibdev>
//	class/misc/rdma_cm/dev                               rdma_cm exists
//
// Netdevs of devices on other buses hang below their PCI function, as on
// real machines: a virtio-net function's netdev below its virtio device
// (AddVirtioNet, NewCloudVM), an mlx5 sub-function's netdev and RDMA
// device below its auxiliary device (AddSF, NewMlx5SFNode).
//
// The package does not import "testing" so the demo can use it at run time.
package sysfsfixture

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// LinkLayer of an RDMA port.
type LinkLayer string

const (
	Ethernet   LinkLayer = "Ethernet"
	InfiniBand LinkLayer = "InfiniBand"
)

// Well-known vendor/device IDs used by the bundled node.
const (
	VendorMellanox = "15b3"
	DeviceCX6Dx    = "101d" // ConnectX-6 Dx PF
	DeviceCX6DxVF  = "101e" // ConnectX-6 Dx VF (ConnectX family VF)
	DeviceCX7      = "1021" // ConnectX-7 PF
	DeviceCX7VF    = "101e"
	DeviceCX5      = "1017" // ConnectX-5 PF
	VendorIntel    = "8086"
	DeviceX710     = "1572"
	VendorBroadcom = "14e4"
	DeviceBCM57414 = "16d7"
)

// Function describes one PCI network function (a PF or a NIC without SR-IOV).
type Function struct {
	BDF      string // e.g. 0000:41:00.0
	Vendor   string // hex, no 0x
	Device   string
	Driver   string // mlx5_core, i40e, ...
	NUMA     int    // -1 for none
	PCIRoot  string // e.g. pci0000:40
	Upstream string // upstream bridge/switch port BDF, e.g. 0000:40:01.1
	// OnRootBus places the function directly on its root's bus, with no
	// root port above it (devices/pci0000:00/0000:00:03.0), as virtual
	// machines place their devices; Upstream is then ignored.
	OnRootBus bool
	// Parent, when set, is the function's parent directory below devices/,
	// however deep (pci0000:00/0000:00:0e.0/pci10000:00/10000:00:02.0 behind
	// an Intel VMD controller, LNXSYSTM:00/.../VMBUS:01/<guid>/pci7870:00 on
	// Hyper-V); PCIRoot, Upstream and OnRootBus are then ignored.
	Parent string
	Netdev string // "" for none
	MAC    string // "" generates one
	MTU    int    // 0 means 1500
	Oper   string // operstate, default "up"

	// RDMA: when RDMADev is set, the function has an RDMA device with one port.
	RDMADev   string
	LinkLayer LinkLayer // default Ethernet
	IPv4      string    // optional address shown in the RoCE GID table
	PortState string    // default "4: ACTIVE"

	// SR-IOV
	TotalVFs int
	NumVFs   int
	VFDevice string // device ID of the VFs
	VFDriver string // default Driver
	// VFNetdev names the VF netdevs; default "<Netdev>v<i>".
	VFNetdev func(i int) string
	// VFRDMA names the VF RDMA devices; "" disables RDMA on VFs. Default
	// continues the node's mlx5_N numbering.
	VFRDMA func(i int) string
	// VFNoRDMA turns off RDMA on the VFs.
	VFNoRDMA bool
}

// Node is a fixture sysfs tree rooted at Root.
type Node struct {
	Root    string
	nextIB  int
	nextUV  int
	nextMAD int
	macSeq  uint32
	// Serial tells machines apart: it goes into every generated MAC
	// address and node GUID, so several fixtures (the nodes of one
	// simulated cluster) never share one. 0 keeps the historical values.
	Serial   uint8
	Devices  map[string]string // bdf -> device dir (absolute)
	RDMAByBD map[string]string // bdf -> rdma device name
	NetByBDF map[string]string // bdf -> netdev name
}

// New prepares an empty tree under root (which must exist or be creatable).
func New(root string) (*Node, error) {
	for _, d := range []string{"bus/pci/devices", "bus/pci/drivers", "class/net", "class/infiniband", "class/infiniband_verbs", "class/misc/rdma_cm"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return nil, fmt.Errorf("sysfs fixture: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "class/misc/rdma_cm/dev"), []byte("10:58\n"), 0o644); err != nil {
		return nil, fmt.Errorf("sysfs fixture: %w", err)
	}
	return &Node{Root: root, Devices: map[string]string{}, RDMAByBD: map[string]string{}, NetByBDF: map[string]string{}}, nil
}

// NextRDMAName returns the next free mlx5_N name.
func (n *Node) NextRDMAName() string {
	s := fmt.Sprintf("mlx5_%d", n.nextIB)
	n.nextIB++
	return s
}

// AddFunction writes a PF (and its VFs when NumVFs > 0).
func (n *Node) AddFunction(f Function) error {
	if f.LinkLayer == "" {
		f.LinkLayer = Ethernet
	}
	if f.PCIRoot == "" {
		// the root of the function's domain and bus: 10000:01:00.0 -> pci10000:01
		dom, rest, _ := strings.Cut(f.BDF, ":")
		f.PCIRoot = "pci" + dom + ":" + rest[:2]
	}
	if f.Upstream == "" {
		// root port 01.1 on the root bus: pci0000:40 -> 0000:40:01.1
		f.Upstream = strings.TrimPrefix(f.PCIRoot, "pci") + ":01.1"
	}
	if f.OnRootBus {
		f.Upstream = ""
	}
	dir := filepath.Join(n.Root, "devices", f.PCIRoot, f.Upstream, f.BDF)
	if f.Parent != "" {
		dir = filepath.Join(n.Root, "devices", f.Parent, f.BDF)
	}
	if err := n.writeFunction(dir, f, f.Netdev, f.RDMADev, f.Device, f.Driver); err != nil {
		return err
	}
	if f.TotalVFs > 0 || f.NumVFs > 0 {
		if err := writeFile(dir, "sriov_totalvfs", strconv.Itoa(f.TotalVFs)); err != nil {
			return err
		}
		if err := writeFile(dir, "sriov_numvfs", strconv.Itoa(f.NumVFs)); err != nil {
			return err
		}
	}
	for i := 0; i < f.NumVFs; i++ {
		if err := n.AddVF(f, i); err != nil {
			return err
		}
	}
	return nil
}

// VFBDF computes the PCI address of VF i of a PF the way mlx5 lays them out
// (functions 2.. on the same bus, wrapping into following devices).
func VFBDF(pf string, i int) string {
	// pf: dddd:bb:dd.f, the domain 4 or more hex digits
	dom, rest, _ := strings.Cut(pf, ":")
	bus := rest[:2]
	dev, _ := strconv.ParseInt(rest[3:5], 16, 32)
	fn, _ := strconv.ParseInt(rest[6:], 16, 32)
	idx := int(dev)*8 + int(fn) + 2 + i
	return fmt.Sprintf("%s:%s:%02x.%d", dom, bus, idx/8, idx%8)
}

// AddVF writes VF i of pf (used by AddFunction, and by tests that grow
// sriov_numvfs at run time).
func (n *Node) AddVF(pf Function, i int) error {
	pfDir := n.Devices[pf.BDF]
	if pfDir == "" {
		return fmt.Errorf("sysfs fixture: PF %s not written yet", pf.BDF)
	}
	bdf := VFBDF(pf.BDF, i)
	vf := pf
	vf.BDF = bdf
	vf.TotalVFs, vf.NumVFs = 0, 0
	vf.IPv4 = ""
	netdev := fmt.Sprintf("%sv%d", pf.Netdev, i)
	if pf.VFNetdev != nil {
		netdev = pf.VFNetdev(i)
	}
	rdma := ""
	if !pf.VFNoRDMA && pf.RDMADev != "" {
		if pf.VFRDMA != nil {
			rdma = pf.VFRDMA(i)
		} else {
			rdma = n.NextRDMAName()
		}
	}
	dev := pf.VFDevice
	if dev == "" {
		dev = pf.Device
	}
	drv := pf.VFDriver
	if drv == "" {
		drv = pf.Driver
	}
	dir := filepath.Join(filepath.Dir(pfDir), bdf)
	if err := n.writeFunction(dir, vf, netdev, rdma, dev, drv); err != nil {
		return err
	}
	if err := symlink(filepath.Join(pfDir, "virtfn"+strconv.Itoa(i)), filepath.Join("..", bdf)); err != nil {
		return err
	}
	return symlink(filepath.Join(dir, "physfn"), filepath.Join("..", pf.BDF))
}

// RemoveVF deletes VF i of pf from the tree (as sriov_numvfs shrinking does).
func (n *Node) RemoveVF(pf Function, i int) error {
	bdf := VFBDF(pf.BDF, i)
	dir := n.Devices[bdf]
	if dir == "" {
		return fmt.Errorf("sysfs fixture: VF %s not present", bdf)
	}
	if nd := n.NetByBDF[bdf]; nd != "" {
		_ = os.Remove(filepath.Join(n.Root, "class/net", nd))
	}
	if ib := n.RDMAByBD[bdf]; ib != "" {
		_ = os.Remove(filepath.Join(n.Root, "class/infiniband", ib))
	}
	_ = os.Remove(filepath.Join(n.Root, "bus/pci/devices", bdf))
	_ = os.Remove(filepath.Join(n.Devices[pf.BDF], "virtfn"+strconv.Itoa(i)))
	delete(n.Devices, bdf)
	delete(n.NetByBDF, bdf)
	delete(n.RDMAByBD, bdf)
	return os.RemoveAll(dir)
}

// SetNumVFs grows or shrinks the VFs of pf and updates sriov_numvfs.
func (n *Node) SetNumVFs(pf Function, from, to int) error {
	for i := from; i < to; i++ {
		if err := n.AddVF(pf, i); err != nil {
			return err
		}
	}
	for i := from - 1; i >= to; i-- {
		if err := n.RemoveVF(pf, i); err != nil {
			return err
		}
	}
	return writeFile(n.Devices[pf.BDF], "sriov_numvfs", strconv.Itoa(to))
}

func flags(up bool) string {
	if up {
		return "0x1003" // IFF_UP|IFF_BROADCAST|IFF_MULTICAST
	}
	return "0x1002"
}

// SetAdminUp sets or clears IFF_UP in a netdev's flags.
func (n *Node) SetAdminUp(netdev string, up bool) error {
	return writeFile(filepath.Join(n.Root, "class/net", netdev), "flags", flags(up))
}

// SetOperState writes operstate (and carrier) of an admin-up netdev: "down"
// then means the link failed (no carrier).
func (n *Node) SetOperState(netdev, state string) error {
	dir := filepath.Join(n.Root, "class/net", netdev)
	carrier := "0"
	if state == "up" {
		carrier = "1"
	}
	if err := writeFile(dir, "carrier", carrier); err != nil {
		return err
	}
	return writeFile(dir, "operstate", state)
}

// SetPortState writes the RDMA port state, e.g. "1: DOWN" or "4: ACTIVE".
func (n *Node) SetPortState(ibdev, state string) error {
	return writeFile(filepath.Join(n.Root, "class/infiniband", ibdev, "ports/1"), "state", state)
}

// RemoveRDMA deletes a function's RDMA device (as a driver unbind would).
func (n *Node) RemoveRDMA(bdf string) error {
	ib := n.RDMAByBD[bdf]
	if ib == "" {
		return fmt.Errorf("sysfs fixture: %s has no RDMA device", bdf)
	}
	_ = os.Remove(filepath.Join(n.Root, "class/infiniband", ib))
	delete(n.RDMAByBD, bdf)
	for _, d := range []string{"infiniband", "infiniband_verbs", "infiniband_mad"} {
		if err := os.RemoveAll(filepath.Join(n.Devices[bdf], d)); err != nil {
			return fmt.Errorf("sysfs fixture: %w", err)
		}
	}
	return nil
}

// RestoreRDMA re-creates a function's RDMA device under the given name.
func (n *Node) RestoreRDMA(bdf, ibdev string, ll LinkLayer) error {
	dir := n.Devices[bdf]
	if dir == "" {
		return fmt.Errorf("sysfs fixture: %s not present", bdf)
	}
	n.RDMAByBD[bdf] = ibdev
	return n.writeRDMA(dir, ibdev, ll, n.NetByBDF[bdf], "", "4: ACTIVE")
}

func (n *Node) writeFunction(dir string, f Function, netdev, rdma, device, driver string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("sysfs fixture: %w", err)
	}
	n.Devices[f.BDF] = dir
	class := "0x020000"
	if f.LinkLayer == InfiniBand {
		class = "0x020700"
	}
	for name, val := range map[string]string{
		"vendor":    "0x" + f.Vendor,
		"device":    "0x" + device,
		"class":     class,
		"numa_node": strconv.Itoa(f.NUMA),
	} {
		if err := writeFile(dir, name, val); err != nil {
			return err
		}
	}
	if driver != "" {
		drvDir := filepath.Join(n.Root, "bus/pci/drivers", driver)
		if err := os.MkdirAll(drvDir, 0o755); err != nil {
			return fmt.Errorf("sysfs fixture: %w", err)
		}
		rel, _ := filepath.Rel(dir, drvDir)
		if err := symlink(filepath.Join(dir, "driver"), rel); err != nil {
			return err
		}
	}
	rel, _ := filepath.Rel(filepath.Join(n.Root, "bus/pci/devices"), dir)
	if err := symlink(filepath.Join(n.Root, "bus/pci/devices", f.BDF), rel); err != nil {
		return err
	}
	if netdev != "" {
		if err := n.writeNetdev(dir, f, netdev); err != nil {
			return err
		}
	}
	if rdma != "" {
		state := f.PortState
		if state == "" {
			state = "4: ACTIVE"
		}
		n.RDMAByBD[f.BDF] = rdma
		if err := n.writeRDMA(dir, rdma, f.LinkLayer, netdev, f.IPv4, state); err != nil {
			return err
		}
	}
	return nil
}

// writeNetdev writes the function's own netdev below dir (the function's
// directory, or its virtio device's) and records it as the function's.
func (n *Node) writeNetdev(dir string, f Function, netdev string) error {
	n.NetByBDF[f.BDF] = netdev
	return n.writeNetdevDir(dir, f, netdev)
}

// writeNetdevDir writes <dir>/net/<netdev> with its attributes (MAC, MTU,
// operstate and link type from f), its device link back to dir, and
// class/net/<netdev>.
func (n *Node) writeNetdevDir(dir string, f Function, netdev string) error {
	nd := filepath.Join(dir, "net", netdev)
	if err := os.MkdirAll(nd, 0o755); err != nil {
		return fmt.Errorf("sysfs fixture: %w", err)
	}
	// class/net/<netdev>/device -> ../../../<device>, as the kernel links
	// every netdev that has a parent device
	if err := symlink(filepath.Join(nd, "device"), filepath.Join("../../..", filepath.Base(dir))); err != nil {
		return err
	}
	mac := f.MAC
	typ := "1"
	if f.LinkLayer == InfiniBand {
		typ = "32"
	}
	if mac == "" || netdev != f.Netdev {
		n.macSeq++
		b := make([]byte, 4)
		binary.BigEndian.PutUint32(b, n.macSeq)
		mac = net.HardwareAddr{0x02, 0x15, b[0] ^ n.Serial, b[1], b[2], b[3]}.String()
	}
	mtu := f.MTU
	if mtu == 0 {
		mtu = 1500
	}
	oper := f.Oper
	if oper == "" {
		oper = "up"
	}
	if oper == "admindown" {
		// administratively down: flags without IFF_UP, operstate down
		defer func() { _ = writeFile(nd, "operstate", "down") }()
	}
	carrier := "0"
	if oper == "up" {
		carrier = "1"
	}
	for name, val := range map[string]string{
		"address": mac, "type": typ, "mtu": strconv.Itoa(mtu), "operstate": oper, "carrier": carrier,
		"ifindex": strconv.Itoa(int(n.macSeq) + 100), "flags": flags(oper != "admindown"),
	} {
		if err := writeFile(nd, name, val); err != nil {
			return err
		}
	}
	rel, _ := filepath.Rel(filepath.Join(n.Root, "class/net"), nd)
	return symlink(filepath.Join(n.Root, "class/net", netdev), rel)
}

// writeRDMA writes RDMA device ibdev below the device directory dir (a
// PCI function's, or an mlx5 sub-function's) with its class link and char
// devices.
func (n *Node) writeRDMA(dir, ibdev string, ll LinkLayer, netdev, ipv4, state string) error {
	if ll == "" {
		ll = Ethernet
	}
	ib := filepath.Join(dir, "infiniband", ibdev)
	port := filepath.Join(ib, "ports/1")
	for _, d := range []string{"gids", "gid_attrs/types", "gid_attrs/ndevs"} {
		if err := os.MkdirAll(filepath.Join(port, d), 0o755); err != nil {
			return fmt.Errorf("sysfs fixture: %w", err)
		}
	}
	if err := writeFile(port, "link_layer", string(ll)); err != nil {
		return err
	}
	if err := writeFile(port, "state", state); err != nil {
		return err
	}
	if err := writeFile(port, "phys_state", "5: LinkUp"); err != nil {
		return err
	}
	if err := writeFile(port, "rate", "100 Gb/sec (4X EDR)"); err != nil {
		return err
	}
	if err := writeFile(ib, "node_type", "1: CA"); err != nil {
		return err
	}
	guid := fmt.Sprintf("b859:9f03:%02x%02x:%04x", n.Serial, n.nextUV%256, n.nextUV)
	if err := writeFile(ib, "node_guid", guid); err != nil {
		return err
	}
	// GID table: RoCE ports carry link-local v1/v2 and, when the netdev has
	// an IPv4 address, IPv4-mapped v1/v2 entries (indexes 2 and 3, the
	// layout behind the common-but-not-universal NCCL_IB_GID_INDEX=3).
	type gid struct{ gid, typ string }
	var gids []gid
	if ll == Ethernet {
		ll6 := "fe80:0000:0000:0000:" + strings.ReplaceAll(guid, ":", ":")[0:19]
		gids = append(gids, gid{ll6, "IB/RoCE v1"}, gid{ll6, "RoCE v2"})
		if ipv4 != "" {
			ip := net.ParseIP(ipv4).To4()
			if ip == nil {
				return fmt.Errorf("sysfs fixture: bad IPv4 %q for %s", ipv4, ibdev)
			}
			g := fmt.Sprintf("0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x", ip[0], ip[1], ip[2], ip[3])
			gids = append(gids, gid{g, "IB/RoCE v1"}, gid{g, "RoCE v2"})
		}
	} else {
		gids = append(gids, gid{"fe80:0000:0000:0000:" + guid, "IB/RoCE v1"})
	}
	for i := 0; i < 8; i++ {
		val, typ, nd := "0000:0000:0000:0000:0000:0000:0000:0000", "", ""
		if i < len(gids) {
			val, typ = gids[i].gid, gids[i].typ
			if ll == Ethernet {
				nd = netdev
			}
		}
		if err := writeFile(filepath.Join(port, "gids"), strconv.Itoa(i), val); err != nil {
			return err
		}
		if typ != "" {
			if err := writeFile(filepath.Join(port, "gid_attrs/types"), strconv.Itoa(i), typ); err != nil {
				return err
			}
		}
		if nd != "" {
			if err := writeFile(filepath.Join(port, "gid_attrs/ndevs"), strconv.Itoa(i), nd); err != nil {
				return err
			}
		}
	}
	rel, _ := filepath.Rel(filepath.Join(n.Root, "class/infiniband"), ib)
	if err := symlink(filepath.Join(n.Root, "class/infiniband", ibdev), rel); err != nil {
		return err
	}
	// char devices
	uv := filepath.Join(dir, "infiniband_verbs", fmt.Sprintf("uverbs%d", n.nextUV))
	if err := writeFile(uv, "ibdev", ibdev); err != nil {
		return err
	}
	if err := writeFile(uv, "dev", fmt.Sprintf("231:%d", 192+n.nextUV)); err != nil {
		return err
	}
	n.nextUV++
	for _, kind := range []string{"umad", "issm"} {
		md := filepath.Join(dir, "infiniband_mad", fmt.Sprintf("%s%d", kind, n.nextMAD))
		if err := writeFile(md, "ibdev", ibdev); err != nil {
			return err
		}
		if err := writeFile(md, "port", "1"); err != nil {
			return err
		}
	}
	n.nextMAD++
	return nil
}

func writeFile(dir, name, val string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("sysfs fixture: %w", err)
	}
	// temp file + rename: a reader never sees a half-written attribute,
	// as with the kernel's sysfs
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(val+"\n"), 0o644); err != nil {
		return fmt.Errorf("sysfs fixture: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("sysfs fixture: %w", err)
	}
	return nil
}

func symlink(path, target string) error {
	_ = os.Remove(path)
	if err := os.Symlink(target, path); err != nil {
		return fmt.Errorf("sysfs fixture: %w", err)
	}
	return nil
}
