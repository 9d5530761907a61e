package netops

import "testing"

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
