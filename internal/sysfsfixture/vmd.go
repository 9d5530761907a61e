package sysfsfixture

import (
	"path/filepath"
	"strconv"
)

// IDs of the VMD node's devices.
const (
	// DeviceVMD is an Intel Volume Management Device controller (Ice Lake /
	// Sapphire Rapids), PCI class 0x010400.
	DeviceVMD = "28c0"
	// ClassVMD is the VMD controller's PCI class (RAID bus controller).
	ClassVMD = "010400"
)

// VMDNode is a server whose RDMA NIC sits behind an Intel VMD controller.
// VMD opens a PCI domain of its own, numbered from 0x10000 so it cannot
// clash with firmware domains; the kernel prints it with five hex digits,
// and its host bridge hangs below the VMD controller's function:
//
//	devices/pci0000:00/0000:00:0e.0/                              VMD controller (driver vmd, NUMA 0)
//	devices/pci0000:00/0000:00:0e.0/pci10000:00/10000:00:02.0/    root port of the VMD domain
//	devices/pci0000:00/0000:00:0e.0/pci10000:00/10000:00:02.0/10000:01:00.0/   ConnectX-7 PF, 4 VFs
//	bus/pci/devices/10000:01:00.0 -> ../../../devices/pci0000:00/0000:00:0e.0/pci10000:00/10000:00:02.0/10000:01:00.0
//
// Its PCIe root is the outermost host bridge, pci0000:00 (the root complex
// the VMD controller and so every device behind it hangs off).
type VMDNode struct {
	*Node
	// VMD is the controller at 0000:00:0e.0.
	VMD Function
	// RoCE is the ConnectX-7 PF at 10000:01:00.0, netdev enP65536p1s0f0np0
	// (systemd's name for domain 65536), RDMA device mlx5_0, VFs
	// 10000:01:00.2-.5 (enP65536p1s0f0v0-3) with mlx5_1-4.
	RoCE Function
	// Root is the PCIe root every function of the node has: pci0000:00.
	Root string
}

// NewVMDNode writes the VMD node under root.
func NewVMDNode(root string) (*VMDNode, error) {
	n, err := New(root)
	if err != nil {
		return nil, err
	}
	v := &VMDNode{Node: n, Root: "pci0000:00"}
	v.VMD = Function{BDF: "0000:00:0e.0", Vendor: VendorIntel, Device: DeviceVMD, Driver: "vmd", NUMA: 0, PCIRoot: "pci0000:00", OnRootBus: true}
	if err := n.AddFunction(v.VMD); err != nil {
		return nil, err
	}
	if err := writeFile(n.Devices[v.VMD.BDF], "class", "0x"+ClassVMD); err != nil {
		return nil, err
	}
	v.RoCE = Function{BDF: "10000:01:00.0", Vendor: VendorMellanox, Device: DeviceCX7, Driver: "mlx5_core", NUMA: 0,
		Parent: filepath.Join("pci0000:00", v.VMD.BDF, "pci10000:00", "10000:00:02.0"),
		Netdev: "enP65536p1s0f0np0", RDMADev: n.NextRDMAName(), IPv4: "10.0.9.1", MTU: 9000,
		TotalVFs: 8, NumVFs: 4, VFDevice: DeviceCX7VF,
		VFNetdev: func(i int) string { return "enP65536p1s0f0v" + strconv.Itoa(i) }}
	if err := n.AddFunction(v.RoCE); err != nil {
		return nil, err
	}
	return v, nil
}
