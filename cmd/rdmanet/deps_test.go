package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoHeavyDeps: the shim runs on every CNI call; it links neither a
// Kubernetes client nor HTTP nor the daemon's metrics library.
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
		{name: "prometheus client", prefix: "github.com/prometheus/", why: "metrics are the daemon's (internal/cni/meta/metrics)"},
		{name: "kubernetes", prefix: "k8s.io/", why: "the shim hands calls to the daemon or rdmanet-direct"},
		{name: "net/http", prefix: "net/http", why: "the daemon protocol is framed JSON over a unix socket (internal/cni/meta/wire)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, d := range deps {
				if strings.HasPrefix(d, tt.prefix) {
					t.Errorf("the rdmanet shim links %s: %s", d, tt.why)
				}
			}
		})
	}
}
