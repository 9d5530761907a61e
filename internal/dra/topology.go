package dra

import (
	"fmt"
	"path/filepath"
	"sync"

	"k8s.io/dynamic-resource-allocation/deviceattribute"

	"github.com/rdmanet/rdmanet/internal/sysfs"
)

// SysfsTopology reads the host's sysfs under Root ("" means /sys). The PCIe
// root comes from Kubernetes' standard helper
// (deviceattribute.GetPCIeRootAttributeByPCIBusID), pointed at Root with
// its WithFSFromRoot option, so rdmanet's pcieRoot is by construction the
// value GPU drivers using the same helper publish. Where the helper gives
// no answer, the outermost PCI host bridge of the function's device path is
// the root (sysfs.PCIeRootOfPath): a domain of more than four hex digits
// (Intel VMD's 10000:01:00.0), which the helper refuses, and Hyper-V/Azure
// VMs, whose host bridge pci7870:00 sits below ACPI and VMBus devices
// (devices/LNXSYSTM:00/.../VMBUS:01/<guid>/pci7870:00/7870:00:00.0) where
// the helper wants devices/pci*. Roots are remembered per
// PCI address (a function does not move while it exists), so a health
// refresh costs no sysfs reads.
type SysfsTopology struct {
	Root string

	mu    sync.Mutex
	roots map[string]string
}

// NewSysfsTopology returns a Topology over the sysfs tree at root.
func NewSysfsTopology(root string) *SysfsTopology {
	if root == "" {
		root = sysfs.DefaultRoot
	}
	return &SysfsTopology{Root: root, roots: map[string]string{}}
}

// PCIeRoot implements Topology.
func (t *SysfsTopology) PCIeRoot(bdf string) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r, ok := t.roots[bdf]; ok {
		return r, nil
	}
	a, err := deviceattribute.GetPCIeRootAttributeByPCIBusID(bdf, deviceattribute.WithFSFromRoot(t.Root))
	if err == nil && a.Value.StringValue != nil && sysfs.IsHostBridge(*a.Value.StringValue) {
		t.roots[bdf] = *a.Value.StringValue
		return *a.Value.StringValue, nil
	}
	root, ferr := sysfs.New(t.Root).PCIeRoot(bdf)
	if ferr != nil {
		if err == nil {
			err = fmt.Errorf("no PCIe root for %s", bdf)
		}
		return "", fmt.Errorf("sysfs %s: %w (and walking the device path: %w)", t.Root, err, ferr)
	}
	t.roots[bdf] = root
	return root, nil
}

// Forget drops remembered roots of functions that are gone (keep lists
// those present), so a PCI address reused by another function is resolved
// again.
func (t *SysfsTopology) Forget(keep map[string]bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for bdf := range t.roots {
		if !keep[bdf] {
			delete(t.roots, bdf)
		}
	}
}

// Firmware implements Topology: class/infiniband/<dev>/fw_ver.
func (t *SysfsTopology) Firmware(rdmaDev string) string {
	fs := sysfs.New(t.Root)
	v, err := fs.ReadFile(filepath.Join(fs.RDMAPath(rdmaDev), "fw_ver"))
	if err != nil {
		return ""
	}
	return v
}
