package sysfsfixture

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// IDs of the cloud VM's devices.
const (
	// VendorVirtio is the virtio PCI vendor (Red Hat, Inc.).
	VendorVirtio = "1af4"
	// DeviceVirtioNet is a modern (virtio 1.0) virtio-net PCI function:
	// 0x1040 + the virtio device ID of a network card (1).
	DeviceVirtioNet = "1041"
	// VirtioIDNet is the virtio device ID of a network card, what the
	// virtio device's own device attribute reads.
	VirtioIDNet = "0x0001"
	// DeviceH200SXM is an NVIDIA H200 SXM 141GB (GH100).
	DeviceH200SXM = "2335"
)

// AddVirtioNet writes a virtio-net PCI function whose netdev hangs below
// its virtio device virtio<index>, not below the function, as the kernel
// lays out virtio-pci:
//
//	devices/pci0000:00/0000:00:03.0/                 PCI function (class 0x020000, driver virtio-pci)
//	devices/pci0000:00/0000:00:03.0/virtio2/         virtio device (bus virtio, driver virtio_net)
//	devices/pci0000:00/0000:00:03.0/virtio2/net/eth0
//	bus/virtio/devices/virtio2 -> ../../../devices/pci0000:00/0000:00:03.0/virtio2
//	class/net/eth0 -> ../../devices/pci0000:00/0000:00:03.0/virtio2/net/eth0
//	class/net/eth0/device -> ../../../virtio2
//
// f.Netdev names the netdev; Vendor, Device and Driver default to
// VendorVirtio, DeviceVirtioNet and "virtio-pci". A virtio NIC has neither
// RDMA device nor VFs.
func (n *Node) AddVirtioNet(f Function, index int) error {
	if f.RDMADev != "" || f.TotalVFs > 0 || f.NumVFs > 0 {
		return fmt.Errorf("sysfs fixture: virtio-net %s: a virtio NIC has no RDMA device or VFs", f.BDF)
	}
	if f.Netdev == "" {
		return fmt.Errorf("sysfs fixture: virtio-net %s: Netdev is empty; name the netdev (eth0)", f.BDF)
	}
	if f.Vendor == "" {
		f.Vendor = VendorVirtio
	}
	if f.Device == "" {
		f.Device = DeviceVirtioNet
	}
	if f.Driver == "" {
		f.Driver = "virtio-pci"
	}
	pci := f
	pci.Netdev = ""
	if err := n.AddFunction(pci); err != nil {
		return fmt.Errorf("sysfs fixture: virtio-net %s: %w", f.BDF, err)
	}
	name := "virtio" + strconv.Itoa(index)
	dir := filepath.Join(n.Devices[f.BDF], name)
	for attr, val := range map[string]string{
		"vendor": "0x" + f.Vendor, "device": VirtioIDNet, "status": "0x0000000f",
		"modalias": "virtio:d00000001v00001AF4",
	} {
		if err := writeFile(dir, attr, val); err != nil {
			return err
		}
	}
	if err := n.busLinks(dir, "virtio", "virtio_net"); err != nil {
		return err
	}
	return n.writeNetdev(dir, f, f.Netdev)
}

// busLinks gives a device directory of a non-PCI bus its subsystem and
// driver links and the bus's devices/<name> link to it.
func (n *Node) busLinks(dir, bus, driver string) error {
	busDir := filepath.Join(n.Root, "bus", bus)
	drvDir := filepath.Join(busDir, "drivers", driver)
	for _, d := range []string{filepath.Join(busDir, "devices"), drvDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("sysfs fixture: %w", err)
		}
	}
	rel := func(from, to string) string { r, _ := filepath.Rel(from, to); return r }
	if err := symlink(filepath.Join(dir, "subsystem"), rel(dir, busDir)); err != nil {
		return err
	}
	if err := symlink(filepath.Join(dir, "driver"), rel(dir, drvDir)); err != nil {
		return err
	}
	link := filepath.Join(busDir, "devices", filepath.Base(dir))
	return symlink(link, rel(filepath.Dir(link), dir))
}

// CloudVM is a cloud GPU virtual machine as providers hand them out: one
// NVIDIA H200 and a virtio NIC that carries the default route, every device
// under the one PCIe root pci0000:00, and no NUMA information (numa_node -1,
// what a VM without a virtual NUMA topology reports).
type CloudVM struct {
	*Node
	// NICs are the virtio-net functions: NICs[0] at 0000:00:03.0 with
	// netdev eth0 below virtio2 (the default route's NIC), further ones at
	// 0000:00:0(3+i).0 with eth<i> below virtio<2+i>, all on the root bus.
	NICs []Function
	// DefaultRouteLink is NICs[0]'s netdev, eth0: never to be handed out.
	DefaultRouteLink string
	// GPU is the H200 at 0000:01:00.0, behind root port 0000:00:02.0.
	GPU Function
}

// CloudVMOptions tunes NewCloudVM.
type CloudVMOptions struct {
	// NICs is the number of virtio NICs, default 1 (eth0 only).
	NICs int
}

// NewCloudVM writes the cloud VM under root:
//
//	0000:00:02.0  PCIe root port
//	0000:01:00.0  NVIDIA H200 (nvidia)           NUMA -1  pci0000:00
//	0000:00:03.0  virtio-net (virtio-pci)        NUMA -1  pci0000:00  virtio2/net/eth0  default route
//	0000:00:04.0  virtio-net (CloudVMOptions.NICs > 1)    virtio3/net/eth1 ...
func NewCloudVM(root string, o CloudVMOptions) (*CloudVM, error) {
	if o.NICs == 0 {
		o.NICs = 1
	}
	if o.NICs < 0 || o.NICs > 8 {
		return nil, fmt.Errorf("sysfs fixture: cloud VM with %d NICs: want 1..8", o.NICs)
	}
	n, err := New(root)
	if err != nil {
		return nil, err
	}
	vm := &CloudVM{Node: n, DefaultRouteLink: "eth0"}
	vm.GPU = Function{BDF: "0000:01:00.0", Device: DeviceH200SXM, NUMA: -1, PCIRoot: "pci0000:00", Upstream: "0000:00:02.0"}
	if err := n.AddGPU(vm.GPU); err != nil {
		return nil, err
	}
	vm.GPU = completeGPU(vm.GPU)
	for i := 0; i < o.NICs; i++ {
		nic := Function{BDF: fmt.Sprintf("0000:00:%02x.0", 3+i), Vendor: VendorVirtio, Device: DeviceVirtioNet,
			Driver: "virtio-pci", NUMA: -1, PCIRoot: "pci0000:00", OnRootBus: true, Netdev: fmt.Sprintf("eth%d", i)}
		if err := n.AddVirtioNet(nic, 2+i); err != nil {
			return nil, err
		}
		vm.NICs = append(vm.NICs, nic)
	}
	return vm, nil
}

// completeGPU fills in the defaults AddGPU applies.
func completeGPU(g Function) Function {
	if g.Vendor == "" {
		g.Vendor = VendorNVIDIA
	}
	if g.Device == "" {
		g.Device = DeviceH100SXM
	}
	if g.Driver == "" {
		g.Driver = "nvidia"
	}
	return g
}
