package dra

import (
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/rdmanet/rdmanet/internal/inventory"
)

// InfiniBand attributes, published for devices whose port is InfiniBand
// (linkLayer "infiniband") next to the common ones.
const (
	// AttrNodeGUID is the RDMA device's node GUID in ip-link form
	// (0c:42:a1:03:00:65:8e:81); absent while a VF's GUID is unset (zero).
	AttrNodeGUID resourceapi.QualifiedName = "nodeGUID"
	// AttrPortGUID is port 1's GUID (GID 0's interface ID), same form.
	AttrPortGUID resourceapi.QualifiedName = "portGUID"
	// AttrPKeys is the port's PKey table as the SM set it, comma-separated
	// with the membership bit (0xffff,0x8005): a claim selects a device in
	// a partition with CEL, e.g. .pkeys.contains("0x8005").
	AttrPKeys resourceapi.QualifiedName = "pkeys"
)

// ibAttrs sets the InfiniBand attributes of f (nothing on Ethernet).
func ibAttrs(a map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, f *inventory.Function) {
	if f.LinkLayer != inventory.LinkInfiniBand || len(f.RDMA) == 0 {
		return
	}
	if g := f.RDMA[0].NodeGUID; !inventory.ZeroGUID(g) {
		setString(a, AttrNodeGUID, inventory.LinkGUID(g))
	}
	ib := f.IBPortOf()
	if ib == nil {
		return
	}
	if !inventory.ZeroGUID(ib.PortGUID) {
		setString(a, AttrPortGUID, ib.PortGUID)
	}
	var ks []string
	for _, k := range ib.PKeys {
		ks = append(ks, inventory.FormatPKey(k))
	}
	setString(a, AttrPKeys, strings.Join(ks, ","))
}
