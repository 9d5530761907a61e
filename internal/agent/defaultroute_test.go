package agent

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rdmanet/rdmanet/internal/deviceplugin/config"
	"github.com/rdmanet/rdmanet/internal/dra"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

// TestDefaultRoutePFUnderBondNotHandedOut (issue 13, defect 16): the seed
// shared pool selects ens8f0np0; when the node's default route is on a bond
// (or a VLAN over it) whose slave is that PF, the pool hands out nothing
// and says why. Before the fix the route's device (bond0) matched no
// function and the PF's 63 slots were advertised.
func TestDefaultRoutePFUnderBondNotHandedOut(t *testing.T) {
	tests := []struct {
		name   string
		uppers []sysfsfixture.Upper
		route  string
		want   string
	}{
		{name: "bond over the PF", route: "bond0",
			uppers: []sysfsfixture.Upper{{Name: "bond0", Kind: sysfsfixture.KindBond, Lowers: []string{"ens8f0np0", "ens1f0"}}},
			want:   "0000:81:00.0 (ens8f0np0, under bond0) (never handed out)"},
		{name: "VLAN over a bond over the PF", route: "bond0.42",
			uppers: []sysfsfixture.Upper{{Name: "bond0", Kind: sysfsfixture.KindBond, Lowers: []string{"ens8f0np0"}},
				{Name: "bond0.42", Kind: sysfsfixture.KindVLAN, Lowers: []string{"bond0"}}},
			want: "0000:81:00.0 (ens8f0np0, under bond0.42) (never handed out)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			s, err := sysfsfixture.NewStandard(root, sysfsfixture.StandardOptions{RoCEVFs: 1, IBVFs: 1})
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range tc.uppers {
				if err := s.AddUpper(u); err != nil {
					t.Fatal(err)
				}
			}
			specs, err := LoadConfig([]string{filepath.Join("..", "..", "examples", "agent", "nicclusterpolicy.yaml")})
			if err != nil {
				t.Fatal(err)
			}
			snap, err := Discover(Options{SysfsRoot: root, Probe: staticProbe{links: []string{tc.route}, mode: "shared"}}, specs)
			if err != nil {
				t.Fatal(err)
			}
			if len(snap.Pools) != 1 {
				t.Fatalf("pools = %d", len(snap.Pools))
			}
			p := snap.Pools[0]
			if len(p.HCAs) != 0 || !strings.Contains(strings.Join(p.Problems, "\n"), "0000:81:00.0 (ens8f0np0) carries the node's default route; never handed out") {
				t.Fatalf("shared pool over the default-route PF: HCAs %+v, problems %q", p.HCAs, p.Problems)
			}
			var text bytes.Buffer
			if err := NewReport(snap).WriteText(&text); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(text.String(), tc.want) {
				t.Errorf("text report lacks %q:\n%s", tc.want, text.String())
			}
		})
	}
}

// TestDefaultRouteNICNeverHandedOut (issue 27): in every sysfs layout real
// machines have, the function whose netdev carries the node's default route
// is in no pool and no DRA slice, whichever selector matches it, while the
// layout's other functions are still handed out. Before the fix, a cloud
// VM's virtio NIC (eth0 below virtio2) and a PF whose mlx5 sub-function
// carries the route were handed out.
func TestDefaultRouteNICNeverHandedOut(t *testing.T) {
	const (
		vmNICs       = `{"resourceList":[{"resourcePrefix":"example.com","resourceName":"vm_nics","selectors":[{"vendors":["1af4"]}]}]}`
		vmByAddress  = `{"resourceList":[{"resourcePrefix":"example.com","resourceName":"vm_nics","selectors":[{"pciAddresses":["0000:00:03.0","0000:00:04.0"]}]}]}`
		vmByDriver   = `{"resourceList":[{"resourcePrefix":"example.com","resourceName":"vm_nics","selectors":[{"drivers":["virtio-pci"]}]}]}`
		mlxExclusive = `{"resourceList":[{"resourcePrefix":"example.com","resourceName":"cx7","selectors":[{"vendors":["15b3"],"isRdma":true}]}]}`
		mlxShared    = `{"configList":[{"resourceName":"cx7_shared","rdmaHcaMax":8,"selectors":{"vendors":["15b3"]}}]}`
		seedShared   = `{"configList":[{"resourceName":"rdma_shared_device_eth","rdmaHcaMax":63,"selectors":{"ifNames":["ens8f0np0"]}}]}`
		mgmtByVendor = `{"resourceList":[{"resourcePrefix":"example.com","resourceName":"cx","selectors":[{"vendors":["15b3"],"isRdma":true}]}]}`
	)
	cloudVM := func(nics int) func(t *testing.T, root string) string {
		return func(t *testing.T, root string) string {
			vm, err := sysfsfixture.NewCloudVM(root, sysfsfixture.CloudVMOptions{NICs: nics})
			if err != nil {
				t.Fatal(err)
			}
			return vm.DefaultRouteLink
		}
	}
	sfNode := func(t *testing.T, root string) string {
		if _, err := sysfsfixture.NewMlx5SFNode(root); err != nil {
			t.Fatal(err)
		}
		return "enp59s0f0s1"
	}
	tests := []struct {
		name     string
		layout   func(t *testing.T, root string) (route string)
		mode     string
		cfg      string
		withheld string   // the default route's function
		label    string   // how the pool's problem names its netdev
		handed   []string // functions the pool still hands out
	}{
		{name: "cloud VM, virtio NICs by vendor", layout: cloudVM(2), mode: "shared", cfg: vmNICs,
			withheld: "0000:00:03.0", label: "eth0", handed: []string{"0000:00:04.0"}},
		{name: "cloud VM, by PCI address", layout: cloudVM(2), mode: "shared", cfg: vmByAddress,
			withheld: "0000:00:03.0", label: "eth0", handed: []string{"0000:00:04.0"}},
		{name: "cloud VM with one NIC, by driver", layout: cloudVM(1), mode: "exclusive", cfg: vmByDriver,
			withheld: "0000:00:03.0", label: "eth0"},
		{name: "mlx5 SF carries the route, exclusive pool of VF-less PFs", layout: sfNode, mode: "exclusive", cfg: mlxExclusive,
			withheld: "0000:3b:00.0", label: "enp59s0f0s1 of mlx5_core.sf.2", handed: []string{"0000:3b:00.1"}},
		{name: "mlx5 SF carries the route, shared pool", layout: sfNode, mode: "shared", cfg: mlxShared,
			withheld: "0000:3b:00.0", label: "enp59s0f0s1 of mlx5_core.sf.2", handed: []string{"0000:3b:00.1"}},
		{name: "SF of the seeds' shared HCA carries the route", mode: "shared", cfg: seedShared,
			layout: func(t *testing.T, root string) string {
				s, err := sysfsfixture.NewStandard(root, sysfsfixture.StandardOptions{RoCEVFs: 1, IBVFs: 1})
				if err != nil {
					t.Fatal(err)
				}
				sf, err := s.AddSF(s.Shared, sysfsfixture.SF{Index: 0, SFNum: 88})
				if err != nil {
					t.Fatal(err)
				}
				return sf.Netdev
			},
			withheld: "0000:81:00.0", label: "ens8f0s88 of mlx5_core.sf.0"},
		{name: "standard node, route on the management PF", mode: "exclusive", cfg: mgmtByVendor,
			layout: func(t *testing.T, root string) string {
				s, err := sysfsfixture.NewStandard(root, sysfsfixture.StandardOptions{RoCEVFs: 1, IBVFs: 1})
				if err != nil {
					t.Fatal(err)
				}
				return s.MgmtLink
			},
			withheld: "0000:03:00.0", label: "eno1", handed: []string{"0000:41:00.2", "0000:81:00.0", "0000:c1:00.2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			route := tc.layout(t, root)
			specs, err := config.Parse("pools.json", []byte(tc.cfg))
			if err != nil {
				t.Fatal(err)
			}
			snap, err := Discover(Options{SysfsRoot: root, Probe: staticProbe{links: []string{route}, mode: tc.mode}}, specs)
			if err != nil {
				t.Fatal(err)
			}
			if len(snap.Pools) != 1 {
				t.Fatalf("pools = %d", len(snap.Pools))
			}
			p := snap.Pools[0]
			var handed []string
			for _, d := range p.Devices {
				if d.PCI != "" {
					handed = append(handed, d.PCI)
				}
			}
			for _, h := range p.HCAs {
				handed = append(handed, h.PCI)
			}
			if slices.Contains(handed, tc.withheld) {
				t.Fatalf("pool %s hands out %s, which carries the default route (%s)", p.Resource, tc.withheld, route)
			}
			for _, want := range tc.handed {
				if !slices.Contains(handed, want) {
					t.Errorf("pool %s does not hand out %s (hands out %v); only the default route's function is withheld", p.Resource, want, handed)
				}
			}
			problem := tc.withheld + " (" + tc.label + ") carries the node's default route; never handed out"
			if !slices.Contains(p.Problems, problem) {
				t.Errorf("pool problems %q lack %q", p.Problems, problem)
			}
			var text bytes.Buffer
			if err := NewReport(snap).WriteText(&text); err != nil {
				t.Fatal(err)
			}
			if want := "default route on: " + tc.withheld + " (" + tc.label + ") (never handed out)"; !strings.Contains(text.String(), want) {
				t.Errorf("text report lacks %q:\n%s", want, text.String())
			}

			// DRA publishes the pools' devices: the same function is in no slice
			devs, problems := dra.Devices(snap.Node, snap.Pools, dra.NewSysfsTopology(root))
			if problems != nil {
				t.Fatal(problems)
			}
			var published []string
			for _, d := range devs {
				if id := d.Attributes[dra.AttrMultusDeviceID].StringValue; id != nil {
					published = append(published, *id)
				}
			}
			if slices.Contains(published, tc.withheld) {
				t.Fatalf("DRA publishes %s, which carries the default route", tc.withheld)
			}
			if p.Advertised && len(published) != len(tc.handed) {
				t.Errorf("DRA publishes %v, want %v", published, tc.handed)
			}
		})
	}
}

// TestCloudVMReportsNUMAUnknown (issue 27): a cloud VM's functions report
// numa_node -1; the pool hands its second NIC out with no NUMA affinity and
// the report says "unknown" rather than -1.
func TestCloudVMReportsNUMAUnknown(t *testing.T) {
	root := t.TempDir()
	if _, err := sysfsfixture.NewCloudVM(root, sysfsfixture.CloudVMOptions{NICs: 2}); err != nil {
		t.Fatal(err)
	}
	specs, err := config.Parse("pools.json", []byte(`{"resourceList":[{"resourcePrefix":"example.com","resourceName":"vm_nics","selectors":[{"vendors":["1af4"]}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := Discover(Options{SysfsRoot: root, Probe: staticProbe{links: []string{"eth0"}, mode: "shared"}}, specs)
	if err != nil {
		t.Fatal(err)
	}
	p := snap.Pools[0]
	if len(p.Devices) != 1 || p.Devices[0].NUMA != -1 || p.Devices[0].Netdev != "eth1" {
		t.Fatalf("pool devices = %+v, want eth1's function with NUMA -1", p.Devices)
	}
	var text bytes.Buffer
	if err := NewReport(snap).WriteText(&text); err != nil {
		t.Fatal(err)
	}
	var row string
	for _, l := range strings.Split(text.String(), "\n") {
		if strings.Contains(l, "0000:00:04.0") {
			row = l
		}
	}
	if !strings.Contains(row, " unknown ") || strings.Contains(row, "-1") {
		t.Fatalf("device row %q: want NUMA unknown, not -1\n%s", row, text.String())
	}
}
