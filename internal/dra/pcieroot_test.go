package dra

import (
	"testing"

	"github.com/rdmanet/rdmanet/internal/deviceplugin"
	"github.com/rdmanet/rdmanet/internal/deviceplugin/config"
	"github.com/rdmanet/rdmanet/internal/inventory"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

// TestPCIeRootOnVMDAndHyperV: functions of a five-digit VMD domain and of
// a Hyper-V VM (host bridge below ACPI and VMBus devices) are published with
// the right pcieRoot and PCI bus ID, in the inventory and in the slices;
// never LNXSYSTM:00, never a failed publication.
func TestPCIeRootOnVMDAndHyperV(t *testing.T) {
	vmdRoot, hvRoot := t.TempDir(), t.TempDir()
	vmd, err := sysfsfixture.NewVMDNode(vmdRoot)
	if err != nil {
		t.Fatal(err)
	}
	hv, err := sysfsfixture.NewHyperVVM(hvRoot)
	if err != nil {
		t.Fatal(err)
	}
	rdma := `{"resourceList":[{"resourcePrefix":"example.com","resourceName":"rdma","selectors":{"vendors":["15b3"],"isRdma":true}}]}`
	tests := []struct {
		name         string
		root         string
		defaultRoute []string
		want         map[string]string // device PCI address -> pcieRoot
	}{
		{name: "VMD: PF's VFs under the controller's root", root: vmdRoot, want: map[string]string{
			sysfsfixture.VFBDF(vmd.RoCE.BDF, 0): "pci0000:00", sysfsfixture.VFBDF(vmd.RoCE.BDF, 1): "pci0000:00",
			sysfsfixture.VFBDF(vmd.RoCE.BDF, 2): "pci0000:00", sysfsfixture.VFBDF(vmd.RoCE.BDF, 3): "pci0000:00"}},
		{name: "Hyper-V: the IB VF under pci0101:00; the accelerated-networking VF under eth0 withheld", root: hvRoot, defaultRoute: []string{hv.DefaultRouteLink},
			want: map[string]string{hv.IB.BDF: "pci0101:00"}},
		{name: "Hyper-V without a default route: both VFs, each under its own host bridge", root: hvRoot,
			want: map[string]string{hv.IB.BDF: "pci0101:00", hv.AccelNet.BDF: "pci7870:00"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			specs, err := config.Parse("pools.json", []byte(rdma))
			if err != nil {
				t.Fatal(err)
			}
			node, err := inventory.Discover(inventory.Options{SysfsRoot: tc.root, DefaultRouteLinks: tc.defaultRoute, NetnsModeFlag: "exclusive"})
			if err != nil {
				t.Fatal(err)
			}
			for bdf, root := range tc.want {
				if f := node.Function(bdf); f == nil || f.PCIRoot != root {
					t.Errorf("inventory: function %s = %+v, want PCIRoot %s", bdf, f, root)
				}
			}
			pools, err := deviceplugin.Build(node, specs)
			if err != nil {
				t.Fatal(err)
			}
			devs, problems := Devices(node, pools, NewSysfsTopology(tc.root))
			if problems != nil {
				t.Fatalf("problems: %v", problems)
			}
			got := map[string]string{}
			for _, d := range devs {
				id, root, bus := attrString(d, AttrMultusDeviceID), attrString(d, AttrPCIeRoot), attrString(d, AttrPCIBusID)
				got[id] = root
				if bus != id {
					t.Errorf("device %s: %s = %q, want %q", d.Name, AttrPCIBusID, bus, id)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("published %v, want %v", got, tc.want)
			}
			for id, root := range tc.want {
				if got[id] != root {
					t.Errorf("device %s: pcieRoot %q, want %q", id, got[id], root)
				}
			}
		})
	}
}
