package cluster

import (
	"fmt"
	"os"

	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

// A node's simulated board. The single-node cluster keeps the bundled
// fixture (sysfsfixture.NewStandard: one RoCE PF with VFs, a shared-HCA PF,
// an IB PF, GPUs spread over three PCIe roots). The nodes of a multi-node
// cluster are HGX-like: a second RoCE PF with VFs under another PCIe root,
// GPUs under both VF PFs' roots, and each node its own PCI domain, MAC
// addresses and node GUIDs (nothing two nodes share can hide a mix-up):
//
//	<d>:41:00.0  enp65s0f0np0   RoCE, 16 VFs enp65s0f0v0..   root pci<d>:40  NUMA 0
//	<d>:8f:00.0  enp143s0f0np0  RoCE,  8 VFs enp143s0f0v0..  root pci<d>:80  NUMA 1  (DRA only: the seed's pool names the first PF)
//	<d>:81:00.0  ens8f0np0      RoCE shared HCA, no VFs      root pci<d>:80  NUMA 1
//	<d>:c1:00.0  ibp193s0f0     InfiniBand, 8 VFs            root pci<d>:c0  NUMA 1
//	<d>:c1:00.1  ibp193s0f1     InfiniBand port 2, no VFs    root pci<d>:c0  NUMA 1  (the shared IPoIB port)
//	GPUs         see gpuRoots
//
// <d> is the node's index as a 4-digit PCI domain (0000 for the first).
const (
	SecondPF    = "enp143s0f0np0"
	SecondPFVFs = 8
)

// SecondVFNetdev is the second VF PF's VF i netdev on the node (a veth end).
func SecondVFNetdev(i int) string { return fmt.Sprintf("enp143s0f0v%d", i) }

// The IB PF of every board (the bundled fixture's ConnectX-7 in IB mode)
// with its VFs, and on the multi-node boards its second port without VFs
// (as sysfsfixture.NewIBNode has it): the exclusive pool hands out the
// first port's VFs, the shared pool the second port's HCA (the agent
// refuses a shared pool over a PF whose VFs another pool hands out). On a
// multi-node cluster their IPoIB netdevs have stand-ins (veth ends, MTU
// 4092 as the fixture says) joined by the IB fabric's bridge: ib-sriov
// moves a VF's into the pod as net1, and the recording fake makes an IPoIB
// child's stand-in a macvlan of the port's.
const (
	IBPF         = "ibp193s0f0"
	IBVFs        = 8
	IBSharedPort = "ibp193s0f1"
	IBMTU        = "4092"
	IBBridge     = "br-ib"
)

// IBPFBDF is the node's IB PF's PCI address.
func (n Node) IBPFBDF() string { return n.PCIDomain() + ":c1:00.0" }

// IBVFNetdev is the IB PF's VF i IPoIB netdev on the node (a veth end).
func IBVFNetdev(i int) string { return fmt.Sprintf("%sv%d", IBPF, i) }

// AlignedNodeIndex is the node whose GPUs sit only beside its two VF PFs
// (half under each root); the others also have GPUs under the IB PF's
// root. With 8 GPUs a claim for 4 GPUs and a VF under one PCIe root fits
// only this node (see gpuRoots).
const AlignedNodeIndex = 1

// Board reports whether node n has the multi-node board (two VF PFs)
// rather than the single-node fixture.
func (n Node) Board() bool { return n.Rails > 1 }

// VFs is how many VFs the node's RoCE PFs have. The seed's device-plugin
// pool (pfNames: enp65s0f0np0, kept verbatim) takes the first PF's
// NumVFs; DRA publishes them all.
func (n Node) VFs() int {
	if n.Board() {
		return NumVFs + SecondPFVFs
	}
	return NumVFs
}

// PCIDomain is the node's PCI domain.
func (n Node) PCIDomain() string { return fmt.Sprintf("%04x", n.Index) }

// gpuRoots lists the PCIe root buses the node's GPUs are spread over, in
// turn: the aligned node's both VF PFs' roots, the others' those and the
// IB PF's.
func gpuRoots(n Node) []int {
	if n.Index == AlignedNodeIndex {
		return []int{0x40, 0x80}
	}
	return []int{0x40, 0x80, 0xc0}
}

// boardGPUs places count GPUs on node n's board: round robin over
// gpuRoots, the j-th GPU under a root on bus root+2+j behind root port
// root:03+j.
func boardGPUs(n Node, count int) []sysfsfixture.Function {
	roots := gpuRoots(n)
	per := map[int]int{}
	var out []sysfsfixture.Function
	for i := 0; i < count; i++ {
		r := roots[i%len(roots)]
		j := per[r]
		per[r]++
		d := n.PCIDomain()
		out = append(out, sysfsfixture.Function{
			BDF:      fmt.Sprintf("%s:%02x:00.0", d, r+2+j),
			Vendor:   sysfsfixture.VendorNVIDIA,
			Device:   sysfsfixture.DeviceH100SXM,
			Driver:   "nvidia",
			NUMA:     numaOf(r),
			PCIRoot:  fmt.Sprintf("pci%s:%02x", d, r),
			Upstream: fmt.Sprintf("%s:%02x:%02x.0", d, r, 3+j),
		})
	}
	return out
}

// numaOf is the NUMA node of a root bus: 0x40 is on socket 0, the others
// on socket 1 (as the bundled fixture has it).
func numaOf(root int) int {
	if root == 0x40 {
		return 0
	}
	return 1
}

// writeFixture writes node n's sysfs fixture under root with gpus GPUs.
func writeFixture(root string, n Node, gpus int) error {
	if !n.Board() {
		_, err := sysfsfixture.NewStandard(root, sysfsfixture.StandardOptions{RoCEVFs: NumVFs, GPUs: gpus, VFNetdev: VFNetdev})
		return err
	}
	s, err := sysfsfixture.NewStandard(root, sysfsfixture.StandardOptions{
		RoCEVFs: NumVFs, VFNetdev: VFNetdev, Domain: n.PCIDomain(), Serial: uint8(n.Index),
	})
	if err != nil {
		return err
	}
	d := n.PCIDomain()
	second := sysfsfixture.Function{BDF: d + ":8f:00.0", Vendor: sysfsfixture.VendorMellanox, Device: sysfsfixture.DeviceCX6Dx,
		Driver: "mlx5_core", NUMA: 1, PCIRoot: "pci" + d + ":80", Upstream: d + ":80:02.0", Netdev: SecondPF,
		RDMADev: s.NextRDMAName(), IPv4: n.SecondPFIP(), TotalVFs: SecondPFVFs, VFDevice: sysfsfixture.DeviceCX6DxVF,
		VFNetdev: SecondVFNetdev, MTU: 9000}
	if err := s.AddFunction(second); err != nil {
		return err
	}
	if err := s.SetNumVFs(second, 0, SecondPFVFs); err != nil {
		return err
	}
	ibPort2 := sysfsfixture.Function{BDF: d + ":c1:00.1", Vendor: sysfsfixture.VendorMellanox, Device: sysfsfixture.DeviceCX7,
		Driver: "mlx5_core", NUMA: 1, PCIRoot: "pci" + d + ":c0", Netdev: IBSharedPort, RDMADev: s.NextRDMAName(),
		LinkLayer: sysfsfixture.InfiniBand, MTU: 4092}
	if err := s.AddFunction(ibPort2); err != nil {
		return err
	}
	for _, g := range boardGPUs(n, gpus) {
		if err := s.AddGPU(g); err != nil {
			return err
		}
	}
	return nil
}

// writeNodeHardware writes node n's simulated hardware: its sysfs fixture,
// its /dev/infiniband and its kernel's RDMA netns mode.
func (l Layout) writeNodeHardware(n Node, gpus int) error {
	if err := os.RemoveAll(l.NodeSysfs(n)); err != nil {
		return fmt.Errorf("clear %s: %w", l.NodeSysfs(n), err)
	}
	if err := setNodeNetnsMode(l.NodeRecordStateFile(n), n.Mode); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	if err := writeFixture(l.NodeSysfs(n), n, gpus); err != nil {
		return fmt.Errorf("node %s: sysfs fixture: %w", n.Name, err)
	}
	return writeDevNodes(l, n)
}

// vfLinks are node n's VF stand-ins with the fabric port suffixes of
// their other ends.
func vfLinks(n Node) [][2]string {
	var out [][2]string
	for i := 0; i < NumVFs; i++ {
		out = append(out, [2]string{VFNetdev(i), fmt.Sprintf("vf%d", i)})
	}
	if n.Board() {
		for i := 0; i < SecondPFVFs; i++ {
			out = append(out, [2]string{SecondVFNetdev(i), fmt.Sprintf("wf%d", i)})
		}
	}
	return out
}

// ibLinks are node n's IB stand-ins (both ports' IPoIB netdevs and the VFs')
// with the fabric port suffixes of their other ends; only the multi-node
// boards have them.
func ibLinks(n Node) [][2]string {
	if !n.Board() {
		return nil
	}
	out := [][2]string{{IBPF, "ibpf"}, {IBSharedPort, "ibsh"}}
	for i := 0; i < IBVFs; i++ {
		out = append(out, [2]string{IBVFNetdev(i), fmt.Sprintf("ib%d", i)})
	}
	return out
}

// IBFabricPort is the fabric-side end of node n's IB stand-in dev (IBPF,
// IBSharedPort or an IBVFNetdev).
func IBFabricPort(n Node, dev string) string {
	for _, l := range ibLinks(n) {
		if l[0] == dev {
			return FabricPort(n, l[1])
		}
	}
	return ""
}

// VFFabricPorts are the fabric-side ends of node n's VF stand-ins: their
// counters are what the node's VFs sent and received on the training
// fabric.
func VFFabricPorts(n Node) []string {
	var out []string
	for _, vf := range vfLinks(n) {
		out = append(out, FabricPort(n, vf[1]))
	}
	return out
}

// SharedPFFabricPort is the fabric-side end of node n's shared-HCA PF: the
// macvlan children of shared-mode pods send through it.
func SharedPFFabricPort(n Node) string { return FabricPort(n, "shpf") }
