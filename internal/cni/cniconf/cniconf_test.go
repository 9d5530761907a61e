package cniconf

import (
	"errors"
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		name     string
		stdin    string
		wantName string
		wantErr  error
	}{
		{name: "an object", stdin: `{"name":"n","deviceID":"0000:41:00.2"}`, wantName: "n"},
		{name: "keys in another case, as encoding/json", stdin: `{"NAME":"n"}`, wantName: "n"},
		{name: "not an object", stdin: `[]`, wantErr: ErrBadJSON},
		{name: "cut short", stdin: `{`, wantErr: ErrBadJSON},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var n struct{ Name string }
			err := Decode("sriov", []byte(tc.stdin), &n)
			if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Fatalf("Decode: %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				var e *Error
				if !errors.As(err, &e) || !strings.HasPrefix(err.Error(), `sriov config: field "(config)" = stdin: must be a JSON object`) || e.Fix == "" {
					t.Fatalf("error %q does not name the plugin, the config and the fix", err)
				}
				return
			}
			if n.Name != tc.wantName {
				t.Fatalf("name %q, want %q", n.Name, tc.wantName)
			}
		})
	}
}

func TestDevice(t *testing.T) {
	tests := []struct {
		name          string
		conf, runtime string
		want          string
		wantErr       error
	}{
		{name: "none", want: ""},
		{name: "the config's", conf: "0000:41:00.2", want: "0000:41:00.2"},
		{name: "runtimeConfig's wins", conf: "0000:41:00.2", runtime: "0000:41:00.3", want: "0000:41:00.3"},
		{name: "a netdev name is refused", conf: "ens1f0v1", wantErr: ErrBadDeviceID},
		{name: "a path is refused", runtime: "../../etc/x", wantErr: ErrBadDeviceID},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Device("rdma", tc.conf, tc.runtime)
			if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) || got != tc.want {
				t.Fatalf("Device: %q, %v; want %q, %v", got, err, tc.want, tc.wantErr)
			}
			if err != nil && !strings.HasPrefix(err.Error(), `rdma config: field "deviceID" = "`) {
				t.Fatalf("error %q does not name the plugin and the field", err)
			}
		})
	}
}
