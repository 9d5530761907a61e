package inventory_test

import (
	"reflect"
	"testing"

	"github.com/rdmanet/rdmanet/internal/inventory"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

// TestNetdevsBelowBusDevices (issue 27): netdevs that hang below a bus
// device under their PCI function belong to that function: a cloud VM's
// virtio-net eth0 (devices/pci0000:00/0000:00:03.0/virtio2/net/eth0) is
// the function's own netdev, an mlx5 SF's netdev is a sub-device's on the
// PF. Either one carrying the default route marks the function. Before,
// the VM's NIC had no netdev and did not carry the default route.
func TestNetdevsBelowBusDevices(t *testing.T) {
	vmRoot, sfRoot := t.TempDir(), t.TempDir()
	vm, err := sysfsfixture.NewCloudVM(vmRoot, sysfsfixture.CloudVMOptions{NICs: 2})
	if err != nil {
		t.Fatal(err)
	}
	sfn, err := sysfsfixture.NewMlx5SFNode(sfRoot)
	if err != nil {
		t.Fatal(err)
	}
	discover := func(root string, route ...string) *inventory.Node {
		t.Helper()
		node, err := inventory.Discover(inventory.Options{SysfsRoot: root, DefaultRouteLinks: route, NetnsModeFlag: "shared"})
		if err != nil {
			t.Fatal(err)
		}
		return node
	}
	vmNode := discover(vmRoot, vm.DefaultRouteLink)
	sfNode := discover(sfRoot, "enp59s0f0s1")
	eth0, eth1 := vmNode.Function(vm.NICs[0].BDF), vmNode.Function(vm.NICs[1].BDF)
	port0, port1 := sfNode.Function(sfn.Port0.BDF), sfNode.Function(sfn.Port1.BDF)
	for name, f := range map[string]*inventory.Function{"VM eth0": eth0, "VM eth1": eth1, "SF port 0": port0, "SF port 1": port1} {
		if f == nil {
			t.Fatalf("%s: function not discovered", name)
		}
	}
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"VM: the NICs and not the GPU are network functions", len(vmNode.Functions), 2},
		{"VM: eth0 is the virtio function's netdev", eth0.Netdevs, []string{"eth0"}},
		{"VM: no sub-device netdevs", len(eth0.SubNetdevs), 0},
		{"VM: eth0 carries the default route", eth0.DefaultRoute, true},
		{"VM: by the route's own netdev", eth0.DefaultRouteLabel(), "eth0"},
		{"VM: eth1 does not", eth1.DefaultRoute, false},
		{"VM: by netdev", vmNode.ByNetdev("eth0"), eth0},
		{"VM: vendor", eth0.Vendor, sysfsfixture.VendorVirtio},
		{"VM: driver", eth0.Driver, "virtio-pci"},
		{"VM: operstate of the virtio netdev", eth0.OperState, "up"},
		{"VM: link layer from the netdev type", eth0.LinkLayer, inventory.LinkEthernet},
		{"VM: numa_node -1 is kept as -1", eth0.NUMA, -1},
		{"VM: and reads unknown", eth0.NUMALabel(), "unknown"},
		{"VM: PCIe root", eth0.PCIRoot, "pci0000:00"},
		{"SF: the PF's own netdev only", port0.Netdevs, []string{"enp59s0f0np0"}},
		{"SF: its SFs' netdevs are sub-device netdevs", port0.SubNetdevs, []inventory.SubNetdev{
			{Name: "enp59s0f0s1", Device: "mlx5_core.sf.2", Bus: "auxiliary"},
			{Name: "enp59s0f0s2", Device: "mlx5_core.sf.3", Bus: "auxiliary"}}},
		{"SF: the PF's RDMA device only", port0.RDMAName(), "mlx5_0"},
		{"SF: the route on an SF marks its PF", port0.DefaultRoute, true},
		{"SF: and names the SF", port0.DefaultRouteLabel(), "enp59s0f0s1 of mlx5_core.sf.2"},
		{"SF: the other port is free", port1.DefaultRoute, false},
		{"SF: an SF netdev is no function's own", sfNode.ByNetdev("enp59s0f0s1") == nil, true},
		{"SF: NUMA 0 reads 0", port0.NUMALabel(), "0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !reflect.DeepEqual(tc.got, tc.want) {
				t.Fatalf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
}
