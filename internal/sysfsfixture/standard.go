package sysfsfixture

import (
	"fmt"
	"strings"
)

// Standard is the bundled GPU-node fixture: what a typical two-socket
// training node exposes.
type Standard struct {
	*Node
	RoCE     Function // ConnectX-6 Dx RoCE PF, 16 VFs, NUMA 0, root pci0000:40 (exclusive pool)
	Shared   Function // ConnectX-6 Dx RoCE PF, no VFs, NUMA 1, root pci0000:80 (shared pool)
	IB       Function // ConnectX-7 InfiniBand PF, 8 VFs, NUMA 1, root pci0000:c0
	Plain    Function // Intel X710 without RDMA
	Mgmt     Function // ConnectX-5 that carries the node's default route
	MgmtLink string   // netdev of Mgmt: never to be handed out

	// GPUs are the StandardOptions.GPUs NVIDIA GPUs (see StandardGPUs), by address.
	GPUs []Function
}

// StandardOptions tunes the bundled node.
type StandardOptions struct {
	RoCEVFs int // default 16
	IBVFs   int // default 8
	// VFNetdev overrides the RoCE VF netdev names (e.g. to match veth ends in a test netns).
	VFNetdev func(i int) string
	// GPUs adds that many NVIDIA GPUs next to the NICs (see StandardGPUs);
	// default 0.
	GPUs int
	// Domain is the PCI domain of the NICs (4 hex digits, default "0000"):
	// several nodes of one simulated cluster get distinct PCI addresses.
	// StandardGPUs stay in domain 0000.
	Domain string
	// Serial goes into every generated MAC and node GUID (Node.Serial).
	Serial uint8
}

// NewStandard writes the bundled node under root.
//
//	0000:03:00.0  eno1           ConnectX-5   mlx5_0  RoCE  NUMA 0  default route (never handed out)
//	0000:41:00.0  enp65s0f0np0   ConnectX-6Dx mlx5_1  RoCE  NUMA 0  16 VFs 0000:41:00.2.. (mlx5_4..mlx5_19)
//	0000:81:00.0  ens8f0np0      ConnectX-6Dx mlx5_2  RoCE  NUMA 1  no VFs (shared HCA)
//	0000:c1:00.0  ibp193s0f0     ConnectX-7   mlx5_3  IB    NUMA 1  8 VFs (mlx5_20..mlx5_27)
//	0000:17:00.0  ens1f0         X710 (i40e)  -       -     NUMA 0
//	GPUs (opt-in, StandardOptions.GPUs): H100s beside enp65s0f0np0 (NUMA 0) and the NUMA 1 NICs, see StandardGPUs
func NewStandard(root string, o StandardOptions) (*Standard, error) {
	if o.RoCEVFs == 0 {
		o.RoCEVFs = 16
	}
	if o.IBVFs == 0 {
		o.IBVFs = 8
	}
	if o.Domain == "" {
		o.Domain = "0000"
	}
	if len(o.Domain) != 4 || strings.Trim(o.Domain, "0123456789abcdef") != "" {
		return nil, fmt.Errorf("sysfs fixture: PCI domain %q: want 4 lower-case hex digits", o.Domain)
	}
	n, err := New(root)
	if err != nil {
		return nil, err
	}
	n.Serial = o.Serial
	d := o.Domain
	s := &Standard{Node: n, MgmtLink: "eno1"}
	s.Mgmt = Function{BDF: d + ":03:00.0", Vendor: VendorMellanox, Device: DeviceCX5, Driver: "mlx5_core", NUMA: 0,
		PCIRoot: "pci" + d + ":00", Netdev: "eno1", RDMADev: n.NextRDMAName(), IPv4: "192.168.10.21"}
	s.RoCE = Function{BDF: d + ":41:00.0", Vendor: VendorMellanox, Device: DeviceCX6Dx, Driver: "mlx5_core", NUMA: 0,
		PCIRoot: "pci" + d + ":40", Netdev: "enp65s0f0np0", RDMADev: n.NextRDMAName(), IPv4: "10.0.1.100",
		TotalVFs: 16, VFDevice: DeviceCX6DxVF, VFNetdev: o.VFNetdev, MTU: 9000}
	if s.RoCE.VFNetdev == nil {
		s.RoCE.VFNetdev = func(i int) string { return fmt.Sprintf("enp65s0f0v%d", i) }
	}
	if o.RoCEVFs > s.RoCE.TotalVFs {
		s.RoCE.TotalVFs = o.RoCEVFs
	}
	s.Shared = Function{BDF: d + ":81:00.0", Vendor: VendorMellanox, Device: DeviceCX6Dx, Driver: "mlx5_core", NUMA: 1,
		PCIRoot: "pci" + d + ":80", Netdev: "ens8f0np0", RDMADev: n.NextRDMAName(), IPv4: "192.168.2.10", MTU: 9000}
	s.IB = Function{BDF: d + ":c1:00.0", Vendor: VendorMellanox, Device: DeviceCX7, Driver: "mlx5_core", NUMA: 1,
		PCIRoot: "pci" + d + ":c0", Netdev: "ibp193s0f0", RDMADev: n.NextRDMAName(), LinkLayer: InfiniBand,
		TotalVFs: 16, VFDevice: DeviceCX7VF, MTU: 4092}
	s.Plain = Function{BDF: d + ":17:00.0", Vendor: VendorIntel, Device: DeviceX710, Driver: "i40e", NUMA: 0,
		PCIRoot: "pci" + d + ":16", Netdev: "ens1f0"}
	for _, f := range []Function{s.Mgmt, s.RoCE, s.Shared, s.IB, s.Plain} {
		if err := n.AddFunction(f); err != nil {
			return nil, err
		}
	}
	// VFs are created after the PFs, as sriov_numvfs does on a real node,
	// so VF RDMA devices continue the PF numbering.
	if err := n.SetNumVFs(s.RoCE, 0, o.RoCEVFs); err != nil {
		return nil, err
	}
	s.RoCE.NumVFs = o.RoCEVFs
	if err := n.SetNumVFs(s.IB, 0, o.IBVFs); err != nil {
		return nil, err
	}
	s.IB.NumVFs = o.IBVFs
	if s.GPUs, err = n.addStandardGPUs(o.GPUs); err != nil {
		return nil, err
	}
	return s, nil
}
