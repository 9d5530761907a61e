package deviceplugin

import (
	"fmt"
	"reflect"
	"testing"
)

// topoPool: PF A (root r0, NUMA 0) VFs a0..a3; PF B (root r1, NUMA 0) b0..b1;
// PF C (root r2, NUMA 1) c0..c5.
func topoPool() *Pool {
	p := &Pool{}
	add := func(pf, root string, numa, n int) {
		for i := 0; i < n; i++ {
			p.Devices = append(p.Devices, Device{ID: fmt.Sprintf("%s%d", pf, i), PF: pf, VFIndex: i, PCIRoot: root, NUMA: numa, Health: Healthy})
		}
	}
	add("a", "r0", 0, 4)
	add("b", "r1", 0, 2)
	add("c", "r2", 1, 6)
	return p
}

func all(p *Pool) []string {
	var out []string
	for _, d := range p.Devices {
		out = append(out, d.ID)
	}
	return out
}

func TestPreferred(t *testing.T) {
	tests := []struct {
		name      string
		available []string // nil: all
		must      []string
		size      int
		unhealthy []string
		want      []string
	}{
		{"one VF: best-fitting PF", nil, nil, 1, nil, []string{"b0"}},
		{"two VFs stay on one PF", nil, nil, 2, nil, []string{"b0", "b1"}},
		{"three VFs: smallest PF that holds them", nil, nil, 3, nil, []string{"a0", "a1", "a2"}},
		{"five VFs: only C holds them", nil, nil, 5, nil, []string{"c0", "c1", "c2", "c3", "c4"}},
		{"must-include pins the PF", nil, []string{"c3"}, 3, nil, []string{"c3", "c0", "c1"}},
		{"must-include PF full: same NUMA preferred", []string{"a0", "a1", "b0", "b1", "c0", "c1", "c2"}, []string{"a0"}, 3, nil, []string{"a0", "b0", "b1"}},
		{"more than any PF holds: spread, nearest first", nil, []string{"a0"}, 8, nil, []string{"a0", "a1", "a2", "a3", "b0", "b1", "c0", "c1"}},
		{"unhealthy skipped", nil, nil, 2, []string{"b1"}, []string{"a0", "a1"}},
		{"unknown IDs skipped", []string{"zz", "c5"}, nil, 1, nil, []string{"c5"}},
		{"must-include only", nil, []string{"a2", "a3"}, 2, nil, []string{"a2", "a3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := topoPool()
			for i := range p.Devices {
				for _, u := range tc.unhealthy {
					if p.Devices[i].ID == u {
						p.Devices[i].Health = Unhealthy
					}
				}
			}
			avail := tc.available
			if avail == nil {
				avail = all(p)
			}
			got := p.Preferred(avail, tc.must, tc.size)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPreferredSharedSlots(t *testing.T) {
	p := &Pool{}
	for i := 0; i < 5; i++ {
		p.Devices = append(p.Devices, Device{ID: fmt.Sprintf("s-%03d", i), NUMA: 1, Health: Healthy})
	}
	avail := map[string]bool{"s-004": true, "s-001": true, "s-002": true}
	got := p.Preferred([]string{"s-004", "s-001", "s-002"}, []string{"s-002"}, 2)
	if len(got) != 2 || got[0] != "s-002" || got[1] == "s-002" || !avail[got[1]] {
		t.Fatalf("got %v: want the must-include slot first, then one other available slot", got)
	}
}
