package fleetbench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/rdmanet/rdmanet/internal/agent"
	"github.com/rdmanet/rdmanet/internal/dra"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

// Resource is the simulated nodes' exclusive VF pool (device plugin
// resource and the NAD's resourceName).
const Resource = "rdmanet.io/rdma_vf"

// Hardware is one simulated node's RDMA hardware as a sysfs tree: NICs
// RoCE PFs (ConnectX-7) with VFs VFs each, every PF under a PCIe root of its
// own (as on an 8-rail HGX board), and a management NIC that carries the
// default route.
type Hardware struct {
	*sysfsfixture.Node
	PFs        []sysfsfixture.Function
	ConfigPath string // the agent's pool configuration (resourceList)
}

// NewHardware writes the tree under dir/sys and the pool config beside it.
func NewHardware(dir string, nics, vfs int, serial uint8) (*Hardware, error) {
	if nics < 1 || nics > 8 || vfs < 1 || vfs > 16 {
		return nil, fmt.Errorf("fleetbench hardware: %d NICs x %d VFs: want 1..8 NICs, 1..16 VFs", nics, vfs)
	}
	n, err := sysfsfixture.New(filepath.Join(dir, "sys"))
	if err != nil {
		return nil, err
	}
	n.Serial = serial
	h := &Hardware{Node: n}
	mgmt := sysfsfixture.Function{BDF: "0000:03:00.0", Vendor: sysfsfixture.VendorMellanox, Device: sysfsfixture.DeviceCX5, Driver: "mlx5_core",
		NUMA: 0, PCIRoot: "pci0000:00", Netdev: "eno1", RDMADev: n.NextRDMAName(), IPv4: "192.168.10.21"}
	if err := n.AddFunction(mgmt); err != nil {
		return nil, err
	}
	var roots []string
	for i := range nics {
		bb := 0x10 + 0x20*i
		numa := 0
		if i >= (nics+1)/2 {
			numa = 1
		}
		pf := sysfsfixture.Function{
			BDF: fmt.Sprintf("0000:%02x:00.0", bb+1), Vendor: sysfsfixture.VendorMellanox, Device: sysfsfixture.DeviceCX7,
			Driver: "mlx5_core", NUMA: numa, PCIRoot: fmt.Sprintf("pci0000:%02x", bb), Netdev: fmt.Sprintf("enp%ds0f0np0", bb+1),
			RDMADev: n.NextRDMAName(), MTU: 9000, TotalVFs: 16, NumVFs: vfs, VFDevice: sysfsfixture.DeviceCX7VF,
		}
		if err := n.AddFunction(pf); err != nil {
			return nil, err
		}
		h.PFs = append(h.PFs, pf)
		roots = append(roots, `"`+pf.BDF+`"`)
	}
	h.ConfigPath = filepath.Join(dir, "pools.json")
	cfg := `{"resourceList":[{"resourcePrefix":"rdmanet.io","resourceName":"rdma_vf","selectors":[{"rootDevices":[` +
		strings.Join(roots, ",") + `],"isRdma":true}]}]}`
	if err := os.WriteFile(h.ConfigPath, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	return h, nil
}

// VFNetdev is the netdev of VF i of PF pf.
func (h *Hardware) VFNetdev(pf, i int) string { return fmt.Sprintf("%sv%d", h.PFs[pf].Netdev, i) }

// Snapshot discovers the tree as the agent does (inventory and pools).
func (h *Hardware) Snapshot() (*agent.Snapshot, error) {
	specs, err := agent.LoadConfig([]string{h.ConfigPath})
	if err != nil {
		return nil, err
	}
	return agent.Discover(agent.Options{SysfsRoot: h.Root, NetnsModeFlag: "exclusive"}, specs)
}

// SharedTopology answers the DRA publisher's topology questions once for
// every node that hands its publisher the shared snapshot: their sysfs
// tree is one and the same, so each node reading it again (the PCIe root of
// 128 functions, the firmware of every device on each rescan) would only
// cost the simulator, not tell anything about a node.
type SharedTopology struct {
	t  *dra.SysfsTopology
	mu sync.Mutex
	fw map[string]string
}

// NewSharedTopology returns the topology of h's tree, remembered.
func NewSharedTopology(h *Hardware) *SharedTopology {
	return &SharedTopology{t: dra.NewSysfsTopology(h.Root), fw: map[string]string{}}
}

// PCIeRoot implements dra.Topology (SysfsTopology remembers roots itself).
func (s *SharedTopology) PCIeRoot(bdf string) (string, error) { return s.t.PCIeRoot(bdf) }

// Firmware implements dra.Topology.
func (s *SharedTopology) Firmware(rdmaDev string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.fw[rdmaDev]
	if !ok {
		v = s.t.Firmware(rdmaDev)
		s.fw[rdmaDev] = v
	}
	return v
}
