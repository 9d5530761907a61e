package inventory_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmanet/rdmanet/internal/inventory"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

func standard(t *testing.T) (*sysfsfixture.Standard, string) {
	t.Helper()
	root := t.TempDir()
	s, err := sysfsfixture.NewStandard(root, sysfsfixture.StandardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s, root
}

func TestDiscoverStandardNode(t *testing.T) {
	s, root := standard(t)
	node, err := inventory.Discover(inventory.Options{SysfsRoot: root, DefaultRouteLinks: []string{"eno1"}, NetnsModeFlag: "exclusive"})
	if err != nil {
		t.Fatal(err)
	}
	// 5 PFs/NICs + 16 RoCE VFs + 8 IB VFs
	if got := len(node.Functions); got != 29 {
		t.Fatalf("functions = %d, want 29", got)
	}
	roce := node.Function(s.RoCE.BDF)
	vf3 := node.Function(sysfsfixture.VFBDF(s.RoCE.BDF, 3))
	ib := node.Function(s.IB.BDF)
	ibvf := node.Function(sysfsfixture.VFBDF(s.IB.BDF, 7))
	plain := node.Function(s.Plain.BDF)
	mgmt := node.Function(s.Mgmt.BDF)
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"roce vendor", roce.Vendor, "15b3"},
		{"roce device", roce.Device, "101d"},
		{"roce driver", roce.Driver, "mlx5_core"},
		{"roce is pf", roce.IsPF(), true},
		{"roce numvfs", roce.NumVFs, 16},
		{"roce totalvfs", roce.TotalVFs, 16},
		{"roce vf list", len(roce.VFs), 16},
		{"roce netdev", roce.Netdev(), "enp65s0f0np0"},
		{"roce link layer", roce.LinkLayer, inventory.LinkEthernet},
		{"roce rdma", roce.RDMAName(), "mlx5_1"},
		{"roce numa", roce.NUMA, 0},
		{"roce pci root", roce.PCIRoot, "pci0000:40"},
		{"roce upstream", roce.Upstream, "0000:40:01.1"},
		{"vf is vf", vf3.IsVF, true},
		{"vf pf", vf3.PF, s.RoCE.BDF},
		{"vf index", vf3.VFIndex, 3},
		{"vf device", vf3.Device, "101e"},
		{"vf netdev", vf3.Netdev(), "enp65s0f0v3"},
		{"vf rdma", vf3.RDMAName(), "mlx5_7"},
		{"vf char devs", strings.Join(vf3.RDMA[0].CharDevs, ","), "/dev/infiniband/issm7,/dev/infiniband/umad7,/dev/infiniband/uverbs7"},
		{"ib link layer", ib.LinkLayer, inventory.LinkInfiniBand},
		{"ib numa", ib.NUMA, 1},
		{"ib root", ib.PCIRoot, "pci0000:c0"},
		{"ib vf link layer", ibvf.LinkLayer, inventory.LinkInfiniBand},
		{"ib port state", ib.RDMA[0].Ports[0].State, "ACTIVE"},
		{"ib has no gids", len(ib.RDMA[0].Ports[0].GIDs), 0},
		{"plain has no rdma", plain.HasRDMA(), false},
		{"plain link layer from type", plain.LinkLayer, inventory.LinkEthernet},
		{"mgmt default route", mgmt.DefaultRoute, true},
		{"roce not default route", roce.DefaultRoute, false},
		{"netns mode", node.RDMANetnsMode, "exclusive"},
		{"netns mode source", node.NetnsModeSource, "flag"},
		{"rdma_cm", node.RDMACM, true},
		{"by netdev", node.ByNetdev("ens8f0np0").BDF, s.Shared.BDF},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Fatalf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
}

func TestGIDTableAndRecommendedIndex(t *testing.T) {
	s, root := standard(t)
	node, err := inventory.Discover(inventory.Options{SysfsRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	port := node.Function(s.RoCE.BDF).RDMA[0].Ports[0]
	if len(port.GIDs) != 4 {
		t.Fatalf("gids = %+v, want 4 entries", port.GIDs)
	}
	want := []struct {
		typ, ipv4 string
	}{{"v1", ""}, {"v2", ""}, {"v1", "10.0.1.100"}, {"v2", "10.0.1.100"}}
	for i, w := range want {
		g := port.GIDs[i]
		if g.Index != i || g.Type != w.typ || g.IPv4 != w.ipv4 || g.Netdev != "enp65s0f0np0" {
			t.Errorf("gid %d = %+v, want type %s ipv4 %q on enp65s0f0np0", i, g, w.typ, w.ipv4)
		}
	}
	if idx, ok := port.RecommendedGIDIndex(); !ok || idx != 3 {
		t.Fatalf("recommended = %d,%v; want 3", idx, ok)
	}
	// A VF without an address has no RoCEv2 IPv4 entry: no recommendation.
	vf := node.Function(sysfsfixture.VFBDF(s.RoCE.BDF, 0)).RDMA[0].Ports[0]
	if _, ok := vf.RecommendedGIDIndex(); ok {
		t.Fatal("VF without IPv4 must not get a recommended GID index")
	}
	// IB ports never do.
	if _, ok := node.Function(s.IB.BDF).RDMA[0].Ports[0].RecommendedGIDIndex(); ok {
		t.Fatal("IB port must not get a recommended GID index")
	}
}

func TestNetnsModeSources(t *testing.T) {
	_, root := standard(t)
	tests := []struct {
		name       string
		opts       inventory.Options
		mode, src  string
		wantProble string
	}{
		{"kernel wins", inventory.Options{NetnsMode: "shared"}, "shared", "netlink", ""},
		{"kernel disagrees with flag", inventory.Options{NetnsMode: "shared", NetnsModeFlag: "exclusive"}, "shared", "netlink", "disagrees"},
		{"flag", inventory.Options{NetnsModeFlag: "exclusive"}, "exclusive", "flag", ""},
		{"unknown", inventory.Options{NetnsModeErr: errors.New("operation not supported")}, "unknown", "none", "operation not supported"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.SysfsRoot = root
			node, err := inventory.Discover(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if node.RDMANetnsMode != tc.mode || node.NetnsModeSource != tc.src {
				t.Fatalf("mode %s/%s, want %s/%s", node.RDMANetnsMode, node.NetnsModeSource, tc.mode, tc.src)
			}
			joined := strings.Join(node.Problems, "\n")
			if tc.wantProble == "" && joined != "" {
				t.Fatalf("unexpected problems: %s", joined)
			}
			if !strings.Contains(joined, tc.wantProble) {
				t.Fatalf("problems %q lack %q", joined, tc.wantProble)
			}
		})
	}
}

func TestDiscoverBadTrees(t *testing.T) {
	t.Run("missing bus", func(t *testing.T) {
		if _, err := inventory.Discover(inventory.Options{SysfsRoot: t.TempDir()}); err == nil {
			t.Fatal("want error for a root without bus/pci/devices")
		}
	})
	t.Run("dangling link and half-written function", func(t *testing.T) {
		root := t.TempDir()
		n, err := sysfsfixture.New(root)
		if err != nil {
			t.Fatal(err)
		}
		if err := n.AddFunction(sysfsfixture.Function{BDF: "0000:41:00.0", Vendor: "15b3", Device: "101d", Driver: "mlx5_core", Netdev: "p0", RDMADev: "mlx5_0"}); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("../../../devices/gone/0000:99:00.0", filepath.Join(root, "bus/pci/devices/0000:99:00.0")); err != nil {
			t.Fatal(err)
		}
		// the port directory vanishes (driver reload mid-scan)
		if err := os.RemoveAll(filepath.Join(n.Devices["0000:41:00.0"], "infiniband/mlx5_0/ports")); err != nil {
			t.Fatal(err)
		}
		node, err := inventory.Discover(inventory.Options{SysfsRoot: root})
		if err != nil {
			t.Fatal(err)
		}
		if len(node.Functions) != 1 || node.Functions[0].RDMAName() != "mlx5_0" || len(node.Functions[0].RDMA[0].Ports) != 0 {
			t.Fatalf("functions = %+v", node.Functions)
		}
		if !strings.Contains(strings.Join(node.Problems, "\n"), "0000:99:00.0") {
			t.Fatalf("problems %v should name the dangling device", node.Problems)
		}
	})
}

// TestFirstIPv4GIDIndex: the GID index a RoCE port's first IPv4 address
// will get once the port is fresh (an exclusive VF in its pod), from the
// GID types its table shows; none where the table cannot tell.
func TestFirstIPv4GIDIndex(t *testing.T) {
	gid := func(i int, typ, ipv4 string) inventory.GID {
		return inventory.GID{Index: i, Type: typ, IPv4: ipv4}
	}
	tests := []struct {
		name    string
		port    inventory.Port
		want    int
		wantErr string
	}{
		{name: "fresh port with RoCE v1 and v2: 3",
			port: inventory.Port{Num: 1, LinkLayer: inventory.LinkEthernet, GIDTableLen: 255, GIDs: []inventory.GID{gid(0, "v1", ""), gid(1, "v2", "")}}, want: 3},
		{name: "port with a host IPv4 address now: still 3 (the address goes with the move into the pod)",
			port: inventory.Port{Num: 1, LinkLayer: inventory.LinkEthernet, GIDTableLen: 255, GIDs: []inventory.GID{gid(0, "v1", ""), gid(1, "v2", ""), gid(2, "v1", "10.0.0.5"), gid(3, "v2", "10.0.0.5")}}, want: 3},
		{name: "RoCE v2 only: 1",
			port: inventory.Port{Num: 1, LinkLayer: inventory.LinkEthernet, GIDTableLen: 16, GIDs: []inventory.GID{gid(0, "v2", "")}}, want: 1},
		{name: "table size unknown (not read): no limit",
			port: inventory.Port{Num: 1, LinkLayer: inventory.LinkEthernet, GIDs: []inventory.GID{gid(0, "v1", ""), gid(1, "v2", "")}}, want: 3},
		{name: "no typed entry: cannot tell",
			port:    inventory.Port{Num: 1, LinkLayer: inventory.LinkEthernet, GIDTableLen: 8},
			wantErr: "no typed entry (gid_attrs/types missing or empty)"},
		{name: "RoCE v1 only: none",
			port:    inventory.Port{Num: 1, LinkLayer: inventory.LinkEthernet, GIDTableLen: 8, GIDs: []inventory.GID{gid(0, "v1", "")}},
			wantErr: "RoCE v1 only"},
		{name: "table too small",
			port:    inventory.Port{Num: 1, LinkLayer: inventory.LinkEthernet, GIDTableLen: 3, GIDs: []inventory.GID{gid(0, "v1", ""), gid(1, "v2", "")}},
			wantErr: "3 slots"},
		{name: "InfiniBand: none",
			port:    inventory.Port{Num: 1, LinkLayer: inventory.LinkInfiniBand},
			wantErr: "not RoCE"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.port.FirstIPv4GIDIndex()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("FirstIPv4GIDIndex = %d, %v; want an error with %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("FirstIPv4GIDIndex = %d, %v; want %d", got, err, tc.want)
			}
		})
	}

	// from sysfs: a fixture VF (no address) and its table's size
	s, root := standard(t)
	node, err := inventory.Discover(inventory.Options{SysfsRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	vf := node.Function(sysfsfixture.VFBDF(s.RoCE.BDF, 0)).RDMA[0].Ports[0]
	if got, err := vf.FirstIPv4GIDIndex(); err != nil || got != 3 || vf.GIDTableLen != 8 {
		t.Errorf("fixture VF: %d, %v, table of %d; want 3 and 8 slots", got, err, vf.GIDTableLen)
	}
}
