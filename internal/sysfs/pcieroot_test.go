package sysfs

import (
	"testing"

	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

func TestValidBDF(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want bool
	}{
		{name: "four-digit domain", in: "0000:41:00.2", want: true},
		{name: "upper-case hex", in: "0000:AF:00.0", want: true},
		{name: "Intel VMD five-digit domain", in: "10000:01:00.0", want: true},
		{name: "Hyper-V domain", in: "7870:00:00.0", want: true},
		{name: "no domain", in: "41:00.2", want: false},
		{name: "three-digit domain", in: "000:41:00.2", want: false},
		{name: "function 8", in: "0000:41:00.8", want: false},
		{name: "host bridge", in: "pci10000:00", want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ValidBDF(tc.in); got != tc.want {
				t.Fatalf("ValidBDF(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestPCIeRootOfPath(t *testing.T) {
	tests := []struct {
		name string
		rel  string
		want string
	}{
		{name: "bare metal", rel: "pci0000:40/0000:40:01.1/0000:41:00.0", want: "pci0000:40"},
		{name: "VMD domain on its own root", rel: "pci10000:00/10000:00:02.0/10000:01:00.0", want: "pci10000:00"},
		{name: "behind a VMD controller: the controller's root", rel: "pci0000:00/0000:00:0e.0/pci10000:00/10000:00:02.0/10000:01:00.0", want: "pci0000:00"},
		{name: "Hyper-V below ACPI and VMBus", rel: "LNXSYSTM:00/LNXSYBUS:00/PNP0A03:00/device:07/VMBUS:01/7870ed3a-1c5b-4e2f-9d61-3a0b8c4f7870/pci7870:00/7870:00:00.0", want: "pci7870:00"},
		{name: "no host bridge", rel: "LNXSYSTM:00/LNXSYBUS:00/VMBUS:01/guid/7870:00:00.0", want: ""},
		{name: "platform device", rel: "platform/soc/1c000.pcie/0000:00:00.0", want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := PCIeRootOfPath(tc.rel); got != tc.want {
				t.Fatalf("PCIeRootOfPath(%q) = %q, want %q", tc.rel, got, tc.want)
			}
		})
	}
}

// TestPCIeRootOnRealLayouts reads the roots of the VMD and Hyper-V fixtures
// and places their netdevs on their functions.
func TestPCIeRootOnRealLayouts(t *testing.T) {
	vmdRoot, hvRoot := t.TempDir(), t.TempDir()
	vmd, err := sysfsfixture.NewVMDNode(vmdRoot)
	if err != nil {
		t.Fatal(err)
	}
	hv, err := sysfsfixture.NewHyperVVM(hvRoot)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, root, bdf, want, netdev string
	}{
		{name: "VMD PF", root: vmdRoot, bdf: vmd.RoCE.BDF, want: "pci0000:00", netdev: vmd.RoCE.Netdev},
		{name: "VMD VF", root: vmdRoot, bdf: sysfsfixture.VFBDF(vmd.RoCE.BDF, 3), want: "pci0000:00", netdev: "enP65536p1s0f0v3"},
		{name: "Hyper-V accelerated networking VF", root: hvRoot, bdf: hv.AccelNet.BDF, want: "pci7870:00", netdev: hv.AccelNet.Netdev},
		{name: "Hyper-V InfiniBand VF", root: hvRoot, bdf: hv.IB.BDF, want: "pci0101:00", netdev: "ib0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := New(tc.root)
			got, err := fs.PCIeRoot(tc.bdf)
			if err != nil || got != tc.want {
				t.Fatalf("PCIeRoot(%s) = %q, %v; want %q", tc.bdf, got, err, tc.want)
			}
			if p := fs.NetdevPlacement(tc.netdev); p.PCI != tc.bdf {
				t.Fatalf("NetdevPlacement(%s) = %+v, want function %s", tc.netdev, p, tc.bdf)
			}
			devs, err := fs.PCIDevices()
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, d := range devs {
				found = found || d == tc.bdf
			}
			if !found {
				t.Fatalf("PCIDevices() = %v, lacks %s", devs, tc.bdf)
			}
		})
	}
	if _, err := New(hvRoot).PCIeRoot("0000:99:00.0"); err == nil {
		t.Fatal("PCIeRoot of a missing function: no error")
	}
}
