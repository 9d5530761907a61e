package sysfsfixture_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rdmanet/rdmanet/internal/inventory"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

// ibFunc is what the inventory reads of one function of the IB fixtures.
type ibFunc struct {
	netdevs   []string
	rdma      string
	linkLayer string
	isVF      bool
	nodeGUID  string
}

func TestIBNodeInventory(t *testing.T) {
	root := t.TempDir()
	n, err := sysfsfixture.NewIBNode(root, sysfsfixture.IBNodeOptions{VFs: 2,
		VFGUID: func(i int) string { return []string{"02:00:00:00:00:00:00:01", sysfsfixture.ZeroGUID}[i] }})
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Discover(inventory.Options{SysfsRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]ibFunc{
		"0000:03:00.0": {[]string{"eno1"}, "mlx5_0", "Ethernet", false, ""},
		"0000:c1:00.0": {[]string{"ibp193s0f0"}, "mlx5_1", "InfiniBand", false, "0c42:a103:0065:8e81"},
		"0000:c1:00.1": {[]string{"ibp193s0f1"}, "mlx5_2", "InfiniBand", false, "0c42:a103:0065:8e82"},
		"0000:d1:00.0": {nil, "mlx5_3", "InfiniBand", false, "0c42:a103:0065:8e83"},
		"0000:c1:00.2": {[]string{"ibp193s0f0v0"}, "mlx5_4", "InfiniBand", true, "0200:0000:0000:0001"},
		"0000:c1:00.3": {[]string{"ibp193s0f0v1"}, "mlx5_5", "InfiniBand", true, "0000:0000:0000:0000"},
		"0000:d1:00.2": {nil, "mlx5_6", "InfiniBand", true, "0000:0000:0000:0000"},
		"0000:d1:00.3": {nil, "mlx5_7", "InfiniBand", true, "0000:0000:0000:0000"},
	}
	got := map[string]ibFunc{}
	for _, f := range inv.Functions {
		g := ibFunc{netdevs: f.Netdevs, rdma: f.RDMAName(), linkLayer: f.LinkLayer, isVF: f.IsVF}
		if len(f.RDMA) > 0 && f.LinkLayer == "InfiniBand" {
			g.nodeGUID = f.RDMA[0].NodeGUID
		}
		got[f.BDF] = g
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("inventory of the IB node:\n got %+v\nwant %+v", got, want)
	}
	if !reflect.DeepEqual(n.Port0VFs, []string{"0000:c1:00.2", "0000:c1:00.3"}) || !reflect.DeepEqual(n.IBOnlyVFs, []string{"0000:d1:00.2", "0000:d1:00.3"}) {
		t.Errorf("VF addresses: %v %v", n.Port0VFs, n.IBOnlyVFs)
	}
}

func TestIBNodePortsAndGUIDs(t *testing.T) {
	tests := []struct {
		name  string
		opts  sysfsfixture.IBNodeOptions
		ibdev string
		want  sysfsfixture.IBPort
	}{
		{name: "shared port: SM, three PKeys", ibdev: "mlx5_2",
			want: sysfsfixture.IBPort{LID: 0x12, SMLID: 1, PKeys: []uint16{0xffff, 0x8005, 0x8006}, State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "400 Gb/sec (4X NDR)"}},
		{name: "VF shares its PF port's LID", ibdev: "mlx5_4",
			want: sysfsfixture.IBPort{LID: 0x11, SMLID: 1, PKeys: []uint16{0xffff, 0x8005}, State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "400 Gb/sec (4X NDR)"}},
		{name: "no subnet manager: LID and SM LID 0", opts: sysfsfixture.IBNodeOptions{NoSM: true}, ibdev: "mlx5_1",
			want: sysfsfixture.IBPort{PKeys: []uint16{0xffff, 0x8005}, State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "400 Gb/sec (4X NDR)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, err := sysfsfixture.NewIBNode(t.TempDir(), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			got, err := n.IBPortOf(tc.ibdev)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("port of %s:\n got %+v\nwant %+v", tc.ibdev, got, tc.want)
			}
		})
	}
}

func TestSetGUIDsUpdatesIPoIBAddress(t *testing.T) {
	root := t.TempDir()
	n, err := sysfsfixture.NewIBNode(root, sysfsfixture.IBNodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vf := n.RDMAByBD[n.Port0VFs[0]]
	if err := n.SetGUIDs(vf, "02:00:00:00:00:00:10:01", "02:00:00:00:00:00:10:02"); err != nil {
		t.Fatal(err)
	}
	node, port, err := n.GUIDs(vf)
	if err != nil {
		t.Fatal(err)
	}
	if node != "02:00:00:00:00:00:10:01" || port != "02:00:00:00:00:00:10:02" {
		t.Errorf("GUIDs = %s %s", node, port)
	}
	b, err := os.ReadFile(filepath.Join(root, "class/net", n.NetByBDF[n.Port0VFs[0]], "address"))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := sysfsfixture.IPoIBAddress("02:00:00:00:00:00:10:02")
	if got := strings.TrimSpace(string(b)); got != want || want != "00:00:10:49:fe:80:00:00:00:00:00:00:02:00:00:00:00:00:10:02" {
		t.Errorf("IPoIB address = %s, want %s", got, want)
	}
	if _, err := sysfsfixture.SysfsGUID("02:00"); err == nil {
		t.Error("SysfsGUID accepted a 2-byte GUID")
	}
}

func TestIBOnlyVM(t *testing.T) {
	root := t.TempDir()
	vm, err := sysfsfixture.NewIBOnlyVM(root, 2)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Discover(inventory.Options{SysfsRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Functions) != 2 {
		t.Fatalf("functions: %d, want 2", len(inv.Functions))
	}
	for i, f := range inv.Functions {
		if len(f.Netdevs) != 0 || f.RDMAName() != vm.VFs[i].RDMADev || f.LinkLayer != "InfiniBand" || len(f.RDMA[0].CharDevs) == 0 {
			t.Errorf("%s: netdevs %v rdma %s link %s chardevs %v", f.BDF, f.Netdevs, f.RDMAName(), f.LinkLayer, f.RDMA[0].CharDevs)
		}
	}
	ents, _ := os.ReadDir(filepath.Join(root, "class/net"))
	if len(ents) != 0 {
		t.Errorf("class/net has %d entries, want none", len(ents))
	}
}

// TestIBNodeTotalVFs: Port0's sriov_totalvfs is 16 unless more VFs are
// asked for (the demo runs up to 31 pods per mode) or set; VFs above an
// explicit total are refused, as the kernel refuses sriov_numvfs above it.
func TestIBNodeTotalVFs(t *testing.T) {
	tests := []struct {
		name      string
		opts      sysfsfixture.IBNodeOptions
		wantTotal string
		wantErr   string
	}{
		{name: "default", opts: sysfsfixture.IBNodeOptions{}, wantTotal: "16"},
		{name: "more VFs than the default total", opts: sysfsfixture.IBNodeOptions{VFs: 31}, wantTotal: "31"},
		{name: "explicit total", opts: sysfsfixture.IBNodeOptions{VFs: 2, TotalVFs: 64}, wantTotal: "64"},
		{name: "VFs above the total", opts: sysfsfixture.IBNodeOptions{VFs: 9, TotalVFs: 8}, wantErr: "9 VFs on ibp193s0f0, sriov_totalvfs is 8"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			n, err := sysfsfixture.NewIBNode(root, tc.opts)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(root, "bus/pci/devices", n.Port0.BDF, "sriov_totalvfs"))
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(string(b)); got != tc.wantTotal {
				t.Errorf("sriov_totalvfs %s, want %s", got, tc.wantTotal)
			}
		})
	}
}
