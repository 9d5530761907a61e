package sysfsfixture_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

// TestBusDeviceLayouts: the cloud VM and the mlx5 SF node lay their netdevs
// out below bus devices the way the kernel does (the links a reader of
// /sys follows).
func TestBusDeviceLayouts(t *testing.T) {
	vmRoot, sfRoot := t.TempDir(), t.TempDir()
	if _, err := sysfsfixture.NewCloudVM(vmRoot, sysfsfixture.CloudVMOptions{}); err != nil {
		t.Fatal(err)
	}
	sfn, err := sysfsfixture.NewMlx5SFNode(sfRoot)
	if err != nil {
		t.Fatal(err)
	}
	link := func(root, p string) string {
		t.Helper()
		s, err := os.Readlink(filepath.Join(root, p))
		if err != nil {
			return "ERR " + err.Error()
		}
		return s
	}
	resolves := func(root, p string) string {
		t.Helper()
		r, err := filepath.EvalSymlinks(filepath.Join(root, p))
		if err != nil {
			return "ERR " + err.Error()
		}
		realRoot, _ := filepath.EvalSymlinks(root)
		rel, _ := filepath.Rel(realRoot, r)
		return rel
	}
	read := func(root, p string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			return "ERR " + err.Error()
		}
		return strings.TrimSpace(string(b))
	}
	exists := func(root, p string) string {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			return "absent"
		}
		return "present"
	}
	tests := []struct {
		name      string
		got, want string
	}{
		{"VM: class/net/eth0", link(vmRoot, "class/net/eth0"), "../../devices/pci0000:00/0000:00:03.0/virtio2/net/eth0"},
		{"VM: eth0's device is the virtio device", link(vmRoot, "class/net/eth0/device"), "../../../virtio2"},
		{"VM: the virtio bus lists it", resolves(vmRoot, "bus/virtio/devices/virtio2"), "devices/pci0000:00/0000:00:03.0/virtio2"},
		{"VM: virtio device's subsystem", resolves(vmRoot, "devices/pci0000:00/0000:00:03.0/virtio2/subsystem"), "bus/virtio"},
		{"VM: virtio device's driver", resolves(vmRoot, "devices/pci0000:00/0000:00:03.0/virtio2/driver"), "bus/virtio/drivers/virtio_net"},
		{"VM: virtio device ID is net", read(vmRoot, "devices/pci0000:00/0000:00:03.0/virtio2/device"), "0x0001"},
		{"VM: the PCI function sits on the root bus", resolves(vmRoot, "bus/pci/devices/0000:00:03.0"), "devices/pci0000:00/0000:00:03.0"},
		{"VM: the PCI function's driver", resolves(vmRoot, "bus/pci/devices/0000:00:03.0/driver"), "bus/pci/drivers/virtio-pci"},
		{"VM: the PCI function has no net directory", exists(vmRoot, "bus/pci/devices/0000:00:03.0/net"), "absent"},
		{"VM: no NUMA", read(vmRoot, "bus/pci/devices/0000:00:03.0/numa_node"), "-1"},
		{"VM: the GPU under the same root", resolves(vmRoot, "bus/pci/devices/0000:01:00.0"), "devices/pci0000:00/0000:00:02.0/0000:01:00.0"},
		{"VM: the GPU is an H200", read(vmRoot, "bus/pci/devices/0000:01:00.0/device"), "0x2335"},
		{"VM: the GPU has no NUMA either", read(vmRoot, "bus/pci/devices/0000:01:00.0/numa_node"), "-1"},
		{"SF: class/net of the SF netdev", link(sfRoot, "class/net/enp59s0f0s1"), "../../devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/mlx5_core.sf.2/net/enp59s0f0s1"},
		{"SF: its device is the auxiliary device", link(sfRoot, "class/net/enp59s0f0s1/device"), "../../../mlx5_core.sf.2"},
		{"SF: the auxiliary bus lists it", resolves(sfRoot, "bus/auxiliary/devices/mlx5_core.sf.2"), "devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/mlx5_core.sf.2"},
		{"SF: sfnum", read(sfRoot, "bus/auxiliary/devices/mlx5_core.sf.2/sfnum"), "1"},
		{"SF: its driver", resolves(sfRoot, "bus/auxiliary/devices/mlx5_core.sf.2/driver"), "bus/auxiliary/drivers/mlx5_core.sf"},
		{"SF: its RDMA device", resolves(sfRoot, "class/infiniband/mlx5_2"), "devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/mlx5_core.sf.2/infiniband/mlx5_2"},
		{"SF: the RDMA device's netdev", read(sfRoot, "class/infiniband/mlx5_2/ports/1/gid_attrs/ndevs/0"), "enp59s0f0s1"},
		{"SF: the PF keeps its own netdev", link(sfRoot, "class/net/enp59s0f0np0/device"), "../../../0000:3b:00.0"},
		{"SF: second SF", sfn.SFs[1].Netdev + " " + sfn.SFs[1].Device() + " " + sfn.SFs[1].RDMADev, "enp59s0f0s2 mlx5_core.sf.3 mlx5_3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Fatalf("got %q, want %q", tc.got, tc.want)
			}
		})
	}
}

func TestBusDeviceBuilderErrors(t *testing.T) {
	n, err := sysfsfixture.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pf := sysfsfixture.Function{BDF: "0000:3b:00.0", Vendor: sysfsfixture.VendorMellanox, Device: sysfsfixture.DeviceCX7, Driver: "mlx5_core", PCIRoot: "pci0000:3a"}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{name: "virtio NIC without a netdev", err: n.AddVirtioNet(sysfsfixture.Function{BDF: "0000:00:03.0"}, 0), want: "Netdev is empty"},
		{name: "virtio NIC with an RDMA device", err: n.AddVirtioNet(sysfsfixture.Function{BDF: "0000:00:03.0", Netdev: "eth0", RDMADev: "mlx5_0"}, 0), want: "no RDMA device"},
		{name: "SF of a PF not written", err: func() error { _, err := n.AddSF(pf, sysfsfixture.SF{Index: 2, SFNum: 1}); return err }(), want: "PF not written yet"},
		{name: "SF of a PF without a netdev", err: func() error {
			if err := n.AddFunction(pf); err != nil {
				return err
			}
			_, err := n.AddSF(pf, sysfsfixture.SF{Index: 2, SFNum: 1})
			return err
		}(), want: "set SF.Netdev"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", tc.err, tc.want)
			}
		})
	}
}
