package sysfsfixture

import (
	"fmt"
	"sort"
)

// NVIDIA GPUs: the IDs the fixture gives its GPU functions.
const (
	VendorNVIDIA  = "10de"
	DeviceH100SXM = "2330" // H100 SXM5 80GB
	// ClassGPU is a 3D controller (0x0302xx), what data-center GPUs report;
	// desktop GPUs report VGA (0x030000).
	ClassGPU = "030200"
	// MaxStandardGPUs is the most GPUs StandardGPUs lays out: every GPU
	// gets a bus of its own below its root, and the buses of one root end
	// where the next root's begin.
	MaxStandardGPUs = 64
)

// AddGPU writes a GPU: a PCI function like AddFunction's (vendor, device,
// class, numa_node, driver link, bus/pci/devices link) under its root port,
// with the 3D controller class and neither netdev nor RDMA device. Vendor,
// Device and Driver default to NVIDIA, H100 SXM5 and "nvidia".
func (n *Node) AddGPU(g Function) error {
	if g.Netdev != "" || g.RDMADev != "" || g.TotalVFs > 0 || g.NumVFs > 0 {
		return fmt.Errorf("sysfs fixture: GPU %s: a GPU has no netdev, RDMA device or VFs", g.BDF)
	}
	if g.Vendor == "" {
		g.Vendor = VendorNVIDIA
	}
	if g.Device == "" {
		g.Device = DeviceH100SXM
	}
	if g.Driver == "" {
		g.Driver = "nvidia"
	}
	if err := n.AddFunction(g); err != nil {
		return fmt.Errorf("sysfs fixture: GPU %s: %w", g.BDF, err)
	}
	return writeFile(n.Devices[g.BDF], "class", "0x"+ClassGPU)
}

// gpuRoot is a PCIe root complex that GPUs sit under, next to a NIC of the
// standard node.
type gpuRoot struct {
	bus  int // root bus, e.g. 0x40 for pci0000:40
	numa int
}

// StandardGPUs lays out count NVIDIA H100 GPUs the way a two-socket
// training node pairs them with its NICs: the first half (rounded up) on
// NUMA 0 under pci0000:40, the root of the exclusive RoCE PF enp65s0f0np0;
// the rest on NUMA 1, alternating between pci0000:80 (the shared HCA
// ens8f0np0) and pci0000:c0 (the InfiniBand PF). GPU j of a root with bus
// BB gets root port 0000:BB:(03+j).0 and the address 0000:(BB+2+j):00.0,
// so for 4 GPUs:
//
//	0000:42:00.0  NUMA 0  pci0000:40  (root port 0000:40:03.0)
//	0000:43:00.0  NUMA 0  pci0000:40  (root port 0000:40:04.0)
//	0000:82:00.0  NUMA 1  pci0000:80  (root port 0000:80:03.0)
//	0000:c2:00.0  NUMA 1  pci0000:c0  (root port 0000:c0:03.0)
//
// The result is sorted by PCI address.
func StandardGPUs(count int) ([]Function, error) {
	if count < 0 || count > MaxStandardGPUs {
		return nil, fmt.Errorf("sysfs fixture: %d GPUs: want 0..%d", count, MaxStandardGPUs)
	}
	numa0 := (count + 1) / 2
	perRoot := map[gpuRoot]int{}
	var out []Function
	add := func(r gpuRoot) {
		j := perRoot[r]
		perRoot[r]++
		bb := fmt.Sprintf("%02x", r.bus)
		out = append(out, Function{
			BDF:      fmt.Sprintf("0000:%02x:00.0", r.bus+2+j),
			Vendor:   VendorNVIDIA,
			Device:   DeviceH100SXM,
			Driver:   "nvidia",
			NUMA:     r.numa,
			PCIRoot:  "pci0000:" + bb,
			Upstream: fmt.Sprintf("0000:%s:%02x.0", bb, 3+j),
		})
	}
	numa1 := []gpuRoot{{bus: 0x80, numa: 1}, {bus: 0xc0, numa: 1}}
	for i := 0; i < count; i++ {
		if i < numa0 {
			add(gpuRoot{bus: 0x40, numa: 0})
			continue
		}
		add(numa1[(i-numa0)%len(numa1)])
	}
	sort.Slice(out, func(i, j int) bool { return out[i].BDF < out[j].BDF })
	return out, nil
}

// addStandardGPUs writes StandardGPUs(count) into the node.
func (n *Node) addStandardGPUs(count int) ([]Function, error) {
	gpus, err := StandardGPUs(count)
	if err != nil {
		return nil, err
	}
	for _, g := range gpus {
		if err := n.AddGPU(g); err != nil {
			return nil, err
		}
	}
	return gpus, nil
}
