package sysfs_test

import (
	"reflect"
	"testing"

	"github.com/rdmanet/rdmanet/internal/sysfs"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

// TestNetdevPlacement (issue 27): a netdev's PCI function is found by
// walking up its device path, whatever bus devices hang in between: a
// cloud VM's virtio-net netdev below virtio2, an mlx5 sub-function's below
// its auxiliary device. Before, only <bdf>/net/<ifname> resolved, and the
// VM's eth0 belonged to no function.
func TestNetdevPlacement(t *testing.T) {
	vmRoot, sfRoot, stdRoot := t.TempDir(), t.TempDir(), t.TempDir()
	vm, err := sysfsfixture.NewCloudVM(vmRoot, sysfsfixture.CloudVMOptions{NICs: 2})
	if err != nil {
		t.Fatal(err)
	}
	sfn, err := sysfsfixture.NewMlx5SFNode(sfRoot)
	if err != nil {
		t.Fatal(err)
	}
	std, err := sysfsfixture.NewStandard(stdRoot, sysfsfixture.StandardOptions{RoCEVFs: 2, IBVFs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := std.AddUpper(sysfsfixture.Upper{Name: "bond0", Kind: sysfsfixture.KindBond, Lowers: []string{"ens8f0np0"}}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		root   string
		ifname string
		want   sysfs.Placement
		own    bool
	}{
		{name: "cloud VM: virtio-net eth0 below virtio2", root: vmRoot, ifname: "eth0",
			want: sysfs.Placement{PCI: vm.NICs[0].BDF, Via: "virtio2", Bus: sysfs.BusVirtio}, own: true},
		{name: "cloud VM: second NIC below virtio3", root: vmRoot, ifname: "eth1",
			want: sysfs.Placement{PCI: "0000:00:04.0", Via: "virtio3", Bus: sysfs.BusVirtio}, own: true},
		{name: "mlx5 SF netdev below its auxiliary device", root: sfRoot, ifname: "enp59s0f0s1",
			want: sysfs.Placement{PCI: sfn.Port0.BDF, Via: "mlx5_core.sf.2", Bus: sysfs.BusAuxiliary}},
		{name: "the PF's own netdev beside its SFs", root: sfRoot, ifname: "enp59s0f0np0",
			want: sysfs.Placement{PCI: sfn.Port0.BDF}, own: true},
		{name: "VF netdev directly below its function", root: stdRoot, ifname: "enp65s0f0v1",
			want: sysfs.Placement{PCI: sysfsfixture.VFBDF(std.RoCE.BDF, 1)}, own: true},
		{name: "virtual netdev: no PCI function", root: stdRoot, ifname: "bond0"},
		{name: "unknown netdev", root: stdRoot, ifname: "nosuch0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := sysfs.New(tc.root)
			got := fs.NetdevPlacement(tc.ifname)
			if got != tc.want {
				t.Fatalf("NetdevPlacement(%s) = %+v, want %+v", tc.ifname, got, tc.want)
			}
			if got.OwnNetdev() != tc.own {
				t.Errorf("OwnNetdev = %v, want %v", got.OwnNetdev(), tc.own)
			}
			if pci := fs.NetdevPCI(tc.ifname); pci != tc.want.PCI {
				t.Errorf("NetdevPCI(%s) = %q, want %q", tc.ifname, pci, tc.want.PCI)
			}
		})
	}

	t.Run("NetdevsByFunction of the SF node", func(t *testing.T) {
		got := sysfs.New(sfRoot).NetdevsByFunction()
		want := map[string][]sysfs.FunctionNetdev{
			sfn.Port0.BDF: {
				{Name: "enp59s0f0np0", Placement: sysfs.Placement{PCI: sfn.Port0.BDF}},
				{Name: "enp59s0f0s1", Placement: sysfs.Placement{PCI: sfn.Port0.BDF, Via: "mlx5_core.sf.2", Bus: sysfs.BusAuxiliary}},
				{Name: "enp59s0f0s2", Placement: sysfs.Placement{PCI: sfn.Port0.BDF, Via: "mlx5_core.sf.3", Bus: sysfs.BusAuxiliary}},
			},
			sfn.Port1.BDF: {{Name: "enp59s0f1np1", Placement: sysfs.Placement{PCI: sfn.Port1.BDF}}},
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("NetdevsByFunction = %+v\nwant %+v", got, want)
		}
	})
	t.Run("the virtio function's own net directory is empty", func(t *testing.T) {
		// what the inventory read before: <bdf>/net only
		if got := sysfs.New(vmRoot).Netdevs(vm.NICs[0].BDF); len(got) != 0 {
			t.Fatalf("Netdevs(%s) = %v, want none (eth0 hangs below virtio2)", vm.NICs[0].BDF, got)
		}
	})
}
