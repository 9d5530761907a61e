package upstreamconfigs

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/rdmanet/rdmanet/internal/deviceplugin/config"
)

// rdmanetDP is rdmanet's reading of a config: the pools it serves, and the
// resources of the pools it skips.
func rdmanetDP(data []byte) (dpResult, []string, *config.File) {
	f, err := config.ParseFile("corpus.json", data)
	if err != nil {
		return dpResult{Err: err.Error()}, nil, nil
	}
	res := dpResult{OK: true}
	for _, p := range f.Pools {
		dp := dpPool{Resource: p.Resource(), Type: "netDevice", RdmaHcaMax: p.RdmaHcaMax}
		if p.Kind == config.Shared {
			s := p.Shared
			dp.Type = "shared"
			dp.Shared = &dpShared{Vendors: s.Vendors, DeviceIDs: s.DeviceIDs, Drivers: s.Drivers, IfNames: s.IfNames, LinkTypes: s.LinkTypes}
		}
		for _, s := range p.Selectors {
			g := dpGroup{Vendors: s.Vendors, Devices: s.Devices, Drivers: s.Drivers, PCIAddresses: s.PCIAddresses, RootDevices: s.RootDevices, LinkTypes: s.LinkTypes, IsRdma: s.IsRdma}
			for _, pf := range s.PFNames {
				if pf.VFs == nil {
					g.PFNames = append(g.PFNames, pf.Name)
					continue
				}
				var in []int
				for _, v := range pf.VFs {
					if v < probeVFs {
						in = append(in, v)
					}
				}
				g.PFNames = append(g.PFNames, pfSelection(pf.Name, in))
			}
			dp.Groups = append(dp.Groups, g)
		}
		res.Pools = append(res.Pools, dp)
	}
	var skipped []string
	for _, s := range f.Skipped {
		skipped = append(skipped, s.Resource)
	}
	return res, skipped, f
}

// comparable drops what the comparison does not look at (the pool type of a
// served pool, empty versus absent lists).
func normPool(p dpPool) dpPool {
	n := func(s []string) []string {
		if len(s) == 0 {
			return nil
		}
		return s
	}
	for i, g := range p.Groups {
		p.Groups[i] = dpGroup{n(g.Vendors), n(g.Devices), n(g.Drivers), n(g.PCIAddresses), n(g.RootDevices), n(g.LinkTypes), n(g.PFNames), g.IsRdma, n(g.Other)}
	}
	if p.Shared != nil {
		s := *p.Shared
		p.Shared = &dpShared{n(s.Vendors), n(s.DeviceIDs), n(s.Drivers), n(s.IfNames), n(s.LinkTypes)}
	}
	return p
}

// sameDP compares upstream's answer with rdmanet's; "" when they agree.
func sameDP(up dpResult, rd dpResult, skipped []string) string {
	if up.OK != rd.OK {
		return fmt.Sprintf("decision: upstream ok=%v (%s), rdmanet ok=%v (%s)", up.OK, up.Err, rd.OK, rd.Err)
	}
	if !up.OK {
		return ""
	}
	served := map[string]dpPool{}
	for _, p := range rd.Pools {
		served[p.Resource] = normPool(p)
	}
	skip := map[string]bool{}
	for _, s := range skipped {
		skip[s] = true
	}
	var want, got []string
	for _, p := range up.Pools {
		want = append(want, p.Resource)
		if skip[p.Resource] {
			got = append(got, p.Resource)
			continue
		}
		r, ok := served[p.Resource]
		if !ok {
			continue
		}
		got = append(got, p.Resource)
		u := normPool(p)
		u.Type, r.Type = "", ""
		if !reflect.DeepEqual(u, r) {
			return fmt.Sprintf("pool %s:\n upstream %+v\n rdmanet  %+v", p.Resource, u, r)
		}
	}
	sort.Strings(want)
	sort.Strings(got)
	if !reflect.DeepEqual(want, got) || len(rd.Pools)+len(skipped) != len(up.Pools) {
		return fmt.Sprintf("pools: upstream %v; rdmanet serves %d and skips %v", want, len(rd.Pools), skipped)
	}
	return ""
}

func sameOracle(a, b dpResult) bool {
	if a.OK != b.OK {
		return false
	}
	if len(a.Pools) != len(b.Pools) {
		return false
	}
	for i := range a.Pools {
		x, y := normPool(a.Pools[i]), normPool(b.Pools[i])
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

// TestDevicePluginConfigsAsUpstream is the differential test: every corpus
// entry through upstream's parser and rdmanet's; same decision and same
// effective values, except the pools rdmanet does not serve (skipped with a
// warning) and the listed deliberate differences.
func TestDevicePluginConfigsAsUpstream(t *testing.T) {
	var agree, differ, skippedPools, versioned int
	var report []string
	for _, c := range dpCorpus {
		t.Run(c.name, func(t *testing.T) {
			data := []byte(c.json)
			var up dpResult
			switch c.format {
			case "sriov":
				up = sriovdpMirror(data)
				old := sriovdpReal(data)
				switch {
				case c.version == "" && !sameOracle(old, up):
					t.Errorf("the v3.11 mirror and the served upstream module disagree on an entry that does not depend on their version:\n real   %+v\n mirror %+v", old, up)
				case c.version != "" && sameOracle(old, up):
					t.Errorf("marked version-dependent (%s) but the served module and the v3.11 mirror agree", c.version)
				case c.version != "":
					versioned++
				}
			case "shared":
				up = sharedReal(t.TempDir(), data)
			default:
				t.Fatalf("format %q", c.format)
			}
			rd, skipped, file := rdmanetDP(data)
			if !reflect.DeepEqual(skipped, c.skip) && !(len(skipped) == 0 && len(c.skip) == 0) {
				t.Errorf("rdmanet skips %v, the corpus says %v", skipped, c.skip)
			}
			d := sameDP(up, rd, skipped)
			switch {
			case c.differ == "" && d != "":
				t.Errorf("rdmanet differs from upstream: %s", d)
			case c.differ != "" && d == "":
				t.Errorf("listed as a deliberate difference (%s) but rdmanet agrees with upstream", c.differ)
			case c.differ != "":
				differ++
				report = append(report, fmt.Sprintf("DIFFERS %s: %s\n    rdmanet: %s", c.name, c.differ, rd.Err))
			default:
				agree++
			}
			skippedPools += len(skipped)
			if file != nil {
				for _, w := range file.Warnings {
					t.Logf("warning: %s", w)
				}
			}
			if !rd.OK {
				t.Logf("rdmanet refuses: %s", rd.Err)
			}
		})
	}
	t.Logf("device plugin corpus: %d entries, %d agree with upstream, %d differ deliberately; %d pools skipped as not served; %d entries where the served 2022 module and v3.11.0 answer differently", len(dpCorpus), agree, differ, skippedPools, versioned)
	for _, r := range report {
		t.Log(r)
	}
}

// TestDevicePluginWarningsNameTheKeyOrPool: every entry upstream accepts with
// a key in another case, an unknown key or an unserved pool gets a warning
// that names it.
func TestDevicePluginWarningsNameTheKeyOrPool(t *testing.T) {
	tests := []struct {
		name  string
		entry string // corpus entry name prefix
		want  []string
	}{
		{name: "IsRdma, NeedVhostNet and SelectorObj of a dumped config", entry: "sriovdp docs/config-file: per-node ConfigMap value", want: []string{"selectors.IsRdma", "selectors.NeedVhostNet", "SelectorObj"}},
		{name: "kubeletRootDir", entry: "shared deployment on main", want: []string{"kubeletRootDir"}},
		{name: "ifnames", entry: "shared: keys in another case", want: []string{"selectors.ifnames", "RdmaHcaMax", "ConfigList"}},
		{name: "rootDevices in a shared selector", entry: "shared: SR-IOV selector keys", want: []string{"selectors.rootDevices", "selectors.pfNames", "selectors.isRdma"}},
		{name: "an accelerator pool", entry: "sriovdp README: an accelerator", want: []string{"intel.com/intel_fpga", "deviceType", "pool skipped"}},
		{name: "DDP pools", entry: "sriovdp docs/ddp", want: []string{"intel.com/x700_gtp", "intel.com/x700_pppoe", "ddpProfiles"}},
		{name: "devices inside a shared selector", entry: "shared README selector table", want: []string{"selectors.devices"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c *dpCase
			for i := range dpCorpus {
				if strings.HasPrefix(dpCorpus[i].name, tc.entry) {
					c = &dpCorpus[i]
				}
			}
			if c == nil {
				t.Fatalf("no corpus entry %q", tc.entry)
			}
			_, _, f := rdmanetDP([]byte(c.json))
			if f == nil {
				t.Fatal("rdmanet refused it")
			}
			var all []string
			for _, w := range f.Warnings {
				all = append(all, w.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(strings.Join(all, "\n"), w) {
					t.Errorf("no warning names %q:\n%s", w, strings.Join(all, "\n"))
				}
			}
		})
	}
}
