package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoHeavyDeps keeps packages out of the binary whose package
// initialisation and size every CNI exec would pay for: the plugin's start is
// on each pod attachment's critical path.
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
		name   string
		prefix string
		why    string
	}{
		{name: "clientset", prefix: "k8s.io/client-go/kubernetes", why: "its scheme registers every API group at init; gc uses a REST client"},
		{name: "API types", prefix: "k8s.io/api/", why: "links and initialises generated types; gc decodes only the fields it reads"},
		{name: "discovery", prefix: "k8s.io/client-go/discovery", why: "pulls in OpenAPI models"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, d := range deps {
				if strings.HasPrefix(d, tt.prefix) {
					t.Errorf("rdmanet-ipam links %s: %s", d, tt.why)
				}
			}
		})
	}
}
