package ipoib

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/rdmanet/rdmanet/internal/cni/conftest"
)

// The configs below reproduce the shapes ipoib-cni users write: its README
// example (type ipoib, master, host-local IPAM with a range, a default route
// and a gateway, no cniVersion), its predecessor's (mtu), an L2-only one
// (empty ipam), and rdmanet's additions (pkey, deviceID injected by the meta
// plugin).
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in       string
		loose    bool
		want     Config
		wantErr  error
		wantText []string
	}{
		{name: "upstream README shape", in: `{"name":"ibnet","type":"ipoib","master":"ib0","ipam":{"type":"host-local","subnet":"10.56.0.0/16","rangeStart":"10.56.1.10","rangeEnd":"10.56.1.200","routes":[{"dst":"0.0.0.0/0"}],"gateway":"10.56.0.1"}}`,
			want: Config{Name: "ibnet", Master: "ib0", IPAMType: "host-local"}},
		{name: "mtu", in: `{"cniVersion":"1.0.0","name":"n","type":"ipoib","master":"ibp193s0f1","mtu":2044,"ipam":{"type":"whereabouts","range":"10.57.0.0/24"}}`,
			want: Config{CNIVersion: "1.0.0", Name: "n", Master: "ibp193s0f1", MTU: 2044, IPAMType: "whereabouts"}},
		{name: "L2 only", in: `{"cniVersion":"0.3.1","name":"n","type":"ipoib","master":"ib0","ipam":{}}`,
			want: Config{CNIVersion: "0.3.1", Name: "n", Master: "ib0"}},
		{name: "pkey hex string", in: `{"name":"n","type":"ipoib","master":"ib0","pkey":"0x8005"}`, want: Config{Name: "n", Master: "ib0", PKey: 0x8005, HasPKey: true}},
		{name: "pkey limited member", in: `{"name":"n","type":"ipoib","master":"ib0","pkey":"0x0005"}`, want: Config{Name: "n", Master: "ib0", PKey: 0x0005, HasPKey: true}},
		{name: "pkey without 0x", in: `{"name":"n","type":"ipoib","master":"ib0","pkey":"7fff"}`, want: Config{Name: "n", Master: "ib0", PKey: 0x7fff, HasPKey: true}},
		{name: "pkey number", in: `{"name":"n","type":"ipoib","master":"ib0","pkey":32773}`, want: Config{Name: "n", Master: "ib0", PKey: 0x8005, HasPKey: true}},
		{name: "keys in another case, as encoding/json", in: `{"name":"n","type":"ipoib","Master":"ib0","PKEY":"0x8006","MTU":4092}`, want: Config{Name: "n", Master: "ib0", MTU: 4092, PKey: 0x8006, HasPKey: true}},
		{name: "deviceID instead of master", in: `{"name":"n","type":"ipoib","deviceID":"0000:c1:00.1"}`, want: Config{Name: "n", DeviceID: "0000:c1:00.1"}},
		{name: "runtimeConfig deviceID", in: `{"name":"n","type":"ipoib","runtimeConfig":{"deviceID":"0000:c1:00.1"}}`, want: Config{Name: "n", DeviceID: "0000:c1:00.1"}},
		{name: "no master", in: `{"name":"n","type":"ipoib"}`, wantErr: ErrNoMaster, wantText: []string{`network "n"`, `"master"`, "ibdev2netdev"}},
		{name: "no master is fine for DEL", in: `{"name":"n","type":"ipoib"}`, loose: true, want: Config{Name: "n"}},
		{name: "pkey 0", in: `{"name":"n","type":"ipoib","master":"ib0","pkey":"0x8000"}`, wantErr: ErrBadPKey, wantText: []string{`"pkey"`, "partition number 0", "0x7fff"}},
		{name: "pkey too wide", in: `{"name":"n","type":"ipoib","master":"ib0","pkey":"0x18001"}`, wantErr: ErrBadPKey, wantText: []string{"16-bit hex"}},
		{name: "pkey not hex", in: `{"name":"n","type":"ipoib","master":"ib0","pkey":"blue"}`, wantErr: ErrBadPKey, wantText: []string{`"blue"`, "16-bit hex"}},
		{name: "negative mtu", in: `{"name":"n","type":"ipoib","master":"ib0","mtu":-1}`, wantErr: ErrBadMTU, wantText: []string{"65520"}},
		{name: "dhcp refused as upstream", in: `{"name":"n","type":"ipoib","master":"ib0","ipam":{"type":"dhcp"}}`, wantErr: ErrDHCP, wantText: []string{`"ipam.type"`}},
		{name: "bad deviceID", in: `{"name":"n","type":"ipoib","deviceID":"mlx5_2"}`, wantErr: ErrBadDeviceID},
		{name: "malformed", in: `{`, wantErr: ErrBadJSON},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parse := Parse
			if tc.loose {
				parse = ParseLoose
			}
			c, err := parse([]byte(tc.in))
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("error %v, want %v", err, tc.wantErr)
				}
				for _, w := range tc.wantText {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := *c
			got.NetConf = tc.want.NetConf
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestUnknownKeys(t *testing.T) {
	conftest.UnknownKeys(t, UnknownKeys, []conftest.KeysCase{
		{Name: "upstream keys", Conf: `{"cniVersion":"0.3.1","name":"n","type":"ipoib","master":"ib0","mtu":2044,"ipam":{},"dns":{},"capabilities":{},"runtimeConfig":{}}`},
		{Name: "rdmanet keys", Conf: `{"type":"ipoib","pkey":"0x8005","deviceID":"0000:c1:00.1"}`},
		{Name: "macvlan mode", Conf: `{"type":"ipoib","master":"ib0","mode":"bridge"}`, Want: []string{`unknown key "mode" is ignored`}},
		{Name: "parent", Conf: `{"type":"ipoib","parent":"ib0"}`, Want: []string{`unknown key "parent" is ignored (did you mean "master"?)`}},
		{Name: "partition", Conf: `{"type":"ipoib","master":"ib0","partition":"0x8005"}`, Want: []string{`(did you mean "pkey"?)`}},
	})
}

func TestTempName(t *testing.T) {
	a, b := TempName("c0ffee", "net1"), TempName("c0ffee", "net2")
	if a == b || len(a) > 15 || !strings.HasPrefix(a, "ipoib") || a != TempName("c0ffee", "net1") {
		t.Errorf("TempName: %q %q", a, b)
	}
}
