package inventory_test

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/rdmanet/rdmanet/internal/inventory"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

// TestDiscoverIBPorts: InfiniBand ports carry what the subnet manager gave
// them (LID, SM LID, the PKey table without empty slots) and their port
// GUID; Ethernet ports carry none; a fabric without SM shows LID 0.
func TestDiscoverIBPorts(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts sysfsfixture.IBNodeOptions
		bdf  func(*sysfsfixture.IBNode) string
		want *inventory.IBPort
	}{
		{name: "shared IB port", bdf: func(n *sysfsfixture.IBNode) string { return n.Port1.BDF },
			want: &inventory.IBPort{LID: 0x12, SMLID: 1, PortGUID: "0c:42:a1:03:00:65:8e:82", PKeys: []uint16{0xffff, 0x8005, 0x8006}, Read: true}},
		{name: "IB VF shares its PF's LID, zero GUID", bdf: func(n *sysfsfixture.IBNode) string { return n.Port0VFs[1] },
			want: &inventory.IBPort{LID: 0x11, SMLID: 1, PortGUID: "00:00:00:00:00:00:00:00", PKeys: []uint16{0xffff, 0x8005}, Read: true}},
		{name: "IB-only PF", bdf: func(n *sysfsfixture.IBNode) string { return n.IBOnly.BDF },
			want: &inventory.IBPort{LID: 0x13, SMLID: 1, PortGUID: "0c:42:a1:03:00:65:8e:83", PKeys: []uint16{0xffff, 0x8005}, Read: true}},
		{name: "no subnet manager", opts: sysfsfixture.IBNodeOptions{NoSM: true}, bdf: func(n *sysfsfixture.IBNode) string { return n.Port1.BDF },
			want: &inventory.IBPort{PortGUID: "0c:42:a1:03:00:65:8e:82", PKeys: []uint16{0xffff, 0x8005, 0x8006}, Read: true}},
		{name: "Ethernet port has none", bdf: func(n *sysfsfixture.IBNode) string { return n.Mgmt.BDF }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "sys")
			n, err := sysfsfixture.NewIBNode(root, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			node, err := inventory.Discover(inventory.Options{SysfsRoot: root})
			if err != nil {
				t.Fatal(err)
			}
			f := node.Function(tc.bdf(n))
			if f == nil {
				t.Fatalf("function %s not discovered", tc.bdf(n))
			}
			if got := f.IBPortOf(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("IB port\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestIBPortHasPKey(t *testing.T) {
	p := &inventory.IBPort{PKeys: []uint16{0xffff, 0x0005, 0x8006}}
	for _, tc := range []struct {
		name         string
		pkey         uint16
		member, full bool
	}{
		{name: "default partition", pkey: 0x7fff, member: true, full: true},
		{name: "full member, asked with the bit", pkey: 0x8006, member: true, full: true},
		{name: "full member, asked without", pkey: 0x0006, member: true, full: true},
		{name: "limited member", pkey: 0x8005, member: true},
		{name: "not a member", pkey: 0x8007},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, f := p.HasPKey(tc.pkey)
			if m != tc.member || f != tc.full {
				t.Errorf("HasPKey(%#04x) = %v, %v; want %v, %v", tc.pkey, m, f, tc.member, tc.full)
			}
		})
	}
}
