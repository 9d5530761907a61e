// Package dragpu is a test-only stand-in for NVIDIA's DRA GPU driver
// (driver gpu.nvidia.com): it finds the GPUs of a fixture node's sysfs
// (internal/sysfsfixture) and publishes them as ResourceSlices the way that
// driver does, with its DeviceClass, so tests can run the real
// kube-scheduler on claims that pair GPUs with rdmanet's NICs.
//
// What matters for alignment is the standard attribute
// resource.kubernetes.io/pcieRoot: it is computed exactly as rdmanet's
// driver computes it (internal/dra SysfsTopology), with
// k8s.io/dynamic-resource-allocation's
// deviceattribute.GetPCIeRootAttributeByPCIBusID over the same sysfs root,
// which is also the helper NVIDIA's driver uses. The other attributes
// mirror the names NVIDIA's driver publishes (type, uuid, productName,
// architecture, index, minor, ...) with fixture values.
//
// Nothing here is shipped in a binary.
package dragpu

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/deviceattribute"
)

// DriverName is NVIDIA's DRA GPU driver name.
const DriverName = "gpu.nvidia.com"

// ClassName is the DeviceClass NVIDIA's driver installs for whole GPUs.
const ClassName = "gpu.nvidia.com"

// Attribute names in the driver's domain, as NVIDIA's driver spells them.
const (
	AttrType         resourceapi.QualifiedName = "type"
	AttrUUID         resourceapi.QualifiedName = "uuid"
	AttrProductName  resourceapi.QualifiedName = "productName"
	AttrArchitecture resourceapi.QualifiedName = "architecture"
	AttrBrand        resourceapi.QualifiedName = "brand"
	AttrIndex        resourceapi.QualifiedName = "index"
	AttrMinor        resourceapi.QualifiedName = "minor"
)

// GPU is one GPU found in sysfs.
type GPU struct {
	Name     string // device name in the slice: gpu-<index>
	BDF      string // PCI address
	PCIeRoot string // standard resource.kubernetes.io/pcieRoot
	Index    int    // by PCI address, as nvidia-smi numbers them
}

// Discover finds the NVIDIA GPUs (vendor 0x10de, display controller class
// 0x03xxxx) under sysfsRoot/bus/pci/devices, ordered by PCI address, and
// resolves each one's PCIe root with the standard helper over sysfsRoot.
func Discover(sysfsRoot string) ([]GPU, error) {
	entries, err := os.ReadDir(filepath.Join(sysfsRoot, "bus", "pci", "devices"))
	if err != nil {
		return nil, fmt.Errorf("dragpu: %w", err)
	}
	var bdfs []string
	for _, e := range entries {
		dir := filepath.Join(sysfsRoot, "bus", "pci", "devices", e.Name())
		vendor, _ := os.ReadFile(filepath.Join(dir, "vendor"))
		class, _ := os.ReadFile(filepath.Join(dir, "class"))
		if strings.TrimSpace(string(vendor)) == "0x10de" && strings.HasPrefix(strings.TrimSpace(string(class)), "0x03") {
			bdfs = append(bdfs, e.Name())
		}
	}
	sort.Strings(bdfs)
	var out []GPU
	for i, bdf := range bdfs {
		a, err := deviceattribute.GetPCIeRootAttributeByPCIBusID(bdf, deviceattribute.WithFSFromRoot(sysfsRoot))
		if err != nil {
			return nil, fmt.Errorf("dragpu: GPU %s: pcieRoot: %w", bdf, err)
		}
		if a.Value.StringValue == nil {
			return nil, fmt.Errorf("dragpu: GPU %s: no pcieRoot", bdf)
		}
		out = append(out, GPU{Name: fmt.Sprintf("gpu-%d", i), BDF: bdf, PCIeRoot: *a.Value.StringValue, Index: i})
	}
	return out, nil
}

// Devices turns GPUs into DRA devices as NVIDIA's driver publishes whole
// GPUs (fixture values: H100 80GB, Hopper). The uuid is derived from node
// and address, so it is stable and unique across fixture nodes.
func Devices(node string, gpus []GPU) []resourceapi.Device {
	var out []resourceapi.Device
	for _, g := range gpus {
		sum := sha256.Sum256([]byte(node + "/" + g.BDF))
		uuid := fmt.Sprintf("GPU-%x-%x-%x-%x-%x", sum[0:4], sum[4:6], sum[6:8], sum[8:10], sum[10:16])
		bus, _ := deviceattribute.GetPCIBusIDAttribute(g.BDF)
		d := resourceapi.Device{
			Name: g.Name,
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				AttrType:         str("gpu"),
				AttrUUID:         str(uuid),
				AttrProductName:  str("NVIDIA H100 80GB HBM3"),
				AttrArchitecture: str("Hopper"),
				AttrBrand:        str("Nvidia"),
				AttrIndex:        integer(g.Index),
				AttrMinor:        integer(g.Index),
				deviceattribute.StandardDeviceAttributePCIeRoot: str(g.PCIeRoot),
				bus.Name: bus.Value,
			},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"memory": {Value: resource.MustParse("80Gi")},
			},
		}
		out = append(out, d)
	}
	return out
}

// Publish discovers the GPUs of the node's sysfs and creates the node's
// ResourceSlice of DriverName (one pool named after the node, owned by
// the Node like a kubelet plugin's slices). It returns the GPUs published.
func Publish(ctx context.Context, c kubernetes.Interface, node, sysfsRoot string) ([]GPU, error) {
	gpus, err := Discover(sysfsRoot)
	if err != nil {
		return nil, err
	}
	n, err := c.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("dragpu: node %s: %w", node, err)
	}
	slice := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:            node + "-" + strings.ReplaceAll(DriverName, ".", "-"),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node, UID: n.UID}},
		},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   DriverName,
			NodeName: &node,
			Pool:     resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			Devices:  Devices(node, gpus),
		},
	}
	if _, err := c.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
		return nil, fmt.Errorf("dragpu: publish %s: %w", node, err)
	}
	return gpus, nil
}

// DeviceClass is the class NVIDIA's driver installs for whole GPUs.
func DeviceClass() *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: ClassName},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: `device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "gpu"`,
		}}}},
	}
}

func str(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: &s} }

func integer(i int) resourceapi.DeviceAttribute {
	v := int64(i)
	return resourceapi.DeviceAttribute{IntValue: &v}
}
