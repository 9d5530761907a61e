// Package dra publishes the node's RDMA hardware for Dynamic Resource
// Allocation (resource.k8s.io/v1): it turns the agent's inventory and pools
// into DRA devices (Devices, one function of the inventory and the pools)
// and keeps the node's ResourceSlices in step with them (Publisher).
//
// Devices of the driver DriverName:
//
//   - exclusive pools: one device per selected VF (or VF-less function),
//     named "vf-<domain>-<bus>-<dev>-<fn>" ("pf-…" for a function that is
//     not a VF);
//   - shared pools: one device per HCA, named "hca-<domain>-<bus>-<dev>-<fn>",
//     that many claims may share (allowMultipleAllocations, DRA consumable
//     capacity): its capacity CapacitySlots is the pool's rdmaHcaMax and each
//     allocation consumes one slot.
//
// An unhealthy device carries the NoSchedule taint TaintUnhealthy: the
// scheduler places no new claim on it, running pods keep it.
//
// The kubelet plugin (Driver, kubeletplugin.go) prepares the claims
// allocated these devices: CDI specs (cdi.go) with the device plugin's
// device nodes and environment, device-info files, a checkpoint
// (checkpoint.go), and the rule that a device never serves a claim and a
// device-plugin allocation at once (Claimed, claimed.go; kubelet's
// PodResources, dpusers.go). The CNI attachment of DRA claims and claim
// device status are not here yet (docs/dra.md).
package dra

import (
	"fmt"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/deviceattribute"

	"github.com/rdmanet/rdmanet/internal/deviceplugin"
	"github.com/rdmanet/rdmanet/internal/deviceplugin/config"
	"github.com/rdmanet/rdmanet/internal/inventory"
	"github.com/rdmanet/rdmanet/internal/sysfs"
)

// DriverName is the DRA driver name of rdmanet's devices: the spec.driver
// of its ResourceSlices, the domain of its own attributes and capacities,
// and what DeviceClasses select on (device.driver).
const DriverName = "rdma.rdmanet.io"

// Attribute names. Unqualified names are in the driver's domain
// (rdma.rdmanet.io/<name>; in CEL device.attributes["rdma.rdmanet.io"].<name>).
const (
	// AttrKind is "exclusive" (a VF for one pod) or "shared" (an HCA many pods share).
	AttrKind resourceapi.QualifiedName = "kind"
	// AttrLinkLayer is "ethernet" (RoCE) or "infiniband".
	AttrLinkLayer resourceapi.QualifiedName = "linkLayer"
	// AttrPFName is the PF's netdev (the HCA's own netdev for shared devices).
	AttrPFName resourceapi.QualifiedName = "pfName"
	// AttrPFPCIAddress is the PF's PCI address (the HCA's for shared devices).
	AttrPFPCIAddress resourceapi.QualifiedName = "pfPciAddress"
	// AttrVFIndex is the VF's index under its PF (N of the PF's virtfnN).
	AttrVFIndex resourceapi.QualifiedName = "vfIndex"
	// AttrRDMADevice is the function's RDMA device (mlx5_4), when the host sees it.
	AttrRDMADevice resourceapi.QualifiedName = "rdmaDevice"
	// AttrRDMANetnsMode is the node's RDMA subsystem netns mode: exclusive, shared or unknown.
	AttrRDMANetnsMode resourceapi.QualifiedName = "rdmaNetnsMode"
	// AttrDriver is the function's kernel driver (mlx5_core).
	AttrDriver resourceapi.QualifiedName = "driver"
	// AttrFirmware is the RDMA device's firmware version (fw_ver), when sysfs has it.
	AttrFirmware resourceapi.QualifiedName = "firmware"
	// AttrPCIVendor and AttrPCIDevice are the function's PCI IDs (hex, no 0x).
	AttrPCIVendor resourceapi.QualifiedName = "pciVendor"
	AttrPCIDevice resourceapi.QualifiedName = "pciDevice"

	// AttrPCIeRoot, AttrNUMANode and AttrPCIBusID are Kubernetes' standard
	// attributes (k8s.io/dynamic-resource-allocation/deviceattribute), the
	// ones GPU drivers publish too: a claim aligns a NIC with a GPU by
	// matchAttribute on AttrPCIeRoot. AttrPCIBusID is the device's own PCI
	// address (the VF's for exclusive devices).
	AttrPCIeRoot = deviceattribute.StandardDeviceAttributePCIeRoot
	AttrNUMANode = deviceattribute.StandardDeviceAttributeNUMANode
	AttrPCIBusID = deviceattribute.StandardDeviceAttributePCIBusID

	// AttrMultusDeviceID and AttrMultusResourceName are what Multus' DRA
	// support reads: the device ID it passes to the CNI plugin (the PCI
	// address) and the name a NetworkAttachmentDefinition's
	// k8s.v1.cni.cncf.io/resourceName must equal (the pool's resource name,
	// as with the device plugin).
	AttrMultusDeviceID     resourceapi.QualifiedName = "k8s.cni.cncf.io/deviceID"
	AttrMultusResourceName resourceapi.QualifiedName = "k8s.cni.cncf.io/resourceName"
)

// CapacitySlots is a shared device's capacity: how many allocations it
// takes (the pool's rdmaHcaMax); each consumes one.
const CapacitySlots resourceapi.QualifiedName = "slots"

// TaintUnhealthy marks an unhealthy device (NoSchedule).
const TaintUnhealthy = DriverName + "/unhealthy"

// TaintDevicePlugin marks a device a pod holds through the device plugin
// (NoSchedule): kube-scheduler allocates it to no claim until the pod is
// gone (PublisherOptions.InUse).
const TaintDevicePlugin = DriverName + "/device-plugin"

// Kinds as AttrKind spells them.
const (
	KindExclusive = string(config.Exclusive)
	KindShared    = string(config.Shared)
)

// MaxDevicesPerSlice is how many devices one ResourceSlice carries: the
// API's limit for slices whose devices have taints (128 without).
const MaxDevicesPerSlice = 64

// Topology answers what the inventory does not carry in the form DRA
// wants: the standard PCIe root attribute and the firmware version.
// SysfsTopology is the real one.
type Topology interface {
	// PCIeRoot returns the standard resource.kubernetes.io/pcieRoot value
	// of a PCI function (pci0000:40).
	PCIeRoot(bdf string) (string, error)
	// Firmware returns an RDMA device's firmware version, "" when unknown.
	Firmware(rdmaDev string) string
}

// Devices turns the advertised pools of a discovery into DRA devices, in a
// stable order: pools in configuration order, each pool's devices by PCI
// address. Pools that are not advertised (nothing selected, wrong RDMA
// netns mode) contribute nothing. A device whose PCIe root cannot be
// determined (its sysfs link is missing, or its device path has no PCI host
// bridge) is still published, without resource.kubernetes.io/pcieRoot (no
// constraint on that attribute can then pick it, which is the truth); each
// such device is one problem, naming the pool, the device and why, for the
// caller to log.
func Devices(node *inventory.Node, pools []*deviceplugin.Pool, topo Topology) (devs []resourceapi.Device, problems []error) {
	for _, p := range pools {
		if !p.Advertised {
			continue
		}
		switch p.Spec.Kind {
		case config.Exclusive:
			for _, d := range p.Devices {
				f := node.Function(d.PCI)
				if f == nil {
					continue
				}
				dev, err := exclusiveDevice(node, p, d, f, topo)
				if err != nil {
					problems = append(problems, err)
				}
				devs = append(devs, dev)
			}
		case config.Shared:
			for _, h := range p.HCAs {
				f := node.Function(h.PCI)
				if f == nil {
					continue
				}
				dev, err := sharedDevice(node, p, h, f, topo)
				if err != nil {
					problems = append(problems, err)
				}
				devs = append(devs, dev)
			}
		}
	}
	return devs, problems
}

// DeviceName is a device's name in the slice: a DNS label derived from its
// PCI address (0000:41:00.2 -> vf-0000-41-00-2).
func DeviceName(prefix, bdf string) string {
	r := strings.NewReplacer(":", "-", ".", "-")
	return prefix + "-" + strings.ToLower(r.Replace(bdf))
}

func exclusiveDevice(node *inventory.Node, p *deviceplugin.Pool, d deviceplugin.Device, f *inventory.Function, topo Topology) (resourceapi.Device, error) {
	prefix := "pf"
	if f.IsVF {
		prefix = "vf"
	}
	dev := resourceapi.Device{Name: DeviceName(prefix, f.BDF), Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}}
	rootErr := common(dev.Attributes, node, p, f, topo)
	pf := f
	if f.IsVF {
		dev.Attributes[AttrVFIndex] = intAttr(f.VFIndex)
		if pf = node.Function(f.PF); pf == nil {
			pf = &inventory.Function{BDF: f.PF}
		}
	}
	setString(dev.Attributes, AttrPFPCIAddress, pf.BDF)
	setString(dev.Attributes, AttrPFName, pf.Netdev())
	fw := ""
	if ib := f.RDMAName(); ib != "" {
		fw = topo.Firmware(ib)
	}
	if fw == "" && pf.RDMAName() != "" {
		fw = topo.Firmware(pf.RDMAName()) // a VF runs its PF's firmware
	}
	setString(dev.Attributes, AttrFirmware, fw)
	dev.Taints = taints(d.Health)
	return dev, rootErr
}

func sharedDevice(node *inventory.Node, p *deviceplugin.Pool, h deviceplugin.HCA, f *inventory.Function, topo Topology) (resourceapi.Device, error) {
	dev := resourceapi.Device{Name: DeviceName("hca", f.BDF), Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}}
	rootErr := common(dev.Attributes, node, p, f, topo)
	setString(dev.Attributes, AttrPFPCIAddress, f.BDF)
	setString(dev.Attributes, AttrPFName, f.Netdev())
	if ib := f.RDMAName(); ib != "" {
		setString(dev.Attributes, AttrFirmware, topo.Firmware(ib))
	}
	multiple := true
	one := resource.MustParse("1")
	dev.AllowMultipleAllocations = &multiple
	dev.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
		CapacitySlots: {
			Value:         *resource.NewQuantity(int64(p.Spec.RdmaHcaMax), resource.DecimalSI),
			RequestPolicy: &resourceapi.CapacityRequestPolicy{Default: &one, ValidValues: []resource.Quantity{one}},
		},
	}
	dev.Taints = taints(h.Health)
	return dev, rootErr
}

// common sets the attributes every device has. It sets all it can, and
// returns an error naming pool, device and attribute when the PCIe root
// cannot be determined (the device then has no AttrPCIeRoot).
func common(a map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, node *inventory.Node, p *deviceplugin.Pool, f *inventory.Function, topo Topology) error {
	root, rootErr := topo.PCIeRoot(f.BDF)
	if rootErr != nil {
		rootErr = fmt.Errorf("pool %s: device %s: published without %s: %w", p.Resource, f.BDF, AttrPCIeRoot, rootErr)
	} else {
		setString(a, AttrPCIeRoot, root)
	}
	// The standard helper refuses a negative node (no NUMA affinity): such
	// a device publishes no numaNode, so it never matches another by it.
	if numa, err := deviceattribute.GetNUMANodeAttribute(f.NUMA, deviceattribute.ScalarAttribute); err == nil {
		a[numa.Name] = numa.Value
	}
	// The standard pciBusID is the function's address as it is. Kubernetes'
	// helper (deviceattribute.GetPCIBusIDAttribute) gives the same value
	// for a 4-digit domain but compiles its format regexp on every call
	// (128 times per rescan of an 8 x 16 VF node), and refuses VMD's
	// 10000:01:00.0, which is as real.
	if sysfs.ValidBDF(f.BDF) {
		setString(a, AttrPCIBusID, f.BDF)
	}
	setString(a, AttrKind, p.Kind)
	setString(a, AttrLinkLayer, linkLayer(f.LinkLayer))
	setString(a, AttrRDMADevice, f.RDMAName())
	setString(a, AttrRDMANetnsMode, node.RDMANetnsMode)
	setString(a, AttrDriver, f.Driver)
	setString(a, AttrPCIVendor, f.Vendor)
	setString(a, AttrPCIDevice, f.Device)
	setString(a, AttrMultusDeviceID, f.BDF)
	setString(a, AttrMultusResourceName, p.Resource)
	ibAttrs(a, f)
	return rootErr
}

func linkLayer(ll string) string {
	switch ll {
	case inventory.LinkEthernet:
		return "ethernet"
	case inventory.LinkInfiniBand:
		return "infiniband"
	}
	return strings.ToLower(ll)
}

func taints(health string) []resourceapi.DeviceTaint {
	if health == deviceplugin.Healthy {
		return nil
	}
	return []resourceapi.DeviceTaint{{Key: TaintUnhealthy, Effect: resourceapi.DeviceTaintEffectNoSchedule}}
}

func setString(a map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, name resourceapi.QualifiedName, v string) {
	if v == "" {
		return
	}
	a[name] = resourceapi.DeviceAttribute{StringValue: &v}
}

func intAttr(v int) resourceapi.DeviceAttribute {
	i := int64(v)
	return resourceapi.DeviceAttribute{IntValue: &i}
}

// Slices splits devices into ResourceSlice-sized chunks (MaxDevicesPerSlice),
// keeping their order. No devices give one empty slice: an empty pool tells
// the scheduler the driver runs and has nothing, unlike no pool at all.
func Slices(devices []resourceapi.Device) [][]resourceapi.Device {
	if len(devices) == 0 {
		return [][]resourceapi.Device{nil}
	}
	var out [][]resourceapi.Device
	for len(devices) > 0 {
		n := min(len(devices), MaxDevicesPerSlice)
		out = append(out, devices[:n])
		devices = devices[n:]
	}
	return out
}
