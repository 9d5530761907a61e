package agent

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmanet/rdmanet/test/sysfsfixture"
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
