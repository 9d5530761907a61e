package lint

import (
	"strings"
	"testing"
)

// TestCNIUnknownKeys (issue 13, defect 11): RDMA029 names each key of a
// NAD's sriov or rdma plugin config that the plugin does not read, where it
// is and the key probably meant; upstream keys and other plugins' configs
// are left alone.
func TestCNIUnknownKeys(t *testing.T) {
	ipam := M{"type": "whereabouts", "range": "10.60.0.0/16", "exclude": []any{"10.60.0.0/24"}}
	nad := func(sriov, rdma M) []M {
		sriov["type"], sriov["ipam"], rdma["type"] = "sriov", ipam, "rdma"
		return []M{vfPool(), nadObj(trainNet, ns, vfRes, conflist(trainNet, sriov, rdma)), rdzv(), exclusiveWL().obj()}
	}
	tests := []struct {
		name        string
		sriov, rdma M
		// want: one finding per entry: fragments of field, message and fix
		want [][3]string
	}{
		{name: "seed NAD", sriov: M{"vlan": 200, "spoofchk": "on", "trust": "off"}, rdma: M{}},
		{name: "every upstream sriov key", sriov: M{"vlan": 0, "vlanQoS": 0, "vlanProto": "802.1Q", "mac": "02:00:00:00:00:01", "mtu": 9000, "spoofchk": "on", "trust": "off",
			"link_state": "auto", "min_tx_rate": 0, "max_tx_rate": 0, "logLevel": "info", "logFile": "/var/log/sriov-cni.log", "master": "enp65s0f0np0", "capabilities": M{"mac": true}}, rdma: M{}},
		{name: "vlan_id", sriov: M{"vlan_id": 200}, rdma: M{},
			want: [][3]string{{".plugins[0].vlan_id", `the sriov plugin does not read "vlan_id" and ignores it; did you mean "vlan"?`, `rename "vlan_id" to "vlan"`}}},
		{name: "camelCase rates", sriov: M{"maxTxRate": 1000}, rdma: M{},
			want: [][3]string{{".plugins[0].maxTxRate", `did you mean "max_tx_rate"?`, `rename "maxTxRate" to "max_tx_rate"`}}},
		{name: "upstream key without effect", sriov: M{"vlan_trunk": "10-20"}, rdma: M{},
			want: [][3]string{{".plugins[0].vlan_trunk", `accepts "vlan_trunk" but it has no effect`, `remove "vlan_trunk"`}}},
		{name: "key of the wrong step, nothing close", sriov: M{}, rdma: M{"vlan": 200},
			want: [][3]string{{".plugins[1].vlan", `the rdma plugin does not read "vlan" and ignores it`, `remove "vlan"`}}},
		{name: "one finding per key", sriov: M{"spoof_chk": "on", "trsut": "off"}, rdma: M{},
			want: [][3]string{{".plugins[0].spoof_chk", `did you mean "spoofchk"?`, ""}, {".plugins[0].trsut", `did you mean "trust"?`, ""}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []Finding
			for _, f := range lintDocs(t, nad(tc.sriov, tc.rdma)).Findings {
				if f.Rule == "RDMA029" {
					got = append(got, f)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d RDMA029 findings, want %d: %+v", len(got), len(tc.want), got)
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

// TestCNIUnknownKeysOtherPlugins: macvlan and generated configs are not
// RDMA029's business.
func TestCNIUnknownKeysOtherPlugins(t *testing.T) {
	docs := []M{nadObj("rdmashared-net", ns, "", M{"cniVersion": "0.3.1", "name": "rdmashared-net", "type": "macvlan", "master": "ens8f0np0", "vlan_id": 5,
		"ipam": M{"type": "whereabouts", "range": "10.70.0.0/16"}})}
	for _, f := range lintDocs(t, docs).Findings {
		if f.Rule == "RDMA029" {
			t.Errorf("RDMA029 on a macvlan config: %+v", f)
		}
	}
}
