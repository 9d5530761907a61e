package install

import (
	"testing"

	"github.com/rdmanet/rdmanet/internal/version/inspect"
)

// TestDoesOwnWork: rdmanet builds from before the thin/-direct split link
// netlink (sriov, rdma) or client-go (rdmanet-ipam) and need no -direct
// binary; the thin ones link neither (test/depcheck.ThinPlugin).
func TestDoesOwnWork(t *testing.T) {
	tests := []struct {
		name string
		deps []string
		want bool
	}{
		{name: "thin forwarder", deps: []string{"github.com/containernetworking/cni", "golang.org/x/sys"}, want: false},
		{name: "sriov or rdma before the split", deps: []string{"github.com/containernetworking/cni", "github.com/vishvananda/netlink"}, want: true},
		{name: "rdmanet-ipam before the split", deps: []string{"k8s.io/apimachinery", "k8s.io/client-go"}, want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := doesOwnWork(inspect.Binary{Deps: tc.deps}); got != tc.want {
				t.Errorf("doesOwnWork(deps %v) = %t, want %t", tc.deps, got, tc.want)
			}
		})
	}
}
