// Package conftest holds the tests every rdmanet CNI plugin runs on its
// config parsing, each plugin keeping its own cases: a fuzz of its parsers
// (FuzzDeviceID) and a table of the keys it warns of (UnknownKeys). It is
// imported by tests only.
package conftest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rdmanet/rdmanet/internal/cni/confkeys"
	"github.com/rdmanet/rdmanet/internal/sysfs"
)

// FuzzDeviceID fuzzes the parsers of the plugin of type plugin: any stdin
// (the NAD's config as the meta plugin or a runtime hands it over) is
// parsed or refused, never a panic; a deviceID (deviceID reads it from a
// parsed config) that is accepted is a PCI address, the only value the
// plugin turns into a state file name. The seeds are configs of the
// plugin's type: the seed NAD's step, upstream keys, a path for deviceID,
// a prevResult, and JSON that is not a config.
func FuzzDeviceID[C any](f *testing.F, plugin string, deviceID func(*C) string, parsers ...func([]byte) (*C, error)) {
	for _, s := range []string{
		`{"cniVersion":"1.0.0","name":"face-training-rdma","type":"%s","deviceID":"0000:41:00.2"}`,
		`{"cniVersion":"0.3.1","name":"n","type":"%s","vlan":200,"spoofchk":"on","trust":"off","deviceID":"0000:41:00.2","runtimeConfig":{"deviceID":"0000:41:00.3"}}`,
		`{"cniVersion":"1.0.0","name":"n","type":"%s","deviceID":"../../etc/x"}`,
		`{"cniVersion":"1.0.0","name":"n","type":"%s","prevResult":{"interfaces":[{"name":"net1"}]}}`,
	} {
		f.Add([]byte(fmt.Sprintf(s, plugin)))
	}
	for _, s := range []string{`{`, `null`, `[]`, `{"deviceID":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, stdin []byte) {
		for _, parse := range parsers {
			c, err := parse(stdin)
			if err != nil {
				continue
			}
			if id := deviceID(c); id != "" && !sysfs.ValidBDF(id) {
				t.Fatalf("accepted deviceID %q", id)
			}
		}
	})
}

// KeysCase is one config and the findings expected of it, in order: each
// a part of the finding's text (confkeys.Finding.String).
type KeysCase struct {
	Name string
	Conf string
	Want []string
}

// UnknownKeys runs the plugin's unknownKeys (its UnknownKeys) on each case.
func UnknownKeys(t *testing.T, unknownKeys func(stdin []byte) []confkeys.Finding, cases []KeysCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			var got []string
			for _, f := range unknownKeys([]byte(tc.Conf)) {
				got = append(got, f.String())
			}
			if len(got) != len(tc.Want) {
				t.Fatalf("got %q, want %q", got, tc.Want)
			}
			for i := range got {
				if !strings.Contains(got[i], tc.Want[i]) {
					t.Errorf("finding %q, want %q", got[i], tc.Want[i])
				}
			}
		})
	}
}
