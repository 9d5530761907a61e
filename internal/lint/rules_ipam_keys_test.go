package lint

import (
	"strings"
	"testing"
)

// TestIPAMUnknownKeys (issue 13, defect 11): RDMA044 names each unknown key
// of an rdmanet-ipam/whereabouts ipam section, where it is, and the field it
// most likely means; other IPAM types are not its business.
func TestIPAMUnknownKeys(t *testing.T) {
	nad := func(ipam M) []M {
		return []M{vfPool(), nadObj(trainNet, ns, vfRes, conflist(trainNet, M{"type": "sriov", "ipam": ipam}, M{"type": "rdma"})), rdzv(), exclusiveWL().obj()}
	}
	tests := []struct {
		name string
		ipam M
		// want: one finding per entry: fragments of field, message and fix.
		want [][3]string
	}{
		{name: "camel case", ipam: M{"type": "whereabouts", "range": "10.60.0.0/16", "rangeStart": "10.60.1.0"},
			want: [][3]string{{".ipam.rangeStart", `ipam key "rangeStart" is unknown to rdmanet-ipam and Whereabouts and is ignored; did you mean "range_start"?`, `rename "rangeStart" to "range_start"`}}},
		{name: "nested in ipRanges", ipam: M{"type": "rdmanet-ipam", "ipRanges": []any{M{"range": "10.60.0.0/16", "exlude": []any{"10.60.0.0/24"}}}},
			want: [][3]string{{".ipam.ipRanges[0].exlude", `did you mean "exclude"?`, `rename "exlude" to "exclude"`}}},
		{name: "nothing close", ipam: M{"type": "whereabouts", "range": "10.60.0.0/16", "vlan": 5},
			want: [][3]string{{".ipam.vlan", `ipam key "vlan" is unknown`, `remove "vlan"`}}},
		// "ranges" is no Whereabouts key (an early, unreleased name of ipRanges; host-local's key): it means ipRanges, not range.
		{name: "historic ranges", ipam: M{"type": "whereabouts", "range": "10.60.0.0/16", "ranges": []any{M{"range": "10.61.0.0/16"}}},
			want: [][3]string{{".ipam.ranges", `ipam key "ranges" is unknown to rdmanet-ipam and Whereabouts and is ignored; did you mean "ipRanges"?`, `rename "ranges" to "ipRanges"`}}},
		{name: "other ipam types are not checked", ipam: M{"type": "host-local", "subnet": "10.60.0.0/16", "rangeStart": "10.60.1.0"}},
		{name: "seed config", ipam: M{"type": "whereabouts", "range": "10.60.0.0/16", "exclude": []any{"10.60.0.0/24"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []Finding
			for _, f := range lintDocs(t, nad(tc.ipam)).Findings {
				if f.Rule == "RDMA044" {
					got = append(got, f)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d RDMA044 findings, want %d: %+v", len(got), len(tc.want), got)
			}
			for i, w := range tc.want {
				f := got[i]
				if !strings.HasSuffix(f.Field, w[0]) || !strings.Contains(f.Message, w[1]) || !strings.Contains(f.Fix, w[2]) || f.Severity != Warning {
					t.Errorf("finding %+v, want field ...%s, message with %q, fix with %q, warning", f, w[0], w[1], w[2])
				}
			}
		})
	}
}
