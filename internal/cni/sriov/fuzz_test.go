package sriov

import (
	"testing"

	"github.com/rdmanet/rdmanet/internal/sysfs"
)

// FuzzParse: any stdin (the NAD's config as the meta plugin or a runtime
// hands it over) is parsed or refused, never a panic; a deviceID that is
// accepted is a PCI address, the only value this plugin turns into a state
// file name.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"cniVersion":"1.0.0","name":"face-training-rdma","type":"sriov","deviceID":"0000:41:00.2"}`,
		`{"cniVersion":"0.3.1","name":"n","type":"sriov","vlan":200,"spoofchk":"on","trust":"off","deviceID":"0000:41:00.2","runtimeConfig":{"deviceID":"0000:41:00.3"}}`,
		`{"cniVersion":"1.0.0","name":"n","type":"sriov","deviceID":"../../etc/x"}`,
		`{"cniVersion":"1.0.0","name":"n","type":"sriov","prevResult":{"interfaces":[{"name":"net1"}]}}`,
		`{`, `null`, `[]`, `{"deviceID":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, stdin []byte) {
		for _, parse := range []func([]byte) (*Config, error){Parse, ParseLoose} {
			c, err := parse(stdin)
			if err != nil {
				continue
			}
			if c.DeviceID != "" && !sysfs.ValidBDF(c.DeviceID) {
				t.Fatalf("accepted deviceID %q", c.DeviceID)
			}
		}
	})
}
