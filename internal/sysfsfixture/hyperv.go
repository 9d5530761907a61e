package sysfsfixture

import (
	"fmt"
	"os"
	"path/filepath"
)

// IDs of the Hyper-V VM's devices.
const (
	// DeviceCX5VF is a ConnectX-5 virtual function, what Azure's
	// accelerated networking hands a VM.
	DeviceCX5VF = "1018"
	// HyperVVMBus is the VMBus device of a generation 1 Hyper-V VM, below
	// the ACPI devices the kernel finds it under.
	HyperVVMBus = "LNXSYSTM:00/LNXSYBUS:00/PNP0A03:00/device:07/VMBUS:01"
)

// HyperVVM is an Azure (Hyper-V) VM: its PCI devices are passed through
// over VMBus, so each hangs below a VMBus device, behind a host bridge of a
// PCI domain of its own (derived from the VMBus device's instance GUID),
// and nothing lies below devices/pci*:
//
//	devices/LNXSYSTM:00/.../VMBUS:01/<guid>/net/eth0                       hv_netvsc synthetic NIC, default route
//	devices/LNXSYSTM:00/.../VMBUS:01/<guid>/pci7870:00/7870:00:00.0/       ConnectX-5 VF (accelerated networking),
//	    net/enP30832s1                                                     enslaved to eth0 (lower_ / master links)
//	devices/LNXSYSTM:00/.../VMBUS:01/<guid>/pci0101:00/0101:00:00.0/       ConnectX-7 VF, InfiniBand, ib0, mlx5_1
//	bus/pci/devices/7870:00:00.0 -> ../../../devices/LNXSYSTM:00/.../pci7870:00/7870:00:00.0
//
// No function has a physfn link (the PF is the host's) and numa_node is -1.
// The PCIe roots are pci7870:00 and pci0101:00, never LNXSYSTM:00.
type HyperVVM struct {
	*Node
	// DefaultRouteLink is the synthetic NIC eth0, which has no PCI function.
	DefaultRouteLink string
	// AccelNet is the accelerated-networking VF at 7870:00:00.0, netdev
	// enP30832s1 (mlx5_0), a lower of eth0: withheld with it.
	AccelNet Function
	// IB is the InfiniBand VF at 0101:00:00.0, netdev ib0 (mlx5_1), the
	// VM's RDMA NIC.
	IB Function
}

// hyperVParent is a VMBus device's host bridge of domain dom.
func hyperVParent(guid, dom string) string {
	return filepath.Join(HyperVVMBus, guid, "pci"+dom+":00")
}

// NewHyperVVM writes the Hyper-V VM under root.
func NewHyperVVM(root string) (*HyperVVM, error) {
	n, err := New(root)
	if err != nil {
		return nil, err
	}
	vm := &HyperVVM{Node: n, DefaultRouteLink: "eth0"}
	// the synthetic NIC: a VMBus device, no PCI function
	netvsc := filepath.Join(root, "devices", HyperVVMBus, "000d3a8e-5c21-4f1b-8a3e-2f4c7b6d9e01")
	if err := os.MkdirAll(netvsc, 0o755); err != nil {
		return nil, fmt.Errorf("sysfs fixture: %w", err)
	}
	if err := n.writeNetdevDir(netvsc, Function{}, "eth0"); err != nil {
		return nil, err
	}
	vm.AccelNet = Function{BDF: "7870:00:00.0", Vendor: VendorMellanox, Device: DeviceCX5VF, Driver: "mlx5_core", NUMA: -1,
		Parent: hyperVParent("7870ed3a-1c5b-4e2f-9d61-3a0b8c4f7870", "7870"), Netdev: "enP30832s1", RDMADev: n.NextRDMAName()}
	if err := n.AddFunction(vm.AccelNet); err != nil {
		return nil, err
	}
	// the VF is enslaved to the synthetic NIC, as hv_netvsc does
	eth0 := filepath.Join(netvsc, "net", "eth0")
	vf := filepath.Join(n.Devices[vm.AccelNet.BDF], "net", vm.AccelNet.Netdev)
	rel := func(from, to string) string { r, _ := filepath.Rel(from, to); return r }
	for _, l := range [][2]string{
		{filepath.Join(eth0, "lower_"+vm.AccelNet.Netdev), rel(eth0, vf)},
		{filepath.Join(vf, "upper_eth0"), rel(vf, eth0)},
		{filepath.Join(vf, "master"), rel(vf, eth0)},
	} {
		if err := symlink(l[0], l[1]); err != nil {
			return nil, err
		}
	}
	vm.IB = Function{BDF: "0101:00:00.0", Vendor: VendorMellanox, Device: DeviceCX7VF, Driver: "mlx5_core", NUMA: -1,
		Parent: hyperVParent("0101a2b4-66d1-4c3e-8f70-9b1e2d3c0101", "0101"), Netdev: "ib0", RDMADev: n.NextRDMAName(), LinkLayer: InfiniBand}
	if err := n.AddFunction(vm.IB); err != nil {
		return nil, err
	}
	return vm, nil
}
