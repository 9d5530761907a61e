package lint

import (
	"strings"
	"testing"
)

// TestIPoIBRules: ipoib networks (shared mode on InfiniBand) with an
// Ethernet parent (RDMA100) or no parent at all (RDMA101) are errors; the
// ipoib-cni shapes are clean; unknown ipoib keys are RDMA029 warnings;
// macvlan over an IB port keeps today's RDMA038 message.
func TestIPoIBRules(t *testing.T) {
	ibPool := func(linkType string) M {
		return configMap("rdma-devices", "kube-system", M{"configList": []any{M{"resourceName": "hca_ib", "rdmaHcaMax": 16,
			"selectors": M{"ifNames": []string{"ibp193s0f1"}, "linkTypes": []string{linkType}}}}})
	}
	ipoibNAD := func(res string, extra M) M {
		p := M{"cniVersion": "0.3.1", "name": "ib-shared", "type": "ipoib", "ipam": M{"type": "whereabouts", "range": "10.56.0.0/16"}}
		for k, v := range extra {
			p[k] = v
		}
		return nadObj("ib-shared", ns, res, p)
	}
	tests := []struct {
		name string
		docs []M
		rule string
		want []string // fragments of each finding's message (one finding per entry)
	}{
		{name: "ipoib-cni README shape", docs: []M{ibPool("infiniband"), ipoibNAD("", M{"master": "ibp193s0f1"})}, rule: "RDMA100"},
		{name: "master from the shared IB pool", docs: []M{ibPool("infiniband"), ipoibNAD("rdma/hca_ib", nil)}, rule: "RDMA101"},
		{name: "no master, no resource", docs: []M{ipoibNAD("", nil)}, rule: "RDMA101",
			want: []string{`runs ipoib without "master" and without a resourceName`}},
		{name: "master is an Ethernet pool interface", docs: []M{ibPool("ether"), ipoibNAD("", M{"master": "ibp193s0f1"})}, rule: "RDMA100",
			want: []string{`master "ibp193s0f1", which pool rdma/hca_ib selects as an Ethernet link`}},
		{name: "resource is an Ethernet pool", docs: []M{ibPool("ether"), ipoibNAD("rdma/hca_ib", nil)}, rule: "RDMA100",
			want: []string{"its resource rdma/hca_ib is a pool of Ethernet links"}},
		{name: "unknown ipoib key", docs: []M{ipoibNAD("", M{"master": "ib0", "parent": "ib0"})}, rule: "RDMA029",
			want: []string{`the ipoib plugin does not read "parent" and ignores it; did you mean "master"?`}},
		{name: "ipoib keys are known", docs: []M{ipoibNAD("", M{"master": "ib0", "pkey": "0x8005", "mtu": 2044})}, rule: "RDMA029"},
		{name: "macvlan over ib0 keeps its message", docs: []M{nadObj("ibnet", ns, "", conflist("ibnet", macvlanPlugin("ib0")))}, rule: "RDMA038",
			want: []string{`puts macvlan on master "ib0", an InfiniBand interface (its name is an IPoIB interface name); macvlan multiplexes by MAC address and IPoIB has none, so the child interface cannot be created`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []Finding
			for _, f := range lintDocs(t, tc.docs).Findings {
				if f.Rule == tc.rule {
					got = append(got, f)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d %s findings, want %d: %+v", len(got), tc.rule, len(tc.want), got)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i].Message, w) || got[i].Fix == "" {
					t.Errorf("finding %+v, want message with %q and a fix", got[i], w)
				}
			}
		})
	}
}
