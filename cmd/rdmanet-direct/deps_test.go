package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoHeavyDeps: the per-call meta CNI starts on every pod attachment
// when the daemon is down; the daemon's metrics library (and its package
// initialisation) must not come with it.
func TestNoHeavyDeps(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to list dependencies: %v", err)
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	tests := []struct {
		name, prefix, why string
	}{
		{name: "prometheus client", prefix: "github.com/prometheus/", why: "the daemon's metrics live in internal/cni/meta/metrics, linked by rdmanet-daemon only"},
		{name: "daemon metrics", prefix: "github.com/rdmanet/rdmanet/internal/cni/meta/metrics", why: "daemon only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, d := range deps {
				if strings.HasPrefix(d, tt.prefix) {
					t.Errorf("rdmanet-direct links %s: %s", d, tt.why)
				}
			}
		})
	}
}
