package netops

import (
	"errors"
	"strings"
	"testing"
)

func TestPluginStateDir(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"unset: plugin default", nil, "/var/lib/cni/sriov"},
		{"set: per-plugin subdir", map[string]string{EnvCNIStateDir: "/tmp/state"}, "/tmp/state/sriov"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := PluginStateDir(func(k string) string { return tc.env[k] }, "sriov", "/var/lib/cni/sriov")
			if got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestFromEnvTestHooks: the test switches work only where hooks are on;
// a production build refuses RDMANET_NETOPS=record (DEL runs against the
// kernel) and ignores RDMANET_CNI_FAULT, warning about both.
func TestFromEnvTestHooks(t *testing.T) {
	rec := map[string]string{EnvImpl: "record", EnvState: "/tmp/x.json"}
	with := func(m map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	tests := []struct {
		name      string
		env       map[string]string
		hooks     bool
		wantErr   bool
		record    bool
		fault     bool
		wantWarns int
	}{
		{name: "tagged: record", env: rec, hooks: true, record: true},
		{name: "tagged: failpoint honoured", env: with(nil, EnvFault, "sriov:move"), hooks: true, fault: true},
		{name: "production: record refused for ADD", env: with(rec, "CNI_COMMAND", "ADD"), wantErr: true},
		{name: "production: record refused for CHECK", env: with(rec, "CNI_COMMAND", "CHECK"), wantErr: true},
		{name: "production: record refused without a command", env: rec, wantErr: true},
		{name: "production: DEL restores through the kernel", env: with(rec, "CNI_COMMAND", "DEL"), wantWarns: 1},
		{name: "production: failpoint ignored", env: with(nil, EnvFault, "sriov:move:exit", "CNI_COMMAND", "ADD"), wantWarns: 1},
		{name: "production: nothing set", env: with(nil, "CNI_COMMAND", "ADD")},
		{name: "production: netlink", env: with(nil, EnvImpl, "netlink")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) string { return tc.env[k] }
			ops, err := fromEnv(getenv, tc.hooks)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				if !errors.Is(err, ErrTestSwitch) || !strings.Contains(err.Error(), TestHooksTag) {
					t.Errorf("refusal %q does not wrap ErrTestSwitch or name the tag", err)
				}
				return
			}
			if _, isRec := ops.VF.(*Recorder); isRec != tc.record {
				t.Errorf("VF implementation %T, want recorder %v", ops.VF, tc.record)
			}
			if _, isRec := ops.RDMA.(*Recorder); isRec != tc.record {
				t.Errorf("RDMA implementation %T, want recorder %v", ops.RDMA, tc.record)
			}
			if len(ops.Warnings) != tc.wantWarns {
				t.Errorf("warnings %q, want %d", ops.Warnings, tc.wantWarns)
			}
			if fp := failpointFromEnv(getenv, "sriov", tc.hooks); (fp != nil) != tc.fault {
				t.Errorf("failpoint %+v, want one: %v", fp, tc.fault)
			}
		})
	}
}

// TestTestHooksInTestBinary: `go test` binaries honour the switches (the
// in-process plugin tests need them), whatever the tag.
func TestTestHooksInTestBinary(t *testing.T) {
	if !TestHooks() {
		t.Fatal("TestHooks() is false in a test binary")
	}
}
