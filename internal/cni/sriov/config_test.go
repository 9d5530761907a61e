package sriov

import (
	"errors"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	const seed = `{"cniVersion":"0.3.1","name":"face-training-rdma","type":"sriov","vlan":200,"spoofchk":"on","trust":"off",
		"ipam":{"type":"whereabouts","range":"10.60.0.0/16","exclude":["10.60.0.0/24"]},"deviceID":"0000:41:00.2"}`
	with := func(old, new string) string { return strings.Replace(seed, old, new, 1) }
	tru, fal := true, false
	for _, tc := range []struct {
		name    string
		in      string
		check   func(t *testing.T, c *Config)
		wantErr error
		wantIn  []string // substrings of the error: field, value, rule, fix
	}{
		{name: "seed NAD with injected deviceID", in: seed, check: func(t *testing.T, c *Config) {
			if c.DeviceID != "0000:41:00.2" || c.Vlan != 200 || c.VlanQoS != 0 || c.VlanProto != "802.1Q" ||
				*c.SpoofChk != tru || *c.Trust != fal || c.IPAMType != "whereabouts" || c.MTU != 0 || c.MAC != "" {
				t.Errorf("got %+v", c)
			}
		}},
		{name: "runtimeConfig deviceID and mac win", in: with(`"deviceID":"0000:41:00.2"`,
			`"deviceID":"0000:41:00.2","mac":"02:00:00:00:00:01","runtimeConfig":{"deviceID":"0000:41:00.3","mac":"02:AA:00:00:00:02"}`),
			check: func(t *testing.T, c *Config) {
				if c.DeviceID != "0000:41:00.3" || c.MAC != "02:aa:00:00:00:02" {
					t.Errorf("got deviceID %s mac %s", c.DeviceID, c.MAC)
				}
			}},
		{name: "all upstream fields", in: with(`"vlan":200`, `"vlan":200,"vlanQoS":3,"vlanProto":"802.1ad","link_state":"enable","min_tx_rate":100,"max_tx_rate":1000,"mtu":9000,"logLevel":"debug","master":"enp65s0f0np0"`),
			check: func(t *testing.T, c *Config) {
				if c.VlanQoS != 3 || c.VlanProto != "802.1ad" || c.LinkState != "enable" || *c.MinTxRate != 100 || *c.MaxTxRate != 1000 || c.MTU != 9000 {
					t.Errorf("got %+v", c)
				}
			}},
		{name: "no vlan means untagged", in: with(`"vlan":200,`, ``), check: func(t *testing.T, c *Config) {
			if c.Vlan != 0 || c.VlanProto != "802.1Q" {
				t.Errorf("got vlan %d proto %s", c.Vlan, c.VlanProto)
			}
		}},
		{name: "missing deviceID", in: with(`,"deviceID":"0000:41:00.2"`, ``), wantErr: ErrMissingDeviceID,
			wantIn: []string{`"deviceID"`, "k8s.v1.cni.cncf.io/resourceName", "does not match the device plugin pool"}},
		{name: "deviceID is a netdev name", in: with(`"0000:41:00.2"`, `"enp65s0f0v0"`), wantErr: ErrBadDeviceID,
			wantIn: []string{`"deviceID"`, `"enp65s0f0v0"`, "domain:bus:device.function"}},
		{name: "vlan 4095", in: with(`"vlan":200`, `"vlan":4095`), wantErr: ErrBadVlan, wantIn: []string{`"vlan"`, "4095", "0-4094", "fix:"}},
		{name: "vlan negative", in: with(`"vlan":200`, `"vlan":-1`), wantErr: ErrBadVlan, wantIn: []string{"-1"}},
		{name: "vlanQoS 8", in: with(`"vlan":200`, `"vlan":200,"vlanQoS":8`), wantErr: ErrBadVlanQoS, wantIn: []string{`"vlanQoS"`, "8", "0-7"}},
		{name: "vlanQoS without vlan", in: with(`"vlan":200`, `"vlan":0,"vlanQoS":3`), wantErr: ErrBadVlanQoS, wantIn: []string{"needs a VLAN tag"}},
		{name: "vlanProto unknown", in: with(`"vlan":200`, `"vlan":200,"vlanProto":"802.1x"`), wantErr: ErrBadVlanProto, wantIn: []string{`"802.1x"`}},
		{name: "802.1ad without vlan", in: with(`"vlan":200`, `"vlanProto":"802.1ad"`), wantErr: ErrBadVlanProto, wantIn: []string{"needs a VLAN tag"}},
		{name: "trust maybe", in: with(`"trust":"off"`, `"trust":"maybe"`), wantErr: ErrBadTrust, wantIn: []string{`"trust"`, `"maybe"`, `"on" or "off"`}},
		{name: "spoofchk yes", in: with(`"spoofchk":"on"`, `"spoofchk":"yes"`), wantErr: ErrBadSpoofchk, wantIn: []string{`"spoofchk"`}},
		{name: "link_state up", in: with(`"trust":"off"`, `"trust":"off","link_state":"up"`), wantErr: ErrBadLinkState, wantIn: []string{`"link_state"`, `"up"`}},
		{name: "multicast mac", in: with(`"trust":"off"`, `"trust":"off","mac":"01:00:5e:00:00:01"`), wantErr: ErrBadMAC, wantIn: []string{`"mac"`, "unicast"}},
		{name: "garbage mac", in: with(`"trust":"off"`, `"trust":"off","mac":"zz"`), wantErr: ErrBadMAC},
		{name: "negative rate", in: with(`"trust":"off"`, `"trust":"off","max_tx_rate":-5`), wantErr: ErrBadTxRate, wantIn: []string{`"max_tx_rate"`, "-5"}},
		{name: "min above max", in: with(`"trust":"off"`, `"trust":"off","min_tx_rate":500,"max_tx_rate":100`), wantErr: ErrBadTxRate, wantIn: []string{"must not exceed max_tx_rate"}},
		{name: "mtu too small", in: with(`"trust":"off"`, `"trust":"off","mtu":10`), wantErr: ErrBadMTU, wantIn: []string{`"mtu"`, "68-65535"}},
		{name: "malformed JSON", in: `{"type":"sriov",`, wantErr: ErrBadJSON},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.in))
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				tc.check(t, c)
				return
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Fix == "" || ce.Rule == "" {
				t.Errorf("error %v is not a ConfigError with a rule and a fix", err)
			}
			for _, w := range tc.wantIn {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestParseLooseAcceptsMissingDeviceID(t *testing.T) {
	c, err := ParseLoose([]byte(`{"cniVersion":"1.0.0","name":"n","type":"sriov"}`))
	if err != nil || c.DeviceID != "" {
		t.Fatalf("ParseLoose = %+v, %v", c, err)
	}
}
