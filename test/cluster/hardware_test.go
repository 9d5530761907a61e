package cluster

import (
	"path/filepath"
	"testing"

	"github.com/rdmanet/rdmanet/internal/inventory"
	"github.com/rdmanet/rdmanet/test/dragpu"
)

// TestBoards: the nodes of a multi-node cluster share no PCI address, MAC
// or node GUID; each has two RoCE PFs with VFs under two PCIe roots and
// GPUs under both; only the aligned node has 4 GPUs beside one VF PF (what
// the cross-node DRA scenario's claim needs). The single-node cluster keeps
// the bundled fixture.
func TestBoards(t *testing.T) {
	nodes, err := PlanNodes(4, 2)
	if err != nil {
		t.Fatal(err)
	}
	single, err := PlanNodes(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	owner := map[string]string{} // BDF, MAC or GUID -> node
	claim := func(node, kind, v string) {
		if v == "" {
			return
		}
		if o, ok := owner[kind+v]; ok && o != node {
			t.Errorf("%s %s on both %s and %s", kind, v, o, node)
		}
		owner[kind+v] = node
	}
	for _, tc := range []struct {
		name      string
		node      Node
		wantRails int
	}{
		{"single node keeps the bundled fixture", single[0], 1},
		{"first node", nodes[0], 2},
		{"aligned node", nodes[1], 2},
		{"shared node", nodes[3], 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "sys")
			if err := writeFixture(root, tc.node, 8); err != nil {
				t.Fatal(err)
			}
			inv, err := inventory.Discover(inventory.Options{SysfsRoot: root})
			if err != nil {
				t.Fatal(err)
			}
			vfRoots := map[string]int{} // root of a RoCE PF with VFs -> VFs
			for _, f := range inv.Functions {
				if tc.node.Board() {
					claim(tc.node.Name, "pci ", f.BDF)
					for _, r := range f.RDMA {
						claim(tc.node.Name, "guid ", r.NodeGUID)
					}
				}
				if f.IsPF() && f.LinkLayer == "Ethernet" && f.NumVFs > 0 {
					vfRoots[f.PCIRoot] += f.NumVFs
				}
			}
			if len(vfRoots) != tc.wantRails {
				t.Fatalf("RoCE PFs with VFs under roots %v, want %d roots", vfRoots, tc.wantRails)
			}
			total := 0
			for _, n := range vfRoots {
				total += n
			}
			if total != tc.node.VFs() {
				t.Errorf("%d VFs, Node.VFs says %d", total, tc.node.VFs())
			}
			gpus, err := dragpu.Discover(root)
			if err != nil {
				t.Fatal(err)
			}
			if len(gpus) != 8 {
				t.Fatalf("%d GPUs, want 8", len(gpus))
			}
			beside := map[string]int{}
			for _, g := range gpus {
				if tc.node.Board() {
					claim(tc.node.Name, "pci ", g.BDF)
				}
				if _, ok := vfRoots[g.PCIeRoot]; ok {
					beside[g.PCIeRoot]++
				}
			}
			if !tc.node.Board() {
				return
			}
			for r := range vfRoots {
				if beside[r] == 0 {
					t.Errorf("no GPU under %s, a VF PF's root (GPUs beside VFs: %v)", r, beside)
				}
			}
			most := 0
			for _, n := range beside {
				most = max(most, n)
			}
			if aligned := tc.node.Index == AlignedNodeIndex; aligned != (most >= 4) {
				t.Errorf("at most %d GPUs beside one VF PF (%v); the aligned node (index %d) alone should have 4", most, beside, AlignedNodeIndex)
			}
		})
	}
}
