package sysfs_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rdmanet/rdmanet/internal/sysfs"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

func TestReadStandardNode(t *testing.T) {
	root := t.TempDir()
	node, err := sysfsfixture.NewStandard(root, sysfsfixture.StandardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fs := sysfs.New(root)
	vf := sysfsfixture.VFBDF(node.RoCE.BDF, 3)
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"vendor", fs.HexID(node.RoCE.BDF, "vendor"), "15b3"},
		{"device", fs.HexID(node.RoCE.BDF, "device"), "101d"},
		{"driver", fs.Driver(node.RoCE.BDF), "mlx5_core"},
		{"vf physfn", fs.PhysFn(vf), node.RoCE.BDF},
		{"pf has no physfn", fs.PhysFn(node.RoCE.BDF), ""},
		{"vf count", len(fs.VFs(node.RoCE.BDF)), 16},
		{"vf netdev", fs.Netdevs(vf), []string{"enp65s0f0v3"}},
		{"netdev to pci", fs.NetdevPCI("enp65s0f0v3"), vf},
		{"pf rdma", fs.RDMADevices(node.RoCE.BDF), []string{"mlx5_1"}},
		{"link layer", must(fs.PortAttr("mlx5_3", 1, "link_layer")), "InfiniBand"},
		{"numa", first(fs.IntAttr(node.IB.BDF, "numa_node")), 1},
		{"resolved", must(fs.ResolvedPath(node.RoCE.BDF)), "pci0000:40/0000:40:01.1/0000:41:00.0"},
		{"rdma_cm", fs.HasRDMACM(), true},
		{"plain has no rdma", len(fs.RDMADevices(node.Plain.BDF)), 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !equal(tc.got, tc.want) {
				t.Fatalf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
	idx, err := fs.VFIndex(node.RoCE.BDF, vf)
	if err != nil || idx != 3 {
		t.Fatalf("VFIndex = %d, %v; want 3", idx, err)
	}
	if _, err := fs.VFIndex(node.IB.BDF, vf); !sysfs.IsNotExist(err) {
		t.Fatalf("VFIndex of foreign VF: %v, want not-exist", err)
	}
}

func TestDanglingLinksAreTolerated(t *testing.T) {
	root := t.TempDir()
	if _, err := sysfsfixture.New(root); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../devices/pci0000:99/0000:99:00.0", filepath.Join(root, "bus/pci/devices/0000:99:00.0")); err != nil {
		t.Fatal(err)
	}
	fs := sysfs.New(root)
	devs, err := fs.PCIDevices()
	if err != nil || len(devs) != 1 {
		t.Fatalf("PCIDevices = %v, %v", devs, err)
	}
	if fs.Exists(devs[0]) || fs.HexID(devs[0], "vendor") != "" || fs.Driver(devs[0]) != "" || len(fs.VFs(devs[0])) != 0 {
		t.Fatal("dangling function should read as empty")
	}
	if _, err := fs.ResolvedPath(devs[0]); err == nil {
		t.Fatal("ResolvedPath of a dangling link should fail")
	}
}

func must(s string, err error) string {
	if err != nil {
		return "ERR: " + err.Error()
	}
	return s
}

func first(n int, _ bool) int { return n }

func equal(a, b any) bool {
	as, aok := a.([]string)
	bs, bok := b.([]string)
	if aok && bok {
		if len(as) != len(bs) {
			return false
		}
		for i := range as {
			if as[i] != bs[i] {
				return false
			}
		}
		return true
	}
	return a == b
}
