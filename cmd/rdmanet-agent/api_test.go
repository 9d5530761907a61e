package main

// The agent's API wiring end to end against a real kube-apiserver
// (test/apiserver; skips without the binaries, fails with CI=true): an
// agent over a fixture node with --kubeconfig --dra annotates its Node,
// publishes its ResourceSlices, serves the DRA kubelet plugin (claims
// prepared over the real gRPC socket), keeps DRA-held VFs from the device
// plugin and refuses claims on VFs that kubelet's PodResources (a fake
// server on a unix socket) lists for a device-plugin pod.

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/rdmanet/rdmanet/internal/agent"
	"github.com/rdmanet/rdmanet/internal/dra"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
	"github.com/rdmanet/rdmanet/test/apiserver"
)

// TestMain stops the API server the tests share (apiserver.Shared).
func TestMain(m *testing.M) {
	code := m.Run()
	apiserver.StopShared()
	os.Exit(code)
}

// fakePodResources is kubelet's PodResources List: one pod holding one VF
// through the device plugin.
type fakePodResources struct {
	podresourcesapi.UnimplementedPodResourcesListerServer
}

func (fakePodResources) List(context.Context, *podresourcesapi.ListPodResourcesRequest) (*podresourcesapi.ListPodResourcesResponse, error) {
	return &podresourcesapi.ListPodResourcesResponse{PodResources: []*podresourcesapi.PodResources{{
		Name: "dp-trainer", Namespace: "default",
		Containers: []*podresourcesapi.ContainerResources{{Name: "main", Devices: []*podresourcesapi.ContainerDevices{
			{ResourceName: "example.com/sriov_rdma", DeviceIds: []string{"0000:41:00.3"}}}}},
	}}}, nil
}

func TestAPIServicesAPIServer(t *testing.T) {
	srv := apiserver.Shared(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin := kubernetes.NewForConfigOrDie(srv.Config())
	const node = "wired-node"
	if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "wired"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := srv.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	s, err := sysfsfixture.NewStandard(filepath.Join(dir, "sys"), sysfsfixture.StandardOptions{RoCEVFs: 2})
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "pools.json")
	if err := os.WriteFile(cfg, []byte(`{"resourceList":[{"resourcePrefix":"example.com","resourceName":"sriov_rdma","selectors":[{"pfNames":["enp65s0f0np0"],"isRdma":true}]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// unix sockets: short paths
	base, err := os.MkdirTemp("", "rwire")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(base)
	prSock := filepath.Join(base, "pr.sock")
	lis, err := net.Listen("unix", prSock)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	podresourcesapi.RegisterPodResourcesListerServer(g, fakePodResources{})
	go func() { _ = g.Serve(lis) }()
	defer g.Stop()

	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	flags := apiFlags{dra: true, kubeconfig: kubeconfig, registrarDir: filepath.Join(base, "reg"), pluginDir: filepath.Join(base, "dra"), cdiDir: filepath.Join(dir, "cdi")}
	o := agent.Options{SysfsRoot: s.Root, ConfigPaths: []string{cfg}, PluginDir: filepath.Join(base, "dp"), DevInfoDir: filepath.Join(dir, "devinfo"),
		NetnsModeFlag: "exclusive", Resync: 50 * time.Millisecond, Logger: log}
	apiSvc, err := newAPIServices(flags, node, o.SysfsRoot, o.DevInfoDir, prSock, func(err error) { t.Errorf("fatal: %v", err) }, log)
	if err != nil {
		t.Fatal(err)
	}
	apiSvc.wire(&o)
	a, err := agent.New(o)
	if err != nil {
		t.Fatal(err)
	}
	stopAPI, err := apiSvc.start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stopAPI()
	done := make(chan struct{})
	go func() { _ = a.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	eventually := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 30s", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	eventually("Node annotated exclusive", func() bool {
		n, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		return err == nil && n.Annotations[agent.AnnotationNetnsMode] == "exclusive"
	})
	eventually("ResourceSlice with both VFs", func() bool {
		l, err := admin.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		return err == nil && len(l.Items) == 1 && len(l.Items[0].Spec.Devices) == 2
	})

	claim := func(name, device string) *drapb.Claim {
		c, err := admin.ResourceV1().ResourceClaims("wired").Create(ctx, &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "nic",
				Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "rdma-exclusive.rdmanet.io", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}}}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
			{Request: "nic", Driver: dra.DriverName, Pool: node, Device: device}}}}
		if c, err = admin.ResourceV1().ResourceClaims("wired").UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return &drapb.Claim{Namespace: c.Namespace, Name: c.Name, Uid: string(c.UID)}
	}
	free, busy := claim("free-vf", "vf-0000-41-00-2"), claim("busy-vf", "vf-0000-41-00-3")
	conn, err := grpc.NewClient("unix://"+filepath.Join(flags.pluginDir, "dra.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var resp *drapb.NodePrepareResourcesResponse
	eventually("NodePrepareResources answers once the node is scanned", func() bool {
		resp, err = drapb.NewDRAPluginClient(conn).NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: []*drapb.Claim{free, busy}})
		return err == nil && resp.Claims[free.Uid] != nil && !strings.Contains(resp.Claims[free.Uid].Error, "not scanned")
	})
	if r := resp.Claims[free.Uid]; r.Error != "" || len(r.Devices) != 1 || r.Devices[0].CdiDeviceIds[0] != dra.CDIKind+"="+free.Uid+"-vf-0000-41-00-2" {
		t.Errorf("free VF: %+v", r)
	}
	if r := resp.Claims[busy.Uid]; !strings.Contains(r.GetError(), "pod default/dp-trainer holds it through the device plugin") {
		t.Errorf("VF of a device-plugin pod: %+v, want a refusal naming the pod", r)
	}
	// the device plugin now refuses the DRA-held VF
	var dpSrv = a.Server("example.com/sriov_rdma")
	if dpSrv == nil {
		t.Fatal("device plugin pool not served")
	}
	_, err = dpSrv.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"0000:41:00.2"}}}})
	if err == nil || !strings.Contains(err.Error(), "held by DRA claim wired/free-vf") {
		t.Errorf("device plugin Allocate of the DRA-held VF: %v", err)
	}
}
