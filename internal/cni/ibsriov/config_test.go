package ibsriov_test

import (
	"errors"
	"testing"

	"github.com/rdmanet/rdmanet/internal/cni/ibsriov"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name, conf string
		want       error
		wantGUID   string
		wantPKey   string
	}{
		{name: "README shape", conf: `{"type":"ib-sriov","cniVersion":"0.3.1","name":"sriov-network","pkey":"0x5","link_state":"enable","ibKubernetesEnabled":false,"deviceID":"0000:c1:00.2","ipam":{"type":"host-local"}}`, wantPKey: "0x0005"},
		{name: "runtimeConfig GUID wins over args", conf: `{"type":"ib-sriov","deviceID":"0000:c1:00.2","runtimeConfig":{"infinibandGUID":"c2:11:22:33:44:55:66:77"},"args":{"cni":{"guid":"c2:00:00:00:00:00:00:01"}}}`, wantGUID: "c2:11:22:33:44:55:66:77"},
		{name: "args.cni.guid", conf: `{"type":"ib-sriov","deviceID":"0000:c1:00.2","args":{"cni":{"guid":"c2:00:00:00:00:00:00:01"}}}`, wantGUID: "c2:00:00:00:00:00:00:01"},
		{name: "keys in another case, as encoding/json", conf: `{"Type":"ib-sriov","DeviceID":"0000:c1:00.2","PKey":"8005"}`, wantPKey: "0x8005"},
		{name: "missing deviceID", conf: `{"type":"ib-sriov"}`, want: ibsriov.ErrMissingDeviceID},
		{name: "netdev name as deviceID", conf: `{"type":"ib-sriov","deviceID":"ib0"}`, want: ibsriov.ErrBadDeviceID},
		{name: "zero GUID", conf: `{"type":"ib-sriov","deviceID":"0000:c1:00.2","runtimeConfig":{"infinibandGUID":"00:00:00:00:00:00:00:00"}}`, want: ibsriov.ErrBadGUID},
		{name: "MAC as GUID", conf: `{"type":"ib-sriov","deviceID":"0000:c1:00.2","runtimeConfig":{"infinibandGUID":"66:d8:02:77:aa:aa"}}`, want: ibsriov.ErrBadGUID},
		{name: "invalid pkey", conf: `{"type":"ib-sriov","deviceID":"0000:c1:00.2","pkey":"0x8000"}`, want: ibsriov.ErrBadPKey},
		{name: "pkey not hex", conf: `{"type":"ib-sriov","deviceID":"0000:c1:00.2","pkey":"five"}`, want: ibsriov.ErrBadPKey},
		{name: "link_state", conf: `{"type":"ib-sriov","deviceID":"0000:c1:00.2","link_state":"on"}`, want: ibsriov.ErrBadLinkState},
		{name: "vfio", conf: `{"type":"ib-sriov","deviceID":"0000:c1:00.2","vfioPciMode":true}`, want: ibsriov.ErrVfio},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ibsriov.Parse([]byte(tc.conf))
			if tc.want != nil {
				var ce *ibsriov.ConfigError
				if !errors.Is(err, tc.want) || !errors.As(err, &ce) {
					t.Fatalf("err = %v, want %v in a ConfigError", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			g := ""
			if c.GUID != 0 {
				g = c.GUID.String()
			}
			if g != tc.wantGUID || c.PKey != tc.wantPKey {
				t.Errorf("GUID %q PKey %q, want %q %q", g, c.PKey, tc.wantGUID, tc.wantPKey)
			}
		})
	}
}
