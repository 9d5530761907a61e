// Package sysfs is a read-only model of the PCI, net and infiniband parts of
// Linux sysfs under a root directory (normally /sys; a fixture tree in tests).
//
// Every reader tolerates what real nodes produce: missing attributes,
// dangling links, devices that vanish while being read. Such cases return
// zero values or a wrapped fs.ErrNotExist, never a panic.
package sysfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// DefaultRoot is the sysfs mount point on a node.
const DefaultRoot = "/sys"

// FS reads sysfs under Root.
type FS struct {
	Root string
}

// New returns a reader for root ("" means DefaultRoot).
func New(root string) FS {
	if root == "" {
		root = DefaultRoot
	}
	return FS{Root: root}
}

// A PCI domain has at least four hex digits: the kernel prints it %04x, so
// domains above ffff have more (Intel VMD's 10000:00:00.0, Hyper-V's
// domains derived from a VMBus instance GUID).
var (
	bdfRe        = regexp.MustCompile(`^[0-9a-fA-F]{4,}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$`)
	hostBridgeRe = regexp.MustCompile(`^pci[0-9a-fA-F]{4,}:[0-9a-fA-F]{2}$`)
)

// ValidBDF reports whether s is a full PCI address (domain:bus:device.function).
func ValidBDF(s string) bool { return bdfRe.MatchString(s) }

// IsHostBridge reports whether a device directory name is a PCI host
// bridge (a PCIe root complex), pci<domain>:<bus>, e.g. pci0000:40.
func IsHostBridge(name string) bool { return hostBridgeRe.MatchString(name) }

// PCIeRootOfPath returns the PCIe root of a PCI function from its device
// path relative to <root>/devices (ResolvedPath): the outermost directory
// named like a PCI host bridge, pci<domain>:<bus>. On bare metal that is the
// path's first component (devices/pci0000:40/0000:40:01.1/0000:41:00.0),
// the same answer as Kubernetes' deviceattribute helper; below an Intel VMD
// controller it is the controller's root (devices/pci0000:00/0000:00:0e.0/
// pci10000:00/10000:00:02.0/10000:01:00.0 gives pci0000:00); on Hyper-V
// (Azure) VMs, whose PCI buses hang below ACPI and VMBus devices
// (devices/LNXSYSTM:00/.../VMBUS:01/<guid>/pci7870:00/7870:00:00.0), it is
// pci7870:00. "" when the path has no host bridge.
func PCIeRootOfPath(rel string) string {
	for _, c := range strings.Split(filepath.ToSlash(rel), "/") {
		if IsHostBridge(c) {
			return c
		}
	}
	return ""
}

// PCIeRoot returns the PCIe root of the function bdf (PCIeRootOfPath of its
// resolved device path); an error naming the function and the path when it
// has none.
func (f FS) PCIeRoot(bdf string) (string, error) {
	rel, err := f.ResolvedPath(bdf)
	if err != nil {
		return "", err
	}
	if r := PCIeRootOfPath(rel); r != "" {
		return r, nil
	}
	return "", fmt.Errorf("PCI function %s: no PCI host bridge (pci<domain>:<bus>) in its device path devices/%s", bdf, rel)
}

// PCIDevicePath returns <root>/bus/pci/devices/<bdf>.
func (f FS) PCIDevicePath(bdf string) string {
	return filepath.Join(f.Root, "bus/pci/devices", bdf)
}

// PCIDevices lists the PCI addresses under bus/pci/devices, sorted.
func (f FS) PCIDevices() ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(f.Root, "bus/pci/devices"))
	if err != nil {
		return nil, fmt.Errorf("list PCI devices under %s: %w", f.Root, err)
	}
	var out []string
	for _, e := range ents {
		if ValidBDF(e.Name()) {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

// Exists reports whether the PCI function's directory resolves.
func (f FS) Exists(bdf string) bool {
	_, err := os.Stat(f.PCIDevicePath(bdf))
	return err == nil
}

// ReadAttr reads <bus/pci/devices/bdf>/<name>, trimmed.
func (f FS) ReadAttr(bdf, name string) (string, error) {
	return readTrim(filepath.Join(f.PCIDevicePath(bdf), name))
}

// HexID reads a 0x-prefixed ID attribute (vendor, device, class) without the prefix, lower case.
func (f FS) HexID(bdf, name string) string {
	v, err := f.ReadAttr(bdf, name)
	if err != nil {
		return ""
	}
	return strings.ToLower(strings.TrimPrefix(v, "0x"))
}

// IntAttr reads an integer attribute; ok is false when missing or malformed.
func (f FS) IntAttr(bdf, name string) (int, bool) {
	v, err := f.ReadAttr(bdf, name)
	if err != nil {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, false
	}
	return n, true
}

// Driver returns the bound driver's name, "" when unbound.
func (f FS) Driver(bdf string) string {
	t, err := os.Readlink(filepath.Join(f.PCIDevicePath(bdf), "driver"))
	if err != nil {
		return ""
	}
	return filepath.Base(t)
}

// PhysFn returns the PF address of a VF, or "" for a PF/plain function.
func (f FS) PhysFn(bdf string) string {
	t, err := os.Readlink(filepath.Join(f.PCIDevicePath(bdf), "physfn"))
	if err != nil {
		return ""
	}
	return filepath.Base(t)
}

// VF is one virtfnN link of a PF.
type VF struct {
	Index int
	BDF   string
}

// VFs lists a PF's virtual functions ordered by index.
func (f FS) VFs(pf string) []VF {
	ents, err := os.ReadDir(f.PCIDevicePath(pf))
	if err != nil {
		return nil
	}
	var out []VF
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, "virtfn") {
			continue
		}
		idx, err := strconv.Atoi(strings.TrimPrefix(name, "virtfn"))
		if err != nil {
			continue
		}
		t, err := os.Readlink(filepath.Join(f.PCIDevicePath(pf), name))
		if err != nil {
			continue
		}
		out = append(out, VF{Index: idx, BDF: filepath.Base(t)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out
}

// VFIndex returns the index N of the PF's virtfnN link that points at vf.
func (f FS) VFIndex(pf, vf string) (int, error) {
	for _, v := range f.VFs(pf) {
		if v.BDF == vf {
			return v.Index, nil
		}
	}
	return 0, fmt.Errorf("%s is not a VF of %s: %w", vf, pf, fs.ErrNotExist)
}

// Netdevs lists the netdev names under <bdf>/net (empty when the netdev has
// moved to another namespace or the function has none).
func (f FS) Netdevs(bdf string) []string {
	return listDir(filepath.Join(f.PCIDevicePath(bdf), "net"))
}

// NetdevAttr reads class/net/<ifname>/<attr>.
func (f FS) NetdevAttr(ifname, attr string) (string, error) {
	return readTrim(filepath.Join(f.Root, "class/net", ifname, attr))
}

// NetdevPCI returns the PCI function a netdev belongs to, "" for a netdev
// on no PCI function (virtual netdevs, VMBus, Xen). See NetdevPlacement.
func (f FS) NetdevPCI(ifname string) string {
	return f.NetdevPlacement(ifname).PCI
}

// Placement is where a netdev hangs in the device tree.
type Placement struct {
	// PCI is the PCI function at or above the netdev's device, "" when
	// there is none.
	PCI string
	// Via is the device directly below the PCI function that the netdev
	// hangs under ("" when the netdev is the function's own, in <bdf>/net):
	// virtio2 (a virtio-pci function's virtio device), mlx5_core.sf.2 (an
	// mlx5 sub-function on the auxiliary bus).
	Via string
	// Bus is Via's bus (the name its subsystem link points at: virtio,
	// auxiliary), "" when Via is "" or has no subsystem link.
	Bus string
}

// OwnNetdev reports whether the netdev is its PCI function's own: in
// <bdf>/net, or below the function's virtio device (virtio-pci is only the
// transport of that one device, so the virtio device's netdev is the
// function's). A netdev below any other device (an mlx5 sub-function or
// another auxiliary device, a USB or Thunderbolt device below a
// controller) is not.
func (p Placement) OwnNetdev() bool {
	return p.PCI != "" && (p.Via == "" || p.Bus == BusVirtio)
}

// Buses of devices netdevs hang below.
const (
	BusVirtio    = "virtio"
	BusAuxiliary = "auxiliary"
)

// NetdevPlacement finds the PCI function of a netdev by walking up its
// device path from class/net/<ifname> until a directory named like a PCI
// address (DDDD:BB:DD.F), however many devices of other buses lie between:
//
//	devices/pci0000:40/0000:40:01.1/0000:41:00.2/net/enp65s0f0v0           a VF's own netdev
//	devices/pci0000:00/0000:00:03.0/virtio2/net/eth0                       virtio-net (cloud VMs)
//	devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/mlx5_core.sf.2/net/enp59s0f0s1   an mlx5 SF
//
// It stops at <root>/devices: devices/virtual/net/bond0 has no PCI
// function. The class link is read, not resolved component by component:
// the kernel's class links point at the device's canonical path.
func (f FS) NetdevPlacement(ifname string) Placement {
	link := filepath.Join(f.Root, "class/net", ifname)
	t, err := os.Readlink(link)
	if err != nil {
		return Placement{}
	}
	if !filepath.IsAbs(t) {
		t = filepath.Join(filepath.Dir(link), t)
	}
	return f.placementOf(filepath.Dir(filepath.Clean(t)))
}

// placementOf walks up from dir (a netdev's "net" directory) to the first
// directory named like a PCI address below <root>/devices.
func (f FS) placementOf(dir string) Placement {
	top := filepath.Join(f.Root, "devices")
	child := ""
	for d := filepath.Dir(dir); strings.HasPrefix(d, top+string(filepath.Separator)); d = filepath.Dir(d) {
		name := filepath.Base(d)
		if ValidBDF(name) {
			p := Placement{PCI: name, Via: child}
			if child != "" {
				if s, err := os.Readlink(filepath.Join(d, child, "subsystem")); err == nil {
					p.Bus = filepath.Base(s)
				}
			}
			return p
		}
		child = name
	}
	return Placement{}
}

// FunctionNetdev is a netdev found below a PCI function.
type FunctionNetdev struct {
	Name string
	Placement
}

// NetdevsByFunction lists every netdev of class/net that hangs below a PCI
// function (NetdevPlacement), keyed by the function's address, each
// function's netdevs sorted by name. One pass over class/net: what a
// discovery calls once, not per function.
func (f FS) NetdevsByFunction() map[string][]FunctionNetdev {
	out := map[string][]FunctionNetdev{}
	for _, name := range listDir(filepath.Join(f.Root, "class/net")) {
		p := f.NetdevPlacement(name)
		if p.PCI == "" {
			continue
		}
		out[p.PCI] = append(out[p.PCI], FunctionNetdev{Name: name, Placement: p})
	}
	return out
}

// LowerNetdevs lists the netdevs directly under ifname (sorted, each once):
// the kernel's class/net/<ifname>/lower_<dev> adjacency links (every upper
// device: bond, team, bridge, VLAN, macvlan, ipvlan), the bridge's brif/
// ports, and the bond's bonding/slaves list (older kernels and fixtures
// that only have one of these).
func (f FS) LowerNetdevs(ifname string) []string {
	dir := filepath.Join(f.Root, "class/net", ifname)
	set := map[string]bool{}
	for _, e := range listDir(dir) {
		if l, ok := strings.CutPrefix(e, "lower_"); ok && l != "" {
			set[l] = true
		}
	}
	for _, p := range listDir(filepath.Join(dir, "brif")) {
		set[p] = true
	}
	if s, err := readTrim(filepath.Join(dir, "bonding/slaves")); err == nil {
		for _, p := range strings.Fields(s) {
			set[p] = true
		}
	}
	out := make([]string, 0, len(set))
	for l := range set {
		out = append(out, l)
	}
	sort.Strings(out)
	return out
}

// RDMADevices lists the RDMA device names under <bdf>/infiniband.
func (f FS) RDMADevices(bdf string) []string {
	return listDir(filepath.Join(f.PCIDevicePath(bdf), "infiniband"))
}

// RDMAPath returns class/infiniband/<ibdev>.
func (f FS) RDMAPath(ibdev string) string { return filepath.Join(f.Root, "class/infiniband", ibdev) }

// RDMAPorts lists the port numbers of an RDMA device.
func (f FS) RDMAPorts(ibdev string) []int {
	var out []int
	for _, p := range listDir(filepath.Join(f.RDMAPath(ibdev), "ports")) {
		if n, err := strconv.Atoi(p); err == nil {
			out = append(out, n)
		}
	}
	sort.Ints(out)
	return out
}

// PortAttr reads class/infiniband/<ibdev>/ports/<port>/<attr>.
func (f FS) PortAttr(ibdev string, port int, attr string) (string, error) {
	return readTrim(filepath.Join(f.RDMAPath(ibdev), "ports", strconv.Itoa(port), attr))
}

// CharDev is a /dev/infiniband character device that belongs to a function.
type CharDev struct {
	Name  string // uverbs0, umad0, issm0
	IBDev string // RDMA device it serves
	Dev   string // major:minor
}

// CharDevs lists uverbsN, umadN and issmN of a PCI function.
func (f FS) CharDevs(bdf string) []CharDev {
	var out []CharDev
	for _, sub := range []string{"infiniband_verbs", "infiniband_mad"} {
		dir := filepath.Join(f.PCIDevicePath(bdf), sub)
		for _, name := range listDir(dir) {
			ib, _ := readTrim(filepath.Join(dir, name, "ibdev"))
			dev, _ := readTrim(filepath.Join(dir, name, "dev"))
			out = append(out, CharDev{Name: name, IBDev: ib, Dev: dev})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// HasRDMACM reports whether the rdma_cm misc device exists.
func (f FS) HasRDMACM() bool {
	_, err := os.Stat(filepath.Join(f.Root, "class/misc/rdma_cm"))
	return err == nil
}

// ResolvedPath returns the real device directory of a function (the target of
// its bus/pci/devices link), relative to <root>/devices, e.g.
// "pci0000:40/0000:40:01.1/0000:41:00.0".
func (f FS) ResolvedPath(bdf string) (string, error) {
	p, err := filepath.EvalSymlinks(f.PCIDevicePath(bdf))
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", bdf, err)
	}
	root, err := filepath.EvalSymlinks(filepath.Join(f.Root, "devices"))
	if err != nil {
		return "", fmt.Errorf("resolve %s/devices: %w", f.Root, err)
	}
	rel, err := filepath.Rel(root, p)
	if err != nil || strings.HasPrefix(rel, "..") {
		return "", fmt.Errorf("%s resolves outside %s/devices", bdf, f.Root)
	}
	return rel, nil
}

func readTrim(p string) (string, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

func listDir(dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(ents))
	for _, e := range ents {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

// IsNotExist reports whether err says a sysfs path is missing.
func IsNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// ReadFile reads any file under the root, given as a path relative to it or
// absolute, trimmed.
func (f FS) ReadFile(p string) (string, error) {
	if !filepath.IsAbs(p) {
		p = filepath.Join(f.Root, p)
	}
	return readTrim(p)
}

// ListInts lists the numeric entries of a directory, sorted.
func ListInts(dir string) []int {
	var out []int
	for _, n := range listDir(dir) {
		if i, err := strconv.Atoi(n); err == nil {
			out = append(out, i)
		}
	}
	sort.Ints(out)
	return out
}
