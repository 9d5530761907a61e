package deviceplugin

import (
	"sort"
)

// Preferred chooses size device IDs from available, always including
// mustInclude. For exclusive pools it keeps a pod's VFs on one PF: the PF of
// the must-include devices if it has room, else a PF on the same PCIe root,
// else on the same NUMA node, else any PF that holds the whole request
// (the fullest-fitting one, to keep other PFs whole for larger requests).
// It spreads across PFs only when no single PF holds the request, taking
// topology-near PFs first. Unknown or unhealthy IDs in available are skipped.
func (p *Pool) Preferred(available, mustInclude []string, size int) []string {
	byID := make(map[string]*Device, len(p.Devices))
	for i := range p.Devices {
		byID[p.Devices[i].ID] = &p.Devices[i]
	}
	chosen := make([]string, 0, size)
	taken := map[string]bool{}
	for _, id := range mustInclude {
		if !taken[id] && len(chosen) < size {
			chosen = append(chosen, id)
			taken[id] = true
		}
	}
	need := size - len(chosen)
	if need <= 0 {
		return chosen
	}
	// Remaining healthy candidates grouped by PF (slots of a shared pool
	// and VF-less functions group under their own ID / "").
	groups := map[string][]*Device{}
	for _, id := range available {
		d := byID[id]
		if d == nil || taken[id] || d.Health != Healthy {
			continue
		}
		taken[id] = true
		groups[d.PF] = append(groups[d.PF], d)
	}
	var anchor *Device
	for _, id := range mustInclude {
		if d := byID[id]; d != nil {
			anchor = d
			break
		}
	}
	type cand struct {
		pf   string
		devs []*Device
		rank int // 0 same PF, 1 same PCIe root, 2 same NUMA, 3 other
	}
	cands := make([]cand, 0, len(groups))
	for pf, devs := range groups {
		sort.Slice(devs, func(i, j int) bool {
			if devs[i].VFIndex != devs[j].VFIndex {
				return devs[i].VFIndex < devs[j].VFIndex
			}
			return devs[i].ID < devs[j].ID
		})
		c := cand{pf: pf, devs: devs, rank: 3}
		if anchor != nil {
			d := devs[0]
			switch {
			case anchor.PF != "" && d.PF == anchor.PF:
				c.rank = 0
			case anchor.PCIRoot != "" && d.PCIRoot == anchor.PCIRoot:
				c.rank = 1
			case d.NUMA == anchor.NUMA && d.NUMA >= 0:
				c.rank = 2
			}
		}
		cands = append(cands, c)
	}
	// One PF holding the whole request wins, nearest topology first,
	// then best fit (fewest free), then PCI address for determinism.
	sort.Slice(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		aFits, bFits := len(a.devs) >= need, len(b.devs) >= need
		if aFits != bFits {
			return aFits
		}
		if a.rank != b.rank {
			return a.rank < b.rank
		}
		if aFits && len(a.devs) != len(b.devs) {
			return len(a.devs) < len(b.devs)
		}
		if !aFits && len(a.devs) != len(b.devs) {
			return len(a.devs) > len(b.devs) // spreading: fewest PFs
		}
		return a.pf < b.pf
	})
	if len(cands) > 0 && len(cands[0].devs) >= need {
		for _, d := range cands[0].devs[:need] {
			chosen = append(chosen, d.ID)
		}
		return chosen
	}
	// Spread: nearest topology first, largest groups first within a rank.
	sort.SliceStable(cands, func(i, j int) bool {
		if cands[i].rank != cands[j].rank {
			return cands[i].rank < cands[j].rank
		}
		return len(cands[i].devs) > len(cands[j].devs)
	})
	for _, c := range cands {
		for _, d := range c.devs {
			if len(chosen) == size {
				return chosen
			}
			chosen = append(chosen, d.ID)
		}
	}
	return chosen
}
