package deviceplugin

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/rdmanet/rdmanet/internal/inventory"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

// TestLinkTypesOnIBNode runs the linkTypes selector against the IB node:
// "infiniband" selects the IB VFs (with and without a netdev), "ether"
// selects none of them, and shared pools pick the IB port by link type.
func TestLinkTypesOnIBNode(t *testing.T) {
	root := filepath.Join(t.TempDir(), "sys")
	n, err := sysfsfixture.NewIBNode(root, sysfsfixture.IBNodeOptions{VFs: 2, IBOnlyVFs: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		mode string
		cfg  string
		want []string // devices (exclusive) or HCAs (shared)
	}{
		{name: "infiniband VFs of every PF, and the IB PF without VFs (as upstream)", mode: "exclusive",
			cfg:  `{"resourceList":[{"resourceName":"ib","selectors":[{"vendors":["15b3"],"linkTypes":["infiniband"],"isRdma":true}]}]}`,
			want: append(append([]string{n.Port1.BDF}, n.Port0VFs...), n.IBOnlyVFs...)},
		{name: "infiniband VFs of one PF", mode: "exclusive",
			cfg:  `{"resourceList":[{"resourceName":"ib","selectors":[{"rootDevices":["0000:c1:00.0"],"linkTypes":["infiniband"]}]}]}`,
			want: n.Port0VFs},
		{name: "ether selects no IB function", mode: "exclusive",
			cfg: `{"resourceList":[{"resourceName":"eth","selectors":[{"vendors":["15b3"],"linkTypes":["ether"]}]}]}`},
		{name: "shared IB port by link type", mode: "shared",
			cfg:  `{"configList":[{"resourceName":"ib_shared","rdmaHcaMax":8,"selectors":{"ifNames":["ibp193s0f1","eno1"],"linkTypes":["infiniband"]}}]}`,
			want: []string{n.Port1.BDF}},
		{name: "shared ether pool leaves the IB port out", mode: "shared",
			cfg: `{"configList":[{"resourceName":"eth_shared","rdmaHcaMax":8,"selectors":{"ifNames":["ibp193s0f1"],"linkTypes":["ether"]}}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node, err := inventory.Discover(inventory.Options{SysfsRoot: root, DefaultRouteLinks: []string{"eno1"}, NetnsModeFlag: tc.mode})
			if err != nil {
				t.Fatal(err)
			}
			pools, err := Build(node, parse(t, tc.cfg))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range pools {
				for _, h := range p.HCAs {
					got = append(got, h.PCI)
					if h.LinkLayer != inventory.LinkInfiniBand {
						t.Errorf("HCA %s link layer %q", h.PCI, h.LinkLayer)
					}
				}
				if len(p.HCAs) > 0 {
					continue // shared pools' devices are slots of their HCAs
				}
				got = append(got, ids(p)...)
				for _, d := range p.Devices {
					if d.LinkLayer != inventory.LinkInfiniBand {
						t.Errorf("device %s link layer %q", d.ID, d.LinkLayer)
					}
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("selected %v, want %v", got, tc.want)
			}
		})
	}
}
