package rdma

import (
	"strings"
	"testing"
)

// TestUnknownKeys (issue 13, defect 11): the upstream RDMA CNI schema is
// accepted, anything else is reported.
func TestUnknownKeys(t *testing.T) {
	tests := []struct {
		name string
		conf string
		want []string
	}{
		{name: "seed NAD", conf: `{"cniVersion":"0.3.1","name":"face-training-rdma","type":"rdma"}`},
		{name: "upstream keys", conf: `{"cniVersion":"0.3.1","name":"n","type":"rdma","deviceID":"0000:41:00.2","args":{"cni":{"debug":true}},"runtimeConfig":{"deviceID":"x"},"prevResult":{}}`},
		{name: "a key of the sriov step", conf: `{"type":"rdma","vlan":200}`, want: []string{`rdma config: unknown key "vlan" is ignored`}},
		{name: "pciBusID", conf: `{"type":"rdma","pciBusID":"0000:41:00.2"}`, want: []string{`unknown key "pciBusID" is ignored (did you mean "deviceID"?)`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, f := range UnknownKeys([]byte(tc.conf)) {
				got = append(got, f.String())
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			for i := range got {
				if !strings.Contains(got[i], tc.want[i]) {
					t.Errorf("finding %q, want %q", got[i], tc.want[i])
				}
			}
		})
	}
	if f := UnknownKeys([]byte(`{"deviceID":"x","args":{},"type":"rdma"}`)); len(f) != 0 {
		t.Errorf("NetConf's own keys reported: %v", f)
	}
}
