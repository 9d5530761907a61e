package deviceplugin

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// fakeGuard holds the PCI functions in held and records Allocated calls.
type fakeGuard struct {
	mu        sync.Mutex
	held      map[string]string
	allocated map[string][]string
}

func (g *fakeGuard) Holder(pci string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held[pci]
}

func (g *fakeGuard) Allocated(resource string, pcis []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.allocated[resource] = append(g.allocated[resource], pcis...)
}

// TestGuard: a device the guard says another allocator (DRA) holds is
// listed Unhealthy and refused by Allocate, naming the device and the
// holder; a shared pool's slots all are when any of its HCAs is held;
// what Allocate hands out is reported to the guard.
func TestGuard(t *testing.T) {
	const cfg = `{"resourceList":[{"resourcePrefix":"example.com","resourceName":"sriov_rdma","selectors":[{"vendors":["15b3"],"pfNames":["enp65s0f0np0"],"isRdma":true}]}],` +
		`"configList":[{"resourceName":"rdma_shared_device_eth","rdmaHcaMax":4,"selectors":{"ifNames":["ens8f0np0"]}}]}`
	tests := []struct {
		name        string
		held        map[string]string
		resource    string
		allocate    []string
		unhealthy   []string // device IDs listed Unhealthy
		refused     string   // Allocate error contains this; "" means it succeeds
		wantRecords []string // PCI functions reported to the guard
	}{
		{name: "exclusive VF held by a claim", held: map[string]string{"0000:41:00.2": "DRA claim ns/c (uid-1)"},
			resource: "example.com/sriov_rdma", allocate: []string{"0000:41:00.2"},
			unhealthy: []string{"0000:41:00.2"}, refused: "device 0000:41:00.2 is held by DRA claim ns/c (uid-1)"},
		{name: "exclusive VF free next to a held one", held: map[string]string{"0000:41:00.2": "DRA claim ns/c (uid-1)"},
			resource: "example.com/sriov_rdma", allocate: []string{"0000:41:00.3"},
			unhealthy: []string{"0000:41:00.2"}, wantRecords: []string{"0000:41:00.3"}},
		{name: "shared HCA held: every slot", held: map[string]string{"0000:81:00.0": "DRA claim ns/s (uid-2)"},
			resource: "rdma/rdma_shared_device_eth", allocate: []string{"rdma-shared-device-eth-001"},
			unhealthy: []string{"rdma-shared-device-eth-000", "rdma-shared-device-eth-001", "rdma-shared-device-eth-002", "rdma-shared-device-eth-003"},
			refused:   "device rdma-shared-device-eth-001 (HCA 0000:81:00.0) is held by DRA claim ns/s (uid-2)"},
		{name: "shared slot free", resource: "rdma/rdma_shared_device_eth", allocate: []string{"rdma-shared-device-eth-001"},
			wantRecords: []string{"0000:81:00.0"}},
	}
	_, node := discover(t, "")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pools, err := Build(node, parse(t, cfg))
			if err != nil {
				t.Fatal(err)
			}
			var pool *Pool
			for _, p := range pools {
				if p.Resource == tc.resource {
					pool = p
				}
			}
			g := &fakeGuard{held: tc.held, allocated: map[string][]string{}}
			s := NewServer(pool, ServerOptions{PluginDir: t.TempDir(), DevInfoDir: t.TempDir(), RDMACM: true, Guard: g})
			var unhealthy []string
			for _, d := range s.devs {
				if d.Health != Healthy {
					unhealthy = append(unhealthy, d.ID)
				}
			}
			if !slices.Equal(unhealthy, tc.unhealthy) {
				t.Errorf("listed Unhealthy %v, want %v", unhealthy, tc.unhealthy)
			}
			_, err = s.Allocate(context.Background(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: tc.allocate}}})
			if tc.refused != "" {
				if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), tc.refused) || !strings.Contains(err.Error(), "fix:") {
					t.Fatalf("Allocate: %v, want FailedPrecondition containing %q and a fix", err, tc.refused)
				}
				if len(g.allocated) != 0 {
					t.Errorf("a refused Allocate reported %v to the guard", g.allocated)
				}
				return
			}
			if err != nil {
				t.Fatalf("Allocate: %v", err)
			}
			if got := g.allocated[tc.resource]; !slices.Equal(got, tc.wantRecords) {
				t.Errorf("guard told of %v, want %v", got, tc.wantRecords)
			}
			// the hold lapsing: the device is listed Healthy at the next Update
			g.mu.Lock()
			g.held = nil
			g.mu.Unlock()
			s.Update(pool)
			for _, d := range s.devs {
				if d.Health != Healthy {
					t.Errorf("after release: %s listed %s", d.ID, d.Health)
				}
			}
		})
	}
}
