package deviceplugin

import (
	"errors"
	"strings"
	"testing"

	"github.com/rdmanet/rdmanet/internal/deviceplugin/config"
	"github.com/rdmanet/rdmanet/internal/inventory"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

func discover(t *testing.T, mode string) (*sysfsfixture.Standard, *inventory.Node) {
	t.Helper()
	root := t.TempDir()
	s, err := sysfsfixture.NewStandard(root, sysfsfixture.StandardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node, err := inventory.Discover(inventory.Options{SysfsRoot: root, DefaultRouteLinks: []string{"eno1"}, NetnsModeFlag: mode})
	if err != nil {
		t.Fatal(err)
	}
	return s, node
}

func parse(t *testing.T, js string) []config.Pool {
	t.Helper()
	p, err := config.Parse("test.json", []byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func ids(p *Pool) []string {
	var out []string
	for _, d := range p.Devices {
		out = append(out, d.ID)
	}
	return out
}

func TestExclusiveSelectors(t *testing.T) {
	s, node := discover(t, "exclusive")
	vf := func(pf string, i int) string { return sysfsfixture.VFBDF(pf, i) }
	tests := []struct {
		name     string
		selector string
		want     []string // nil: check count only
		count    int
	}{
		{"seed: vendor + pfName + isRdma", `{"vendors":["15b3"],"pfNames":["enp65s0f0np0"],"isRdma":true}`, nil, 16},
		{"pfName VF range", `{"pfNames":["enp65s0f0np0#0-1,7"]}`, []string{vf(s.RoCE.BDF, 0), vf(s.RoCE.BDF, 1), vf(s.RoCE.BDF, 7)}, 3},
		{"devices (VF device id) covers both PFs' VFs", `{"devices":["101e"]}`, nil, 24},
		{"rootDevices", `{"rootDevices":["0000:c1:00.0"]}`, nil, 8},
		{"linkTypes infiniband", `{"linkTypes":["infiniband"],"devices":["101e"]}`, nil, 8},
		{"linkTypes ether on VFs", `{"linkTypes":["ether"],"devices":["101e"]}`, nil, 16},
		{"pciAddresses", `{"pciAddresses":["0000:41:00.3"]}`, []string{"0000:41:00.3"}, 1},
		{"drivers: i40e NIC without VFs is a device", `{"drivers":["i40e"]}`, []string{s.Plain.BDF}, 1},
		{"isRdma excludes the X710", `{"drivers":["i40e"],"isRdma":true}`, nil, 0},
		{"PF with VFs enabled is never a device", `{"pciAddresses":["0000:41:00.0"]}`, nil, 0},
		{"VF-less RoCE PF is a device", `{"pfNames":["ens8f0np0"]}`, []string{s.Shared.BDF}, 1},
		{"vendor only: everything but the default-route NIC and PFs with VFs", `{"vendors":["15b3"]}`, nil, 25},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pools, err := Build(node, parse(t, `{"resourceList":[{"resourceName":"r","selectors":`+tc.selector+`}]}`))
			if err != nil {
				t.Fatal(err)
			}
			got := ids(pools[0])
			if len(got) != tc.count {
				t.Fatalf("selected %d devices %v, want %d", len(got), got, tc.count)
			}
			if tc.want != nil && strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("selected %v, want %v", got, tc.want)
			}
			for _, id := range got {
				if id == s.Mgmt.BDF {
					t.Fatal("default-route NIC handed out")
				}
			}
		})
	}
}

func TestListSelectorsAreORed(t *testing.T) {
	_, node := discover(t, "exclusive")
	pools, err := Build(node, parse(t, `{"resourceList":[{"resourceName":"r","selectors":[{"pfNames":["enp65s0f0np0#0"]},{"rootDevices":["0000:c1:00.0"]}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(pools[0].Devices); n != 9 {
		t.Fatalf("devices = %d, want 1 + 8", n)
	}
}

func TestDefaultRouteNICIsNeverHandedOut(t *testing.T) {
	s, node := discover(t, "shared")
	pools, err := Build(node, parse(t, `{"configList":[{"resourceName":"s","rdmaHcaMax":4,"selectors":{"deviceIDs":["1017"]}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	p := pools[0]
	if len(p.HCAs) != 0 || p.Advertised {
		t.Fatalf("CX-5 carrying the default route was selected: %+v", p.HCAs)
	}
	if !strings.Contains(strings.Join(p.Problems, "\n"), s.Mgmt.BDF+" (eno1) carries the node's default route") {
		t.Fatalf("problems %v must say why", p.Problems)
	}
}

func TestSharedPool(t *testing.T) {
	s, node := discover(t, "shared")
	pools, err := Build(node, parse(t, `{"configList":[{"resourceName":"rdma_shared_device_eth","rdmaHcaMax":63,"selectors":{"ifNames":["ens8f0np0"]}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	p := pools[0]
	if !p.Advertised || len(p.Devices) != 63 || len(p.HCAs) != 1 || p.HCAs[0].PCI != s.Shared.BDF || p.HCAs[0].RDMA != "mlx5_2" {
		t.Fatalf("pool = %+v", p)
	}
	if p.Devices[0].NUMA != 1 || p.Devices[0].Health != Healthy {
		t.Fatalf("slot = %+v", p.Devices[0])
	}
}

func TestOverlapIsRefused(t *testing.T) {
	_, node := discover(t, "exclusive")
	tests := []struct {
		name string
		cfg  string
		want []string
	}{
		{"VF in two exclusive pools", `{"resourceList":[
			{"resourceName":"a","selectors":{"pfNames":["enp65s0f0np0#0-3"]}},
			{"resourceName":"b","selectors":{"pciAddresses":["0000:41:00.5"]}}]}`,
			[]string{"intel.com/a", "intel.com/b", "0000:41:00.5"}},
		{"shared pool over a PF whose VFs are exclusive", `{"resourceList":[{"resourceName":"a","selectors":{"pfNames":["enp65s0f0np0"]}}],
			"configList":[{"resourceName":"s","rdmaHcaMax":4,"selectors":{"ifNames":["enp65s0f0np0"]}}]}`,
			[]string{"intel.com/a", "rdma/s", "0000:41:00.0", "hands out its VF"}},
		{"same VF-less PF in both kinds", `{"resourceList":[{"resourceName":"a","selectors":{"pfNames":["ens8f0np0"]}}],
			"configList":[{"resourceName":"s","rdmaHcaMax":4,"selectors":{"ifNames":["ens8f0np0"]}}]}`,
			[]string{"intel.com/a", "rdma/s", "0000:81:00.0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Build(node, parse(t, tc.cfg))
			var oe *OverlapError
			if !errors.As(err, &oe) {
				t.Fatalf("err = %v, want OverlapError", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	// disjoint VF ranges of one PF are fine
	if _, err := Build(node, parse(t, `{"resourceList":[
		{"resourceName":"a","selectors":{"pfNames":["enp65s0f0np0#0-7"]}},
		{"resourceName":"b","selectors":{"pfNames":["enp65s0f0np0#8-15"]}}]}`)); err != nil {
		t.Fatalf("disjoint ranges refused: %v", err)
	}
}

func TestNetnsModeGating(t *testing.T) {
	cfg := `{"resourceList":[{"resourceName":"x","selectors":{"pfNames":["enp65s0f0np0"],"isRdma":true}}],
		"configList":[{"resourceName":"s","rdmaHcaMax":4,"selectors":{"ifNames":["ens8f0np0"]}}]}`
	tests := []struct {
		name              string
		mode              string
		exclusive, shared bool
		exclusiveProblem  string
		sharedProblem     string
	}{
		{"exclusive mode", "exclusive", true, false, "", "rdma system set netns shared"},
		{"shared mode", "shared", false, true, "rdma system set netns exclusive", ""},
		{"unknown mode advertises with a warning", "", true, true, "unknown", "unknown"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, node := discover(t, tc.mode)
			pools, err := Build(node, parse(t, cfg))
			if err != nil {
				t.Fatal(err)
			}
			ex, sh := pools[0], pools[1]
			if ex.Advertised != tc.exclusive || sh.Advertised != tc.shared {
				t.Fatalf("advertised exclusive=%v shared=%v", ex.Advertised, sh.Advertised)
			}
			check := func(p *Pool, want string) {
				got := strings.Join(p.Problems, "\n")
				if want == "" && got != "" || !strings.Contains(got, want) {
					t.Errorf("%s problems %q, want %q", p.Resource, got, want)
				}
			}
			check(ex, tc.exclusiveProblem)
			check(sh, tc.sharedProblem)
		})
	}
}

func TestEmptyPoolIsNotAdvertised(t *testing.T) {
	_, node := discover(t, "exclusive")
	pools, err := Build(node, parse(t, `{"resourceList":[{"resourceName":"r","selectors":{"pfNames":["nonexistent0"]}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if pools[0].Advertised || !strings.Contains(pools[0].Problems[0], "match no device") {
		t.Fatalf("pool = %+v", pools[0])
	}
}

func TestHealth(t *testing.T) {
	tests := []struct {
		name   string
		break_ func(s *sysfsfixture.Standard) error
		vf     int
		reason string
	}{
		{"PF link down", func(s *sysfsfixture.Standard) error { return s.SetOperState("enp65s0f0np0", "down") }, 5, "PF enp65s0f0np0 link is down"},
		{"VF link down", func(s *sysfsfixture.Standard) error { return s.SetOperState("enp65s0f0v2", "down") }, 2, "netdev enp65s0f0v2 link is down"},
		{"RDMA device gone", func(s *sysfsfixture.Standard) error { return s.RemoveRDMA(sysfsfixture.VFBDF(s.RoCE.BDF, 4)) }, 4, "RDMA device disappeared"},
		{"RDMA port down", func(s *sysfsfixture.Standard) error { return s.SetPortState("mlx5_10", "1: DOWN") }, 6, "RDMA port mlx5_10/1 is DOWN"},
		{"RDMA port INIT", func(s *sysfsfixture.Standard) error { return s.SetPortState("mlx5_7", "2: INIT") }, 3, "RDMA port mlx5_7/1 is INIT"},
		{"RDMA port ARMED", func(s *sysfsfixture.Standard) error { return s.SetPortState("mlx5_8", "3: ARMED") }, 4, "RDMA port mlx5_8/1 is ARMED"},
		{"RDMA port ACTIVE_DEFER is healthy", func(s *sysfsfixture.Standard) error { return s.SetPortState("mlx5_8", "5: ACTIVE_DEFER") }, -1, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			s, err := sysfsfixture.NewStandard(root, sysfsfixture.StandardOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.break_(s); err != nil {
				t.Fatal(err)
			}
			node, err := inventory.Discover(inventory.Options{SysfsRoot: root, NetnsModeFlag: "exclusive"})
			if err != nil {
				t.Fatal(err)
			}
			pools, err := Build(node, parse(t, `{"resourceList":[{"resourceName":"r","selectors":{"pfNames":["enp65s0f0np0"],"isRdma":true}}]}`))
			if err != nil {
				t.Fatal(err)
			}
			want := ""
			if tc.vf >= 0 {
				want = sysfsfixture.VFBDF(s.RoCE.BDF, tc.vf)
			}
			for _, d := range pools[0].Devices {
				bad := d.Health != Healthy
				if d.ID == want && (!bad || d.Reason != tc.reason) {
					t.Errorf("%s: health %s (%s), want Unhealthy (%s)", d.ID, d.Health, d.Reason, tc.reason)
				}
				if tc.name != "PF link down" && d.ID != want && bad {
					t.Errorf("%s unexpectedly %s (%s)", d.ID, d.Health, d.Reason)
				}
			}
		})
	}
	t.Run("idle admin-down VF is healthy", func(t *testing.T) {
		root := t.TempDir()
		s, err := sysfsfixture.NewStandard(root, sysfsfixture.StandardOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SetAdminUp("enp65s0f0v1", false); err != nil {
			t.Fatal(err)
		}
		if err := s.SetOperState("enp65s0f0v1", "down"); err != nil {
			t.Fatal(err)
		}
		if err := s.SetAdminUp("enp65s0f0v1", false); err != nil {
			t.Fatal(err)
		}
		node, _ := inventory.Discover(inventory.Options{SysfsRoot: root})
		pools, _ := Build(node, parse(t, `{"resourceList":[{"resourceName":"r","selectors":{"pciAddresses":["0000:41:00.3"]}}]}`))
		if d := pools[0].Devices[0]; d.Health != Healthy {
			t.Fatalf("admin-down idle VF: %s (%s)", d.Health, d.Reason)
		}
	})
}

func TestEnvName(t *testing.T) {
	if got := EnvName("example.com/sriov_rdma"); got != "PCIDEVICE_EXAMPLE_COM_SRIOV_RDMA" {
		t.Fatal(got)
	}
}

func TestSharedSlotsSpanEveryHCANUMANode(t *testing.T) {
	_, node := discover(t, "shared")
	// one HCA on NUMA 1 (ens8f0np0, ibp193s0f0v0) and one on NUMA 0 (enp65s0f0v0)
	pools, err := Build(node, parse(t, `{"configList":[{"resourceName":"s","rdmaHcaMax":2,"selectors":{"ifNames":["ens8f0np0","ibp193s0f0v0","enp65s0f0v0"]}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	p := pools[0]
	if len(p.HCAs) != 3 {
		t.Fatalf("HCAs = %+v", p.HCAs)
	}
	if got := p.Devices[0].NUMAs; len(got) != 2 || got[0] != 0 || got[1] != 1 {
		t.Fatalf("slot NUMA nodes = %v, want [0 1]", got)
	}
}

// TestPFNamesMatchRegardlessOfCase: the SR-IOV device plugin compares a
// pfNames entry with the PF's netdev name by strings.EqualFold, and the first
// entry naming the PF decides its VFs (pkg/resources getItem/isSelected).
func TestPFNamesMatchRegardlessOfCase(t *testing.T) {
	s, node := discover(t, "exclusive")
	vf := func(i int) string { return sysfsfixture.VFBDF(s.RoCE.BDF, i) }
	tests := []struct {
		name    string
		pfNames string
		want    []string // nil: check count only
		count   int
	}{
		{name: "exact name", pfNames: `["enp65s0f0np0"]`, count: 16},
		{name: "upper case selects every VF", pfNames: `["ENP65S0F0NP0"]`, count: 16},
		{name: "mixed case with a VF range", pfNames: `["Enp65s0f0np0#0-1,7"]`, want: []string{vf(0), vf(1), vf(7)}, count: 3},
		{name: "first entry naming the PF in any case decides", pfNames: `["enp65s0f0np0#2","ENP65S0F0NP0#3-5"]`, want: []string{vf(2)}, count: 1},
		{name: "VF-less PF by upper-case name", pfNames: `["ENS8F0NP0"]`, want: []string{s.Shared.BDF}, count: 1},
		{name: "another name still does not match", pfNames: `["enp65s0f0np"]`, count: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pools, err := Build(node, parse(t, `{"resourceList":[{"resourceName":"r","selectors":{"pfNames":`+tc.pfNames+`}}]}`))
			if err != nil {
				t.Fatal(err)
			}
			got := ids(pools[0])
			if len(got) != tc.count {
				t.Fatalf("pfNames %s selected %d devices %v, want %d", tc.pfNames, len(got), got, tc.count)
			}
			if tc.want != nil && strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("pfNames %s selected %v, want %v", tc.pfNames, got, tc.want)
			}
		})
	}
}
