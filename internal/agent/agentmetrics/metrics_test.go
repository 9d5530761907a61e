package agentmetrics

import (
	"context"
	"errors"
	"net"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/rdmanet/rdmanet/internal/agent"
)

type fakePools []agent.PoolStat

func (f fakePools) PoolStats() []agent.PoolStat { return f }

type fakeAlloc struct {
	m   map[string]int
	err error
}

func (f fakeAlloc) Allocated(context.Context) (map[string]int, error) { return f.m, f.err }

func page(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

func TestMetrics(t *testing.T) {
	pools := fakePools{
		{Resource: "example.com/sriov_rdma", Kind: "exclusive", Advertised: true, Registered: true, Devices: 16, Healthy: 15},
		{Resource: "rdma/hca_shared", Kind: "shared", Advertised: false, Devices: 0},
	}
	tests := []struct {
		name    string
		alloc   AllocationLister
		observe func(m *Metrics)
		ready   bool
		want    []string
		wantNot []string
	}{
		{name: "pools without PodResources", ready: true, want: []string{
			`rdmanet_agent_pool_devices{kind="exclusive",node="n1",resource="example.com/sriov_rdma"} 16`,
			`rdmanet_agent_pool_devices_healthy{kind="exclusive",node="n1",resource="example.com/sriov_rdma"} 15`,
			`rdmanet_agent_pool_advertised{kind="shared",node="n1",resource="rdma/hca_shared"} 0`,
			`rdmanet_agent_pool_registered{kind="exclusive",node="n1",resource="example.com/sriov_rdma"} 1`,
			`rdmanet_agent_ready{node="n1"} 1`,
		}, wantNot: []string{"rdmanet_agent_pool_devices_allocated", "rdmanet_agent_podresources_up"}},
		{name: "allocations from kubelet", alloc: fakeAlloc{m: map[string]int{"example.com/sriov_rdma": 3, "nvidia.com/gpu": 8}}, want: []string{
			`rdmanet_agent_pool_devices_allocated{kind="exclusive",node="n1",resource="example.com/sriov_rdma"} 3`,
			`rdmanet_agent_pool_devices_allocated{kind="shared",node="n1",resource="rdma/hca_shared"} 0`,
			`rdmanet_agent_podresources_up{node="n1"} 1`,
			`rdmanet_agent_ready{node="n1"} 0`,
		}, wantNot: []string{`nvidia.com/gpu`}},
		{name: "PodResources down", alloc: fakeAlloc{err: errors.New("connection refused")}, ready: true, want: []string{
			`rdmanet_agent_podresources_up{node="n1"} 0`,
		}, wantNot: []string{"rdmanet_agent_pool_devices_allocated{"}},
		{name: "registrations and restarts", observe: func(m *Metrics) {
			m.Registered("example.com/sriov_rdma", nil)
			m.Registered("example.com/sriov_rdma", errors.New("x"))
			m.KubeletRestarted()
			m.Registered("example.com/sriov_rdma", nil)
		}, want: []string{
			`rdmanet_agent_kubelet_registrations_total{node="n1",resource="example.com/sriov_rdma",result="ok"} 2`,
			`rdmanet_agent_kubelet_registrations_total{node="n1",resource="example.com/sriov_rdma",result="error"} 1`,
			`rdmanet_agent_kubelet_restarts_total{node="n1"} 1`,
		}},
		{name: "DRA device health transitions", observe: func(m *Metrics) {
			m.DeviceHealthChanged("vf-0000-41-00-2", kubeletplugin.HealthStatusUnhealthy)
			m.DeviceHealthChanged("vf-0000-41-00-2", kubeletplugin.HealthStatusHealthy)
			m.DeviceHealthChanged("vf-0000-41-00-2", kubeletplugin.HealthStatusUnhealthy)
		}, want: []string{
			`rdmanet_agent_dra_device_health_transitions_total{device="vf-0000-41-00-2",health="Unhealthy",node="n1"} 2`,
			`rdmanet_agent_dra_device_health_transitions_total{device="vf-0000-41-00-2",health="Healthy",node="n1"} 1`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New("n1")
			ready := tt.ready
			m.Watch(pools, tt.alloc, func() bool { return ready })
			if tt.observe != nil {
				tt.observe(m)
			}
			p := page(t, m)
			for _, w := range tt.want {
				if !strings.Contains(p, w+"\n") {
					t.Errorf("metrics lack %s:\n%s", w, p)
				}
			}
			for _, w := range tt.wantNot {
				if strings.Contains(p, w) {
					t.Errorf("metrics have %s", w)
				}
			}
		})
	}
}

type podResourcesServer struct {
	podresourcesapi.UnimplementedPodResourcesListerServer
	resp *podresourcesapi.ListPodResourcesResponse
}

func (s *podResourcesServer) List(context.Context, *podresourcesapi.ListPodResourcesRequest) (*podresourcesapi.ListPodResourcesResponse, error) {
	return s.resp, nil
}

func TestPodResourcesAllocated(t *testing.T) {
	dev := func(res string, ids ...string) *podresourcesapi.ContainerDevices {
		return &podresourcesapi.ContainerDevices{ResourceName: res, DeviceIds: ids}
	}
	tests := []struct {
		name string
		pods []*podresourcesapi.PodResources
		want map[string]int
	}{
		{name: "no pods", want: map[string]int{}},
		{name: "two pods, two resources", pods: []*podresourcesapi.PodResources{
			{Namespace: "ai", Name: "a", Containers: []*podresourcesapi.ContainerResources{{Name: "c", Devices: []*podresourcesapi.ContainerDevices{dev("example.com/sriov_rdma", "0000:41:00.2"), dev("nvidia.com/gpu", "g0", "g1")}}}},
			{Namespace: "ai", Name: "b", Containers: []*podresourcesapi.ContainerResources{{Name: "c", Devices: []*podresourcesapi.ContainerDevices{dev("example.com/sriov_rdma", "0000:41:00.3")}}}},
		}, want: map[string]int{"example.com/sriov_rdma": 2, "nvidia.com/gpu": 2}},
		{name: "a device listed for two containers of one pod counts once", pods: []*podresourcesapi.PodResources{
			{Namespace: "ai", Name: "a", Containers: []*podresourcesapi.ContainerResources{
				{Name: "c1", Devices: []*podresourcesapi.ContainerDevices{dev("rdma/hca_shared", "slot-1")}},
				{Name: "c2", Devices: []*podresourcesapi.ContainerDevices{dev("rdma/hca_shared", "slot-1")}},
			}},
		}, want: map[string]int{"rdma/hca_shared": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "kubelet.sock")
			lis, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			srv := grpc.NewServer()
			podresourcesapi.RegisterPodResourcesListerServer(srv, &podResourcesServer{resp: &podresourcesapi.ListPodResourcesResponse{PodResources: tt.pods}})
			go func() { _ = srv.Serve(lis) }()
			defer srv.Stop()
			pr := &PodResources{Socket: sock}
			defer pr.Close()
			got, err := pr.Allocated(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("Allocated = %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Fatalf("Allocated = %v, want %v", got, tt.want)
				}
			}
		})
	}
	pr := &PodResources{Socket: filepath.Join(t.TempDir(), "none.sock")}
	if _, err := pr.Allocated(context.Background()); err == nil || !strings.Contains(err.Error(), "PodResources List on") {
		t.Fatalf("no kubelet: %v", err)
	}
}
