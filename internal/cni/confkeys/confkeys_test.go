package confkeys

import (
	"reflect"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		cat  Catalogue
		conf string
		want []Finding
	}{
		{name: "seed NAD plugin: nothing unknown", cat: SRIOV,
			conf: `{"cniVersion":"0.3.1","name":"n","type":"sriov","vlan":200,"spoofchk":"on","trust":"off","ipam":{"type":"whereabouts"}}`},
		{name: "every upstream key, as the operator renders it", cat: SRIOV,
			conf: `{"cniVersion":"1.0.0","name":"n","type":"sriov","deviceID":"0000:41:00.2","master":"p","mac":"02:00:00:00:00:01","mtu":9000,"vlan":0,"vlanQoS":0,"vlanProto":"802.1Q",` +
				`"min_tx_rate":0,"max_tx_rate":0,"spoofchk":"on","trust":"off","link_state":"auto","logLevel":"info","logFile":"/var/log/sriov-cni.log",` +
				`"capabilities":{"mac":true,"ips":true},"runtimeConfig":{"mac":"02:00:00:00:00:02"},"prevResult":{},"args":{},"dns":{},"cni.dev/valid-attachments":[]}`},
		{name: "keys match without case, as encoding/json", cat: SRIOV, conf: `{"VLAN":1,"VlanQos":2,"DeviceId":"x","MTU":1500}`},
		{name: "vlan_id: did you mean vlan", cat: SRIOV, conf: `{"vlan_id":200}`,
			want: []Finding{{Plugin: "sriov", Key: "vlan_id", Hint: "vlan"}}},
		{name: "camelCase rates (another project's spelling)", cat: SRIOV, conf: `{"minTxRate":1,"maxTxRate":2}`,
			want: []Finding{{Plugin: "sriov", Key: "maxTxRate", Hint: "max_tx_rate"}, {Plugin: "sriov", Key: "minTxRate", Hint: "min_tx_rate"}}},
		{name: "typo within two edits", cat: SRIOV, conf: `{"spofchk":"on","trsut":"on"}`,
			want: []Finding{{Plugin: "sriov", Key: "spofchk", Hint: "spoofchk"}, {Plugin: "sriov", Key: "trsut", Hint: "trust"}}},
		{name: "no close key: no hint", cat: SRIOV, conf: `{"foo":1,"enableRDMA":true}`,
			want: []Finding{{Plugin: "sriov", Key: "enableRDMA"}, {Plugin: "sriov", Key: "foo"}}},
		{name: "upstream key without effect", cat: SRIOV, conf: `{"vlan_trunk":"10-20"}`,
			want: []Finding{{Plugin: "sriov", Key: "vlan_trunk", Ignored: SRIOV.Ignored["vlan_trunk"]}}},
		{name: "rdma: upstream schema", cat: RDMA, conf: `{"cniVersion":"0.3.1","name":"n","type":"rdma","deviceID":"x","args":{"cni":{"debug":true}},"prevResult":{}}`},
		{name: "rdma: a sriov key", cat: RDMA, conf: `{"type":"rdma","vlan":200}`, want: []Finding{{Plugin: "rdma", Key: "vlan"}}},
		{name: "rdma: pciBusID", cat: RDMA, conf: `{"pciBusID":"0000:41:00.2"}`, want: []Finding{{Plugin: "rdma", Key: "pciBusID", Hint: "deviceID"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.cat.CheckJSON([]byte(tc.conf))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	if _, err := SRIOV.CheckJSON([]byte(`[1]`)); err == nil {
		t.Error("a non-object config gave no error")
	}
}

func TestFindingString(t *testing.T) {
	tests := []struct {
		name string
		f    Finding
		want string
	}{
		{name: "with hint", f: Finding{Plugin: "sriov", Key: "vlan_id", Hint: "vlan"}, want: `sriov config: unknown key "vlan_id" is ignored (did you mean "vlan"?)`},
		{name: "no hint", f: Finding{Plugin: "rdma", Key: "x"}, want: `rdma config: unknown key "x" is ignored`},
		{name: "ignored", f: Finding{Plugin: "sriov", Key: "vlan_trunk", Ignored: "why"}, want: `sriov config: key "vlan_trunk" is accepted but has no effect: why`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.f.String(); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestHintsPointAtKnownKeys: a hint never names a key the plugin does not read.
func TestHintsPointAtKnownKeys(t *testing.T) {
	for _, c := range []Catalogue{SRIOV, RDMA} {
		known := map[string]bool{}
		for _, k := range append(append([]string(nil), CommonKeys...), c.Known...) {
			known[strings.ToLower(k)] = true
		}
		for from, to := range c.Hints {
			if !known[strings.ToLower(to)] {
				t.Errorf("%s: hint %q -> %q names an unknown key", c.Plugin, from, to)
			}
			if known[strings.ToLower(from)] {
				t.Errorf("%s: hint from %q, which is a known key", c.Plugin, from)
			}
		}
	}
}
