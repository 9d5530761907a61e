package dragpu

import (
	"fmt"
	"strings"

	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

// Pair is one PCIe root complex of a PairedNode: a GPU and an InfiniBand
// NIC (with its VFs) below it.
type Pair struct {
	Root string                // pci0000:10
	GPU  sysfsfixture.Function // 0000:12:00.0
	NIC  sysfsfixture.Function // 0000:11:00.0, ConnectX-7 IB PF
	VFs  []string              // the NIC's VFs, by index
}

// PairedNode is a fixture node laid out like an 8-GPU training server
// (DGX/HGX H100 style): every GPU has a NIC of its own under the same PCIe
// root complex, so GPU i and the VFs of NIC i share a
// resource.kubernetes.io/pcieRoot and no other GPU does.
type PairedNode struct {
	*sysfsfixture.Node
	Pairs []Pair
}

// MaxPairs is the most pairs NewPairedNode lays out (root buses 0x10,
// 0x30, ... 0xf0).
const MaxPairs = 8

// NewPairedNode writes a node of pairs GPU+NIC roots under root. Pair i
// sits under pci0000:BB with BB = 0x10 + 0x20*i: the NIC (ConnectX-7,
// InfiniBand, netdev ibpNs0, vfs VFs) at 0000:(BB+1):00.0 below root port
// 0000:BB:01.1, the GPU (H100) at 0000:(BB+2):00.0 below root port
// 0000:BB:03.0. The first half of the pairs is on NUMA 0, the rest on 1.
func NewPairedNode(root string, pairs, vfs int) (*PairedNode, error) {
	if pairs < 1 || pairs > MaxPairs {
		return nil, fmt.Errorf("dragpu: %d pairs: want 1..%d", pairs, MaxPairs)
	}
	if vfs < 1 || vfs > 6 {
		return nil, fmt.Errorf("dragpu: %d VFs per NIC: want 1..6 (functions 2..7 of the NIC's device)", vfs)
	}
	n, err := sysfsfixture.New(root)
	if err != nil {
		return nil, err
	}
	p := &PairedNode{Node: n}
	for i := range pairs {
		bb := 0x10 + 0x20*i
		numa := 0
		if i >= (pairs+1)/2 {
			numa = 1
		}
		pciRoot := fmt.Sprintf("pci0000:%02x", bb)
		nic := sysfsfixture.Function{
			BDF: fmt.Sprintf("0000:%02x:00.0", bb+1), Vendor: sysfsfixture.VendorMellanox, Device: sysfsfixture.DeviceCX7,
			Driver: "mlx5_core", NUMA: numa, PCIRoot: pciRoot, Netdev: fmt.Sprintf("ibp%ds0", bb+1),
			RDMADev: n.NextRDMAName(), LinkLayer: sysfsfixture.InfiniBand, MTU: 4092,
			TotalVFs: 8, NumVFs: vfs, VFDevice: sysfsfixture.DeviceCX7VF,
		}
		if err := n.AddFunction(nic); err != nil {
			return nil, err
		}
		gpu := sysfsfixture.Function{
			BDF: fmt.Sprintf("0000:%02x:00.0", bb+2), NUMA: numa, PCIRoot: pciRoot,
			Upstream: fmt.Sprintf("0000:%02x:03.0", bb),
		}
		if err := n.AddGPU(gpu); err != nil {
			return nil, err
		}
		pr := Pair{Root: pciRoot, GPU: gpu, NIC: nic}
		for v := range vfs {
			pr.VFs = append(pr.VFs, sysfsfixture.VFBDF(nic.BDF, v))
		}
		p.Pairs = append(p.Pairs, pr)
	}
	return p, nil
}

// PoolConfig is the agent's pool configuration (the device plugin's
// resourceList) that selects every NIC's VFs into one exclusive pool,
// resource nvidia.com/rdma_ib_vf.
func (p *PairedNode) PoolConfig() string {
	var roots []string
	for _, pr := range p.Pairs {
		roots = append(roots, `"`+pr.NIC.BDF+`"`)
	}
	return `{"resourceList":[{"resourcePrefix":"nvidia.com","resourceName":"rdma_ib_vf","selectors":[{"rootDevices":[` +
		strings.Join(roots, ",") + `],"isRdma":true}]}]}`
}

// RootOf returns the PCIe root of a GPU or NIC function (PF or VF) of the
// node, "" when the address is not one of its pairs'.
func (p *PairedNode) RootOf(bdf string) string {
	for _, pr := range p.Pairs {
		if bdf == pr.GPU.BDF || bdf == pr.NIC.BDF {
			return pr.Root
		}
		for _, v := range pr.VFs {
			if v == bdf {
				return pr.Root
			}
		}
	}
	return ""
}
