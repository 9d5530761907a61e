package version

import (
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name, line, program, version string
		ok                           bool
	}{
		{"release", "rdmanet-ipam 0.2.0 (rdmanet; go1.26.8 linux/amd64; rev 0123456789ab)\n", "rdmanet-ipam", "0.2.0", true},
		{"unstamped", "sriov 0.0.0-dev (rdmanet; go1.26.8 linux/amd64)", "sriov", "0.0.0-dev", true},
		{"another program", "whereabouts v0.9.2", "", "", false},
		{"cni about string", "rdmanet-ipam: cluster-wide IPAM (Whereabouts-compatible)", "", "", false},
		{"not a version", "rdmanet-ipam banana (rdmanet; go1.26.8 linux/amd64)", "rdmanet-ipam", "banana", false},
		{"empty", "", "", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, v, ok := Parse(tc.line)
			if p != tc.program || v != tc.version || ok != tc.ok {
				t.Fatalf("Parse(%q) = %q %q %v, want %q %q %v", tc.line, p, v, ok, tc.program, tc.version, tc.ok)
			}
		})
	}
}

func TestStringParsesBack(t *testing.T) {
	line := String("rdmanet-agent")
	p, v, ok := Parse(line)
	if !ok || p != "rdmanet-agent" || v != Get() {
		t.Fatalf("Parse(String()) = %q %q %v from %q", p, v, ok, line)
	}
}

func TestCompare(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		want int
		ok   bool
	}{
		{"equal", "0.2.0", "0.2.0", 0, true},
		{"v prefix ignored", "v0.2.0", "0.2.0", 0, true},
		{"older", "0.1.0", "0.2.0", -1, true},
		{"newer", "0.10.0", "0.9.1", 1, true},
		{"unstamped is below every release", Unstamped, "0.0.1", -1, true},
		{"pre-release below its release", "0.3.0-rc.1", "0.3.0", -1, true},
		{"garbage", "dev", "0.2.0", 0, false},
		{"empty", "", "0.2.0", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := Compare(tc.a, tc.b)
			if c != tc.want || ok != tc.ok {
				t.Fatalf("Compare(%q, %q) = %d %v, want %d %v", tc.a, tc.b, c, ok, tc.want, tc.ok)
			}
		})
	}
}
