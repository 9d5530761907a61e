// Package fakegpu is a test-only NVIDIA GPU device plugin for the cluster
// tier: it finds the GPUs of a sysfs tree (the fixture's, see
// sysfsfixture.StandardOptions.GPUs) and serves them to kubelet over the
// Device Plugin API v1beta1 as nvidia.com/gpu, one device per GPU with its
// NUMA node, so the topology manager sees GPUs next to rdmanet's VFs.
// Allocate sets NVIDIA_VISIBLE_DEVICES and mounts nothing: there is no
// driver behind the devices. It is never shipped in the rdmanet image.
package fakegpu

import (
	"fmt"
	"strings"

	"github.com/rdmanet/rdmanet/internal/sysfs"
)

// VendorNVIDIA is NVIDIA's PCI vendor ID.
const VendorNVIDIA = "10de"

// GPU is one NVIDIA display/3D controller PCI function.
type GPU struct {
	PCI     string `json:"pci"`                // 0000:42:00.0; the device ID kubelet sees
	Device  string `json:"device"`             // PCI device ID, e.g. 2330 (H100 SXM5)
	NUMA    int    `json:"numa"`               // -1 when sysfs names none
	PCIRoot string `json:"pci_root,omitempty"` // pci0000:40
}

// Discover lists the NVIDIA GPUs under sysfsRoot's bus/pci/devices, by PCI
// address: vendor 0x10de with a display controller class (0x03xxxx: VGA
// 0x0300, 3D 0x0302). The GPUs' audio and USB functions (0x04, 0x0c) are not
// GPUs.
func Discover(sysfsRoot string) ([]GPU, error) {
	fs := sysfs.New(sysfsRoot)
	bdfs, err := fs.PCIDevices()
	if err != nil {
		return nil, fmt.Errorf("discover GPUs: %w", err)
	}
	out := []GPU{}
	for _, bdf := range bdfs {
		if fs.HexID(bdf, "vendor") != VendorNVIDIA || !strings.HasPrefix(fs.HexID(bdf, "class"), "03") {
			continue
		}
		g := GPU{PCI: bdf, Device: fs.HexID(bdf, "device"), NUMA: -1}
		if n, ok := fs.IntAttr(bdf, "numa_node"); ok && n >= 0 {
			g.NUMA = n
		}
		if p, err := fs.ResolvedPath(bdf); err == nil {
			g.PCIRoot, _, _ = strings.Cut(p, "/")
		}
		out = append(out, g)
	}
	return out, nil
}
