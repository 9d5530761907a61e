package sysfsfixture

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// InfiniBand additions: the port attributes a subnet manager sets (LID, SM
// LID, PKey table), node and port GUIDs, IPoIB netdevs with their 20-byte
// hardware address, and functions that have an RDMA device but no netdev
// (IB-only). The layout follows the kernel's:
//
//	infiniband/<ibdev>/node_guid                    0c42:a103:0065:8e8a
//	infiniband/<ibdev>/ports/1/{lid,sm_lid,sm_sl,lid_mask_count,link_layer,state,phys_state,rate}
//	infiniband/<ibdev>/ports/1/gids/0               fe80:0000:0000:0000:<port GUID>
//	infiniband/<ibdev>/ports/1/pkeys/<i>            0xffff, 0x8005, 0x0000 (empty slot)
//	net/<ib netdev>/{address,addr_len,broadcast,pkey,mode,type=32}
//
// A GUID in this package's API is written the way `ip link` and
// ib-sriov-cni write it: eight colon-separated bytes, 0c:42:a1:03:00:65:8e:8a.

// PKeyTableSize is the number of PKey slots written for a port (mlx5 ports
// have 128; unused slots read 0x0000).
const PKeyTableSize = 128

// DefaultPKey is the full-membership default partition every port has.
const DefaultPKey uint16 = 0xffff

// ZeroGUID is what a freshly created mlx5 VF reports before a GUID is set.
const ZeroGUID = "00:00:00:00:00:00:00:00"

// IBPort is the InfiniBand state of port 1 of an RDMA device beyond its link
// layer: what the subnet manager assigned, and how the link trained.
type IBPort struct {
	// LID of the port; 0 means the subnet manager has not configured it.
	LID uint16
	// SMLID is the LID of the subnet manager; 0 means no SM seen.
	SMLID uint16
	SMSL  int
	LMC   int
	// PKeys is the port's PKey table from slot 0; empty writes {0xffff}.
	// The membership bit (0x8000) is part of each value, as in sysfs.
	PKeys []uint16
	// State defaults to "4: ACTIVE", PhysState to "5: LinkUp", Rate to
	// "400 Gb/sec (4X NDR)".
	State, PhysState, Rate string
}

// SysfsGUID converts a GUID in ip-link form (0c:42:a1:03:00:65:8e:8a) to
// the form of node_guid and the GID table (0c42:a103:0065:8e8a).
func SysfsGUID(guid string) (string, error) {
	hw, err := net.ParseMAC(guid)
	if err != nil || len(hw) != 8 {
		return "", fmt.Errorf("sysfs fixture: GUID %q: want 8 bytes like 0c:42:a1:03:00:65:8e:8a", guid)
	}
	return fmt.Sprintf("%02x%02x:%02x%02x:%02x%02x:%02x%02x", hw[0], hw[1], hw[2], hw[3], hw[4], hw[5], hw[6], hw[7]), nil
}

// ParseSysfsGUID converts node_guid's form (0c42:a103:0065:8e8a) to the
// ip-link form (0c:42:a1:03:00:65:8e:8a).
func ParseSysfsGUID(s string) (string, error) {
	h := strings.ReplaceAll(strings.TrimSpace(s), ":", "")
	if len(h) != 16 {
		return "", fmt.Errorf("sysfs fixture: GUID %q: want 4 groups of 4 hex digits", s)
	}
	var b []string
	for i := 0; i < 16; i += 2 {
		if _, err := strconv.ParseUint(h[i:i+2], 16, 8); err != nil {
			return "", fmt.Errorf("sysfs fixture: GUID %q: %w", s, err)
		}
		b = append(b, strings.ToLower(h[i:i+2]))
	}
	return strings.Join(b, ":"), nil
}

// ibPortDir is class/infiniband/<ibdev>/ports/1 (through the class link).
func (n *Node) ibPortDir(ibdev string) string {
	return filepath.Join(n.Root, "class/infiniband", ibdev, "ports/1")
}

// SetIBPort writes p into port 1 of ibdev.
func (n *Node) SetIBPort(ibdev string, p IBPort) error {
	port := n.ibPortDir(ibdev)
	if _, err := os.Stat(port); err != nil {
		return fmt.Errorf("sysfs fixture: RDMA device %s: %w", ibdev, err)
	}
	if p.State == "" {
		p.State = "4: ACTIVE"
	}
	if p.PhysState == "" {
		p.PhysState = "5: LinkUp"
	}
	if p.Rate == "" {
		p.Rate = "400 Gb/sec (4X NDR)"
	}
	if len(p.PKeys) == 0 {
		p.PKeys = []uint16{DefaultPKey}
	}
	if len(p.PKeys) > PKeyTableSize {
		return fmt.Errorf("sysfs fixture: %s: %d PKeys, the table has %d slots", ibdev, len(p.PKeys), PKeyTableSize)
	}
	for name, val := range map[string]string{
		"lid":            fmt.Sprintf("0x%x", p.LID),
		"sm_lid":         fmt.Sprintf("0x%x", p.SMLID),
		"sm_sl":          strconv.Itoa(p.SMSL),
		"lid_mask_count": strconv.Itoa(p.LMC),
		"state":          p.State,
		"phys_state":     p.PhysState,
		"rate":           p.Rate,
		"cap_mask":       "0xa651e84a",
	} {
		if err := writeFile(port, name, val); err != nil {
			return err
		}
	}
	for i := 0; i < PKeyTableSize; i++ {
		var v uint16
		if i < len(p.PKeys) {
			v = p.PKeys[i]
		}
		if err := writeFile(filepath.Join(port, "pkeys"), strconv.Itoa(i), fmt.Sprintf("0x%04x", v)); err != nil {
			return err
		}
	}
	return nil
}

// IBPortOf reads back port 1 of ibdev as SetIBPort wrote it (PKeys without
// the empty slots).
func (n *Node) IBPortOf(ibdev string) (IBPort, error) {
	port := n.ibPortDir(ibdev)
	rd := func(name string) (string, error) {
		b, err := os.ReadFile(filepath.Join(port, name))
		if err != nil {
			return "", fmt.Errorf("sysfs fixture: %s: %w", ibdev, err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	var p IBPort
	var err error
	num := func(name string) (uint64, error) {
		s, err := rd(name)
		if err != nil {
			return 0, err
		}
		return strconv.ParseUint(s, 0, 16)
	}
	var v uint64
	if v, err = num("lid"); err != nil {
		return p, err
	}
	p.LID = uint16(v)
	if v, err = num("sm_lid"); err != nil {
		return p, err
	}
	p.SMLID = uint16(v)
	if v, err = num("sm_sl"); err != nil {
		return p, err
	}
	p.SMSL = int(v)
	if v, err = num("lid_mask_count"); err != nil {
		return p, err
	}
	p.LMC = int(v)
	if p.State, err = rd("state"); err != nil {
		return p, err
	}
	if p.PhysState, err = rd("phys_state"); err != nil {
		return p, err
	}
	if p.Rate, err = rd("rate"); err != nil {
		return p, err
	}
	for i := 0; i < PKeyTableSize; i++ {
		if v, err = num(filepath.Join("pkeys", strconv.Itoa(i))); err != nil {
			return p, err
		}
		if v != 0 {
			p.PKeys = append(p.PKeys, uint16(v))
		}
	}
	return p, nil
}

// SetGUIDs writes ibdev's node GUID (node_guid) and port GUID (the low half
// of GID 0, with the default subnet prefix fe80::), and, when the RDMA
// device's function has an IPoIB netdev, that netdev's hardware address:
// what the kernel shows after a GUID set through the PF took effect (on
// mlx5 after the VF's rebind). Either GUID may be "" to leave it.
func (n *Node) SetGUIDs(ibdev, nodeGUID, portGUID string) error {
	ib := filepath.Join(n.Root, "class/infiniband", ibdev)
	if nodeGUID != "" {
		s, err := SysfsGUID(nodeGUID)
		if err != nil {
			return err
		}
		if err := writeFile(ib, "node_guid", s); err != nil {
			return err
		}
	}
	if portGUID == "" {
		return nil
	}
	s, err := SysfsGUID(portGUID)
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(ib, "ports/1/gids"), "0", "fe80:0000:0000:0000:"+s); err != nil {
		return err
	}
	for bdf, dev := range n.RDMAByBD {
		if dev != ibdev {
			continue
		}
		if nd := n.NetByBDF[bdf]; nd != "" {
			if b, err := os.ReadFile(filepath.Join(n.Root, "class/net", nd, "type")); err == nil && strings.TrimSpace(string(b)) == "32" {
				return n.writeIPoIBAddr(nd, portGUID)
			}
		}
	}
	return nil
}

// GUIDs reads ibdev's node GUID and port GUID back in ip-link form.
func (n *Node) GUIDs(ibdev string) (nodeGUID, portGUID string, err error) {
	ib := filepath.Join(n.Root, "class/infiniband", ibdev)
	b, err := os.ReadFile(filepath.Join(ib, "node_guid"))
	if err != nil {
		return "", "", fmt.Errorf("sysfs fixture: %s: %w", ibdev, err)
	}
	if nodeGUID, err = ParseSysfsGUID(string(b)); err != nil {
		return "", "", err
	}
	b, err = os.ReadFile(filepath.Join(ib, "ports/1/gids/0"))
	if err != nil {
		return "", "", fmt.Errorf("sysfs fixture: %s: %w", ibdev, err)
	}
	g := strings.TrimSpace(string(b))
	if len(g) != 39 {
		return "", "", fmt.Errorf("sysfs fixture: %s: GID 0 %q is not a GID", ibdev, g)
	}
	portGUID, err = ParseSysfsGUID(g[20:])
	return nodeGUID, portGUID, err
}

// writeIPoIBAddr gives the IPoIB netdev nd its 20-byte hardware address:
// 4 bytes of flags and QPN, then GID 0 (subnet prefix fe80:: + port GUID),
// and the IPoIB attributes (addr_len, broadcast with the default PKey,
// pkey, datagram mode).
func (n *Node) writeIPoIBAddr(nd, portGUID string) error {
	hw, err := net.ParseMAC(portGUID)
	if err != nil || len(hw) != 8 {
		return fmt.Errorf("sysfs fixture: GUID %q: want 8 bytes", portGUID)
	}
	addr := append([]byte{0x00, 0x00, 0x10, 0x49, 0xfe, 0x80, 0, 0, 0, 0, 0, 0}, hw...)
	dir := filepath.Join(n.Root, "class/net", nd)
	for name, val := range map[string]string{
		"address":   net.HardwareAddr(addr).String(),
		"addr_len":  "20",
		"broadcast": "00:ff:ff:ff:ff:12:40:1b:ff:ff:00:00:00:00:00:00:ff:ff:ff:ff",
		"pkey":      "0xffff",
		"mode":      "datagram",
	} {
		if err := writeFile(dir, name, val); err != nil {
			return err
		}
	}
	return nil
}

// IPoIBAddress is the 20-byte hardware address an IPoIB netdev with port
// GUID portGUID shows (as written by SetGUIDs and the IB builders).
func IPoIBAddress(portGUID string) (string, error) {
	hw, err := net.ParseMAC(portGUID)
	if err != nil || len(hw) != 8 {
		return "", fmt.Errorf("sysfs fixture: GUID %q: want 8 bytes", portGUID)
	}
	return net.HardwareAddr(append([]byte{0x00, 0x00, 0x10, 0x49, 0xfe, 0x80, 0, 0, 0, 0, 0, 0}, hw...)).String(), nil
}

// IBNodeOptions tunes NewIBNode.
type IBNodeOptions struct {
	// VFs on Port0 (IPoIB netdevs, the exclusive pool); default 4.
	VFs int
	// TotalVFs is Port0's sriov_totalvfs; default 16 (more when VFs is
	// more). VFs above it are refused, as the kernel refuses them.
	TotalVFs int
	// VFNetdev names Port0's VF netdevs (e.g. to match veth ends in a test
	// netns); default ibp193s0f0v<i>.
	VFNetdev func(i int) string
	// VFGUID gives Port0's VF i its node and port GUID at creation, as an
	// operator that pre-assigns GUIDs does; default ZeroGUID (a fresh mlx5
	// VF).
	VFGUID func(i int) string
	// IBOnlyVFs on the IB-only PF (no netdevs); default 2.
	IBOnlyVFs int
	// SMLID is the subnet manager's LID on every port; default 1. NoSM
	// leaves LID and SM LID 0 (no subnet manager on the fabric).
	SMLID uint16
	NoSM  bool
}

// IBNode is an InfiniBand training node: a dual-port ConnectX-7 in IB mode
// whose port 0 carries VFs (exclusive pods), whose port 1 is shared
// (IPoIB children), and an IB-only ConnectX-7 function with VFs, none of
// which has a netdev (RDMA devices and uverbs nodes only).
type IBNode struct {
	*Node
	Mgmt     Function // 0000:03:00.0 eno1 ConnectX-5 mlx5_0 Ethernet, default route (never handed out)
	Port0    Function // 0000:c1:00.0 ibp193s0f0 ConnectX-7 mlx5_1 IB NUMA 1, VFs 0000:c1:00.2.. (exclusive)
	Port1    Function // 0000:c1:00.1 ibp193s0f1 ConnectX-7 mlx5_2 IB NUMA 1, no VFs (shared IPoIB), PKeys 0xffff 0x8005 0x8006
	IBOnly   Function // 0000:d1:00.0 (no netdev) ConnectX-7 mlx5_3 IB NUMA 1, VFs 0000:d1:00.2.. without netdevs
	MgmtLink string   // eno1

	// Port0VFs and IBOnlyVFs are the VFs' PCI addresses, by VF index.
	Port0VFs, IBOnlyVFs []string
	// GUIDs of every RDMA device as written at creation (ip-link form),
	// and the port GUIDs (equal to the node GUIDs for PFs and VFs here).
	NodeGUID, PortGUID map[string]string
}

// PF GUIDs of the IB node: ConnectX-7 OUI 0c:42:a1, one per RDMA device.
func ibPFGUID(i int) string { return fmt.Sprintf("0c:42:a1:03:00:65:8e:%02x", 0x80+i) }

// NewIBNode writes the IB node under root:
//
//	0000:03:00.0  eno1         ConnectX-5  mlx5_0  Ethernet        NUMA 0  default route (never handed out)
//	0000:c1:00.0  ibp193s0f0   ConnectX-7  mlx5_1  IB  LID 0x11    NUMA 1  VFs 0000:c1:00.2.. ibp193s0f0v<i>, mlx5_4..
//	0000:c1:00.1  ibp193s0f1   ConnectX-7  mlx5_2  IB  LID 0x12    NUMA 1  no VFs; PKeys 0xffff 0x8005 0x8006
//	0000:d1:00.0  -            ConnectX-7  mlx5_3  IB  LID 0x13    NUMA 1  VFs 0000:d1:00.2.. without netdev (IB-only)
//
// Every IB port is ACTIVE with SM LID 1 (IBNodeOptions.NoSM: LID 0, no SM);
// PFs have GUIDs 0c:42:a1:03:00:65:8e:8<i>; VFs of Port0 start with
// IBNodeOptions.VFGUID (default zero, as fresh mlx5 VFs), IB-only VFs with
// zero GUIDs. VF ports share their PF port's LID (mlx5 vports) and carry
// the PKeys 0xffff 0x8005.
func NewIBNode(root string, o IBNodeOptions) (*IBNode, error) {
	if o.VFs == 0 {
		o.VFs = 4
	}
	if o.IBOnlyVFs == 0 {
		o.IBOnlyVFs = 2
	}
	if o.TotalVFs == 0 {
		o.TotalVFs = max(16, o.VFs)
	}
	if o.VFs > o.TotalVFs {
		return nil, fmt.Errorf("sysfs fixture: IB node: %d VFs on ibp193s0f0, sriov_totalvfs is %d; fix: raise IBNodeOptions.TotalVFs", o.VFs, o.TotalVFs)
	}
	if o.SMLID == 0 {
		o.SMLID = 1
	}
	if o.VFNetdev == nil {
		o.VFNetdev = func(i int) string { return fmt.Sprintf("ibp193s0f0v%d", i) }
	}
	n, err := New(root)
	if err != nil {
		return nil, err
	}
	s := &IBNode{Node: n, MgmtLink: "eno1", NodeGUID: map[string]string{}, PortGUID: map[string]string{}}
	s.Mgmt = Function{BDF: "0000:03:00.0", Vendor: VendorMellanox, Device: DeviceCX5, Driver: "mlx5_core", NUMA: 0,
		PCIRoot: "pci0000:00", Netdev: "eno1", RDMADev: n.NextRDMAName(), IPv4: "192.168.10.31"}
	s.Port0 = Function{BDF: "0000:c1:00.0", Vendor: VendorMellanox, Device: DeviceCX7, Driver: "mlx5_core", NUMA: 1,
		PCIRoot: "pci0000:c0", Netdev: "ibp193s0f0", RDMADev: n.NextRDMAName(), LinkLayer: InfiniBand,
		TotalVFs: o.TotalVFs, VFDevice: DeviceCX7VF, VFNetdev: o.VFNetdev, MTU: 4092}
	s.Port1 = Function{BDF: "0000:c1:00.1", Vendor: VendorMellanox, Device: DeviceCX7, Driver: "mlx5_core", NUMA: 1,
		PCIRoot: "pci0000:c0", Netdev: "ibp193s0f1", RDMADev: n.NextRDMAName(), LinkLayer: InfiniBand, MTU: 4092}
	s.IBOnly = Function{BDF: "0000:d1:00.0", Vendor: VendorMellanox, Device: DeviceCX7, Driver: "mlx5_core", NUMA: 1,
		PCIRoot: "pci0000:d0", RDMADev: n.NextRDMAName(), LinkLayer: InfiniBand,
		TotalVFs: 8, VFDevice: DeviceCX7VF, VFNetdev: func(int) string { return "" }}
	for _, f := range []Function{s.Mgmt, s.Port0, s.Port1, s.IBOnly} {
		if err := n.AddFunction(f); err != nil {
			return nil, err
		}
	}
	if err := n.SetNumVFs(s.Port0, 0, o.VFs); err != nil {
		return nil, err
	}
	s.Port0.NumVFs = o.VFs
	if err := n.SetNumVFs(s.IBOnly, 0, o.IBOnlyVFs); err != nil {
		return nil, err
	}
	s.IBOnly.NumVFs = o.IBOnlyVFs

	port := func(lid uint16, pkeys ...uint16) IBPort {
		if o.NoSM {
			return IBPort{PKeys: pkeys}
		}
		return IBPort{LID: lid, SMLID: o.SMLID, PKeys: pkeys}
	}
	type dev struct {
		ibdev string
		guid  string
		port  IBPort
	}
	devs := []dev{
		{s.Port0.RDMADev, ibPFGUID(1), port(0x11, DefaultPKey, 0x8005)},
		{s.Port1.RDMADev, ibPFGUID(2), port(0x12, DefaultPKey, 0x8005, 0x8006)},
		{s.IBOnly.RDMADev, ibPFGUID(3), port(0x13, DefaultPKey, 0x8005)},
	}
	for i := 0; i < o.VFs; i++ {
		bdf := VFBDF(s.Port0.BDF, i)
		s.Port0VFs = append(s.Port0VFs, bdf)
		g := ZeroGUID
		if o.VFGUID != nil {
			g = o.VFGUID(i)
		}
		devs = append(devs, dev{n.RDMAByBD[bdf], g, port(0x11, DefaultPKey, 0x8005)})
	}
	for i := 0; i < o.IBOnlyVFs; i++ {
		bdf := VFBDF(s.IBOnly.BDF, i)
		s.IBOnlyVFs = append(s.IBOnlyVFs, bdf)
		devs = append(devs, dev{n.RDMAByBD[bdf], ZeroGUID, port(0x13, DefaultPKey, 0x8005)})
	}
	for _, d := range devs {
		if err := n.SetIBPort(d.ibdev, d.port); err != nil {
			return nil, err
		}
		if err := n.SetGUIDs(d.ibdev, d.guid, d.guid); err != nil {
			return nil, err
		}
		s.NodeGUID[d.ibdev], s.PortGUID[d.ibdev] = d.guid, d.guid
	}
	return s, nil
}

// IBOnlyVM is a VM that is handed ConnectX VFs in InfiniBand mode without
// any IPoIB netdev (as some clouds hand out GPU VMs): each VF has an RDMA
// device and uverbs/umad nodes and nothing in class/net; no physfn (the PF
// is the host's) and numa_node -1, the functions below VMBus as on Hyper-V.
type IBOnlyVM struct {
	*Node
	// VFs are the IB-only functions 0101:00:00.0, 0102:00:00.0, ... with
	// RDMA devices mlx5_0, mlx5_1, ...
	VFs []Function
}

// NewIBOnlyVM writes a VM with count IB-only VFs under root.
func NewIBOnlyVM(root string, count int) (*IBOnlyVM, error) {
	n, err := New(root)
	if err != nil {
		return nil, err
	}
	vm := &IBOnlyVM{Node: n}
	for i := 0; i < count; i++ {
		dom := fmt.Sprintf("%04x", 0x0101+i)
		f := Function{BDF: dom + ":00:00.0", Vendor: VendorMellanox, Device: DeviceCX7VF, Driver: "mlx5_core", NUMA: -1,
			Parent:  hyperVParent(fmt.Sprintf("%sa2b4-66d1-4c3e-8f70-9b1e2d3c%s", dom, dom), dom),
			RDMADev: n.NextRDMAName(), LinkLayer: InfiniBand}
		if err := n.AddFunction(f); err != nil {
			return nil, err
		}
		if err := n.SetIBPort(f.RDMADev, IBPort{LID: uint16(0x100 + i), SMLID: 1, PKeys: []uint16{0x7fff, 0x8005}}); err != nil {
			return nil, err
		}
		g := fmt.Sprintf("00:15:5d:ff:fd:33:%02x:%02x", i>>8, i&0xff)
		if err := n.SetGUIDs(f.RDMADev, g, g); err != nil {
			return nil, err
		}
		vm.VFs = append(vm.VFs, f)
	}
	return vm, nil
}
